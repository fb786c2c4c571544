//! §23's reads of a payer and its payment in one JSON-RPC batch (`payer_reads`): the payer's code, the authorization's
//! state, the payer's token balance and the settlement's simulation.

use alloy::eips::BlockNumberOrTag;
use alloy::primitives::{Address, B256, Bytes};
use alloy::providers::Provider;
use alloy::rpc::client::BatchRequest;
use alloy::rpc::types::TransactionRequest;
use alloy::sol_types::SolCall;

use super::ChainClient;
use crate::chain::authorizations::{IEip3009, PayerReads, SettleCall};
use crate::chain::error::{ChainError, classify};
use crate::domain::erc20::IERC20;

impl ChainClient {
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
        let name = self.info.name;
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
}
