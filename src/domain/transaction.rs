//! Outgoing transfers as stored: the status machine and what each status counts against the spending cap.

use alloy::primitives::{Address, U256};
use chrono::{DateTime, Utc};
use uuid::Uuid;

/// `signed` (stored, not yet accepted by the node) -> `pending` (broadcast) -> `confirmed` | `reverted` | `dropped` |
/// `cancelled` (a zero-value self-send at its nonce landed instead, §14).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TxState {
    Signed,
    Pending,
    Confirmed,
    Reverted,
    Dropped,
    Cancelled,
    /// An x402 authorization whose `validBefore` passed unused (§16): nothing moved.
    Expired,
}

impl TxState {
    pub fn as_str(self) -> &'static str {
        match self {
            TxState::Signed => "signed",
            TxState::Pending => "pending",
            TxState::Confirmed => "confirmed",
            TxState::Reverted => "reverted",
            TxState::Dropped => "dropped",
            TxState::Cancelled => "cancelled",
            TxState::Expired => "expired",
        }
    }

    pub fn parse(text: &str) -> Option<Self> {
        [
            TxState::Signed,
            TxState::Pending,
            TxState::Confirmed,
            TxState::Reverted,
            TxState::Dropped,
            TxState::Cancelled,
            TxState::Expired,
        ]
        .into_iter()
        .find(|s| s.as_str() == text)
    }

    /// Whether the watcher still has to settle it.
    pub fn is_open(self) -> bool {
        matches!(self, TxState::Signed | TxState::Pending)
    }
}

/// The ERC-20 token a transfer moves, as stored with it (none: the chain's native coin).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TokenRef {
    /// The token contract: where the transaction goes, with value 0 and `transfer(to, value)` as its data.
    pub address: Address,
    pub decimals: u8,
}

/// What a transfer's transaction carries on chain: the recipient and value of a native transfer, or a call of
/// the token's `transfer(to, value)` with no native value.
pub fn on_chain_call(to: Address, value: U256, token: Option<TokenRef>) -> (Address, U256, alloy::primitives::Bytes) {
    match token {
        None => (to, value, Default::default()),
        Some(token) => (
            token.address,
            U256::ZERO,
            crate::domain::erc20::transfer_calldata(to, value),
        ),
    }
}

/// How many nonces of the wallet a signed transaction of its own uses: one, and one more for each EIP-7702
/// authorization a type-4 transaction carries (§22: agentd signs one only for the agent's own address, at the
/// nonce after the transaction's, in the wallet-paid batch that designates its account). Bytes that are no
/// transaction (an authorization, a user operation, a signature) use one, as the store counts them.
pub fn wallet_nonces(raw: &[u8]) -> u64 {
    use alloy::eips::eip2718::Decodable2718;
    match alloy::consensus::TxEnvelope::decode_2718_exact(raw) {
        Ok(alloy::consensus::TxEnvelope::Eip7702(signed)) => 1 + signed.tx().authorization_list.len() as u64,
        _ => 1,
    }
}

/// One stored outflow: what every kind shares (who, what asset, how much, what the cap holds, where it stands),
/// and its `body`, what its kind carries.
#[derive(Debug, Clone, PartialEq)]
pub struct StoredTx {
    pub id: Uuid,
    pub agent_id: Uuid,
    pub chain: String,
    pub conversation_id: Option<Uuid>,
    pub from: Address,
    /// The recipient (of the token, for a token transfer).
    pub to: Address,
    /// The amount in base units of the asset (wei for the native coin, token units for a token).
    pub value_wei: U256,
    /// The asset's symbol (`ETH`, `USDC`).
    pub asset: String,
    pub token: Option<TokenRef>,
    /// The native value plus twice the first attempt's maximum fee: what the cap holds while the transfer is open.
    pub reserved_wei: U256,
    /// `value + gas_used * effective_gas_price` once a receipt is known.
    pub actual_cost_wei: Option<U256>,
    /// The signed bytes: the transaction (its latest attempt), the x402 payment document, or the signature.
    pub raw_tx: Vec<u8>,
    pub status: TxState,
    pub block_number: Option<u64>,
    pub gas_used: Option<u64>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    pub body: Body,
}

/// What an outflow is, with what its kind carries. `Body<()>` is an outflow as requested or held for approval;
/// `Body` (`Body<Placed>`) one signed, whose transaction has its nonce and hash.
#[derive(Debug, Clone, PartialEq)]
pub enum Body<P = Placed> {
    /// A transaction of the agent's wallet: a transfer of the native coin or of a token, or a contract call (§18).
    Transaction(OnChain<P>),
    /// An x402 payment (§16): an EIP-3009 authorization a resource settles; no transaction of the agent's.
    Authorization(X402Record),
    /// An EIP-712 signature (§18 `sign-typed-data`): nothing sent, complete once made.
    Signature(SignatureRecord),
}

