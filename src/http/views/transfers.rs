//! The view of one transfer wherever it stands: waiting for approval (no nonce, no signature), sent, settled,
//! rejected or expired. The transfers API (`POST /api/agents/{id}/transfers`, `GET …/{transfer_id}`) and the
//! approval endpoints answer it.

use chrono::{DateTime, Utc};
use serde::Serialize;
use utoipa::ToSchema;
use uuid::Uuid;

use crate::domain::amount::format_units;
use crate::domain::chain as registry;
use crate::domain::policy::ApprovalStatus;
use crate::domain::policy::ApprovalStatus as Decision;
use crate::domain::transaction::{Body, CallRecord, Payer, StoredTx, TxState, X402Record};
use crate::offers::view::OfferView;
use crate::store::Approval;
use crate::store::offers::Offer;
use crate::transfers::TransferOutcome;

/// Where a transfer stands (docs/api.md §14): `awaiting_approval` → `pending` | `rejected` | `expired`;
/// `pending` → `confirmed` | `reverted` | `dropped` | `cancelled`. An offer held for approval (`kind: "offer"`, §23)
/// goes `awaiting_approval` → `approved` (it sells: `offer.status` `active`) | `rejected` | `expired`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum TransferStatusView {
    AwaitingApproval,
    /// An offer approved (`kind: "offer"`); a transfer approved is `pending`.
    Approved,
    Pending,
    Confirmed,
    Reverted,
    Dropped,
    Cancelled,
    Rejected,
    Expired,
}

impl From<TxState> for TransferStatusView {
    fn from(state: TxState) -> Self {
        match state {
            // Stored-but-not-yet-accepted transfers are on their way: to clients they are pending.
            TxState::Signed | TxState::Pending => Self::Pending,
            TxState::Confirmed => Self::Confirmed,
            TxState::Reverted => Self::Reverted,
            TxState::Dropped => Self::Dropped,
            TxState::Cancelled => Self::Cancelled,
            TxState::Expired => Self::Expired,
        }
    }
}

impl From<ApprovalStatus> for TransferStatusView {
    fn from(status: ApprovalStatus) -> Self {
        match status {
            ApprovalStatus::AwaitingApproval => Self::AwaitingApproval,
            // An approved transfer lives on as a sent one; its waiting record says it left for the node.
            ApprovalStatus::Approved => Self::Pending,
            ApprovalStatus::Rejected => Self::Rejected,
            ApprovalStatus::Expired => Self::Expired,
        }
    }
}

/// A contract call as sent (§18): the contract, the selector of the calldata, and the function and arguments it was
/// decoded as (null when the selector is not known).
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct CallView {
    /// EIP-55 address of the contract called.
    pub to: String,
    /// `0x` + 8 lower-case hex digits.
    #[schema(required = true)]
    pub selector: Option<String>,
    /// The canonical signature, e.g. `approve(address,uint256)`.
    #[schema(required = true)]
    pub function: Option<String>,
    /// The decoded arguments in order (addresses 0x-hex, integers as decimal strings).
    #[schema(required = true, value_type = Option<Vec<serde_json::Value>>)]
    pub args: Option<Vec<serde_json::Value>>,
}

impl CallView {
    /// A call record as `call` shows it: the call, or `null` for a batch (whose calls `calls` lists).
    pub fn shown(to: alloy::primitives::Address, record: &CallRecord) -> Option<Self> {
        record.calls.is_empty().then(|| CallView::new(to, record))
    }

    /// A batch's calls in order (`None` for a single call).
    pub fn batch(record: &CallRecord) -> Option<Vec<Self>> {
        (!record.calls.is_empty()).then(|| {
            record
                .calls
                .iter()
                .map(|c| CallView {
                    to: c.to.to_checksum(None),
                    selector: c.selector.clone(),
                    function: c.function.clone(),
                    args: c.args.clone(),
                })
                .collect()
        })
    }

    pub fn new(to: alloy::primitives::Address, record: &CallRecord) -> Self {
        CallView {
            to: to.to_checksum(None),
            selector: record.selector.clone(),
            function: record.function.clone(),
            args: record.args.clone(),
        }
    }
}

/// An EIP-712 signature (§18 `sign-typed-data`).
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct TypedDataView {
    /// 0x + 65 bytes (r, s, v).
    pub signature: String,
    /// 0x + the 32-byte EIP-712 hash signed.
    pub digest: String,
}

impl TypedDataView {
    /// The signature of a stored typed-data transfer (`None` for anything else).
    pub fn of(tx: &StoredTx) -> Option<Self> {
        let typed = tx.body.signature()?;
        Some(TypedDataView {
            signature: alloy::hex::encode_prefixed(&tx.raw_tx),
            digest: typed.digest.to_string(),
        })
    }
}

