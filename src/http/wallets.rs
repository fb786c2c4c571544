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
use crate::chain::Node;
use crate::domain::amount::parse_units;
use crate::domain::asset::Asset;
use crate::domain::chain as registry;
use crate::state::AppState;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(get_balances))
        .routes(routes!(fund_agent))
}

/// Read balances
///
/// The agent's native and token balances on each of its chains, read concurrently with a timeout. A chain (or a
/// token) that fails gives an `error` entry for that chain (or token) only: never a 5xx for the whole call.
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
                (Some(chain), Ok(client)) => {
                    let tokens: Vec<Asset> = state.chains.tokens().tokens(chain).cloned().collect();
                    let ((native, in_tokens), account) = tokio::join!(
                        client.balances_with_tokens(*address, &tokens),
                        account(state, client, *address)
                    );
                    let in_tokens: Vec<_> = tokens.into_iter().zip(in_tokens).collect();
                    native.map(|wei| {
                        let mut view = BalanceView::new(chain, *address, wei, &in_tokens);
                        view.account = account.map(crate::sponsor::Account::as_str);
                        view
                    })
                }
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

/// What `address` holds as code on `client`'s chain (§22), where an account implementation is configured there;
/// `None` without one, or when the code could not be read.
async fn account(
    state: &AppState,
    client: &crate::chain::client::ChainClient,
    address: alloy::primitives::Address,
) -> Option<crate::sponsor::Account> {
    let parts = state.config.sponsorship.parts(client.name());
    let implementation = parts.account_implementation?;
    let code = client.code(address).await.ok()?;
    Some(crate::sponsor::Account::of(
        &code,
        Some(implementation),
        &parts.previous_implementations,
    ))
}

/// Optional body: one chain, an asset (default: the native coin; or a registry token such as `USDC`), and an amount
/// (decimal string in whole units of the asset) for the payment URI.
#[derive(Deserialize, Default, ToSchema)]
#[serde(deny_unknown_fields)]
struct FundRequest {
    chain: Option<String>,
    asset: Option<String>,
    #[schema(value_type = Option<String>)]
    amount: Option<Value>,
}

/// Get funding instructions
///
/// Deposit addresses with EIP-681 payment URIs, one per agent chain or for the one named. With an `amount` (decimal
/// string in whole units) the URI carries it; with `asset` (a registry token such as `USDC`) it is a token transfer
/// URI. The body is optional; when given it must be a JSON object. A chain that is not one of the agent's is 422.
#[utoipa::path(post, path = "/api/agents/{id}/fund", tag = "wallets", params(("id" = String, Path, format = "uuid")),
    request_body(content = Option<FundRequest>), security(("agent_token" = []), ("admin_token" = []), ("owner_token" = [])),
    responses((status = 200, description = "Deposit addresses with EIP-681 URIs", body = FundingView), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody), (status = 404, body = ErrorBody), (status = 410, body = ErrorBody),
        (status = 422, body = ErrorBody)))]
#[tracing::instrument(skip_all, fields(agent_id = %agent.id))]
async fn fund_agent(
    State(state): State<AppState>,
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
    let wanted = request.asset.as_deref().map(str::trim).filter(|a| !a.is_empty());
    let mut deposits = Vec::new();
    for name in chains {
        let chain = registry::find(name).ok_or_else(|| AppError::field("chain", "unknown chain"))?;
        let asset = match state.chains.tokens().named(chain, wanted) {
            Ok(asset) => asset,
            // Without a chain, the chains that do not know the asset are left out.
            Err(_) if request.chain.is_none() => continue,
            Err(e) => return Err(AppError::field("asset", e.to_string())),
        };
        let address = agent
            .wallet_addresses
            .get(name)
            .ok_or_else(|| AppError::field("chain", "the agent has no wallet there"))?;
        if let Ok(client) = state.chains.get(name)
            && account(&state, client, *address).await == Some(crate::sponsor::Account::Foreign)
        {
            return Err(AppError::Conflict {
                code: "account_foreign",
                message: format!("the agent's address on {name} designates code agentd did not choose; do not fund it"),
            });
        }
        let units = match &amount {
            Some(a) => Some(parse_units(a, asset.decimals).map_err(|e| AppError::field("amount", e.to_string()))?),
            None => None,
        };
        if units == Some(U256::ZERO) {
            return Err(AppError::field("amount", "must be greater than zero"));
        }
        let address = address.to_checksum(None);
        deposits.push(DepositView {
            chain: chain.name,
            chain_id: chain.chain_id,
            explorer_url: chain.address_url(&address),
            payment_uri: payment_uri(&asset, &address, units),
            address,
            symbol: asset.symbol.clone(),
            token_address: asset.token.map(|t| t.to_checksum(None)),
            amount: amount.clone(),
            amount_wei: units.map(|w| w.to_string()),
        });
    }
    if deposits.is_empty() {
        return Err(AppError::field("asset", "unknown asset on the agent's chains"));
    }
    let instructions = format!(
        "Send the asset to the address of the chain you choose (the same address on every EVM chain of this agent). \
         Use the payment URI with a wallet that supports EIP-681 or scan it as a QR code. Only send on the chain named: {}.",
        agent.chains.join(", ")
    );
    Ok(Json(FundingView {
        agent_id: agent.id,
        deposits,
        instructions,
    }))
}

/// The EIP-681 URI of a deposit: a plain value transfer to the wallet, or a call of the token's `transfer` naming
/// the wallet and the amount in base units.
fn payment_uri(asset: &Asset, address: &str, units: Option<U256>) -> String {
    let chain_id = asset.chain.chain_id;
    match asset.token {
        None => {
            let value = units.map(|wei| format!("?value={wei}")).unwrap_or_default();
            format!("ethereum:{address}@{chain_id}{value}")
        }
        Some(token) => {
            let amount = units.map(|u| format!("&uint256={u}")).unwrap_or_default();
            format!(
                "ethereum:{}@{chain_id}/transfer?address={address}{amount}",
                token.to_checksum(None)
            )
        }
    }
}
