//! Part 2: the gas of a sponsored USDC transfer alone in a bundle and in a bundle of 16, against a plain ERC-20
//! `transfer` from an EOA, and where an operation's gas goes.
//!
//! The bundles: the bench holds the bundler's lock (`bundler:base`, what its round takes first) while the
//! operations are signed, then lets it go and rings it, so the bundler finds them all waiting and carries them in
//! one `handleOps`. Every sender and recipient already holds USDC and every account's EntryPoint nonce is past 0,
//! as for the plain transfer: no storage slot goes from zero to non-zero in either.
//!
//! Where the gas goes is read from the bundle itself: its receipt's `gasUsed`, its calldata (4 gas a zero byte, 16
//! a non-zero one) and the intrinsic 21,000, and the gas of each call frame of `debug_traceTransaction`'s
//! `callTracer` (anvil): the account's `validateUserOp`, the paymaster's `validatePaymasterUserOp`, the EntryPoint's
//! `innerHandleOp` and inside it the account's `execute` and inside that the token's `transfer`. What is left is the
//! EntryPoint's own work (the calls' costs, the nonce, deposit accounting, events, paying the beneficiary, net of
//! refunds); of it, the nonce is estimated from the EVM's price list, not measured: a cold `SLOAD` (2,100) and a
//! non-zero to non-zero `SSTORE` of a slot already read (2,900).

use std::time::Duration;

use agentd::chain::userop::{self, IEntryPoint};
use alloy::primitives::{Address, B256, Bytes, U256};
use alloy::providers::Provider;
use alloy::sol_types::SolCall;
use serde_json::{Value, json};

use super::{AMOUNT_UNITS, Gas, HOLDING, World};
use crate::anvil::Anvil;
use crate::common::{CreatedAgent, TOKEN_HEADER, f, table, verdict};
use crate::solidity;

const FULL: usize = 16;
const INTRINSIC: u64 = 21_000;
/// The nonce's update, estimated: cold `SLOAD` 2,100 + `SSTORE` non-zero to non-zero of a warm slot 2,900.
const NONCE_ESTIMATE: u64 = 5_000;

alloy::sol! {
    function transfer(address to, uint256 amount) external returns (bool);
}

/// One transaction's gas, taken apart (totals over its operations).
#[derive(Default)]
struct Breakdown {
    operations: u64,
    gas_used: u64,
    calldata: u64,
    validation: u64,
    paymaster: u64,
    inner: u64,
    execute: u64,
    token: u64,
    /// What the EntryPoint charged the operations (`UserOperationEvent.actualGasUsed`), and their gas limits.
    charged: u64,
    limits: u64,
}

pub async fn run(world: &World) {
    let agents = world.agents(Gas::Sponsored, FULL, "bench gas").await;
    let recipients: Vec<Address> = (0..FULL as u8).map(|i| Address::repeat_byte(0xd0 + i)).collect();
    let plain_to = Address::repeat_byte(0xcf);
    for to in recipients.iter().chain([&plain_to]) {
        solidity::mint(&world.anvil, world.usdc, *to, U256::from(1)).await;
    }
    let alone = bundle(world, &agents[..1], &recipients[..1]).await;
    let full_hash = bundle(world, &agents, &recipients).await;
    let plain = plain_transfer(world, plain_to).await;
    let (alone, full) = (Breakdown::of(world, alone).await, Breakdown::of(world, full_hash).await);
    println!(
        "\ngas: one sponsored USDC transfer alone in a bundle, {FULL} in one bundle, a plain ERC-20 transfer from an \
         EOA (gas per operation; the frames' gas from debug_traceTransaction's callTracer)"
    );
    table(
        &["where the gas goes, per operation", "alone", "in 16", "plain transfer"],
        &rows(&alone, &full, plain),
    );
    let ratio = |b: &Breakdown| b.gas_used as f64 / b.operations as f64 / plain.gas_used as f64;
    println!(
        "  per sponsored transfer / plain transfer: alone {:.2}×, in a bundle of {FULL} {:.2}× (target <= 2.5×: {})",
        ratio(&alone),
        ratio(&full),
        verdict(ratio(&full) <= 2.5)
    );
    let (executed, estimated) = node_time(world, full_hash).await;
    println!(
        "  anvil, at the block before the bundle of {FULL}: one execution of it (eth_call) {} ms, eth_estimateGas {} \
         ms (median of 5; the bundler estimates each bundle before it signs it)",
        f(executed, 2),
        f(estimated, 2)
    );
    for (name, b) in [("alone", &alone), ("in 16", &full)] {
        println!(
            "  {name}: the EntryPoint charged {} gas per operation (actualGasUsed: its preVerificationGas, the gas it \
             measured and 10% of the unused call gas) against {} spent; limits {} per operation",
            b.charged / b.operations,
            b.gas_used / b.operations,
            b.limits / b.operations
        );
    }
}

