//! What a call moves, counted against the assets' limits: what leaves the wallet (its native value, each token out)
//! and the allowances it sets, raises or spends, each read just before and just after it.

use alloy::primitives::{Address, U256};
use alloy::sol_types::SolCall;

use super::CallOrder;
use crate::chain::simulate::{SimCall, Simulated, SimulationError};
use crate::domain::asset;
use crate::domain::call::ledger::{AllowanceMove, Moved, Pair, Remaining, TokenOut, TopCall, how_moved};
use crate::domain::call::typed::PERMIT2;
use crate::domain::call::{self, Direction, Effect};
use crate::domain::chain::ChainInfo;
use crate::domain::decision::{Counted, Opaque};
use crate::transfers::{TransferError, Transfers, store_error};

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

impl Transfers {
    /// What the call counts whatever the ledger holds (its native value, to the called contract), and what leaves
    /// the wallet of each token (judged, where no counted allowance covers it, by the recipient a token `transfer`
    /// names, else by the called contract: a swap is judged by the router it goes through).
    pub(super) fn outflows(
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
    pub(super) async fn allowance_moves(
        &self,
        client: &dyn crate::chain::Node,
        order: &CallOrder<'_>,
        from: Address,
        decoded: &call::DecodedCall,
        effect: &Effect,
        (pending, run): (&[SimCall], &SimCall),
    ) -> Result<(Vec<AllowanceMove>, Vec<(Address, U256)>), TransferError> {
        let chain = order.chain;
        let ledger = self
            .store
            .allowance_ledger(order.by.agent.id, chain.name)
            .await
            .map_err(store_error)?;
        let pairs = pairs_to_read(order, from, decoded, effect, &ledger);
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
        let batch = reads_around_the_call(from, &pairs, &granted_tokens, (pending, run));
        let first = pending.len();
        let simulated = client.simulate(&batch, false, None).await;
        let supplies: Vec<(Address, U256)> = match &simulated {
            Ok((_, results)) if results.len() == batch.len() => {
                let at = first + 2 * pairs.len() + 1;
                granted_tokens
                    .iter()
                    .enumerate()
                    .filter_map(|(i, token)| Some((*token, first_word(&results[at + i])?)))
                    .collect()
            }
            _ => Vec::new(),
        };
        let moves = match simulated {
            Ok((_, results)) if results.len() == batch.len() => {
                self.moves_read(order, decoded, effect, &pairs, &results[first..])
            }
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

    /// Each pair's allowance move, from `results` (the reads before the call, the call, the reads after it): how the
    /// call moved it (`ledger::how_moved`), beside what it took of the token. A pair whose reads failed is left out.
    pub(super) fn moves_read(
        &self,
        order: &CallOrder<'_>,
        decoded: &call::DecodedCall,
        effect: &Effect,
        pairs: &[Pair],
        results: &[Simulated],
    ) -> Vec<AllowanceMove> {
        let top = TopCall {
            to: order.to,
            function: decoded.function.as_deref(),
            args: decoded.args.as_deref().unwrap_or_default(),
        };
        let out_of = |token: Address| {
            effect
                .changes
                .iter()
                .filter(|c| c.token == Some(token) && c.direction == Direction::Out)
                .fold(U256::ZERO, |t, c| t.saturating_add(c.amount))
        };
        pairs
            .iter()
            .enumerate()
            .filter_map(|(i, p)| {
                let before = first_word(&results[i])?;
                let after = first_word(&results[pairs.len() + 1 + i])?;
                let granted = effect
                    .approvals
                    .iter()
                    .any(|g| g.holder == p.holder && g.token == p.token && g.spender == p.spender);
                Some(AllowanceMove {
                    asset_key: self.name_token(order.chain, Some(p.token)).asset_key,
                    holder: p.holder,
                    token: p.token,
                    spender: p.spender,
                    before,
                    after,
                    how: how_moved(&top, p, PERMIT2, (before, after), granted, out_of(p.token)),
                })
            })
            .collect()
    }

    /// Whether the call is opaque to the counts: only the standard functions are decoded into counts; any other
    /// selector at Permit2 or a limited token is refused (§18), whatever the request or a policy ABI calls it.
    pub(super) fn opaque(&self, order: &CallOrder<'_>, data: &[u8]) -> Option<Opaque> {
        let standard = data
            .get(..4)
            .is_some_and(|s| call::known::function(alloy::primitives::Selector::from_slice(s)).is_some());
        match (standard, order.to == PERMIT2) {
            (true, _) => None,
            (false, true) => Some(Opaque::Permit2),
            (false, false) => Some(Opaque::Contract {
                asset_key: self.name_token(order.chain, Some(order.to)).asset_key,
            }),
        }
    }
}

/// Whether the call grants an unlimited allowance: §18's amounts, or at least the token's whole supply as the
/// simulation reads it after the call.
pub(super) fn grants_unlimited(
    decoded: &call::DecodedCall,
    effect: &Effect,
    moves: &[AllowanceMove],
    supplies: &[(Address, U256)],
) -> bool {
    let whole_supply = |token: Address, amount: U256| {
        supplies
            .iter()
            .any(|(t, supply)| *t == token && !supply.is_zero() && amount >= *supply)
    };
    call::grants_unlimited(decoded)
        || effect
            .approvals
            .iter()
            .any(|g| g.unlimited || call::is_unlimited_amount(g.amount) || whole_supply(g.token, g.amount))
        || moves
            .iter()
            .any(|m| matches!(m.how, Moved::Set | Moved::Added) && whole_supply(m.token, m.after))
}

/// The allowances to read around the call: each pair its approval events name, its top function names, the called
/// contract as a spender of every token it moves or approves, and every pair the service counted before for those
/// tokens; never one whose spender is the agent itself.
pub(super) fn pairs_to_read(
    order: &CallOrder<'_>,
    from: Address,
    decoded: &call::DecodedCall,
    effect: &Effect,
    ledger: &[Remaining],
) -> Vec<Pair> {
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
            "approve(address,uint256)" | "increaseAllowance(address,uint256)" | "decreaseAllowance(address,uint256)",
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
    pairs
}

/// One simulation: `pending`, each pair's allowance read, the call, each read again, then the supply of each of
/// `tokens` (ERC-20's `allowance(agent, spender)` on the token, Permit2's `allowance(agent, token, spender)` for its
/// own).
fn reads_around_the_call(
    from: Address,
    pairs: &[Pair],
    tokens: &[Address],
    (pending, run): (&[SimCall], &SimCall),
) -> Vec<SimCall> {
    let reads = allowance_reads(from, pairs);
    let mut batch = pending.to_vec();
    batch.extend(reads.iter().cloned());
    batch.push(run.clone());
    batch.extend(reads);
    batch.extend(supply_reads(tokens));
    batch
}

/// Each pair's allowance of `from`, read (ERC-20's `allowance(agent, spender)` on the token, Permit2's
/// `allowance(agent, token, spender)` for its own).
pub(super) fn allowance_reads(from: Address, pairs: &[Pair]) -> Vec<SimCall> {
    pairs
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
        .collect()
}

/// The supply of each of `tokens`, read.
pub(super) fn supply_reads(tokens: &[Address]) -> impl Iterator<Item = SimCall> + '_ {
    tokens.iter().map(|token| SimCall {
        from: Address::ZERO,
        to: *token,
        data: totalSupplyCall {}.abi_encode().into(),
        ..SimCall::default()
    })
}

/// A read's amount: both allowance reads answer it in their first word (Permit2's is a uint160 beside its expiration
/// and nonce), as `totalSupply` does.
pub(super) fn first_word(r: &Simulated) -> Option<U256> {
    (r.success && r.return_data.len() >= 32).then(|| U256::from_be_slice(&r.return_data[..32]))
}
