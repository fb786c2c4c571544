//! What both backends share: column lists, rows as read (`sqlx::FromRow`, generic over the database) and their
//! conversion into domain values, and the text encodings of lists and amounts.

use std::collections::BTreeMap;

use alloy::primitives::{Address, U256};
use chrono::{DateTime, Utc};
use uuid::Uuid;

use super::{Challenge, EventRecord, Message, Role, StoreError, StoreResult};
use crate::domain::agent::{Agent, Capability};
use crate::domain::transaction::{
    Action, Body, CallRecord, OnChain, Payer, Placed, SignatureRecord, StoredTx, TxState,
};
use crate::vault::EncryptedKey;

pub const AGENT_COLUMNS: &str =
    "id, name, description, chains, capabilities, spending_cap_wei, is_active, created_at, updated_at";

pub const CONVERSATION_SELECT: &str = "SELECT c.id, c.agent_id, c.title, c.created_at, c.updated_at, \
     (SELECT COUNT(*) FROM messages m WHERE m.conversation_id = c.id) AS message_count FROM conversations c";

pub const MESSAGE_COLUMNS: &str = "id, conversation_id, role, content, chain_calls, tokens_used, created_at";

/// The statuses of a transfer on its way (signed, or broadcast and not settled), as SQL for `status IN …`.
macro_rules! open_statuses {
    () => {
        "('signed', 'pending')"
    };
}
/// The statuses of a transfer that moved or may still move money: on its way, or confirmed.
macro_rules! outgoing_statuses {
    () => {
        "('signed', 'pending', 'confirmed')"
    };
}
pub(crate) use {open_statuses, outgoing_statuses};
/// `open_statuses!()` for SQL built with `format!`.
pub const OPEN: &str = open_statuses!();

pub const TX_COLUMNS: &str = "id, agent_id, chain, conversation_id, nonce, from_address, to_address, value_wei, \
     gas_limit, max_fee_per_gas, reserved_wei, actual_cost_wei, raw_tx, tx_hash, status, block_number, gas_used, \
     created_at, updated_at, asset, token_address, asset_decimals, kind, x402, call_record, delegation, delegation_id";

pub const EVENT_COLUMNS: &str = "id, conversation_id, agent_id, kind, payload";

/// An `agents` row; addresses and spending are read separately.
#[derive(sqlx::FromRow)]
pub struct AgentRow {
    id: Uuid,
    name: String,
    description: Option<String>,
    chains: String,
    capabilities: String,
    spending_cap_wei: String,
    is_active: bool,
    created_at: DateTime<Utc>,
    updated_at: DateTime<Utc>,
}

impl AgentRow {
    pub fn into_agent(self) -> StoreResult<Agent> {
        Ok(Agent {
            id: self.id,
            name: self.name,
            description: self.description,
            chains: chains_from_text(&self.chains)?,
            capabilities: capabilities_from_text(&self.capabilities)?,
            spending_cap_wei: wei_from_text(&self.spending_cap_wei, "spending_cap_wei")?,
            owner_addresses: BTreeMap::new(),
            wallet_addresses: BTreeMap::new(),
            spent_wei: BTreeMap::new(),
            is_active: self.is_active,
            created_at: self.created_at,
            updated_at: self.updated_at,
        })
    }
}

/// An agent row with the owner of a token looked up in the same query.
#[derive(sqlx::FromRow)]
pub struct AgentTokenRow {
    #[sqlx(flatten)]
    pub agent: AgentRow,
    pub token_owner: Option<Uuid>,
}

/// One per-chain value of an agent: `kind` is `wallet`, `owner` or `spent`.
pub type PerChainRow = (String, String, String);

/// Puts the per-chain rows (wallet and owner addresses, spending) into the agent.
pub fn fill_per_chain(agent: &mut Agent, per_chain: Vec<PerChainRow>) -> StoreResult<()> {
    let (wallets, rest): (Vec<_>, Vec<_>) = per_chain.into_iter().partition(|(kind, _, _)| kind == "wallet");
    let (owners, spent): (Vec<_>, Vec<_>) = rest.into_iter().partition(|(kind, _, _)| kind == "owner");
    let pairs = |v: Vec<PerChainRow>| v.into_iter().map(|(_, c, a)| (c, a)).collect::<Vec<_>>();
    agent.spent_wei = pairs(spent)
        .into_iter()
        .map(|(chain, wei)| Ok((chain, wei_from_text(&wei, "spending.spent_wei")?)))
        .collect::<StoreResult<_>>()?;
    // Addresses of chains the agent has since dropped stay stored but are not the agent's any more.
    agent.wallet_addresses = address_map(pairs(wallets))?;
    agent.wallet_addresses.retain(|chain, _| agent.chains.contains(chain));
    agent.owner_addresses = address_map(pairs(owners))?;
    Ok(())
}

