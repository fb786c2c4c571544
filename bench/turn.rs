//! `turn`: server-side time of a builtin-engine chat turn, called directly (`prepare` + `run_turn`, events drained),
//! without HTTP: (a) no tool call, (b) one `get_balance` against anvil; for comparison the bare balance RPC and the
//! reads the balance tool makes itself (the balance and the chain's tokens, in parallel): overhead = (b) - those.

use std::time::Instant;

use agentd::chain::Node;
use agentd::chat::runner;
use agentd::chat::{ChatEvent, TurnResult};
use agentd::domain::agent::Agent;
use agentd::state::AppState;
use alloy::primitives::U256;
use tokio::sync::mpsc;

use crate::common::{LocalApp, Samples, f, start_anvil, table, transacting_agent, verdict};

const N: usize = 500;
const WARM_UP: usize = 25;
const NO_TOOL: &str = "hello";
const BALANCE: &str = "what is my balance on base";

pub async fn run() {
    let anvil = start_anvil(8453, &[]).await;
    let app = LocalApp::start(&[("RPC_URL_BASE", anvil.url())]).await;
    let created = app.create_agent(transacting_agent("bench turn")).await;
    let address = created.address("base");
    anvil.set_balance(address, U256::from(10u128.pow(18))).await;
    let agent = app.agent(&created).await;
    let state = &app.state;

    let plain = measure_turns(state, &agent, NO_TOOL, 0).await;
    let balance = measure_turns(state, &agent, BALANCE, 1).await;
    let client = state.chains.get("base").expect("base is configured");
    let mut rpc = Vec::with_capacity(N);
    let mut rpc_errors = 0;
    for i in 0..WARM_UP + N {
        let started = Instant::now();
        let ok = client.balance(address).await.is_ok();
        if i >= WARM_UP {
            rpc.push(started.elapsed());
            rpc_errors += usize::from(!ok);
        }
    }
    let rpc = (Samples::from_durations(&rpc), rpc_errors);
    // What the balance tool itself asks the node: the native balance and, in parallel, one batch for the chain's
    // tokens (USDC's balance and, while unknown, its decimals).
    let base = agentd::domain::chain::find("base").expect("base is a known chain");
    let tokens: Vec<_> = state.chains.tokens().tokens(base).cloned().collect();
    let mut reads = Vec::with_capacity(N);
    let mut read_errors = 0;
    for i in 0..WARM_UP + N {
        let started = Instant::now();
        let (native, _in_tokens) = client.balances_with_tokens(address, &tokens).await;
        if i >= WARM_UP {
            reads.push(started.elapsed());
            read_errors += usize::from(native.is_err());
        }
    }
    let reads = (Samples::from_durations(&reads), read_errors);

    println!("N = {N} each after {WARM_UP} warm-up runs; every turn starts a new conversation (SQLite, WAL)");
    let row = |name: &str, (s, errors): &(Samples, usize)| {
        vec![
            name.to_string(),
            f(s.pct(50.0), 3),
            f(s.pct(99.0), 3),
            f(s.max(), 3),
            errors.to_string(),
        ]
    };
    table(
        &["measured", "p50 ms", "p99 ms", "max ms", "errors"],
        &[
            row(&format!("(a) turn \"{NO_TOOL}\" (no tool)"), &plain),
            row(&format!("(b) turn \"{BALANCE}\""), &balance),
            row("    eth_getBalance via ChainClient", &rpc),
            row("    the tool's reads: balance + token batch", &reads),
        ],
    );
    let overhead = balance.0.pct(50.0) - reads.0.pct(50.0);
    println!(
        "  turn overhead p50 = (b) - the tool's RPC = {} ms (target < 1 ms: {}); (b) - eth_getBalance alone = {} ms",
        f(overhead, 3),
        verdict(overhead < 1.0),
        f(balance.0.pct(50.0) - rpc.0.pct(50.0), 3)
    );
}

/// Runs `WARM_UP + N` turns of `message`, each in a new conversation; a turn counts as an error unless it made
/// exactly `tool_calls` successful tool calls.
async fn measure_turns(state: &AppState, agent: &Agent, message: &str, tool_calls: usize) -> (Samples, usize) {
    let mut times = Vec::with_capacity(N);
    let mut errors = 0;
    for i in 0..WARM_UP + N {
        let started = Instant::now();
        let result = one_turn(state, agent, message).await;
        let elapsed = started.elapsed();
        if i < WARM_UP {
            continue;
        }
        times.push(elapsed);
        let ok = result
            .is_some_and(|r| r.chain_calls.len() == tool_calls && r.chain_calls.iter().all(|c| c.error.is_none()));
        errors += usize::from(!ok);
    }
    (Samples::from_durations(&times), errors)
}

async fn one_turn(state: &AppState, agent: &Agent, message: &str) -> Option<TurnResult> {
    let turn = runner::prepare(
        &state.chat,
        agent.clone(),
        None,
        message.to_string(),
        None,
        agentd::store::Mandate::NONE,
    )
    .await
    .ok()?;
    let (events, mut receiver) = mpsc::channel::<ChatEvent>(256);
    let drain = async {
        let mut count = 0;
        while receiver.recv().await.is_some() {
            count += 1;
        }
        count
    };
    let (result, _events): (_, usize) = tokio::join!(runner::run_turn(state.chat.clone(), turn, events), drain);
    result.ok()
}
