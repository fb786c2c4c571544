//! Part 1: 32 agents sending wallet-paid USDC transfers, then 32 other agents sending sponsored ones, each agent one
//! request at a time; the bundles read back from the chain.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use agentd::chain::userop::{self, IEntryPoint};
use alloy::primitives::{Address, B256, U256};
use alloy::providers::Provider;
use alloy::rpc::types::Filter;
use alloy::sol_types::SolEvent;

use agentd::transfers::RoundFigures;

use super::{AMOUNT, AMOUNT_UNITS, Gas, World, count};
use crate::common::{CpuTicks, CreatedAgent, Samples, f, table, verdict};

const AGENTS: usize = 32;
/// How long the transfers of a row may take to land after the last answer.
const LANDING: Duration = Duration::from_secs(120);

/// What one row measured.
struct Row {
    transfers: usize,
    answers: Vec<Duration>,
    errors: usize,
    first_error: Option<String>,
    /// From the first request to the last answer, and to the last transfer on the chain.
    answered: Duration,
    landed: Option<Duration>,
    /// The blocks before and after the row, and how many transactions the sponsor sent in between.
    first_block: u64,
    last_block: u64,
    sponsor_txs: u64,
    cpu: String,
    /// Group commit's rounds during the row (`Transfers::round_figures`).
    rounds: String,
    /// The app's node calls a transfer, by method (`BENCH_SPONSORED_RPC`).
    rpc: Option<String>,
}

impl Row {
    fn cells(&self, name: &str) -> Vec<String> {
        let s = Samples::from_durations(&self.answers);
        let rate = |d: Duration| self.answers.len() as f64 / d.as_secs_f64();
        vec![
            name.to_string(),
            self.transfers.to_string(),
            f(rate(self.answered), 0),
            self.landed.map_or("not all".into(), |d| f(rate(d), 0)),
            f(s.pct(50.0), 2),
            f(s.pct(99.0), 2),
            self.errors.to_string(),
        ]
    }

    fn landed_rate(&self) -> f64 {
        self.landed.map_or(0.0, |d| self.answers.len() as f64 / d.as_secs_f64())
    }
}

pub async fn run(world: &World) {
    let per_agent = count("BENCH_SPONSORED_PER_AGENT", 20);
    let wallet = world.agents(Gas::Wallet, AGENTS, "bench wallet").await;
    let sponsored = world.agents(Gas::Sponsored, AGENTS, "bench sponsored").await;
    let w = row(world, &wallet, Gas::Wallet, per_agent, Address::repeat_byte(0xc1)).await;
    let s = row(world, &sponsored, Gas::Sponsored, per_agent, Address::repeat_byte(0xc2)).await;
    println!(
        "\nload: {AGENTS} agents each way, {per_agent} transfers of {AMOUNT} USDC per agent, one request at a time per \
         agent; landed = until the recipient's balance holds every transfer"
    );
    table(
        &[
            "row",
            "transfers",
            "answers/s",
            "landed/s",
            "answer p50 ms",
            "p99 ms",
            "errors",
        ],
        &[w.cells("wallet-paid, 32 agents"), s.cells("sponsored, 32 agents")],
    );
    for (name, r) in [("wallet-paid", &w), ("sponsored", &s)] {
        if let Some(e) = &r.first_error {
            println!("  {name}: first error {e}");
        }
        if let Some(landed) = r.landed {
            println!(
                "  {name}: the last transfer landed {} ms after the last answer",
                f(landed.saturating_sub(r.answered).as_secs_f64() * 1e3, 0)
            );
        }
        println!("  {name}: {}", r.cpu);
        println!("  {name}: {}", r.rounds);
        if let Some(rpc) = &r.rpc {
            println!("  {name}: node calls a transfer: {rpc}");
        }
    }
    let ratio = s.landed_rate() / w.landed_rate().max(f64::MIN_POSITIVE);
    println!(
        "  sponsored / wallet-paid, landed a second: {:.0}% (target >= 100%: {})",
        ratio * 100.0,
        verdict(ratio >= 1.0)
    );
    bundles(world, &s).await;
}