/// A transaction of the agent's wallet, or a user operation of its account (§22).
#[derive(Debug, Clone, PartialEq)]
pub struct OnChain<P = Placed> {
    /// Its place once signed (`()` before): the wallet's nonce and the transaction's hash, or for a sponsored one
    /// its nonce in the account's EntryPoint sequence and its `user_op_hash`.
    pub at: P,
    /// Who pays its gas, and so how it reaches the chain.
    pub gas: Payer,
    pub gas_limit: u64,
    /// Of its latest attempt.
    pub max_fee_per_gas: u128,
    /// What it does.
    pub action: Action,
}

/// Who pays an on-chain outflow's gas (§22 `gas`): the agent's wallet (an EIP-1559 transaction it signs and sends),
/// or the operator's sponsorship (a user operation from the agent's own account, approved by the paymaster and
/// carried in a bundle the sponsor key sends; stored as kind `user_op`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Payer {
    #[default]
    Wallet,
    Sponsor,
}

impl Payer {
    /// As the API shows it (`gas`).
    pub fn as_str(self) -> &'static str {
        match self {
            Payer::Wallet => "wallet",
            Payer::Sponsor => "sponsored",
        }
    }

    pub fn parse(text: &str) -> Option<Self> {
        match text {
            "wallet" => Some(Payer::Wallet),
            "sponsored" => Some(Payer::Sponsor),
            _ => None,
        }
    }
}

/// What a transaction of the agent's wallet does.
#[derive(Debug, Clone, PartialEq)]
pub enum Action {
    /// A transfer of the native coin to the record's `to`, or of its registry token by the token's
    /// `transfer(to, value)` (not a call).
    Transfer,
    /// A contract call (§18): its calldata, as decoded and simulated.
    Call(CallRecord),
    /// A redemption of an on-chain delegation (§21): the money leaves the delegator's account, and what the agent's
    /// wallet signs is `redeemDelegations` to the manager.
    Redeem(Via),
}

impl Action {
    /// The contract call, for a call.
    pub fn call(&self) -> Option<&CallRecord> {
        match self {
            Action::Call(call) => Some(call),
            Action::Transfer | Action::Redeem(_) => None,
        }
    }

    /// The delegation it redeems, for a redemption.
    pub fn via(&self) -> Option<&Via> {
        match self {
            Action::Redeem(via) => Some(via),
            Action::Transfer | Action::Call(_) => None,
        }
    }

    /// What the wallet's transaction calls: `(to, value, input)`, for a transfer of `value` of `token` (the
    /// native coin when none) to `to`.
    pub fn execution(
        &self,
        to: Address,
        value: U256,
        token: Option<TokenRef>,
    ) -> (Address, U256, alloy::primitives::Bytes) {
        match self {
            Action::Transfer => on_chain_call(to, value, token),
            // A batch's values leave the account inside its `execute`: the transaction itself carries none.
            Action::Call(call) if !call.calls.is_empty() => (to, U256::ZERO, call.data.clone()),
            Action::Call(call) => (to, value, call.data.clone()),
            // The agent's wallet calls the manager; the amount moves from the delegator's account.
            Action::Redeem(via) => (via.manager, U256::ZERO, via.data.clone()),
        }
    }
}

/// A transfer redeemed through an on-chain delegation (§21): the agent's wallet signs one `redeemDelegations`
/// transaction to `manager` (calldata `data`) and pays its gas; the amount leaves `delegator`'s account.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Via {
    pub delegation_id: Uuid,
    pub delegator: Address,
    pub manager: Address,
    pub data: alloy::primitives::Bytes,
}

/// Where a signed transaction is: its nonce and the hash of its latest attempt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Placed {
    pub nonce: u64,
    pub tx_hash: String,
}

/// The kinds of outflow.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Transfer,
    Call,
    X402,
    TypedData,
}

impl Kind {
    /// As the `kind` column stores it: a call is a transaction of the wallet, stored as `transfer` with its record.
    pub fn stored(self) -> &'static str {
        match self {
            Kind::Transfer | Kind::Call => "transfer",
            Kind::X402 => "x402",
            Kind::TypedData => "typed_data",
        }
    }

    /// As the API shows it (`kind`).
    pub fn shown(self) -> &'static str {
        match self {
            Kind::Transfer => "transfer",
            Kind::Call => "call",
            Kind::X402 => "x402",
            Kind::TypedData => "typed_data",
        }
    }
}

impl<P> Body<P> {
    pub fn kind(&self) -> Kind {
        match self {
            Body::Transaction(OnChain {
                action: Action::Transfer | Action::Redeem(_),
                ..
            }) => Kind::Transfer,
            Body::Transaction(OnChain {
                action: Action::Call(_),
                ..
            }) => Kind::Call,
            Body::Authorization(_) => Kind::X402,
            Body::Signature(_) => Kind::TypedData,
        }
    }

