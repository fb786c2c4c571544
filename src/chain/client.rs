//! One chain's JSON-RPC client: per-call timeout, one retry on transient failures, and a lazily
//! cached `eth_chainId` check that keeps a node of the wrong chain from ever being used; and `impl Node for
//! ChainClient`, the node's reads, quotes, simulation and broadcast over JSON-RPC, here beside the caches and the
//! `call` they use. The chain-id check (`chain_id`), the broadcast queue (`broadcasts`), its ERC-20 reads (`tokens`),
//! the L1 data fee's oracle of OP-stack chains (`l1_fee`), a payer's reads for §23 (`payer`) and the simulation's
//! `debug_traceCall` fallback (`trace`) are its child modules.

use std::collections::HashMap;
use std::future::IntoFuture;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use alloy::eips::{BlockId, BlockNumberOrTag};
use alloy::primitives::{Address, B256, Bytes, TxHash, U256};
use alloy::providers::{Provider, RootProvider};
use alloy::rpc::client::{BatchRequest, RpcClient};
use alloy::rpc::types::{Filter, TransactionReceipt, TransactionRequest};
use alloy::sol_types::{SolCall, SolEvent};
use alloy::transports::TransportResult;
use alloy::transports::http::{Http, reqwest};
use async_trait::async_trait;
use serde_json::{Value, json};

use super::authorizations::{AuthorizationLog, IEip3009, LOG_WINDOW_BLOCKS};
use super::error::{ChainError, classify};
use super::fees::{FALLBACK_PRIORITY_FEE, Fees};
use super::node::Node;
use super::simulate::{
    SIMULATED_BLOCK_AHEAD_SECS, SimBlock, SimCall, SimLog, SimMethod, Simulated, SimulationError, call_json,
    is_unsupported, refuses_funds,
};
use super::tx::{ReceiptInfo, TxInfo};
use crate::domain::asset::Asset;
use crate::domain::chain::ChainInfo;
use crate::domain::clock::{Clock, SystemClock};
use l1_fee::{GAS_PRICE_ORACLE, getL1FeeCall, is_op_stack};

mod account;
pub use account::AccountReads;
mod broadcasts;
mod chain_id;
pub mod l1_fee;
mod payer;
pub mod tokens;
mod trace;

/// The per-call timeout when none is configured.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(5);

/// Pause before the single retry: long enough for a brief hiccup, short against the timeout.
const RETRY_DELAY: Duration = Duration::from_millis(100);

/// Receipts asked in one JSON-RPC batch at most: the batch limit of geth and of the large RPC providers.
pub const RECEIPTS_PER_BATCH: usize = 1_000;

struct Inner {
    provider: RootProvider,
    timeout: Duration,
    id_state: Mutex<chain_id::IdState>,
    /// Serialises chain-id checks so concurrent first calls query the node once.
    id_check: tokio::sync::Mutex<()>,
    /// RPC attempts and failed attempts, for `/metrics`.
    calls: std::sync::atomic::AtomicU64,
    errors: std::sync::atomic::AtomicU64,
    /// The last fee reading and when it was taken, for callers that accept a slightly older one.
    recent_fees: Mutex<Option<(Instant, Fees)>>,
    /// What each token contract reported as its decimals (`tokens`).
    decimals_seen: tokens::DecimalsSeen,
    /// Addresses found without code, and when (`transfer_gas`).
    no_code: Mutex<HashMap<Address, Instant>>,
    /// The last L1 fee estimate, its unsigned encoding and when it was read (`recent_l1_fee`).
    recent_l1_fee: Mutex<Option<(Instant, Vec<u8>, U256)>>,
    /// Broadcasts waiting for the one in flight (`send_raw`).
    broadcasts: Mutex<broadcasts::Broadcasts>,
    /// The callers waiting for each address's read in flight (`mined_nonce_then_balance`).
    funds_reads: Mutex<HashMap<Address, Vec<FundsAnswer>>>,
}

type FundsAnswer = tokio::sync::oneshot::Sender<Result<(u64, U256), ChainError>>;

