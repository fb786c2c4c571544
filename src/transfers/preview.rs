//! A transfer previewed (§12 `POST …/transfers/preview`): the outflow `send` would make, quoted and judged by the same
//! quote, request and decision, with nothing reserved, signed or written; what its gas would cost at most, as the
//! send signs it at the same fees (the gas limit and `maxFeePerGas` of its quote).

use alloy::primitives::U256;

use super::send::Judged;
use super::{DecisionView, TransferError, TransferOrder, Transfers};
use crate::domain::transaction::Payer;

/// What sending an order would do now.
#[derive(Debug, Clone)]
pub struct TransferPreview {
    /// The verdict its reservation would reach now.
    pub decision: DecisionView,
    pub fee: FeePreview,
}

/// Who pays the send's network fee, and the most it could be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FeePreview {
    /// The agent's wallet, at most `max_fee` wei: `gas_limit` × `max_fee_per_gas`, plus the L1 fee estimate on
    /// OP-stack chains; `None` when the quote refused before its fee was known (the wallet cannot pay it).
    Wallet(Option<WalletFee>),
    /// The operator's sponsorship (§22): not the agent's money.
    Sponsored,
}

/// The gas of a wallet-paid send as it would be signed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WalletFee {
    pub gas_limit: u64,
    pub max_fee_per_gas: u128,
    /// In wei: gas limit × max fee per gas, plus the L1 fee estimate (OP-stack chains).
    pub max_fee: U256,
}

impl Transfers {
    /// What `send(order)` would decide now and what its gas would cost at most; nothing is reserved, signed or
    /// recorded. A rule's refusal (`policy_denied`, a delegation's limit read before the quote included) is a `deny`
    /// wherever it comes; other refusals before the quote (the recipient, a delegation not active) are errors, as
    /// they are to `send`.
    pub async fn preview_transfer(&self, order: &TransferOrder<'_>) -> Result<TransferPreview, TransferError> {
        let outflow = match self.outflow(order, None).await {
            Ok(outflow) => outflow,
            Err(e) if e.code() == "policy_denied" => {
                let sponsored = self.payer(order.by.agent.id, order.chain, order.gas).await? == Payer::Sponsor;
                return Ok(TransferPreview {
                    decision: DecisionView::of(Judged::Deny(e)),
                    fee: match sponsored {
                        true => FeePreview::Sponsored,
                        false => FeePreview::Wallet(None),
                    },
                });
            }
            Err(e) => return Err(e),
        };
        let sponsored = outflow.gas == Payer::Sponsor;
        let (judged, gas) = self.judge_quoted(&outflow).await?;
        let fee = match sponsored {
            true => FeePreview::Sponsored,
            false => FeePreview::Wallet(gas.map(|g| WalletFee {
                gas_limit: g.gas_limit,
                max_fee_per_gas: g.max_fee_per_gas,
                max_fee: g.max_fee,
            })),
        };
        Ok(TransferPreview {
            decision: DecisionView::of(judged),
            fee,
        })
    }
}
