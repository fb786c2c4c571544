//! A transfer redeemed through an on-chain delegation (§21): the delegator's money, the agent's gas; quoted by
//! simulating the `redeemDelegations` transaction exactly as it will be signed.

use alloy::primitives::{Address, U256};

use super::{Gas, Quote};
use crate::chain::Node;
use crate::chain::simulate::{SimCall, SimulationError};
use crate::domain::amount::format_units;
use crate::domain::asset::Asset;
use crate::domain::chain::ChainInfo;
use crate::domain::outflow::Delegated;
use crate::domain::transaction::Via;
use crate::transfers::{FEE_MAX_AGE, TransferError};

/// A delegated transfer, ready for the send path: what is signed and what the reservation holds it against.
pub(in crate::transfers) struct RedeemDraft {
    /// The asset moved (`None`: the native coin).
    pub token: Option<Asset>,
    pub via: Via,
    /// What the caveats leave of the asset this period, read at the latest block (the smallest of its limits).
    pub available: U256,
    /// The wallet's mined nonce at the block `available` was read at: the redemptions from it on are not in that
    /// figure, and the reservation holds them against it; those below are in it. Each is counted once.
    pub mined_nonce: u64,
}

impl RedeemDraft {
    pub(in crate::transfers) fn delegated(&self) -> Delegated {
        Delegated {
            delegation_id: self.via.delegation_id,
            available: self.available,
        }
    }
}

/// The gas, fees and balances of a redemption: simulated exactly as it will be signed (from the agent's wallet to the
/// manager, no value), its gas the simulation's with headroom; the delegator must hold the amount; the agent's
/// wallet pays the gas, which the cap holds twice (no value: the amount is not the agent's).
pub(super) async fn quote(
    client: &dyn Node,
    chain: &'static ChainInfo,
    draft: &RedeemDraft,
    from: Address,
    amount: U256,
) -> Result<Quote, TransferError> {
    let held = match &draft.token {
        None => client.balance(draft.via.delegator).await?,
        Some(token) => client.token_balance(draft.via.delegator, token).await?,
    };
    if held < amount {
        let symbol = draft.token.as_ref().map_or(chain.native_symbol, |t| t.symbol.as_str());
        return Err(TransferError::InsufficientTokenFunds {
            symbol: symbol.to_string(),
            decimals: draft.token.as_ref().map_or(chain.decimals, |t| t.decimals),
            needed: amount,
            balance: held,
        });
    }
    let call = SimCall {
        from,
        to: draft.via.manager,
        value: U256::ZERO,
        data: draft.via.data.clone(),
        ..SimCall::default()
    };
    let (simulated, fees, balance) = tokio::join!(
        client.simulate(std::slice::from_ref(&call), false, None),
        client.recent_fees(FEE_MAX_AGE),
        client.balance(from),
    );
    let simulated = match simulated {
        Ok((_, mut results)) => results
            .pop()
            .ok_or_else(|| TransferError::SimulationUnavailable(chain.name.to_string()))?,
        Err(SimulationError::Unsupported { chain }) => return Err(TransferError::SimulationUnavailable(chain)),
        Err(SimulationError::InsufficientFunds) => {
            return Err(TransferError::InsufficientFunds {
                chain,
                needed: U256::ZERO,
                balance: None,
            });
        }
        Err(SimulationError::Chain(e)) => return Err(e.into()),
    };
    if !simulated.success {
        let reason = crate::domain::call::revert_reason(&simulated.return_data, std::iter::empty());
        return Err(refused_by_caveat(reason, draft, chain));
    }
    let (fees, balance) = (fees?, balance?);
    // The simulation's gas with a quarter more: the period enforcers' storage writes cost more when a period rolls.
    let gas_limit = simulated
        .gas_used
        .saturating_add(simulated.gas_used / 4)
        .saturating_add(20_000);
    // No L1 fee is estimated for a redemption.
    let gas = Gas {
        limit: gas_limit,
        fees,
        l1_fee: U256::ZERO,
    };
    Ok(Quote {
        mined_nonce: Some(draft.mined_nonce),
        ..Quote::transaction(chain, &gas, U256::ZERO, balance, true)?
    })
}

/// An enforcer's revert in the simulation: an amount caveat's is `delegation_limit`, any other `delegation_caveat`.
fn refused_by_caveat(reason: String, draft: &RedeemDraft, chain: &ChainInfo) -> TransferError {
    tracing::info!(delegation_id = %draft.via.delegation_id, %reason, "a caveat refused a redemption in its simulation");
    if reason.contains("transfer-amount-exceeded") || reason.contains("allowance-exceeded") {
        let (symbol, decimals) = draft.token.as_ref().map_or((chain.native_symbol, chain.decimals), |t| {
            (t.symbol.as_str(), t.decimals)
        });
        return TransferError::DelegationLimit {
            available: format_units(draft.available, decimals),
            symbol: symbol.to_string(),
        };
    }
    TransferError::DelegationCaveat(reason)
}
