//! Agents: create, list, detail, partial update, soft delete and key export. On a guarded agent the agent's own
//! token may tighten its guardrails but not loosen them (docs/api.md §10); every change is audited with its actor.

use std::collections::BTreeMap;

use alloy::primitives::U256;
use axum::Json;
use axum::extract::{Query, State};
use axum::http::StatusCode;
use serde::{Deserialize, Deserializer};
use utoipa::{IntoParams, ToSchema};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;
use uuid::Uuid;
use zeroize::Zeroizing;

use super::auth::{ActiveCaller, AdminGuard, AnyCaller};
use super::error::{AppError, Result};
use super::json::ApiJson;
use super::views::{AgentCreatedView, AgentDetailView, AgentSummaryView, CapabilityView, ErrorBody, ExportedKeyView};
use crate::auth::{Actor, AuthError};
use crate::domain::agent::{self, Agent, Capability};
use crate::domain::audit::{Detail, detail};
use crate::domain::{amount, token};
use crate::state::AppState;
use crate::store::{AgentUpdate, AuditEvent, NewAgent};

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(create_agent, list_agents))
        .routes(routes!(get_agent, update_agent, delete_agent))
        .routes(routes!(export_key))
}

/// Deserialises a present field (even `null`) as `Some(..)`, so absent and `null` can be told apart.
fn present<'de, D: Deserializer<'de>, T: Deserialize<'de>>(d: D) -> std::result::Result<Option<Option<T>>, D::Error> {
    Option::<T>::deserialize(d).map(Some)
}

#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
struct CreateAgent {
    /// 1 to 100 characters after trimming (the schema cannot count after trimming, so it states no maximum: a longer
    /// name is refused with 422).
    #[schema(min_length = 1)]
    name: String,
    #[schema(max_length = 1000)]
    description: Option<String>,
    /// Registry chain names; absent: `["ethereum", "base"]`.
    #[schema(min_items = 1)]
    chains: Option<Vec<String>>,
    /// Absent or empty: `["read"]`.
    #[schema(value_type = Option<Vec<CapabilityView>>)]
    capabilities: Option<Vec<String>>,
    /// Native units per chain; default 0 (no spending).
    #[schema(value_type = Option<f64>, minimum = 0)]
    spending_cap: Option<serde_json::Number>,
    owner_addresses: Option<BTreeMap<String, String>>,
}

/// Absent fields stay as they are.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
struct UpdateAgent {
    #[serde(default, deserialize_with = "present")]
    name: Option<Option<String>>,
    #[serde(default, deserialize_with = "present")]
    description: Option<Option<String>>,
    #[serde(default, deserialize_with = "present")]
    chains: Option<Option<Vec<String>>>,
    #[serde(default, deserialize_with = "present")]
    #[schema(value_type = Option<Vec<CapabilityView>>)]
    capabilities: Option<Option<Vec<String>>>,
    #[serde(default, deserialize_with = "present")]
    #[schema(value_type = Option<f64>, minimum = 0)]
    spending_cap: Option<Option<serde_json::Number>>,
    #[serde(default, deserialize_with = "present")]
    owner_addresses: Option<Option<BTreeMap<String, String>>>,
}

/// Collects field errors so a response can name every bad field at once.
#[derive(Default)]
struct Checks(BTreeMap<String, String>);

impl Checks {
    fn run<T>(&mut self, field: &str, result: std::result::Result<T, String>) -> Option<T> {
        result.map_err(|e| self.0.insert(field.to_string(), e)).ok()
    }

    fn required<T>(&mut self, field: &str, value: Option<Option<T>>) -> Option<T> {
        match value {
            Some(None) => {
                self.0.insert(field.to_string(), "must not be null".into());
                None
            }
            other => other.flatten(),
        }
    }

    fn finish(self) -> Result<()> {
        if self.0.is_empty() {
            Ok(())
        } else {
            Err(AppError::fields(self.0))
        }
    }
}

fn parse_cap(number: &serde_json::Number) -> std::result::Result<U256, String> {
    match number.as_f64() {
        Some(f) if !f.is_finite() => return Err("must be a finite number".into()),
        // `-0` is zero, not a negative cap.
        Some(0.0) => return Ok(U256::ZERO),
        _ => {}
    }
    amount::from_json_number(number, 18).map_err(|e| e.to_string())
}

