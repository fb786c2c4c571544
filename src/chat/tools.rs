//! The chat tools: JSON schemas, argument validation, capability checks at execution, and exact-figure results.

use std::time::Instant;

use alloy::primitives::{Address, TxHash, U256};
use futures::future::join_all;
use serde_json::{Value, json};

use crate::chain::{ChainError, TRANSFER_GAS, format_gwei};
use crate::domain::agent::{Agent, Capability, parse_address};
use crate::domain::amount::{format_units, parse_units};
use crate::domain::chain::{self as registry, ChainInfo};
use crate::llm::ToolSpec;
use crate::state::AppState;

/// A tool's refusal or failure, returned to the model as `{"error": {code, message}}`.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolError {
    pub code: &'static str,
    pub message: String,
}

impl ToolError {
    pub fn new(code: &'static str, message: impl Into<String>) -> Self {
        ToolError {
            code,
            message: message.into(),
        }
    }

    fn invalid(message: impl Into<String>) -> Self {
        Self::new("invalid_arguments", message)
    }

    pub fn to_json(&self) -> Value {
        json!({ "code": self.code, "message": self.message })
    }
}

impl From<ChainError> for ToolError {
    fn from(err: ChainError) -> Self {
        ToolError::new(err.code(), err.to_string())
    }
}

type ToolResult = Result<Value, ToolError>;

/// Tool name -> the capability it needs and its description. The order is the order offered to models.
const TOOLS: &[(&str, Capability, &str)] = &[
    (
        "get_balance",
        Capability::Read,
        "Native balance of an address (default: the agent's wallet) on a chain.",
    ),
    (
        "get_gas_price",
        Capability::Read,
        "Current EIP-1559 base fee and priority fee of a chain, in gwei.",
    ),
    ("get_block_number", Capability::Read, "Latest block number of a chain."),
    (
        "get_transaction",
        Capability::Read,
        "Status and details of a transaction by hash on a chain.",
    ),
    (
        "compare_gas",
        Capability::Compare,
        "Compare gas prices across chains and find the cheapest for a plain transfer.",
    ),
    (
        "compare_balances",
        Capability::Compare,
        "Native balances of an address (default: the agent's wallet) across chains.",
    ),
    (
        "estimate_transfer_cost",
        Capability::Compare,
        "Estimate the fee and total cost of sending an amount on a chain.",
    ),
    (
        "send_native",
        Capability::Transact,
        "Send native tokens from the agent's wallet to an address (signed by the service, within the spending cap).",
    ),
    (
        "spending_summary",
        Capability::Analytics,
        "Spending cap, amount spent and remaining allowance per chain.",
    ),
    (
        "transaction_history",
        Capability::Analytics,
        "The agent's recent transactions, optionally for one chain.",
    ),
];

/// The capability a tool needs; `None` for an unknown tool.
pub fn required_capability(tool: &str) -> Option<Capability> {
    TOOLS.iter().find(|(name, _, _)| *name == tool).map(|(_, cap, _)| *cap)
}

fn schema(tool: &str, chains: &[String]) -> Value {
    let chain = json!({ "type": "string", "enum": chains, "description": "chain name" });
    let chain_list =
        json!({ "type": "array", "items": chain.clone(), "description": "default: all the agent's chains" });
    let address =
        json!({ "type": "string", "pattern": "^0x[0-9a-fA-F]{40}$", "description": "default: the agent's wallet" });
    let amount = json!({ "type": "string", "description": "decimal amount in whole native units, e.g. \"0.01\"" });
    let (properties, required): (Value, &[&str]) = match tool {
        "get_balance" => (json!({ "chain": chain, "address": address }), &["chain"]),
        "get_gas_price" | "get_block_number" => (json!({ "chain": chain }), &["chain"]),
        "get_transaction" => (
            json!({ "chain": chain, "tx_hash": { "type": "string", "pattern": "^0x[0-9a-fA-F]{64}$" } }),
            &["chain", "tx_hash"],
        ),
        "compare_gas" => (json!({ "chains": chain_list }), &[]),
        "compare_balances" => (json!({ "chains": chain_list, "address": address }), &[]),
        "estimate_transfer_cost" => (json!({ "chain": chain, "amount": amount }), &["chain", "amount"]),
        "send_native" => (
            json!({ "chain": chain, "to": { "type": "string", "pattern": "^0x[0-9a-fA-F]{40}$", "description": "recipient" }, "amount": amount }),
            &["chain", "to", "amount"],
        ),
        "transaction_history" => (
            json!({ "chain": chain, "limit": { "type": "integer", "minimum": 1, "maximum": 100 } }),
            &[],
        ),
        _ => (json!({}), &[]),
    };
    json!({ "type": "object", "properties": properties, "required": required, "additionalProperties": false })
}

