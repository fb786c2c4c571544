//! Why a transfer was not made, in the transfer service's terms; callers choose how to show it.

use alloy::primitives::U256;

use crate::chain::ChainError;
use crate::domain::amount::format_units;
use crate::domain::chain::ChainInfo;
use crate::domain::policy::{ApprovalStatus, PolicyRule};
use crate::store::StoreError;

/// Why a transfer was not made.
#[derive(Debug, thiserror::Error)]
pub enum TransferError {
    #[error("amount {0}")]
    InvalidAmount(String),
    #[error("amount must be greater than zero")]
    ZeroAmount,
    #[error("no wallet on this chain")]
    NoWallet,
    /// The zero address or the agent's own wallet (§15): refused before anything is reserved or signed.
    #[error("{0} cannot be the recipient")]
    InvalidRecipient(&'static str),
    #[error("{}", insufficient_message(.chain, *.needed, *.balance))]
    InsufficientFunds {
        chain: &'static ChainInfo,
        /// Amount plus maximum fee.
        needed: U256,
        balance: Option<U256>,
    },
    /// The token amount is above what the wallet holds of that token.
    #[error("the wallet holds {} {symbol}, less than the {} {symbol} to send", format_units(*.balance, *.decimals), format_units(*.needed, *.decimals))]
    InsufficientTokenFunds {
        symbol: String,
        decimals: u8,
        needed: U256,
        balance: U256,
    },
    #[error("{}", cap_message(.chain, *.reserved, *.cap, *.spent))]
    CapExceeded {
        chain: &'static ChainInfo,
        reserved: U256,
        cap: U256,
        spent: U256,
    },
    /// The node refused the signed transaction; its nonce was given back.
    #[error("the node refused the transaction: {0}")]
    Rejected(ChainError),
    /// The node called the nonce used again right after a resynchronisation.
    #[error("the node kept refusing the nonce; nothing was sent")]
    NonceKeptRefused,
    /// The agent was deleted after the request was authenticated (seen in the reserving transaction).
    #[error("the agent is inactive (deleted)")]
    AgentInactive,
    /// The request's agent token was reissued after it was authenticated (seen in the reserving transaction).
    #[error("the access token is not valid")]
    TokenRevoked,
    /// The request's `Idempotency-Key` claim was taken over by a repeat while it was stopped (§12).
    #[error("a request with this Idempotency-Key is running elsewhere")]
    ClaimLost,
    /// The node could not be asked (before anything was signed).
    #[error(transparent)]
    Chain(#[from] ChainError),
    #[error("the transfer could not be recorded; nothing was sent")]
    Store(#[source] StoreError),
    #[error("the wallet key could not be opened; nothing was sent")]
    KeyUnavailable,
    /// The key store (a PKCS#11 token) did not answer (§20): nothing was recorded, the nonce was given back; a retry
    /// signs again.
    #[error("the key store did not sign (it is unavailable); nothing was recorded or sent, try again")]
    SignerUnavailable,
    /// The agent's policy refused it (nothing stored, nothing sent).
    #[error("the agent's policy refuses this transfer (rule {})", .0.as_str())]
    PolicyDenied(PolicyRule),
    /// The agent's policy refused it as over one of its asset's limits (`per_transfer`, `per_day`, `per_week`),
    /// said in words with the figures the decision used (`policy_denied` with that rule; nothing stored or sent).
    #[error("the agent's policy refuses this transfer (rule {}): {words}", .rule.as_str())]
    OverLimit { rule: PolicyRule, words: String },
    /// The `calls` rules refused a contract call (`policy_denied`, rule `call_denied`), said in words: the rule that
    /// denies it, or the rule and condition that did not allow it with the value the call had (§18).
    #[error("the agent's policy refuses this call (rule call_denied): {0}")]
    CallDenied(String),
    /// A call to an address no call may reach whatever the rules (§22: the agent's own, the EntryPoint, the
    /// paymaster, a `DelegationManager`), refused before anything is simulated: `policy_denied`, rule
    /// `call_denied`, with the index of the first such call (`details.index`) and the words saying which it is.
    #[error("the agent's policy refuses this call (rule call_denied): {words}")]
    CallTargetDenied { index: usize, words: String },
    /// No transfer of this agent with that id waits for approval.
    #[error("transfer not found")]
    TransferNotFound,
    /// An approve or reject of a transfer that no longer waits (or whose approval window has passed).
    #[error("{}", not_awaiting_message(*.0))]
    NotAwaiting(ApprovalStatus),
    /// A cancel of a transfer that is no longer (or not yet) pending: its status as found (§14).
    #[error("{}", not_pending_message(.0))]
    NotPending(&'static str),
    /// The call reverts in its simulation (§18): nothing was signed. The decoded reason.
    #[error("the call reverts: {0}")]
    CallReverted(String),
    /// A call of a batch reverts in its simulation (§22: 422 `simulation_reverted`): the first that reverted, and
    /// its decoded reason. Nothing was signed.
    #[error("call {index} of the batch reverts: {reason}")]
    BatchReverted { index: usize, reason: String },
    /// A held call simulated again on approval takes or allows more than the owner was shown (§18): it still waits.
    #[error("the call now takes or allows more than the owner was shown: {0}; it still waits")]
    SimulationChanged(String),
    /// The node can simulate no call (§18): nothing was signed.
    #[error("the {0} node cannot simulate calls (neither eth_simulateV1 nor debug_traceCall); nothing was signed")]
    SimulationUnavailable(String),
    /// A sweep (§20) of an asset the wallet holds none of (for the native coin: no more than one maximum fee).
    #[error("the wallet holds no {0} to sweep (for the native coin: no more than the fee of sending it)")]
    NothingToSweep(String),
    /// The agent lacks the `transact` capability (§2); what was asked (`sending`, `paying`).
    #[error("{0} needs the 'transact' capability, which this agent does not have")]
    CapabilityDenied(&'static str),
    /// An owner session sweeps only to one of the agent's owner addresses (§20; the admin token to any).
    #[error("an owner sweeps only to one of the agent's owner addresses (the admin token to any)")]
    OwnerAddressRequired,
    /// A send naming a delegation on a chain without a `DelegationManager` (§21, 422).
    #[error("on-chain delegations are not available on {0}: no DelegationManager is configured")]
    DelegationsUnavailable(String),
    /// The delegation named is unknown, removed, revoked, expired, on another chain or another agent's (§21, 422):
    /// which of them, in words (a revoked one said to be "unknown, removed or expired" sent owners looking for a
    /// typo).
    #[error("the delegation is not active for this agent on this chain: {0}")]
    DelegationNotActive(&'static str),
    /// The delegator disabled the delegation on chain (§21, 409): it is `revoked` from now on.
    #[error("the delegation was disabled on chain by its delegator; it is revoked")]
    DelegationRevoked,
    /// More than the delegation's caveats leave this period, less this service's redemptions the chain has not
    /// counted yet (§21: 403 `policy_denied`, rule `delegation_limit`, `details.available`). Nothing was signed.
    #[error("the delegation leaves {available} {symbol} this period; nothing was signed")]
    DelegationLimit { available: String, symbol: String },
    /// An enforcer other than an amount caveat refuses the redemption in its simulation (§21: 403 `policy_denied`,
    /// rule `delegation_caveat`, `details.reason`). Nothing was signed.
    #[error("a caveat of the delegation refuses this: {0}; nothing was signed")]
    DelegationCaveat(String),
    /// Sponsored gas asked on a chain that is not sponsorable, or without a sponsorship there (§22, 422).
    #[error(
        "sponsored gas is not available on {0}: the chain is not sponsorable or the agent has no sponsorship there"
    )]
    SponsorshipUnavailable(String),
    /// A batch on a chain whose account implementation is not configured or does not check out (§22, 422).
    #[error("batches are not available on {0}: no account implementation checks out there")]
    BatchUnavailable(String),
    /// The agent's address designates code agentd did not choose, or holds contract code (§22, 409).
    #[error("the agent's address designates code agentd did not choose (or holds contract code); nothing was signed")]
    AccountForeign,
    /// A transaction of the wallet asked while the sponsored designation of the agent's account is unmined: its
    /// EIP-7702 authorization takes the wallet's next nonce (§22: 409, nothing signed; asked again once it lands, it
    /// goes).
    #[error(
        "the agent's account on {chain} is being designated by a sponsored operation whose authorization takes the \
         wallet's nonce {nonce} and has not landed yet; nothing was signed, ask again once it lands"
    )]
    DesignationUnmined { chain: &'static str, nonce: u64 },
    /// More gas than the agent's sponsorship has left today (§22: 403 `policy_denied`, rule `sponsorship_limit`,
    /// `details.left`). Nothing was signed.
    #[error(
        "the sponsorship has {left} (whole native units) left of its daily budget, less than this operation may cost; nothing was signed"
    )]
    SponsorshipLimit { left: String },
    /// The paymaster or the sponsor cannot pay for it now (§22: 503, retryable). Nothing was signed.
    #[error("the sponsor cannot pay for this now: {0}; nothing was signed")]
    SponsorUnfunded(String),
}

impl TransferError {
    /// The snake_case code callers report (tool results, API errors).
    pub fn code(&self) -> &'static str {
        match self {
            Self::InvalidAmount(_) | Self::ZeroAmount | Self::NoWallet => "invalid_arguments",
            Self::InvalidRecipient(_) => "invalid_recipient",
            Self::InsufficientFunds { .. } | Self::InsufficientTokenFunds { .. } => "insufficient_funds",
            Self::CapExceeded { .. } => "spending_cap_exceeded",
            Self::Rejected(_) | Self::NonceKeptRefused => "broadcast_rejected",
            Self::Chain(e) => e.code(),
            Self::Store(_) | Self::KeyUnavailable => "internal_error",
            Self::SignerUnavailable => "signer_unavailable",
            Self::PolicyDenied(_) | Self::OverLimit { .. } | Self::CallDenied(_) | Self::CallTargetDenied { .. } => {
                "policy_denied"
            }
            Self::AgentInactive => "agent_inactive",
            Self::TokenRevoked => "invalid_token",
            Self::ClaimLost | Self::DesignationUnmined { .. } => "idempotency_in_progress",
            Self::TransferNotFound => "transfer_not_found",
            Self::NotAwaiting(ApprovalStatus::Expired) => "transfer_expired",
            Self::NotAwaiting(_) | Self::NotPending(_) => "transfer_not_pending",
            Self::CallReverted(_) => "call_reverted",
            Self::BatchReverted { .. } => "simulation_reverted",
            Self::SimulationUnavailable(_) => "simulation_unavailable",
            Self::SimulationChanged(_) => "simulation_changed",
            Self::NothingToSweep(_) => "nothing_to_sweep",
            Self::CapabilityDenied(_) => "capability_denied",
            Self::OwnerAddressRequired => "owner_address_required",
            Self::DelegationsUnavailable(_) => "delegations_unavailable",
            Self::DelegationNotActive(_) => "delegation_not_active",
            Self::DelegationRevoked => "delegation_revoked",
            Self::DelegationLimit { .. } | Self::DelegationCaveat(_) => "policy_denied",
            Self::SponsorshipUnavailable(_) => "sponsorship_unavailable",
            Self::BatchUnavailable(_) => "batch_unavailable",
            Self::AccountForeign => "account_foreign",
            Self::SponsorshipLimit { .. } => "policy_denied",
            Self::SponsorUnfunded(_) => "sponsor_unfunded",
        }
    }
}