/// Create an agent
///
/// Creates an agent with one wallet key (shared by its EVM chains) and answers its wallet addresses and its access
/// token. The token (`agt_...`) is shown in this answer only: the service keeps a hash. When `ADMIN_TOKEN` is set,
/// the operator's bearer token is required (401 otherwise). `chains` defaults to `["ethereum", "base"]`,
/// `capabilities` to `["read"]`, `spending_cap` to 0 (no spending until the owner sets one).
#[utoipa::path(post, path = "/api/agents", tag = "agents", request_body = CreateAgent,
    security((), ("admin_token" = [])),
    responses((status = 201, description = "The agent, its wallets and its access token (shown once)", body = AgentCreatedView),
        (status = 400, body = ErrorBody), (status = 401, description = "ADMIN_TOKEN set and not given", body = ErrorBody),
        (status = 413, body = ErrorBody), (status = 422, body = ErrorBody),
        (status = 503, description = "signer_unavailable: the PKCS#11 token did not make the key (nothing created)", body = ErrorBody)))]
#[tracing::instrument(skip_all)]
async fn create_agent(
    State(state): State<AppState>,
    _: AdminGuard,
    ApiJson(body): ApiJson<CreateAgent>,
) -> Result<(StatusCode, Json<AgentCreatedView>)> {
    let mut checks = Checks::default();
    let name = checks.run("name", agent::validate_name(&body.name));
    let description = match &body.description {
        Some(d) => checks.run("description", agent::validate_description(d)).map(Some),
        None => Some(None),
    };
    let chains = checks.run(
        "chains",
        agent::validate_chains(&body.chains.unwrap_or_else(agent::default_chains)),
    );
    let capabilities = checks.run(
        "capabilities",
        agent::validate_capabilities(&body.capabilities.unwrap_or_default()),
    );
    let cap = match &body.spending_cap {
        Some(n) => checks.run("spending_cap", parse_cap(n)),
        None => Some(U256::ZERO),
    };
    let owners = checks.run(
        "owner_addresses",
        agent::validate_owner_addresses(&body.owner_addresses.unwrap_or_default()),
    );
    checks.finish()?;
    let (Some(name), Some(description), Some(chains), Some(capabilities), Some(cap), Some(owners)) =
        (name, description, chains, capabilities, cap, owners)
    else {
        unreachable!("every None above recorded a field error");
    };

    let id = Uuid::new_v4();
    // A token key pair is generated off the async workers; its failure creates nothing (503 `signer_unavailable`).
    let keys = state.keys.clone();
    let key = tokio::task::spawn_blocking(move || keys.generate(id))
        .await
        .map_err(AppError::internal)?
        .map_err(|e| {
            tracing::error!(agent_id = %id, error = %e, "the agent's key could not be generated");
            AppError::from(crate::transfers::TransferError::SignerUnavailable)
        })?;
    let issued = token::issue();
    let now = state.clock.now();
    let wallet_addresses = chains.iter().map(|c| (c.clone(), key.address)).collect();
    let agent = Agent {
        id,
        name,
        description,
        chains,
        capabilities,
        spending_cap_wei: cap,
        owner_addresses: owners,
        wallet_addresses,
        spent_wei: BTreeMap::new(),
        is_active: true,
        created_at: now,
        updated_at: now,
    };
    let detail = Detail::AgentCreated(detail::AgentCreated {
        name: agent.name.clone(),
        chains: agent.chains.clone(),
        capabilities: capability_names(&agent.capabilities),
        spending_cap: amount::format_units(agent.spending_cap_wei, 18),
        owner_addresses: checksummed(&agent.owner_addresses),
    });
    // Whoever may create agents is the operator: with ADMIN_TOKEN its bearer, without it the open endpoint. The
    // entry is written with the agent and its token, so a creation is never stored without it, nor answered with an
    // error after its token was stored.
    let event = AuditEvent::new(id, Actor::Admin, detail);
    let new = NewAgent {
        agent: agent.clone(),
        key,
        token_hash: issued.hash.clone(),
    };
    state.store.create_agent(&new, &event).await?;
    tracing::info!(agent_id = %id, "agent created");
    let created = AgentCreatedView {
        agent: AgentDetailView::new(&agent, state.auth.is_guarded(&agent)),
        access_token: issued.expose().to_string(),
    };
    Ok((StatusCode::CREATED, Json(created)))
}

