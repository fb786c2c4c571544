//! The response bodies of the API, one type per body: handlers answer with them and the OpenAPI document is
//! derived from them, so what is documented is what is sent. One file per resource; each view converts from the
//! domain or store type it shows.

pub mod agents;
pub mod audit;
pub mod chains;
pub mod chat;
pub mod conversations;
pub mod error;
pub mod facilitator;
pub mod owners;
pub mod policy;
pub mod reissue;
pub mod sponsorship;
pub mod transactions;
pub mod transfers;
pub mod wallets;
pub mod webhooks;

/// Delegation views live with the service (the tools show the same view, §21).
pub use crate::delegations::view::{CaveatView, DelegationView, LimitView};
pub use agents::{AgentCreatedView, AgentDetailView, AgentSummaryView, CapabilityView, ExportedKeyView};
pub use audit::{ActorView, AuditEntryView, AuditHeadView};
pub use chains::{
    ChainDelegationsView, ChainSponsorshipView, ChainView, ContractView, HealthView, PoolView, TokenView,
};
pub use chat::{ChainCallView, ChatResponseView};
pub use conversations::{ConversationView, MessageView, RoleView};
pub use error::{ErrorBody, ErrorDetail, FailureView, FieldErrors};
pub use facilitator::{
    FacilitatorKindView, FacilitatorRequest, FacilitatorSettleView, FacilitatorSupportedView,
    FacilitatorTokenCreatedView, FacilitatorTokenView, FacilitatorTokensView, FacilitatorVerifyView,
};
pub use owners::{OwnerChallengeView, OwnerSessionView};
pub use policy::{AssetBudgetView, AssetLimitsView, BudgetView, PolicyView, WindowView};
pub use reissue::{ChallengeView, ReissuedView};
pub use sponsorship::{SponsorshipView, SponsorshipsView};
pub use transactions::{TransactionView, TxStatusView};
pub use transfers::{CallView, TransferStatusView, TransferView, TypedDataView};
pub use wallets::{
    BalanceEntryView, BalanceView, BalancesView, DepositView, FailedBalanceView, FailedTokenBalanceView, FundingView,
    TokenBalanceEntryView, TokenBalanceView,
};
pub use webhooks::{DeliveryView, QueuedEventView, WebhookSecretView, WebhookView};