impl TransferError {
    /// The policy rule that refused it (`details.rule`), when the policy did.
    pub fn policy_rule(&self) -> Option<PolicyRule> {
        match self {
            Self::PolicyDenied(rule) | Self::OverLimit { rule, .. } => Some(*rule),
            Self::CallDenied(_) | Self::CallTargetDenied { .. } => Some(PolicyRule::CallDenied),
            _ => None,
        }
    }

    /// Why the `calls` rules refused a call, in words (the rule, and the condition with the value it had; or the
    /// address no call may reach).
    pub fn call_denial(&self) -> Option<&str> {
        match self {
            Self::CallDenied(words) | Self::CallTargetDenied { words, .. } => Some(words),
            _ => None,
        }
    }

    /// Which call of a request a refusal names (`details.index`): the first whose target no call may reach.
    pub fn call_index(&self) -> Option<usize> {
        match self {
            Self::CallTargetDenied { index, .. } => Some(*index),
            _ => None,
        }
    }

    /// A refusal over a limit in words, with the decision's figures.
    pub fn over_limit(&self) -> Option<&str> {
        match self {
            Self::OverLimit { words, .. } => Some(words),
            _ => None,
        }
    }
    /// The rule a refusal's audit entry names: the policy's, or a delegation's (§21: `delegation_limit`,
    /// `delegation_caveat`, answered as `policy_denied` with that rule), so that a history can say which.
    pub fn refused_rule(&self) -> Option<&'static str> {
        match self {
            Self::DelegationLimit { .. } => Some("delegation_limit"),
            Self::DelegationCaveat(_) => Some("delegation_caveat"),
            Self::SponsorshipLimit { .. } => Some("sponsorship_limit"),
            _ => self.policy_rule().map(PolicyRule::as_str),
        }
    }
    /// A refusal over a limit in words with the decision's figures, for its audit entry: a policy window's, or what
    /// a delegation leaves this period (§21).
    pub fn limit_words(&self) -> Option<String> {
        match self {
            Self::DelegationLimit { .. } => Some(self.to_string()),
            _ => self.over_limit().map(str::to_owned),
        }
    }
}

