//! The agent's wallets: balances on every chain (concurrently, per-chain errors) and funding instructions.

use alloy::primitives::U256;
use axum::Json;
use axum::body::Bytes;
use axum::extract::State;
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use futures::future::join_all;
use serde::Deserialize;
use serde_json::Value;

use super::auth::ActiveCaller;
use super::error::{AppError, Result};
use super::json::parse_optional_body;
use super::views::{
    BalanceEntryView, BalanceView, BalancesView, DepositView, ErrorBody, FailedBalanceView, FailureView, FundingView,
};
use crate::auth::Caller;
use crate::domain::amount::parse_units;
use crate::domain::chain as registry;
use crate::state::AppState;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(get_balances))
        .routes(routes!(fund_agent))
}

#[utoipa::path(get, path = "/api/agents/{id}/balances", tag = "wallets", params(("id" = String, Path, format = "uuid")),
    security(("agent_token" = []), ("admin_token" = []), ("owner_token" = [])),
    responses((status = 200, description = "Per chain a balance or an error entry", body = BalancesView), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody), (status = 404, body = ErrorBody), (status = 410, body = ErrorBody)))]
#[tracing::instrument(skip_all, fields(agent_id = %agent.id))]
async fn get_balances(
    State(state): State<AppState>,
    ActiveCaller(Caller { agent, .. }): ActiveCaller,
) -> Json<BalancesView> {
    let lookups = agent.wallet_addresses.iter().map(|(name, address)| {
        let state = &state;
        async move {
            let result = match (registry::find(name), state.chains.get(name)) {
                (Some(chain), Ok(client)) => client
                    .balance(*address)
                    .await
                    .map(|wei| BalanceView::new(chain, *address, wei)),
                (_, Err(e)) => Err(e),
                (None, Ok(_)) => unreachable!("configured chains are registry chains"),
            };
            let entry = match result {
                Ok(balance) => BalanceEntryView::Balance(balance),
                Err(e) => BalanceEntryView::Failed(FailedBalanceView {
                    address: address.to_checksum(None),
                    error: FailureView {
                        code: e.code().to_string(),
                        message: e.to_string(),
                    },
                }),
            };
            (name.clone(), entry)
        }
    });
    Json(BalancesView {
        agent_id: agent.id,
        balances: join_all(lookups).await.into_iter().collect(),
    })
}

/// Optional body: one chain, and an amount (decimal string in native units) for the payment URI.
#[derive(Deserialize, Default, ToSchema)]
#[serde(deny_unknown_fields)]
struct FundRequest {
    chain: Option<String>,
    #[schema(value_type = Option<String>)]
    amount: Option<Value>,
}

#[utoipa::path(post, path = "/api/agents/{id}/fund", tag = "wallets", params(("id" = String, Path, format = "uuid")),
    request_body(content = Option<FundRequest>), security(("agent_token" = []), ("admin_token" = []), ("owner_token" = [])),
    responses((status = 200, description = "Deposit addresses with EIP-681 URIs", body = FundingView), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody), (status = 404, body = ErrorBody), (status = 410, body = ErrorBody),
        (status = 422, body = ErrorBody)))]
#[tracing::instrument(skip_all, fields(agent_id = %agent.id))]
async fn fund_agent(
    State(_): State<AppState>,
    ActiveCaller(Caller { agent, .. }): ActiveCaller,
    body: Bytes,
) -> Result<Json<FundingView>> {
    let request: FundRequest = parse_optional_body(&body)?;
    let chains: Vec<&String> = match &request.chain {
        Some(chain) if agent.has_chain(chain) => vec![chain],
        Some(_) => return Err(AppError::field("chain", "must be one of the agent's chains")),
        None => agent.chains.iter().collect(),
    };
    let amount = match &request.amount {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) => Some(s.trim().to_string()),
        Some(Value::Number(n)) => Some(n.to_string()),
        Some(_) => return Err(AppError::field("amount", "must be a decimal string such as \"0.05\"")),
    };
    let mut deposits = Vec::new();
    for name in chains {
        let chain = registry::find(name).ok_or_else(|| AppError::field("chain", "unknown chain"))?;
        let address = agent
            .wallet_addresses
            .get(name)
            .ok_or_else(|| AppError::field("chain", "the agent has no wallet there"))?;
        let address = address.to_checksum(None);
        let wei = match &amount {
            Some(a) => Some(parse_units(a, chain.decimals).map_err(|e| AppError::field("amount", e.to_string()))?),
            None => None,
        };
        if wei == Some(U256::ZERO) {
            return Err(AppError::field("amount", "must be greater than zero"));
        }
        let mut payment_uri = format!("ethereum:{address}@{}", chain.chain_id);
        if let Some(wei) = wei {
            payment_uri.push_str(&format!("?value={wei}"));
        }
        deposits.push(DepositView {
            chain: chain.name,
            chain_id: chain.chain_id,
            explorer_url: chain.address_url(&address),
            address,
            symbol: chain.native_symbol,
            amount: amount.clone(),
            amount_wei: wei.map(|w| w.to_string()),
            payment_uri,
        });
    }
    let instructions = format!(
        "Send native tokens to the address of the chain you choose (the same address on every EVM chain of this agent). \
         Use the payment URI with a wallet that supports EIP-681 or scan it as a QR code. Only send on the chain named: {}.",
        agent.chains.join(", ")
    );
    Ok(Json(FundingView {
        agent_id: agent.id,
        deposits,
        instructions,
    }))
}
