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

/// Fees, the native balance and the L1 fee of the settlement call, as a call's, and beside them the call itself
/// simulated as it will be signed (an `eth_call` from the wallet with its gas limit, right before signing, §23): a
/// revert refuses it (`CallReverted`), nothing signed.
pub(super) async fn quote(
    client: &dyn Node,
    chain: &'static ChainInfo,
    draft: &SettleDraft,
    from: Address,
    token: Address,
) -> Result<Quote, TransferError> {
    let call = &draft.call;
    let (quote, simulated) = tokio::join!(
        super::call::quote(client, chain, call, from, token, U256::ZERO),
        client.call_as(from, token, call.record.data.clone(), call.gas_limit),
    );
    match simulated {
        Ok(()) => quote,
        Err(e) if e.refusal().is_some() => Err(TransferError::CallReverted(e.to_string())),
        Err(e) => Err(e.into()),
    }
}
