//! EIP-3009 reads for x402 payments (§16): whether an authorization is used (`authorizationState`) and the log that
//! says how (`AuthorizationUsed`: settled, with the settlement transaction; `AuthorizationCanceled`: cancelled).

use alloy::eips::BlockNumberOrTag;
use alloy::primitives::{Address, B256, Bytes, TxHash, U256};
use alloy::providers::Provider;
use alloy::rpc::client::BatchRequest;
use alloy::rpc::types::{Filter, TransactionRequest};
use alloy::sol_types::{SolCall, SolEvent};

use super::client::ChainClient;
use super::error::{ChainError, classify};
use crate::domain::erc20::IERC20;

alloy::sol! {
    /// The EIP-3009 parts the watcher reads.
    interface IEip3009 {
        function authorizationState(address authorizer, bytes32 nonce) external view returns (bool);
        event AuthorizationUsed(address indexed authorizer, bytes32 indexed nonce);
        event AuthorizationCanceled(address indexed authorizer, bytes32 indexed nonce);
    }
}

/// How far back (in blocks) the watcher looks for an authorization's log. An authorization lives at most ten
/// minutes; the window leaves room for a watcher that was stopped a while.
pub const LOG_WINDOW_BLOCKS: u64 = 20_000;

/// What §23's checks read of a payer and its payment, in one JSON-RPC batch at the latest block.
#[derive(Debug)]
pub struct PayerReads {
    /// The payer's code (`0xef0100 ‖ address` for an EIP-7702 designation).
    pub code: Bytes,
    /// `authorizationState(payer, nonce)`: the authorization was used or cancelled on chain.
    pub used: bool,
    /// The payer's balance of the token.
    pub balance: U256,
    /// The settlement's `eth_call`, exactly as the agent's wallet would send it and with its gas limit: `Err` with
    /// a refusal when it reverts (or runs out of that gas).
    pub settles: Result<(), ChainError>,
}

/// The settlement a payment's checks simulate: `calldata` sent by `from` to the token with `gas`.
#[derive(Debug, Clone)]
pub struct SettleCall {
    pub from: Address,
    pub calldata: Bytes,
    pub gas: u64,
}

/// What the token's log says became of an authorization.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuthorizationLog {
    /// `true`: `AuthorizationUsed` (the transfer happened); `false`: `AuthorizationCanceled`.
    pub used: bool,
    pub tx_hash: Option<TxHash>,
    pub block_number: Option<u64>,
}

impl ChainClient {
    /// Whether `authorizer`'s authorization `nonce` on `token` is used or cancelled.
    pub async fn authorization_state(
        &self,
        token: Address,
        authorizer: Address,
        nonce: B256,
    ) -> Result<bool, ChainError> {
        let p = self.provider();
        let data = IEip3009::authorizationStateCall { authorizer, nonce }.abi_encode();
        let request = TransactionRequest::default().to(token).input(data.into());
        let out = self.call(|| p.call(request.clone())).await?;
        IEip3009::authorizationStateCall::abi_decode_returns(&out).map_err(|_| ChainError::Unavailable {
            chain: self.info().name.to_owned(),
            reason: "the token answered authorizationState with no bool".to_owned(),
        })
    }

    /// The payer's code, the authorization's state, the payer's balance and the settlement's simulation, as one
    /// JSON-RPC batch (one round trip), under the client's timeout and retry.
    pub async fn payer_reads(
        &self,
        token: Address,
        (payer, nonce): (Address, B256),
        settle: &SettleCall,
    ) -> Result<PayerReads, ChainError> {
        let client = self.provider().client();
        let latest = BlockNumberOrTag::Latest;
        let state = TransactionRequest::default().to(token).input(
            Bytes::from(
                IEip3009::authorizationStateCall {
                    authorizer: payer,
                    nonce,
                }
                .abi_encode(),
            )
            .into(),
        );
        let balance = TransactionRequest::default()
            .to(token)
            .input(Bytes::from(IERC20::balanceOfCall { owner: payer }.abi_encode()).into());
        let settlement = TransactionRequest::default()
            .from(settle.from)
            .to(token)
            .gas_limit(settle.gas)
            .input(settle.calldata.clone().into());
        let (code, used, held, settles) = self
            .call(|| {
                let (state, balance, settlement) = (&state, &balance, &settlement);
                async move {
                    let mut batch = BatchRequest::new(client);
                    let code = batch.add_call::<_, Bytes>("eth_getCode", &(payer, latest))?;
                    let used = batch.add_call::<_, Bytes>("eth_call", &(state, latest))?;
                    let held = batch.add_call::<_, Bytes>("eth_call", &(balance, latest))?;
                    let settles = batch.add_call::<_, Bytes>("eth_call", &(settlement, latest))?;
                    batch.send().await?;
                    Ok((code.await, used.await, held.await, settles.await))
                }
            })
            .await?;
        let name = self.info().name;
        let failed = |e: &alloy::transports::TransportError| classify(name, e).error;
        let unreadable = |what: &str| ChainError::Unavailable {
            chain: name.to_owned(),
            reason: format!("the token answered {what} with no value"),
        };
        let used = used.map_err(|e| failed(&e))?;
        let held = held.map_err(|e| failed(&e))?;
        Ok(PayerReads {
            code: code.map_err(|e| failed(&e))?,
            used: IEip3009::authorizationStateCall::abi_decode_returns(&used)
                .map_err(|_| unreadable("authorizationState"))?,
            balance: IERC20::balanceOfCall::abi_decode_returns(&held).map_err(|_| unreadable("balanceOf"))?,
            settles: settles.map(|_| ()).map_err(|e| failed(&e)),
        })
    }

    /// Whether the settlement would succeed now, as the agent's wallet would send it with its gas limit (an
    /// `eth_call`): `Err` with a refusal when it reverts.
    pub async fn settles(&self, token: Address, settle: &SettleCall) -> Result<(), ChainError> {
        let p = self.provider();
        let request = TransactionRequest::default()
            .from(settle.from)
            .to(token)
            .gas_limit(settle.gas)
            .input(settle.calldata.clone().into());
        self.call(|| p.call(request.clone()).block(alloy::eips::BlockId::latest()))
            .await
            .map(|_| ())
    }

    /// The `AuthorizationUsed` or `AuthorizationCanceled` log of the authorization in the last `LOG_WINDOW_BLOCKS`
    /// blocks up to `latest`, if any.
    pub async fn authorization_log(
        &self,
        token: Address,
        authorizer: Address,
        nonce: B256,
        latest: u64,
    ) -> Result<Option<AuthorizationLog>, ChainError> {
        let p = self.provider();
        let filter = Filter::new()
            .address(token)
            .event_signature(vec![
                IEip3009::AuthorizationUsed::SIGNATURE_HASH,
                IEip3009::AuthorizationCanceled::SIGNATURE_HASH,
            ])
            .topic1(authorizer.into_word())
            .topic2(nonce)
            .from_block(BlockNumberOrTag::Number(latest.saturating_sub(LOG_WINDOW_BLOCKS)))
            .to_block(BlockNumberOrTag::Number(latest));
        let logs = self.call(|| p.get_logs(&filter)).await?;
        Ok(logs.into_iter().next().map(|log| AuthorizationLog {
            used: log.topic0() == Some(&IEip3009::AuthorizationUsed::SIGNATURE_HASH),
            tx_hash: log.transaction_hash,
            block_number: log.block_number,
        }))
    }
}
