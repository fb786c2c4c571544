//! A transfer of the chain's native coin: a plain EIP-1559 transaction.

use alloy::primitives::{Address, Bytes, U256};

use super::Quote;
use crate::chain::{Node, RefusalKind};
use crate::domain::chain::ChainInfo;
use crate::domain::decision::Cost;
use crate::store::NativeFunds;
use crate::transfers::{FEE_MAX_AGE, TransferError, l1_probe};

/// The native balance as read and what a transfer needs of it; refused at once when the balance alone falls short.
pub(in crate::transfers) fn native_funds(
    chain: &'static ChainInfo,
    balance: U256,
    needed: U256,
) -> Result<NativeFunds, TransferError> {
    if balance < needed {
        return Err(TransferError::InsufficientFunds {
            chain,
            needed,
            balance: Some(balance),
        });
    }
    Ok(NativeFunds { balance, needed })
}

/// Gas, fees and the balance of a native transfer (asked together; the wallet's mined nonce just before the balance,
/// which says what of the agent's open transfers the balance shows already); refused when the balance
/// cannot pay the amount plus the maximum fee. Gas is 21,000 without an estimate for a recipient without code, fees
/// and the L1 fee estimate are reused for `FEE_MAX_AGE`: besides the balance, most quotes ask the node nothing.
pub(super) async fn quote(
    client: &dyn Node,
    chain: &'static ChainInfo,
    from: Address,
    to: Address,
    value: U256,
) -> Result<Quote, TransferError> {
    let probe = l1_probe(chain, to, value, Bytes::new());
    let (gas_limit, fees, funds, l1_fee) = tokio::join!(
        client.transfer_gas(from, to, value),
        client.recent_fees(FEE_MAX_AGE),
        client.mined_nonce_then_balance(from),
        client.recent_l1_fee(&probe, FEE_MAX_AGE),
    );
    let gas_limit = match gas_limit {
        Ok(gas) => gas,
        Err(e) if e.refusal() == Some(RefusalKind::InsufficientFunds) => {
            return Err(TransferError::InsufficientFunds {
                chain,
                needed: value,
                balance: funds.as_ref().ok().map(|(_, balance)| *balance),
            });
        }
        Err(e) => return Err(e.into()),
    };
    let (fees, (mined, balance), l1_fee) = (fees?, funds?, l1_fee?);
    // On OP-stack chains the L1 data fee is part of the fee (§14).
    let cost = Cost::of(value, fees.max_cost(gas_limit).saturating_add(l1_fee));
    Ok(Quote {
        gas_limit,
        max_fee_per_gas: fees.max_fee_per_gas,
        priority_fee: fees.max_priority_fee_per_gas,
        reserved: cost.reserved,
        funds: Some(native_funds(chain, balance, cost.needed)?),
        token_balance: None,
        mined_nonce: Some(mined),
        value: None,
    })
}
