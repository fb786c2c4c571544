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
pub mod start;
pub mod status;
