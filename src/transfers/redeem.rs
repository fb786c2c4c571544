//! Spending an on-chain delegation (§21): a transfer of the native coin or a token that leaves the delegator's
//! account. The agent's wallet signs one `redeemDelegations` transaction to the `DelegationManager` and pays its gas
//! (which counts against the cap); the amount is the delegator's and counts against what the caveats leave this
//! period, read on chain and held again in the reserving transaction less this service's redemptions the chain has
//! not counted yet. Order of the checks: `delegations_unavailable` → `delegation_not_active` → `delegation_revoked`
//! → `delegation_limit` (against the chain's figure) → the simulation exactly as signed (an amount caveat's revert is
//! `delegation_limit`, any other enforcer's `delegation_caveat`) → the send path (funds, policy, cap, approvals).

use alloy::primitives::{Address, U256};
use uuid::Uuid;

use super::kinds::RedeemDraft;
use super::{TransferError, Transfers, token_ref};
use crate::delegations::DelegationError;
use crate::domain::amount::format_units;
use crate::domain::asset::Asset;
use crate::domain::chain::ChainInfo;
use crate::domain::delegation::{self as rules, LimitAsset};
use crate::domain::transaction::{Via, on_chain_call};

impl Transfers {
    /// The agent's delegation `id` on `chain`, checked in §21's order for a transfer of `amount` of `token` to `to`
    /// redeemed by the agent's `wallet`.
    #[allow(clippy::too_many_arguments)]
    pub(super) async fn redeemable(
        &self,
        agent_id: Uuid,
        chain: &'static ChainInfo,
        id: Uuid,
        token: Option<&Asset>,
        wallet: Address,
        to: Address,
        amount: U256,
    ) -> Result<RedeemDraft, TransferError> {
        let unavailable = || TransferError::DelegationsUnavailable(chain.name.to_string());
        let delegations = self.delegations.as_ref().ok_or_else(unavailable)?;
        let manager = delegations.manager(chain.name).map_err(|_| unavailable())?;
        // Known, this agent's, on this chain, active, and not disabled on chain now (noticed and recorded at use).
        let described = delegations
            .for_send(agent_id, chain.name, id)
            .await
            .map_err(delegation_error)?;
        // Registration takes only delegations to the agent's wallet; its nonce is the one read beside the figures.
        if described.delegation.delegate != wallet {
            return Err(TransferError::DelegationNotActive("it names another delegate"));
        }
        let asset = match token {
            None => LimitAsset::Native,
            Some(t) => LimitAsset::Token(t.token.ok_or(TransferError::DelegationNotActive(
                "its asset has no token contract on this chain",
            ))?),
        };
        // The smallest of the limits on the asset; none on it leaves nothing (the chain would refuse).
        let mut available: Option<U256> = None;
        let mut mined_nonce = None;
        for (limit, left) in described.limits.iter().filter(|(l, _)| l.asset == asset) {
            let left = left.ok_or_else(|| {
                TransferError::Chain(crate::chain::ChainError::Unavailable {
                    chain: chain.name.to_string(),
                    reason: format!("what caveat {} leaves could not be read", limit.caveat),
                })
            })?;
            // The chain's figure: the reserving transaction holds this service's redemptions against it itself,
            // those from the wallet's mined nonce at the figure's block on (every figure is read at one block).
            mined_nonce = Some(left.mined_nonce);
            let left = left.on_chain;
            available = Some(available.map_or(left, |a| a.min(left)));
        }
        let available = available.unwrap_or(U256::ZERO);
        let (symbol, decimals) = token.map_or((chain.native_symbol, chain.decimals), |t| {
            (t.symbol.as_str(), t.decimals)
        });
        if amount > available {
            return Err(TransferError::DelegationLimit {
                available: format_units(available, decimals),
                symbol: symbol.to_string(),
            });
        }
        // A limit on the asset was read (else nothing is available): its block's nonce is the wallet's.
        let mined_nonce = mined_nonce.ok_or(TransferError::DelegationLimit {
            available: format_units(U256::ZERO, decimals),
            symbol: symbol.to_string(),
        })?;
        let (target, value, calldata) = on_chain_call(to, amount, token.and_then(token_ref));
        Ok(RedeemDraft {
            token: token.cloned(),
            via: Via {
                delegation_id: id,
                delegator: described.delegation.delegator,
                manager,
                data: rules::redemption(&described.delegation, target, value, &calldata),
            },
            available,
            mined_nonce,
        })
    }
}

/// What the delegation service's refusals are to a send.
fn delegation_error(e: DelegationError) -> TransferError {
    match e {
        DelegationError::NotFound => TransferError::DelegationNotActive("no such delegation of this agent"),
        DelegationError::NotActive(why) => TransferError::DelegationNotActive(why),
        DelegationError::Unavailable(chain) => TransferError::DelegationsUnavailable(chain),
        DelegationError::Revoked => TransferError::DelegationRevoked,
        DelegationError::Chain(e) => TransferError::Chain(e),
        DelegationError::Store(e) => super::store_error(e),
        other => TransferError::DelegationCaveat(other.to_string()),
    }
}

impl Transfers {
    /// A contract call redeemed through delegation `id` (§21): judged as its execution. With the caveats agentd takes,
    /// the chain lets through only a registry token's `transfer(to, amount)` or a plain native send, so it is sent as
    /// that transfer (every check of a delegated send, then the send path); any other call is refused, after the
    /// delegation's own checks, as `delegation_caveat`.
    pub async fn call_through(
        &self,
        order: super::CallOrder<'_>,
        id: Uuid,
    ) -> Result<super::TransferOutcome, TransferError> {
        let chain = order.chain;
        let calldata = &order.encoded.calldata;
        let (token, to, amount) = if calldata.is_empty() && !order.value.is_zero() {
            (None, order.to, order.value)
        } else {
            let token = self.chains.tokens().find(chain, &order.to.to_checksum(None));
            let transfer =
                <crate::domain::erc20::IERC20::transferCall as alloy::sol_types::SolCall>::abi_decode(calldata);
            match (token, transfer) {
                (Some(token), Ok(call)) if order.value.is_zero() && token.token.is_some() => {
                    (Some(token), call.to, call.value)
                }
                _ => {
                    let unavailable = || TransferError::DelegationsUnavailable(chain.name.to_string());
                    let delegations = self.delegations.as_ref().ok_or_else(unavailable)?;
                    delegations
                        .for_send(order.by.agent.id, chain.name, id)
                        .await
                        .map_err(delegation_error)?;
                    return Err(TransferError::DelegationCaveat(
                        "through a delegation only a registry token's transfer(to, amount) or a plain native send \
                         is let through by the caveats agentd takes"
                            .into(),
                    ));
                }
            }
        };
        let decimals = token.as_ref().map_or(chain.decimals, |t| t.decimals);
        let amount = crate::domain::amount::Amount::parse(&format_units(amount, decimals), decimals)
            .map_err(|e| TransferError::InvalidAmount(e.to_string()))?;
        self.send(super::TransferOrder {
            by: order.by,
            chain,
            to,
            token,
            amount,
            conversation_id: order.conversation_id,
            delegation: Some(id),
            gas: None,
        })
        .await
    }
}