/// A row of the table: its name, its gas in a bundle's breakdown, and in the plain transfer's where it has one.
type Part = (&'static str, fn(&Breakdown) -> u64, Option<u64>);

/// The table's rows: each part per operation, alone, in the full bundle, and for the plain transfer.
fn rows(alone: &Breakdown, full: &Breakdown, plain: Plain) -> Vec<Vec<String>> {
    let per = |b: &Breakdown, v: u64| f(v as f64 / b.operations as f64, 0);
    let parts: [Part; 9] = [
        ("intrinsic 21,000 of the transaction", |_| INTRINSIC, Some(INTRINSIC)),
        ("calldata", |b| b.calldata, Some(plain.calldata)),
        (
            "account: validateUserOp (EIP-712 digest, ecrecover)",
            |b| b.validation,
            None,
        ),
        (
            "paymaster: validatePaymasterUserOp (hash, ecrecover, reads)",
            |b| b.paymaster,
            None,
        ),
        (
            "the nonce (estimated, see above)",
            |b| NONCE_ESTIMATE * b.operations,
            None,
        ),
        (
            "EntryPoint's other work (calls, deposits, events, refunds)",
            Breakdown::entry_point_rest,
            None,
        ),
        (
            "execution: EntryPoint's innerHandleOp around execute",
            |b| b.inner - b.execute,
            None,
        ),
        (
            "execution: the account's execute around the call",
            |b| b.execute - b.token,
            None,
        ),
        ("execution: the token's transfer", |b| b.token, Some(plain.token())),
    ];
    let mut rows: Vec<Vec<String>> = parts
        .iter()
        .map(|(name, part, plain_part)| {
            vec![
                name.to_string(),
                per(alone, part(alone)),
                per(full, part(full)),
                plain_part.map_or(String::new(), |v| v.to_string()),
            ]
        })
        .collect();
    rows.push(vec![
        "total: the transaction's gasUsed / operations".into(),
        per(alone, alone.gas_used),
        per(full, full.gas_used),
        plain.gas_used.to_string(),
    ]);
    rows
}

impl Breakdown {
    /// The EntryPoint's own work less the nonce's estimate.
    fn entry_point_rest(&self) -> u64 {
        let frames = self.validation + self.paymaster + self.inner;
        let own = self.gas_used - INTRINSIC - self.calldata - frames;
        own.saturating_sub(NONCE_ESTIMATE * self.operations)
    }

    /// Takes the bundle `hash` apart (see the module's doc).
    async fn of(world: &World, hash: B256) -> Breakdown {
        let receipt = world.anvil.receipt(hash).await;
        assert!(receipt.status(), "the bundle {hash} succeeded");
        let mut b = Breakdown {
            gas_used: receipt.gas_used,
            ..Breakdown::default()
        };
        for log in receipt.inner.logs() {
            if let Some(event) = userop::user_operation_event(world.entry_point, &log.inner) {
                assert!(event.success, "an operation of {hash} failed");
                b.operations += 1;
                b.charged += u64::try_from(event.actualGasUsed).unwrap_or(u64::MAX);
            }
        }
        let input = input_of(&world.anvil, hash).await;
        b.calldata = calldata_gas(&input);
        let call = IEntryPoint::handleOpsCall::abi_decode(&input).expect("a handleOps call");
        for op in &call.ops {
            let (verification, call_gas) = userop::unpack_pair(op.accountGasLimits);
            let fields = userop::paymaster_fields(&op.paymasterAndData).expect("paymaster fields");
            let pre = u128::try_from(op.preVerificationGas).unwrap_or(u128::MAX);
            let sum = verification + call_gas + fields.verification_gas_limit + fields.post_op_gas_limit + pre;
            b.limits += u64::try_from(sum).unwrap_or(u64::MAX);
        }
        let trace = call_trace(&world.anvil, hash).await;
        b.frames(world, &trace);
        assert_eq!(
            b.operations as usize,
            call.ops.len(),
            "one event per operation of {hash}"
        );
        b
    }

    /// Adds up the gas of the bundle's call frames, by who was called.
    fn frames(&mut self, world: &World, trace: &Value) {
        for frame in children(trace) {
            let gas = gas_used(frame);
            match address(frame, "to") {
                Some(to) if to == world.paymaster => self.paymaster += gas,
                Some(to) if to == world.entry_point => {
                    self.inner += gas;
                    for execute in children(frame) {
                        // A paymaster's postOp would be called here; verifying mode has none.
                        if address(execute, "to") == Some(world.paymaster) {
                            self.inner -= gas_used(execute);
                            self.paymaster += gas_used(execute);
                            continue;
                        }
                        self.execute += gas_used(execute);
                        let transfers = children(execute).filter(|c| address(c, "to") == Some(world.usdc));
                        self.token += transfers.map(gas_used).sum::<u64>();
                    }
                }
                // The account's validateUserOp; a call without input pays the beneficiary.
                _ if frame["input"].as_str().is_some_and(|i| i.len() > 2) => self.validation += gas,
                _ => {}
            }
        }
    }
}

/// A plain ERC-20 transfer's gas: the whole transaction, and its calldata.
#[derive(Clone, Copy)]
struct Plain {
    gas_used: u64,
    calldata: u64,
}

impl Plain {
    fn token(&self) -> u64 {
        self.gas_used - INTRINSIC - self.calldata
    }
}

/// `transfer(to, 0.01 USDC)` sent by anvil's development account (an EOA holding USDC) to a recipient holding some.
async fn plain_transfer(world: &World, to: Address) -> Plain {
    let dev: Address = Anvil::DEV_ADDRESS.parse().expect("an address");
    solidity::mint(&world.anvil, world.usdc, dev, U256::from(HOLDING)).await;
    let data: Bytes = transferCall {
        to,
        amount: U256::from(AMOUNT_UNITS),
    }
    .abi_encode()
    .into();
    let (hash, ok) = solidity::send_as(&world.anvil, dev, world.usdc, data.clone()).await;
    assert!(ok, "the plain transfer succeeded");
    Plain {
        gas_used: world.anvil.receipt(hash).await.gas_used,
        calldata: calldata_gas(&data),
    }
}

/// One sponsored transfer from each of `agents` (to the recipient of the same index), all signed while the bundler
/// is held off, then carried; the hash of the one transaction they landed in.
async fn bundle(world: &World, agents: &[CreatedAgent], recipients: &[Address]) -> B256 {
    let held = loop {
        let lock = world.app.state.store.try_lock_watcher("bundler:base").await;
        match lock.expect("the store answers") {
            Some(guard) => break guard,
            None => tokio::time::sleep(Duration::from_millis(10)).await,
        }
    };
    let sends = agents
        .iter()
        .zip(recipients)
        .map(|(agent, to)| world.transfer(agent, Gas::Sponsored, *to));
    let mut ids = Vec::new();
    for (status, body, _) in futures::future::join_all(sends).await {
        assert_eq!(status, 201, "a sponsored transfer was refused: {body}");
        ids.push(body["id"].as_str().expect("a transfer id").to_string());
    }
    drop(held);
    world.app.state.bundles.notify_one();
    let mut hashes = Vec::new();
    for (agent, id) in agents.iter().zip(&ids) {
        hashes.push(landed_in(world, agent, id).await);
    }
    hashes.dedup();
    assert_eq!(
        hashes.len(),
        1,
        "the {} operations landed in one bundle: {hashes:?}",
        agents.len()
    );
    hashes[0]
}

/// The transaction a sponsored transfer landed in, once it is confirmed.
async fn landed_in(world: &World, agent: &CreatedAgent, id: &str) -> B256 {
    let url = format!("{}/api/agents/{}/transfers/{id}", world.app.address, agent.id);
    for _ in 0..600 {
        let body: Value = world
            .app
            .client
            .get(&url)
            .header(TOKEN_HEADER, &agent.token)
            .send()
            .await
            .expect("GET …/transfers/{id}")
            .json()
            .await
            .unwrap_or(Value::Null);
        match body["status"].as_str() {
            Some("confirmed") => return body["tx_hash"].as_str().expect("tx_hash").parse().expect("a hash"),
            Some("signed" | "pending") => tokio::time::sleep(Duration::from_millis(50)).await,
            _ => panic!("transfer {id} did not confirm: {body}"),
        }
    }
    panic!("transfer {id} did not confirm within 30 s");
}

/// The median time anvil takes to execute the transaction `hash` once (`eth_call`) and to estimate its gas
/// (`eth_estimateGas`) at the block before it, in ms.
async fn node_time(world: &World, hash: B256) -> (f64, f64) {
    let tx: Value = world
        .anvil
        .provider()
        .raw_request("eth_getTransactionByHash".into(), (hash,))
        .await
        .expect("eth_getTransactionByHash");
    let mined = tx["blockNumber"].as_str().expect("a mined transaction");
    let before = u64::from_str_radix(mined.trim_start_matches("0x"), 16).expect("a block number") - 1;
    let request = json!({"from": tx["from"], "to": tx["to"], "data": tx["input"]});
    let mut times = [Vec::new(), Vec::new()];
    for _ in 0..5 {
        for (method, took) in ["eth_call", "eth_estimateGas"].into_iter().zip(times.iter_mut()) {
            let started = std::time::Instant::now();
            let _: Value = world
                .anvil
                .provider()
                .raw_request(method.into(), (&request, format!("{before:#x}")))
                .await
                .unwrap_or_else(|e| panic!("{method} of the bundle: {e}"));
            took.push(started.elapsed());
        }
    }
    let [call, estimate] = times.map(|t| crate::common::Samples::from_durations(&t).pct(50.0));
    (call, estimate)
}

/// Calldata gas: 4 a zero byte, 16 a non-zero one (EIP-2028).
fn calldata_gas(data: &[u8]) -> u64 {
    data.iter().map(|b| if *b == 0 { 4 } else { 16 }).sum()
}

async fn input_of(anvil: &Anvil, hash: B256) -> Bytes {
    let tx: Value = anvil
        .provider()
        .raw_request("eth_getTransactionByHash".into(), (hash,))
        .await
        .expect("eth_getTransactionByHash");
    tx["input"].as_str().expect("an input").parse().expect("hex")
}

async fn call_trace(anvil: &Anvil, hash: B256) -> Value {
    anvil
        .provider()
        .raw_request("debug_traceTransaction".into(), (hash, json!({"tracer": "callTracer"})))
        .await
        .expect("debug_traceTransaction with the callTracer")
}

fn children(frame: &Value) -> impl Iterator<Item = &Value> {
    frame["calls"].as_array().into_iter().flatten()
}

fn gas_used(frame: &Value) -> u64 {
    let hex = frame["gasUsed"].as_str().unwrap_or("0x0");
    u64::from_str_radix(hex.trim_start_matches("0x"), 16).unwrap_or(0)
}

fn address(frame: &Value, field: &str) -> Option<Address> {
    frame[field].as_str()?.parse().ok()
}