    /// The transaction, for what is one.
    pub fn transaction(&self) -> Option<&OnChain<P>> {
        match self {
            Body::Transaction(t) => Some(t),
            Body::Authorization(_) | Body::Signature(_) => None,
        }
    }

    /// The delegation it redeems (§21), for a delegated transfer.
    pub fn via(&self) -> Option<&Via> {
        self.transaction().and_then(|t| t.action.via())
    }

    /// The contract call, for a call.
    pub fn call(&self) -> Option<&CallRecord> {
        self.transaction().and_then(|t| t.action.call())
    }

    /// The x402 authorization, for a payment.
    pub fn x402(&self) -> Option<&X402Record> {
        match self {
            Body::Authorization(x) => Some(x),
            Body::Transaction(_) | Body::Signature(_) => None,
        }
    }

    pub fn x402_mut(&mut self) -> Option<&mut X402Record> {
        match self {
            Body::Authorization(x) => Some(x),
            Body::Transaction(_) | Body::Signature(_) => None,
        }
    }

    /// The typed data, for a signature.
    pub fn signature(&self) -> Option<&SignatureRecord> {
        match self {
            Body::Signature(s) => Some(s),
            Body::Transaction(_) | Body::Authorization(_) => None,
        }
    }

    /// What its simulation showed (§18 `simulation`): a call's, or what a signature grants; none for the others.
    pub fn simulation(&self) -> Option<&serde_json::Value> {
        match self {
            Body::Transaction(t) => t.action.call().map(|c| &c.simulation),
            Body::Signature(s) => Some(&s.simulation),
            Body::Authorization(_) => None,
        }
    }

    /// The gas limit and maximum fee of a transaction (0 for what pays no fee of the agent's).
    pub fn fees(&self) -> (u64, u128) {
        self.transaction().map_or((0, 0), |t| (t.gas_limit, t.max_fee_per_gas))
    }
}

impl Body<()> {
    /// The outflow once signed: a transaction at `nonce` with hash `tx_hash` (ignored by the other kinds).
    pub fn placed(self, nonce: u64, tx_hash: String) -> Body {
        match self {
            Body::Transaction(t) => Body::Transaction(OnChain {
                at: Placed { nonce, tx_hash },
                gas: t.gas,
                gas_limit: t.gas_limit,
                max_fee_per_gas: t.max_fee_per_gas,
                action: t.action,
            }),
            Body::Authorization(x) => Body::Authorization(x),
            Body::Signature(s) => Body::Signature(s),
        }
    }
}

/// What an x402 payment stores beside the transfer columns (as JSON): what was signed, where, and what came back.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct X402Record {
    /// The resource's URL without its query (which may hold the caller's keys).
    pub url: String,
    /// As the chosen entry named it (`eip155:8453`, or `base` in v1).
    pub network: String,
    /// The EIP-3009 nonce, 0x-hex as signed.
    pub nonce: String,
    /// Unix seconds; the authorization can move money until then.
    pub valid_before: u64,
    /// The settlement transaction, once named by the resource or found on chain.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub settlement_tx: Option<String>,
    /// The paid request's answer `{status, headers, body}`, once made.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub response: Option<serde_json::Value>,
    /// The exchange to make once an owner approves (method, url with query, headers, body), encrypted: kept only
    /// while a payment waits, dropped once it is approved, rejected or expired.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pending_request: Option<SealedRequest>,
    /// The host and port the payment's request goes to, for the host rule checked again in the reservation (the
    /// policy may have changed since the fetch began). Not stored.
    #[serde(skip)]
    pub host: Option<(String, u16)>,
}

/// A waiting payment's request as stored: its URL query and headers may carry the caller's API keys, so it is kept
/// encrypted under the master key (AES-256-GCM, bound to the payment's id; see `Vault::seal_request`).
#[derive(Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct SealedRequest {
    pub key_version: i32,
    /// 0x-hex.
    pub nonce: String,
    /// 0x-hex.
    pub ciphertext: String,
}

impl std::fmt::Debug for SealedRequest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "SealedRequest(version {}, ..)", self.key_version)
    }
}

/// What a contract call (§18) stores beside the transfer columns (as JSON): the calldata as signed, what it was
/// decoded as, and what its simulation showed (the API's `simulation` object).
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct CallRecord {
    pub data: alloy::primitives::Bytes,
    pub selector: Option<String>,
    pub function: Option<String>,
    pub args: Option<Vec<serde_json::Value>>,
    pub simulation: serde_json::Value,
    /// What the simulation moved of each token (raw amounts), so that the receipt's logs can replace what it
    /// counted once the call is mined.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub figures: Vec<crate::domain::call::ledger::Figure>,
    /// A batch's calls (§22), in order: the record's own `data` is then the account's `execute` in batch mode, sent
    /// to the agent's own address. Empty for a single call.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub calls: Vec<crate::domain::call::batch::BatchedCall>,
}

