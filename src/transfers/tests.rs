//! Unit tests of the send path's branches against a scripted node (`Script`, a `chain::Node`) and a real SQLite
//! store in a temporary directory: what the node is sent (decoded from the raw transactions) and what the store
//! holds afterwards are the assertions, as the API suite's are what anvil shows.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use alloy::consensus::{Transaction, TxEnvelope};
use alloy::eips::eip2718::Decodable2718;
use alloy::primitives::{Address, B256, Bytes, TxHash, U256};
use async_trait::async_trait;
use serde_json::Value;
use tokio::sync::oneshot;
use uuid::Uuid;

use super::*;
use crate::chain::authorizations::AuthorizationLog;
use crate::chain::simulate::{SimCall, SimMethod, Simulated, SimulationError};
use crate::chain::{ChainError, Fees, Node, ReceiptInfo, RefusalKind, TxInfo};
use crate::domain::agent::{Agent, Capability};
use crate::domain::amount::Amount;
use crate::domain::audit::Actor;
use crate::domain::chain::ChainInfo;
use crate::store::{AuditEvent, Mandate, NewAgent, SqliteStore};
use crate::vault::Vault;

pub(crate) const ETH: u128 = 1_000_000_000_000_000_000;

/// What the scripted node answers to one broadcast: after `wait` opens (when set), `Ok` or the refusal.
struct Answer {
    wait: Option<oneshot::Receiver<()>>,
    refusal: Option<RefusalKind>,
}

/// A node whose answers a test writes: balances, the pending nonces it reports in turn (the last one repeats), the
/// broadcasts' answers in turn (then `Ok`), a simulation's result, its head and receipts; it records every raw
/// transaction sent.
pub(crate) struct Script {
    info: &'static ChainInfo,
    balance: U256,
    pending: Mutex<VecDeque<u64>>,
    answers: Mutex<VecDeque<Answer>>,
    simulated: Mutex<Option<Simulated>>,
    sent: Mutex<Vec<TxEnvelope>>,
    /// The head the node reports, and the receipts it has (the watcher's reads).
    pub(crate) head: Mutex<u64>,
    pub(crate) receipts: Mutex<HashMap<TxHash, ReceiptInfo>>,
}

impl Script {
    pub(crate) fn new(balance: U256) -> Self {
        Script {
            info: crate::domain::chain::find("ethereum").expect("a registry chain"),
            balance,
            pending: Mutex::new(VecDeque::from([0])),
            answers: Mutex::new(VecDeque::new()),
            simulated: Mutex::new(None),
            sent: Mutex::new(Vec::new()),
            head: Mutex::new(1),
            receipts: Mutex::new(HashMap::new()),
        }
    }

    fn pending(self, nonces: &[u64]) -> Self {
        *self.pending.lock().unwrap() = nonces.iter().copied().collect();
        self
    }

    fn answer(&self, wait: Option<oneshot::Receiver<()>>, refusal: Option<RefusalKind>) {
        self.answers.lock().unwrap().push_back(Answer { wait, refusal });
    }

    /// (nonce, to, value) of each transaction sent, in order.
    fn sent(&self) -> Vec<(u64, Address, U256)> {
        self.sent
            .lock()
            .unwrap()
            .iter()
            .map(|tx| (tx.nonce(), tx.to().unwrap_or_default(), tx.value()))
            .collect()
    }

    fn refused(&self, kind: RefusalKind) -> ChainError {
        ChainError::Refused {
            chain: self.info.name.into(),
            reason: kind,
            message: format!("scripted refusal: {kind:?}"),
        }
    }
}

