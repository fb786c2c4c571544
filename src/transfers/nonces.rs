//! The wallet's nonces as the send path knows them. The store counts each (agent, chain)'s next nonce in the
//! reserving transaction (`Reserving::facts`, the decision names it); before an (agent, chain) has one stored, the
//! node's pending count is where it starts (`start`), asked once per (agent, chain) and process. A nonce left unused
//! is filled by a zero-value send of the wallet to itself (`filler`: the refusal handler in `send`, the gap repair
//! in `gaps`).

use std::collections::HashSet;
use std::sync::{Mutex, PoisonError};

use alloy::primitives::{Address, U256};
use uuid::Uuid;

use super::carriers::wallet::{carried, self_send, sign_transfer, sign_typed};
use super::{TransferError, store_error};
use crate::chain::Node;
use crate::domain::chain::ChainInfo;
use crate::domain::outflow::{ChainReads, Check};
use crate::domain::transaction::{Action, Body, OnChain, Payer, StoredTx};
use crate::signer::{SignerError, WalletSigner};
use crate::store::{Clearance, Mandate, SignedTx, TransferRequest, TransferStore};

/// Most (agent, chain) pairs remembered as counted by the store before the memory starts again.
const REMEMBERED: usize = 100_000;

/// What the send path knows of nonces besides the store: the (agent, chain) pairs the store already counts.
#[derive(Default)]
pub(super) struct Nonces {
    counted: Mutex<HashSet<(Uuid, &'static str)>>,
}

impl Nonces {
    /// The nonce to start from when the store has none for (agent, chain) yet: the node's pending count; `None` once
    /// the store counts it (then the store's counter names the next).
    pub(super) async fn start(
        &self,
        store: &dyn TransferStore,
        client: &dyn Node,
        agent_id: Uuid,
        chain: &'static ChainInfo,
        from: Address,
    ) -> Result<Option<u64>, TransferError> {
        let pair = (agent_id, chain.name);
        if self
            .counted
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .contains(&pair)
        {
            return Ok(None);
        }
        match store.next_nonce(agent_id, chain.name).await.map_err(store_error)? {
            Some(_) => {
                let mut counted = self.counted.lock().unwrap_or_else(PoisonError::into_inner);
                if counted.len() >= REMEMBERED {
                    counted.clear();
                }
                counted.insert(pair);
                Ok(None)
            }
            None => Ok(Some(client.pending_nonce(from).await?)),
        }
    }
}

/// A zero-value send of `tx`'s wallet to itself, to take a nonce that `tx` left unused (a gap, or a transfer refused
/// after later ones were signed): nothing moves but the fee, held against the cap as `reserved_wei`. Where `tx`
/// designates the account (§22: a type-4 transaction that uses the next nonce too), the fill carries the same
/// authorization (`sign_fill`): its gas is raised to what that costs, and what it holds with it, within what `tx` held.
pub(super) fn nonce_filler(
    tx: &StoredTx,
    chain: &ChainInfo,
    gas_limit: u64,
    max_fee_per_gas: u128,
    reserved_wei: U256,
) -> TransferRequest {
    let (gas_limit, reserved_wei) = match carried(&tx.raw_tx).len() {
        0 => (gas_limit, reserved_wei),
        n => {
            let gas_limit = gas_limit.max(super::replace::self_send_gas(n));
            let fee = U256::from(gas_limit).saturating_mul(U256::from(max_fee_per_gas));
            (gas_limit, reserved_wei.max(fee.min(tx.reserved_wei)))
        }
    };
    TransferRequest {
        id: Uuid::new_v4(),
        agent_id: tx.agent_id,
        chain: tx.chain.clone(),
        conversation_id: None,
        from: tx.from,
        to: tx.from,
        value_wei: U256::ZERO,
        reserved_wei,
        asset: chain.native_symbol.to_string(),
        token: None,
        clearance: Clearance::Decided,
        reads: ChainReads::default(),
        body: Body::Transaction(OnChain {
            at: (),
            gas: Payer::Wallet,
            gas_limit,
            max_fee_per_gas,
            action: Action::Transfer,
        }),
        check: Check::Transfer,
        mandate: Mandate::NONE,
        owed: None,
    }
}

/// Signs `fill` (`nonce_filler` of the transaction whose signed bytes are `raw`) at `nonce`: an EIP-1559 self-send,
/// or, where that transaction carried EIP-7702 authorizations (it designates the account, §22), a type-4 self-send
/// carrying the same ones, so that the fill uses every nonce it would have (nothing new is signed but the fill).
pub(super) fn sign_fill(
    signer: &dyn WalletSigner,
    chain: &ChainInfo,
    fill: &TransferRequest,
    priority_fee: u128,
    (nonce, raw): (u64, &[u8]),
) -> Result<SignedTx, SignerError> {
    let authorizations = carried(raw);
    if authorizations.is_empty() {
        return sign_transfer(signer, chain, fill, priority_fee, nonce);
    }
    let (gas_limit, max_fee_per_gas) = fill.body.fees();
    let next = self_send(
        chain,
        fill.from,
        (nonce, gas_limit),
        (max_fee_per_gas, priority_fee),
        authorizations,
    );
    sign_typed(signer, next)
}
