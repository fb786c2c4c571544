//! What one simulated call does to the agent's wallet (§18 `simulation`), read from its logs: the tokens and native
//! coin it sends and receives, and the allowances it grants. The caller passes only the logs of the agent's own
//! call, and only when that call succeeded (`status 0x1`): anvil 1.7.1 leaks the native pseudo-log of a reverted
//! top-level call (seen on anvil: a log of the native move although the call reverted).
//!
//! ERC-721 and ERC-1155 tokens are assets like any other (§18): a token id that leaves the wallet is one unit of
//! its collection out, an ERC-1155 transfer its amount; a single-token approval (ERC-721 `Approval` with a token id)
//! hands one unit to its spender; `ApprovalForAll`, which hands over every token of a collection, is recorded as an
//! unlimited grant.

use alloy::primitives::{Address, B256, Bytes, U256, address};
use alloy::sol_types::SolEvent;

use super::unlimited::{is_unlimited_amount, is_unlimited_permit2_amount};

/// Where `eth_simulateV1` with `traceTransfers` reports native value moves, as ERC-20-shaped `Transfer` logs.
pub const NATIVE_PSEUDO_TOKEN: Address = address!("0xEeeeeEeeeEeEeeEeEeEeeEEEeeeeEeeeeeeeEEeE");
/// Where EIP-7708 blocks report the same moves as protocol logs.
pub const NATIVE_PROTOCOL_EMITTER: Address = address!("0xfffffffffffffffffffffffffffffffffffffffe");

alloy::sol! {
    /// ERC-20 (3 topics) and the native pseudo-transfers; ERC-721 shares the topic with 4.
    event Transfer(address indexed from, address indexed to, uint256 value);
    /// ERC-20 (3 topics); ERC-721 shares the topic with 4.
    event Approval(address indexed owner, address indexed spender, uint256 value);
    /// ERC-721 and ERC-1155: every token of the collection.
    event ApprovalForAll(address indexed owner, address indexed operator, bool approved);
    /// WETH9 emits no `Transfer` when wrapping: the wrapped balance of `dst` rises by `wad`.
    event Deposit(address indexed dst, uint256 wad);
    /// WETH9 unwrapping: the wrapped balance of `src` falls by `wad`.
    event Withdrawal(address indexed src, uint256 wad);
    /// ERC-1155, one id.
    event TransferSingle(address indexed operator, address indexed from, address indexed to, uint256 id, uint256 value);
    /// ERC-1155, several ids.
    event TransferBatch(address indexed operator, address indexed from, address indexed to, uint256[] ids, uint256[] values);
    /// The Permit2 events that set an allowance, emitted by Permit2 with the token in a topic.
    interface IPermit2 {
        event Approval(address indexed owner, address indexed token, address indexed spender, uint160 amount, uint48 expiration);
        event Permit(address indexed owner, address indexed token, address indexed spender, uint160 amount, uint48 expiration, uint48 nonce);
        event Lockdown(address indexed owner, address token, address spender);
    }
}

/// One log of a simulated call, as the node returns it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SimLog {
    pub address: Address,
    pub topics: Vec<B256>,
    pub data: Bytes,
}

/// Which way value moves, seen from the agent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Direction {
    Out,
    In,
}

/// The total the agent sends or receives of one token (`None`: the native coin), in base units.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Change {
    pub token: Option<Address>,
    pub amount: U256,
    pub direction: Direction,
}

/// An allowance the agent's call sets: for ERC-20 and Permit2 the allowance as the event states it (the new value,
/// not a rise: the counting reads `allowance()` before and after for that); `ApprovalForAll(true)` is `U256::MAX`,
/// `ApprovalForAll(false)` and Permit2's `Lockdown` zero.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Grant {
    /// The contract that keeps the allowance: the token itself, or Permit2.
    pub holder: Address,
    pub token: Address,
    pub spender: Address,
    pub amount: U256,
    pub unlimited: bool,
}

impl Grant {
    /// The allowance it names in the ledger's terms.
    pub fn pair(&self) -> super::ledger::Pair {
        super::ledger::Pair {
            holder: self.holder,
            token: self.token,
            spender: self.spender,
        }
    }
}

