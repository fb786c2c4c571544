//! `GET/PUT /api/agents/{id}/policy` (docs/api.md §11): read the policy; replace it whole, validated, with owner
//! authority on a guarded agent, audited.

use std::collections::BTreeMap;

use alloy::primitives::Address;
use axum::Json;
use axum::extract::State;
use serde::Deserialize;
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::auth::ActiveCaller;
use super::error::{AppError, Result};
use super::json::ApiJson;
use super::views::{BudgetView, ErrorBody, PolicyView, SponsorshipView};
use crate::domain::amount::parse_units;
use crate::domain::asset;
use crate::domain::audit::Detail;
use crate::domain::audit::detail::PolicyUpdated;
use crate::domain::decision::Window;
use crate::domain::policy::{AssetLimits, DEFAULT_APPROVAL_TTL_SECS, Policy};
use crate::state::AppState;
use crate::store::AuditEvent;

/// The longest an approval may wait (a week): past that a held reservation would block the cap for no one.
const MAX_APPROVAL_TTL_SECS: u64 = 7 * 24 * 3600;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(get_policy, put_policy))
        .routes(routes!(get_budget))
}

/// Limits on one asset, decimal strings in whole units.
#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
struct AssetLimitsBody {
    per_transfer: Option<String>,
    per_day: Option<String>,
    per_week: Option<String>,
    approval_above: Option<String>,
}

/// The whole policy; absent fields take their defaults.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
struct PolicyBody {
    #[serde(default)]
    limits: BTreeMap<String, AssetLimitsBody>,
    allowed_recipients: Option<Vec<String>>,
    #[serde(default)]
    blocked_recipients: Vec<String>,
    #[serde(default)]
    approve_new_recipients: bool,
    #[schema(minimum = 1, maximum = 604800)]
    approval_ttl_secs: Option<u64>,
    allowed_hosts: Option<Vec<String>>,
    /// Contract-call rules (§18): `default`, ordered `rules`, `abis`, `allow_unlimited_approvals`.
    #[schema(value_type = Option<Object>)]
    calls: Option<serde_json::Value>,
}

/// Read the spending policy
///
/// Per-asset limits (`per_transfer`, `per_day`, `per_week`, `approval_above`, decimal strings in whole units),
/// recipient lists, approval rules and allowed hosts. The default allows everything under the spending cap.
#[utoipa::path(get, path = "/api/agents/{id}/policy", tag = "agents", params(("id" = String, Path, format = "uuid")),
    security(("agent_token" = []), ("admin_token" = []), ("owner_token" = [])),
    responses((status = 200, body = PolicyView), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody),
        (status = 404, body = ErrorBody), (status = 410, body = ErrorBody)))]
#[tracing::instrument(skip_all, fields(agent_id = %caller.agent.id))]
async fn get_policy(State(state): State<AppState>, ActiveCaller(caller): ActiveCaller) -> Result<Json<PolicyView>> {
    let policy = state.store.get_policy(caller.agent.id).await?;
    Ok(Json(PolicyView::new(&policy, state.chains.tokens())))
}

/// Read what the limits have counted and have left
///
/// Per asset whose limits have `per_day` or `per_week`, and per chain for the spending cap: `limit`, `counted`
/// (transfers mined, pending, signed and held for approval, and what calls and signatures counted, allowances
/// included: the figure the next decision counts) and `left` (what a transfer may still take), decimal strings in
/// whole units of the asset. Read as the reserving transaction reads them: a transfer of `left` fits the window,
/// one unit more does not (other rules, the cap and the balance still apply). Beside them, `delegations`: each limit
/// of an active on-chain delegation (§21) with what the chain leaves (`available`) and what a send through it may
/// take now (`spendable`, the least of that and the asset's per-transfer limit and windows, `bound_by` naming which).
/// And `sponsorships`: the operator's gas sponsorship on each chain, as `GET …/sponsorship` shows it (§22).
#[utoipa::path(get, path = "/api/agents/{id}/budget", tag = "agents", params(("id" = String, Path, format = "uuid")),
    security(("agent_token" = []), ("admin_token" = []), ("owner_token" = [])),
    responses((status = 200, body = BudgetView), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody),
        (status = 404, body = ErrorBody), (status = 410, body = ErrorBody)))]
#[tracing::instrument(skip_all, fields(agent_id = %caller.agent.id))]
async fn get_budget(State(state): State<AppState>, ActiveCaller(caller): ActiveCaller) -> Result<Json<BudgetView>> {
    let (policy, windows) = state.store.budget_windows(caller.agent.id).await?;
    let spent = state.store.spent_by_chain(caller.agent.id).await?;
    let caps = caller.agent.chains.iter().map(|c| {
        let counted = spent.get(c).copied().unwrap_or_default();
        (c.clone(), Window::of(caller.agent.spending_cap_wei, counted))
    });
    // Each active delegation's limits beside the windows (§21; read at the latest block, as GET …/delegations does).
    let delegations = state.delegations.list(caller.agent.id).await?;
    let tokens = state.chains.tokens();
    let mut budget =
        BudgetView::new(&policy, &windows, caps, tokens).with_delegations(&delegations, &policy, &windows, tokens);
    budget.sponsorships = SponsorshipView::list(&state.store.sponsorships(caller.agent.id).await?);
    Ok(Json(budget))
}

