//! Response shapes as documented in the OpenAPI document. Handlers build these bodies; the API tests check that
//! the bodies and these shapes agree.
#![allow(dead_code)]

use std::collections::BTreeMap;

use serde_json::Value;
use utoipa::ToSchema;

/// `{"error": {"code", "message", "details?"}}`.
#[derive(ToSchema)]
pub struct ErrorBody {
    pub error: ErrorDetail,
}

#[derive(ToSchema)]
pub struct ErrorDetail {
    /// snake_case, e.g. `validation_failed`, `agent_not_found`, `rate_limited`.
    pub code: String,
    pub message: String,
    /// For 422: `{"fields": {"<field>": "<problem>"}}`.
    pub details: Option<Value>,
}

/// An agent with its wallets; `spent` is per chain, a decimal string in native units.
#[derive(ToSchema, serde::Serialize)]
pub struct AgentDetail {
    #[schema(format = "uuid")]
    pub id: String,
    pub name: String,
    pub description: Option<String>,
    #[schema(example = json!(["ethereum", "base"]))]
    pub chains: Vec<String>,
    #[schema(example = json!(["read"]))]
    pub capabilities: Vec<String>,
    /// In native units per chain (a number).
    pub spending_cap: f64,
    /// Chain name -> EIP-55 address.
    pub wallet_addresses: BTreeMap<String, String>,
    /// Chain name -> owner address recognised for reissue.
    pub owner_addresses: BTreeMap<String, String>,
    /// Chain name -> amount counted against the cap (decimal string, native units).
    pub spent: BTreeMap<String, String>,
    pub is_active: bool,
    #[schema(format = "date-time")]
    pub created_at: String,
    #[schema(format = "date-time")]
    pub updated_at: String,
}

/// The creation response: the detail plus the access token, shown this once.
#[derive(ToSchema, serde::Serialize)]
pub struct AgentCreated {
    #[schema(inline)]
    #[serde(flatten)]
    pub agent: AgentDetail,
    /// `agt_` + 43 base64url characters. Store it: it cannot be shown again.
    pub access_token: String,
}

/// A list entry (summary fields only).
#[derive(ToSchema)]
pub struct AgentSummary {
    #[schema(format = "uuid")]
    pub id: String,
    pub name: String,
    pub description: Option<String>,
    pub chains: Vec<String>,
    pub capabilities: Vec<String>,
    pub is_active: bool,
    #[schema(format = "date-time")]
    pub created_at: String,
}

/// A reissue challenge to sign with `personal_sign`.
#[derive(ToSchema)]
pub struct ChallengeBody {
    /// `<prefix>:reissue:<agent_id>:<nonce>:<expires_at_unix>`.
    pub message: String,
    pub nonce: String,
    #[schema(format = "date-time")]
    pub expires_at: String,
}

#[derive(ToSchema)]
pub struct ReissuedToken {
    pub access_token: String,
    pub agent: AgentDetail,
}

#[derive(ToSchema)]
pub struct ExportedKey {
    pub chain: String,
    pub address: String,
    /// 0x-prefixed hex secp256k1 private key.
    pub private_key: String,
}

#[derive(ToSchema)]
pub struct ChainEntry {
    pub name: String,
    pub chain_id: u64,
    pub native_symbol: String,
    pub decimals: u8,
    pub explorer_url: String,
    /// An RPC URL is set for this chain.
    pub configured: bool,
}

/// Per chain: `{address, wei, formatted, symbol}` or `{address, error: {code, message}}`.
#[derive(ToSchema)]
pub struct Balances {
    #[schema(format = "uuid")]
    pub agent_id: String,
    pub balances: BTreeMap<String, Value>,
}

#[derive(ToSchema)]
pub struct Deposit {
    pub chain: String,
    pub chain_id: u64,
    pub address: String,
    pub symbol: String,
    /// EIP-681: `ethereum:<address>@<chain_id>[?value=<wei>]`.
    pub payment_uri: String,
    pub explorer_url: String,
}

#[derive(ToSchema)]
pub struct FundInstructions {
    #[schema(format = "uuid")]
    pub agent_id: String,
    pub deposits: Vec<Deposit>,
    pub instructions: String,
}

/// One tool call of a turn.
#[derive(ToSchema)]
pub struct ChainCallBody {
    pub id: String,
    /// get_balance, get_gas_price, get_block_number, get_transaction, compare_gas, compare_balances,
    /// estimate_transfer_cost, send_native, spending_summary, transaction_history.
    pub tool: String,
    pub args: Value,
    pub result: Value,
    pub error: Option<Value>,
    pub duration_ms: u64,
}

#[derive(ToSchema)]
pub struct ChatResponse {
    pub response: String,
    #[schema(format = "uuid")]
    pub conversation_id: String,
    pub chain_calls: Vec<ChainCallBody>,
    pub tokens_used: u64,
    #[schema(format = "uuid")]
    pub message_id: String,
}

#[derive(ToSchema)]
pub struct ConversationSummary {
    #[schema(format = "uuid")]
    pub id: String,
    #[schema(format = "uuid")]
    pub agent_id: String,
    pub title: String,
    #[schema(format = "date-time")]
    pub created_at: String,
    #[schema(format = "date-time")]
    pub updated_at: String,
    pub message_count: i64,
}

#[derive(ToSchema)]
pub struct MessageBody {
    #[schema(format = "uuid")]
    pub id: String,
    /// `user` or `assistant`.
    pub role: String,
    pub content: String,
    pub chain_calls: Vec<ChainCallBody>,
    #[schema(format = "date-time")]
    pub created_at: String,
}

#[derive(ToSchema)]
pub struct TransactionBody {
    #[schema(format = "uuid")]
    pub id: String,
    pub chain: String,
    pub tx_hash: String,
    pub from: String,
    pub to: String,
    pub value_wei: String,
    pub value: String,
    pub nonce: u64,
    /// pending, confirmed, reverted or dropped.
    pub status: String,
    pub block_number: Option<u64>,
    pub gas_used: Option<u64>,
    pub conversation_id: Option<String>,
    #[schema(format = "date-time")]
    pub created_at: String,
    #[schema(format = "date-time")]
    pub updated_at: String,
}

#[derive(ToSchema)]
pub struct Health {
    /// `ok`.
    pub status: String,
    pub version: String,
    pub database: String,
}