/// The call's effect on the agent's wallet.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Effect {
    /// Summed per token and direction, never netted: an outflow counts whatever comes back. In order of first
    /// appearance.
    pub changes: Vec<Change>,
    /// The last allowance set per token and spender (a later event supersedes an earlier one), in order of first
    /// appearance.
    pub approvals: Vec<Grant>,
    /// Every spender an approval event of the agent names, in order of first appearance: the candidates whose
    /// `allowance(agent, spender)` the service reads.
    pub spenders: Vec<Address>,
    /// Every address that receives native coin or tokens anywhere in the call, the agent's own moves or not, in
    /// order of first appearance (§18: `blocked_recipients` sees every receiver).
    pub receivers: Vec<Address>,
    /// Single ERC-721 tokens the agent approves (collection, approved spender): one unit each of the collection,
    /// which the spender may take in transactions the agent never signs.
    pub token_approvals: Vec<(Address, Address)>,
}

impl Effect {
    fn add(&mut self, token: Option<Address>, direction: Direction, amount: U256) {
        match self
            .changes
            .iter_mut()
            .find(|c| c.token == token && c.direction == direction)
        {
            Some(change) => change.amount = change.amount.saturating_add(amount),
            None => self.changes.push(Change {
                token,
                amount,
                direction,
            }),
        }
    }

    /// `value` units of the collection `token` moved `from` → `to` (ERC-721, ERC-1155): the agent's change, and a
    /// receiver.
    fn moved(&mut self, token: Address, (from, to): (Address, Address), value: U256, agent: Address) {
        if to != agent && !value.is_zero() && !self.receivers.contains(&to) {
            self.receivers.push(to);
        }
        if from == agent {
            self.add(Some(token), Direction::Out, value);
        }
        if to == agent {
            self.add(Some(token), Direction::In, value);
        }
    }

    fn grant(&mut self, holder: Address, token: Address, spender: Address, amount: U256, unlimited: bool) {
        if !self.spenders.contains(&spender) {
            self.spenders.push(spender);
        }
        let grant = Grant {
            holder,
            token,
            spender,
            amount,
            unlimited,
        };
        match self
            .approvals
            .iter_mut()
            .find(|g| g.holder == holder && g.token == token && g.spender == spender)
        {
            Some(existing) => *existing = grant,
            None => self.approvals.push(grant),
        }
    }
}

/// Reads the agent's balance changes and grants from the logs of its successful call.
pub fn effect(logs: &[SimLog], agent: Address) -> Effect {
    let mut effect = Effect::default();
    for log in logs {
        effect.read_move(log, agent);
        effect.read_grant(log, agent);
    }
    effect
}

impl Effect {
    /// A log of something moving: a token transfer (ERC-20, ERC-721, ERC-1155, the native pseudo-token), wrapped
    /// native coin deposited or withdrawn.
    fn read_move(&mut self, log: &SimLog, agent: Address) {
        let Some(&topic0) = log.topics.first() else { return };
        let topic = |i: usize| log.topics.get(i).map(|t| Address::from_word(*t));
        let word = |i: usize| log.data.get(i * 32..(i + 1) * 32).map(U256::from_be_slice);
        let n = log.topics.len();
        match topic0 {
            Transfer::SIGNATURE_HASH if n == 3 => {
                let (Some(from), Some(to), Some(amount)) = (topic(1), topic(2), word(0)) else {
                    return;
                };
                let native = [NATIVE_PSEUDO_TOKEN, NATIVE_PROTOCOL_EMITTER].contains(&log.address);
                let token = (!native).then_some(log.address);
                if !amount.is_zero() && to != agent && !self.receivers.contains(&to) {
                    self.receivers.push(to);
                }
                // A transfer to oneself is both: it leaves and comes back.
                if from == agent {
                    self.add(token, Direction::Out, amount);
                }
                if to == agent {
                    self.add(token, Direction::In, amount);
                }
            }
            // ERC-721: the token id is the third topic; one unit of the collection moves.
            Transfer::SIGNATURE_HASH if n == 4 => {
                if let (Some(from), Some(to)) = (topic(1), topic(2)) {
                    self.moved(log.address, (from, to), U256::from(1u8), agent);
                }
            }
            TransferSingle::SIGNATURE_HASH if n == 4 => {
                if let (Some(from), Some(to), Some(value)) = (topic(2), topic(3), word(1)) {
                    self.moved(log.address, (from, to), value, agent);
                }
            }
            TransferBatch::SIGNATURE_HASH if n == 4 => {
                let (Some(from), Some(to)) = (topic(2), topic(3)) else {
                    return;
                };
                let Ok(batch) = TransferBatch::decode_raw_log(log.topics.iter().copied(), &log.data) else {
                    return;
                };
                let value = batch.values.iter().fold(U256::ZERO, |t, v| t.saturating_add(*v));
                self.moved(log.address, (from, to), value, agent);
            }
            Deposit::SIGNATURE_HASH if n == 2 && log.data.len() == 32 => {
                if let (Some(dst), Some(wad)) = (topic(1), word(0))
                    && dst == agent
                {
                    self.add(Some(log.address), Direction::In, wad);
                }
            }
            Withdrawal::SIGNATURE_HASH if n == 2 && log.data.len() == 32 => {
                if let (Some(src), Some(wad)) = (topic(1), word(0))
                    && src == agent
                {
                    self.add(Some(log.address), Direction::Out, wad);
                }
            }
            _ => {}
        }
    }

