//! Addresses no contract call reaches, whatever the `calls` rules say (§22): the agent's own address (its account
//! executes whatever it is called with from itself), the EntryPoint (the agent's operation nonces and deposit), the
//! paymaster (the operator's deposit) and a `DelegationManager` (delegations are redeemed only through §21's
//! `delegation`, where they are counted). A call to one is refused before anything is simulated, as `call_denied`
//! naming the first such call of the request (`details.index`); the check reads a slice of targets, so a batch's
//! calls take the same one. A call may reach them indirectly: its simulation reads the agent's EntryPoint nonce and
//! deposit around it (`entry_point_reads`), and one that changes them is refused too (`entry_point_moved`).

use alloy::primitives::{Address, U256};

use super::CallOrder;
use crate::chain::simulate::{SimCall, Simulated};
use crate::domain::chain::ChainInfo;
use crate::domain::delegation::deployments;
use crate::transfers::{TransferError, Transfers};

/// What an address no call reaches is, as a refusal names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unreachable {
    /// The agent's own address.
    OwnAddress,
    /// The chain's EntryPoint (the configured one of a sponsorable chain, or the canonical v0.7).
    EntryPoint,
    /// The paymaster of a sponsorable chain.
    Paymaster,
    /// A `DelegationManager` (a configured one, any chain's, or the framework's).
    DelegationManager,
}

impl Unreachable {
    /// The address's part, in words.
    fn words(self) -> &'static str {
        match self {
            Unreachable::OwnAddress => "the agent's own address",
            Unreachable::EntryPoint => "the EntryPoint",
            Unreachable::Paymaster => "the paymaster",
            Unreachable::DelegationManager => "a DelegationManager (delegations are redeemed with `delegation`)",
        }
    }
}

/// The first of `targets` that is one of `unreachable`: its index, its address and what it is.
pub fn first_unreachable(
    targets: &[Address],
    unreachable: &[(Address, Unreachable)],
) -> Option<(usize, Address, Unreachable)> {
    targets.iter().enumerate().find_map(|(index, to)| {
        unreachable
            .iter()
            .find(|(address, _)| address == to)
            .map(|(address, what)| (index, *address, *what))
    })
}

/// The refusal of the call at `index` among `count` calls, to `address` which is `what`.
fn refusal(index: usize, count: usize, address: Address, what: Unreachable) -> TransferError {
    let which = match count {
        1 => "the call".to_string(),
        _ => format!("call {index}"),
    };
    TransferError::CallTargetDenied {
        index,
        words: format!(
            "{which} is to {} ({}), which no call may reach whatever the rules",
            what.words(),
            address.to_checksum(None)
        ),
    }
}

impl Transfers {
    /// The addresses no call of the agent at `own` reaches on `chain`: its own, the chain's EntryPoint and paymaster
    /// when it is sponsorable, the canonical EntryPoint v0.7 always, every configured `DelegationManager` and the
    /// framework's.
    pub(crate) fn unreachable(&self, chain: &'static ChainInfo, own: Address) -> Vec<(Address, Unreachable)> {
        let mut unreachable = vec![
            (own, Unreachable::OwnAddress),
            (deployments::ENTRY_POINT_V07, Unreachable::EntryPoint),
            (deployments::DELEGATION_MANAGER, Unreachable::DelegationManager),
        ];
        if let Some(sponsor) = self.sponsors.chain(chain.name) {
            unreachable.push((sponsor.entry_point, Unreachable::EntryPoint));
            unreachable.push((sponsor.paymaster, Unreachable::Paymaster));
            unreachable.push((sponsor.manager, Unreachable::DelegationManager));
        }
        let managers = self.chains.delegation_managers();
        unreachable.extend(managers.into_iter().map(|m| (m, Unreachable::DelegationManager)));
        unreachable
    }

