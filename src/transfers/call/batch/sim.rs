//! A batch's simulation (§22): its calls run one after another from the agent's address (each is what the account
//! runs with `msg.sender` the agent's address), which names the first that reverts and gives each call its own logs
//! and allowance moves; then the account's `execute` of the whole batch from the agent's address to itself (an
//! address with no code yet given the implementation's EIP-7702 designation by a state override), which must
//! succeed too and gives the gas. The counts of §18 are summed over the calls: each grant counts what its own call
//! sets, and a pull is covered by what was counted before the batch plus what earlier calls of it granted.

use alloy::primitives::{Address, U256};
use serde_json::{Value, json};

use super::BatchOrder;
use crate::chain::simulate::{SimCall, SimMethod, Simulated, SimulationError};
use crate::domain::call::batch::BatchedCall;
use crate::domain::call::ledger::{AllowanceMove, Moved, Pair, TokenOut};
use crate::domain::call::{self, DecodedCall, Effect};
use crate::domain::decision::Opaque;
use crate::domain::transaction::CallRecord;
use crate::store::CallCheck;
use crate::transfers::call::preview::{effect_of, gas_limit_for};
use crate::transfers::call::{CallOrder, Previewed, counts, targets};
use crate::transfers::{TransferError, Transfers, store_error};

/// What one run of the calls needs beside them: the agent's transactions still pending, and the state override
/// the runs share (a balance that can pay the values, when the wallet cannot: its funds are judged last, §18).
struct Runs<'p> {
    pending: &'p [SimCall],
    rich: Option<Value>,
}

