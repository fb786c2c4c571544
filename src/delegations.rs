//! The delegation service (§21): registers what the owner grants the agent's wallet on chain, verified as the
//! `DelegationManager` verifies it (root authority, ERC-1271 on the delegator over the EIP-712 digest under the
//! manager's domain, every caveat read from a configured enforcer, the caveats bounding every execution, not
//! disabled on chain); lists each limit with what is `available` at the latest block; removes; and notices a
//! revocation on chain (`check_revocations`, the watcher's pass, also run at the next use).

pub mod view;

use std::sync::Arc;
use std::time::Duration;

use alloy::primitives::{Address, B256, U256};
use uuid::Uuid;

use crate::chain::delegations::Read;
use crate::chain::{ChainError, Chains, Node};
use crate::domain::agent::Agent;
use crate::domain::audit::{Actor, Detail, detail};
use crate::domain::delegation::{self as rules, Delegation, DelegationJson, Kind, Limit, Status, Terms};
use crate::store::delegations::{DelegationRecord, Registration};
use crate::store::{AuditEvent, Store, StoreError};

/// How often the watcher asks the chain whether active delegations were disabled (§21: at least once a minute).
pub const REVOCATION_CHECK_EVERY: Duration = Duration::from_secs(30);

/// Why a delegation call failed; each maps to one status and code at the edge.
#[derive(Debug, thiserror::Error)]
pub enum DelegationError {
    /// A field of the request that does not parse or names no chain of the agent (422 `validation_failed`).
    #[error("{field}: {reason}")]
    Field { field: String, reason: String },
    #[error("on-chain delegations are not available on {0}: no DelegationManager is configured")]
    Unavailable(String),
    #[error("the delegate must be the agent's wallet on {chain} ({wallet})")]
    DelegateMismatch { chain: String, wallet: Address },
    #[error("only a root delegation (authority 0xff…ff) is taken; chains of redelegation are not")]
    NotRoot,
    #[error("the delegator {0} has no code: it must be a smart account or an EOA upgraded by EIP-7702")]
    NotSmart(Address),
    #[error("the delegator's signature does not verify (ERC-1271 isValidSignature over the EIP-712 digest)")]
    InvalidSignature,
    #[error("caveat {index}: {reason}")]
    UnknownCaveat { index: usize, reason: String },
    #[error(
        "caveats {first} and {second} name the same {kind} enforcer, which keeps one state per delegation: the \
         chain would enforce only one of them"
    )]
    CaveatConflict {
        first: usize,
        second: usize,
        kind: &'static str,
    },
    #[error(
        "the caveats do not bound every execution: an ERC-20 amount caveat, or a native amount caveat beside \
         exact_calldata with empty terms, is required"
    )]
    Unbounded,
    #[error("the delegation is disabled on chain")]
    Revoked,
    #[error("this delegation is registered already")]
    Exists,
    #[error("delegation not found")]
    NotFound,
    /// A send names a delegation that is unknown, removed, expired, another agent's or of another chain (422).
    #[error("the delegation is not active: {0}")]
    NotActive(&'static str),
    #[error(transparent)]
    Chain(#[from] ChainError),
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl DelegationError {
    fn field(field: &str, reason: impl Into<String>) -> Self {
        DelegationError::Field {
            field: field.to_string(),
            reason: reason.into(),
        }
    }
}

/// A registration request: the chain and the delegation in the framework's JSON form.
#[derive(Debug, Clone)]
pub struct NewDelegation {
    pub chain: String,
    pub delegation: DelegationJson,
}

/// A stored delegation read back: its parsed form, its decoded caveats, and what is left of each limit now.
#[derive(Debug, Clone)]
pub struct Described {
    pub record: DelegationRecord,
    pub delegation: Delegation,
    /// The caveats' terms, in order (`None` for one the chain's configured enforcers no longer name).
    pub terms: Vec<Option<Terms>>,
    /// Each limit with what is left of it now (`None`: not active, or the node did not answer).
    pub limits: Vec<(Limit, Option<Left>)>,
    pub status: Status,
    pub not_before: Option<u64>,
    pub expires_at: Option<u64>,
}

impl Described {
    /// What the delegation lets the agent take of `asset` now: the smallest `available` of its limits on that
    /// asset (§21: several limits on one asset, the smallest); `None` without a limit on it or while a figure is
    /// unknown.
    pub fn available(&self, asset: rules::LimitAsset) -> Option<U256> {
        let figures: Vec<Option<U256>> = self
            .limits
            .iter()
            .filter(|(limit, _)| limit.asset == asset)
            .map(|(_, left)| left.map(|l| l.shown))
            .collect();
        figures
            .iter()
            .copied()
            .collect::<Option<Vec<U256>>>()?
            .into_iter()
            .min()
    }
}

/// The service; cheap to clone.
#[derive(Clone)]
pub struct Delegations {
    store: Arc<dyn Store>,
    chains: Arc<Chains>,
    managers: Arc<Vec<(String, Address)>>,
    enforcers: Arc<rules::EnforcersByChain>,
    /// What the service reads the time on (the system's clock outside tests).
    clock: Arc<dyn crate::domain::clock::Clock>,
}

impl Delegations {
    pub fn new(
        store: Arc<dyn Store>,
        chains: Arc<Chains>,
        managers: Vec<(String, Address)>,
        enforcers: rules::EnforcersByChain,
    ) -> Self {
        Delegations {
            store,
            chains,
            managers: Arc::new(managers),
            enforcers: Arc::new(enforcers),
            clock: Arc::new(crate::domain::clock::SystemClock),
        }
    }

    /// The same service reading the time on `clock` (a test's, which it can move ahead).
    pub fn with_clock(mut self, clock: Arc<dyn crate::domain::clock::Clock>) -> Self {
        self.clock = clock;
        self
    }

    /// The manager of `chain`, or `delegations_unavailable`.
    pub fn manager(&self, chain: &str) -> Result<Address, DelegationError> {
        self.managers
            .iter()
            .find(|(c, _)| c == chain)
            .map(|(_, a)| *a)
            .ok_or_else(|| DelegationError::Unavailable(chain.to_string()))
    }

    fn enforcers(&self, chain: &str) -> &[(Kind, Address)] {
        self.enforcers
            .iter()
            .find(|(c, _)| c == chain)
            .map(|(_, e)| e.as_slice())
            .unwrap_or_default()
    }

    /// Registers `new` for `agent`, checking §21's conditions in their order (the first that fails answers, nothing
    /// stored); `owner`: the caller has owner authority (only it may register a removed or revoked one again).
    pub async fn register(
        &self,
        agent: &Agent,
        new: &NewDelegation,
        owner: bool,
        actor: Actor,
    ) -> Result<Described, DelegationError> {
        let chain_info = crate::domain::chain::find(&new.chain)
            .filter(|_| agent.has_chain(&new.chain))
            .ok_or_else(|| DelegationError::field("chain", "must be one of the agent's chains"))?;
        let manager = self.manager(&new.chain)?;
        let delegation = new
            .delegation
            .parse()
            .map_err(|rules::FieldError(field, reason)| DelegationError::field(&field, reason))?;
        let wallet = agent
            .wallet_addresses
            .get(&new.chain)
            .copied()
            .ok_or_else(|| DelegationError::field("chain", "the agent has no wallet on this chain"))?;
        if delegation.delegate != wallet {
            return Err(DelegationError::DelegateMismatch {
                chain: new.chain.clone(),
                wallet,
            });
        }
        if !delegation.is_root() {
            return Err(DelegationError::NotRoot);
        }
        let client = self.chains.get(&new.chain)?;
        if !rules::is_smart_account(&client.code(delegation.delegator).await?) {
            return Err(DelegationError::NotSmart(delegation.delegator));
        }
        let digest = delegation.digest(chain_info.chain_id, manager);
        let verdict = client
            .read(
                delegation.delegator,
                rules::is_valid_signature_call(digest, &delegation.signature),
            )
            .await?;
        if !matches!(&verdict, Read::Answer(out) if rules::is_valid_signature_answer(out)) {
            return Err(DelegationError::InvalidSignature);
        }
        let terms = rules::decode_caveats(&delegation, self.enforcers(&new.chain)).map_err(|e| {
            DelegationError::UnknownCaveat {
                index: e.index,
                reason: e.reason,
            }
        })?;
        if let Some((first, second)) = rules::conflicting_caveats(&delegation, &terms) {
            return Err(DelegationError::CaveatConflict {
                first,
                second,
                kind: terms[second].kind().contract(),
            });
        }
        if !rules::is_bounded(&terms) {
            return Err(DelegationError::Unbounded);
        }
        let hash = delegation.hash();
        if self.disabled_on_chain(&new.chain, manager, hash).await? {
            return Err(DelegationError::Revoked);
        }
        let record = DelegationRecord {
            id: Uuid::new_v4(),
            agent_id: agent.id,
            chain: new.chain.clone(),
            hash,
            delegator: delegation.delegator,
            delegation: canonical_json(&delegation),
            status: Status::Active,
            created_at: self.clock.now(),
            revoked_at: None,
        };
        // The store names the id it keeps (an earlier one when this delegation is registered again).
        let added = detail::DelegationAdded {
            delegation_id: record.id,
            chain: record.chain.clone(),
            hash: format!("{hash:#x}"),
            delegator: record.delegator.to_checksum(None),
        };
        let audit = AuditEvent::new(agent.id, actor, Detail::DelegationAdded(added));
        match self.store.add_delegation(&record, owner, &audit).await? {
            Registration::Added(stored) => self.describe(stored).await,
            Registration::Exists => Err(DelegationError::Exists),
        }
    }

    /// The agent's delegations with what is left of each limit now.
    pub async fn list(&self, agent_id: Uuid) -> Result<Vec<Described>, DelegationError> {
        let records = self.store.list_delegations(agent_id).await?;
        // Each delegation's reads of the chain are independent: asked concurrently, answered in the list's order.
        futures::future::try_join_all(records.into_iter().map(|record| self.describe(record))).await
    }

    /// One of the agent's delegations (`NotFound` for another agent's or an unknown id).
    pub async fn get(&self, agent_id: Uuid, id: Uuid) -> Result<Described, DelegationError> {
        let record = self
            .store
            .get_delegation(agent_id, id)
            .await?
            .ok_or(DelegationError::NotFound)?;
        self.describe(record).await
    }

    /// Stops using it (owner authority; revoking it on chain is the delegator's act). Removing a removed one again
    /// changes nothing.
    pub async fn remove(&self, agent_id: Uuid, id: Uuid, actor: Actor) -> Result<(), DelegationError> {
        let removed = detail::DelegationRemoved { delegation_id: id };
        let audit = AuditEvent::new(agent_id, actor, Detail::DelegationRemoved(removed));
        match self.store.remove_delegation(agent_id, id, &audit).await? {
            None => Err(DelegationError::NotFound),
            Some(_) => Ok(()),
        }
    }

    /// One pass over `chain`'s active delegations: each the manager reports disabled becomes `revoked` (once,
    /// audited as the system's doing, with its `delegation_revoked` event). Returns how many changed.
    pub async fn check_revocations(&self, chain: &str) -> Result<usize, DelegationError> {
        let Ok(manager) = self.manager(chain) else {
            return Ok(0);
        };
        let mut changed = 0;
        for record in self.store.active_delegations(chain).await? {
            if self.disabled_on_chain(chain, manager, record.hash).await? && self.mark_revoked(&record).await? {
                changed += 1;
            }
        }
        Ok(changed)
    }

    /// Records a revocation noticed on chain; false when another pass or instance recorded it first.
    async fn mark_revoked(&self, record: &DelegationRecord) -> Result<bool, DelegationError> {
        let revoked = detail::DelegationRevoked {
            delegation_id: record.id,
            chain: record.chain.clone(),
            hash: format!("{:#x}", record.hash),
            delegator: record.delegator.to_checksum(None),
            status: "revoked".into(),
        };
        let audit = AuditEvent::new(record.agent_id, Actor::System, Detail::DelegationRevoked(revoked));
        Ok(self.store.revoke_delegation(record.id, &audit).await?.is_some())
    }

    async fn disabled_on_chain(&self, chain: &str, manager: Address, hash: B256) -> Result<bool, DelegationError> {
        let client = self.chains.get(chain)?;
        match client.read(manager, rules::disabled_call(hash)).await? {
            Read::Answer(out) => rules::disabled_answer(&out).ok_or_else(|| unreadable(chain, "disabledDelegations")),
            Read::Reverted => Err(unreadable(chain, "disabledDelegations")),
        }
    }

    /// The record with its parse, decoded caveats and, while active, what is left of each limit at the latest
    /// block. An active one is asked of the manager first: disabled on chain, it is recorded `revoked` now rather
    /// than at the watcher's next pass (a node that does not answer leaves that to the watcher).
    async fn describe(&self, mut record: DelegationRecord) -> Result<Described, DelegationError> {
        if record.status == Status::Active
            && let Ok(manager) = self.manager(&record.chain)
            && let Ok(true) = self.disabled_on_chain(&record.chain, manager, record.hash).await
        {
            self.mark_revoked(&record).await?;
            record.status = Status::Revoked;
            record.revoked_at = Some(self.clock.now());
        }
        let delegation = serde_json::from_value::<DelegationJson>(record.delegation.clone())
            .ok()
            .and_then(|json| json.parse().ok())
            .ok_or_else(|| StoreError::Corrupt("delegations.delegation".into()))?;
        let enforcers = self.enforcers(&record.chain);
        let terms: Vec<Option<Terms>> = delegation
            .caveats
            .iter()
            .map(|c| {
                let kind = enforcers.iter().find(|(_, a)| *a == c.enforcer)?.0;
                Terms::decode(kind, &c.terms).ok()
            })
            .collect();
        let known: Vec<Terms> = terms.iter().flatten().cloned().collect();
        let (not_before, expires_at) = rules::window(&known);
        let now = u64::try_from(self.clock.now().timestamp()).unwrap_or_default();
        let status = record.status.at(expires_at, now);
        let limits_of = rules::limits(&known);
        // Every figure is read at one block, with the delegate's mined nonce at that block: a redemption is then
        // either in the chain's figure (its nonce below) or among this service's held against it, never both.
        let at = match status {
            Status::Active if !limits_of.is_empty() => self.pin(&record, &delegation).await,
            _ => None,
        };
        let mut limits = Vec::new();
        for limit in limits_of {
            // `limits` indexes the known terms; map back to the caveat's own terms bytes.
            let caveat = terms
                .iter()
                .enumerate()
                .filter(|(_, t)| t.is_some())
                .nth(limit.caveat)
                .map(|(i, _)| i)
                .unwrap_or(limit.caveat);
            let limit = Limit { caveat, ..limit };
            let available = match at {
                Some(at) => self.available(&record, &delegation, &limit, at).await,
                None => None,
            };
            limits.push((limit, available));
        }
        Ok(Described {
            record,
            delegation,
            terms,
            limits,
            status,
            not_before,
            expires_at,
        })
    }

    /// The block the figures of a delegation are read at (the latest), and the delegate's mined nonce at it. `None`
    /// when the node does not answer (logged).
    async fn pin(&self, record: &DelegationRecord, delegation: &Delegation) -> Option<Pinned> {
        let client = self.chains.get(&record.chain).ok()?;
        let read = async {
            let block = client.block_number().await?;
            let mined_nonce = client.mined_nonce_at(delegation.delegate, block).await?;
            Ok::<_, ChainError>(Pinned { block, mined_nonce })
        };
        match read.await {
            Ok(at) => Some(at),
            Err(e) => {
                tracing::warn!(delegation_id = %record.id, error = %e, "the delegate's nonce could not be read");
                None
            }
        }
    }

    /// What is left of `limit` at block `at`: the enforcer's figure there, less this service's redemptions that
    /// block does not include (those whose nonce the delegate's wallet had not used at it). `None` when the node
    /// does not answer (logged). The money path judges the chain's figure (`Left::on_chain`) against the
    /// redemptions its reserving transaction holds from `Left::mined_nonce` on.
    async fn available(
        &self,
        record: &DelegationRecord,
        delegation: &Delegation,
        limit: &Limit,
        at: Pinned,
    ) -> Option<Left> {
        let manager = self.manager(&record.chain).ok()?;
        let client = self.chains.get(&record.chain).ok()?;
        let enforcer = delegation.caveats.get(limit.caveat)?;
        let mined = at.mined_nonce;
        let call = rules::available_call(limit, record.hash, manager, &enforcer.terms);
        match client.read_at(enforcer.enforcer, call, at.block).await {
            Ok(Read::Answer(out)) => {
                let on_chain = rules::available_answer(limit, &out)?;
                let token = match limit.asset {
                    rules::LimitAsset::Native => None,
                    rules::LimitAsset::Token(token) => Some(token),
                };
                let pending = match self.store.unmined_redemptions(record.id, token, mined).await {
                    Ok(pending) => pending,
                    Err(e) => {
                        tracing::error!(delegation_id = %record.id, error = %e, "the redemptions on their way could not be read");
                        return None;
                    }
                };
                Some(Left {
                    on_chain,
                    shown: rules::available(on_chain, pending),
                    mined_nonce: mined,
                })
            }
            Ok(Read::Reverted) => {
                tracing::warn!(delegation_id = %record.id, "the enforcer refused to report what is available");
                None
            }
            Err(e) => {
                tracing::warn!(delegation_id = %record.id, error = %e, "what is available could not be read");
                None
            }
        }
    }

    /// The delegation a send on `chain` names, checked in §21's order for a delegated send:
    /// `delegations_unavailable` → `delegation_not_active` (unknown, another agent's, of another chain, removed,
    /// revoked or expired) → `delegation_revoked` (disabled on chain now: recorded, 409) — with each limit's
    /// `available` read at the latest block, for the money path to judge the amount against.
    pub async fn for_send(&self, agent_id: Uuid, chain: &str, id: Uuid) -> Result<Described, DelegationError> {
        self.manager(chain)?;
        let record = self
            .store
            .get_delegation(agent_id, id)
            .await?
            .filter(|r| r.chain == chain)
            .ok_or(DelegationError::NotActive(
                "no such delegation of this agent on this chain",
            ))?;
        let was_active = record.status == Status::Active;
        let described = self.describe(record).await?;
        match described.status {
            Status::Active => Ok(described),
            Status::Revoked if was_active => Err(DelegationError::Revoked),
            Status::Revoked => Err(DelegationError::NotActive("its delegator revoked it on chain")),
            Status::Removed => Err(DelegationError::NotActive("it was removed")),
            Status::Expired => Err(DelegationError::NotActive("it expired")),
        }
    }

    /// The watcher: a pass over every chain with a manager every `REVOCATION_CHECK_EVERY`, until `stop`.
    pub async fn run_until_stopped(self, mut stop: tokio::sync::watch::Receiver<bool>) {
        loop {
            for chain in self.chains.configured_names() {
                if let Err(e) = self.check_revocations(chain).await {
                    tracing::warn!(chain, error = %e, "delegation revocation check failed");
                }
            }
            tokio::select! {
                _ = tokio::time::sleep(REVOCATION_CHECK_EVERY) => {}
                _ = stop.changed() => return,
            }
        }
    }
}

/// What is left of a limit now (§21 `available`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Left {
    /// The enforcer's figure at the latest block.
    pub on_chain: U256,
    /// Less this service's redemptions that block has not included: what the API shows.
    pub shown: U256,
    /// The delegate's mined nonce at that block: its redemptions from this nonce on are not in `on_chain`.
    pub mined_nonce: u64,
}

/// A block the figures of one delegation are read at, and the delegate's mined nonce there.
#[derive(Debug, Clone, Copy)]
struct Pinned {
    block: u64,
    mined_nonce: u64,
}

fn unreadable(chain: &str, what: &str) -> DelegationError {
    DelegationError::Chain(ChainError::Unavailable {
        chain: chain.to_string(),
        reason: format!("the DelegationManager did not answer {what}"),
    })
}

/// The framework's JSON form of `delegation` in one spelling (checksummed addresses, lower-case hex, decimal salt).
pub fn canonical_json(delegation: &Delegation) -> serde_json::Value {
    let hex = |b: &[u8]| format!("0x{}", alloy::hex::encode(b));
    serde_json::json!({
        "delegate": delegation.delegate.to_checksum(None),
        "delegator": delegation.delegator.to_checksum(None),
        "authority": hex(delegation.authority.as_slice()),
        "caveats": delegation.caveats.iter().map(|c| serde_json::json!({
            "enforcer": c.enforcer.to_checksum(None),
            "terms": hex(&c.terms),
            "args": hex(&c.args),
        })).collect::<Vec<_>>(),
        "salt": delegation.salt.to_string(),
        "signature": hex(&delegation.signature),
    })
}

/// The delegation a request or a tool call names (`"delegation"`), if any; `Err` says what is wrong with it, as the
/// field's message.
pub fn named(text: Option<&str>) -> Result<Option<Uuid>, &'static str> {
    text.map(|id| Uuid::parse_str(id.trim()))
        .transpose()
        .map_err(|_| "must be the id of one of the agent's delegations")
}