fn not_awaiting_message(status: ApprovalStatus) -> String {
    match status {
        ApprovalStatus::Expired => "the transfer's approval window has passed; it was not sent".to_string(),
        other => format!("the transfer is no longer awaiting approval (it is {})", other.as_str()),
    }
}

fn not_pending_message(status: &str) -> String {
    match status {
        "unpayable" => "the resource no longer asks the approved price of the approved payee (or cannot be reached); \
                        nothing was signed and the payment still waits"
            .to_string(),
        "x402" => "an x402 payment is an authorization the resource settles; it cannot be cancelled".to_string(),
        "sponsored" => {
            "a sponsored user operation is carried by the sponsor's bundles; it cannot be cancelled".to_string()
        }
        "awaiting_approval" => "the transfer is awaiting approval and was never sent: reject it instead".to_string(),
        other => format!("only a pending transfer can be cancelled (this one is {other})"),
    }
}

fn insufficient_message(chain: &ChainInfo, needed: U256, balance: Option<U256>) -> String {
    let have = balance.map(|b| {
        format!(
            ", the wallet holds {} {}",
            format_units(b, chain.decimals),
            chain.native_symbol
        )
    });
    format!(
        "the wallet cannot pay {} {} (amount plus maximum fee){}",
        format_units(needed, chain.decimals),
        chain.native_symbol,
        have.unwrap_or_default()
    )
}

fn cap_message(chain: &ChainInfo, reserved: U256, cap: U256, spent: U256) -> String {
    format!(
        "this transfer needs up to {} {sym} (amount plus maximum fee) but the spending cap on {} is {} {sym} with {} {sym} already counted",
        format_units(reserved, chain.decimals),
        chain.name,
        format_units(cap, chain.decimals),
        format_units(spent, chain.decimals),
        sym = chain.native_symbol,
    )
}

impl From<crate::domain::recipient::RecipientError> for TransferError {
    fn from(e: crate::domain::recipient::RecipientError) -> Self {
        TransferError::InvalidRecipient(e.what())
    }
}