/// Runs its cleanup when dropped before it is disarmed: what a task in flight stands for in shared state is cleared
/// however the task ends (`mined_nonce_then_balance`, `broadcast_batches`).
struct OnAbandon<F: FnOnce()>(Option<F>);

impl<F: FnOnce()> OnAbandon<F> {
    fn new(cleanup: F) -> Self {
        OnAbandon(Some(cleanup))
    }

    /// The task ended as it should: nothing to clear.
    fn disarm(mut self) {
        self.0 = None;
    }
}

impl<F: FnOnce()> Drop for OnAbandon<F> {
    fn drop(&mut self) {
        if let Some(cleanup) = self.0.take() {
            cleanup();
        }
    }
}

/// How long an address found without code is taken to have none: a native transfer to it then costs 21,000 gas
/// without asking the node. Code can appear at an address later (a contract deployed there, or an EIP-7702
/// delegation, whose code is `0xef0100 || address`); a transfer signed with 21,000 gas to such an address reverts
/// (nothing moves, its fee is paid), so the answer is trusted only briefly.
pub const NO_CODE_TTL: Duration = Duration::from_secs(10);

/// Whether `to` is one of the lowest 65,536 addresses, where chains put their precompiles (0x01-0x11 on Ethereum,
/// RIP-7212's P-256 verifier at 0x100 on some L2s) and system contracts: they have no code, yet a call to them runs
/// and costs more than 21,000 gas.
fn is_reserved_range(to: Address) -> bool {
    to.as_slice()[..18].iter().all(|b| *b == 0)
}

/// How many addresses without code are remembered; past it all are forgotten (and asked about again).
const NO_CODE_ENTRIES: usize = 10_000;

/// A client for one configured chain. Cheap to clone (the connection state is shared).
#[derive(Clone)]
pub struct ChainClient {
    info: &'static ChainInfo,
    inner: Arc<Inner>,
    confirmations: u64,
    /// Its node is on this machine (a loopback URL, as alloy's transport judges it): a development node whose
    /// transactions no public explorer knows.
    local: bool,
    /// What the ages of its caches and rechecks are read on (the system's clock outside tests).
    clock: Arc<dyn Clock>,
}

impl std::fmt::Debug for ChainClient {
    // Hand-written: the alloy transport's own Debug prints the URL, which may hold an API key.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ChainClient")
            .field("chain", &self.info.name)
            .field("timeout", &self.inner.timeout)
            .field("confirmations", &self.confirmations)
            .finish_non_exhaustive()
    }
}

impl ChainClient {
    /// A client for `info` at `url`, sending through `http` (share one `reqwest::Client` between
    /// all chains so they share its connection pool). No network traffic happens here.
    pub fn new(info: &'static ChainInfo, url: reqwest::Url, http: reqwest::Client, timeout: Duration) -> Self {
        let transport = Http::with_client(http, url);
        let is_local = transport.guess_local();
        let provider = RootProvider::new(RpcClient::new(transport, is_local));
        ChainClient {
            info,
            inner: Arc::new(Inner {
                provider,
                timeout,
                id_state: Mutex::new(chain_id::IdState::Unchecked),
                id_check: tokio::sync::Mutex::new(()),
                calls: Default::default(),
                errors: Default::default(),
                recent_fees: Mutex::new(None),
                decimals_seen: Default::default(),
                no_code: Mutex::new(HashMap::new()),
                recent_l1_fee: Mutex::new(None),
                broadcasts: Mutex::default(),
                funds_reads: Mutex::default(),
            }),
            confirmations: 1,
            local: is_local,
            clock: Arc::new(SystemClock),
        }
    }

