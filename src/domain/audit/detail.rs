//! What each audit entry says (docs/api.md §10): one struct per action, and `Detail`, the enum that pairs each
//! action with its struct, so an entry's action follows from what it records and a mismatch cannot be written.
//!
//! The structs serialise to the details the log has always held, field for field: the chain hashes their canonical
//! JSON, so a renamed field or a `null` turned into an absent one is a change of contract (each action has a
//! snapshot test). A field written as `null` when it has no value is an `Option` without `skip_serializing_if`; one
//! written only when it has a value skips `None`; the few that can be absent, `null` or a value are
//! `Option<Option<_>>` read with `present`.

use std::collections::BTreeMap;

use alloy::primitives::B256;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Deserializer, Serialize};
use serde_json::Value;
use uuid::Uuid;

use super::Action;

/// Reads a field that is there, even as `null`, as `Some`: keeps "written as null" apart from "not written".
fn present<'de, D: Deserializer<'de>, T: Deserialize<'de>>(d: D) -> Result<Option<T>, D::Error> {
    T::deserialize(d).map(Some)
}

/// `agent_deleted`, `agent_reactivated`: nothing beyond who acted on which agent (`{}`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Nothing {}

/// `agent_created`: the agent as created (its cap in whole units, owners EIP-55).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AgentCreated {
    pub name: String,
    pub chains: Vec<String>,
    pub capabilities: Vec<String>,
    pub spending_cap: String,
    pub owner_addresses: BTreeMap<String, String>,
}

/// `agent_updated`: the names of the fields that changed, and the new values of those shown (the description is
/// named only).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AgentUpdated {
    pub fields: Vec<String>,
    pub to: AgentChanges,
}

/// The new values of an update's shown fields (and the cap before it).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct AgentChanges {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub chains: Option<Vec<String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub capabilities: Option<Vec<String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub spending_cap: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub spending_cap_before: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub owner_addresses: Option<BTreeMap<String, String>>,
}

/// How a reissue was proved.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "proof", rename_all = "snake_case")]
pub enum Proof {
    CurrentToken,
    /// An owner's wallet signature on `chain`, by `signer` (EIP-55).
    WalletSignature {
        chain: String,
        signer: String,
    },
}

/// `token_reissued`: the proof, and the client that presented it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TokenReissued {
    #[serde(flatten)]
    pub proof: Proof,
    pub client: String,
}

/// `owner_session_opened`: the owner (EIP-55), the chain it owns the agent on, the session's end, the client.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OwnerSessionOpened {
    pub address: String,
    pub chain: String,
    pub expires_at: DateTime<Utc>,
    pub client: String,
}

/// `owner_session_closed`: whose session (`chain` null for a session opened before it was recorded).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OwnerSessionClosed {
    pub address: String,
    pub chain: Option<String>,
}

/// `key_exported`: which wallet's key left (never the key).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct KeyExported {
    pub chain: String,
    pub address: String,
}

/// `policy_updated`: the policy as the API answers it (its view belongs to the HTTP layer, hence JSON here).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PolicyUpdated {
    pub policy: Value,
}

/// `"call"`, the `kind` of a call's entries.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum CallKind {
    #[serde(rename = "call")]
    Call,
}

/// `"typed_data"`, the `kind` of a typed-data signature's entries.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum TypedKind {
    #[serde(rename = "typed_data")]
    TypedData,
}

/// What an outflow asked for, as its entries record it beside what became of it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Asked {
    TypedData(TypedAsked),
    Call(CallAsked),
    Asset(AssetAsked),
}

/// A native or token send, or a sweep: the asset, the recipient (EIP-55) and the amount in whole units (a
/// sweep's only once it is known; a refused send's as it was given).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AssetAsked {
    pub chain: String,
    pub asset: String,
    pub to: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub amount: Option<String>,
    /// The on-chain delegation a send redeems (§21): the amount leaves its delegator's account.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delegation_id: Option<Uuid>,
}

/// A contract call: the contract, the value sent with it, and what its simulation showed once it ran.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CallAsked {
    pub chain: String,
    pub to: String,
    pub kind: CallKind,
    pub amount: String,
    #[serde(flatten)]
    pub previewed: Option<CallPreview>,
}

/// A call's decoded function and simulated effects.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CallPreview {
    pub selector: Option<String>,
    pub function: Option<String>,
    pub simulation: Value,
}

