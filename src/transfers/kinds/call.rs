//! A contract call (§18): its calldata with native `value`, at the gas limit its simulation found.

use alloy::primitives::{Address, U256};

use super::{Gas, Quote, recent_fees};
use crate::chain::Node;
use crate::domain::chain::ChainInfo;
use crate::domain::transaction::CallRecord;
use crate::transfers::{TransferError, l1_probe};

/// What a call is signed from: its record (calldata, decoding, simulation) and the gas limit to sign.
pub(in crate::transfers) struct CallDraft {
    pub record: CallRecord,
    /// What the reservation judges (none when an owner approved it: the approval decides, and its counts were
    /// stored when it was held).
    pub check: Option<crate::store::CallCheck>,
    pub gas_limit: u64,
    /// The account implementation the transaction designates at the agent's own address (§22: a wallet-paid batch
    /// from an agent still an EOA): signed as a type-4 transaction carrying the agent key's authorization of it.
    pub designate: Option<Address>,
}

impl CallDraft {
    /// A held call's draft once an owner approved it: its stored record at its stored gas limit, with `check`, its
    /// simulation again (`None`: the approval decides), and the implementation a wallet-paid batch designates.
    pub(in crate::transfers) fn from_held(
        record: &CallRecord,
        gas_limit: u64,
        (check, designate): (Option<crate::store::CallCheck>, Option<Address>),
    ) -> Self {
        CallDraft {
            record: record.clone(),
            check,
            gas_limit,
            designate,
        }
    }
}

/// Fees, the native balance and the L1 fee of a call at the gas limit its simulation found; the cap holds its value
/// and twice the maximum fee, as a native transfer's.
pub(super) async fn quote(
    client: &dyn Node,
    chain: &'static ChainInfo,
    call: &CallDraft,
    from: Address,
    to: Address,
    value: U256,
) -> Result<Quote, TransferError> {
    let probe = l1_probe(chain, to, value, call.record.data.clone());
    let (fee_reads, balance) = tokio::join!(recent_fees(client, &probe), client.balance(from));
    let ((fees, l1_fee), balance) = (fee_reads?, balance?);
    let gas = Gas {
        limit: call.gas_limit,
        fees,
        l1_fee,
    };
    // Not refused here: a call's funds are judged last, in the reservation (§18).
    Quote::transaction(chain, &gas, value, balance, false)
}
