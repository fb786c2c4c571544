//! The fallback of `Node::simulate` for a node without `eth_simulateV1`: `debug_traceCall` of one call with the call
//! tracer and its logs.

use alloy::providers::Provider;
use serde_json::{Value, json};

use super::ChainClient;
use crate::chain::error::ChainError;
use crate::chain::simulate::{Frame, SimCall, Simulated, SimulationError, call_json, is_unsupported, refuses_funds};

impl ChainClient {
    /// `debug_traceCall` with the call tracer and its logs. Native value shows only as the frames' `value` (no
    /// pseudo-logs): the top-level value is the caller's to add.
    pub(super) async fn trace_call(
        &self,
        call: &SimCall,
        overrides: Option<Value>,
    ) -> Result<Simulated, SimulationError> {
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
                    chain: self.info.name.to_owned(),
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
