//! What a call or a signature counts against the assets' limits once the allowances the service already counted are
//! known (§18, "Counting that holds against a hostile agent"): a grant that sets an allowance counts the whole
//! amount it sets, whatever stood before (the spender may take the standing one first); a grant that adds counts
//! what it adds; a grant to 0 and a decrease count nothing; a pull within an allowance already counted does not
//! count again; what leaves the wallet otherwise counts. Pure: the store reads the ledger and applies the updates
//! in the reserving transaction.

use alloy::primitives::{Address, U256};

/// One amount a call counts against an asset's limits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Counted {
    /// The policy's asset key (`base:USDC`, or `base:<token address>` for a token outside the registry).
    pub asset_key: String,
    /// In base units of the asset.
    pub value: U256,
    /// The spender of an allowance, or the receiver of a direct outflow.
    pub party: Address,
}

/// How a call or signature moved one allowance.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Moved {
    /// Set to `after` (`approve`, a permit, Permit2's `approve`, or any rise the call shows): counts `after` whole.
    Set,
    /// Raised by `after - before` (`increaseAllowance`): counts the rise.
    Added,
    /// Lowered by the agent (`decreaseAllowance`, Permit2's `lockdown`): counts nothing, pulls nothing.
    Lowered,
    /// Fell because the spender pulled through it in this call (or nothing moved): not a grant.
    Pulled,
}

/// One allowance a call may move: kept by `holder` (the token itself, or Permit2) for `token` and `spender`, read
/// just before and just after the call in its simulation, and how the call moved it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AllowanceMove {
    pub asset_key: String,
    pub holder: Address,
    pub token: Address,
    pub spender: Address,
    pub before: U256,
    pub after: U256,
    pub how: Moved,
}

impl AllowanceMove {
    /// An allowance set to `amount` by a grant whose standing allowance is not known (a permit; a node that cannot
    /// read it): it counts whole.
    pub fn set(asset_key: String, pair: Pair, amount: U256) -> Self {
        AllowanceMove {
            asset_key,
            holder: pair.holder,
            token: pair.token,
            spender: pair.spender,
            before: U256::ZERO,
            after: amount,
            how: Moved::Set,
        }
    }
}

/// What leaves the wallet of one token in the call (summed).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TokenOut {
    pub asset_key: String,
    pub token: Address,
    pub amount: U256,
    /// Whom the recipient rules judge for what is not pulled through a counted allowance.
    pub party: Address,
}

/// What is left of an allowance the service counted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Remaining {
    pub holder: Address,
    pub token: Address,
    pub spender: Address,
    pub remaining: U256,
}

/// The counts of a call and the ledger rows it leaves, from `fixed` (its native value), its token outflows, its
/// allowance moves and the ledger as read under the agent's lock (`ledger`, rows of the pairs moved).
pub fn count(
    fixed: &[Counted],
    outs: &[TokenOut],
    moves: &[AllowanceMove],
    ledger: &[Remaining],
) -> (Vec<Counted>, Vec<Remaining>) {
    let mut counts = fixed.to_vec();
    let mut updates = Vec::new();
    let mut covered: Vec<(Address, U256)> = Vec::new();
    for m in moves {
        let counted = ledger
            .iter()
            .find(|l| l.holder == m.holder && l.token == m.token && l.spender == m.spender)
            .map_or(U256::ZERO, |l| l.remaining);
        // Pulled or lowered outside the service since it was counted: only what is still allowed stays counted.
        let mut left = counted.min(m.before);
        let mut grant = |value: U256| {
            if !value.is_zero() {
                counts.push(Counted {
                    asset_key: m.asset_key.clone(),
                    value,
                    party: m.spender,
                });
            }
        };
        match m.how {
            Moved::Set => {
                grant(m.after);
                left = m.after;
            }
            Moved::Added => {
                let rise = m.after.saturating_sub(m.before);
                grant(rise);
                left = left.saturating_add(rise);
            }
            Moved::Lowered => left = left.min(m.after),
            Moved::Pulled => {
                let within = m.before.saturating_sub(m.after).min(left);
                left -= within;
                match covered.iter_mut().find(|(t, _)| *t == m.token) {
                    Some((_, total)) => *total = total.saturating_add(within),
                    None => covered.push((m.token, within)),
                }
            }
        }
        if left != counted {
            updates.push(Remaining {
                holder: m.holder,
                token: m.token,
                spender: m.spender,
                remaining: left,
            });
        }
    }
    for out in outs {
        let pulled = covered
            .iter()
            .find(|(t, _)| *t == out.token)
            .map_or(U256::ZERO, |(_, c)| *c);
        let rest = out.amount.saturating_sub(pulled);
        if !rest.is_zero() {
            counts.push(Counted {
                asset_key: out.asset_key.clone(),
                value: rest,
                party: out.party,
            });
        }
    }
    (counts, updates)
}

