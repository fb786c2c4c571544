//! Offers held for the owner's approval (§23 Tools, §11): the `create_offer` tool of a guarded agent checks its offer
//! as `POST …/offers` would and stores it `awaiting_approval` until the policy's `approval_ttl_secs` have passed;
//! nothing answers at its URL until the owner approves it (`active`). The owner decides it where held transfers are
//! decided (`POST …/transfers/{id}/approve|reject`). A decision only changes the offer's status: it signs nothing and
//! moves no money. Each is audited and announced as a held transfer's is (`OfferStore::decide_offer`).

use uuid::Uuid;

use super::{NewOffer, OfferError, Offers};
use crate::domain::agent::Agent;
use crate::domain::audit::Actor;
use crate::domain::policy::ApprovalStatus;
use crate::store::offers::{Offer, OfferApproval, OfferDecision, OfferState, OfferVerdict};

impl Offers {
    /// Checks `new` for `agent` as `create` does and stores it awaiting the owner's approval until the policy's
    /// `approval_ttl_secs` from now, its `approval_required` event in `conversation_id`'s stream (and the
    /// `approval.required` webhook).
    pub async fn hold(&self, agent: &Agent, new: NewOffer, conversation_id: Option<Uuid>) -> Result<Offer, OfferError> {
        let mut offer = self.checked(agent, new).await?;
        let ttl = self.store.get_policy(agent.id).await?.approval_ttl_secs;
        let ttl = chrono::Duration::seconds(i64::try_from(ttl).unwrap_or(i64::MAX / 1000).min(i64::MAX / 1000));
        offer.status = OfferState::AwaitingApproval;
        offer.approval = Some(OfferApproval {
            expires_at: offer
                .created_at
                .checked_add_signed(ttl)
                .unwrap_or(chrono::DateTime::<chrono::Utc>::MAX_UTC),
            conversation_id,
            decided_at: None,
        });
        self.store.hold_offer(&offer).await?;
        Ok(offer)
    }

    /// The agent's offers awaiting approval, oldest first.
    pub async fn waiting(&self, agent_id: Uuid) -> Result<Vec<Offer>, OfferError> {
        Ok(self.store.waiting_offers(agent_id).await?)
    }

    /// Whether `id` names an offer of the agent's that was held for approval (whatever was decided since): the
    /// approval endpoints decide it rather than a transfer.
    pub async fn was_held(&self, agent_id: Uuid, id: Uuid) -> Result<bool, OfferError> {
        Ok(self
            .store
            .offer(id)
            .await?
            .is_some_and(|o| o.agent_id == agent_id && o.approval.is_some()))
    }

    /// The owner's decision on the agent's held offer `id` (`by` the owner or admin who took it; `reason` a
    /// rejection's). One past its `expires_at` is expired on the spot and answered as such (`NotAwaiting(Expired)`).
    pub async fn decide(
        &self,
        agent: &Agent,
        id: Uuid,
        verdict: OfferVerdict,
        by: Actor,
        reason: Option<&str>,
    ) -> Result<Offer, OfferError> {
        let expired = match self.store.offer(id).await? {
            Some(o) if o.agent_id == agent.id && o.status == OfferState::AwaitingApproval => {
                o.approval.as_ref().is_some_and(|a| self.clock.now() >= a.expires_at)
            }
            _ => false,
        };
        if expired {
            self.settle(agent.id, id, OfferVerdict::Expired, Actor::System, None)
                .await?;
            return Err(OfferError::NotAwaiting(ApprovalStatus::Expired));
        }
        match self.settle(agent.id, id, verdict, by, reason).await {
            // Its time ran out between the read and the decision.
            Err(OfferError::NotAwaiting(ApprovalStatus::Expired)) => {
                self.settle(agent.id, id, OfferVerdict::Expired, Actor::System, None)
                    .await?;
                Err(OfferError::NotAwaiting(ApprovalStatus::Expired))
            }
            other => other,
        }
    }

    async fn settle(
        &self,
        agent_id: Uuid,
        id: Uuid,
        verdict: OfferVerdict,
        by: Actor,
        reason: Option<&str>,
    ) -> Result<Offer, OfferError> {
        match self.store.decide_offer(agent_id, id, verdict, by, reason).await? {
            OfferDecision::Decided(offer) => Ok(*offer),
            OfferDecision::NotWaiting(status) => Err(OfferError::NotAwaiting(status)),
            OfferDecision::NotFound => Err(OfferError::NotHeld),
        }
    }
}