/// A typed-data signature: the verifying contract, the EIP-712 domain as given, the primary type, the digest
/// signed and what it grants.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TypedAsked {
    pub chain: String,
    pub kind: TypedKind,
    pub to: String,
    pub domain: Value,
    pub primary_type: String,
    pub digest: B256,
    pub simulation: Value,
}

/// An outflow that went on: signed (`pending`, `signed`, with its hash) or held (`awaiting_approval`, no hash).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Accepted {
    pub transfer_id: Uuid,
    pub status: String,
    /// Absent while held; `null` for a signed record with no on-chain hash.
    #[serde(default, deserialize_with = "present", skip_serializing_if = "Option::is_none")]
    pub tx_hash: Option<Option<String>>,
}

/// A refusal: its error code, and the policy rule for `policy_denied`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Refused {
    pub code: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rule: Option<String>,
    /// Over a limit (`per_transfer`, `per_day`, `per_week`, or a delegation's `delegation_limit`, §21): the refusal in
    /// words with the decision's figures.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<String>,
    /// A contract call the `calls` rules refused (`call_denied`): why, in words — the rule that denied it, or the
    /// rule and the condition it did not meet with the value the call had (§18).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub denial: Option<String>,
}

/// `transfer_accepted`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TransferAccepted {
    #[serde(flatten)]
    pub asked: Asked,
    #[serde(flatten)]
    pub accepted: Accepted,
}

/// `transfer_refused`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TransferRefused {
    #[serde(flatten)]
    pub asked: Asked,
    #[serde(flatten)]
    pub refused: Refused,
}

/// `typed_data_signed`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TypedDataSigned {
    #[serde(flatten)]
    pub asked: TypedAsked,
    pub transfer_id: Uuid,
}

/// `funds_swept`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FundsSwept {
    #[serde(flatten)]
    pub asked: AssetAsked,
    #[serde(flatten)]
    pub accepted: Accepted,
}

/// `sweep_refused`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SweepRefused {
    #[serde(flatten)]
    pub asked: AssetAsked,
    #[serde(flatten)]
    pub refused: Refused,
}

/// `transfer_approved`, `transfer_rejected`, `transfer_expired`: the held outflow and the decision (the hash
/// signed on approval; the owner's reason when a rejection gave one).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Decided {
    pub transfer_id: Uuid,
    pub chain: String,
    pub asset: String,
    pub to: String,
    pub amount: String,
    pub tx_hash: Option<String>,
    pub kind: String,
    pub url: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// `transfer_fee_bumped`, `transfer_cancel_requested`: the nonce's new attempt and the hash it replaced.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Replaced {
    pub transfer_id: Uuid,
    pub chain: String,
    pub nonce: u64,
    pub replaced: String,
    pub tx_hash: Option<String>,
}

/// `nonce_filled`: the transfer that could not land and the zero-value self-send that takes its nonce.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NonceFilled {
    pub transfer_id: Uuid,
    pub fill_id: Uuid,
    pub chain: String,
    pub nonce: Option<u64>,
    pub tx_hash: Option<String>,
}

/// An x402 fetch: where (the URL without its query), the most the agent would pay, and once a 402 was answered
/// the entry chosen and the payment reserved for it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct X402Fetch {
    pub host: Option<String>,
    pub path: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_amount: Option<String>,
    #[serde(flatten)]
    pub chosen: Option<X402Choice>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub transfer_id: Option<Uuid>,
}

/// The 402's entry chosen: the token, the price in whole units, the payee (EIP-55).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct X402Choice {
    pub chain: String,
    pub asset: String,
    pub amount: String,
    pub pay_to: String,
}

/// `x402_fetch_free`: the resource's status.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct X402FetchFree {
    #[serde(flatten)]
    pub fetch: X402Fetch,
    pub status: u16,
}

/// `x402_payment_accepted`: signed (`pending`) or held (`awaiting_approval`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct X402PaymentAccepted {
    #[serde(flatten)]
    pub fetch: X402Fetch,
    pub status: String,
}

/// `x402_payment_outcome`: what the resource answered to the paid request.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct X402PaymentOutcome {
    #[serde(flatten)]
    pub fetch: X402Fetch,
    #[serde(flatten)]
    pub result: X402Result,
}