impl Transfers {
    /// Simulates `order` after `pending` (see the module's doc) and reads what it would do and what its reservation
    /// judges. `designate`: the implementation the address designates in the simulation (it has no code yet).
    pub(in crate::transfers::call) async fn preview_batch_after(
        &self,
        order: &BatchOrder<'_>,
        pending: &[SimCall],
        designate: Option<Address>,
    ) -> Result<Previewed, TransferError> {
        let chain = order.chain;
        let client = self.chains.node(chain.name)?;
        let from = order.from()?;
        let policy = self.store.get_policy(order.by.agent.id).await.map_err(store_error)?;
        let abis: Vec<_> = policy
            .calls
            .as_ref()
            .map(|c| c.abis.values().collect())
            .unwrap_or_default();
        let singles: Vec<CallOrder<'_>> = (0..order.calls.len()).map(|i| order.single(i)).collect();
        let decoded: Vec<DecodedCall> = singles
            .iter()
            .map(|o| {
                let abi = policy.calls.as_ref().and_then(|c| c.abi_for(chain.name, o.to));
                call::decode(&o.encoded.calldata, o.encoded.function.as_ref(), abi)
            })
            .collect();
        let entry_point = self
            .sponsors
            .chain(chain.name)
            .map_or(crate::domain::delegation::deployments::ENTRY_POINT_V07, |s| {
                s.entry_point
            });
        let (method, each, runs) = each_call(client, order, from, (pending, entry_point), &abis).await?;
        let data = crate::chain::userop::execute_batch(&order.executions());
        let gas_used = whole_run(client, order, (from, &data), designate, &runs, &abis).await?;
        let all_logs: Vec<_> = each.iter().flat_map(|r| r.logs.iter().cloned()).collect();
        let whole = effect_of(all_logs, from, method, order.total());
        let effects: Vec<Effect> = each
            .into_iter()
            .zip(&singles)
            .map(|(run, single)| effect_of(run.logs, from, method, single.value))
            .collect();
        let (moves, supplies) = self
            .batch_moves(client, order, (&singles, &decoded, &effects), from, &runs)
            .await?;
        let mut fixed = Vec::new();
        let mut outs: Vec<Vec<TokenOut>> = Vec::new();
        for i in 0..singles.len() {
            let (f, o) = self.outflows(chain, &singles[i], from, &decoded[i], &effects[i]);
            fixed.extend(f);
            outs.push(o);
        }
        let unlimited =
            (0..singles.len()).any(|i| counts::grants_unlimited(&decoded[i], &effects[i], &moves[i], &supplies));
        let moves = thread(moves, &mut outs);
        let outs = merged(outs.into_iter().flatten());
        // The check holds one opaque call: the first the policy refuses as not understood, else the first.
        let opaques: Vec<Opaque> = singles
            .iter()
            .filter_map(|single| self.opaque(single, &single.encoded.calldata))
            .collect();
        let refused = |o: &&Opaque| not_understood(o, &policy);
        let opaque = opaques.iter().find(refused).or(opaques.first()).cloned();
        let decimals = self.limit_decimals(fixed.iter().map(|c| &c.asset_key), &outs, &moves);
        let simulation = self.simulation_view(chain, &whole, gas_used);
        let record = CallRecord {
            selector: call::selector_hex(&data),
            function: Some("execute(bytes32,bytes)".into()),
            args: None,
            data,
            simulation: serde_json::to_value(&simulation).unwrap_or_default(),
            figures: call::ledger::figures(&whole),
            calls: batched(order, decoded),
        };
        let receivers = effects
            .iter()
            .flat_map(|e| e.receivers.iter().chain(&e.spenders).copied())
            .collect();
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
                receivers,
                opaque,
                decimals,
            },
            gas_limit: gas_limit_for(gas_used),
        })
    }

    /// Each call's allowance moves: every pair any call may move, read before the first call, between the calls and
    /// after the last in one simulation, each call's moves read from the reads around it; with the supply of each
    /// token after the batch. A node that cannot run the reads beside the calls gives each call's approvals as set
    /// from nothing (they count whole).
    async fn batch_moves(
        &self,
        client: &dyn crate::chain::Node,
        order: &BatchOrder<'_>,
        (singles, decoded, effects): (&[CallOrder<'_>], &[DecodedCall], &[Effect]),
        from: Address,
        runs: &Runs<'_>,
    ) -> Result<(Vec<Vec<AllowanceMove>>, Vec<(Address, U256)>), TransferError> {
        let ledger = self
            .store
            .allowance_ledger(order.by.agent.id, order.chain.name)
            .await
            .map_err(store_error)?;
        let mut pairs: Vec<Pair> = Vec::new();
        for i in 0..singles.len() {
            for pair in counts::pairs_to_read(&singles[i], from, &decoded[i], &effects[i], &ledger) {
                if !pairs.contains(&pair) {
                    pairs.push(pair);
                }
            }
        }
        if pairs.is_empty() {
            return Ok((vec![Vec::new(); singles.len()], Vec::new()));
        }
        let mut tokens: Vec<Address> = Vec::new();
        for p in &pairs {
            if !tokens.contains(&p.token) {
                tokens.push(p.token);
            }
        }
        let reads = counts::allowance_reads(from, &pairs);
        let mut batch = runs.pending.to_vec();
        for single in singles {
            batch.extend(reads.iter().cloned());
            batch.push(sim_call(from, single.to, single.value, &single.encoded.calldata));
        }
        batch.extend(reads);
        batch.extend(counts::supply_reads(&tokens));
        let (first, block) = (runs.pending.len(), pairs.len() + 1);
        let results = match client.simulate(&batch, false, runs.rich.clone()).await {
            Ok((_, results)) if results.len() == batch.len() => results,
            Ok(_) | Err(SimulationError::Unsupported { .. } | SimulationError::InsufficientFunds) => {
                let set = |e: &Effect, chain| {
                    e.approvals
                        .iter()
                        .map(|g| {
                            AllowanceMove::set(self.name_token(chain, Some(g.token)).asset_key, g.pair(), g.amount)
                        })
                        .collect()
                };
                return Ok((effects.iter().map(|e| set(e, order.chain)).collect(), Vec::new()));
            }
            Err(SimulationError::Chain(e)) => return Err(e.into()),
        };
        let supplies_at = first + singles.len() * block + pairs.len();
        let supplies = tokens
            .iter()
            .enumerate()
            .filter_map(|(i, token)| Some((*token, counts::first_word(&results[supplies_at + i])?)))
            .collect();
        let moves = (0..singles.len())
            .map(|i| {
                self.moves_read(
                    &singles[i],
                    &decoded[i],
                    &effects[i],
                    &pairs,
                    &results[first + i * block..],
                )
            })
            .collect();
        Ok((moves, supplies))
    }
}

/// Whether `policy` refuses an opaque call as not understood (§18 `call_not_understood`).
pub(super) fn not_understood(opaque: &Opaque, policy: &crate::domain::policy::Policy) -> bool {
    match opaque {
        Opaque::Permit2 => true,
        Opaque::Contract { asset_key } => policy.limits.contains_key(asset_key),
    }
}

/// A plain call from the agent's address.
fn sim_call(from: Address, to: Address, value: U256, data: &[u8]) -> SimCall {
    SimCall {
        from,
        to,
        value,
        data: data.to_vec().into(),
        ..SimCall::default()
    }
}

/// The calls run one after another from the agent's address after `pending`: how the node simulated them, each
/// call's result, and the runs' shared override. The first call that reverts refuses the batch (`BatchReverted`).
async fn each_call<'p>(
    client: &dyn crate::chain::Node,
    order: &BatchOrder<'_>,
    from: Address,
    (pending, entry_point): (&'p [SimCall], Address),
    abis: &[&alloy::json_abi::JsonAbi],
) -> Result<(SimMethod, Vec<Simulated>, Runs<'p>), TransferError> {
    let chain = order.chain.name;
    // The agent's EntryPoint nonce and deposit, read before the calls and after each (§22: no call may move them).
    let reads = targets::entry_point_reads(from, entry_point);
    let mut batch = pending.to_vec();
    batch.extend(reads.iter().cloned());
    for c in &order.calls {
        batch.push(sim_call(from, c.to, c.value, &c.encoded.calldata));
        batch.extend(reads.iter().cloned());
    }
    let mut rich = None;
    let simulated = match client.simulate(&batch, false, None).await {
        // The wallet cannot pay the values: the verdict is reached with a balance that can (§18: funds come last).
        Err(SimulationError::InsufficientFunds) => {
            let balance = order.total().saturating_add(U256::from(10u128.pow(24)));
            let over = json!({ from.to_string(): {"balance": format!("{balance:#x}")} });
            rich = Some(over.clone());
            client.simulate(&batch, false, Some(over)).await
        }
        other => other,
    };
    let (method, results) = simulated.map_err(|e| match e {
        SimulationError::Chain(e) => TransferError::Chain(e),
        SimulationError::Unsupported { .. } | SimulationError::InsufficientFunds => {
            TransferError::SimulationUnavailable(chain.to_string())
        }
    })?;
    // A node that runs one call at a time (the call tracer) cannot say which call of a batch reverts.
    if results.len() != batch.len() {
        return Err(TransferError::SimulationUnavailable(chain.to_string()));
    }
    let ran = &results[pending.len()..];
    let each: Vec<Simulated> = ran.iter().skip(2).step_by(3).cloned().collect();
    if let Some((index, run)) = each.iter().enumerate().find(|(_, r)| !r.success) {
        return Err(TransferError::BatchReverted {
            index,
            reason: call::revert_reason(&run.return_data, abis.to_vec()),
        });
    }
    if let Some(index) = targets::entry_point_moved(ran) {
        return Err(TransferError::CallTargetDenied {
            index,
            words: format!(
                "call {index} changes the agent's nonce or deposit at the EntryPoint, which no call may do whatever \
                 the rules"
            ),
        });
    }
    Ok((method, each, Runs { pending, rich }))
}

/// The account's `execute` of the whole batch (`data`), from the agent's address to itself after the pending
/// transactions, designating the implementation where the address has no code yet: its gas used. A revert here
/// (the calls passed one by one) is named by the last call, with the reason the account bubbled up.
async fn whole_run(
    client: &dyn crate::chain::Node,
    order: &BatchOrder<'_>,
    (from, data): (Address, &[u8]),
    designate: Option<Address>,
    runs: &Runs<'_>,
    abis: &[&alloy::json_abi::JsonAbi],
) -> Result<u64, TransferError> {
    let mut overrides = runs.rich.clone().unwrap_or_else(|| json!({}));
    if let Some(implementation) = designate {
        let code = format!("0xef0100{}", alloy::hex::encode(implementation));
        overrides[from.to_string()]["code"] = json!(code);
    }
    let overrides = (overrides != json!({})).then_some(overrides);
    let mut batch = runs.pending.to_vec();
    batch.push(sim_call(from, from, U256::ZERO, data));
    let (_, results) = client.simulate(&batch, false, overrides).await.map_err(|e| match e {
        SimulationError::Chain(e) => TransferError::Chain(e),
        _ => TransferError::SimulationUnavailable(order.chain.name.to_string()),
    })?;
    match results.into_iter().nth(runs.pending.len()) {
        Some(run) if run.success => Ok(run.gas_used),
        Some(run) => Err(TransferError::BatchReverted {
            index: order.calls.len() - 1,
            reason: call::revert_reason(&run.return_data, abis.to_vec()),
        }),
        None => Err(TransferError::SimulationUnavailable(order.chain.name.to_string())),
    }
}

/// Each call's allowance moves as the batch's ledger counts them, in order (§22): a grant passes as its own call
/// set it; a pull is first covered by what earlier calls of the batch granted that spender (taken off that call's
/// token outflows, counted no more), and what is left of it is a pull from the allowance standing before the batch
/// (covered by what the service counted before, as a single call's).
fn thread(moves: Vec<Vec<AllowanceMove>>, outs: &mut [Vec<TokenOut>]) -> Vec<AllowanceMove> {
    let mut granted: Vec<(Pair, U256)> = Vec::new();
    let mut standing: Vec<(Pair, U256)> = Vec::new();
    let mut flat = Vec::new();
    for (i, call_moves) in moves.into_iter().enumerate() {
        for m in call_moves {
            let pair = Pair {
                holder: m.holder,
                token: m.token,
                spender: m.spender,
            };
            let before_batch = match standing.iter().find(|(p, _)| *p == pair) {
                Some((_, b)) => *b,
                None => {
                    standing.push((pair, m.before));
                    m.before
                }
            };
            if !granted.iter().any(|(p, _)| *p == pair) {
                granted.push((pair, U256::ZERO));
            }
            let Some((_, left)) = granted.iter_mut().find(|(p, _)| *p == pair) else {
                continue;
            };
            match m.how {
                Moved::Set => *left = m.after,
                Moved::Added => *left = left.saturating_add(m.after.saturating_sub(m.before)),
                Moved::Lowered => *left = (*left).min(m.after),
                Moved::Pulled => {
                    let fall = m.before.saturating_sub(m.after);
                    let covered = fall.min(*left);
                    *left -= covered;
                    take_off(&mut outs[i], m.token, covered);
                    let rest = fall - covered;
                    if !rest.is_zero() {
                        flat.push(AllowanceMove {
                            before: before_batch,
                            after: before_batch.saturating_sub(rest),
                            ..m
                        });
                    }
                    continue;
                }
            }
            flat.push(m);
        }
    }
    flat
}

/// `amount` of `token` taken off a call's outflows (what a grant of the same batch already counted).
fn take_off(outs: &mut [TokenOut], token: Address, mut amount: U256) {
    for out in outs.iter_mut().filter(|o| o.token == token) {
        let taken = amount.min(out.amount);
        out.amount -= taken;
        amount -= taken;
    }
}

/// The calls' token outflows summed per token and party, the empty ones left out.
fn merged(outs: impl Iterator<Item = TokenOut>) -> Vec<TokenOut> {
    let mut all: Vec<TokenOut> = Vec::new();
    for out in outs.filter(|o| !o.amount.is_zero()) {
        match all.iter_mut().find(|o| o.token == out.token && o.party == out.party) {
            Some(same) => same.amount = same.amount.saturating_add(out.amount),
            None => all.push(out),
        }
    }
    all
}

/// Each call as the record keeps it, with what its calldata was decoded as.
fn batched(order: &BatchOrder<'_>, decoded: Vec<DecodedCall>) -> Vec<BatchedCall> {
    order
        .calls
        .iter()
        .zip(decoded)
        .map(|(c, d)| BatchedCall {
            to: c.to,
            value: c.value,
            data: c.encoded.calldata.clone(),
            selector: d.selector,
            function: d.function,
            args: d.args,
        })
        .collect()
}
