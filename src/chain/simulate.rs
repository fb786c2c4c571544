//! Simulation of calls before anything is signed (docs/api.md §18): `eth_simulateV1` with `traceTransfers` (native
//! moves appear as `Transfer` logs of a pseudo-address), else `debug_traceCall` with the call tracer and its logs.
//! Only the node's raw answer is read here; what it means for the agent's wallet is the domain's (`domain::call`).

use alloy::primitives::{Address, B256, Bytes, U256};
use alloy::providers::Provider;
use serde::Deserialize;
use serde_json::{Value, json};

use super::client::ChainClient;
use super::error::{ChainError, RefusalKind};

/// How far after now the simulated block is stamped.
const SIMULATED_BLOCK_AHEAD_SECS: u64 = 15;

/// One transaction to simulate, as it will be signed (nonce, gas and fees set) or as a first run (unset).
#[derive(Debug, Clone, Default)]
pub struct SimCall {
    pub from: Address,
    pub to: Address,
    pub value: U256,
    pub data: Bytes,
    pub nonce: Option<u64>,
    pub gas: Option<u64>,
    /// `(max_fee_per_gas, max_priority_fee_per_gas)`.
    pub fees: Option<(u128, u128)>,
}

/// A log as the simulation emitted it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SimLog {
    pub address: Address,
    pub topics: Vec<B256>,
    pub data: Bytes,
}

/// What one simulated call did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Simulated {
    pub success: bool,
    pub gas_used: u64,
    /// The call's output; on a revert, the revert data.
    pub return_data: Bytes,
    /// Its logs (none when it reverted: a reverted call's logs are dropped, pseudo-logs included).
    pub logs: Vec<SimLog>,
}

/// Which method answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SimMethod {
    SimulateV1,
    TraceCall,
}