#[async_trait]
impl Node for Script {
    fn info(&self) -> &'static ChainInfo {
        self.info
    }
    async fn balance(&self, _: Address) -> Result<U256, ChainError> {
        Ok(self.balance)
    }
    async fn token_balance(&self, _: Address, _: &crate::domain::asset::Asset) -> Result<U256, ChainError> {
        Ok(U256::ZERO)
    }
    async fn pending_nonce(&self, _: Address) -> Result<u64, ChainError> {
        let mut pending = self.pending.lock().unwrap();
        Ok(match pending.len() {
            1 => pending[0],
            _ => pending.pop_front().unwrap_or_default(),
        })
    }
    async fn mined_nonce(&self, _: Address) -> Result<u64, ChainError> {
        Ok(0)
    }
    async fn fees(&self) -> Result<Fees, ChainError> {
        Ok(Fees::from_parts(Some(1_000_000_000), 1_000_000_000, 2_000_000_000))
    }
    async fn recent_fees(&self, _: Duration) -> Result<Fees, ChainError> {
        self.fees().await
    }
    async fn transfer_gas(&self, _: Address, _: Address, _: U256) -> Result<u64, ChainError> {
        Ok(crate::chain::TRANSFER_GAS)
    }
    async fn estimate_transfer_gas(&self, _: Address, _: Address, _: U256) -> Result<u64, ChainError> {
        Ok(crate::chain::TRANSFER_GAS)
    }
    async fn estimate_call_gas(&self, _: Address, _: Address, _: Bytes) -> Result<u64, ChainError> {
        Ok(60_000)
    }
    async fn call_as(&self, _: Address, _: Address, _: Bytes, _: u64) -> Result<(), ChainError> {
        Ok(())
    }
    async fn l1_fee(&self, _: &[u8]) -> Result<U256, ChainError> {
        Ok(U256::ZERO)
    }
    async fn recent_l1_fee(&self, _: &[u8], _: Duration) -> Result<U256, ChainError> {
        Ok(U256::ZERO)
    }
    async fn simulate(
        &self,
        calls: &[SimCall],
        _: bool,
        _: Option<Value>,
    ) -> Result<(SimMethod, Vec<Simulated>), SimulationError> {
        let answer = self.simulated.lock().unwrap().clone();
        let answer = answer.unwrap_or(Simulated {
            success: true,
            gas_used: 50_000,
            return_data: Bytes::new(),
            logs: Vec::new(),
        });
        Ok((SimMethod::SimulateV1, vec![answer; calls.len()]))
    }
    async fn send_raw(&self, raw: &[u8]) -> Result<TxHash, ChainError> {
        let tx = TxEnvelope::decode_2718(&mut &raw[..]).expect("a signed EIP-2718 transaction");
        let hash = *tx.tx_hash();
        self.sent.lock().unwrap().push(tx);
        let answer = self.answers.lock().unwrap().pop_front();
        let Some(Answer { wait, refusal }) = answer else {
            return Ok(hash);
        };
        if let Some(wait) = wait {
            let _ = wait.await;
        }
        match refusal {
            Some(kind) => Err(self.refused(kind)),
            None => Ok(hash),
        }
    }
    async fn transaction(&self, _: TxHash) -> Result<Option<TxInfo>, ChainError> {
        Ok(None)
    }
    fn confirmations(&self) -> u64 {
        1
    }
    async fn block_number(&self) -> Result<u64, ChainError> {
        Ok(*self.head.lock().unwrap())
    }
    async fn receipts(&self, hashes: &[TxHash]) -> Result<Vec<Result<Option<ReceiptInfo>, ChainError>>, ChainError> {
        let receipts = self.receipts.lock().unwrap();
        Ok(hashes.iter().map(|h| Ok(receipts.get(h).cloned())).collect())
    }
    async fn authorization_state(&self, _: Address, _: Address, _: B256) -> Result<bool, ChainError> {
        Ok(false)
    }
    async fn authorization_log(
        &self,
        _: Address,
        _: Address,
        _: B256,
        _: u64,
    ) -> Result<Option<AuthorizationLog>, ChainError> {
        Ok(None)
    }
}

