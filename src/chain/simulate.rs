//! Simulation of calls before anything is signed (docs/api.md §18): `eth_simulateV1` with `traceTransfers` (native
//! moves appear as `Transfer` logs of a pseudo-address), else `debug_traceCall` with the call tracer and its logs.
//! `Node::simulate` of `ChainClient` asks the node (`client::trace` the fallback); here are what it is asked and
//! answers and the node's wire shapes. Only the node's raw answer is read here; what it means for the agent's wallet
//! is the domain's (`domain::call`).

use alloy::primitives::{Address, B256, Bytes, U256};
use serde::Deserialize;
use serde_json::{Value, json};

use super::error::{ChainError, RefusalKind};

/// How far after now the simulated block is stamped.
pub(super) const SIMULATED_BLOCK_AHEAD_SECS: u64 = 15;

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
pub(super) struct SimBlock {
    pub(super) calls: Vec<SimCallResult>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct SimCallResult {
    pub(super) status: alloy::primitives::U64,
    pub(super) gas_used: alloy::primitives::U64,
    #[serde(default)]
    pub(super) return_data: Bytes,
    #[serde(default)]
    pub(super) logs: Vec<WireLog>,
}

#[derive(Debug, Deserialize)]
pub(super) struct WireLog {
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
pub(super) struct Frame {
    #[serde(default)]
    pub(super) gas_used: Option<alloy::primitives::U64>,
    #[serde(default)]
    pub(super) output: Option<Bytes>,
    #[serde(default)]
    pub(super) error: Option<String>,
    #[serde(default)]
    logs: Vec<WireLog>,
    #[serde(default)]
    calls: Vec<Frame>,
}

impl Frame {
    /// The logs of the frames that did not revert, in the order they were emitted (a frame's own logs, then its
    /// sub-calls' — the tracer keeps no finer order than that, and the effect is summed, not ordered).
    pub(super) fn collect_logs(self, into: &mut Vec<SimLog>) {
        if self.error.is_some() {
            return;
        }
        into.extend(self.logs.into_iter().map(SimLog::from));
        for call in self.calls {
            call.collect_logs(into);
        }
    }
}

pub(super) fn call_json(call: &SimCall) -> Value {
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
pub(super) fn is_unsupported(err: &ChainError) -> bool {
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

pub(super) fn refuses_funds(err: &ChainError) -> bool {
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
