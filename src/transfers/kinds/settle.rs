//! The settlement of a payment to the agent (§23): the agent's wallet calls the token's `transferWithAuthorization`
//! with the buyer's signed authorization. An outflow of gas only — it moves none of the agent's coin or tokens — so
//! it is quoted as a call of no value at the gas limit its simulation found, and judged by the cap alone (no policy
//! rule on amounts applies to money coming in: it is cleared as `Decided`).

use alloy::primitives::{Address, U256};

use super::{CallDraft, Quote};
use crate::chain::Node;
use crate::domain::chain::ChainInfo;
use crate::transfers::TransferError;

/// What a settlement is signed from: the call's record (the calldata, no simulation to show) and its gas limit.
pub(in crate::transfers) struct SettleDraft {
    pub call: CallDraft,
}

/// Fees, the native balance and the L1 fee of the settlement call, as a call's.
pub(super) async fn quote(
    client: &dyn Node,
    chain: &'static ChainInfo,
    draft: &SettleDraft,
    from: Address,
    token: Address,
) -> Result<Quote, TransferError> {
    super::call::quote(client, chain, &draft.call, from, token, U256::ZERO).await
}