/// The transfer service on a fresh SQLite file, with `script` as the node of `ethereum`, and an agent whose key the
/// vault made, allowed to spend `cap` wei.
pub(crate) struct Bench {
    _dir: tempfile::TempDir,
    pub(crate) store: Arc<dyn Store>,
    pub(crate) transfers: Transfers,
    pub(crate) agent: Agent,
    pub(crate) node: Arc<Script>,
}

impl Bench {
    pub(crate) async fn new(script: Script, cap: U256) -> Bench {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let path = dir.path().join("agentd.db");
        let url = format!("sqlite://{}", path.display());
        let store = SqliteStore::connect(&url, &path).await.expect("the store opens");
        store.migrate().await.expect("the store migrates");
        let store: Arc<dyn Store> = Arc::new(store);
        let key = crate::config::parse_encryption_key(&"ab".repeat(32)).expect("a key");
        let vault = Arc::new(Vault::new(&key, 1));
        let keys = Arc::new(crate::signer::Keys::new(vault.clone(), None));
        let node = Arc::new(script);
        let chains = Arc::new(Chains::default().with_node(node.clone()));
        let id = Uuid::new_v4();
        let sealed = keys.generate(id).expect("a key for the agent");
        let now = crate::domain::now();
        let agent = Agent {
            id,
            name: "Scripted".into(),
            description: None,
            chains: vec!["ethereum".into()],
            capabilities: vec![Capability::Read, Capability::Transact],
            spending_cap_wei: cap,
            owner_addresses: BTreeMap::new(),
            wallet_addresses: BTreeMap::from([("ethereum".to_string(), sealed.address)]),
            spent_wei: BTreeMap::new(),
            is_active: true,
            created_at: now,
            updated_at: now,
        };
        let created = crate::domain::audit::detail::AgentCreated {
            name: agent.name.clone(),
            chains: agent.chains.clone(),
            capabilities: vec!["read".into(), "transact".into()],
            spending_cap: "0".into(),
            owner_addresses: BTreeMap::new(),
        };
        let created = AuditEvent::new(id, Actor::Admin, crate::domain::audit::Detail::AgentCreated(created));
        let new = NewAgent {
            agent: agent.clone(),
            key: sealed,
            token_hash: format!("hash-{id}"),
        };
        store.create_agent(&new, &created).await.expect("the agent is stored");
        let transfers = Transfers::new(
            store.clone(),
            chains,
            vault,
            keys,
            crate::config::Faults::default(),
            crate::config::X402Config::default(),
        );
        Bench {
            _dir: dir,
            store,
            transfers,
            agent,
            node,
        }
    }

    fn wallet(&self) -> Address {
        self.agent.wallet_addresses["ethereum"]
    }

    pub(crate) async fn send(&self, to: Address, wei: &str) -> Result<TransferOutcome, TransferError> {
        let order = TransferOrder {
            by: Transacting::check(&self.agent, &Mandate::NONE, Actor::Agent, "sending")?,
            chain: self.node.info,
            to,
            token: None,
            amount: Amount::parse(wei, 18).expect("an amount"),
            conversation_id: None,
            delegation: None,
            gas: None,
        };
        self.transfers.send(order).await
    }

    /// (nonce, to, value) of the transfers the store holds, by nonce.
    async fn stored(&self) -> Vec<(u64, Address, U256)> {
        let mut rows: Vec<_> = self
            .store
            .list_transactions(self.agent.id, Some("ethereum"), 100)
            .await
            .expect("the transfers")
            .into_iter()
            .map(|tx| (tx.nonce().expect("a transaction"), tx.to, tx.value_wei))
            .collect();
        rows.sort();
        rows
    }
}

pub(crate) fn wei(amount: u128) -> U256 {
    U256::from(amount)
}