/// The tools offered to a model for this agent: only those its capabilities allow.
pub fn specs(agent: &Agent) -> Vec<ToolSpec> {
    TOOLS
        .iter()
        .filter(|(_, cap, _)| agent.has(*cap))
        .map(|(name, _, description)| ToolSpec {
            name: name.to_string(),
            description: description.to_string(),
            parameters: schema(name, &agent.chains),
        })
        .collect()
}

/// Executes tool calls for one agent within one turn.
pub struct Toolbox<'a> {
    pub state: &'a AppState,
    pub agent: &'a Agent,
    pub connected_wallet: Option<Address>,
    /// The conversation whose turn this is; transfers report their confirmations there.
    pub conversation_id: Option<uuid::Uuid>,
}

impl Toolbox<'_> {
    /// Runs a tool after checking the agent's capability again (a model may ask for anything).
    pub async fn execute(&self, tool: &str, args: &Value) -> (ToolResult, u64) {
        let started = Instant::now();
        let result = self.dispatch(tool, args).await;
        (result, started.elapsed().as_millis() as u64)
    }

    async fn dispatch(&self, tool: &str, args: &Value) -> ToolResult {
        let capability =
            required_capability(tool).ok_or_else(|| ToolError::new("unknown_tool", format!("no tool named {tool}")))?;
        if !self.agent.has(capability) {
            return Err(ToolError::new(
                "capability_denied",
                format!(
                    "{tool} needs the '{}' capability, which this agent does not have",
                    capability.as_str()
                ),
            ));
        }
        let args = Args(
            args.as_object()
                .ok_or_else(|| ToolError::invalid("arguments must be a JSON object"))?,
        );
        match tool {
            "get_balance" => {
                self.get_balance(args.chain(self.agent)?, args.address("address")?)
                    .await
            }
            "get_gas_price" => self.get_gas_price(args.chain(self.agent)?).await,
            "get_block_number" => {
                let chain = args.chain(self.agent)?;
                let block = self.state.chains.get(chain.name)?.block_number().await?;
                Ok(json!({ "chain": chain.name, "block_number": block }))
            }
            "get_transaction" => self.get_transaction(args.chain(self.agent)?, args.tx_hash()?).await,
            "compare_gas" => self.compare_gas(args.chains(self.agent)?).await,
            "compare_balances" => {
                self.compare_balances(args.chains(self.agent)?, args.address("address")?)
                    .await
            }
            "estimate_transfer_cost" => {
                self.estimate_transfer_cost(args.chain(self.agent)?, &args.amount()?)
                    .await
            }
            "send_native" => {
                let chain = args.chain(self.agent)?;
                let to = args
                    .address("to")?
                    .ok_or_else(|| ToolError::invalid("to is required (a 0x address)"))?;
                let amount = args.amount()?;
                let order = crate::transfers::TransferOrder {
                    agent: self.agent,
                    chain,
                    to,
                    amount: &amount,
                    conversation_id: self.conversation_id,
                };
                crate::transfers::send_native(self.state, order).await
            }
            "spending_summary" => crate::chat::analytics::spending_summary(self.state, self.agent).await,
            "transaction_history" => {
                let chain = args.optional_chain(self.agent)?;
                crate::chat::analytics::transaction_history(self.state, self.agent, chain, args.limit()?).await
            }
            _ => Err(ToolError::new("unknown_tool", format!("no tool named {tool}"))),
        }
    }

    fn wallet(&self, chain: &ChainInfo) -> Result<Address, ToolError> {
        self.agent
            .wallet_addresses
            .get(chain.name)
            .copied()
            .ok_or_else(|| ToolError::invalid("the agent has no wallet on this chain"))
    }

    async fn get_balance(&self, chain: &'static ChainInfo, address: Option<Address>) -> ToolResult {
        let address = match address {
            Some(a) => a,
            None => self.wallet(chain)?,
        };
        let wei = self.state.chains.get(chain.name)?.balance(address).await?;
        Ok(balance_json(chain, address, wei))
    }

    async fn get_gas_price(&self, chain: &'static ChainInfo) -> ToolResult {
        let fees = self.state.chains.get(chain.name)?.fees().await?;
        Ok(json!({
            "chain": chain.name,
            "base_fee_gwei": format_gwei(fees.base_fee_per_gas),
            "priority_fee_gwei": format_gwei(fees.max_priority_fee_per_gas),
            "max_fee_gwei": format_gwei(fees.max_fee_per_gas),
            "gas_price_gwei": format_gwei(fees.base_fee_per_gas.saturating_add(fees.max_priority_fee_per_gas)),
        }))
    }

    async fn get_transaction(&self, chain: &'static ChainInfo, hash: TxHash) -> ToolResult {
        let tx = self.state.chains.get(chain.name)?.transaction(hash).await?;
        let Some(tx) = tx else {
            return Ok(json!({ "chain": chain.name, "tx_hash": hash.to_string(), "status": "not_found" }));
        };
        Ok(json!({
            "chain": chain.name,
            "tx_hash": hash.to_string(),
            "status": tx.status.as_str(),
            "block_number": tx.block_number,
            "confirmations": tx.confirmations,
            "from": tx.from.to_checksum(None),
            "to": tx.to.map(|a| a.to_checksum(None)),
            "value_wei": tx.value.to_string(),
            "value": format_units(tx.value, chain.decimals),
            "symbol": chain.native_symbol,
            "gas_used": tx.gas_used,
            "explorer_url": chain.tx_url(&hash.to_string()),
        }))
    }

    async fn compare_gas(&self, chains: Vec<&'static ChainInfo>) -> ToolResult {
        let rows = join_all(chains.iter().map(|chain| async move {
            match self.state.chains.get(chain.name) {
                Ok(client) => client.fees().await.map(|f| (chain, f)).map_err(|e| (chain, e)),
                Err(e) => Err((chain, e)),
            }
        }))
        .await;
        let mut cheapest: Option<(&str, U256)> = None;
        let entries: Vec<Value> = rows
            .into_iter()
            .map(|row| match row {
                Ok((chain, fees)) => {
                    let cost = fees.expected_cost(TRANSFER_GAS);
                    if cheapest.is_none_or(|(_, best)| cost < best) {
                        cheapest = Some((chain.name, cost));
                    }
                    json!({
                        "chain": chain.name,
                        "base_fee_gwei": format_gwei(fees.base_fee_per_gas),
                        "priority_fee_gwei": format_gwei(fees.max_priority_fee_per_gas),
                        "gas_price_gwei": format_gwei(fees.base_fee_per_gas.saturating_add(fees.max_priority_fee_per_gas)),
                        "transfer_cost_wei": cost.to_string(),
                        "transfer_cost": format_units(cost, chain.decimals),
                        "symbol": chain.native_symbol,
                    })
                }
                Err((chain, e)) => json!({ "chain": chain.name, "error": ToolError::from(e).to_json() }),
            })
            .collect();
        Ok(json!({ "cheapest": cheapest.map(|(name, _)| name), "transfer_gas": TRANSFER_GAS, "chains": entries }))
    }

    async fn compare_balances(&self, chains: Vec<&'static ChainInfo>, address: Option<Address>) -> ToolResult {
        let rows = join_all(chains.iter().map(|chain| async move {
            let address = match address {
                Some(a) => a,
                None => self.wallet(chain)?,
            };
            let wei = self.state.chains.get(chain.name)?.balance(address).await?;
            Ok::<_, ToolError>(balance_json(chain, address, wei))
        }))
        .await;
        let entries: Vec<Value> = rows
            .into_iter()
            .zip(&chains)
            .map(|(row, chain)| row.unwrap_or_else(|e| json!({ "chain": chain.name, "error": e.to_json() })))
            .collect();
        Ok(json!({ "balances": entries }))
    }

    async fn estimate_transfer_cost(&self, chain: &'static ChainInfo, amount: &str) -> ToolResult {
        let value = parse_units(amount, chain.decimals).map_err(|e| ToolError::invalid(format!("amount {e}")))?;
        let client = self.state.chains.get(chain.name)?;
        let from = self.wallet(chain)?;
        let to = self.connected_wallet.unwrap_or(from);
        // A plain transfer to an account costs 21,000 gas; the node's estimate also covers contract recipients.
        let gas_limit = client
            .estimate_transfer_gas(from, to, U256::ZERO)
            .await
            .unwrap_or(TRANSFER_GAS)
            .max(TRANSFER_GAS);
        let fees = client.fees().await?;
        let fee = fees.expected_cost(gas_limit);
        let max_fee = fees.max_cost(gas_limit);
        Ok(json!({
            "chain": chain.name,
            "amount": format_units(value, chain.decimals),
            "amount_wei": value.to_string(),
            "gas_limit": gas_limit,
            "base_fee_gwei": format_gwei(fees.base_fee_per_gas),
            "priority_fee_gwei": format_gwei(fees.max_priority_fee_per_gas),
            "max_fee_per_gas_gwei": format_gwei(fees.max_fee_per_gas),
            "fee_wei": fee.to_string(),
            "fee": format_units(fee, chain.decimals),
            "max_fee_wei": max_fee.to_string(),
            "total_wei": (value + fee).to_string(),
            "total": format_units(value + fee, chain.decimals),
            "symbol": chain.native_symbol,
        }))
    }
}

