//! Agents: create, list, detail, partial update, soft delete and key export.

use std::collections::BTreeMap;

use alloy::primitives::U256;
use axum::Json;
use axum::extract::{ConnectInfo, Query, State};
use axum::http::StatusCode;
use serde::{Deserialize, Deserializer};
use serde_json::json;
use utoipa::{IntoParams, ToSchema};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;
use uuid::Uuid;
use zeroize::Zeroizing;

use super::auth::{ActiveAgent, AdminGuard, AnyAgent};
use super::error::{AppError, Result};
use super::json::ApiJson;
use super::views::{AgentCreatedView, AgentDetailView, AgentSummaryView, CapabilityView, ErrorBody, ExportedKeyView};
use crate::domain::agent::{self, Agent};
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
    /// 1 to 100 characters after trimming.
    #[schema(min_length = 1, max_length = 100)]
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

#[utoipa::path(post, path = "/api/agents", tag = "agents", request_body = CreateAgent,
    security((), ("admin_token" = [])),
    responses((status = 201, description = "The agent, its wallets and its access token (shown once)", body = AgentCreatedView),
        (status = 400, body = ErrorBody), (status = 401, description = "ADMIN_TOKEN set and not given", body = ErrorBody),
        (status = 413, body = ErrorBody), (status = 422, body = ErrorBody)))]
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
    let key = state.vault.generate(id);
    let issued = token::issue();
    let now = crate::domain::now();
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
    state
        .store
        .create_agent(&NewAgent {
            agent: agent.clone(),
            key,
            token_hash: issued.hash.clone(),
        })
        .await?;
    tracing::info!(agent_id = %id, "agent created");
    let created = AgentCreatedView {
        agent: AgentDetailView::from(&agent),
        access_token: issued.expose().to_string(),
    };
    Ok((StatusCode::CREATED, Json(created)))
}

#[derive(Deserialize, IntoParams)]
struct ListParams {
    /// 1..500, default 100.
    limit: Option<i64>,
    /// Default 0.
    offset: Option<i64>,
}

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

#[utoipa::path(get, path = "/api/agents/{id}", tag = "agents", params(("id" = String, Path, format = "uuid")),
    security(("agent_token" = [])),
    responses((status = 200, description = "The agent (also when inactive)", body = AgentDetailView),
        (status = 401, body = ErrorBody), (status = 403, body = ErrorBody), (status = 404, body = ErrorBody)))]
#[tracing::instrument(skip_all, fields(agent_id = %agent.id))]
async fn get_agent(AnyAgent(agent): AnyAgent) -> Json<AgentDetailView> {
    Json(AgentDetailView::from(&agent))
}

#[utoipa::path(put, path = "/api/agents/{id}", tag = "agents", params(("id" = String, Path, format = "uuid")),
    request_body = UpdateAgent, security(("agent_token" = [])),
    responses((status = 200, body = AgentDetailView), (status = 400, body = ErrorBody),
        (status = 401, body = ErrorBody), (status = 403, body = ErrorBody), (status = 404, body = ErrorBody),
        (status = 410, body = ErrorBody), (status = 422, body = ErrorBody)))]
#[tracing::instrument(skip_all, fields(agent_id = %agent.id))]
async fn update_agent(
    State(state): State<AppState>,
    ActiveAgent(agent): ActiveAgent,
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
    let wallet = state.store.wallet_key(agent.id).await?.address;
    let updated = state.store.update_agent(agent.id, &update, wallet).await?;
    tracing::info!(agent_id = %agent.id, "agent updated");
    Ok(Json(AgentDetailView::from(&updated)))
}

#[utoipa::path(delete, path = "/api/agents/{id}", tag = "agents", params(("id" = String, Path, format = "uuid")),
    security(("agent_token" = [])),
    responses((status = 204, description = "Soft-deleted (is_active false)"), (status = 401, body = ErrorBody),
        (status = 403, body = ErrorBody), (status = 404, body = ErrorBody), (status = 410, body = ErrorBody)))]
#[tracing::instrument(skip_all, fields(agent_id = %agent.id))]
async fn delete_agent(State(state): State<AppState>, ActiveAgent(agent): ActiveAgent) -> Result<StatusCode> {
    if !state.store.deactivate_agent(agent.id).await? {
        return Err(AppError::AgentInactive);
    }
    tracing::info!(agent_id = %agent.id, "agent deactivated");
    Ok(StatusCode::NO_CONTENT)
}

#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
struct ExportKey {
    chain: String,
    #[serde(default)]
    confirm: bool,
}

#[utoipa::path(post, path = "/api/agents/{id}/export-key", tag = "agents", params(("id" = String, Path, format = "uuid")),
    request_body = ExportKey, security(("agent_token" = [])),
    responses((status = 200, description = "The private key (audited)", body = ExportedKeyView),
        (status = 401, body = ErrorBody), (status = 403, description = "forbidden or export_disabled", body = ErrorBody),
        (status = 404, body = ErrorBody), (status = 410, body = ErrorBody), (status = 422, body = ErrorBody)))]
#[tracing::instrument(skip_all, fields(agent_id = %agent.id))]
async fn export_key(
    State(state): State<AppState>,
    ConnectInfo(client): ConnectInfo<std::net::SocketAddr>,
    ActiveAgent(agent): ActiveAgent,
    ApiJson(body): ApiJson<ExportKey>,
) -> Result<Json<ExportedKeyView>> {
    if !state.config.security.allow_key_export {
        return Err(AppError::Denied {
            code: "export_disabled",
            message: "key export is disabled on this server".into(),
        });
    }
    let Some(address) = agent.wallet_addresses.get(&body.chain).copied() else {
        return Err(AppError::field("chain", "must be one of the agent's chains"));
    };
    if !body.confirm {
        return Err(AppError::field("confirm", "must be true to export a private key"));
    }
    let signer = state
        .vault
        .open(agent.id, &state.store.wallet_key(agent.id).await?)
        .map_err(AppError::internal)?;
    let secret = Zeroizing::new(format!("0x{}", alloy::hex::encode(signer.credential().to_bytes())));
    let event = AuditEvent {
        agent_id: agent.id,
        action: "key_exported",
        actor: format!("access_token@{}", client.ip()),
        detail: json!({ "chain": body.chain, "address": address.to_checksum(None) }),
    };
    state.store.insert_audit(&event).await?;
    tracing::warn!(agent_id = %agent.id, chain = %body.chain, "private key exported");
    Ok(Json(ExportedKeyView {
        chain: body.chain,
        address: address.to_checksum(None),
        private_key: secret,
    }))
}
