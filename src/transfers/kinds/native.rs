//! A transfer of the chain's native coin: a plain EIP-1559 transaction.

use alloy::primitives::{Address, Bytes, U256};

use super::{Gas, Quote, recent_fees};
use crate::chain::{Node, RefusalKind};
use crate::domain::chain::ChainInfo;
use crate::store::NativeFunds;
use crate::transfers::{TransferError, l1_probe};

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
    let (gas_limit, fee_reads, funds) = tokio::join!(
        client.transfer_gas(from, to, value),
        recent_fees(client, &probe),
        client.mined_nonce_then_balance(from),
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
    let ((fees, l1_fee), (mined, balance)) = (fee_reads?, funds?);
    // On OP-stack chains the L1 data fee is part of the fee (§14).
    let gas = Gas {
        limit: gas_limit,
        fees,
        l1_fee,
    };
    Ok(Quote {
        mined_nonce: Some(mined),
        ..Quote::transaction(chain, &gas, value, balance, true)?
    })
}
