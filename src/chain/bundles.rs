//! The reads and estimates sponsored gas needs (§22) beyond a wallet's: the latest block's time (a paymaster
//! approval lasts at most 600 s past it), an operation's execution estimate, a `handleOps` bundle run once at the gas
//! limit it is signed with (with the EIP-7702 authorizations it carries), and the EntryPoint's `UserOperationEvent`
//! logs of given operations.

use alloy::eips::eip7702::SignedAuthorization;
use alloy::primitives::{Address, B256, Bytes, Log, U256};
use alloy::providers::Provider;
use alloy::rpc::types::{Filter, TransactionRequest};

use super::client::ChainClient;
use super::error::ChainError;
use super::node::Node;

/// Senders whose code and `getNonce` are read in one JSON-RPC batch at most (two requests each).
const SENDERS_PER_BATCH: usize = 50;

/// A `UserOperationEvent` log with where it appeared.
#[derive(Debug, Clone)]
pub struct EventLog {
    pub log: Log,
    pub tx_hash: B256,
    pub block_number: u64,
}

impl ChainClient {
    /// The latest block's number and timestamp (unix seconds).
    pub async fn latest_block(&self) -> Result<(u64, u64), ChainError> {
        let p = self.provider();
        let block = self
            .call(|| p.get_block_by_number(alloy::eips::BlockNumberOrTag::Latest))
            .await?
            .ok_or_else(|| ChainError::Unavailable {
                chain: self.name().to_owned(),
                reason: "the node has no latest block".into(),
            })?;
        Ok((block.header.number, block.header.timestamp))
    }

    /// The native balance of `address` at block `number`, in wei.
    pub async fn balance_at(&self, address: Address, number: u64) -> Result<U256, ChainError> {
        let p = self.provider();
        self.call(|| p.get_balance(address).number(number)).await
    }

    /// `eth_estimateGas` of a transaction from `from` to `to` carrying `data`, `value` and `authorizations` (a type-4
    /// bundle's), at the latest state: the whole bundle simulated as the chain would run it. A revert is a refusal.
    pub async fn estimate_bundle(
        &self,
        from: Address,
        to: Address,
        data: Bytes,
        value: U256,
        authorizations: &[SignedAuthorization],
    ) -> Result<u64, ChainError> {
        let p = self.provider();
        let mut request = TransactionRequest::default()
            .from(from)
            .to(to)
            .value(value)
            .input(data.into());
        if !authorizations.is_empty() {
            request.authorization_list = Some(authorizations.to_vec());
        }
        self.call(|| p.estimate_gas(request.clone())).await
    }

    /// One `eth_call` of a bundle from `from` to `to` carrying `data` and `authorizations` (a type-4 bundle's) with
    /// the gas limit `gas_limit` it is signed with, at the latest block or at block `at`: the whole bundle run once
    /// as the chain would run it. `Ok(Err(data))` when it reverts with `data` (the EntryPoint's `FailedOp` names the
    /// operation it refused), `Err` when the node failed or refused otherwise (running out of gas among them).
    pub async fn simulate_bundle(
        &self,
        (from, to, data): (Address, Address, Bytes),
        gas_limit: u64,
        authorizations: &[SignedAuthorization],
        at: Option<u64>,
    ) -> Result<Result<(), Bytes>, ChainError> {
        let p = self.provider();
        let mut request = TransactionRequest::default()
            .from(from)
            .to(to)
            .gas_limit(gas_limit)
            .input(data.into());
        if !authorizations.is_empty() {
            request.authorization_list = Some(authorizations.to_vec());
        }
        let block = at.map_or(alloy::eips::BlockId::latest(), alloy::eips::BlockId::number);
        self.call(|| async {
            match p.call(request.clone()).block(block).await {
                Ok(_) => Ok(Ok(())),
                Err(e) => match e.as_error_resp().and_then(|payload| payload.as_revert_data()) {
                    Some(revert) => Ok(Err(revert)),
                    None => Err(e),
                },
            }
        })
        .await
    }

    /// Each of `senders`' code and next nonce at key 0 of `entry_point`'s sequence (`getNonce`), as block `number`
    /// shows them, in one JSON-RPC batch (a request for each `SENDERS_PER_BATCH`): the nonce `None` for an answer
    /// that is no number.
    pub async fn senders_at(
        &self,
        entry_point: Address,
        senders: &[Address],
        number: u64,
    ) -> Result<Vec<(Bytes, Option<U256>)>, ChainError> {
        let client = self.provider().client();
        let block = alloy::eips::BlockNumberOrTag::Number(number);
        let mut read = Vec::with_capacity(senders.len());
        for chunk in senders.chunks(SENDERS_PER_BATCH) {
            let requests: Vec<(Address, TransactionRequest)> = chunk
                .iter()
                .map(|sender| {
                    let data = super::userop::get_nonce_call(*sender, Default::default());
                    (
                        *sender,
                        TransactionRequest::default().to(entry_point).input(data.into()),
                    )
                })
                .collect();
            let answers = self
                .call(|| {
                    let requests = &requests;
                    async move {
                        let mut batch = alloy::rpc::client::BatchRequest::new(client);
                        let mut waiters = Vec::with_capacity(requests.len());
                        for (sender, request) in requests {
                            let code = batch.add_call::<_, Bytes>("eth_getCode", &(sender, block))?;
                            let nonce = batch.add_call::<_, Bytes>("eth_call", &(request, block))?;
                            waiters.push(async move { (code.await, nonce.await) });
                        }
                        batch.send().await?;
                        Ok(futures::future::join_all(waiters).await)
                    }
                })
                .await?;
            let failed = |e: alloy::transports::TransportError| super::error::classify(self.info().name, &e).error;
            for (code, nonce) in answers {
                read.push((
                    code.map_err(failed)?,
                    super::userop::uint_answer(&nonce.map_err(failed)?),
                ));
            }
        }
        Ok(read)
    }

    /// The `UserOperationEvent` logs `entry_point` emitted from block `from_block` on for the operations `hashes`
    /// (their `userOpHash` is the event's first indexed topic), in whichever transaction they appeared.
    pub async fn user_operation_logs(
        &self,
        entry_point: Address,
        topic0: B256,
        hashes: &[B256],
        from_block: u64,
    ) -> Result<Vec<EventLog>, ChainError> {
        if hashes.is_empty() {
            return Ok(Vec::new());
        }
        let p = self.provider();
        let filter = Filter::new()
            .address(entry_point)
            .event_signature(topic0)
            .topic1(hashes.to_vec())
            .from_block(from_block);
        let logs = self.call(|| p.get_logs(&filter)).await?;
        Ok(logs
            .into_iter()
            .filter_map(|log| {
                Some(EventLog {
                    tx_hash: log.transaction_hash?,
                    block_number: log.block_number?,
                    log: log.inner,
                })
            })
            .collect())
    }

    /// Every log `address` emitted with one of `topics0` as its event, from the first block on.
    pub async fn logs_of(&self, address: Address, topics0: Vec<B256>) -> Result<Vec<Log>, ChainError> {
        let p = self.provider();
        let filter = Filter::new().address(address).event_signature(topics0).from_block(0);
        let logs = self.call(|| p.get_logs(&filter)).await?;
        Ok(logs.into_iter().map(|log| log.inner).collect())
    }
}