    /// Refuses (`CallTargetDenied`, before anything is simulated) the first of `targets`, the calls of one request
    /// of the agent at `own` on `chain`, that no call may reach.
    pub(crate) fn refuse_unreachable(
        &self,
        chain: &'static ChainInfo,
        own: Address,
        targets: &[Address],
    ) -> Result<(), TransferError> {
        match first_unreachable(targets, &self.unreachable(chain, own)) {
            Some((index, address, what)) => Err(refusal(index, targets.len(), address, what)),
            None => Ok(()),
        }
    }

    /// `refuse_unreachable` for a single call's order.
    pub(super) fn refuse_unreachable_call(&self, order: &CallOrder<'_>) -> Result<(), TransferError> {
        let own = *order
            .by
            .agent
            .wallet_addresses
            .get(order.chain.name)
            .ok_or(TransferError::NoWallet)?;
        self.refuse_unreachable(order.chain, own, &[order.to])
    }
}

/// The two reads of the agent's (`from`) nonce (key 0) and deposit at `entry_point` a simulation makes around calls.
pub(in crate::transfers::call) fn entry_point_reads(from: Address, entry_point: Address) -> [SimCall; 2] {
    [
        crate::chain::userop::get_nonce_call(from, Default::default()),
        crate::chain::userop::deposit_call(from),
    ]
    .map(|data| SimCall {
        from: Address::ZERO,
        to: entry_point,
        value: U256::ZERO,
        data,
        ..SimCall::default()
    })
}

/// The first call after which the agent's EntryPoint nonce or deposit differs from before the calls (one, or a
/// batch's): `ran` is the
/// two reads, then each call followed by the two reads again. A read after a call that fails is a change; none is
/// looked for where the reads before fail (no EntryPoint there).
pub(in crate::transfers::call) fn entry_point_moved(ran: &[Simulated]) -> Option<usize> {
    let word = |r: &Simulated| r.success.then(|| r.return_data.clone());
    let before = (word(&ran[0])?, word(&ran[1])?);
    ran[2..].chunks(3).position(|step| {
        step.len() < 3 || (word(&step[1]), word(&step[2])) != (Some(before.0.clone()), Some(before.1.clone()))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const OWN: Address = Address::repeat_byte(0xa1);
    const ENTRY: Address = Address::repeat_byte(0xe9);
    const OTHER: Address = Address::repeat_byte(0x11);

    #[test]
    fn the_first_unreachable_target_is_named_by_its_index() {
        let unreachable = [(OWN, Unreachable::OwnAddress), (ENTRY, Unreachable::EntryPoint)];
        assert_eq!(first_unreachable(&[OTHER], &unreachable), None);
        assert_eq!(first_unreachable(&[], &unreachable), None);
        assert_eq!(
            first_unreachable(&[OWN], &unreachable),
            Some((0, OWN, Unreachable::OwnAddress))
        );
        assert_eq!(
            first_unreachable(&[OTHER, ENTRY, OWN], &unreachable),
            Some((1, ENTRY, Unreachable::EntryPoint)),
            "the first refused call of a batch, not the first unreachable address"
        );
    }

    #[test]
    fn a_refusal_is_call_denied_with_its_index_and_says_which_address() {
        let single = refusal(0, 1, ENTRY, Unreachable::EntryPoint);
        assert_eq!(single.code(), "policy_denied");
        assert_eq!(single.policy_rule().map(|r| r.as_str()), Some("call_denied"));
        assert_eq!(single.call_index(), Some(0));
        let words = single.call_denial().unwrap_or_default().to_string();
        assert!(words.starts_with("the call is to the EntryPoint"), "{words}");
        assert!(words.contains(&ENTRY.to_checksum(None)), "{words}");
        let batch = refusal(3, 4, OWN, Unreachable::OwnAddress);
        assert_eq!(batch.call_index(), Some(3));
        assert!(
            batch.to_string().ends_with(&format!(
                "call 3 is to the agent's own address ({}), which no call may reach whatever the rules",
                OWN.to_checksum(None)
            )),
            "{batch}"
        );
    }
}