    /// A log of an allowance given or taken: a token's approval (ERC-20, ERC-721 of one token or of all), Permit2's
    /// own (approved, permitted, locked down).
    fn read_grant(&mut self, log: &SimLog, agent: Address) {
        let Some(&topic0) = log.topics.first() else { return };
        let topic = |i: usize| log.topics.get(i).map(|t| Address::from_word(*t));
        let word = |i: usize| log.data.get(i * 32..(i + 1) * 32).map(U256::from_be_slice);
        let n = log.topics.len();
        match topic0 {
            Approval::SIGNATURE_HASH if n == 4 => {
                if let (Some(owner), Some(approved)) = (topic(1), topic(2))
                    && owner == agent
                    && approved != Address::ZERO
                {
                    if !self.spenders.contains(&approved) {
                        self.spenders.push(approved);
                    }
                    self.token_approvals.push((log.address, approved));
                }
            }
            Approval::SIGNATURE_HASH if n == 3 => {
                if let (Some(owner), Some(spender), Some(amount)) = (topic(1), topic(2), word(0))
                    && owner == agent
                {
                    self.grant(log.address, log.address, spender, amount, is_unlimited_amount(amount));
                }
            }
            ApprovalForAll::SIGNATURE_HASH if n == 3 => {
                if let (Some(owner), Some(operator), Some(approved)) = (topic(1), topic(2), word(0))
                    && owner == agent
                {
                    let all = !approved.is_zero();
                    let amount = if all { U256::MAX } else { U256::ZERO };
                    self.grant(log.address, log.address, operator, amount, all);
                }
            }
            IPermit2::Approval::SIGNATURE_HASH | IPermit2::Permit::SIGNATURE_HASH if n == 4 => {
                if let (Some(owner), Some(token), Some(spender), Some(amount)) = (topic(1), topic(2), topic(3), word(0))
                    && owner == agent
                {
                    self.grant(log.address, token, spender, amount, is_unlimited_permit2_amount(amount));
                }
            }
            IPermit2::Lockdown::SIGNATURE_HASH if n == 2 => {
                let as_address = |i| word(i).map(|w| Address::from_word(B256::from(w)));
                if let (Some(owner), Some(token), Some(spender)) = (topic(1), as_address(0), as_address(1))
                    && owner == agent
                {
                    self.grant(log.address, token, spender, U256::ZERO, false);
                }
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloy::sol_types::SolValue;

    const AGENT: Address = Address::repeat_byte(0xa1);
    const ROUTER: Address = Address::repeat_byte(0x70);
    const USDC: Address = Address::repeat_byte(0x05);
    const WETH: Address = Address::repeat_byte(0x0e);
    const PERMIT2: Address = address!("0x000000000022D473030F116dDEE9F6B43aC78BA3");

    fn log(address: Address, topic0: B256, indexed: &[Address], data: Vec<u8>) -> SimLog {
        let mut topics = vec![topic0];
        topics.extend(indexed.iter().map(|a| a.into_word()));
        SimLog {
            address,
            topics,
            data: data.into(),
        }
    }

    fn amount(n: u64) -> Vec<u8> {
        U256::from(n).abi_encode()
    }

    fn transfer(token: Address, from: Address, to: Address, n: u64) -> SimLog {
        log(token, Transfer::SIGNATURE_HASH, &[from, to], amount(n))
    }

    fn change(token: Option<Address>, n: u64, direction: Direction) -> Change {
        Change {
            token,
            amount: U256::from(n),
            direction,
        }
    }

    #[test]
    fn topics_are_the_standard_ones() {
        // groundwork23/selectors.md, computed from the real interfaces.
        let cases = [
            (
                Transfer::SIGNATURE_HASH,
                "0xddf252ad1be2c89b69c2b068fc378daa952ba7f163c4a11628f55a4df523b3ef",
            ),
            (
                Approval::SIGNATURE_HASH,
                "0x8c5be1e5ebec7d5bd14f71427d1e84f3dd0314c0f7b2291e5b200ac8c7c3b925",
            ),
            (
                ApprovalForAll::SIGNATURE_HASH,
                "0x17307eab39ab6107e8899845ad3d59bd9653f200f220920489ca2b5937696c31",
            ),
            (
                Deposit::SIGNATURE_HASH,
                "0xe1fffcc4923d04b559f4d29a8bfc6cda04eb5b0d3c460751c2402c5c5cc9109c",
            ),
            (
                Withdrawal::SIGNATURE_HASH,
                "0x7fcf532c15f0a6db0bd6d0e038bea71d30d808c7d98cb3bf7268a95bf5081b65",
            ),
            (
                IPermit2::Approval::SIGNATURE_HASH,
                "0xda9fa7c1b00402c17d0161b249b1ab8bbec047c5a52207b9c112deffd817036b",
            ),
            (
                IPermit2::Permit::SIGNATURE_HASH,
                "0xc6a377bfc4eb120024a8ac08eef205be16b817020812c73223e81d1bdb9708ec",
            ),
            (
                IPermit2::Lockdown::SIGNATURE_HASH,
                "0x89b1add15eff56b3dfe299ad94e01f2b52fbcb80ae1a3baea6ae8c04cb2b98a4",
            ),
        ];
        for (topic, hex) in cases {
            assert_eq!(topic.to_string(), hex);
        }
    }

    #[test]
    fn flows_are_summed_per_token_and_direction_never_netted() {
        let logs = [
            transfer(NATIVE_PSEUDO_TOKEN, AGENT, ROUTER, 100),
            transfer(USDC, AGENT, ROUTER, 7),
            transfer(USDC, AGENT, ROUTER, 3),
            transfer(USDC, ROUTER, AGENT, 4),
            transfer(NATIVE_PROTOCOL_EMITTER, ROUTER, AGENT, 50),
            transfer(USDC, ROUTER, USDC, 1_000), // between third parties
            transfer(WETH, AGENT, AGENT, 2),     // to itself: out and in
        ];
        let effect = effect(&logs, AGENT);
        assert_eq!(
            effect.changes,
            vec![
                change(None, 100, Direction::Out),
                change(Some(USDC), 10, Direction::Out),
                change(Some(USDC), 4, Direction::In),
                change(None, 50, Direction::In),
                change(Some(WETH), 2, Direction::Out),
                change(Some(WETH), 2, Direction::In),
            ]
        );
        assert!(effect.approvals.is_empty() && effect.spenders.is_empty());
    }

    #[test]
    fn nft_transfers_and_approvals_are_units_of_their_collection_and_malformed_logs_are_ignored() {
        let nft = Address::repeat_byte(0x72);
        let token_id = Address::with_last_byte(9);
        let single = (U256::from(9u8), U256::from(4u8)).abi_encode_params();
        let batch = (
            vec![U256::from(1u8), U256::from(2u8)],
            vec![U256::from(3u8), U256::from(5u8)],
        )
            .abi_encode_params();
        let logs = [
            log(nft, Transfer::SIGNATURE_HASH, &[AGENT, ROUTER, token_id], vec![]),
            log(nft, Approval::SIGNATURE_HASH, &[AGENT, ROUTER, token_id], vec![]),
            log(nft, Approval::SIGNATURE_HASH, &[AGENT, Address::ZERO, token_id], vec![]), // a clearing
            log(WETH, TransferSingle::SIGNATURE_HASH, &[ROUTER, AGENT, ROUTER], single),
            log(WETH, TransferBatch::SIGNATURE_HASH, &[ROUTER, AGENT, ROUTER], batch),
            log(USDC, Transfer::SIGNATURE_HASH, &[AGENT, ROUTER], vec![1, 2]),
            log(USDC, Transfer::SIGNATURE_HASH, &[AGENT], amount(1)),
            SimLog {
                address: USDC,
                topics: vec![],
                data: Bytes::new(),
            },
        ];
        let effect = effect(&logs, AGENT);
        assert_eq!(
            effect.changes,
            vec![
                change(Some(nft), 1, Direction::Out),
                change(Some(WETH), 12, Direction::Out)
            ]
        );
        assert_eq!(effect.token_approvals, vec![(nft, ROUTER)]);
        assert_eq!(effect.receivers, vec![ROUTER]);
        assert!(effect.approvals.is_empty());
    }

    #[test]
    fn wrapping_and_unwrapping_move_the_wrapped_token() {
        let logs = [
            transfer(NATIVE_PSEUDO_TOKEN, AGENT, WETH, 5),
            log(WETH, Deposit::SIGNATURE_HASH, &[AGENT], amount(5)),
            log(WETH, Withdrawal::SIGNATURE_HASH, &[AGENT], amount(3)),
            transfer(NATIVE_PSEUDO_TOKEN, WETH, AGENT, 3),
            log(WETH, Deposit::SIGNATURE_HASH, &[ROUTER], amount(8)), // someone else's wrap
            log(WETH, Deposit::SIGNATURE_HASH, &[AGENT, ROUTER], amount(8)), // not WETH9's shape
        ];
        assert_eq!(
            effect(&logs, AGENT).changes,
            vec![
                change(None, 5, Direction::Out),
                change(Some(WETH), 5, Direction::In),
                change(Some(WETH), 3, Direction::Out),
                change(None, 3, Direction::In),
            ]
        );
    }

    #[test]
    fn approvals_of_the_agent_are_grants_and_the_last_one_stands() {
        let max = U256::MAX.abi_encode();
        let p2_max = ((U256::from(1u8) << 160) - U256::from(1u8), U256::from(99u8)).abi_encode_params();
        let nft = Address::repeat_byte(0x72);
        let lockdown = (USDC, ROUTER).abi_encode_params();
        let logs = [
            log(USDC, Approval::SIGNATURE_HASH, &[AGENT, ROUTER], amount(700)),
            log(USDC, Approval::SIGNATURE_HASH, &[ROUTER, AGENT], amount(1)), // not the agent's
            log(WETH, Approval::SIGNATURE_HASH, &[AGENT, PERMIT2], max),
            log(USDC, Approval::SIGNATURE_HASH, &[AGENT, ROUTER], amount(400)), // pulled: the new value
            log(nft, ApprovalForAll::SIGNATURE_HASH, &[AGENT, ROUTER], true.abi_encode()),
            log(
                nft,
                ApprovalForAll::SIGNATURE_HASH,
                &[AGENT, PERMIT2],
                false.abi_encode(),
            ),
            log(
                PERMIT2,
                IPermit2::Approval::SIGNATURE_HASH,
                &[AGENT, WETH, ROUTER],
                p2_max.clone(),
            ),
            log(PERMIT2, IPermit2::Permit::SIGNATURE_HASH, &[AGENT, USDC, nft], p2_max),
            log(PERMIT2, IPermit2::Lockdown::SIGNATURE_HASH, &[AGENT], lockdown),
        ];
        let effect = effect(&logs, AGENT);
        let grant = |holder, token, spender, amount: U256, unlimited| Grant {
            holder,
            token,
            spender,
            amount,
            unlimited,
        };
        let p2 = (U256::from(1u8) << 160) - U256::from(1u8);
        assert_eq!(
            effect.approvals,
            vec![
                // Permit2's lockdown of (USDC, ROUTER) lowers Permit2's allowance, not the token's own.
                grant(USDC, USDC, ROUTER, U256::from(400), false),
                grant(WETH, WETH, PERMIT2, U256::MAX, true),
                grant(nft, nft, ROUTER, U256::MAX, true),
                grant(nft, nft, PERMIT2, U256::ZERO, false),
                grant(PERMIT2, WETH, ROUTER, p2, true),
                grant(PERMIT2, USDC, nft, p2, true),
                grant(PERMIT2, USDC, ROUTER, U256::ZERO, false),
            ]
        );
        assert_eq!(effect.spenders, vec![ROUTER, PERMIT2, nft]);
        assert!(effect.changes.is_empty());
    }
}
