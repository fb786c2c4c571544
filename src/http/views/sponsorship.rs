//! The operator's gas sponsorship of an agent (§22), amounts as decimal strings in whole native units of the chain.

use serde::Serialize;
use utoipa::ToSchema;

use crate::domain::amount::format_units;
use crate::domain::chain;
use crate::store::sponsorship::SponsorshipState;

/// A sponsorship on one chain: the operator's daily budget for the agent's gas and what it counted over the last 24
/// hours (each operation's maximum cost from its signature, its actual gas cost once mined).
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct SponsorshipView {
    #[schema(example = "base")]
    pub chain: String,
    /// `"0"`: ended.
    #[schema(example = "0.05")]
    pub per_day: String,
    #[schema(example = "0.0012")]
    pub counted: String,
    /// `per_day` less `counted`, never below 0.
    #[schema(example = "0.0488")]
    pub left: String,
}

impl SponsorshipView {
    /// The stored figures in whole units of the chain's native coin.
    pub fn new(state: &SponsorshipState) -> Self {
        let decimals = chain::find(&state.chain).map_or(18, |c| c.decimals);
        SponsorshipView {
            chain: state.chain.clone(),
            per_day: format_units(state.per_day, decimals),
            counted: format_units(state.counted, decimals),
            left: format_units(state.left(), decimals),
        }
    }

    /// Each of `states`, in their order.
    pub fn list(states: &[SponsorshipState]) -> Vec<Self> {
        states.iter().map(SponsorshipView::new).collect()
    }
}

/// Every chain the operator set a sponsorship on for the agent (ended ones show `per_day` `"0"`).
#[derive(Debug, Serialize, ToSchema)]
pub struct SponsorshipsView {
    pub sponsorships: Vec<SponsorshipView>,
}