#[tokio::test]
async fn a_nonce_too_low_resynchronises_from_the_node_and_sends_once_more_at_its_count() {
    // The wallet was used elsewhere: the node reports 0 at first, then 3 once the first try is refused.
    let bench = Bench::new(Script::new(wei(10 * ETH)).pending(&[0, 3]), wei(ETH)).await;
    bench.node.answer(None, Some(RefusalKind::NonceTooLow));
    let to = Address::repeat_byte(0x33);

    let outcome = bench.send(to, "0.01").await.expect("sent on the second try");

    let TransferOutcome::Sent { tx, status, .. } = outcome else {
        panic!("not sent")
    };
    assert_eq!(status, BroadcastStatus::Pending);
    assert_eq!(tx.nonce(), Some(3));
    let value = wei(ETH / 100);
    assert_eq!(bench.node.sent(), vec![(0, to, value), (3, to, value)]);
    // The refused try left nothing behind; the store counts from the node's nonce on.
    assert_eq!(bench.stored().await, vec![(3, to, value)]);
    assert_eq!(
        bench.store.next_nonce(bench.agent.id, "ethereum").await.unwrap(),
        Some(4)
    );
}

#[tokio::test]
async fn a_refused_broadcast_gives_its_nonce_back_when_it_is_the_newest_and_answers_the_refusal() {
    let bench = Bench::new(Script::new(wei(10 * ETH)), wei(ETH)).await;
    bench.node.answer(None, Some(RefusalKind::InsufficientFunds));
    let to = Address::repeat_byte(0x44);

    let refused = bench.send(to, "0.01").await.expect_err("the node refused it");

    assert!(
        matches!(refused, TransferError::InsufficientFunds { .. }),
        "{refused:?}"
    );
    assert_eq!(bench.node.sent().len(), 1, "nothing else is sent: no fill is needed");
    assert!(bench.stored().await.is_empty());
    assert_eq!(
        bench.store.next_nonce(bench.agent.id, "ethereum").await.unwrap(),
        Some(0)
    );
    assert_eq!(
        bench
            .store
            .spent_by_chain(bench.agent.id)
            .await
            .unwrap()
            .get("ethereum")
            .copied()
            .unwrap_or_default(),
        U256::ZERO,
        "its reservation is released"
    );
    // The next transfer takes the nonce it gave back.
    let TransferOutcome::Sent { tx, .. } = bench.send(to, "0.01").await.expect("sent") else {
        panic!("not sent")
    };
    assert_eq!(tx.nonce(), Some(0));
}

