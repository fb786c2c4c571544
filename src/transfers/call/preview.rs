//! The preview of a call: simulated from the agent's wallet after its transactions still pending, then exactly as it
//! will be signed, its logs read into what it would do (`domain::call::effect`) and into what its reservation will
//! judge (`CallCheck`, counted in `counts`).

use alloy::primitives::{Address, U256};
use serde_json::json;

use super::counts;
use super::{AllowanceView, CallOrder, ChangeView, Previewed, SimulationView};
use crate::chain::simulate::{SimCall, SimMethod, Simulated, SimulationError};
use crate::domain::call::{self, CallsPolicy, Direction, Effect, SimLog};
use crate::domain::chain::ChainInfo;
use crate::domain::transaction::CallRecord;
use crate::store::CallCheck;
use crate::transfers::{TransferError, Transfers, store_error};

/// The gas limit signed: what the simulation used, and half more. A node reports gas used after refunds (up to a
/// fifth of it, EIP-3529, when a call clears storage such as an allowance spent to zero), nested calls keep back a
/// 64th of what they are given, and state may move before it is mined; unused gas is not paid.
pub(super) fn gas_limit_for(gas_used: u64) -> u64 {
    gas_used.saturating_add(gas_used / 2).saturating_add(10_000).max(21_000)
}

impl Transfers {
    /// Simulates the call from the agent's wallet on top of the latest block and reads what it would do. What §22
    /// checks first is checked unsimulated (`call_ready`: who pays, a target no call may reach, the account); a revert is `CallReverted` with its
    /// decoded reason; a node that cannot simulate, `SimulationUnavailable`.
    pub async fn preview_call(&self, order: &CallOrder<'_>) -> Result<Previewed, TransferError> {
        self.call_ready(order).await?;
        let pending = self.pending_calls(order).await?;
        self.preview_after(order, &pending).await
    }

    /// The agent's own transactions on the order's chain that the node has not mined yet, in nonce order, as the
    /// simulation replays them before the call (§18: the call as it will land, after them). Read from the store, their
    /// signed bytes decoded; those below the node's mined nonce have landed and are not replayed.
    pub(super) async fn pending_calls(&self, order: &CallOrder<'_>) -> Result<Vec<SimCall>, TransferError> {
        use alloy::consensus::Transaction;
        use alloy::eips::eip2718::Decodable2718;
        let chain = order.chain;
        let from = *order
            .by
            .agent
            .wallet_addresses
            .get(chain.name)
            .ok_or(TransferError::NoWallet)?;
        let open = self
            .store
            .open_transactions_of(order.by.agent.id, chain.name)
            .await
            .map_err(store_error)?;
        if open.is_empty() {
            return Ok(Vec::new());
        }
        let mined = self.chains.node(chain.name)?.mined_nonce(from).await?;
        Ok(open
            .iter()
            .filter(|tx| tx.nonce().is_some_and(|n| n >= mined))
            .filter_map(|tx| {
                let envelope = alloy::consensus::TxEnvelope::decode_2718(&mut tx.raw_tx.as_slice()).ok()?;
                Some(SimCall {
                    from,
                    to: envelope.to()?,
                    value: envelope.value(),
                    data: envelope.input().clone(),
                    // As signed: the validated run checks each one's nonce, gas and fees as the node will.
                    nonce: Some(envelope.nonce()),
                    gas: Some(envelope.gas_limit()),
                    fees: Some((
                        envelope.max_fee_per_gas(),
                        envelope.max_priority_fee_per_gas().unwrap_or_default(),
                    )),
                })
            })
            .collect())
    }

