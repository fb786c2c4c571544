//! Tool arguments: the JSON-schema fragments definitions are built from, and typed reading of the argument object
//! a model (or MCP client) sent. A model may send anything, so every reader validates.

use alloy::primitives::{Address, TxHash};
use serde_json::{Map, Value, json};

use super::error::ToolError;
use crate::domain::agent::{Agent, parse_address};
use crate::domain::asset::{Asset, Registry};
use crate::domain::chain::{self as registry, ChainInfo};

/// Schema fragments shared by the tool definitions; `chain` enumerates the agent's chains.
pub struct Fragments {
    pub chain: Value,
    pub chain_list: Value,
    pub address: Value,
    pub amount: Value,
    pub token: Value,
    /// The optional `delegation` of the tools that move funds (§21): read by `Args::delegation`.
    pub delegation: Value,
}

impl Fragments {
    pub fn new(chains: &[String]) -> Self {
        let chain = json!({ "type": "string", "enum": chains, "description": "chain name" });
        Fragments {
            chain_list: json!({ "type": "array", "items": chain.clone(), "description": "default: all the agent's chains" }),
            chain,
            address: json!({ "type": "string", "pattern": "^0x[0-9a-fA-F]{40}$", "description": "default: the agent's wallet" }),
            amount: json!({ "type": "string", "description": "decimal amount in whole native units, e.g. \"0.01\"" }),
            token: json!({ "type": "string", "description": "a token of the chain's registry: its symbol (e.g. \"USDC\") or its 0x contract address" }),
            delegation: json!({ "type": "string", "format": "uuid", "description": "an on-chain delegation of the agent's (list_delegations) to spend from: the amount leaves the delegator's account, within what its caveats leave this period" }),
        }
    }
}

/// Typed access to a tool's argument object.
pub struct Args<'a>(&'a Map<String, Value>);

impl<'a> Args<'a> {
    pub fn new(args: &'a Value) -> Result<Self, ToolError> {
        args.as_object()
            .map(Args)
            .ok_or_else(|| ToolError::invalid("arguments must be a JSON object"))
    }