/// The `primaryType` of a typed-data signature's typed data, as the request wrote it.
fn primary_type<P>(body: &Body<P>) -> Option<String> {
    body.signature()?.primary_type().map(str::to_owned)
}

/// What an x402 payment (§16) adds to its transfer.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct X402View {
    /// The resource's URL without its query.
    pub url: String,
    /// The network as the paid entry named it (`eip155:8453`, or `base` in protocol v1).
    pub network: String,
    /// The EIP-3009 nonce, 0x-hex as signed.
    pub nonce: String,
    /// Unix seconds; an unused authorization expires then.
    pub valid_before: u64,
    /// The paid request's answer `{status, headers, body}` (single-transfer reads and the approve answer only).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false, value_type = Option<Object>)]
    pub response: Option<serde_json::Value>,
}

impl X402View {
    pub fn new(record: &X402Record) -> Self {
        X402View {
            url: record.url.clone(),
            network: record.network.clone(),
            nonce: record.nonce.clone(),
            valid_before: record.valid_before,
            response: None,
        }
    }
}

#[derive(Debug, Serialize, ToSchema)]
pub struct TransferView {
    pub id: Uuid,
    /// The same as `id`, under the name the approval endpoints use.
    pub transfer_id: Uuid,
    pub chain: String,
    /// `transfer` (a transaction of the agent's), `call` (a contract call, §18), `x402` (a payment
    /// authorization a resource settles, §16) or `typed_data` (an EIP-712 signature, §18 `sign-typed-data`); in the
    /// approvals, `offer`: an offer the `create_offer` tool of a guarded agent made, held for the owner's approval
    /// (§23; `offer` has its terms, `amount` is its price and `to` the agent's wallet it would be paid to). Approving
    /// it signs nothing and moves no money: it starts selling.
    pub kind: &'static str,
    /// Set on a held offer (`kind: "offer"`): the offer as `GET …/offers/{id}` shows it (chain, asset, price,
    /// description, the resource's origin and path, settle, gas_per_day …).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub offer: Option<OfferView>,
    /// Set on a typed-data signature once it is made: the signature and the digest signed.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub typed_data: Option<TypedDataView>,
    /// Set on a typed-data signature (held or made): the EIP-712 `primaryType` signed, such as `Permit`.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub primary_type: Option<String>,
    /// Set on x402 payments.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub x402: Option<X402View>,
    /// Set on contract calls: the contract, the selector sent and what it was decoded as (`null` for a batch).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<CallView>)]
    pub call: Option<Option<CallView>>,
    /// Set on a batch of calls (§22): each call, in order, as `call` shows one.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub calls: Option<Vec<CallView>>,
    /// Set on contract calls: what the simulation showed before it was signed (`changes`, `approvals`,
    /// `gas_used`).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false, value_type = Option<Object>)]
    pub simulation: Option<serde_json::Value>,
    /// The asset's symbol (the chain's native symbol for native transfers).
    pub asset: String,
    /// EIP-55 address of the token contract; null for the native coin.
    #[schema(required = true)]
    pub token_address: Option<String>,
    /// EIP-55 address of the agent's wallet, or of the delegator's account for a redemption of an on-chain
    /// delegation (§21).
    pub from: String,
    /// Set on a transfer that redeems an on-chain delegation (§21): the money left the delegator's account.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub delegation: Option<DelegationUseView>,
    /// EIP-55 address.
    pub to: String,
    /// Decimal string in whole units of the asset.
    pub amount: String,
    /// The amount in the asset's smallest unit, as a decimal string.
    pub amount_wei: String,
    pub status: TransferStatusView,
    /// Null while the transfer has not been signed.
    #[schema(required = true)]
    pub tx_hash: Option<String>,
    /// Null while the transfer has not been signed.
    #[schema(required = true)]
    pub nonce: Option<u64>,
    /// Earlier attempts at the same nonce that a fee bump or a cancel replaced, oldest first (§14); `tx_hash` names
    /// the latest, or the one that landed.
    pub replaced_hashes: Vec<String>,
    #[schema(required = true)]
    pub block_number: Option<u64>,
    #[schema(required = true)]
    pub conversation_id: Option<Uuid>,
    #[schema(required = true)]
    pub explorer_url: Option<String>,
    /// When a transfer awaiting approval expires; null for transfers that never waited.
    #[schema(required = true)]
    pub expires_at: Option<DateTime<Utc>>,
    /// Set on a transfer awaiting approval: the rules of the policy that ask for it, as the policy names them
    /// (`approval_above`, `approve_new_recipients`, `calls.rules[2]`, `calls.default`; §11, §18). Empty for one held
    /// before the service kept them.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false, example = json!(["approval_above"]))]
    pub held_by: Option<Vec<String>>,
    /// Beyond the contract, set on a request that `approval_above` held: the threshold in force when it was held,
    /// in whole units of the asset `held_above_asset` names (the policy may say otherwise since). For a call or
    /// typed data, the threshold of the asset whose count was above it.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false, example = "0.01")]
    pub held_above: Option<String>,
    /// Beyond the contract, set with `held_above`: the policy's key of the asset it is of (`base:USDC`; for a
    /// token outside the registry `base:<token address>`, whose limits are in base units).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false, example = "base:ETH")]
    pub held_above_asset: Option<String>,
    /// Set on a transfer or call awaiting approval: the most its network fee could be at the fees of its request,
    /// in the chain's native coin (gas limit × `maxFeePerGas`, plus the L1 fee estimate on OP-stack chains). It is
    /// signed at the fees of the moment it is approved; until then its reservation holds twice this fee.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false, example = "0.000042")]
    pub max_fee: Option<String>,
    /// Who pays the gas (§22): `sponsored` (the operator's sponsorship: a user operation of the agent's account)
    /// or `wallet`. (Not required in the schema: clients of servers before this field treat its absence as
    /// `wallet`.)
    #[schema(example = "wallet", required = false)]
    pub gas: &'static str,
    /// A sponsored outflow's user operation (§22): its hash, the bundle carrying it (null until one is signed) and
    /// its `actualGasCost` in whole native units (null until mined). Absent for what the wallet pays.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub sponsorship: Option<SponsorshipPartView>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

/// What a sponsored outflow's record shows of its user operation (§22).
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct SponsorshipPartView {
    pub user_op_hash: String,
    #[schema(required = true)]
    pub bundle_hash: Option<String>,
    /// Exact decimal string in whole native units; null until mined.
    #[schema(required = true)]
    pub gas_cost: Option<String>,
}

impl SponsorshipPartView {
    pub fn new(part: &crate::store::operations::OperationPart, decimals: u8) -> Self {
        SponsorshipPartView {
            user_op_hash: part.user_op_hash.clone(),
            bundle_hash: part.bundle_hash.clone(),
            gas_cost: part.gas_cost.map(|c| format_units(c, decimals)),
        }
    }
}

/// The on-chain delegation a transfer redeemed (§21).
#[derive(Debug, Serialize, ToSchema)]
pub struct DelegationUseView {
    pub id: Uuid,
    /// EIP-55 address of the delegator, whose account the money left.
    pub delegator: String,
}

impl DelegationUseView {
    pub(super) fn new(via: &crate::domain::transaction::Via) -> Self {
        DelegationUseView {
            id: via.delegation_id,
            delegator: via.delegator.to_checksum(None),
        }
    }
}

impl From<&StoredTx> for TransferView {
    fn from(tx: &StoredTx) -> Self {
        let chain = registry::find(&tx.chain);
        // An x402 payment's transaction is the facilitator's settlement, known once named or found on chain. A
        // sponsored operation's is the bundle its event appeared in, known once it settled (until then the stored
        // hash is its `user_op_hash`).
        let sponsored = tx.on_chain().is_some_and(|t| t.gas == Payer::Sponsor);
        let tx_hash = tx
            .chain_hash()
            .filter(|_| !(sponsored && tx.status.is_open()))
            .map(str::to_owned);
        Self {
            id: tx.id,
            transfer_id: tx.id,
            chain: tx.chain.clone(),
            kind: tx.kind(),
            offer: None,
            typed_data: TypedDataView::of(tx),
            primary_type: primary_type(&tx.body),
            x402: tx.body.x402().map(X402View::new),
            call: tx.body.call().map(|c| CallView::shown(tx.to, c)),
            calls: tx.body.call().and_then(CallView::batch),
            simulation: tx.body.simulation().cloned(),
            asset: tx.asset.clone(),
            token_address: tx.token.map(|t| t.address.to_checksum(None)),
            from: tx.body.via().map_or(tx.from, |v| v.delegator).to_checksum(None),
            delegation: tx.body.via().map(DelegationUseView::new),
            to: tx.to.to_checksum(None),
            amount: format_units(tx.value_wei, tx.decimals()),
            amount_wei: tx.value_wei.to_string(),
            status: tx.status.into(),
            nonce: tx.nonce(),
            replaced_hashes: Vec::new(),
            block_number: tx.block_number,
            conversation_id: tx.conversation_id,
            explorer_url: chain.zip(tx_hash.as_deref()).map(|(c, h)| c.tx_url(h)),
            tx_hash,
            expires_at: None,
            held_by: None,
            held_above: None,
            held_above_asset: None,
            max_fee: None,
            gas: tx.on_chain().map_or(Payer::Wallet, |t| t.gas).as_str(),
            sponsorship: match (sponsored, tx.status.is_open(), tx.chain_hash()) {
                (true, true, Some(hash)) => Some(SponsorshipPartView {
                    user_op_hash: hash.to_owned(),
                    bundle_hash: None,
                    gas_cost: None,
                }),
                _ => None,
            },
            created_at: tx.created_at,
            updated_at: tx.updated_at,
        }
    }
}

impl From<&Approval> for TransferView {
    fn from(a: &Approval) -> Self {
        Self {
            id: a.id,
            transfer_id: a.id,
            chain: a.chain.clone(),
            kind: a.kind(),
            offer: None,
            typed_data: None,
            primary_type: primary_type(&a.body),
            x402: a.body.x402().map(X402View::new),
            call: a.body.call().map(|c| CallView::shown(a.to, c)),
            calls: a.body.call().and_then(CallView::batch),
            simulation: a.body.simulation().cloned(),
            asset: a.asset.clone(),
            token_address: a.token.map(|t| t.address.to_checksum(None)),
            from: a.body.via().map_or(a.from, |v| v.delegator).to_checksum(None),
            delegation: a.body.via().map(DelegationUseView::new),
            to: a.to.to_checksum(None),
            amount: a.amount(),
            amount_wei: a.value_wei.to_string(),
            status: a.status.into(),
            tx_hash: None,
            nonce: None,
            replaced_hashes: Vec::new(),
            block_number: None,
            conversation_id: a.conversation_id,
            explorer_url: None,
            expires_at: Some(a.expires_at),
            held_by: Some(a.held_by.clone()),
            held_above: a.held_limit().map(|(_, units)| units),
            held_above_asset: a.held_limit().map(|(key, _)| key),
            max_fee: a.max_fee(),
            gas: a.body.transaction().map_or(Payer::Wallet, |t| t.gas).as_str(),
            sponsorship: None,
            created_at: a.created_at,
            updated_at: a.updated_at,
        }
    }
}

impl TransferView {
    /// A held offer (`kind: "offer"`) where the approvals show it: `view` is the offer as the offers API shows it;
    /// `amount` its price, `from` and `to` the agent's wallet it is paid to.
    pub fn of_offer(offer: &Offer, view: OfferView) -> Self {
        let status = match offer.approval_status() {
            Some(Decision::AwaitingApproval) | None => TransferStatusView::AwaitingApproval,
            Some(Decision::Approved) => TransferStatusView::Approved,
            Some(Decision::Rejected) => TransferStatusView::Rejected,
            Some(Decision::Expired) => TransferStatusView::Expired,
        };
        let approval = offer.approval.as_ref();
        Self {
            id: offer.id,
            transfer_id: offer.id,
            chain: offer.chain.clone(),
            kind: "offer",
            typed_data: None,
            primary_type: None,
            x402: None,
            call: None,
            calls: None,
            simulation: None,
            asset: offer.asset.clone(),
            token_address: Some(offer.token.to_checksum(None)),
            from: view.pay_to.clone(),
            delegation: None,
            to: view.pay_to.clone(),
            amount: offer.price_units(),
            amount_wei: offer.price.to_string(),
            status,
            tx_hash: None,
            nonce: None,
            replaced_hashes: Vec::new(),
            block_number: None,
            conversation_id: approval.and_then(|a| a.conversation_id),
            explorer_url: None,
            expires_at: approval.map(|a| a.expires_at),
            held_by: None,
            held_above: None,
            held_above_asset: None,
            max_fee: None,
            gas: Payer::Wallet.as_str(),
            sponsorship: None,
            created_at: offer.created_at,
            updated_at: approval.and_then(|a| a.decided_at).unwrap_or(offer.created_at),
            offer: Some(view),
        }
    }

    /// The view with an x402 payment's stored answer (`x402.response`), for single-transfer reads.
    pub fn with_response(mut self, record: Option<&X402Record>) -> Self {
        if let (Some(view), Some(record)) = (self.x402.as_mut(), record) {
            view.response = record.response.clone();
        }
        self
    }

    /// The view of a sent transfer with the hashes of its replaced attempts.
    pub fn with_replaced(mut self, hashes: Vec<String>) -> Self {
        self.replaced_hashes = hashes;
        self
    }
}

impl From<&TransferOutcome> for TransferView {
    fn from(outcome: &TransferOutcome) -> Self {
        match outcome {
            TransferOutcome::Sent { tx, .. } => Self::from(tx).with_response(tx.body.x402()),
            TransferOutcome::AwaitingApproval { approval, .. } => Self::from(approval),
        }
    }
}
