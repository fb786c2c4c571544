//! Contract calls (docs/api.md §18), a third kind of outflow on the one send path: the call is simulated from the
//! agent's address before anything is signed, its effect on the wallet read from the simulation's logs
//! (`domain::call::effect`), and what it takes or allows counted against the assets' limits in the reserving
//! transaction, beside the `calls` rules and the unlimited-approval guard (`domain::decision`). A call that reverts
//! is refused with its decoded reason; a node that cannot simulate refuses every call.

use alloy::primitives::{Address, U256};
use alloy::sol_types::SolCall;
use serde::Serialize;
use serde_json::json;
use uuid::Uuid;

use super::kinds::{CallDraft, Outflow, Purpose};
use super::send::Judged;
use super::{AuditProtocol, Transacting, TransferError, TransferOutcome, Transfers, store_error};
use crate::chain::simulate::{SimCall, Simulated, SimulationError};
use crate::domain::amount::format_units;
use crate::domain::asset::{self, Asset};
use crate::domain::audit::OwedEntry;
use crate::domain::audit::detail::{Asked, CallAsked, CallKind, CallPreview};
use crate::domain::call::ledger::{AllowanceMove, Moved, TokenOut};
use crate::domain::call::{self, Direction, Effect, Encoded, SimLog};
use crate::domain::chain::ChainInfo;
use crate::domain::decision::Counted;
use crate::domain::transaction::CallRecord;
use crate::store::{CallCheck, Clearance};

alloy::sol! {
    function allowance(address owner, address spender) external view returns (uint256);
    function totalSupply() external view returns (uint256);
}

mod permit2 {
    alloy::sol! {
        /// Permit2's own allowances (`AllowanceTransfer`): the amount, its expiration and the nonce.
        function allowance(address owner, address token, address spender) external view returns (uint160, uint48, uint48);
    }
}

/// The gas limit signed: what the simulation used, and half more. A node reports gas used after refunds (up to a
/// fifth of it, EIP-3529, when a call clears storage such as an allowance spent to zero), nested calls keep back a
/// 64th of what they are given, and state may move before it is mined; unused gas is not paid.
fn gas_limit_for(gas_used: u64) -> u64 {
    gas_used.saturating_add(gas_used / 2).saturating_add(10_000).max(21_000)
}

/// A call the agent was asked to make.
pub struct CallOrder<'a> {
    /// The agent, checked for the `transact` capability, with who asked and the mandate the request came with.
    pub by: Transacting<'a>,
    pub chain: &'static ChainInfo,
    pub to: Address,
    /// Native value, in wei.
    pub value: U256,
    pub encoded: Encoded,
    pub conversation_id: Option<Uuid>,
    /// Whether the agent is guarded (an admin token, or owner addresses): when no rule decides, a guarded agent's
    /// calls are refused.
    pub guarded: bool,
}

impl CallOrder<'_> {
    /// The previewed call from `from` as the one send path takes it (and its preview judges it).
    fn outflow(&self, from: Address, previewed: &Previewed) -> Outflow<'_> {
        Outflow {
            id: Uuid::new_v4(),
            agent_id: self.by.agent.id,
            chain: self.chain,
            conversation_id: self.conversation_id,
            from,
            to: self.to,
            value: self.value,
            purpose: Purpose::Call(Box::new(CallDraft {
                record: previewed.record.clone(),
                check: Some(previewed.check.clone()),
                gas_limit: previewed.gas_limit,
            })),
            clearance: Clearance::Policy,
            mandate: self.by.mandate.clone(),
            owed: Some(OwedEntry::Call {
                actor: self.by.actor,
                asked: self.asked(Some(previewed)),
            }),
        }
    }

    /// What its audit entry records was asked: the call, with its function and simulated changes once previewed.
    fn asked(&self, previewed: Option<&Previewed>) -> CallAsked {
        CallAsked {
            chain: self.chain.name.into(),
            to: self.to.to_checksum(None),
            kind: CallKind::Call,
            amount: format_units(self.value, self.chain.decimals),
            previewed: previewed.map(|previewed| CallPreview {
                selector: previewed.record.selector.clone(),
                function: previewed.record.function.clone(),
                simulation: previewed.record.simulation.clone(),
            }),
        }
    }
}