    /// `preview_call` after `pending`, the agent's transactions still to land.
    pub(super) async fn preview_after(
        &self,
        order: &CallOrder<'_>,
        pending: &[SimCall],
    ) -> Result<Previewed, TransferError> {
        let chain = order.chain;
        let client = self.chains.node(chain.name)?;
        let from = *order
            .by
            .agent
            .wallet_addresses
            .get(chain.name)
            .ok_or(TransferError::NoWallet)?;
        let policy = self.store.get_policy(order.by.agent.id).await.map_err(store_error)?;
        let abi = policy.calls.as_ref().and_then(|c| c.abi_for(chain.name, order.to));
        let data = order.encoded.calldata.clone();
        let decoded = call::decode(&data, order.encoded.function.as_ref(), abi);
        let run = SimCall {
            from,
            to: order.to,
            value: order.value,
            data: data.clone(),
            ..SimCall::default()
        };
        let entry_point = self
            .sponsors
            .chain(chain.name)
            .map_or(crate::domain::delegation::deployments::ENTRY_POINT_V07, |s| {
                s.entry_point
            });
        let (method, first) = first_run(client, order, from, (pending, entry_point), &run).await?;
        let revert = |r: &Simulated| reverted(policy.calls.as_deref(), r);
        if !first.success {
            return Err(revert(&first));
        }
        // The gas limit signed comes from this first run, with a margin; then the transaction exactly as it will be
        // signed (§18) — that gas limit, its nonce, today's fees — is run again with the node's validation.
        let gas_limit = gas_limit_for(first.gas_used);
        let Simulated { gas_used, logs, .. } =
            match self.exact_run(client, order, from, pending, &run, gas_limit).await? {
                Some(exact) if !exact.success => return Err(revert(&exact)),
                Some(exact) => exact,
                None => first,
            };
        let effect = effect_of(logs, from, method, order.value);
        let (moves, supplies) = self
            .allowance_moves(client, order, from, &decoded, &effect, (pending, &run))
            .await?;
        let unlimited = counts::grants_unlimited(&decoded, &effect, &moves, &supplies);
        let (fixed, outs) = self.outflows(chain, order, from, &decoded, &effect);
        let simulation = self.simulation_view(chain, &effect, gas_used);
        let opaque = self.opaque(order, &data);
        let decimals = self.limit_decimals(fixed.iter().map(|c| &c.asset_key), &outs, &moves);
        let record = CallRecord {
            data,
            selector: decoded.selector,
            function: decoded.function,
            args: decoded.args,
            simulation: serde_json::to_value(&simulation).unwrap_or_default(),
            figures: call::ledger::figures(&effect),
            calls: Vec::new(),
        };
        Ok(Previewed {
            record,
            simulation,
            check: CallCheck {
                forbidden: None,
                typed: None,
                unlimited,
                guarded: order.guarded,
                fixed,
                outs,
                moves,
                receivers: effect.receivers.iter().chain(&effect.spenders).copied().collect(),
                opaque,
                decimals,
            },
            gas_limit,
        })
    }

    /// The call as it will be signed — `gas_limit`, the nonce the reservation will give it, today's fees — after
    /// `pending` (as they were signed), simulated with the node's validation. `None` when that cannot be had and
    /// the unvalidated run stands: a node without `eth_simulateV1`, a wallet that cannot pay (its funds are judged
    /// last, §18), or a validation the agent's own pending transactions fail (one stuck below today's base fee).
    async fn exact_run(
        &self,
        client: &dyn crate::chain::Node,
        order: &CallOrder<'_>,
        from: Address,
        pending: &[SimCall],
        run: &SimCall,
        gas_limit: u64,
    ) -> Result<Option<Simulated>, TransferError> {
        let stored = self
            .store
            .next_nonce(order.by.agent.id, order.chain.name)
            .await
            .map_err(store_error)?;
        let (node, fees) = tokio::join!(
            client.pending_nonce(from),
            client.recent_fees(crate::transfers::FEE_MAX_AGE)
        );
        let (node, fees) = (node?, fees?);
        let exact = SimCall {
            nonce: Some(stored.unwrap_or(0).max(node)),
            gas: Some(gas_limit),
            fees: Some((fees.max_fee_per_gas, fees.max_priority_fee_per_gas)),
            ..run.clone()
        };
        let mut batch = pending.to_vec();
        batch.push(exact);
        match client.simulate(&batch, true, None).await {
            Ok((SimMethod::SimulateV1, results)) => Ok(results.into_iter().nth(pending.len())),
            Ok(_) | Err(SimulationError::InsufficientFunds | SimulationError::Unsupported { .. }) => Ok(None),
            Err(SimulationError::Chain(e)) => {
                tracing::warn!(chain = order.chain.name, error = %e, "the validated simulation was refused; the first run stands");
                Ok(None)
            }
        }
    }

