//! §22's reads of a sponsored operation's account in one JSON-RPC batch (`account_reads`): its code, its next
//! EntryPoint nonce and, when the operation moves the native coin, its balance.

use alloy::eips::BlockNumberOrTag;
use alloy::primitives::aliases::U192;
use alloy::primitives::{Address, Bytes, U256};
use alloy::providers::Provider;
use alloy::rpc::client::BatchRequest;
use alloy::rpc::types::TransactionRequest;

use super::ChainClient;
use crate::chain::error::{ChainError, classify};
use crate::chain::userop;

/// What the chain shows of an account at the latest block.
pub struct AccountReads {
    pub code: Bytes,
    /// The next nonce of its EntryPoint sequence at key 0.
    pub entry_point_nonce: U256,
    /// Its native balance, when asked for.
    pub balance: Option<U256>,
}

impl ChainClient {
    /// `account`'s code, its next nonce at `entry_point` (key 0) and, with `balance`, its native balance, all at the
    /// latest block, as one JSON-RPC batch (one round trip), under the client's timeout and retry.
    pub async fn account_reads(
        &self,
        account: Address,
        entry_point: Address,
        balance: bool,
    ) -> Result<AccountReads, ChainError> {
        let client = self.provider().client();
        let latest = BlockNumberOrTag::Latest;
        let nonce = TransactionRequest::default()
            .to(entry_point)
            .input(userop::get_nonce_call(account, U192::ZERO).into());
        let (code, next, held) = self
            .call(|| {
                let nonce = &nonce;
                async move {
                    let mut batch = BatchRequest::new(client);
                    let code = batch.add_call::<_, Bytes>("eth_getCode", &(account, latest))?;
                    let next = batch.add_call::<_, Bytes>("eth_call", &(nonce, latest))?;
                    let held = match balance {
                        true => Some(batch.add_call::<_, U256>("eth_getBalance", &(account, latest))?),
                        false => None,
                    };
                    batch.send().await?;
                    let held = match held {
                        Some(held) => Some(held.await),
                        None => None,
                    };
                    Ok((code.await, next.await, held))
                }
            })
            .await?;
        let name = self.info.name;
        let failed = |e: alloy::transports::TransportError| classify(name, &e).error;
        let next = next.map_err(failed)?;
        Ok(AccountReads {
            code: code.map_err(failed)?,
            entry_point_nonce: userop::uint_answer(&next).ok_or_else(|| ChainError::Unavailable {
                chain: name.to_owned(),
                reason: "the EntryPoint answered getNonce with no number".to_owned(),
            })?,
            balance: held.transpose().map_err(failed)?,
        })
    }
}