#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
struct ListParams {
    /// At least 1 (larger than 500 is cut to 500); default 100.
    #[param(minimum = 1)]
    limit: Option<i64>,
    /// Default 0.
    #[param(minimum = 0)]
    offset: Option<i64>,
}

/// List agents
///
/// Summaries of every agent (no wallet keys, no token), newest first, paged with `limit` (default 100, at most 500)
/// and `offset`. Needs the operator's bearer token when `ADMIN_TOKEN` is set.
#[utoipa::path(get, path = "/api/agents", tag = "agents", params(ListParams), security((), ("admin_token" = [])),
    responses((status = 200, description = "Summaries, newest first", body = Vec<AgentSummaryView>),
        (status = 401, body = ErrorBody), (status = 422, body = ErrorBody)))]
#[tracing::instrument(skip_all)]
async fn list_agents(
    State(state): State<AppState>,
    _: AdminGuard,
    params: std::result::Result<Query<ListParams>, axum::extract::rejection::QueryRejection>,
) -> Result<Json<Vec<AgentSummaryView>>> {
    let Query(params) = params.map_err(|_| AppError::field("limit", "limit and offset must be integers"))?;
    let limit = params.limit.unwrap_or(100);
    let offset = params.offset.unwrap_or(0);
    if limit < 1 {
        return Err(AppError::field("limit", "must be at least 1"));
    }
    if offset < 0 {
        return Err(AppError::field("offset", "must not be negative"));
    }
    let agents = state.store.list_agents(limit.min(500), offset).await?;
    Ok(Json(agents.iter().map(AgentSummaryView::from).collect()))
}

/// Read an agent
///
/// The agent's detail: chains, capabilities, cap, wallet and owner addresses, what it has spent per chain (decimal
/// strings in native units) and whether it is guarded. Works on an inactive (deleted) agent, which shows
/// `is_active: false`. A token of another agent answers 403, an unknown token 401.
#[utoipa::path(get, path = "/api/agents/{id}", tag = "agents", params(("id" = String, Path, format = "uuid")),
    security(("agent_token" = []), ("admin_token" = []), ("owner_token" = [])),
    responses((status = 200, description = "The agent (also when inactive)", body = AgentDetailView),
        (status = 401, body = ErrorBody), (status = 403, body = ErrorBody), (status = 404, body = ErrorBody)))]
#[tracing::instrument(skip_all, fields(agent_id = %caller.agent.id))]
async fn get_agent(AnyCaller(caller): AnyCaller) -> Json<AgentDetailView> {
    Json(AgentDetailView::new(&caller.agent, caller.guarded))
}

/// Update an agent
///
/// A partial update: absent fields stay as they are; each given field is validated as on creation, any other field
/// is refused (422). On a guarded agent the agent's own token may only tighten (lower the cap, remove capabilities
/// or chains, rename, describe): raising the cap, adding a capability or a chain and changing `owner_addresses`
/// need owner authority (403 `owner_required`). Every change is audited with its actor.
#[utoipa::path(put, path = "/api/agents/{id}", tag = "agents", params(("id" = String, Path, format = "uuid")),
    request_body = UpdateAgent, security(("agent_token" = []), ("admin_token" = []), ("owner_token" = [])),
    responses((status = 200, body = AgentDetailView), (status = 400, body = ErrorBody),
        (status = 401, body = ErrorBody),
        (status = 403, description = "forbidden, or owner_required for a loosening of a guarded agent", body = ErrorBody),
        (status = 404, body = ErrorBody), (status = 410, body = ErrorBody), (status = 422, body = ErrorBody)))]