#[tokio::test]
async fn a_refusal_after_a_later_nonce_went_out_fills_its_nonce_with_a_zero_value_send_to_the_wallet() {
    let bench = Arc::new(Bench::new(Script::new(wei(10 * ETH)), wei(ETH)).await);
    // The first broadcast is held until the second transfer took nonce 1, then refused.
    let (open, held) = oneshot::channel();
    bench.node.answer(Some(held), Some(RefusalKind::Underpriced));
    let (first_to, second_to) = (Address::repeat_byte(0x55), Address::repeat_byte(0x66));

    let first = tokio::spawn({
        let bench = bench.clone();
        async move { bench.send(first_to, "0.01").await }
    });
    while bench.node.sent().is_empty() {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let TransferOutcome::Sent { tx: second, .. } = bench.send(second_to, "0.02").await.expect("sent") else {
        panic!("not sent")
    };
    assert_eq!(second.nonce(), Some(1));
    open.send(()).expect("the first broadcast waits");
    let refused = first
        .await
        .expect("the first send ran")
        .expect_err("the node refused it");
    assert!(matches!(refused, TransferError::Rejected(_)), "{refused:?}");

    let wallet = bench.wallet();
    assert_eq!(
        bench.node.sent(),
        vec![
            (0, first_to, wei(ETH / 100)),
            (1, second_to, wei(ETH / 50)),
            (0, wallet, U256::ZERO)
        ],
        "nonce 0 is filled by a zero-value send of the wallet to itself"
    );
    assert_eq!(
        bench.stored().await,
        vec![(0, wallet, U256::ZERO), (1, second_to, wei(ETH / 50))]
    );
}

#[tokio::test]
async fn a_call_whose_simulation_reverts_is_refused_before_anything_is_signed() {
    let bench = Bench::new(Script::new(wei(10 * ETH)), wei(ETH)).await;
    *bench.node.simulated.lock().unwrap() = Some(Simulated {
        success: false,
        gas_used: 30_000,
        // Error(string) "no"
        return_data: alloy::sol_types::SolError::abi_encode(&alloy::sol_types::Revert::from("no")).into(),
        logs: Vec::new(),
    });
    let order = CallOrder {
        by: Transacting::check(&bench.agent, &Mandate::NONE, Actor::Agent, "calling").unwrap(),
        chain: bench.node.info,
        to: Address::repeat_byte(0x77),
        value: U256::ZERO,
        encoded: crate::domain::call::request::Encoded {
            calldata: Bytes::from(vec![0xde, 0xad, 0xbe, 0xef]),
            function: None,
        },
        conversation_id: None,
        guarded: false,
        gas: None,
    };

    let refused = bench.transfers.call(order).await.expect_err("the simulation reverted");

    assert_eq!(refused.code(), "call_reverted", "{refused:?}");
    assert!(bench.node.sent().is_empty(), "nothing was signed or sent");
    assert!(bench.stored().await.is_empty());
}

#[tokio::test]
async fn sends_that_arrive_together_are_reserved_in_rounds_at_consecutive_nonces_within_the_cap() {
    // Each send holds 0.01 ETH and its fee (21,000 gas at 2 gwei): the cap of 0.05 ETH takes four of them.
    let bench = Bench::new(Script::new(wei(10 * ETH)), wei(5 * ETH / 100)).await;
    let to = Address::repeat_byte(0x55);

    let outcomes = futures::future::join_all((0..8).map(|_| bench.send(to, "0.01"))).await;

    let sent = outcomes.iter().filter(|o| o.is_ok()).count();
    let over_cap = outcomes
        .iter()
        .filter(|o| matches!(o, Err(TransferError::CapExceeded { .. })))
        .count();
    assert_eq!((sent, over_cap), (4, 4), "{outcomes:?}");
    let value = wei(ETH / 100);
    let mut on_node = bench.node.sent();
    on_node.sort();
    let expected: Vec<_> = (0..4).map(|n| (n, to, value)).collect();
    assert_eq!(on_node, expected, "every nonce once, none skipped");
    assert_eq!(bench.stored().await, expected);
    assert_eq!(
        bench.store.next_nonce(bench.agent.id, "ethereum").await.unwrap(),
        Some(4)
    );
    // Every answer's entry is written (in a later round's transaction, or alone): a refusal's before its answer,
    // a stored transfer's (kept with it already) before a read of the log after its answer; each transfer the node
    // took is marked pending with it.
    bench.transfers.entries_written().await;
    let audit = bench
        .store
        .list_audit(bench.agent.id, None, 100)
        .await
        .expect("the audit");
    let count = |action: &str| audit.iter().filter(|e| e.action == action).count();
    assert_eq!((count("transfer_accepted"), count("transfer_refused")), (4, 4));
    let open = bench
        .store
        .open_transactions("ethereum")
        .await
        .expect("the open transfers");
    assert!(
        open.iter()
            .all(|tx| tx.status == crate::domain::transaction::TxState::Pending),
        "{open:?}"
    );
    // What counts against the cap is what the four hold, written once a round whatever its sends of the agent.
    let held = open.iter().fold(U256::ZERO, |sum, tx| sum + tx.reserved_wei);
    let spent = bench.store.spent_by_chain(bench.agent.id).await.expect("the spending");
    assert_eq!(spent.get("ethereum"), Some(&held));
    let figures = bench.transfers.round_figures();
    assert_eq!((figures.reserved, figures.recorded), (8, 8), "{figures:?}");
}
