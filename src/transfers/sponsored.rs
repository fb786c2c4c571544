//! Sending with the operator's sponsorship (§22): the outflow's execution as a user operation of the agent's own
//! account. The same reservation as every outflow (`reserve::sign_and_apply` under the agent's send lock), with the
//! account's EntryPoint sequence for its nonce and the sponsorship's checks in the same step as the cap; signed by
//! the sponsor key (the paymaster's approval) and the agent key (the operation); stored `signed` for the bundler,
//! which carries it in a bundle and settles it by its `UserOperationEvent`.

use std::sync::Arc;

use alloy::primitives::U256;

use super::carriers::operation;
use super::kinds::{Outflow, Quote};
use super::reserve::{refusal, sign_and_apply};
use super::rounds::{Sending, SignAt};
use super::{BroadcastStatus, TransferError, TransferOutcome, Transfers, signer_error, store_error};
use crate::chain::Node;
use crate::domain::chain::ChainInfo;
use crate::domain::outflow::SponsorReads;
use crate::domain::transaction::Payer;
use crate::store::{NativeFunds, Reservation, SendGuard, StoreError, TransferRequest};

impl Transfers {
    /// Who pays an order's gas: as asked, else the sponsorship where the agent has one with a non-zero `per_day`
    /// on a sponsorable chain, else the wallet. Sponsored asked where the chain is not sponsorable, or without a
    /// sponsorship there, is 422 `sponsorship_unavailable`.
    pub(super) async fn payer(
        &self,
        agent_id: uuid::Uuid,
        chain: &'static ChainInfo,
        asked: Option<Payer>,
    ) -> Result<Payer, TransferError> {
        if asked == Some(Payer::Wallet) {
            return Ok(Payer::Wallet);
        }
        let sponsorable = self.sponsors.is_sponsorable(chain.name);
        let budget = match sponsorable {
            true => self
                .store
                .sponsorship_per_day(agent_id, chain.name)
                .await
                .map_err(store_error)?
                .is_some_and(|per_day| !per_day.is_zero()),
            false => false,
        };
        match (asked, budget) {
            (_, true) => Ok(Payer::Sponsor),
            (None, false) => Ok(Payer::Wallet),
            (Some(_), false) => Err(TransferError::SponsorshipUnavailable(chain.name.to_string())),
        }
    }

