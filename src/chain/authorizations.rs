//! EIP-3009 reads for x402 payments (§16): whether an authorization is used (`authorizationState`) and the log that
//! says how (`AuthorizationUsed`: settled, with the settlement transaction; `AuthorizationCanceled`: cancelled).

use alloy::eips::BlockNumberOrTag;
use alloy::primitives::{Address, B256, TxHash};
use alloy::providers::Provider;
use alloy::rpc::types::{Filter, TransactionRequest};
use alloy::sol_types::{SolCall, SolEvent};

use super::client::ChainClient;
use super::error::ChainError;

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