    pub(super) fn simulation_view(&self, chain: &'static ChainInfo, effect: &Effect, gas_used: u64) -> SimulationView {
        let changes = effect
            .changes
            .iter()
            .map(|c| {
                let named = self.name_token(chain, c.token);
                ChangeView {
                    token: match named.registry {
                        Some(_) => None,
                        None => c.token.map(|t| t.to_checksum(None)),
                    },
                    amount: named.amount(c.amount),
                    asset: named.asset_key,
                    direction: match c.direction {
                        Direction::Out => "out",
                        Direction::In => "in",
                    }
                    .to_string(),
                }
            })
            .collect();
        let approvals = effect
            .approvals
            .iter()
            .map(|g| {
                let named = self.name_token(chain, Some(g.token));
                AllowanceView {
                    token: g.token.to_checksum(None),
                    spender: g.spender.to_checksum(None),
                    amount: named.amount(g.amount),
                    unlimited: g.unlimited || call::is_unlimited_amount(g.amount),
                }
            })
            .collect();
        SimulationView {
            changes,
            approvals,
            gas_used,
        }
    }
}

/// The call run once after `pending`, without the node's validation: how the node simulated it, and the call's own
/// result. The agent's EntryPoint nonce and deposit are read before and after it where the node runs several calls
/// in one simulation: a call that changes either is refused (§22, `call_denied`), as a batch's call is.
async fn first_run(
    client: &dyn crate::chain::Node,
    order: &CallOrder<'_>,
    from: Address,
    (pending, entry_point): (&[SimCall], Address),
    run: &SimCall,
) -> Result<(SimMethod, Simulated), TransferError> {
    let chain = order.chain;
    let reads = super::targets::entry_point_reads(from, entry_point);
    let mut watched = pending.to_vec();
    watched.extend(reads.iter().cloned());
    watched.push(run.clone());
    watched.extend(reads.iter().cloned());
    let mut plain = pending.to_vec();
    plain.push(run.clone());
    let rich = json!({ from.to_string(): {"balance": format!("{:#x}", order.value.saturating_add(U256::from(10u128.pow(24))))} });
    let simulate = |batch: &[SimCall]| {
        let batch = batch.to_vec();
        let rich = rich.clone();
        async move {
            match client.simulate(&batch, false, None).await {
                // The wallet cannot pay the value: the verdict is reached with a balance that can, and the
                // reservation refuses it for its funds last (§18).
                Err(SimulationError::InsufficientFunds) => client.simulate(&batch, false, Some(rich)).await,
                other => other,
            }
        }
    };
    let (simulated, watching) = match simulate(&watched).await {
        // A node that runs one call at a time (the call tracer) runs the call alone, unwatched.
        Err(SimulationError::Unsupported { .. }) => (simulate(&plain).await, false),
        Ok((method, results)) if results.len() == watched.len() => (Ok((method, results)), true),
        Ok(_) => (simulate(&plain).await, false),
        other => (other, true),
    };
    let (method, results) = simulated.map_err(|e| match e {
        SimulationError::Unsupported { chain } => TransferError::SimulationUnavailable(chain),
        SimulationError::InsufficientFunds => TransferError::SimulationUnavailable(chain.name.to_string()),
        SimulationError::Chain(e) => TransferError::Chain(e),
    })?;
    let at = pending.len() + if watching { reads.len() } else { 0 };
    let Some(first) = results.get(at).cloned() else {
        return Err(TransferError::SimulationUnavailable(chain.name.to_string()));
    };
    if watching && first.success && super::targets::entry_point_moved(&results[pending.len()..]).is_some() {
        return Err(TransferError::CallTargetDenied {
            index: 0,
            words: "the call changes the agent's nonce or deposit at the EntryPoint, which no call may do whatever \
                    the rules"
                .into(),
        });
    }
    Ok((method, first))
}

/// A reverted run refused with its decoded reason, read with the ABIs the policy's `calls` rules hold.
fn reverted(calls: Option<&CallsPolicy>, run: &Simulated) -> TransferError {
    let abis = calls.map(|c| c.abis.values().collect::<Vec<_>>()).unwrap_or_default();
    TransferError::CallReverted(call::revert_reason(&run.return_data, abis))
}

/// What the call does to the wallet `from`, read from the run's logs. The call tracer shows no native moves as logs:
/// there the value the agent sends is its own outflow.
pub(super) fn effect_of(
    logs: Vec<crate::chain::simulate::SimLog>,
    from: Address,
    method: SimMethod,
    value: U256,
) -> Effect {
    let logs: Vec<SimLog> = logs
        .into_iter()
        .map(|l| SimLog {
            address: l.address,
            topics: l.topics,
            data: l.data,
        })
        .collect();
    let mut effect = call::effect(&logs, from);
    if method == SimMethod::TraceCall && !value.is_zero() {
        effect.changes.insert(
            0,
            call::Change {
                token: None,
                amount: value,
                direction: Direction::Out,
            },
        );
    }
    effect
}