/// The paid request's answer: a status, no answer, or a failure by its code.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum X402Result {
    Answered { status: String, response_status: u16 },
    Unanswered { status: String, error: String },
    Failed { code: String },
}

/// `x402_payment_refused`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct X402PaymentRefused {
    #[serde(flatten)]
    pub fetch: X402Fetch,
    #[serde(flatten)]
    pub refused: Refused,
}

/// `x402_payment_expired`: an authorization never used before its end.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct X402PaymentExpired {
    pub transfer_id: Uuid,
    pub chain: String,
    pub asset: String,
    pub pay_to: String,
    pub amount: String,
    pub host: Option<String>,
    pub path: Option<String>,
}

/// `mcp_tool_call`: the tool, its arguments as audited (secrets masked), how it went.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct McpToolCall {
    pub transport: String,
    pub tool: String,
    pub ok: bool,
    /// Whatever the tool was given (masked where secret): open by nature.
    pub arguments: Value,
    pub duration_ms: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error_code: Option<String>,
    /// The tool result's `tx_hash`, as it answered it.
    #[serde(default, deserialize_with = "present", skip_serializing_if = "Option::is_none")]
    pub tx_hash: Option<Value>,
}

/// `webhook_created`, `webhook_updated`, `webhook_deleted`, `webhook_secret_rotated`: the endpoint after the
/// change (its URL as shown, never its secret).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WebhookEndpoint {
    pub webhook_id: Uuid,
    pub url: String,
    pub events: Vec<String>,
    pub enabled: bool,
    pub description: Option<String>,
}

/// `webhook_disabled`: the endpoint and why.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WebhookDisabled {
    pub webhook_id: Uuid,
    pub url: String,
    pub reason: String,
}

/// `delegation_added`: the delegation registered (its hash as `0x` hex, its delegator EIP-55) and its id (an
/// earlier id when a removed or revoked one is registered again).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DelegationAdded {
    pub delegation_id: Uuid,
    pub chain: String,
    pub hash: String,
    pub delegator: String,
}

/// `delegation_removed`: which one the owner stopped using.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DelegationRemoved {
    pub delegation_id: Uuid,
}

/// `delegation_revoked`: a delegation the manager reports disabled (`status` is `revoked`); also the
/// `delegation_revoked` stream event and the `delegation.revoked` webhook event.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DelegationRevoked {
    pub delegation_id: Uuid,
    pub chain: String,
    pub hash: String,
    pub delegator: String,
    pub status: String,
}

/// `sponsorship_set`: the operator's daily gas budget for the agent on a chain (§22), in whole native units (`"0"`
/// ends it).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SponsorshipSet {
    pub chain: String,
    pub per_day: String,
}

/// `x402_payment_received`: a payment to the agent settled on chain (§23): the offer (none through the agent's own
/// facilitator), the payer, the amount in whole units of the asset, the authorization's nonce and the settlement.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct X402PaymentReceived {
    pub offer_id: Option<Uuid>,
    pub chain: String,
    pub asset: String,
    pub payer: String,
    pub amount: String,
    pub nonce: String,
    pub tx_hash: Option<String>,
}

/// `x402_payment_refused` of a payment to the agent (§23) whose signature verified: the offer (none through the
/// facilitator), the reason code and the payer; never the signature.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct X402SaleRefused {
    pub offer_id: Option<Uuid>,
    pub reason: String,
    pub payer: String,
}

/// `offer_created`: what the agent put up for sale (§23): the price in whole units of the asset, the resource as
/// origin and path only (never its query or headers), or `content` for a stored body.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OfferCreated {
    pub offer_id: Uuid,
    pub chain: String,
    pub asset: String,
    pub price: String,
    pub resource: String,
    pub settle: String,
}

/// `offer_closed`: which offer stopped selling.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OfferClosed {
    pub offer_id: Uuid,
}

/// `facilitator_token_created`, `facilitator_token_deleted` (§23): which token, by its id and the characters it is
/// shown with; never the token or its hash.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FacilitatorToken {
    pub token_id: Uuid,
    pub prefix: String,
}