#[derive(sqlx::FromRow)]
pub struct KeyRow {
    address: String,
    ciphertext: Vec<u8>,
    nonce: Vec<u8>,
    key_version: i32,
    scheme: String,
}

impl KeyRow {
    pub fn into_key(self) -> StoreResult<EncryptedKey> {
        Ok(EncryptedKey {
            address: address_from_text(&self.address)?,
            ciphertext: self.ciphertext,
            nonce: self.nonce,
            key_version: self.key_version,
            scheme: crate::vault::KeyScheme::parse(&self.scheme)
                .ok_or_else(|| StoreError::Corrupt(format!("unknown wallet key scheme {:?}", self.scheme)))?,
        })
    }
}

#[derive(sqlx::FromRow)]
pub struct ChallengeRow {
    nonce: String,
    agent_id: Uuid,
    message: String,
    expires_at: DateTime<Utc>,
    used_at: Option<DateTime<Utc>>,
}

impl From<ChallengeRow> for Challenge {
    fn from(row: ChallengeRow) -> Self {
        Challenge {
            nonce: row.nonce,
            agent_id: row.agent_id,
            message: row.message,
            expires_at: row.expires_at,
            used: row.used_at.is_some(),
        }
    }
}

#[derive(sqlx::FromRow)]
pub struct MessageRow {
    id: Uuid,
    conversation_id: Uuid,
    role: String,
    content: String,
    chain_calls: String,
    tokens_used: i64,
    created_at: DateTime<Utc>,
}

impl MessageRow {
    pub fn into_message(self) -> StoreResult<Message> {
        let role = match self.role.as_str() {
            "user" => Role::User,
            "assistant" => Role::Assistant,
            other => return Err(StoreError::Corrupt(format!("messages.role {other}"))),
        };
        Ok(Message {
            id: self.id,
            conversation_id: self.conversation_id,
            role,
            content: self.content,
            chain_calls: serde_json::from_str(&self.chain_calls)
                .map_err(|_| StoreError::Corrupt("messages.chain_calls".into()))?,
            tokens_used: self.tokens_used,
            created_at: self.created_at,
        })
    }
}

#[derive(sqlx::FromRow)]
pub struct TxRow {
    id: Uuid,
    agent_id: Uuid,
    chain: String,
    conversation_id: Option<Uuid>,
    nonce: Option<i64>,
    from_address: String,
    to_address: String,
    value_wei: String,
    gas_limit: i64,
    max_fee_per_gas: String,
    reserved_wei: String,
    actual_cost_wei: Option<String>,
    raw_tx: Vec<u8>,
    tx_hash: Option<String>,
    status: String,
    block_number: Option<i64>,
    gas_used: Option<i64>,
    created_at: DateTime<Utc>,
    updated_at: DateTime<Utc>,
    asset: String,
    token_address: Option<String>,
    asset_decimals: Option<i64>,
    kind: String,
    x402: Option<String>,
    call_record: Option<String>,
    delegation: Option<String>,
    #[allow(dead_code)] // Read for the index's sake only: `delegation` holds the same id.
    delegation_id: Option<Uuid>,
}