/// One balance change of the agent's (§18 `simulation.changes`).
#[derive(Debug, Clone, Serialize, serde::Deserialize, PartialEq, Eq)]
pub struct ChangeView {
    pub asset: String,
    pub token: Option<String>,
    pub amount: String,
    pub direction: String,
}

/// One allowance the call grants (§18 `simulation.approvals`).
#[derive(Debug, Clone, Serialize, serde::Deserialize, PartialEq, Eq)]
pub struct AllowanceView {
    pub token: String,
    pub spender: String,
    pub amount: String,
    pub unlimited: bool,
}

/// What the simulation showed (§18 `simulation`).
#[derive(Debug, Clone, Serialize, serde::Deserialize, PartialEq, Eq)]
pub struct SimulationView {
    pub changes: Vec<ChangeView>,
    pub approvals: Vec<AllowanceView>,
    pub gas_used: u64,
}

/// A simulated call: what it is, what it would do, and what its reservation will judge.
#[derive(Debug, Clone)]
pub struct Previewed {
    pub record: CallRecord,
    pub simulation: SimulationView,
    pub check: CallCheck,
    pub gas_limit: u64,
}

/// An asset of the chain as the policy and the views name it: a registry asset by its symbol (amounts in whole
/// units), any other token by its lower-case address (amounts in base units).
pub(super) struct Named {
    pub asset_key: String,
    pub registry: Option<Asset>,
}

impl Named {
    pub(super) fn amount(&self, value: U256) -> String {
        match &self.registry {
            Some(asset) => format_units(value, asset.decimals),
            None => value.to_string(),
        }
    }
}

impl Transfers {
    pub(super) fn name_token(&self, chain: &'static ChainInfo, token: Option<Address>) -> Named {
        match token {
            None => Named {
                asset_key: asset::key(chain.name, chain.native_symbol),
                registry: Some(Asset::native(chain)),
            },
            Some(address) => match self.chains.tokens().find(chain, &address.to_checksum(None)) {
                Some(found) => Named {
                    asset_key: found.key(),
                    registry: Some(found),
                },
                None => Named {
                    asset_key: format!("{}:{}", chain.name, format!("{address:#x}").to_lowercase()),
                    registry: None,
                },
            },
        }
    }