    /// Sends `o` as a sponsored user operation (see the module's doc), under the caller's send lock (`held`) or
    /// its own. `Sent` with `Submitted`: stored `signed`, the bundler carries it.
    pub(super) async fn send_sponsored(
        &self,
        o: Outflow<'_>,
        held: Option<Box<dyn SendGuard>>,
    ) -> Result<TransferOutcome, TransferError> {
        let chain = o.chain;
        let sponsor = self
            .sponsors
            .chain(chain.name)
            .cloned()
            .ok_or_else(|| TransferError::SponsorshipUnavailable(chain.name.to_string()))?;
        let client = self.chains.get(chain.name)?;
        // What the account will execute: the purpose's action as the wallet would have sent it.
        let draft = o.request(&Quote::none(), None);
        let execution = match draft.body.transaction() {
            Some(t) => t.action.execution(o.to, o.value, draft.token),
            None => return Err(TransferError::SponsorshipUnavailable(chain.name.to_string())),
        };
        // A batch's values leave inside the account's `execute` (§22): its amount, not the execution's value.
        let batch = o.batch_call();
        let native_value = if batch.is_some() { o.value } else { execution.1 };
        // Every read at once: the operation's (with the account's native balance when it moves the coin), the
        // agent's key, and what the agent holds of a token it moves.
        let token_read = async {
            match (&draft.token, &o.purpose) {
                (Some(_), super::kinds::Purpose::Token(asset)) => client.token_balance(o.from, asset).await.map(Some),
                _ => Ok(None),
            }
        };
        let (reads, signer, token_balance) = tokio::join!(
            operation::read(client, &sponsor, o.from, execution, batch, !native_value.is_zero()),
            self.signer(o.agent_id),
            token_read,
        );
        let (reads, signer, token_balance) = (reads?, signer?, token_balance?);
        if let Some(held) = token_balance
            && held < o.value
        {
            return Err(super::insufficient_tokens(&draft, held));
        }
        let funds = reads.native_balance.map(|balance| NativeFunds {
            balance,
            needed: native_value,
        });
        let op = &reads.operation;
        let quote = Quote {
            gas_limit: op.gas_limit(),
            max_fee_per_gas: op.max_fee_per_gas,
            priority_fee: op.priority_fee,
            // The gas is the sponsorship's: the cap holds only what the account moves of the native coin.
            reserved: native_value,
            funds,
            token_balance,
            mined_nonce: None,
            value: None,
        };
        let mut request = o.request(&quote, Some(reads.entry_point_nonce));
        request.reads.sponsor = Some(SponsorReads {
            max_cost: op.max_cost(),
            deposit: reads.deposit,
            ready: reads.ready,
            valid_until: op.valid_until,
            read_block: reads.read_block,
        });
        let sign: SignAt = {
            let (op, signer, sponsor_key) = (op.clone(), signer.clone(), sponsor.key.clone());
            Arc::new(move |request: &TransferRequest, nonce: Option<u64>| {
                op.sign(signer.as_ref(), sponsor_key.as_ref(), nonce.unwrap_or(0))
                    .map_err(|e| signer_error(request.agent_id, e))
            })
        };
        let in_memory = signer.in_memory() && sponsor.key.in_memory();
        let reservation = self.reserve_sponsored(&request, (sign, in_memory), held).await;
        match reservation? {
            Reservation::Reserved(tx) => {
                self.bundles.notify_one();
                Ok(TransferOutcome::Sent {
                    chain,
                    tx: *tx,
                    status: BroadcastStatus::Submitted,
                })
            }
            Reservation::AwaitingApproval(approval) => Ok(TransferOutcome::AwaitingApproval {
                chain,
                approval: *approval,
            }),
            Reservation::Refused(r) => Err(refusal(r, &request, chain)),
            Reservation::Sign { .. } => Err(store_error(StoreError::Corrupt(
                "a reservation was left unsigned".into(),
            ))),
        }
    }
}

impl Transfers {
    /// Reserves the sponsored `request`, signed by `sign` (`in_memory`: every key it takes is in this process's
    /// memory): under the caller's lock (`held`: a call simulated under it, §18) a round of one at once; else in the
    /// next round with the sends of any agents waiting with it, which takes the lock (`rounds`), or alone under its
    /// own lock when the round could not take it.
    async fn reserve_sponsored(
        &self,
        request: &TransferRequest,
        (sign, in_memory): (SignAt, bool),
        held: Option<Box<dyn SendGuard>>,
    ) -> Result<Reservation, TransferError> {
        let guard = match held {
            Some(guard) => guard,
            None => {
                let sending = Sending {
                    request: request.clone(),
                    sign: sign.clone(),
                    in_memory,
                };
                if let Some(reservation) = self.rounds.reserve(sending).await {
                    return reservation;
                }
                self.store
                    .lock_sender(request.agent_id, &request.chain)
                    .await
                    .map_err(store_error)?
            }
        };
        let reservation = sign_and_apply(self.store.as_ref(), request, in_memory, &|n| sign(request, n)).await;
        drop(guard);
        reservation
    }
}

impl Quote {
    /// A quote of nothing: what an outflow's draft is built with before anything was read.
    pub(super) fn none() -> Quote {
        Quote {
            gas_limit: 0,
            max_fee_per_gas: 0,
            priority_fee: 0,
            reserved: U256::ZERO,
            funds: None,
            token_balance: None,
            mined_nonce: None,
            value: None,
        }
    }
}