/// One allowance a call may move: kept by `holder` (the token itself for ERC-20, Permit2 for its own) for `token`
/// and `spender`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Pair {
    pub holder: Address,
    pub token: Address,
    pub spender: Address,
}

/// The function the agent's call runs at the top, as decoded: `function` its canonical signature, `args` as a
/// request spells them, `to` the contract called.
#[derive(Debug, Clone, Copy)]
pub struct TopCall<'a> {
    pub to: Address,
    pub function: Option<&'a str>,
    pub args: &'a [serde_json::Value],
}

impl TopCall<'_> {
    fn address(&self, i: usize) -> Option<Address> {
        self.args.get(i)?.as_str()?.parse().ok()
    }

    /// How this call, by itself, moves `pair`'s allowance: `None` where the function does not name it.
    fn moves(&self, pair: &Pair, permit2: Address) -> Option<Moved> {
        let (function, erc20) = (self.function?, pair.holder == pair.token);
        if self.to != pair.holder {
            return None;
        }
        let spender_at = |i: usize| self.address(i) == Some(pair.spender);
        match function {
            "approve(address,uint256)" if erc20 && spender_at(0) => Some(Moved::Set),
            "increaseAllowance(address,uint256)" if erc20 && spender_at(0) => Some(Moved::Added),
            "decreaseAllowance(address,uint256)" if erc20 && spender_at(0) => Some(Moved::Lowered),
            "permit(address,address,uint256,uint256,uint8,bytes32,bytes32)"
            | "permit(address,address,uint256,uint256,bool,uint8,bytes32,bytes32)"
                if erc20 && spender_at(1) =>
            {
                Some(Moved::Set)
            }
            "approve(address,address,uint160,uint48)"
                if pair.holder == permit2 && self.address(0) == Some(pair.token) && spender_at(1) =>
            {
                Some(Moved::Set)
            }
            _ => None,
        }
    }
}

/// How a call moved one allowance, from the function it runs at the top and what its simulation shows: the
/// allowance before and after, whether an approval event named the pair (`granted`), and how much of the token
/// left the wallet (`out`). Where the top function names the pair, it decides (`approve` sets, `increaseAllowance`
/// adds, `decreaseAllowance` lowers). Elsewhere a rise, or an approval event the call's own outflow does not
/// explain, is a grant that sets (a permit submitted inside a router, erring towards counting); a fall the
/// outflow explains is a pull.
pub fn how_moved(
    top: &TopCall<'_>,
    pair: &Pair,
    permit2: Address,
    (before, after): (U256, U256),
    granted: bool,
    out: U256,
) -> Moved {
    if let Some(how) = top.moves(pair, permit2) {
        return how;
    }
    let fall = before.saturating_sub(after);
    let explained = out >= fall;
    match (after > before, granted) {
        (true, _) => Moved::Set,
        // An approval event the outflow does not explain: a grant, of 0 (a lockdown) or of what it sets.
        (false, true) if !explained || fall.is_zero() => match after.is_zero() {
            true => Moved::Lowered,
            false => Moved::Set,
        },
        _ => Moved::Pulled,
    }
}

