//! Gas the operator sponsors (§22): which chains are sponsorable (their EntryPoint, account implementation and
//! paymaster checked at start by their answers), the sponsor key of each, and what the paymaster and the sponsor
//! hold. The user operations themselves are a carrier of the send path (`transfers::carriers::operation`); their
//! bundles are sent and settled by `sponsor::bundler`.

use std::collections::BTreeMap;
use std::sync::Arc;

use alloy::primitives::Address;

use crate::signer::WalletSigner;

/// What one sponsorable chain was checked to be, with its sponsor key.
#[derive(Clone)]
pub struct SponsorChain {
    pub chain: &'static crate::domain::chain::ChainInfo,
    pub entry_point: Address,
    pub paymaster: Address,
    pub account_implementation: Address,
    /// Earlier implementations still read as `smart` (`ACCOUNT_IMPLEMENTATION_PREVIOUS_<CHAIN>`).
    pub previous_implementations: Vec<Address>,
    /// The chain's `DelegationManager`, which the implementation was built with.
    pub manager: Address,
    /// The sponsor key: signs the paymaster's approvals and the bundles, and is their beneficiary.
    pub key: Arc<dyn WalletSigner>,
    /// What every sponsored request reads of the parts, read once a block (`shared`).
    pub parts: Arc<shared::SharedParts>,
}

impl std::fmt::Debug for SponsorChain {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SponsorChain")
            .field("chain", &self.chain.name)
            .field("entry_point", &self.entry_point)
            .field("paymaster", &self.paymaster)
            .field("account_implementation", &self.account_implementation)
            .field("sponsor", &self.key.address())
            .finish()
    }
}

/// What an agent's address holds as code (§22 `account`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Account {
    /// No code: the first sponsored operation designates the implementation.
    Eoa,
    /// It designates the configured implementation, or one still read as `smart`.
    Smart,
    /// It designates other code, or holds contract code: nothing sponsored or batched is signed for it.
    Foreign,
}

impl Account {
    /// The account `code` makes of an address, with the implementation agentd designates (`current`; none
    /// configured: any designation is foreign) and the earlier ones still read as `smart`.
    pub fn of(code: &[u8], current: Option<Address>, previous: &[Address]) -> Account {
        if code.is_empty() {
            return Account::Eoa;
        }
        match code.strip_prefix(&[0xef, 0x01, 0x00][..]) {
            Some(target) if target.len() == 20 => {
                let target = Address::from_slice(target);
                match Some(target) == current || previous.contains(&target) {
                    true => Account::Smart,
                    false => Account::Foreign,
                }
            }
            _ => Account::Foreign,
        }
    }

    /// As the API shows it (`balances[].account`).
    pub fn as_str(self) -> &'static str {
        match self {
            Account::Eoa => "eoa",
            Account::Smart => "smart",
            Account::Foreign => "foreign",
        }
    }
}

/// The sponsorable chains of this instance (none until `Sponsors::start` checked them).
#[derive(Clone, Default, Debug)]
pub struct Sponsors {
    chains: Arc<BTreeMap<String, SponsorChain>>,
}

impl Sponsors {
    /// The sponsorable chains as checked.
    pub fn new(chains: BTreeMap<String, SponsorChain>) -> Self {
        Sponsors {
            chains: Arc::new(chains),
        }
    }

    /// `chain`, when it is sponsorable.
    pub fn chain(&self, chain: &str) -> Option<&SponsorChain> {
        self.chains.get(chain)
    }

    /// Whether `chain` is sponsorable (all three parts configured and checked out at start).
    pub fn is_sponsorable(&self, chain: &str) -> bool {
        self.chains.contains_key(chain)
    }

    /// Every sponsorable chain.
    pub fn all(&self) -> impl Iterator<Item = &SponsorChain> {
        self.chains.values()
    }
}

pub mod bundler;
pub mod shared;
pub mod start;
pub mod status;
