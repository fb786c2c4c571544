//! Views of an agent: the detail (also inside reissue answers), the creation answer with its one-time token, the
//! list summary, and an exported key.

use std::collections::BTreeMap;

use alloy::primitives::Address;
use chrono::{DateTime, Utc};
use serde::Serialize;
use utoipa::ToSchema;
use uuid::Uuid;
use zeroize::Zeroizing;

use crate::domain::agent::{Agent, Capability};
use crate::domain::amount;

/// What an agent may do; each unlocks a group of chat tools.
#[derive(Debug, Clone, Copy, Serialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum CapabilityView {
    Read,
    Compare,
    Transact,
    Analytics,
}

impl From<Capability> for CapabilityView {
    fn from(capability: Capability) -> Self {
        match capability {
            Capability::Read => Self::Read,
            Capability::Compare => Self::Compare,
            Capability::Transact => Self::Transact,
            Capability::Analytics => Self::Analytics,
        }
    }
}

/// An agent with its wallets (never keys, ciphertexts or token hashes).
#[derive(Debug, Serialize, ToSchema)]
pub struct AgentDetailView {
    pub id: Uuid,
    pub name: String,
    #[schema(required = true)]
    pub description: Option<String>,
    #[schema(example = json!(["ethereum", "base"]))]
    pub chains: Vec<String>,
    pub capabilities: Vec<CapabilityView>,
    /// Per chain, in native units (ETH on ethereum and base); a JSON number.
    #[schema(value_type = f64, minimum = 0)]
    pub spending_cap: serde_json::Value,
    /// Chain name -> EIP-55 address of the agent's own wallet.
    pub wallet_addresses: BTreeMap<String, String>,
    /// Chain name -> owner address recognised for reissue.
    pub owner_addresses: BTreeMap<String, String>,
    /// Chain name -> amount counted against the cap there (decimal string, native units).
    pub spent: BTreeMap<String, String>,
    pub is_active: bool,
    /// Whether the agent's own token is kept from loosening its guardrails (`ADMIN_TOKEN` set, or owner addresses
    /// present): raising the cap, adding capabilities or chains, changing owners and key export then need owner
    /// authority.
    pub guarded: bool,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

fn checksummed(map: &BTreeMap<String, Address>) -> BTreeMap<String, String> {
    map.iter()
        .map(|(chain, a)| (chain.clone(), a.to_checksum(None)))
        .collect()
}

impl AgentDetailView {
    /// The detail of `agent`; `guarded` comes from the authentication service (`Authenticator::is_guarded`).
    pub fn new(agent: &Agent, guarded: bool) -> Self {
        let spent = agent
            .chains
            .iter()
            .map(|c| {
                let wei = agent.spent_wei.get(c).copied().unwrap_or_default();
                (c.clone(), amount::format_units(wei, 18))
            })
            .collect();
        Self {
            id: agent.id,
            name: agent.name.clone(),
            description: agent.description.clone(),
            chains: agent.chains.clone(),
            capabilities: agent.capabilities.iter().copied().map(CapabilityView::from).collect(),
            spending_cap: amount::to_json_number(agent.spending_cap_wei, 18),
            wallet_addresses: checksummed(&agent.wallet_addresses),
            owner_addresses: checksummed(&agent.owner_addresses),
            spent,
            is_active: agent.is_active,
            guarded,
            created_at: agent.created_at,
            updated_at: agent.updated_at,
        }
    }
}

/// The creation answer: the detail plus the access token, shown this once.
#[derive(Debug, Serialize, ToSchema)]
pub struct AgentCreatedView {
    #[serde(flatten)]
    pub agent: AgentDetailView,
    /// `agt_` + 43 base64url characters. Store it: it cannot be shown again.
    pub access_token: String,
}

/// A list entry: summary fields only.
#[derive(Debug, Serialize, ToSchema)]
pub struct AgentSummaryView {
    pub id: Uuid,
    pub name: String,
    #[schema(required = true)]
    pub description: Option<String>,
    pub chains: Vec<String>,
    pub capabilities: Vec<CapabilityView>,
    pub is_active: bool,
    pub created_at: DateTime<Utc>,
}

impl From<&Agent> for AgentSummaryView {
    fn from(agent: &Agent) -> Self {
        Self {
            id: agent.id,
            name: agent.name.clone(),
            description: agent.description.clone(),
            chains: agent.chains.clone(),
            capabilities: agent.capabilities.iter().copied().map(CapabilityView::from).collect(),
            is_active: agent.is_active,
            created_at: agent.created_at,
        }
    }
}

/// An exported wallet key. The key is wiped from memory when the view is dropped; no `Debug`, so it cannot be logged.
#[derive(Serialize, ToSchema)]
pub struct ExportedKeyView {
    pub chain: String,
    /// EIP-55 address of the key.
    pub address: String,
    /// 0x-prefixed hex secp256k1 private key.
    #[serde(serialize_with = "expose")]
    #[schema(value_type = String)]
    pub private_key: Zeroizing<String>,
}

fn expose<S: serde::Serializer>(secret: &Zeroizing<String>, serializer: S) -> Result<S::Ok, S::Error> {
    serializer.serialize_str(secret.as_str())
}