/// What a call moved of one token, as its simulation showed it and, once mined, as its receipt's logs show it: the
/// sum of what left the wallet, and the allowances its approval events set.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Figure {
    pub token: Address,
    pub out: U256,
    pub granted: U256,
}

/// The figures of an effect, per token in order of first appearance.
pub fn figures(effect: &super::Effect) -> Vec<Figure> {
    let mut figures: Vec<Figure> = Vec::new();
    let mut at = |token: Address| -> usize {
        match figures.iter().position(|f| f.token == token) {
            Some(i) => i,
            None => {
                figures.push(Figure {
                    token,
                    out: U256::ZERO,
                    granted: U256::ZERO,
                });
                figures.len() - 1
            }
        }
    };
    let mut outs = Vec::new();
    for change in &effect.changes {
        if let (Some(token), super::Direction::Out) = (change.token, change.direction) {
            outs.push((at(token), change.amount));
        }
    }
    let mut grants = Vec::new();
    for grant in &effect.approvals {
        grants.push((at(grant.token), grant.amount));
    }
    for (i, amount) in outs {
        figures[i].out = figures[i].out.saturating_add(amount);
    }
    for (i, amount) in grants {
        figures[i].granted = figures[i].granted.saturating_add(amount);
    }
    figures
}

/// How the receipt changes what a mined call counts of one token (§18: what it really took or granted counts).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReceiptCount {
    pub token: Address,
    /// Counted besides what the simulation counted: the receipt moved or allowed more.
    pub more: U256,
    /// Taken off what the simulation counted: the receipt moved less.
    pub less: U256,
}

