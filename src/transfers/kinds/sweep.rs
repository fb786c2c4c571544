//! An owner's sweep (§20) of the whole balance of the native coin or of a token.

use alloy::primitives::{Address, Bytes};

use super::{Gas, Quote, recent_fees};
use crate::chain::Node;
use crate::domain::asset::Asset;
use crate::domain::chain::ChainInfo;
use crate::transfers::{TransferError, l1_probe};

/// The whole native balance less one maximum fee (gas limit × `maxFeePerGas`, plus the L1 fee estimate on OP-stack
/// chains, §14): what an owner's sweep sends (§20). The balance is read first, so the gas of a recipient with code is
/// estimated for the amount it will receive; `nothing_to_sweep` when the balance does not exceed the fee.
pub(super) async fn quote_native(
    client: &dyn Node,
    chain: &'static ChainInfo,
    from: Address,
    to: Address,
) -> Result<Quote, TransferError> {
    let balance = client.balance(from).await?;
    if balance.is_zero() {
        return Err(TransferError::NothingToSweep(chain.native_symbol.to_string()));
    }
    let probe = l1_probe(chain, to, balance, Bytes::new());
    let (gas_limit, fee_reads) = tokio::join!(client.transfer_gas(from, to, balance), recent_fees(client, &probe));
    let (gas_limit, (fees, l1_fee)) = (gas_limit?, fee_reads?);
    let gas = Gas {
        limit: gas_limit,
        fees,
        l1_fee,
    };
    let value = balance.saturating_sub(gas.max_fee());
    if value.is_zero() {
        return Err(TransferError::NothingToSweep(chain.native_symbol.to_string()));
    }
    Ok(Quote {
        value: Some(value),
        ..Quote::transaction(chain, &gas, value, balance, true)?
    })
}

/// A token's whole balance, its gas paid in the native coin; `nothing_to_sweep` when it holds none.
pub(super) async fn quote_token(
    client: &dyn Node,
    chain: &'static ChainInfo,
    asset: &Asset,
    from: Address,
    to: Address,
) -> Result<Quote, TransferError> {
    let held = client.token_balance(from, asset).await?;
    if held.is_zero() {
        return Err(TransferError::NothingToSweep(asset.symbol.clone()));
    }
    let quote = super::token::quote(client, chain, asset, from, to, held).await?;
    Ok(Quote {
        value: Some(held),
        ..quote
    })
}