/// Why a simulation gave no result.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SimulationError {
    /// The node serves neither `eth_simulateV1` nor `debug_traceCall` (503 `simulation_unavailable`).
    #[error("the {chain} node can simulate no call (neither eth_simulateV1 nor debug_traceCall)")]
    Unsupported { chain: String },
    /// The wallet cannot pay value and gas (the node's validation).
    #[error("the wallet cannot pay the call's value and gas")]
    InsufficientFunds,
    #[error(transparent)]
    Chain(#[from] ChainError),
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct SimBlock {
    calls: Vec<SimCallResult>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct SimCallResult {
    status: alloy::primitives::U64,
    gas_used: alloy::primitives::U64,
    #[serde(default)]
    return_data: Bytes,
    #[serde(default)]
    logs: Vec<WireLog>,
}

#[derive(Debug, Deserialize)]
struct WireLog {
    address: Address,
    #[serde(default)]
    topics: Vec<B256>,
    #[serde(default)]
    data: Bytes,
}

impl From<WireLog> for SimLog {
    fn from(log: WireLog) -> Self {
        SimLog {
            address: log.address,
            topics: log.topics,
            data: log.data,
        }
    }
}

/// A frame of the call tracer (`debug_traceCall`), with its logs (`withLog`).
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Frame {
    #[serde(default)]
    gas_used: Option<alloy::primitives::U64>,
    #[serde(default)]
    output: Option<Bytes>,
    #[serde(default)]
    error: Option<String>,
    #[serde(default)]
    logs: Vec<WireLog>,
    #[serde(default)]
    calls: Vec<Frame>,
}

impl Frame {
    /// The logs of the frames that did not revert, in the order they were emitted (a frame's own logs, then its
    /// sub-calls' — the tracer keeps no finer order than that, and the effect is summed, not ordered).
    fn collect_logs(self, into: &mut Vec<SimLog>) {
        if self.error.is_some() {
            return;
        }
        into.extend(self.logs.into_iter().map(SimLog::from));
        for call in self.calls {
            call.collect_logs(into);
        }
    }
}

fn call_json(call: &SimCall) -> Value {
    let mut c = json!({
        "from": call.from,
        "to": call.to,
        "value": format!("{:#x}", call.value),
        "input": call.data,
    });
    if let Some(nonce) = call.nonce {
        c["nonce"] = json!(format!("{nonce:#x}"));
    }
    if let Some(gas) = call.gas {
        c["gas"] = json!(format!("{gas:#x}"));
    }
    if let Some((max_fee, tip)) = call.fees {
        c["maxFeePerGas"] = json!(format!("{max_fee:#x}"));
        c["maxPriorityFeePerGas"] = json!(format!("{tip:#x}"));
    }
    c
}

/// Whether a node's refusal says it does not serve the method.
fn is_unsupported(err: &ChainError) -> bool {
    match err {
        ChainError::Refused {
            reason: RefusalKind::Other,
            message,
            ..
        } => {
            let m = message.to_ascii_lowercase();
            m.contains("not found")
                || m.contains("does not exist")
                || m.contains("not supported")
                || m.contains("unsupported")
                || m.contains("not available")
                || m.contains("unknown method")
        }
        _ => false,
    }
}

impl ChainClient {
    /// Simulates `calls` in order, in one block on top of the latest (state carries from one to the next), and
    /// answers each call's result with the method that served it. `eth_simulateV1` first (with the node's
    /// validation when `validate`); a node without it is asked `debug_traceCall` for the last call alone (it cannot
    /// run the earlier ones first, so it is used only when there are none). `overrides` are state overrides
    /// (`{address: {balance: …}}`), as both methods take them.
    pub async fn simulate(
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
                        chain: self.name().to_owned(),
                        reason: "the node's simulation answered another number of calls".into(),
                    }));
                }
                Ok((SimMethod::SimulateV1, results))
            }
            Err(e) if refuses_funds(&e) => Err(SimulationError::InsufficientFunds),
            Err(e) if is_unsupported(&e) => match calls {
                [only] => Ok((SimMethod::TraceCall, vec![self.trace_call(only, overrides).await?])),
                _ => Err(SimulationError::Unsupported {
                    chain: self.name().to_owned(),
                }),
            },
            Err(e) => Err(e.into()),
        }
    }

    /// `debug_traceCall` with the call tracer and its logs. Native value shows only as the frames' `value` (no
    /// pseudo-logs): the top-level value is the caller's to add.
    async fn trace_call(&self, call: &SimCall, overrides: Option<Value>) -> Result<Simulated, SimulationError> {
        let mut config = json!({"tracer": "callTracer", "tracerConfig": {"withLog": true}});
        if let Some(overrides) = overrides {
            config["stateOverrides"] = overrides;
        }
        let request = call_json(call);
        let p = self.provider();
        let answer: Result<Frame, ChainError> = self
            .call(|| {
                let (request, config) = (request.clone(), config.clone());
                async move {
                    p.raw_request("debug_traceCall".into(), (request, "latest", config))
                        .await
                }
            })
            .await;
        let frame = match answer {
            Ok(frame) => frame,
            Err(e) if refuses_funds(&e) => return Err(SimulationError::InsufficientFunds),
            Err(e) if is_unsupported(&e) => {
                return Err(SimulationError::Unsupported {
                    chain: self.name().to_owned(),
                });
            }
            Err(e) => return Err(e.into()),
        };
        let success = frame.error.is_none();
        let gas_used = frame.gas_used.map_or(0, |g| g.to::<u64>());
        let return_data = frame.output.clone().unwrap_or_default();
        let mut logs = Vec::new();
        frame.collect_logs(&mut logs);
        Ok(Simulated {
            success,
            gas_used,
            return_data,
            logs,
        })
    }
}

fn refuses_funds(err: &ChainError) -> bool {
    matches!(
        err,
        ChainError::Refused {
            reason: RefusalKind::InsufficientFunds,
            ..
        }
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reverted_frame_and_its_sub_calls_leave_no_logs() {
        let frame: Frame = serde_json::from_value(json!({
            "gasUsed": "0x5208", "output": "0x",
            "logs": [{"address": "0x0000000000000000000000000000000000000001", "topics": [], "data": "0x01"}],
            "calls": [
                {"error": "execution reverted", "logs": [{"address": "0x0000000000000000000000000000000000000002",
                    "topics": [], "data": "0x02"}],
                 "calls": [{"logs": [{"address": "0x0000000000000000000000000000000000000003", "topics": [],
                    "data": "0x03"}]}]},
                {"logs": [{"address": "0x0000000000000000000000000000000000000004", "topics": [], "data": "0x04"}]}
            ]
        }))
        .unwrap();
        let mut logs = Vec::new();
        frame.collect_logs(&mut logs);
        let from: Vec<u8> = logs.iter().map(|l| l.address.0[19]).collect();
        assert_eq!(from, vec![1, 4]);
    }

    #[test]
    fn only_a_refusal_naming_the_method_counts_as_unsupported() {
        let refused = |message: &str| ChainError::Refused {
            chain: "base".into(),
            reason: RefusalKind::classify(message),
            message: message.into(),
        };
        assert!(is_unsupported(&refused("Method not found")));
        assert!(is_unsupported(&refused(
            "the method eth_simulateV1 does not exist/is not available"
        )));
        assert!(!is_unsupported(&refused("execution reverted")));
        assert!(!is_unsupported(&refused("insufficient funds for gas * price + value")));
    }
}