impl TxRow {
    pub fn into_tx(self) -> StoreResult<StoredTx> {
        let (nonce, tx_hash) = (self.nonce, self.tx_hash);
        // Only a transaction of the agent's has a nonce and a hash; an authorization or a signature has NULL in both.
        let at = || match (nonce, tx_hash) {
            (Some(n), Some(tx_hash)) => Ok(Placed {
                nonce: u64_from(n, "nonce")?,
                tx_hash,
            }),
            _ => Err(StoreError::Corrupt("transactions.nonce, tx_hash".into())),
        };
        let body = body_from_columns(
            BodyColumns {
                kind: self.kind,
                gas_limit: self.gas_limit,
                max_fee_per_gas: self.max_fee_per_gas,
                x402: self.x402,
                call_record: self.call_record,
                delegation: self.delegation,
            },
            at,
            "transactions",
        )?;
        Ok(StoredTx {
            id: self.id,
            agent_id: self.agent_id,
            chain: self.chain,
            conversation_id: self.conversation_id,
            from: address_from_text(&self.from_address)?,
            to: address_from_text(&self.to_address)?,
            value_wei: wei_from_text(&self.value_wei, "value_wei")?,
            asset: self.asset,
            token: token_from_columns(self.token_address, self.asset_decimals)?,
            reserved_wei: wei_from_text(&self.reserved_wei, "reserved_wei")?,
            actual_cost_wei: opt_wei_from_text(self.actual_cost_wei, "actual_cost_wei")?,
            raw_tx: self.raw_tx,
            status: TxState::parse(&self.status)
                .ok_or_else(|| StoreError::Corrupt(format!("transactions.status {}", self.status)))?,
            block_number: self.block_number.map(|n| n as u64),
            gas_used: self.gas_used.map(|n| n as u64),
            created_at: self.created_at,
            updated_at: self.updated_at,
            body,
        })
    }
}

/// The columns that say what an outflow is, in `transactions` and `approvals` alike: its `kind` (`transfer`, a
/// call included; `x402`; `typed_data`), a transaction's gas limit and maximum fee (0 for the others), the x402
/// record, and the call or typed-data record.
pub struct BodyColumns {
    pub kind: String,
    pub gas_limit: i64,
    pub max_fee_per_gas: String,
    pub x402: Option<String>,
    pub call_record: Option<String>,
    /// A redemption's delegation (§21), as JSON.
    pub delegation: Option<String>,
}

impl BodyColumns {
    /// The columns of `body`: the one place a body becomes its columns.
    pub fn of<P>(body: &Body<P>) -> BodyColumns {
        let (gas_limit, max_fee_per_gas) = body.fees();
        let call_record = match body {
            Body::Transaction(t) => t
                .action
                .call()
                .cloned()
                .map(|call| CallColumn { call, typed_data: None }),
            Body::Signature(s) => Some(CallColumn {
                call: CallRecord {
                    data: Default::default(),
                    selector: None,
                    function: None,
                    args: None,
                    simulation: s.simulation.clone(),
                    figures: Vec::new(),
                    calls: Vec::new(),
                },
                typed_data: Some(TypedColumn {
                    typed_data: s.typed_data.clone(),
                    digest: s.digest,
                }),
            }),
            Body::Authorization(_) => None,
        };
        let kind = match body.transaction().map(|t| t.gas) {
            Some(Payer::Sponsor) => "user_op",
            Some(Payer::Wallet) | None => body.kind().stored(),
        };
        BodyColumns {
            kind: kind.to_string(),
            gas_limit: i64::try_from(gas_limit).unwrap_or(i64::MAX),
            max_fee_per_gas: max_fee_per_gas.to_string(),
            x402: body
                .x402()
                .map(|record| serde_json::to_string(record).expect("an x402 record serialises")),
            call_record: call_record.map(|c| serde_json::to_string(&c).expect("a call record serialises")),
            delegation: body
                .via()
                .map(|via| serde_json::to_string(via).expect("a redemption serialises")),
        }
    }
}

/// The `call_record` column as written: a call's record, or a typed-data signature's (no calldata, the typed data
/// under `typed_data`).
#[derive(serde::Serialize, serde::Deserialize)]
struct CallColumn {
    #[serde(flatten)]
    call: CallRecord,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    typed_data: Option<TypedColumn>,
}

#[derive(serde::Serialize, serde::Deserialize)]
struct TypedColumn {
    typed_data: serde_json::Value,
    digest: alloy::primitives::B256,
}