/// `per_agent` transfers from each of `agents` to `to`, every agent one request at a time, all agents at once.
async fn row(world: &World, agents: &[CreatedAgent], gas: Gas, per_agent: usize, to: Address) -> Row {
    settled(world).await;
    let before = crate::solidity::token_balance(&world.anvil, world.usdc, to).await;
    let first_block = world.anvil.block_number().await;
    let sponsor_nonce = world.anvil.mined_nonce(world.sponsor).await;
    let cpu = CpuTicks::now(world.anvil.pid());
    let rounds = world.app.state.transfers.round_figures();
    let calls = world.rpc.as_ref().map(|counter| counter.calls());
    let started = Instant::now();
    let workers = agents.iter().map(|agent| async move {
        let (mut took, mut problems) = (Vec::with_capacity(per_agent), Vec::new());
        for _ in 0..per_agent {
            match world.transfer(agent, gas, to).await {
                (201, _, t) => took.push(t),
                (status, body, _) => problems.push(format!("{status} {body}")),
            }
        }
        (took, problems)
    });
    let done = futures::future::join_all(workers).await;
    let answered = started.elapsed();
    let (mut answers, mut problems) = (Vec::new(), Vec::new());
    for (took, problem) in done {
        answers.extend(took);
        problems.extend(problem);
    }
    let expected = before + U256::from(AMOUNT_UNITS) * U256::from(answers.len());
    let landed = world.landed(to, expected, LANDING).await.then(|| started.elapsed());
    let cpu = CpuTicks::now(world.anvil.pid()).since(&cpu, answers.len(), "transfer");
    let rounds = rounds_since(&rounds, &world.app.state.transfers.round_figures());
    let rpc = world
        .rpc
        .as_ref()
        .zip(calls)
        .map(|(counter, before)| counter.since(&before, answers.len()));
    Row {
        transfers: agents.len() * per_agent,
        answers,
        errors: problems.len(),
        first_error: problems.into_iter().next(),
        answered,
        landed,
        first_block,
        last_block: world.anvil.block_number().await,
        sponsor_txs: world.anvil.mined_nonce(world.sponsor).await - sponsor_nonce,
        cpu,
        rounds,
        rpc,
    }
}

/// Reads the row's bundles from the chain: the `UserOperationEvent` logs of the EntryPoint in the row's blocks,
/// by transaction.
async fn bundles(world: &World, row: &Row) {
    let filter = Filter::new()
        .address(world.entry_point)
        .event_signature(IEntryPoint::UserOperationEvent::SIGNATURE_HASH)
        .from_block(row.first_block + 1)
        .to_block(row.last_block);
    let logs = world.anvil.provider().get_logs(&filter).await.expect("eth_getLogs");
    let mut per_tx: BTreeMap<B256, usize> = BTreeMap::new();
    let mut failed = 0;
    for log in &logs {
        let Some(event) = userop::user_operation_event(world.entry_point, &log.inner) else {
            continue;
        };
        failed += usize::from(!event.success);
        *per_tx.entry(log.transaction_hash.expect("a mined log")).or_default() += 1;
    }
    let sizes: Vec<f64> = per_tx.values().map(|n| *n as f64).collect();
    let mut histogram: BTreeMap<usize, usize> = BTreeMap::new();
    for n in per_tx.values() {
        *histogram.entry(*n).or_default() += 1;
    }
    let ops: usize = per_tx.values().sum();
    let average = ops as f64 / per_tx.len().max(1) as f64;
    let sizes = Samples::new(sizes);
    println!(
        "  sponsored row on the chain: {ops} operations ({failed} failed) in {} bundle transactions; operations a \
         bundle: average {}, p50 {}, max {}, min {} (target average >= 8: {})",
        per_tx.len(),
        f(average, 2),
        sizes.pct(50.0),
        sizes.max(),
        sizes.min(),
        verdict(average >= 8.0)
    );
    let spread: Vec<String> = histogram.iter().map(|(n, c)| format!("{n} ops × {c}")).collect();
    println!("  bundle sizes: {}", spread.join(", "));
    println!(
        "  the sponsor sent {} transactions in the row's blocks ({} blocks): one per bundle: {}",
        row.sponsor_txs,
        row.last_block - row.first_block,
        verdict(row.sponsor_txs == per_tx.len() as u64)
    );
}

/// Group commit's rounds between `before` and `after`: reservation rounds and the sends they took, rounds of audit
/// entries alone, the entries written, and the time spent in rounds.
fn rounds_since(before: &RoundFigures, after: &RoundFigures) -> String {
    let rounds = after.reservation_rounds - before.reservation_rounds;
    let sends = after.reserved - before.reserved;
    format!(
        "{rounds} reservation rounds of {:.1} sends on average; {} rounds of entries alone, {} entries; {} ms in rounds",
        sends as f64 / rounds.max(1) as f64,
        after.record_rounds - before.record_rounds,
        after.recorded - before.recorded,
        (after.busy_micros - before.busy_micros) / 1000
    )
}

/// Waits (at most `LANDING`) until the app has settled everything it sent before: no transfer and no user operation
/// is still `signed` or `pending`. A row then pays for its own settling only, not for the one before it (the
/// watcher settles wallet transactions once an interval, the bundler its operations once a tick: a row that
/// started at once would spend part of its time on the previous row's).
async fn settled(world: &World) {
    let store = &world.app.state.store;
    let deadline = Instant::now() + LANDING;
    while Instant::now() < deadline {
        let (transactions, operations) = (store.open_transactions("base"), store.open_operations("base", false));
        match tokio::join!(transactions, operations) {
            (Ok(t), Ok(o)) if t.is_empty() && o.is_empty() => return,
            (Err(e), _) | (_, Err(e)) => panic!("the store could not be read: {e}"),
            _ => tokio::time::sleep(Duration::from_millis(50)).await,
        }
    }
    panic!("the app did not settle what it sent within {LANDING:?}");
}