    /// The same client reading ages on `clock` (a test's, which it can move ahead).
    pub fn with_clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.clock = clock;
        self
    }

    /// How long ago `at` was, on the client's clock.
    fn age(&self, at: Instant) -> Duration {
        self.clock.instant().saturating_duration_since(at)
    }

    /// The client's clock.
    pub(super) fn clock(&self) -> &dyn Clock {
        self.clock.as_ref()
    }

    /// Whether the node is on this machine (a development node, such as the demo's anvil).
    pub fn is_local_node(&self) -> bool {
        self.local
    }

    /// RPC attempts made and attempts that failed, since start.
    pub fn rpc_counts(&self) -> (u64, u64) {
        use std::sync::atomic::Ordering::Relaxed;
        (self.inner.calls.load(Relaxed), self.inner.errors.load(Relaxed))
    }

    pub(crate) fn set_confirmations(&mut self, confirmations: u64) {
        self.confirmations = confirmations.max(1);
    }

    /// Checks in the background that the node serves this chain, logging the outcome. Never
    /// blocks: a node that is down must not delay the service's start. Outside a tokio runtime
    /// it does nothing (the first call checks instead).
    pub fn verify_at_start(&self) {
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let client = self.clone();
        runtime.spawn(async move {
            match client.chain_id_checked().await {
                Ok(id) => tracing::info!(chain = client.name(), chain_id = id, "chain node verified"),
                Err(e) => tracing::warn!(chain = client.name(), code = e.code(), "chain node not usable yet: {e}"),
            }
        });
    }

    /// The chain id, verified against the registry (cached after the first success).
    pub async fn chain_id_checked(&self) -> Result<u64, ChainError> {
        self.ensure_chain_id().await?;
        Ok(self.info.chain_id)
    }

    /// The receipt of an included transaction, or `None` while it is pending or unknown. Read as JSON first, so
    /// that an OP-stack node's `l1Fee` (which the typed receipt drops) is kept.
    pub async fn receipt(&self, hash: TxHash) -> Result<Option<ReceiptInfo>, ChainError> {
        let p = &self.inner.provider;
        let raw: Option<serde_json::Value> = self
            .call(|| async move { p.raw_request("eth_getTransactionReceipt".into(), (hash,)).await })
            .await?;
        self.receipt_from(raw)
    }

    /// A receipt as the node sent it, as JSON (`null` while pending or unknown).
    fn receipt_from(&self, raw: Option<serde_json::Value>) -> Result<Option<ReceiptInfo>, ChainError> {
        let Some(raw) = raw.filter(|r| !r.is_null()) else {
            return Ok(None);
        };
        let l1_fee = l1_fee::from_receipt(&raw);
        let receipt: TransactionReceipt = serde_json::from_value(raw).map_err(|_| ChainError::Unavailable {
            chain: self.info.name.to_owned(),
            reason: "the node returned a malformed receipt".to_owned(),
        })?;
        Ok(Some(ReceiptInfo {
            l1_fee,
            ..ReceiptInfo::from_rpc(&receipt)
        }))
    }

    /// `eth_estimateGas` at the latest block, where balances are read. A node's default may be its pending state,
    /// where the wallet's own transfers on their way have already moved their amounts: those are the reservation's
    /// to count (it holds them), not the estimate's to refuse.
    pub(super) async fn estimate_gas(&self, request: TransactionRequest) -> Result<u64, ChainError> {
        let p = &self.inner.provider;
        self.call(|| p.estimate_gas(request.clone()).block(BlockId::latest()))
            .await
    }

    /// Whether `to` was found without code less than `NO_CODE_TTL` ago.
    fn known_without_code(&self, to: Address) -> bool {
        let seen = self.inner.no_code.lock().unwrap_or_else(PoisonError::into_inner);
        seen.get(&to).is_some_and(|at| self.age(*at) < NO_CODE_TTL)
    }

    /// How many transactions of `address` block `number` includes.
    pub async fn mined_nonce_at(&self, address: Address, number: u64) -> Result<u64, ChainError> {
        let p = &self.inner.provider;
        self.call(|| p.get_transaction_count(address).number(number)).await
    }

    /// What a caller sees whose shared read or grouped broadcast (`what`) ended without answering it.
    fn unanswered(&self, what: &str) -> ChainError {
        ChainError::Unavailable {
            chain: self.info.name.to_owned(),
            reason: format!("the {what} ended without an answer"),
        }
    }

    /// The underlying provider, for the chain layer's other modules (their calls still go through `call`).
    pub(super) fn provider(&self) -> &RootProvider {
        &self.inner.provider
    }

    fn decimals_seen(&self) -> &tokens::DecimalsSeen {
        &self.inner.decimals_seen
    }

    /// Runs one RPC call after the chain-id check, with the timeout and one retry.
    pub(super) async fn call<T, F, Fut>(&self, request: F) -> Result<T, ChainError>
    where
        F: Fn() -> Fut,
        Fut: IntoFuture<Output = TransportResult<T>>,
    {
        self.ensure_chain_id().await?;
        let result = self.attempt_twice(request).await;
        if let Err(e) = &result
            && e.is_transport()
        {
            // The node went away: whatever answers when it is back is checked again first.
            let mut state = self.inner.id_state.lock().unwrap_or_else(PoisonError::into_inner);
            if matches!(*state, chain_id::IdState::Verified) {
                *state = chain_id::IdState::Unchecked;
            }
        }
        result
    }

    async fn attempt_twice<T, F, Fut>(&self, request: F) -> Result<T, ChainError>
    where
        F: Fn() -> Fut,
        Fut: IntoFuture<Output = TransportResult<T>>,
    {
        let mut retried = false;
        loop {
            self.inner.calls.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            let failure = match tokio::time::timeout(self.inner.timeout, request().into_future()).await {
                Ok(Ok(value)) => return Ok(value),
                Ok(Err(e)) => classify(self.info.name, &e),
                Err(_elapsed) => super::error::Failure {
                    error: ChainError::Timeout {
                        chain: self.info.name.to_owned(),
                    },
                    transient: true,
                },
            };
            self.inner.errors.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            if !failure.transient || retried {
                return Err(failure.error);
            }
            tracing::debug!(
                chain = self.info.name,
                code = failure.error.code(),
                "retrying chain call"
            );
            retried = true;
            tokio::time::sleep(RETRY_DELAY).await;
        }
    }
}

