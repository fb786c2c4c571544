//! The tool registry: one `Tool` definition per tool (name, capability, effect, description, argument schema,
//! handler), grouped by capability in one file per group. Everything that knows about tools reads it: the specs
//! offered to models, the capability check at execution, the builtin engine (through the `LlmRequest`), MCP
//! `tools/list` and `tools/call`. Adding a tool is one definition in its group.

pub mod analytics;
pub mod args;
pub mod calls;
pub mod compare;
pub mod error;
pub mod offers;
pub mod read;
pub mod transact;

use std::sync::Arc;
use std::time::Instant;

use alloy::primitives::{Address, U256};
use futures::future::BoxFuture;
use serde_json::{Value, json};
use uuid::Uuid;

pub use args::{Args, Fragments};
pub use error::{ToolError, ToolResult};

use crate::chain::{ChainError, Chains};
use crate::domain::agent::{Agent, Capability};
use crate::domain::amount::format_units;
use crate::domain::asset::Asset;
use crate::domain::audit::Actor;
use crate::domain::chain::ChainInfo;
use crate::llm::ToolSpec;
use crate::store::Store;
use crate::transfers::Transfers;

/// Runs a tool with checked capability; the arguments are still the model's and are validated by the handler.
pub type Handler = for<'a> fn(&'a ToolContext<'a>, Args<'a>) -> BoxFuture<'a, ToolResult>;

/// What running a tool does to the world, for clients that decide before they call (MCP annotations).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Effect {
    /// Reads chain state through a node: changes nothing, depends on the outside world.
    ReadsChain,
    /// Reads the service's own records: changes nothing, closed world.
    ReadsRecords,
    /// Moves funds: irreversible and not idempotent.
    MovesFunds,
    /// Changes the service's own records without moving funds (an offer put up for sale): not idempotent.
    ChangesRecords,
}

/// One tool.
pub struct Tool {
    pub name: &'static str,
    pub capability: Capability,
    pub effect: Effect,
    pub description: &'static str,
    /// The `properties` of the argument schema.
    pub arguments: fn(&Fragments) -> Value,
    pub required: &'static [&'static str],
    pub run: Handler,
}

impl Tool {
    /// The JSON schema of the argument object for an agent on `chains`.
    pub fn schema(&self, chains: &[String]) -> Value {
        let properties = (self.arguments)(&Fragments::new(chains));
        json!({ "type": "object", "properties": properties, "required": self.required, "additionalProperties": false })
    }

    pub fn spec(&self, chains: &[String]) -> ToolSpec {
        ToolSpec {
            name: self.name.to_string(),
            description: self.description.to_string(),
            parameters: self.schema(chains),
            capability: self.capability,
        }
    }
}

/// The tool groups; within and across them, the order is the order offered to models.
const GROUPS: &[&[Tool]] = &[
    read::TOOLS,
    offers::READ,
    compare::TOOLS,
    transact::TOOLS,
    calls::TOOLS,
    offers::TRANSACT,
    analytics::TOOLS,
];

/// Every tool, in the order offered to models.
pub fn all() -> impl Iterator<Item = &'static Tool> {
    GROUPS.iter().flat_map(|group| group.iter())
}

pub fn find(name: &str) -> Option<&'static Tool> {
    all().find(|tool| tool.name == name)
}

/// The tools this agent's capabilities allow.
pub fn offered(agent: &Agent) -> impl Iterator<Item = &'static Tool> + '_ {
    all().filter(|tool| agent.has(tool.capability))
}

/// The specs offered to a model for this agent.
pub fn specs(agent: &Agent) -> Vec<ToolSpec> {
    offered(agent).map(|tool| tool.spec(&agent.chains)).collect()
}

/// Every tool's capability, by name (what the builtin engine needs to explain a tool it was not offered).
pub fn capabilities() -> Vec<(String, Capability)> {
    all().map(|tool| (tool.name.to_string(), tool.capability)).collect()
}

/// Every argument name any tool takes (all non-secret: chains, addresses, amounts, hashes, limits).
pub fn argument_names() -> Vec<String> {
    let fragments = Fragments::new(&[]);
    let mut names: Vec<String> = all()
        .filter_map(|tool| {
            (tool.arguments)(&fragments)
                .as_object()
                .map(|o| o.keys().cloned().collect::<Vec<_>>())
        })
        .flatten()
        .collect();
    names.sort();
    names.dedup();
    names
}

/// The parts of the application the tools act through.
#[derive(Clone)]
pub struct ToolServices {
    pub store: Arc<dyn Store>,
    pub chains: Arc<Chains>,
    pub transfers: Transfers,
    /// The on-chain delegations the agents were granted (§21, `list_delegations`).
    pub delegations: crate::delegations::Delegations,
    /// The offers the agents sell (§23, `create_offer`).
    pub offers: crate::offers::Offers,
}

/// Executes tool calls for one agent: within a chat turn, or for an MCP session.
pub struct ToolContext<'a> {
    pub services: &'a ToolServices,
    pub agent: &'a Agent,
    pub connected_wallet: Option<Address>,
    /// The conversation whose turn this is; transfers report their confirmations there.
    pub conversation_id: Option<Uuid>,
    /// Who runs the tool, as the audit log records its transfers: the agent (chat) or an MCP client.
    pub actor: Actor,
    /// The agent token (and idempotency claim) the turn or session came with, checked again when money moves.
    pub mandate: &'a crate::store::Mandate,
    /// Whether the agent is guarded (an admin token, or owner addresses): decides calls no rule decides (§18).
    pub guarded: bool,
}