    /// The decimals the policy's limits of each asset a call or signature may count are written in (`CallCheck::
    /// decimals`): those of its native value or allowances (`fixed`), its token outflows and its allowance moves.
    pub(super) fn limit_decimals<'k>(
        &self,
        fixed: impl Iterator<Item = &'k String>,
        outs: &'k [TokenOut],
        moves: &'k [AllowanceMove],
    ) -> std::collections::BTreeMap<String, u8> {
        let keys = fixed
            .chain(outs.iter().map(|o| &o.asset_key))
            .chain(moves.iter().map(|m| &m.asset_key));
        keys.map(|key| {
            let decimals = self.chains.tokens().limit_key(key).map_or(0, |(_, d)| d);
            (key.clone(), decimals)
        })
        .collect()
    }

    /// Simulates the call from the agent's wallet on top of the latest block and reads what it would do. A revert
    /// is `CallReverted` with its decoded reason; a node that cannot simulate, `SimulationUnavailable`.
    pub async fn preview_call(&self, order: &CallOrder<'_>) -> Result<Previewed, TransferError> {
        let pending = self.pending_calls(order).await?;
        self.preview_after(order, &pending).await
    }

    /// The agent's own transactions on the order's chain that the node has not mined yet, in nonce order, as the
    /// simulation replays them before the call (§18: the call as it will land, after them). Read from the store, their
    /// signed bytes decoded; those below the node's mined nonce have landed and are not replayed.
    async fn pending_calls(&self, order: &CallOrder<'_>) -> Result<Vec<SimCall>, TransferError> {
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
    async fn preview_after(&self, order: &CallOrder<'_>, pending: &[SimCall]) -> Result<Previewed, TransferError> {
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
        let mut batch = pending.to_vec();
        batch.push(run.clone());
        let simulated = match client.simulate(&batch, false, None).await {
            // The wallet cannot pay the value: the verdict is reached with a balance that can, and the reservation
            // refuses it for its funds last (§18).
            Err(SimulationError::InsufficientFunds) => {
                let rich = json!({ from.to_string(): {"balance": format!("{:#x}", order.value.saturating_add(U256::from(10u128.pow(24))))} });
                client.simulate(&batch, false, Some(rich)).await
            }
            other => other,
        };
        let (method, results) = simulated.map_err(|e| match e {
            SimulationError::Unsupported { chain } => TransferError::SimulationUnavailable(chain),
            SimulationError::InsufficientFunds => TransferError::SimulationUnavailable(chain.name.to_string()),
            SimulationError::Chain(e) => TransferError::Chain(e),
        })?;
        let Some(first) = results.into_iter().nth(pending.len()) else {
            return Err(TransferError::SimulationUnavailable(chain.name.to_string()));
        };
        let revert = |r: &Simulated| {
            let abis = policy
                .calls
                .as_ref()
                .map(|c| c.abis.values().collect::<Vec<_>>())
                .unwrap_or_default();
            TransferError::CallReverted(call::revert_reason(&r.return_data, abis))
        };
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
        let logs: Vec<SimLog> = logs
            .into_iter()
            .map(|l| SimLog {
                address: l.address,
                topics: l.topics,
                data: l.data,
            })
            .collect();
        let mut effect = call::effect(&logs, from);
        if method == crate::chain::simulate::SimMethod::TraceCall && !order.value.is_zero() {
            // The call tracer shows no native moves as logs: the value the agent sends is its own outflow.
            effect.changes.insert(
                0,
                call::Change {
                    token: None,
                    amount: order.value,
                    direction: Direction::Out,
                },
            );
        }
        let (moves, supplies) = self
            .allowance_moves(client, order, from, &decoded, &effect, (pending, &run))
            .await?;
        // Unlimited: §18's amounts, or at least the token's whole supply as the simulation reads it after the call.
        let whole_supply = |token: Address, amount: U256| {
            supplies
                .iter()
                .any(|(t, supply)| *t == token && !supply.is_zero() && amount >= *supply)
        };
        let unlimited = call::grants_unlimited(&decoded)
            || effect
                .approvals
                .iter()
                .any(|g| g.unlimited || call::is_unlimited_amount(g.amount) || whole_supply(g.token, g.amount))
            || moves
                .iter()
                .any(|m| matches!(m.how, Moved::Set | Moved::Added) && whole_supply(m.token, m.after));
        let (fixed, outs) = self.outflows(chain, order, from, &decoded, &effect);
        let simulation = self.simulation_view(chain, &effect, gas_used);
        // Only the standard functions are decoded into counts; any other selector at Permit2 or a limited token is
        // refused (§18), whatever the request or a policy ABI calls it.
        let standard = data
            .get(..4)
            .is_some_and(|s| call::known::function(alloy::primitives::Selector::from_slice(s)).is_some());
        let opaque = match (standard, order.to == crate::domain::call::typed::PERMIT2) {
            (true, _) => None,
            (false, true) => Some(crate::domain::decision::Opaque::Permit2),
            (false, false) => Some(crate::domain::decision::Opaque::Contract {
                asset_key: self.name_token(chain, Some(order.to)).asset_key,
            }),
        };
        let decimals = self.limit_decimals(fixed.iter().map(|c| &c.asset_key), &outs, &moves);
        let record = CallRecord {
            data,
            selector: decoded.selector,
            function: decoded.function,
            args: decoded.args,
            simulation: serde_json::to_value(&simulation).unwrap_or_default(),
            figures: call::ledger::figures(&effect),
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
        let (node, fees) = tokio::join!(client.pending_nonce(from), client.recent_fees(super::FEE_MAX_AGE));
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
            Ok((crate::chain::simulate::SimMethod::SimulateV1, results)) => Ok(results.into_iter().nth(pending.len())),
            Ok(_) | Err(SimulationError::InsufficientFunds | SimulationError::Unsupported { .. }) => Ok(None),
            Err(SimulationError::Chain(e)) => {
                tracing::warn!(chain = order.chain.name, error = %e, "the validated simulation was refused; the first run stands");
                Ok(None)
            }
        }
    }

    /// What the call counts whatever the ledger holds (its native value, to the called contract), and what leaves
    /// the wallet of each token (judged, where no counted allowance covers it, by the recipient a token `transfer`
    /// names, else by the called contract: a swap is judged by the router it goes through).
    fn outflows(
        &self,
        chain: &'static ChainInfo,
        order: &CallOrder<'_>,
        order_from: Address,
        decoded: &call::DecodedCall,
        effect: &Effect,
    ) -> (Vec<Counted>, Vec<TokenOut>) {
        let mut fixed = Vec::new();
        if !order.value.is_zero() {
            fixed.push(Counted {
                asset_key: asset::key(chain.name, chain.native_symbol),
                value: order.value,
                party: order.to,
            });
        }
        // A single ERC-721 token approved hands one unit of its collection to the spender at once (§18).
        for (collection, spender) in &effect.token_approvals {
            fixed.push(Counted {
                asset_key: self.name_token(chain, Some(*collection)).asset_key,
                value: U256::from(1u8),
                party: *spender,
            });
        }
        let address = |v: &serde_json::Value| v.as_str().and_then(|t| t.parse::<Address>().ok());
        // A token sent by the agent itself goes through no allowance: it is judged by its receiver, also when the
        // agent pulls it through an allowance of its own (`transferFrom(agent, X, …)`, §18).
        let direct_recipient = match (decoded.function.as_deref(), decoded.args.as_deref()) {
            (Some("transfer(address,uint256)"), Some([to, _])) => address(to),
            (
                Some(
                    "transferFrom(address,address,uint256)"
                    | "safeTransferFrom(address,address,uint256)"
                    | "safeTransferFrom(address,address,uint256,bytes)"
                    | "safeTransferFrom(address,address,uint256,uint256,bytes)"
                    | "safeBatchTransferFrom(address,address,uint256[],uint256[],bytes)",
                ),
                Some([owner, to, ..]),
            ) if address(owner) == Some(order_from) => address(to),
            _ => None,
        };
        let outs = effect
            .changes
            .iter()
            .filter(|c| c.direction == Direction::Out)
            .filter_map(|c| {
                let token = c.token?;
                Some(TokenOut {
                    asset_key: self.name_token(chain, Some(token)).asset_key,
                    token,
                    amount: c.amount,
                    party: direct_recipient.unwrap_or(order.to),
                })
            })
            .collect();
        (fixed, outs)
    }

    /// The allowances the call moves: each read just before and just after it in one simulation (ERC-20's
    /// `allowance(agent, spender)` on the token, Permit2's `allowance(agent, token, spender)` for its own), for each
    /// pair its approval events name, its top function names, the called contract as a spender of every token it
    /// moves or approves, and every pair the service counted before for those tokens; each with how the call moved
    /// it (`ledger::how_moved`). A node that cannot run the reads beside the call (no `eth_simulateV1`) gives the
    /// approvals as set from nothing: each counts whole.
    async fn allowance_moves(
        &self,
        client: &dyn crate::chain::Node,
        order: &CallOrder<'_>,
        from: Address,
        decoded: &call::DecodedCall,
        effect: &Effect,
        (pending, run): (&[SimCall], &SimCall),
    ) -> Result<(Vec<AllowanceMove>, Vec<(Address, U256)>), TransferError> {
        use crate::domain::call::ledger::{Pair, TopCall, how_moved};
        use crate::domain::call::typed::PERMIT2;
        let chain = order.chain;
        let ledger = self
            .store
            .allowance_ledger(order.by.agent.id, chain.name)
            .await
            .map_err(store_error)?;
        let mut pairs: Vec<Pair> = Vec::new();
        let mut add = |holder: Address, token: Address, spender: Address| {
            let pair = Pair { holder, token, spender };
            if spender != from && !pairs.contains(&pair) {
                pairs.push(pair);
            }
        };
        for grant in &effect.approvals {
            add(grant.holder, grant.token, grant.spender);
        }
        let args = decoded.args.as_deref().unwrap_or_default();
        let arg = |i: usize| args.get(i).and_then(|a| a.as_str()?.parse::<Address>().ok());
        match decoded.function.as_deref() {
            Some(
                "approve(address,uint256)"
                | "increaseAllowance(address,uint256)"
                | "decreaseAllowance(address,uint256)",
            ) => {
                if let Some(spender) = arg(0) {
                    add(order.to, order.to, spender);
                }
            }
            Some(
                "permit(address,address,uint256,uint256,uint8,bytes32,bytes32)"
                | "permit(address,address,uint256,uint256,bool,uint8,bytes32,bytes32)",
            ) => {
                if let Some(spender) = arg(1) {
                    add(order.to, order.to, spender);
                }
            }
            Some("approve(address,address,uint160,uint48)") if order.to == PERMIT2 => {
                if let (Some(token), Some(spender)) = (arg(0), arg(1)) {
                    add(PERMIT2, token, spender);
                }
            }
            _ => {}
        }
        let mut tokens: Vec<Address> = effect.changes.iter().filter_map(|c| c.token).collect();
        tokens.extend(effect.approvals.iter().map(|g| g.token));
        for token in tokens {
            add(token, token, order.to);
            for row in ledger.iter().filter(|l| l.token == token) {
                add(row.holder, token, row.spender);
            }
        }
        if pairs.is_empty() {
            return Ok((Vec::new(), Vec::new()));
        }
        // The supply of each token an allowance of which may be granted, read after the call.
        let mut granted_tokens: Vec<Address> = Vec::new();
        for p in &pairs {
            if !granted_tokens.contains(&p.token) {
                granted_tokens.push(p.token);
            }
        }
        let reads: Vec<SimCall> = pairs
            .iter()
            .map(|p| SimCall {
                from: Address::ZERO,
                to: p.holder,
                data: match p.holder == p.token {
                    true => allowanceCall {
                        owner: from,
                        spender: p.spender,
                    }
                    .abi_encode()
                    .into(),
                    false => permit2::allowanceCall {
                        owner: from,
                        token: p.token,
                        spender: p.spender,
                    }
                    .abi_encode()
                    .into(),
                },
                ..SimCall::default()
            })
            .collect();
        let mut batch = pending.to_vec();
        batch.extend(reads.iter().cloned());
        batch.push(run.clone());
        batch.extend(reads);
        batch.extend(granted_tokens.iter().map(|token| SimCall {
            from: Address::ZERO,
            to: *token,
            data: totalSupplyCall {}.abi_encode().into(),
            ..SimCall::default()
        }));
        let first = pending.len();
        // Both reads answer the amount in their first word (Permit2's is a uint160 beside its expiration and nonce).
        let read =
            |r: &Simulated| (r.success && r.return_data.len() >= 32).then(|| U256::from_be_slice(&r.return_data[..32]));
        let top = TopCall {
            to: order.to,
            function: decoded.function.as_deref(),
            args,
        };
        let out_of = |token: Address| {
            effect
                .changes
                .iter()
                .filter(|c| c.token == Some(token) && c.direction == Direction::Out)
                .fold(U256::ZERO, |t, c| t.saturating_add(c.amount))
        };
        let simulated = client.simulate(&batch, false, None).await;
        let supplies: Vec<(Address, U256)> = match &simulated {
            Ok((_, results)) if results.len() == batch.len() => {
                let at = first + 2 * pairs.len() + 1;
                granted_tokens
                    .iter()
                    .enumerate()
                    .filter_map(|(i, token)| Some((*token, read(&results[at + i])?)))
                    .collect()
            }
            _ => Vec::new(),
        };
        let moves = match simulated {
            Ok((_, results)) if results.len() == batch.len() => pairs
                .iter()
                .enumerate()
                .filter_map(|(i, p)| {
                    let before = read(&results[first + i])?;
                    let after = read(&results[first + pairs.len() + 1 + i])?;
                    let granted = effect
                        .approvals
                        .iter()
                        .any(|g| g.holder == p.holder && g.token == p.token && g.spender == p.spender);
                    Some(AllowanceMove {
                        asset_key: self.name_token(chain, Some(p.token)).asset_key,
                        holder: p.holder,
                        token: p.token,
                        spender: p.spender,
                        before,
                        after,
                        how: how_moved(&top, p, PERMIT2, (before, after), granted, out_of(p.token)),
                    })
                })
                .collect(),
            Ok(_) | Err(SimulationError::Unsupported { .. }) => effect
                .approvals
                .iter()
                .map(|g| AllowanceMove::set(self.name_token(chain, Some(g.token)).asset_key, g.pair(), g.amount))
                .collect(),
            Err(SimulationError::InsufficientFunds) => Vec::new(),
            Err(SimulationError::Chain(e)) => return Err(e.into()),
        };
        Ok((moves, supplies))
    }

    fn simulation_view(&self, chain: &'static ChainInfo, effect: &Effect, gas_used: u64) -> SimulationView {
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

    /// Simulates, judges and — when allowed — signs and sends the call (see the module's doc). Audited as a
    /// transfer is, with the call's function and its simulated changes.
    #[tracing::instrument(skip_all, fields(agent_id = %order.by.agent.id, chain = order.chain.name))]
    pub async fn call(&self, order: CallOrder<'_>) -> Result<(TransferOutcome, Previewed), TransferError> {
        let outcome = self.try_call(&order).await;
        let previewed = match &outcome {
            Ok((_, previewed)) => Some(previewed),
            Err((_, previewed)) => previewed.as_ref(),
        };
        let asked = Asked::Call(order.asked(previewed));
        let result = outcome.as_ref().map(|(o, _)| o).map_err(|(e, _)| e);
        // A call that was stored was reserved with its entry kept (`CallOrder::outflow`).
        self.record_owed(
            order.by.agent.id,
            order.by.actor,
            asked,
            result,
            AuditProtocol::KeptWithReservation,
        )
        .await;
        outcome.map_err(|(e, _)| e)
    }

    async fn try_call(
        &self,
        order: &CallOrder<'_>,
    ) -> Result<(TransferOutcome, Previewed), (TransferError, Option<Previewed>)> {
        // Under the agent's send lock from the simulation to the signature: nothing of the agent's lands between
        // them, and the call is simulated after the agent's transactions still pending (§18).
        let guard = self
            .store
            .lock_sender(order.by.agent.id, order.chain.name)
            .await
            .map_err(|e| (store_error(e), None))?;
        let pending = self.pending_calls(order).await.map_err(|e| (e, None))?;
        let previewed = self.preview_after(order, &pending).await.map_err(|e| (e, None))?;
        let from = *order
            .by
            .agent
            .wallet_addresses
            .get(order.chain.name)
            .ok_or((TransferError::NoWallet, None))?;
        let sent = self
            .send_outflow_locked(order.outflow(from, &previewed), Some(guard))
            .await;
        match sent {
            Ok(outcome) => Ok((outcome, previewed)),
            Err(e) => Err((e, Some(previewed))),
        }
    }
}

/// The verdict a call's simulation reports (§18 `decision`): what its reservation would decide now.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct DecisionView {
    /// `allow`, `deny` or `approve`.
    pub result: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub code: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rule: Option<&'static str>,
    /// A refusal in the words its error would give (`deny` only). Not part of `decision`, whose keys §18 names:
    /// the answer carries it beside it.
    #[serde(skip)]
    pub message: Option<String>,
}