#[tracing::instrument(skip_all, fields(agent_id = %caller.agent.id))]
async fn update_agent(
    State(state): State<AppState>,
    ActiveCaller(caller): ActiveCaller,
    ApiJson(body): ApiJson<UpdateAgent>,
) -> Result<Json<AgentDetailView>> {
    let mut checks = Checks::default();
    let update = AgentUpdate {
        name: checks
            .required("name", body.name)
            .and_then(|n| checks.run("name", agent::validate_name(&n))),
        description: match body.description {
            Some(Some(d)) => checks.run("description", agent::validate_description(&d)).map(Some),
            other => other,
        },
        chains: checks
            .required("chains", body.chains)
            .and_then(|c| checks.run("chains", agent::validate_chains(&c))),
        capabilities: checks
            .required("capabilities", body.capabilities)
            .and_then(|c| checks.run("capabilities", agent::validate_capabilities(&c))),
        spending_cap_wei: checks
            .required("spending_cap", body.spending_cap)
            .and_then(|n| checks.run("spending_cap", parse_cap(&n))),
        owner_addresses: match body.owner_addresses {
            Some(owners) => checks.run(
                "owner_addresses",
                agent::validate_owner_addresses(&owners.unwrap_or_default()),
            ),
            None => None,
        },
    };
    checks.finish()?;
    let agent = &caller.agent;
    if loosens(agent, &update) {
        caller.require_owner_if_guarded()?;
    }
    let wallet = state.store.wallet_key(agent.id).await?.address;
    let actor = caller.actor();
    let record = |before: &Agent, after: &Agent| {
        let detail = changes(before, after);
        let changed = !detail.fields.is_empty();
        changed.then(|| AuditEvent::new(before.id, actor, Detail::AgentUpdated(detail)))
    };
    let updated = state.store.update_agent(agent.id, &update, wallet, &record).await?;
    tracing::info!(agent_id = %agent.id, "agent updated");
    Ok(Json(AgentDetailView::new(&updated, state.auth.is_guarded(&updated))))
}

/// Whether the update loosens the agent's guardrails: a higher cap, a new capability or chain, or any change of
/// its owners (which would hand the guard to someone else, or drop it).
fn loosens(agent: &Agent, update: &AgentUpdate) -> bool {
    let raises_cap = update.spending_cap_wei.is_some_and(|cap| cap > agent.spending_cap_wei);
    let adds_capability = update
        .capabilities
        .as_ref()
        .is_some_and(|caps| caps.iter().any(|c| !agent.capabilities.contains(c)));
    let adds_chain = update
        .chains
        .as_ref()
        .is_some_and(|chains| chains.iter().any(|c| !agent.chains.contains(c)));
    let changes_owners = update
        .owner_addresses
        .as_ref()
        .is_some_and(|owners| *owners != agent.owner_addresses);
    raises_cap || adds_capability || adds_chain || changes_owners
}

/// The audit detail of an update: the names of the fields that changed and their new values (no secrets live in
/// an agent's fields; the description is named only, as it may be long).
fn changes(before: &Agent, after: &Agent) -> detail::AgentUpdated {
    let mut fields = Vec::new();
    let mut to = detail::AgentChanges::default();
    if before.name != after.name {
        fields.push("name".to_string());
        to.name = Some(after.name.clone());
    }
    if before.description != after.description {
        fields.push("description".to_string());
    }
    if before.chains != after.chains {
        fields.push("chains".to_string());
        to.chains = Some(after.chains.clone());
    }
    if before.capabilities != after.capabilities {
        fields.push("capabilities".to_string());
        to.capabilities = Some(capability_names(&after.capabilities));
    }
    if before.spending_cap_wei != after.spending_cap_wei {
        fields.push("spending_cap".to_string());
        let cap = |wei| amount::format_units(wei, 18);
        to.spending_cap = Some(cap(after.spending_cap_wei));
        to.spending_cap_before = Some(cap(before.spending_cap_wei));
    }
    if before.owner_addresses != after.owner_addresses {
        fields.push("owner_addresses".to_string());
        to.owner_addresses = Some(checksummed(&after.owner_addresses));
    }
    detail::AgentUpdated { fields, to }
}

fn capability_names(capabilities: &[Capability]) -> Vec<String> {
    capabilities.iter().map(|c| c.as_str().to_string()).collect()
}

fn checksummed(map: &BTreeMap<String, alloy::primitives::Address>) -> BTreeMap<String, String> {
    map.iter().map(|(c, a)| (c.clone(), a.to_checksum(None))).collect()
}