/// The node over JSON-RPC: each read bounded by the client's timeout and retry (`call`) after the chain-id check.
#[async_trait]
impl Node for ChainClient {
    /// The registry entry of this chain.
    fn info(&self) -> &'static ChainInfo {
        self.info
    }

    /// Blocks on top of the including block (counting it) before a transaction counts as confirmed.
    fn confirmations(&self) -> u64 {
        self.confirmations
    }

    /// The latest block number.
    async fn block_number(&self) -> Result<u64, ChainError> {
        let p = &self.inner.provider;
        self.call(|| p.get_block_number()).await
    }

    /// The native balance of `address` at the latest block, in wei.
    async fn balance(&self, address: Address) -> Result<U256, ChainError> {
        let p = &self.inner.provider;
        self.call(|| p.get_balance(address)).await
    }

    /// The balance of `owner` in one token, its decimals checked.
    async fn token_balance(&self, owner: Address, token: &Asset) -> Result<U256, ChainError> {
        let mut balances = self.token_balances(owner, std::slice::from_ref(token)).await?;
        balances.pop().unwrap_or_else(|| Err(self.not_a_token(token)))
    }

    /// The next nonce of `address`, counting its transactions still in the node's mempool.
    async fn pending_nonce(&self, address: Address) -> Result<u64, ChainError> {
        let p = &self.inner.provider;
        self.call(|| p.get_transaction_count(address).pending()).await
    }

    /// How many transactions of `address` are mined: every nonce below it is used for good.
    async fn mined_nonce(&self, address: Address) -> Result<u64, ChainError> {
        let p = &self.inner.provider;
        self.call(|| p.get_transaction_count(address).latest()).await
    }

    /// How many transactions of `address` are mined, then its native balance, read in that order: every transaction
    /// below that nonce is in the balance. Callers asking for one address while its read is in flight share that
    /// read (one request each for many sends of one wallet): any such pair is a snapshot the reservation may judge
    /// by, as a transaction mined between the two reads is in the balance and still at or above the nonce.
    async fn mined_nonce_then_balance(&self, address: Address) -> Result<(u64, U256), ChainError> {
        let (answer, answered) = tokio::sync::oneshot::channel();
        let lead = {
            let mut reads = self.inner.funds_reads.lock().unwrap_or_else(PoisonError::into_inner);
            match reads.get_mut(&address) {
                Some(waiting) => {
                    waiting.push(answer);
                    false
                }
                None => {
                    reads.insert(address, vec![answer]);
                    true
                }
            }
        };
        if lead {
            // In a task of its own: a caller that goes away does not strand the others waiting for its read.
            let client = self.clone();
            tokio::spawn(async move {
                // Ended before it answered (a panic, or its runtime stopped): the callers waiting see no answer, and
                // the next read of the address is a new one rather than one that waits for ever.
                let abandoned = OnAbandon::new(|| {
                    client
                        .inner
                        .funds_reads
                        .lock()
                        .unwrap_or_else(PoisonError::into_inner)
                        .remove(&address);
                });
                let read = async {
                    let mined = client.mined_nonce(address).await?;
                    Ok((mined, client.balance(address).await?))
                }
                .await;
                abandoned.disarm();
                let waiting = client
                    .inner
                    .funds_reads
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .remove(&address)
                    .unwrap_or_default();
                for answer in waiting {
                    let _ = answer.send(read.clone());
                }
            });
        }
        answered.await.unwrap_or_else(|_| Err(self.unanswered("read")))
    }

    /// Current fees: the latest block's base fee, the node's suggested tip and its gas price.
    async fn fees(&self) -> Result<Fees, ChainError> {
        let p = &self.inner.provider;
        let (block, tip, gas_price) = tokio::join!(
            self.call(|| p.get_block_by_number(BlockNumberOrTag::Latest)),
            self.call(|| p.get_max_priority_fee_per_gas()),
            self.call(|| p.get_gas_price()),
        );
        let base_fee = block?.and_then(|b| b.header.base_fee_per_gas).map(u128::from);
        let tip = match tip {
            Ok(tip) => tip,
            // A node without `eth_maxPriorityFeePerGas` answers with a JSON-RPC error.
            Err(ChainError::Refused { .. }) => FALLBACK_PRIORITY_FEE,
            Err(e) => return Err(e),
        };
        Ok(Fees::from_parts(base_fee, tip, gas_price?))
    }

    /// Fees no older than `max_age`, asking the node only when the last reading is older. Transfers use it: their fee
    /// cap (`2 * base + tip`) absorbs the base-fee moves of a few blocks.
    async fn recent_fees(&self, max_age: Duration) -> Result<Fees, ChainError> {
        let cached = *self.inner.recent_fees.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some((at, fees)) = cached
            && self.age(at) <= max_age
        {
            return Ok(fees);
        }
        let fees = self.fees().await?;
        *self.inner.recent_fees.lock().unwrap_or_else(PoisonError::into_inner) = Some((self.clock.instant(), fees));
        Ok(fees)
    }

    /// Gas for a native transfer of `value` from `from` to `to`: 21,000 when `to` has no code (a plain account, not
    /// a contract nor an EIP-7702-delegated one), without an estimate; else the node's estimate. The code check is
    /// remembered for `NO_CODE_TTL`, so a sender paying the same recipients asks nothing of the node before signing.
    async fn transfer_gas(&self, from: Address, to: Address, value: U256) -> Result<u64, ChainError> {
        if is_reserved_range(to) {
            // Precompiles and system contracts have no code yet run when called: a transfer to one is estimated.
            return self.estimate_transfer_gas(from, to, value).await;
        }
        if self.known_without_code(to) {
            return Ok(super::fees::TRANSFER_GAS);
        }
        let p = &self.inner.provider;
        let code = self.call(|| p.get_code_at(to)).await?;
        if !code.is_empty() {
            return self.estimate_transfer_gas(from, to, value).await;
        }
        let mut seen = self.inner.no_code.lock().unwrap_or_else(PoisonError::into_inner);
        if seen.len() >= NO_CODE_ENTRIES {
            seen.clear();
        }
        seen.insert(to, self.clock.instant());
        Ok(super::fees::TRANSFER_GAS)
    }

    /// Gas for sending `value` wei from `from` to `to` with no data (`eth_estimateGas`). The node
    /// refuses (`ChainError::Refused`, e.g. insufficient funds) when `from` cannot pay `value`.
    async fn estimate_transfer_gas(&self, from: Address, to: Address, value: U256) -> Result<u64, ChainError> {
        self.estimate_gas(TransactionRequest::default().from(from).to(to).value(value))
            .await
    }

    /// Gas for a call from `from` to `to` with `data` and no value (`eth_estimateGas`, at the latest block); a call
    /// that would revert is refused by the node.
    async fn estimate_call_gas(&self, from: Address, to: Address, data: Bytes) -> Result<u64, ChainError> {
        self.estimate_gas(TransactionRequest::default().from(from).to(to).input(data.into()))
            .await
    }

    /// An `eth_call` at the latest block with `from` and `gas` set as the transaction would carry them (a node
    /// counts a call that runs out of that gas as a revert).
    async fn call_as(&self, from: Address, to: Address, data: Bytes, gas: u64) -> Result<(), ChainError> {
        let p = self.provider();
        let request = TransactionRequest::default()
            .from(from)
            .to(to)
            .gas_limit(gas)
            .input(data.into());
        self.call(|| p.call(request.clone()).block(BlockId::latest()))
            .await
            .map(|_| ())
    }

    /// The L1 data fee the chain would charge now for the transaction whose unsigned encoding is `unsigned`
    /// (`0x02 ‖ rlp(fields)`); zero on chains without one. A node with no oracle at the predeploy's address (a local
    /// development node) answers no data: zero too.
    async fn l1_fee(&self, unsigned: &[u8]) -> Result<U256, ChainError> {
        if !is_op_stack(self.info) {
            return Ok(U256::ZERO);
        }
        let data = getL1FeeCall {
            _data: Bytes::copy_from_slice(unsigned),
        }
        .abi_encode();
        let request = TransactionRequest::default()
            .to(GAS_PRICE_ORACLE)
            .input(Bytes::from(data).into());
        let p = self.provider();
        let answer = self.call(|| p.call(request.clone())).await?;
        if answer.is_empty() {
            return Ok(U256::ZERO);
        }
        getL1FeeCall::abi_decode_returns(&answer).map_err(|_| ChainError::Unavailable {
            chain: self.info.name.to_owned(),
            reason: "the gas price oracle returned a malformed answer".to_owned(),
        })
    }

    /// The L1 fee of `unsigned` (see `l1_fee`), reusing the last estimate when it was for the same encoding and is no
    /// older than `max_age` (the L1 base fee it follows moves once per L1 block, every 12 s).
    async fn recent_l1_fee(&self, unsigned: &[u8], max_age: Duration) -> Result<U256, ChainError> {
        if !l1_fee::is_op_stack(self.info) {
            return Ok(U256::ZERO);
        }
        {
            let cached = self.inner.recent_l1_fee.lock().unwrap_or_else(PoisonError::into_inner);
            if let Some((at, probe, fee)) = cached.as_ref()
                && self.age(*at) <= max_age
                && probe.as_slice() == unsigned
            {
                return Ok(*fee);
            }
        }
        let fee = self.l1_fee(unsigned).await?;
        *self.inner.recent_l1_fee.lock().unwrap_or_else(PoisonError::into_inner) =
            Some((self.clock.instant(), unsigned.to_vec(), fee));
        Ok(fee)
    }

    /// Simulates `calls` in order, in one block on top of the latest (state carries from one to the next), and
    /// answers each call's result with the method that served it. `eth_simulateV1` first (with the node's
    /// validation when `validate`); a node without it is asked `debug_traceCall` for the last call alone (it cannot
    /// run the earlier ones first, so it is used only when there are none). `overrides` are state overrides
    /// (`{address: {balance: …}}`), as both methods take them.
    async fn simulate(
        &self,
        calls: &[SimCall],
        validate: bool,
        overrides: Option<Value>,
    ) -> Result<(SimMethod, Vec<Simulated>), SimulationError> {
        // The simulated block is stamped a little after now, as the one that will include the call: contracts that
        // do more work when time has passed since their last update (a Uniswap V2 pair's price accumulators) are
        // then simulated with that work, and their gas with it. Now is the chain's clock when it runs ahead of this
        // machine's (a node whose time was moved, a clock that drifts): a block stamped before the latest one would
        // be judged in a period the chain has left (§21's period caveats).
        let p = self.provider();
        let latest = self
            .call(|| p.get_block_by_number(alloy::eips::BlockNumberOrTag::Latest))
            .await?
            .map_or(0, |b| b.header.timestamp);
        let here = u64::try_from(self.clock().now().timestamp()).unwrap_or_default();
        let soon = here.max(latest).saturating_add(SIMULATED_BLOCK_AHEAD_SECS);
        let mut block = json!({"calls": calls.iter().map(call_json).collect::<Vec<_>>(),
            "blockOverrides": {"time": format!("{soon:#x}")}});
        if let Some(overrides) = &overrides {
            block["stateOverrides"] = overrides.clone();
        }
        let payload = json!({"blockStateCalls": [block], "traceTransfers": true, "validation": validate});
        let answer: Result<Vec<SimBlock>, ChainError> = self
            .call(|| {
                let payload = payload.clone();
                async move { p.raw_request("eth_simulateV1".into(), (payload, "latest")).await }
            })
            .await;
        match answer {
            Ok(blocks) => {
                let results = blocks
                    .into_iter()
                    .flat_map(|b| b.calls)
                    .map(|c| {
                        let success = c.status.to::<u64>() == 1;
                        Simulated {
                            success,
                            gas_used: c.gas_used.to::<u64>(),
                            return_data: c.return_data,
                            // A reverted call's logs are not its effect (some nodes still list pseudo-logs).
                            logs: match success {
                                true => c.logs.into_iter().map(SimLog::from).collect(),
                                false => Vec::new(),
                            },
                        }
                    })
                    .collect::<Vec<_>>();
                if results.len() != calls.len() {
                    return Err(SimulationError::Chain(ChainError::Unavailable {
                        chain: self.info.name.to_owned(),
                        reason: "the node's simulation answered another number of calls".into(),
                    }));
                }
                Ok((SimMethod::SimulateV1, results))
            }
            Err(e) if refuses_funds(&e) => Err(SimulationError::InsufficientFunds),
            Err(e) if is_unsupported(&e) => match calls {
                [only] => Ok((SimMethod::TraceCall, vec![self.trace_call(only, overrides).await?])),
                _ => Err(SimulationError::Unsupported {
                    chain: self.info.name.to_owned(),
                }),
            },
            Err(e) => Err(e.into()),
        }
    }

    /// Broadcasts a signed, EIP-2718-encoded transaction and returns its hash. Node refusals
    /// (`nonce too low`, `insufficient funds for gas * price + value`, ...) come back as
    /// `ChainError::Refused`, classified, with the node's message. On `Timeout`/`Unavailable` the transaction may
    /// or may not have reached the node: track it by `tx::raw_tx_hash(raw)`.
    ///
    /// Broadcasts are grouped as sends are (issue 36): one that finds none in flight goes at once; the ones that come
    /// while it is in flight go together next, in one JSON-RPC batch, in the order they came, each with its own
    /// answer: one round trip for them all, and a node that mines on arrival (anvil's automine) may seal them in
    /// one block.
    async fn send_raw(&self, raw: &[u8]) -> Result<TxHash, ChainError> {
        let (answer, answered) = tokio::sync::oneshot::channel();
        let lead = {
            let mut broadcasts = self.inner.broadcasts.lock().unwrap_or_else(PoisonError::into_inner);
            broadcasts.waiting.push((raw.to_vec(), answer));
            !std::mem::replace(&mut broadcasts.sending, true)
        };
        if lead {
            // In a task of its own: a caller that goes away does not strand the broadcasts queued behind it.
            tokio::spawn(self.clone().broadcast_batches());
        }
        answered.await.unwrap_or_else(|_| Err(self.unanswered("broadcast")))
    }

    /// A transaction with its receipt and status, or `None` when the node does not know the hash.
    async fn transaction(&self, hash: TxHash) -> Result<Option<TxInfo>, ChainError> {
        let p = &self.inner.provider;
        let (tx, receipt) = tokio::try_join!(
            self.call(|| p.get_transaction_by_hash(hash)),
            self.call(|| p.get_transaction_receipt(hash)),
        )?;
        let Some(tx) = tx else {
            return Ok(None);
        };
        // The confirmation depth needs the head only once the transaction is included.
        let latest = match receipt.as_ref().and_then(|r| r.block_number) {
            Some(_) => Some(self.block_number().await?),
            None => None,
        };
        Ok(Some(TxInfo::from_rpc(
            &tx,
            receipt.as_ref(),
            latest,
            self.confirmations,
        )))
    }

    /// The receipts of `hashes`, in their order, asked in JSON-RPC batches of at most `RECEIPTS_PER_BATCH` (one
    /// request for all of them up to that): `None` while a transaction is pending or unknown. The outer error is the
    /// node's (nothing could be read); an inner one is that hash's alone.
    async fn receipts(&self, hashes: &[TxHash]) -> Result<Vec<Result<Option<ReceiptInfo>, ChainError>>, ChainError> {
        let client = self.inner.provider.client();
        let mut receipts = Vec::with_capacity(hashes.len());
        for chunk in hashes.chunks(RECEIPTS_PER_BATCH) {
            let answers = self
                .call(|| async move {
                    let mut batch = BatchRequest::new(client);
                    let mut waiters = Vec::with_capacity(chunk.len());
                    for hash in chunk {
                        waiters.push(
                            batch.add_call::<_, Option<serde_json::Value>>("eth_getTransactionReceipt", &(hash,))?,
                        );
                    }
                    batch.send().await?;
                    Ok(futures::future::join_all(waiters).await)
                })
                .await?;
            receipts.extend(answers.into_iter().map(|answer| {
                answer
                    .map_err(|e| classify(self.info.name, &e).error)
                    .and_then(|raw| self.receipt_from(raw))
            }));
        }
        Ok(receipts)
    }

    /// Whether `authorizer`'s authorization `nonce` on `token` is used or cancelled.
    async fn authorization_state(&self, token: Address, authorizer: Address, nonce: B256) -> Result<bool, ChainError> {
        let p = self.provider();
        let data = IEip3009::authorizationStateCall { authorizer, nonce }.abi_encode();
        let request = TransactionRequest::default().to(token).input(data.into());
        let out = self.call(|| p.call(request.clone())).await?;
        IEip3009::authorizationStateCall::abi_decode_returns(&out).map_err(|_| ChainError::Unavailable {
            chain: self.info.name.to_owned(),
            reason: "the token answered authorizationState with no bool".to_owned(),
        })
    }

    /// The `AuthorizationUsed` or `AuthorizationCanceled` log of the authorization in the last `LOG_WINDOW_BLOCKS`
    /// blocks up to `latest`, if any.
    async fn authorization_log(
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

#[cfg(test)]
mod tests {
    use super::*;

    fn address(hex: &str) -> Address {
        hex.parse().expect("an address")
    }

    #[test]
    fn precompiles_and_system_addresses_are_in_the_reserved_range() {
        for low in [
            "0x0000000000000000000000000000000000000001", // ecrecover
            "0x0000000000000000000000000000000000000011", // BLS12-381 (Prague)
            "0x0000000000000000000000000000000000000100", // RIP-7212 P-256 verifier
            "0x000000000000000000000000000000000000ffff",
        ] {
            assert!(is_reserved_range(address(low)), "{low}");
        }
        for wallet in [
            "0x0000000000000000000000000000000000010000",
            "0x70997970C51812dc3A010C7d01b50e0d17dc79C8",
        ] {
            assert!(!is_reserved_range(address(wallet)), "{wallet}");
        }
    }
}
