//! The operator's gas sponsorship of an agent (§22): `PUT …/sponsorship` sets a chain's daily budget (the admin
//! token only: an owner must not make the operator pay), `GET …/sponsorship` shows each chain's with what it counted
//! over the last 24 hours (agent token or owner authority).

use axum::Json;
use axum::extract::{FromRef, FromRequestParts, Path, State};
use axum::http::request::Parts;
use serde::Deserialize;
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::auth::{ActiveCaller, OWNER_TOKEN_HEADER, TOKEN_HEADER, parse_id};
use super::error::{AppError, Result};
use super::json::ApiJson;
use super::views::{ErrorBody, SponsorshipView, SponsorshipsView};
use crate::auth::{Actor, Authenticator};
use crate::domain::agent::Agent;
use crate::domain::amount::{format_units, parse_units};
use crate::domain::audit::Detail;
use crate::domain::audit::detail::SponsorshipSet;
use crate::domain::chain;
use crate::state::AppState;
use crate::store::AuditEvent;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(get_sponsorship, put_sponsorship))
}

/// `PUT …/sponsorship`: one chain's daily gas budget.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
struct SetSponsorship {
    /// One of the agent's chains, sponsorable on this service.
    chain: String,
    /// A decimal string in whole native units of the chain (`"0.05"`); `"0"` ends the sponsorship.
    per_day: String,
}

/// An active agent named in the path, asked for by the operator: the admin bearer token (any caller where no
/// `ADMIN_TOKEN` is set, as for `POST /api/agents`). The agent token or an owner session without it is refused
/// (403) before the agent is looked up; a missing or wrong bearer alone answers 401 as `POST /api/agents` does.
struct OperatorOf(Agent);

impl FromRequestParts<AppState> for OperatorOf {
    type Rejection = AppError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, Self::Rejection> {
        operator(parts, &Authenticator::from_ref(state))?;
        let id = match Path::<String>::from_request_parts(parts, state).await {
            Ok(Path(id)) => parse_id(&id),
            Err(_) => None,
        };
        let agent = state.store.get_agent(id.ok_or(AppError::AgentNotFound)?).await?;
        if !agent.is_active {
            return Err(AppError::AgentInactive);
        }
        Ok(OperatorOf(agent))
    }
}

/// Whether the request is the operator's: a valid admin bearer passes whatever else it carries; without one, any
/// other credential is an owner or the agent asking the operator to pay (403), and nothing at all is judged as
/// `POST /api/agents` judges it (open without `ADMIN_TOKEN`, else 401).
fn operator(parts: &Parts, auth: &Authenticator) -> Result<()> {
    let header = |name: &str| {
        parts
            .headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::trim)
            .filter(|v| !v.is_empty())
    };
    let bearer = header(axum::http::header::AUTHORIZATION.as_str()).and_then(|v| v.strip_prefix("Bearer "));
    if auth.has_admin_token() && auth.admin(bearer).is_ok() {
        return Ok(());
    }
    if header(TOKEN_HEADER).is_some() || header(OWNER_TOKEN_HEADER).is_some() {
        return Err(not_the_operator());
    }
    Ok(auth.admin(bearer)?)
}

/// 403 `forbidden`: the agent or its owner asked to set what the operator pays.
pub(crate) fn not_the_operator() -> AppError {
    AppError::Denied {
        code: "forbidden",
        message: "only the operator (Authorization: Bearer <ADMIN_TOKEN>) sets a sponsorship: neither the agent nor \
                  its owner may make the operator pay"
            .into(),
    }
}

/// 422 `sponsorship_unavailable`: `chain` is not the agent's, or this service does not sponsor gas there.
pub(crate) fn unavailable(chain: &str) -> AppError {
    AppError::Unprocessable {
        code: "sponsorship_unavailable",
        message: format!("{chain} is not one of the agent's chains, or this service does not sponsor gas there"),
    }
}

/// Read the agent's gas sponsorships
///
/// Every chain the operator set a sponsorship on (an ended one shows `per_day` `"0"`): its daily budget, what it
/// `counted` over the last 24 hours (each user operation's maximum cost from its signature, its actual gas cost
/// once mined; dropped ones count nothing) and what is `left`, decimal strings in whole native units.
#[utoipa::path(get, path = "/api/agents/{id}/sponsorship", tag = "agents",
    params(("id" = String, Path, format = "uuid")),
    security(("agent_token" = []), ("admin_token" = []), ("owner_token" = [])),
    responses((status = 200, body = SponsorshipsView, description = "The agent's sponsorships"),
        (status = 401, body = ErrorBody), (status = 403, body = ErrorBody), (status = 404, body = ErrorBody),
        (status = 410, body = ErrorBody)))]
#[tracing::instrument(skip_all, fields(agent_id = %caller.agent.id))]
async fn get_sponsorship(
    State(state): State<AppState>,
    ActiveCaller(caller): ActiveCaller,
) -> Result<Json<SponsorshipsView>> {
    let all = state.store.sponsorships(caller.agent.id).await?;
    Ok(Json(SponsorshipsView {
        sponsorships: SponsorshipView::list(&all),
    }))
}

/// Set the agent's gas sponsorship on a chain
///
/// The operator only (the admin token; open, like `POST /api/agents`, only where no `ADMIN_TOKEN` is set): the
/// agent token or an owner session answers 403 `forbidden`. `per_day` in whole native units; `"0"` ends it. What
/// the sponsorship `counted` is never reset, and `left` is never below 0. A chain of the registry that is not the
/// agent's, or not sponsorable here, answers 422 `sponsorship_unavailable`. Audited (`sponsorship_set`).
#[utoipa::path(put, path = "/api/agents/{id}/sponsorship", tag = "agents",
    params(("id" = String, Path, format = "uuid")), request_body = SetSponsorship,
    security((), ("admin_token" = [])),
    responses((status = 200, body = SponsorshipView, description = "The sponsorship as set"),
        (status = 401, body = ErrorBody), (status = 403, body = ErrorBody), (status = 404, body = ErrorBody),
        (status = 410, body = ErrorBody), (status = 422, body = ErrorBody)))]
#[tracing::instrument(skip_all, fields(agent_id = %agent.id))]
async fn put_sponsorship(
    State(state): State<AppState>,
    OperatorOf(agent): OperatorOf,
    ApiJson(body): ApiJson<SetSponsorship>,
) -> Result<Json<SponsorshipView>> {
    let chain = chain::find(body.chain.trim()).ok_or_else(|| AppError::field("chain", "must be a known chain"))?;
    let per_day = parse_units(&body.per_day, chain.decimals).map_err(|e| {
        AppError::field(
            "per_day",
            format!("{e}: a decimal string in whole native units, e.g. \"0.05\""),
        )
    })?;
    if !agent.has_chain(chain.name) || !state.sponsors.is_sponsorable(chain.name) {
        return Err(unavailable(chain.name));
    }
    let detail = Detail::SponsorshipSet(SponsorshipSet {
        chain: chain.name.to_string(),
        per_day: format_units(per_day, chain.decimals),
    });
    let audit = AuditEvent::new(agent.id, Actor::Admin, detail);
    let set = state
        .store
        .set_sponsorship(agent.id, chain.name, per_day, &audit)
        .await?;
    Ok(Json(SponsorshipView::new(&set)))
}