/// Delete an agent (soft)
///
/// Marks the agent inactive: nothing is erased, its agent-scoped calls answer 410 from then on, and its streams
/// end. A second delete answers 410. Owner authority can reactivate it.
#[utoipa::path(delete, path = "/api/agents/{id}", tag = "agents", params(("id" = String, Path, format = "uuid")),
    security(("agent_token" = []), ("admin_token" = []), ("owner_token" = [])),
    responses((status = 204, description = "Soft-deleted (is_active false)"), (status = 401, body = ErrorBody),
        (status = 403, body = ErrorBody), (status = 404, body = ErrorBody), (status = 410, body = ErrorBody)))]
#[tracing::instrument(skip_all, fields(agent_id = %caller.agent.id))]
async fn delete_agent(State(state): State<AppState>, ActiveCaller(caller): ActiveCaller) -> Result<StatusCode> {
    let agent = &caller.agent;
    let event = AuditEvent::new(agent.id, caller.actor(), Detail::AgentDeleted(detail::Nothing {}));
    if !state.store.deactivate_agent(agent.id, &event).await? {
        return Err(AppError::AgentInactive);
    }
    tracing::info!(agent_id = %agent.id, "agent deactivated");
    Ok(StatusCode::NO_CONTENT)
}

#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
struct ExportKey {
    #[schema(min_length = 1)]
    chain: String,
    #[serde(default)]
    confirm: bool,
}

/// Export a wallet key
///
/// Answers the private key of the agent's wallet on one chain, with `confirm: true`. Audited. Needs owner authority
/// on a guarded agent (403 `owner_required`), and with owner authority it also works on an inactive agent so that
/// its funds are never stranded. 403 `export_disabled` when the server sets `ALLOW_KEY_EXPORT=false`.
#[utoipa::path(post, path = "/api/agents/{id}/export-key", tag = "agents", params(("id" = String, Path, format = "uuid")),
    request_body = ExportKey, security(("agent_token" = []), ("admin_token" = []), ("owner_token" = [])),
    responses((status = 200, description = "The private key (audited)", body = ExportedKeyView),
        (status = 401, body = ErrorBody),
        (status = 403, description = "forbidden, export_disabled, key_not_exportable (a key in a PKCS#11 token), or owner_required on a guarded agent", body = ErrorBody),
        (status = 404, body = ErrorBody), (status = 410, description = "inactive, without owner authority", body = ErrorBody),
        (status = 422, body = ErrorBody)))]
#[tracing::instrument(skip_all, fields(agent_id = %caller.agent.id))]
async fn export_key(
    State(state): State<AppState>,
    AnyCaller(caller): AnyCaller,
    body: Result<ApiJson<ExportKey>>,
) -> Result<Json<ExportedKeyView>> {
    // The owner may take the key of a deleted agent, so its funds are never stranded; its token may not.
    if !caller.agent.is_active && caller.owner.is_none() {
        return Err(AuthError::AgentInactive.into());
    }
    caller.require_owner_if_guarded()?;
    let ApiJson(body) = body?;
    let agent = &caller.agent;
    if !state.config.security.allow_key_export {
        return Err(AppError::Denied {
            code: "export_disabled",
            message: "key export is disabled on this server".into(),
        });
    }
    let key = state.store.wallet_key(agent.id).await?;
    if key.scheme == crate::vault::KeyScheme::Pkcs11 {
        return Err(AppError::Denied {
            code: "key_not_exportable",
            message: "this agent's key is in a hardware security module and cannot be exported; its owner may sweep \
                      its funds instead"
                .into(),
        });
    }
    let Some(address) = agent.wallet_addresses.get(&body.chain).copied() else {
        return Err(AppError::field("chain", "must be one of the agent's chains"));
    };
    if !body.confirm {
        return Err(AppError::field("confirm", "must be true to export a private key"));
    }
    let signer = state.vault.open(agent.id, &key).map_err(AppError::internal)?;
    let secret = Zeroizing::new(format!("0x{}", alloy::hex::encode(signer.credential().to_bytes())));
    let detail = Detail::KeyExported(detail::KeyExported {
        chain: body.chain.clone(),
        address: address.to_checksum(None),
    });
    // An entry that records no change of its own: appended alone, before the key is answered.
    state
        .store
        .insert_audit(&AuditEvent::new(agent.id, caller.actor(), detail))
        .await?;
    tracing::warn!(agent_id = %agent.id, chain = %body.chain, "private key exported");
    Ok(Json(ExportedKeyView {
        chain: body.chain,
        address: address.to_checksum(None),
        private_key: secret,
    }))
}