/// A body as read from its columns (`table` names them in errors); `at` places a transaction (a held one has no place).
pub fn body_from_columns<P>(
    columns: BodyColumns,
    at: impl FnOnce() -> StoreResult<P>,
    table: &str,
) -> StoreResult<Body<P>> {
    let corrupt = |column: &str| StoreError::Corrupt(format!("{table}.{column}"));
    let call = columns
        .call_record
        .map(|text| serde_json::from_str::<CallColumn>(&text).map_err(|_| corrupt("call_record")))
        .transpose()?;
    Ok(match (columns.kind.as_str(), call) {
        ("x402", _) => {
            let text = columns.x402.ok_or_else(|| corrupt("x402"))?;
            Body::Authorization(serde_json::from_str(&text).map_err(|_| corrupt("x402"))?)
        }
        (
            "typed_data",
            Some(CallColumn {
                call,
                typed_data: Some(typed),
            }),
        ) => Body::Signature(SignatureRecord {
            typed_data: typed.typed_data,
            digest: typed.digest,
            simulation: call.simulation,
        }),
        ("typed_data", _) => return Err(corrupt("call_record")),
        (kind @ ("transfer" | "user_op"), call) => Body::Transaction(OnChain {
            at: at()?,
            gas: match kind {
                "user_op" => Payer::Sponsor,
                _ => Payer::Wallet,
            },
            gas_limit: u64_from(columns.gas_limit, "gas_limit")?,
            max_fee_per_gas: columns
                .max_fee_per_gas
                .parse()
                .map_err(|_| corrupt("max_fee_per_gas"))?,
            action: match (call, columns.delegation) {
                (None, None) => Action::Transfer,
                (Some(c), None) => Action::Call(c.call),
                (None, Some(text)) => Action::Redeem(serde_json::from_str(&text).map_err(|_| corrupt("delegation"))?),
                (Some(_), Some(_)) => return Err(corrupt("delegation")),
            },
        }),
        (other, _) => return Err(StoreError::Corrupt(format!("{table}.kind {other}"))),
    })
}

/// The call record of a `call_record` column (none for a typed-data signature's).
pub fn call_from_column(text: Option<String>, column: &str) -> StoreResult<Option<CallRecord>> {
    text.map(|t| serde_json::from_str::<CallColumn>(&t).map_err(|_| StoreError::Corrupt(column.into())))
        .transpose()
        .map(|c| c.filter(|c| c.typed_data.is_none()).map(|c| c.call))
}

/// A transfer as the store will insert it at `now` once signed: status `signed` (a signature: `confirmed`, complete
/// once made), nothing settled yet.
pub fn new_transfer(
    request: &super::TransferRequest,
    nonce: u64,
    signed: super::SignedTx,
    now: chrono::DateTime<chrono::Utc>,
) -> StoredTx {
    let mut body = request.body.clone().placed(nonce, signed.hash);
    // The request to make once approved belongs to a waiting payment only, never to a signed one.
    if let Some(x) = body.x402_mut() {
        x.pending_request = None;
    }
    StoredTx {
        id: request.id,
        agent_id: request.agent_id,
        chain: request.chain.clone(),
        conversation_id: request.conversation_id,
        from: request.from,
        to: request.to,
        value_wei: request.value_wei,
        asset: request.asset.clone(),
        token: request.token,
        reserved_wei: request.reserved_wei,
        actual_cost_wei: None,
        raw_tx: signed.raw,
        status: match body {
            Body::Signature(_) => TxState::Confirmed,
            _ => TxState::Signed,
        },
        block_number: None,
        gas_used: None,
        created_at: now,
        updated_at: now,
        body,
    }
}

#[derive(sqlx::FromRow)]
pub struct EventRow {
    id: i64,
    conversation_id: Option<Uuid>,
    agent_id: Uuid,
    kind: String,
    payload: String,
}

impl EventRow {
    pub fn into_event(self) -> StoreResult<EventRecord> {
        Ok(EventRecord {
            id: self.id,
            conversation_id: self.conversation_id,
            agent_id: self.agent_id,
            kind: self.kind,
            payload: serde_json::from_str(&self.payload).map_err(|_| StoreError::Corrupt("events.payload".into()))?,
        })
    }
}

/// Rows one statement writes or names at most (a round's records, `IN` lists): far below both databases' limits on
/// bound parameters (32,766 on SQLite, 65,535 on PostgreSQL) at six parameters a row.
pub const ROWS_PER_STATEMENT: usize = 500;