/// An entry's detail, by action: the variant names the action, its struct what the entry says.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum Detail {
    AgentCreated(AgentCreated),
    AgentUpdated(AgentUpdated),
    AgentDeleted(Nothing),
    AgentReactivated(Nothing),
    TokenReissued(TokenReissued),
    OwnerSessionOpened(OwnerSessionOpened),
    OwnerSessionClosed(OwnerSessionClosed),
    KeyExported(KeyExported),
    PolicyUpdated(PolicyUpdated),
    TransferAccepted(TransferAccepted),
    TransferRefused(TransferRefused),
    TypedDataSigned(TypedDataSigned),
    TransferApproved(Decided),
    TransferRejected(Decided),
    TransferExpired(Decided),
    TransferCancelRequested(Replaced),
    TransferFeeBumped(Replaced),
    NonceFilled(NonceFilled),
    FundsSwept(FundsSwept),
    SweepRefused(SweepRefused),
    X402PaymentAccepted(X402PaymentAccepted),
    X402PaymentOutcome(X402PaymentOutcome),
    X402PaymentExpired(X402PaymentExpired),
    McpToolCall(McpToolCall),
    WebhookCreated(WebhookEndpoint),
    WebhookUpdated(WebhookEndpoint),
    WebhookDeleted(WebhookEndpoint),
    WebhookSecretRotated(WebhookEndpoint),
    WebhookDisabled(WebhookDisabled),
    X402FetchFree(X402FetchFree),
    X402PaymentRefused(X402PaymentRefused),
    DelegationAdded(DelegationAdded),
    DelegationRemoved(DelegationRemoved),
    DelegationRevoked(DelegationRevoked),
    SponsorshipSet(SponsorshipSet),
    X402PaymentReceived(X402PaymentReceived),
    X402SaleRefused(X402SaleRefused),
    OfferCreated(OfferCreated),
    OfferClosed(OfferClosed),
    FacilitatorTokenCreated(FacilitatorToken),
    FacilitatorTokenDeleted(FacilitatorToken),
}

impl Detail {
    /// The action this detail is recorded under.
    pub fn action(&self) -> Action {
        match self {
            Detail::AgentCreated(_) => Action::AgentCreated,
            Detail::AgentUpdated(_) => Action::AgentUpdated,
            Detail::AgentDeleted(_) => Action::AgentDeleted,
            Detail::AgentReactivated(_) => Action::AgentReactivated,
            Detail::TokenReissued(_) => Action::TokenReissued,
            Detail::OwnerSessionOpened(_) => Action::OwnerSessionOpened,
            Detail::OwnerSessionClosed(_) => Action::OwnerSessionClosed,
            Detail::KeyExported(_) => Action::KeyExported,
            Detail::PolicyUpdated(_) => Action::PolicyUpdated,
            Detail::TransferAccepted(_) => Action::TransferAccepted,
            Detail::TransferRefused(_) => Action::TransferRefused,
            Detail::TypedDataSigned(_) => Action::TypedDataSigned,
            Detail::TransferApproved(_) => Action::TransferApproved,
            Detail::TransferRejected(_) => Action::TransferRejected,
            Detail::TransferExpired(_) => Action::TransferExpired,
            Detail::TransferCancelRequested(_) => Action::TransferCancelRequested,
            Detail::TransferFeeBumped(_) => Action::TransferFeeBumped,
            Detail::NonceFilled(_) => Action::NonceFilled,
            Detail::FundsSwept(_) => Action::FundsSwept,
            Detail::SweepRefused(_) => Action::SweepRefused,
            Detail::X402PaymentAccepted(_) => Action::X402PaymentAccepted,
            Detail::X402PaymentOutcome(_) => Action::X402PaymentOutcome,
            Detail::X402PaymentExpired(_) => Action::X402PaymentExpired,
            Detail::McpToolCall(_) => Action::McpToolCall,
            Detail::WebhookCreated(_) => Action::WebhookCreated,
            Detail::WebhookUpdated(_) => Action::WebhookUpdated,
            Detail::WebhookDeleted(_) => Action::WebhookDeleted,
            Detail::WebhookSecretRotated(_) => Action::WebhookSecretRotated,
            Detail::WebhookDisabled(_) => Action::WebhookDisabled,
            Detail::X402FetchFree(_) => Action::X402FetchFree,
            Detail::X402PaymentRefused(_) => Action::X402PaymentRefused,
            Detail::DelegationAdded(_) => Action::DelegationAdded,
            Detail::DelegationRemoved(_) => Action::DelegationRemoved,
            Detail::DelegationRevoked(_) => Action::DelegationRevoked,
            Detail::SponsorshipSet(_) => Action::SponsorshipSet,
            Detail::X402PaymentReceived(_) => Action::X402PaymentReceived,
            Detail::X402SaleRefused(_) => Action::X402PaymentRefused,
            Detail::OfferCreated(_) => Action::OfferCreated,
            Detail::OfferClosed(_) => Action::OfferClosed,
            Detail::FacilitatorTokenCreated(_) => Action::FacilitatorTokenCreated,
            Detail::FacilitatorTokenDeleted(_) => Action::FacilitatorTokenDeleted,
        }
    }