    /// A list argument; `None` when absent or null.
    pub fn list(&self, key: &str) -> Result<Option<&'a [Value]>, ToolError> {
        match self.0.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::Array(items)) => Ok(Some(items.as_slice())),
            Some(_) => Err(ToolError::invalid(format!("{key} must be a list"))),
        }
    }

    /// An object argument; `None` when absent or null.
    pub fn object(&self, key: &str) -> Result<Option<&'a Value>, ToolError> {
        match self.0.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(value @ Value::Object(_)) => Ok(Some(value)),
            Some(_) => Err(ToolError::invalid(format!("{key} must be an object"))),
        }
    }

    fn string(&self, key: &str) -> Result<Option<&'a str>, ToolError> {
        match self.0.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s)) => Ok(Some(s.trim())),
            Some(_) => Err(ToolError::invalid(format!("{key} must be a string"))),
        }
    }

    /// A non-negative integer argument; `None` when absent or null.
    pub fn integer(&self, key: &str) -> Result<Option<u64>, ToolError> {
        match self.0.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(v) => v
                .as_u64()
                .map(Some)
                .ok_or_else(|| ToolError::invalid(format!("{key} must be a non-negative integer"))),
        }
    }

    /// A string argument, trimmed; `None` when absent or null.
    pub fn text(&self, key: &str) -> Result<Option<&'a str>, ToolError> {
        self.string(key)
    }

    /// The delegation a call names (`delegation`), if any.
    pub fn delegation(&self) -> Result<Option<uuid::Uuid>, ToolError> {
        crate::delegations::named(self.text("delegation")?).map_err(|m| ToolError::invalid(format!("delegation {m}")))
    }

    /// Who pays the gas (`gas`, §22): `sponsored` or `wallet`; absent, the chain's default.
    pub fn gas(&self) -> Result<Option<crate::domain::transaction::Payer>, ToolError> {
        self.text("gas")?
            .map(|g| {
                crate::domain::transaction::Payer::parse(g.trim())
                    .ok_or_else(|| ToolError::invalid("gas must be \"sponsored\" or \"wallet\""))
            })
            .transpose()
    }

    pub fn optional_chain(&self, agent: &Agent) -> Result<Option<&'static ChainInfo>, ToolError> {
        self.string("chain")?.map(|name| agent_chain(agent, name)).transpose()
    }

    pub fn chain(&self, agent: &Agent) -> Result<&'static ChainInfo, ToolError> {
        self.optional_chain(agent)?
            .ok_or_else(|| ToolError::invalid("chain is required"))
    }

    pub fn chains(&self, agent: &Agent) -> Result<Vec<&'static ChainInfo>, ToolError> {
        match self.0.get("chains") {
            None | Some(Value::Null) => agent.chains.iter().map(|c| agent_chain(agent, c)).collect(),
            Some(Value::Array(items)) if !items.is_empty() => items
                .iter()
                .map(|v| {
                    v.as_str()
                        .ok_or_else(|| ToolError::invalid("chains must be strings"))
                        .and_then(|c| agent_chain(agent, c))
                })
                .collect(),
            Some(_) => Err(ToolError::invalid("chains must be a non-empty list of chain names")),
        }
    }

    pub fn address(&self, key: &str) -> Result<Option<Address>, ToolError> {
        self.string(key)?
            .map(|text| parse_address(text).ok_or_else(|| ToolError::invalid(format!("{key} must be a 0x address"))))
            .transpose()
    }

    pub fn tx_hash(&self) -> Result<TxHash, ToolError> {
        let text = self
            .string("tx_hash")?
            .ok_or_else(|| ToolError::invalid("tx_hash is required"))?;
        let valid = text.len() == 66 && text.starts_with("0x") && text[2..].bytes().all(|b| b.is_ascii_hexdigit());
        if !valid {
            return Err(ToolError::invalid("tx_hash must be 0x followed by 64 hex characters"));
        }
        text.parse()
            .map_err(|_| ToolError::invalid("tx_hash is not a valid hash"))
    }

    pub fn amount(&self) -> Result<String, ToolError> {
        match self.0.get("amount") {
            Some(Value::String(s)) if !s.trim().is_empty() => Ok(s.trim().to_string()),
            Some(Value::Number(n)) => Ok(n.to_string()),
            _ => Err(ToolError::invalid(
                "amount is required, as a decimal string such as \"0.01\"",
            )),
        }
    }

    /// The registry token named by `token` (symbol or contract address) on `chain`; `None` when absent or when
    /// it names the native coin.
    pub fn token(&self, registry: &Registry, chain: &'static ChainInfo) -> Result<Option<Asset>, ToolError> {
        let Some(wanted) = self.string("token")? else {
            return Ok(None);
        };
        match registry.named(chain, Some(wanted)) {
            Ok(asset) if asset.is_native() => Ok(None),
            Ok(asset) => Ok(Some(asset)),
            Err(e) => Err(ToolError::invalid(e.to_string())),
        }
    }

    pub fn limit(&self) -> Result<i64, ToolError> {
        match self.0.get("limit") {
            None | Some(Value::Null) => Ok(20),
            Some(v) => v
                .as_i64()
                .filter(|n| (1..=100).contains(n))
                .ok_or_else(|| ToolError::invalid("limit must be 1..100")),
        }
    }
}

/// A chain name that must be one of the agent's chains.
fn agent_chain(agent: &Agent, name: &str) -> Result<&'static ChainInfo, ToolError> {
    let name = name.trim().to_ascii_lowercase();
    match registry::find(&name) {
        Some(chain) if agent.has_chain(chain.name) => Ok(chain),
        Some(_) => Err(ToolError::invalid(format!(
            "{name} is not one of this agent's chains ({})",
            agent.chains.join(", ")
        ))),
        None => Err(ToolError::invalid(format!("unknown chain {name}"))),
    }
}
