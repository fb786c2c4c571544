//! Who moves money: an agent with the `transact` capability (§2), acting for someone (the audit's actor) under a
//! mandate (its token and idempotency claim, checked again in the reserving transaction, §12, §15).

use super::TransferError;
use crate::domain::agent::{Agent, Capability};
use crate::domain::audit::Actor;
use crate::store::Mandate;

/// An agent that may move money. Only `check` makes one for an agent's request (and `approved` for an owner's
/// approval of what such a request left waiting), and every entry point of `Transfers` through which an agent's
/// money moves takes one (`send`, `call`, `preview_call`, `sign_typed_data`, `pay`): no path reaches the money path
/// without the capability check, whoever the caller (a handler, a tool, MCP).
#[derive(Debug, Clone, Copy)]
pub struct Transacting<'a> {
    pub agent: &'a Agent,
    pub mandate: &'a Mandate,
    /// Who asks, as the audit records it.
    pub actor: Actor,
    /// Private: a value is made by `check` or `approved` only.
    _checked: Checked,
}

/// The mark of a value made by `Transacting::check` or `Transacting::approved`, which only this module can write.
#[derive(Debug, Clone, Copy)]
struct Checked;

impl<'a> Transacting<'a> {
    /// The agent, if it has the `transact` capability; `doing` names what was asked in the refusal ("sending").
    pub fn check(
        agent: &'a Agent,
        mandate: &'a Mandate,
        actor: Actor,
        doing: &'static str,
    ) -> Result<Self, TransferError> {
        if !agent.has(Capability::Transact) {
            return Err(TransferError::CapabilityDenied(doing));
        }
        Ok(Transacting {
            agent,
            mandate,
            actor,
            _checked: Checked,
        })
    }

    /// An owner's approval of what the agent's request left waiting (§11): the approval decides, not the agent's
    /// capability now, and no agent token or claim is carried.
    pub(super) fn approved(agent: &'a Agent) -> Self {
        Transacting {
            agent,
            mandate: &Mandate::NONE,
            actor: Actor::Owner,
            _checked: Checked,
        }
    }
}