/// What a typed-data signature (§18 `sign-typed-data`) is made from: the typed data as the request wrote it, its
/// EIP-712 digest, and what it grants, shown as a simulation is (the signature, once made, is the signed bytes).
#[derive(Debug, Clone, PartialEq)]
pub struct SignatureRecord {
    pub typed_data: serde_json::Value,
    pub digest: alloy::primitives::B256,
    pub simulation: serde_json::Value,
}

impl SignatureRecord {
    /// The typed data's `primaryType`.
    pub fn primary_type(&self) -> Option<&str> {
        self.typed_data.get("primaryType")?.as_str()
    }
}

impl CallRecord {
    /// The call as the API and the stream show it (§18 `call`): the contract `to`, the selector, and the function
    /// and arguments it was decoded as.
    pub fn shown(&self, to: alloy::primitives::Address) -> serde_json::Value {
        // A batch's calls are listed under `calls`; its own `call` is null (§22).
        if !self.calls.is_empty() {
            return serde_json::Value::Null;
        }
        serde_json::json!({"to": to.to_checksum(None), "selector": self.selector, "function": self.function,
            "args": self.args})
    }
}

impl StoredTx {
    /// Its transaction, for what is one (not an x402 authorization or a typed-data signature).
    pub fn on_chain(&self) -> Option<&OnChain> {
        self.body.transaction()
    }

    /// Its nonce and hash, for a transaction.
    pub fn placed(&self) -> Option<&Placed> {
        self.on_chain().map(|t| &t.at)
    }

    /// Its nonce, for a transaction.
    pub fn nonce(&self) -> Option<u64> {
        self.placed().map(|at| at.nonce)
    }

    /// The hash of its transaction's latest attempt, for a transaction.
    pub fn tx_hash(&self) -> Option<&str> {
        self.placed().map(|at| at.tx_hash.as_str())
    }

    /// `transfer`, `call`, `x402` or `typed_data`, as shown.
    pub fn kind(&self) -> &'static str {
        self.body.kind().shown()
    }

    /// The transaction that moves it on chain: the agent's own, or a payment's settlement once known.
    pub fn chain_hash(&self) -> Option<&str> {
        match &self.body {
            Body::Transaction(t) => Some(&t.at.tx_hash),
            Body::Authorization(record) => record.settlement_tx.as_deref(),
            Body::Signature(_) => None,
        }
    }

    /// The native coin the transaction itself moves (none for a token transfer).
    pub fn native_value(&self) -> U256 {
        // A redemption's amount is its delegator's (§21): the wallet pays only the gas.
        match &self.body {
            Body::Transaction(OnChain {
                action: Action::Redeem(_),
                ..
            }) => U256::ZERO,
            Body::Transaction(OnChain {
                action: Action::Transfer | Action::Call(_),
                ..
            })
            | Body::Authorization(_)
            | Body::Signature(_) => match self.token {
                Some(_) => U256::ZERO,
                None => self.value_wei,
            },
        }
    }

    /// The decimals of the transfer's asset.
    pub fn decimals(&self) -> u8 {
        self.token.map_or_else(
            || super::chain::find(&self.chain).map_or(18, |c| c.decimals),
            |t| t.decimals,
        )
    }

    /// What this transfer counts against the cap: the actual cost once known, the reservation while open,
    /// nothing once dropped.
    pub fn counted_wei(&self) -> U256 {
        match self.status {
            TxState::Dropped => U256::ZERO,
            _ => self.actual_cost_wei.unwrap_or(self.reserved_wei),
        }
    }
}

/// What one signed attempt of a transfer at its nonce does: the transfer itself (the first send or a fee bump of
/// it), or a cancel (a zero-value send from the wallet to itself, §14).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AttemptKind {
    Send,
    Cancel,
}

impl AttemptKind {
    pub fn as_str(self) -> &'static str {
        match self {
            AttemptKind::Send => "send",
            AttemptKind::Cancel => "cancel",
        }
    }

    pub fn parse(text: &str) -> Option<Self> {
        [AttemptKind::Send, AttemptKind::Cancel]
            .into_iter()
            .find(|k| k.as_str() == text)
    }
}

/// One signed attempt of a transfer, as stored: the latest lives in the transfer's row, earlier ones beside it.
#[derive(Debug, Clone, PartialEq)]
pub struct Attempt {
    pub tx_hash: String,
    pub raw_tx: Vec<u8>,
    pub max_fee_per_gas: u128,
    pub kind: AttemptKind,
}