impl DecisionView {
    fn deny(error: &TransferError) -> Self {
        let rule = error.policy_rule();
        DecisionView {
            result: "deny",
            code: Some(if rule.is_some() { "policy_denied" } else { error.code() }),
            rule: rule.map(|r| r.as_str()),
            message: Some(error.to_string()),
        }
    }
}

impl Transfers {
    /// The verdict on a previewed call: the one decision its reservation would reach now (the same request, facts
    /// and `decide`, under the agent's lock), with nothing reserved, signed or written.
    pub async fn judge_call(
        &self,
        order: &CallOrder<'_>,
        previewed: &Previewed,
    ) -> Result<DecisionView, TransferError> {
        let from = *order
            .by
            .agent
            .wallet_addresses
            .get(order.chain.name)
            .ok_or(TransferError::NoWallet)?;
        Ok(match self.judge_outflow(&order.outflow(from, previewed)).await? {
            Judged::Allow => DecisionView {
                result: "allow",
                code: None,
                rule: None,
                message: None,
            },
            Judged::Approve => DecisionView {
                result: "approve",
                code: None,
                rule: None,
                message: None,
            },
            Judged::Deny(e) => DecisionView::deny(&e),
        })
    }
}

impl Transfers {
    /// Simulates a held call again before it is approved: refused (`SimulationChanged`, it stays waiting) when any
    /// outflow or allowance grew, or one appeared that the owner was not shown. Its answer is what the approved
    /// call counts and leaves in the allowance ledger when it is reserved for signing (§18: nothing before).
    pub(super) async fn check_unchanged(
        &self,
        agent: &crate::domain::agent::Agent,
        chain: &'static ChainInfo,
        approval: &crate::store::Approval,
        record: &CallRecord,
    ) -> Result<CallCheck, TransferError> {
        let order = CallOrder {
            by: Transacting::approved(agent),
            chain,
            to: approval.to,
            value: approval.value_wei,
            encoded: call::Encoded {
                calldata: record.data.clone(),
                function: None,
            },
            conversation_id: approval.conversation_id,
            guarded: true,
        };
        let previewed = self.preview_call(&order).await?;
        let now = previewed.simulation;
        let shown: SimulationView = serde_json::from_value(record.simulation.clone()).map_err(|e| {
            store_error(crate::store::StoreError::Corrupt(format!(
                "call_record.simulation: {e}"
            )))
        })?;
        let amount = |text: &str| crate::domain::amount::parse_units(text, 36).unwrap_or(U256::MAX);
        for change in now.changes.iter().filter(|c| c.direction == "out") {
            let before = shown
                .changes
                .iter()
                .find(|c| c.direction == "out" && c.asset == change.asset);
            if before.is_none_or(|b| amount(&change.amount) > amount(&b.amount)) {
                return Err(TransferError::SimulationChanged(format!(
                    "{} {} out",
                    change.amount, change.asset
                )));
            }
        }
        for grant in &now.approvals {
            let before = shown
                .approvals
                .iter()
                .find(|g| g.token == grant.token && g.spender == grant.spender);
            if before.is_none_or(|b| amount(&grant.amount) > amount(&b.amount) || (grant.unlimited && !b.unlimited)) {
                return Err(TransferError::SimulationChanged(format!(
                    "an allowance of {} to {}",
                    grant.amount, grant.spender
                )));
            }
        }
        Ok(previewed.check)
    }
}