/// Per token, the receipt's figures against the simulation's. More moved or allowed than simulated counts in full,
/// even where an allowance the service counted covered it (erring towards counting). Less is taken off only for a
/// token the call granted no allowance of, in the simulation or the receipt: there the difference is an outflow
/// that did not happen, never an allowance still open.
pub fn receipt_counts(simulated: &[Figure], real: &[Figure]) -> Vec<ReceiptCount> {
    let zero = |token| Figure {
        token,
        out: U256::ZERO,
        granted: U256::ZERO,
    };
    let mut tokens: Vec<Address> = simulated.iter().map(|f| f.token).collect();
    tokens.extend(
        real.iter()
            .map(|f| f.token)
            .filter(|t| !simulated.iter().any(|f| f.token == *t)),
    );
    tokens
        .into_iter()
        .filter_map(|token| {
            let sim = simulated
                .iter()
                .find(|f| f.token == token)
                .cloned()
                .unwrap_or_else(|| zero(token));
            let got = real
                .iter()
                .find(|f| f.token == token)
                .cloned()
                .unwrap_or_else(|| zero(token));
            let (sim_total, real_total) = (sim.out.saturating_add(sim.granted), got.out.saturating_add(got.granted));
            let count = if real_total > sim_total {
                ReceiptCount {
                    token,
                    more: real_total - sim_total,
                    less: U256::ZERO,
                }
            } else if real_total < sim_total && sim.granted.is_zero() && got.granted.is_zero() {
                ReceiptCount {
                    token,
                    more: U256::ZERO,
                    less: sim_total - real_total,
                }
            } else {
                return None;
            };
            Some(count)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_receipt_counts_what_it_moved_beyond_the_simulation_and_less_only_where_nothing_was_allowed() {
        let (a, b, c) = (
            Address::repeat_byte(1),
            Address::repeat_byte(2),
            Address::repeat_byte(3),
        );
        let figure = |token, out: u64, granted: u64| Figure {
            token,
            out: U256::from(out),
            granted: U256::from(granted),
        };
        let simulated = [figure(a, 100, 0), figure(b, 0, 50), figure(c, 30, 0)];
        let real = [figure(a, 120, 0), figure(b, 0, 40), figure(c, 10, 0)];
        assert_eq!(
            receipt_counts(&simulated, &real),
            vec![
                ReceiptCount {
                    token: a,
                    more: U256::from(20),
                    less: U256::ZERO
                },
                ReceiptCount {
                    token: c,
                    more: U256::ZERO,
                    less: U256::from(20)
                },
            ]
        );
        // A token the simulation never showed counts whole.
        let new = receipt_counts(&[], &[figure(a, 7, 0)]);
        assert_eq!(new[0].more, U256::from(7));
        assert!(receipt_counts(&simulated, &simulated).is_empty());
    }

    const KEY: &str = "base:USDC";

    fn token() -> Address {
        Address::repeat_byte(0xaa)
    }

    fn spender() -> Address {
        Address::repeat_byte(0x5e)
    }

    fn moved(before: u64, after: u64, how: Moved) -> AllowanceMove {
        AllowanceMove {
            asset_key: KEY.into(),
            holder: token(),
            token: token(),
            spender: spender(),
            before: U256::from(before),
            after: U256::from(after),
            how,
        }
    }

    fn out(amount: u64) -> TokenOut {
        TokenOut {
            asset_key: KEY.into(),
            token: token(),
            amount: U256::from(amount),
            party: spender(),
        }
    }

    fn ledger(remaining: u64) -> Vec<Remaining> {
        vec![Remaining {
            holder: token(),
            token: token(),
            spender: spender(),
            remaining: U256::from(remaining),
        }]
    }

    fn total(counts: &[Counted]) -> u64 {
        counts.iter().map(|c| c.value.to::<u64>()).sum()
    }

    #[test]
    fn an_allowance_counts_when_granted_and_its_pull_does_not_count_again() {
        // approve 100: counted at once, the ledger holds 100.
        let (counts, updates) = count(&[], &[], &[moved(0, 100, Moved::Set)], &[]);
        assert_eq!(total(&counts), 100);
        assert_eq!(updates, ledger(100));
        // a swap pulling 50 of it: nothing more counts, 50 left.
        let (counts, updates) = count(&[], &[out(50)], &[moved(100, 50, Moved::Pulled)], &ledger(100));
        assert_eq!(total(&counts), 0);
        assert_eq!(updates, ledger(50));
    }

    #[test]
    fn a_pull_the_service_never_counted_counts_as_an_outflow() {
        let (counts, updates) = count(&[], &[out(30)], &[moved(80, 50, Moved::Pulled)], &[]);
        assert_eq!(total(&counts), 30);
        assert!(updates.is_empty());
        // Partly counted: only the rest counts.
        let (counts, updates) = count(&[], &[out(30)], &[moved(80, 50, Moved::Pulled)], &ledger(10));
        assert_eq!(total(&counts), 20);
        assert_eq!(updates, ledger(0));
    }

    #[test]
    fn a_grant_that_sets_counts_whole_whatever_stood_before() {
        // Counted 40; the spender took it in a transaction of its own (on-chain allowance 0); approved 40 again.
        let (counts, updates) = count(&[], &[], &[moved(0, 40, Moved::Set)], &ledger(40));
        assert_eq!(
            total(&counts),
            40,
            "a drainer approved again and again takes what the windows allow"
        );
        assert!(updates.is_empty(), "the ledger holds 40 again: {updates:?}");
        // Re-approved to the same amount while it stands: the spender may pull the standing 40 first in the same
        // block, so the grant counts whole again (§18).
        let (counts, updates) = count(&[], &[], &[moved(40, 40, Moved::Set)], &ledger(40));
        assert_eq!(total(&counts), 40);
        assert!(updates.is_empty());
        // Lowered by a grant that sets 39: counts 39, and the ledger holds 39.
        let (counts, updates) = count(&[], &[], &[moved(40, 39, Moved::Set)], &ledger(40));
        assert_eq!(total(&counts), 39);
        assert_eq!(updates, ledger(39));
        // Set to 0, or decreased: nothing counts, the ledger follows.
        let (counts, updates) = count(&[], &[], &[moved(40, 0, Moved::Set)], &ledger(40));
        assert_eq!(total(&counts), 0);
        assert_eq!(updates, ledger(0));
        let (counts, updates) = count(&[], &[out(10)], &[moved(40, 10, Moved::Lowered)], &ledger(40));
        assert_eq!(total(&counts), 10, "a decrease covers no outflow");
        assert_eq!(updates, ledger(10));
        // Added: what it adds.
        let (counts, updates) = count(&[], &[], &[moved(40, 50, Moved::Added)], &ledger(40));
        assert_eq!(total(&counts), 10);
        assert_eq!(updates, ledger(50));
    }

    #[test]
    fn allowances_kept_by_permit2_are_apart_from_the_tokens_own() {
        let permit2 = AllowanceMove {
            holder: Address::repeat_byte(0x22),
            ..moved(100, 50, Moved::Pulled)
        };
        // The ERC-20 row counted 100 covers no pull through Permit2.
        let (counts, _) = count(&[], &[out(50)], &[permit2], &ledger(100));
        assert_eq!(total(&counts), 50);
    }

    #[test]
    fn how_an_allowance_moved_is_the_top_functions_word_then_the_simulations() {
        let (token, spender, router, permit2) = (
            token(),
            spender(),
            Address::repeat_byte(0x70),
            Address::repeat_byte(0x22),
        );
        let pair = Pair {
            holder: token,
            token,
            spender,
        };
        let args = [serde_json::json!(spender.to_string()), serde_json::json!("5")];
        let top = |function: &'static str, to: Address| TopCall {
            to,
            function: Some(function),
            args: &args,
        };
        let u = |n: u64| U256::from(n);
        let how = |top: &TopCall<'_>, before: u64, after: u64, granted: bool, out: u64| {
            how_moved(top, &pair, permit2, (u(before), u(after)), granted, u(out))
        };
        // The top function names the pair: it decides, whatever the figures.
        assert_eq!(
            how(&top("approve(address,uint256)", token), 100, 100, true, 0),
            Moved::Set
        );
        assert_eq!(
            how(&top("approve(address,uint256)", token), 100, 99, true, 0),
            Moved::Set
        );
        assert_eq!(
            how(&top("increaseAllowance(address,uint256)", token), 100, 150, true, 0),
            Moved::Added
        );
        assert_eq!(
            how(&top("decreaseAllowance(address,uint256)", token), 100, 40, true, 0),
            Moved::Lowered
        );
        // Elsewhere (a router): a rise is a grant that sets (a permit submitted inside it) ...
        let swap = top("swap(uint256)", router);
        assert_eq!(how(&swap, 0, 100, true, 0), Moved::Set);
        assert_eq!(how(&swap, 0, 100, false, 0), Moved::Set);
        // ... a fall the call's own outflow explains is a pull, with or without an approval event (OZ 4 emits one) ...
        assert_eq!(how(&swap, 100, 50, false, 50), Moved::Pulled);
        assert_eq!(how(&swap, 100, 50, true, 50), Moved::Pulled);
        // ... and an approval event the outflow does not explain is a grant: of what it sets, or of 0.
        assert_eq!(how(&swap, 100, 99, true, 0), Moved::Set);
        assert_eq!(how(&swap, 100, 100, true, 0), Moved::Set);
        assert_eq!(how(&swap, 100, 0, true, 0), Moved::Lowered);
        assert_eq!(how(&swap, 100, 100, false, 0), Moved::Pulled, "nothing moved");
    }

    #[test]
    fn fixed_counts_always_stand() {
        let native = Counted {
            asset_key: "base:ETH".into(),
            value: U256::from(7),
            party: spender(),
        };
        let (counts, _) = count(std::slice::from_ref(&native), &[out(5)], &[], &[]);
        assert_eq!(counts.len(), 2);
        assert_eq!(counts[0], native);
    }
}