/// Replace the spending policy
///
/// Replaces the whole policy. Needs owner authority on a guarded agent (403 `owner_required`). Asset keys are
/// `<chain>:<SYMBOL>` of the registry; approval rules on an unguarded agent are refused (422: nobody could
/// approve). Audited.
#[utoipa::path(put, path = "/api/agents/{id}/policy", tag = "agents", params(("id" = String, Path, format = "uuid")),
    request_body = PolicyBody, security(("agent_token" = []), ("admin_token" = []), ("owner_token" = [])),
    responses((status = 200, body = PolicyView), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody),
        (status = 403, body = ErrorBody), (status = 404, body = ErrorBody), (status = 410, body = ErrorBody),
        (status = 422, body = ErrorBody)))]
#[tracing::instrument(skip_all, fields(agent_id = %caller.agent.id))]
async fn put_policy(
    State(state): State<AppState>,
    ActiveCaller(caller): ActiveCaller,
    ApiJson(body): ApiJson<PolicyBody>,
) -> Result<Json<PolicyView>> {
    caller.require_owner_if_guarded()?;
    let policy = validate(body, state.chains.tokens())?;
    if policy.has_approval_rules() && !caller.guarded {
        return Err(AppError::field(
            "approve_new_recipients",
            "approval rules need an owner to approve: set owner_addresses (or ADMIN_TOKEN) first",
        ));
    }
    let view = PolicyView::new(&policy, state.chains.tokens());
    let policy_json = serde_json::to_value(&view).map_err(AppError::internal)?;
    let detail = Detail::PolicyUpdated(PolicyUpdated { policy: policy_json });
    let event = AuditEvent::new(caller.agent.id, caller.actor(), detail);
    state.store.put_policy(caller.agent.id, &policy, &event).await?;
    Ok(Json(view))
}

/// Every field checked; all problems reported at once.
fn validate(body: PolicyBody, assets: &asset::Registry) -> Result<Policy> {
    let mut errors = BTreeMap::new();
    let mut limits = BTreeMap::new();
    for (key, raw) in body.limits {
        let Some((asset_key, decimals)) = assets.limit_key(&key) else {
            errors.insert(
                format!("limits.{key}"),
                "unknown asset (expected <chain>:<SYMBOL>, e.g. base:ETH, or <chain>:<token address>)".into(),
            );
            continue;
        };
        let mut amount = |name: &str, text: Option<String>| {
            let parsed = text.map(|t| parse_units(&t, decimals)).transpose();
            parsed.unwrap_or_else(|e| {
                errors.insert(format!("limits.{key}.{name}"), format!("amount {e}"));
                None
            })
        };
        let parsed = AssetLimits {
            per_transfer: amount("per_transfer", raw.per_transfer),
            per_day: amount("per_day", raw.per_day),
            per_week: amount("per_week", raw.per_week),
            approval_above: amount("approval_above", raw.approval_above),
        };
        limits.insert(asset_key, parsed);
    }
    let mut addresses = |field: &str, list: Vec<String>| -> Vec<Address> {
        let mut out = Vec::new();
        for (i, text) in list.iter().enumerate() {
            match text.trim().parse::<Address>() {
                Ok(address) => out.push(address),
                Err(_) => {
                    errors.insert(format!("{field}[{i}]"), "must be a 0x address of 20 bytes".into());
                }
            }
        }
        out
    };
    let allowed_recipients = body.allowed_recipients.map(|l| addresses("allowed_recipients", l));
    let blocked_recipients = addresses("blocked_recipients", body.blocked_recipients);
    let ttl = body.approval_ttl_secs.unwrap_or(DEFAULT_APPROVAL_TTL_SECS);
    if ttl == 0 || ttl > MAX_APPROVAL_TTL_SECS {
        errors.insert(
            "approval_ttl_secs".into(),
            format!("must be between 1 and {MAX_APPROVAL_TTL_SECS}"),
        );
    }
    if let Some(hosts) = &body.allowed_hosts {
        for (i, host) in hosts.iter().enumerate() {
            if !valid_host(host) {
                errors.insert(format!("allowed_hosts[{i}]"), "must be a host name or host:port".into());
            }
        }
    }
    let calls = match body.calls {
        None | Some(serde_json::Value::Null) => None,
        Some(raw) => match crate::domain::call::CallsPolicy::try_from(raw) {
            Ok(calls) => Some(Box::new(calls)),
            Err(invalid) => {
                for e in invalid.0 {
                    let path = match e.path.is_empty() {
                        true => "calls".to_string(),
                        false => format!("calls.{}", e.path),
                    };
                    errors.insert(path, e.problem.to_string());
                }
                None
            }
        },
    };
    if !errors.is_empty() {
        return Err(AppError::fields(errors));
    }
    Ok(Policy {
        limits,
        allowed_recipients,
        blocked_recipients,
        approve_new_recipients: body.approve_new_recipients,
        approval_ttl_secs: ttl,
        allowed_hosts: body
            .allowed_hosts
            .map(|h| h.into_iter().map(|h| h.to_ascii_lowercase()).collect()),
        calls,
    })
}

/// `host` or `host:port`: letters, digits, dots and dashes, an optional port in range.
fn valid_host(text: &str) -> bool {
    let (host, port) = match text.rsplit_once(':') {
        Some((host, port)) => (host, Some(port)),
        None => (text, None),
    };
    let host_ok = !host.is_empty()
        && host.len() <= 253
        && host.chars().all(|c| c.is_ascii_alphanumeric() || c == '.' || c == '-');
    host_ok && port.is_none_or(|p| p.parse::<u16>().is_ok_and(|p| p > 0))
}