/// `$first, $first+1, …`: `count` numbered parameters, for an `IN` list.
pub fn placeholders(first: usize, count: usize) -> String {
    (first..first + count)
        .map(|i| format!("${i}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The `VALUES` rows of a multi-row insert: `rows` rows of `columns`, each column's `?` numbered in turn from `$1`
/// (`["?", "NULLIF(?, '')"]` for two rows: `($1, NULLIF($2, '')), ($3, NULLIF($4, ''))`).
pub fn value_rows(rows: usize, columns: &[&str]) -> String {
    (0..rows)
        .map(|row| {
            let cells: Vec<String> = columns
                .iter()
                .enumerate()
                .map(|(column, cell)| cell.replace('?', &format!("${}", row * columns.len() + column + 1)))
                .collect();
            format!("({})", cells.join(", "))
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// Rows in, domain values out; the first bad row fails the lot.
pub fn convert<R, T>(rows: Vec<R>, into: impl Fn(R) -> StoreResult<T>) -> StoreResult<Vec<T>> {
    rows.into_iter().map(into).collect()
}

pub fn chains_to_text(chains: &[String]) -> String {
    serde_json::to_string(chains).expect("a list of strings serialises")
}

pub fn chains_from_text(text: &str) -> StoreResult<Vec<String>> {
    serde_json::from_str(text).map_err(|_| StoreError::Corrupt("agents.chains".into()))
}

pub fn capabilities_to_text(capabilities: &[Capability]) -> String {
    serde_json::to_string(capabilities).expect("capabilities serialise")
}

pub fn capabilities_from_text(text: &str) -> StoreResult<Vec<Capability>> {
    serde_json::from_str(text).map_err(|_| StoreError::Corrupt("agents.capabilities".into()))
}

pub fn wei_from_text(text: &str, column: &str) -> StoreResult<U256> {
    U256::from_str_radix(text, 10).map_err(|_| StoreError::Corrupt(column.into()))
}

/// The sum of a column of wei amounts stored as text.
pub fn sum_wei(rows: &[(String,)], column: &str) -> StoreResult<U256> {
    sum_wei_texts(rows.iter().map(|(v,)| v.as_str()), column)
}

/// The sum of a column's amounts the database joined with `,` in one row (its text aggregate, `Backend::TEXT_AGG`;
/// `None` when no row matched).
pub fn sum_joined(joined: Option<&str>, column: &str) -> StoreResult<U256> {
    sum_wei_texts(joined.into_iter().flat_map(|j| j.split(',')), column)
}

/// The sum of amounts stored as text (a column's values, or a list the database joined with `,`).
pub fn sum_wei_texts<'a>(values: impl IntoIterator<Item = &'a str>, column: &str) -> StoreResult<U256> {
    values
        .into_iter()
        .try_fold(U256::ZERO, |sum, v| Ok(sum.saturating_add(wei_from_text(v, column)?)))
}

pub fn address_from_text(text: &str) -> StoreResult<Address> {
    text.parse().map_err(|_| StoreError::Corrupt("address".into()))
}

pub fn address_map(rows: Vec<(String, String)>) -> StoreResult<BTreeMap<String, Address>> {
    rows.into_iter()
        .map(|(chain, address)| Ok((chain, address_from_text(&address)?)))
        .collect()
}

pub fn opt_wei_from_text(text: Option<String>, column: &str) -> StoreResult<Option<U256>> {
    text.map(|t| wei_from_text(&t, column)).transpose()
}

/// The token of a transfer from its two columns (both NULL for the native coin).
pub fn token_from_columns(
    address: Option<String>,
    decimals: Option<i64>,
) -> StoreResult<Option<crate::domain::transaction::TokenRef>> {
    match (address, decimals) {
        (None, _) => Ok(None),
        (Some(address), Some(decimals)) => Ok(Some(crate::domain::transaction::TokenRef {
            address: address_from_text(&address)?,
            decimals: u8::try_from(decimals).map_err(|_| StoreError::Corrupt("asset_decimals".into()))?,
        })),
        (Some(_), None) => Err(StoreError::Corrupt("asset_decimals".into())),
    }
}

/// The two columns of a transfer's token.
pub fn token_columns(token: Option<crate::domain::transaction::TokenRef>) -> (Option<String>, Option<i64>) {
    (
        token.map(|t| t.address.to_checksum(None)),
        token.map(|t| i64::from(t.decimals)),
    )
}

pub fn u64_from(value: i64, column: &str) -> StoreResult<u64> {
    u64::try_from(value).map_err(|_| StoreError::Corrupt(column.into()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn value_rows_number_each_rows_columns_in_turn() {
        assert_eq!(
            value_rows(2, &["?", "NULLIF(?, '')"]),
            "($1, NULLIF($2, '')), ($3, NULLIF($4, ''))"
        );
        assert_eq!(placeholders(3, 2), "$3, $4");
    }
}