    /// The detail as JSON (an object; every struct here has named fields).
    pub fn to_json(&self) -> Result<Value, serde_json::Error> {
        serde_json::to_value(self)
    }

    /// A stored detail read back under its action.
    pub fn parse(action: Action, json: Value) -> Result<Detail, serde_json::Error> {
        use serde_json::from_value as read;
        Ok(match action {
            Action::AgentCreated => Detail::AgentCreated(read(json)?),
            Action::AgentUpdated => Detail::AgentUpdated(read(json)?),
            Action::AgentDeleted => Detail::AgentDeleted(read(json)?),
            Action::AgentReactivated => Detail::AgentReactivated(read(json)?),
            Action::TokenReissued => Detail::TokenReissued(read(json)?),
            Action::OwnerSessionOpened => Detail::OwnerSessionOpened(read(json)?),
            Action::OwnerSessionClosed => Detail::OwnerSessionClosed(read(json)?),
            Action::KeyExported => Detail::KeyExported(read(json)?),
            Action::PolicyUpdated => Detail::PolicyUpdated(read(json)?),
            Action::TransferAccepted => Detail::TransferAccepted(read(json)?),
            Action::TransferRefused => Detail::TransferRefused(read(json)?),
            Action::TypedDataSigned => Detail::TypedDataSigned(read(json)?),
            Action::TransferApproved => Detail::TransferApproved(read(json)?),
            Action::TransferRejected => Detail::TransferRejected(read(json)?),
            Action::TransferExpired => Detail::TransferExpired(read(json)?),
            Action::TransferCancelRequested => Detail::TransferCancelRequested(read(json)?),
            Action::TransferFeeBumped => Detail::TransferFeeBumped(read(json)?),
            Action::NonceFilled => Detail::NonceFilled(read(json)?),
            Action::FundsSwept => Detail::FundsSwept(read(json)?),
            Action::SweepRefused => Detail::SweepRefused(read(json)?),
            Action::X402PaymentAccepted => Detail::X402PaymentAccepted(read(json)?),
            Action::X402PaymentOutcome => Detail::X402PaymentOutcome(read(json)?),
            Action::X402PaymentExpired => Detail::X402PaymentExpired(read(json)?),
            Action::McpToolCall => Detail::McpToolCall(read(json)?),
            Action::WebhookCreated => Detail::WebhookCreated(read(json)?),
            Action::WebhookUpdated => Detail::WebhookUpdated(read(json)?),
            Action::WebhookDeleted => Detail::WebhookDeleted(read(json)?),
            Action::WebhookSecretRotated => Detail::WebhookSecretRotated(read(json)?),
            Action::WebhookDisabled => Detail::WebhookDisabled(read(json)?),
            Action::X402FetchFree => Detail::X402FetchFree(read(json)?),
            // A refusal of a payment to the agent (§23) has its own fields; a refusal to pay (§16) the others.
            Action::X402PaymentRefused => match read::<X402SaleRefused>(json.clone()) {
                Ok(sale) => Detail::X402SaleRefused(sale),
                Err(_) => Detail::X402PaymentRefused(read(json)?),
            },
            Action::DelegationAdded => Detail::DelegationAdded(read(json)?),
            Action::DelegationRemoved => Detail::DelegationRemoved(read(json)?),
            Action::DelegationRevoked => Detail::DelegationRevoked(read(json)?),
            Action::SponsorshipSet => Detail::SponsorshipSet(read(json)?),
            Action::X402PaymentReceived => Detail::X402PaymentReceived(read(json)?),
            Action::OfferCreated => Detail::OfferCreated(read(json)?),
            Action::OfferClosed => Detail::OfferClosed(read(json)?),
            Action::FacilitatorTokenCreated => Detail::FacilitatorTokenCreated(read(json)?),
            Action::FacilitatorTokenDeleted => Detail::FacilitatorTokenDeleted(read(json)?),
        })
    }
}
