//! A registry token: an EIP-1559 call of its `transfer(to, value)`.

use alloy::primitives::{Address, U256};

use super::{Gas, Quote};
use crate::chain::{Node, RefusalKind};
use crate::domain::asset::Asset;
use crate::domain::chain::ChainInfo;
use crate::domain::transaction::TokenRef;
use crate::transfers::{FEE_MAX_AGE, TransferError, l1_probe};

/// A held token outflow's asset once an owner approved it (a transfer's, a redemption's): the token as stored with
/// it, under the symbol it was held with.
pub(in crate::transfers) fn from_held(chain: &'static ChainInfo, symbol: &str, token: TokenRef) -> Asset {
    Asset {
        chain,
        symbol: symbol.to_string(),
        decimals: token.decimals,
        token: Some(token.address),
        eip712: None,
    }
}

/// Gas, fees, the native balance and the token balance of a token transfer, asked together. The token amount
/// must be covered by the token balance (else `insufficient_funds` before anything is signed), the gas by the
/// native balance; the cap holds twice the maximum fee and no value (the native coin moves none). The token's
/// decimals are checked against the registry by the balance read.
pub(super) async fn quote(
    client: &dyn Node,
    chain: &'static ChainInfo,
    token: &Asset,
    from: Address,
    to: Address,
    value: U256,
) -> Result<Quote, TransferError> {
    let contract = token.token.ok_or(TransferError::NoWallet)?;
    let data = crate::domain::erc20::transfer_calldata(to, value);
    let probe = l1_probe(chain, contract, U256::ZERO, data.clone());
    // The mined nonce is read before both balances, as for a native transfer (`Node::mined_nonce_then_balance`).
    let balances = async {
        let mined = client.mined_nonce(from).await;
        let (balance, held) = tokio::join!(client.balance(from), client.token_balance(from, token));
        (mined, balance, held)
    };
    let (gas_limit, fees, (mined, balance, held), l1_fee) = tokio::join!(
        client.estimate_call_gas(from, contract, data),
        client.recent_fees(FEE_MAX_AGE),
        balances,
        client.l1_fee(&probe),
    );
    let short_of = |balance| TransferError::InsufficientTokenFunds {
        symbol: token.symbol.clone(),
        decimals: token.decimals,
        needed: value,
        balance,
    };
    let held = held?;
    if held < value {
        return Err(short_of(held));
    }
    let gas_limit = match gas_limit {
        Ok(gas) => gas,
        // Blocks landed between the two reads and took the balance below the amount: refused as if read after them.
        Err(e) if e.refusal() == Some(RefusalKind::TokenBalanceTooLow) => {
            return Err(short_of(client.token_balance(from, token).await?));
        }
        Err(e) => return Err(e.into()),
    };
    let (fees, balance, l1_fee) = (fees?, balance?, l1_fee?);
    // On OP-stack chains the L1 data fee is part of the fee (§14).
    let gas = Gas {
        limit: gas_limit,
        fees,
        l1_fee,
    };
    Ok(Quote {
        token_balance: Some(held),
        mined_nonce: Some(mined?),
        ..Quote::transaction(chain, &gas, U256::ZERO, balance, true)?
    })
}
