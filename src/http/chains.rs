//! The chain registry endpoint and the health check.

use axum::Json;
use axum::extract::State;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::error::Result;
use super::views::{ChainDelegationsView, ChainSponsorshipView, ChainView, ErrorBody, HealthView};
use crate::domain::chain::CHAINS;
use crate::state::AppState;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(list_chains))
        .routes(routes!(health))
}

/// List the chain registry
///
/// Every registry chain with its chain id, native symbol, explorer, whether an RPC URL is configured, its tokens,
/// its delegation framework (§21: the `DelegationManager` and the enforcers, `null` without a manager), and the
/// contracts the deployment names for its clients (`CONTRACTS_<CHAIN>`). Needs no token.
#[utoipa::path(get, path = "/api/chains", tag = "chains", responses((status = 200, description = "The chain registry", body = Vec<ChainView>)))]
async fn list_chains(State(state): State<AppState>) -> Json<Vec<ChainView>> {
    let mut views = chain_views(&state);
    for view in &mut views {
        let (Some(sponsor), Ok(client)) = (state.sponsors.chain(view.name), state.chains.get(view.name)) else {
            continue;
        };
        match crate::sponsor::status::read(client, sponsor).await {
            Ok(status) => view.sponsorship = Some(ChainSponsorshipView::new(sponsor, &status)),
            Err(e) => tracing::warn!(chain = view.name, error = %e, "the sponsorship's parts could not be read"),
        }
    }
    Json(views)
}

/// The registry's chains as configured, without what is read on chain.
fn chain_views(state: &AppState) -> Vec<ChainView> {
    let chains = &state.config.chains;
    let configured = |name: &str| chains.rpc_urls.iter().any(|(n, _)| n == name);
    let delegations = |name: &str| {
        let (_, manager) = chains.delegation_managers.iter().find(|(n, _)| n == name)?;
        let enforcers = chains
            .delegation_enforcers
            .iter()
            .find(|(n, _)| n == name)
            .map_or(&[][..], |(_, e)| e.as_slice());
        Some(ChainDelegationsView::new(*manager, enforcers))
    };
    CHAINS
        .iter()
        .map(|c| {
            let local = state.config.chains.is_local_node(c.name);
            let contracts = chains
                .contracts
                .iter()
                .find(|(n, _)| n == c.name)
                .map_or(&[][..], |(_, named)| named.as_slice());
            ChainView::new(
                c,
                configured(c.name),
                local,
                state.chains.tokens(),
                delegations(c.name),
                contracts,
            )
        })
        .collect()
}

/// Health check
///
/// Answers 200 once the server accepts requests; never waits for a chain node. `database_pool` says how the
/// instance's database connections are doing, and whether they ran out lately (docs/operations.md).
#[utoipa::path(get, path = "/health", tag = "operations", responses((status = 200, body = HealthView), (status = 500, body = ErrorBody)))]
async fn health(State(state): State<AppState>) -> Result<Json<HealthView>> {
    state.store.ping().await?;
    Ok(Json(HealthView {
        status: "ok",
        version: env!("CARGO_PKG_VERSION"),
        database: "ok",
        database_pool: state.store.connections().into(),
    }))
}