impl ToolContext<'_> {
    /// The agent as one that may move money (the `transact` capability), for the tools that do.
    pub fn transacting(&self, doing: &'static str) -> Result<crate::transfers::Transacting<'_>, ToolError> {
        Ok(crate::transfers::Transacting::check(
            self.agent,
            self.mandate,
            self.actor,
            doing,
        )?)
    }

    /// Runs a tool after checking the agent's capability again (a model may ask for anything).
    pub async fn execute(&self, name: &str, args: &Value) -> (ToolResult, u64) {
        let started = Instant::now();
        let result = self.dispatch(name, args).await;
        (result, started.elapsed().as_millis() as u64)
    }

    async fn dispatch(&self, name: &str, args: &Value) -> ToolResult {
        let tool = find(name).ok_or_else(|| ToolError::unknown_tool(name))?;
        if !self.agent.has(tool.capability) {
            return Err(ToolError::new(
                "capability_denied",
                format!(
                    "{name} needs the '{}' capability, which this agent does not have",
                    tool.capability.as_str()
                ),
            ));
        }
        (tool.run)(self, Args::new(args)?).await
    }

    /// Marks a transaction result `local_node: true` when `chain` is on a node on this machine, whose transactions
    /// no public explorer knows (the answer then gives no explorer link).
    pub fn mark_local_node(&self, chain: &str, result: &mut Value) {
        if self.services.chains.is_local_node(chain) {
            result["local_node"] = Value::Bool(true);
        }
    }

    /// The agent's own wallet on a chain.
    pub fn wallet(&self, chain: &ChainInfo) -> Result<Address, ToolError> {
        self.agent
            .wallet_addresses
            .get(chain.name)
            .copied()
            .ok_or_else(|| ToolError::invalid("the agent has no wallet on this chain"))
    }
}

/// The shape of a balance in tool results and the balances endpoint: the native balance and, by symbol, each
/// token's (`{address, units, formatted, decimals}` or `{address, error}`).
pub fn balance_json(
    chain: &ChainInfo,
    address: Address,
    wei: U256,
    tokens: &[(Asset, Result<U256, ChainError>)],
) -> Value {
    let tokens: serde_json::Map<String, Value> = tokens
        .iter()
        .map(|(token, balance)| {
            let contract = token.token.unwrap_or_default().to_checksum(None);
            let entry = match balance {
                Ok(units) => json!({"address": contract, "units": units.to_string(),
                    "formatted": format_units(*units, token.decimals), "decimals": token.decimals}),
                Err(e) => json!({"address": contract, "error": {"code": e.code(), "message": e.to_string()}}),
            };
            (token.symbol.clone(), entry)
        })
        .collect();
    json!({
        "chain": chain.name,
        "address": address.to_checksum(None),
        "wei": wei.to_string(),
        "formatted": format_units(wei, chain.decimals),
        "symbol": chain.native_symbol,
        "tokens": tokens,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique_and_schemas_list_their_required_arguments() {
        let names: Vec<&str> = all().map(|t| t.name).collect();
        let mut unique = names.clone();
        unique.sort();
        unique.dedup();
        assert_eq!(unique.len(), names.len());
        for tool in all() {
            let schema = tool.schema(&["base".into()]);
            for required in tool.required {
                assert!(
                    schema["properties"].get(*required).is_some(),
                    "{} {required}",
                    tool.name
                );
            }
            assert_eq!(find(tool.name).map(|t| t.name), Some(tool.name));
        }
    }

    #[test]
    fn the_registry_has_the_contract_tools_by_capability() {
        let of = |capability: Capability| -> Vec<&str> {
            all().filter(|t| t.capability == capability).map(|t| t.name).collect()
        };
        assert_eq!(
            of(Capability::Read),
            [
                "get_balance",
                "get_gas_price",
                "get_block_number",
                "get_transaction",
                "list_delegations",
                "list_income"
            ]
        );
        assert_eq!(
            of(Capability::Compare),
            ["compare_gas", "compare_balances", "estimate_transfer_cost"]
        );
        assert_eq!(
            of(Capability::Transact),
            [
                "send_native",
                "send_token",
                "pay_http",
                "call_contract",
                "simulate_call",
                "sign_typed_data",
                "create_offer"
            ]
        );
        assert_eq!(of(Capability::Analytics), ["spending_summary", "transaction_history"]);
        for tool in all() {
            // Only transact tools move funds; one of them (simulate_call) only reads the chain, another
            // (create_offer) only puts something up for sale.
            let moves_funds = tool.effect == Effect::MovesFunds;
            assert!(!moves_funds || tool.capability == Capability::Transact, "{}", tool.name);
            assert_eq!(
                moves_funds,
                tool.capability == Capability::Transact && !["simulate_call", "create_offer"].contains(&tool.name)
            );
        }
    }

    #[test]
    fn argument_names_cover_every_tool() {
        assert_eq!(
            argument_names(),
            [
                "address",
                "amount",
                "args",
                "asset",
                "body",
                "calls",
                "chain",
                "chains",
                "content",
                "content_type",
                "data",
                "delegation",
                "description",
                "forward",
                "function",
                "gas",
                "gas_per_day",
                "limit",
                "max_amount",
                "max_timeout_seconds",
                "method",
                "mime_type",
                "offer",
                "price",
                "settle",
                "status",
                "to",
                "token",
                "tx_hash",
                "typed_data",
                "url",
                "value"
            ]
        );
    }
}