/// The shape of a balance in tool results and the balances endpoint.
pub fn balance_json(chain: &ChainInfo, address: Address, wei: U256) -> Value {
    json!({
        "chain": chain.name,
        "address": address.to_checksum(None),
        "wei": wei.to_string(),
        "formatted": format_units(wei, chain.decimals),
        "symbol": chain.native_symbol,
    })
}

/// Typed access to a tool's argument object.
struct Args<'a>(&'a serde_json::Map<String, Value>);

impl Args<'_> {
    fn string(&self, key: &str) -> Result<Option<&str>, ToolError> {
        match self.0.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s)) => Ok(Some(s.trim())),
            Some(_) => Err(ToolError::invalid(format!("{key} must be a string"))),
        }
    }

    fn optional_chain(&self, agent: &Agent) -> Result<Option<&'static ChainInfo>, ToolError> {
        self.string("chain")?.map(|name| agent_chain(agent, name)).transpose()
    }

    fn chain(&self, agent: &Agent) -> Result<&'static ChainInfo, ToolError> {
        self.optional_chain(agent)?
            .ok_or_else(|| ToolError::invalid("chain is required"))
    }

    fn chains(&self, agent: &Agent) -> Result<Vec<&'static ChainInfo>, ToolError> {
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

    fn address(&self, key: &str) -> Result<Option<Address>, ToolError> {
        self.string(key)?
            .map(|text| parse_address(text).ok_or_else(|| ToolError::invalid(format!("{key} must be a 0x address"))))
            .transpose()
    }

    fn tx_hash(&self) -> Result<TxHash, ToolError> {
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

    fn amount(&self) -> Result<String, ToolError> {
        match self.0.get("amount") {
            Some(Value::String(s)) if !s.trim().is_empty() => Ok(s.trim().to_string()),
            Some(Value::Number(n)) => Ok(n.to_string()),
            _ => Err(ToolError::invalid(
                "amount is required, as a decimal string such as \"0.01\"",
            )),
        }
    }

    fn limit(&self) -> Result<i64, ToolError> {
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
