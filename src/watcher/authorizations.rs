//! x402 payments (§16) settled from the chain: an authorization used on chain is `confirmed` once its
//! `AuthorizationUsed` log is deep enough, one canceled is `cancelled`, one unused past its `validBefore` `expired`.

use alloy::primitives::U256;
use serde_json::json;
use uuid::Uuid;

use super::{WatchError, Watcher, hash};
use crate::chain::Node;
use crate::domain::amount::format_units;
use crate::domain::audit::{Actor, Detail};
use crate::domain::chain as registry;
use crate::domain::transaction::{StoredTx, TxState, X402Record};
use crate::store::{AuditEvent, Message, Role, Settlement};

/// How long past `validBefore` (by this machine's clock) an unused authorization is still left open: a block
/// stamped just before `validBefore` may be mined a moment after it.
const EXPIRY_GRACE_SECS: u64 = 2;

/// How long past `validBefore` a used authorization whose log cannot be found (outside the log window) waits before
/// it is settled without its settlement transaction: the money left all the same.
const LOG_GIVE_UP_SECS: u64 = 3600;

impl Watcher {
    /// x402 payments (§16): an authorization seen used on chain with its `AuthorizationUsed` log is `confirmed` once
    /// that log is `CONFIRMATIONS_<CHAIN>` deep (a `tx_confirmation` event of kind `x402`); one whose log is
    /// `AuthorizationCanceled` is `cancelled`; one still unused once the wall clock passed its `validBefore` is
    /// `expired`, its reservation released, with no event. Everything is read from the store and the chain, so a
    /// restart loses nothing.
    pub(super) async fn settle_authorizations(&self) -> Result<usize, WatchError> {
        let open = self.state.store.open_authorizations(self.chain).await?;
        if open.is_empty() {
            return Ok(0);
        }
        let node = self.state.chains.node(self.chain)?;
        let latest = node.block_number().await?;
        let now = u64::try_from(self.now().timestamp()).unwrap_or_default();
        let mut settled = 0;
        for tx in &open {
            match self.check_authorization(node, tx, latest, now).await {
                Ok(true) => settled += 1,
                Ok(false) => {}
                Err(e) => {
                    tracing::warn!(tx_id = %tx.id, chain = self.chain, error = %e, "cannot check an x402 payment")
                }
            }
        }
        Ok(settled)
    }

    async fn check_authorization(
        &self,
        node: &dyn Node,
        tx: &StoredTx,
        latest: u64,
        now: u64,
    ) -> Result<bool, WatchError> {
        let (Some(record), Some(token)) = (tx.body.x402(), tx.token) else {
            return Ok(false);
        };
        let nonce = hash(&record.nonce)?;
        if !node.authorization_state(token.address, tx.from, nonce).await? {
            if now > record.valid_before.saturating_add(EXPIRY_GRACE_SECS) {
                return self.expire_authorization(tx, record).await;
            }
            return Ok(false);
        }
        let log = node.authorization_log(token.address, tx.from, nonce, latest).await?;
        let landed = match log {
            Some(log) => {
                let Some(block) = log.block_number else {
                    return Ok(false);
                };
                if latest.saturating_sub(block) + 1 < node.confirmations() {
                    return Ok(false);
                }
                let status = if log.used {
                    TxState::Confirmed
                } else {
                    TxState::Cancelled
                };
                (status, log.tx_hash.map(|h| h.to_string()), Some(block))
            }
            None if now > record.valid_before.saturating_add(LOG_GIVE_UP_SECS) => (TxState::Confirmed, None, None),
            None => return Ok(false),
        };
        self.settle_authorization(tx, record, landed, latest).await
    }

    /// An authorization still unused past its `validBefore` (and the grace): `expired`, its reservation released, no
    /// event.
    async fn expire_authorization(&self, tx: &StoredTx, record: &X402Record) -> Result<bool, WatchError> {
        let host_path = reqwest::Url::parse(&record.url).ok();
        let expired = crate::domain::audit::detail::X402PaymentExpired {
            transfer_id: tx.id,
            chain: tx.chain.clone(),
            asset: tx.asset.clone(),
            pay_to: tx.to.to_checksum(None),
            amount: format_units(tx.value_wei, tx.decimals()),
            host: host_path.as_ref().and_then(|u| u.host_str().map(str::to_owned)),
            path: host_path.as_ref().map(|u| u.path().to_owned()),
        };
        let event = AuditEvent::new(tx.agent_id, Actor::System, Detail::X402PaymentExpired(expired));
        let expired = self.state.store.expire_authorization(tx.id, &event).await?;
        if expired {
            tracing::info!(tx_id = %tx.id, chain = self.chain, "an unused x402 authorization expired");
        }
        Ok(expired)
    }

    /// An authorization found used or cancelled on chain (`(status, settlement hash, block)`) settled with its
    /// `tx_confirmation` event of kind `x402` and its conversation message.
    async fn settle_authorization(
        &self,
        tx: &StoredTx,
        record: &X402Record,
        (status, hash, block): (TxState, Option<String>, Option<u64>),
        latest: u64,
    ) -> Result<bool, WatchError> {
        if hash.is_some() {
            // Merged: the paid request's answer may be stored after this round read the payment.
            self.state.store.merge_x402(tx.id, None, hash.clone()).await?;
        }
        let confirmations = block.map_or(0, |b| latest.saturating_sub(b) + 1);
        let chain =
            registry::find(&tx.chain).ok_or_else(|| WatchError::Corrupt(format!("unknown chain {}", tx.chain)))?;
        let amount = format_units(tx.value_wei, tx.decimals());
        let event = json!({
            "type": "tx_confirmation",
            "kind": "x402",
            "transfer_id": tx.id,
            "conversation_id": tx.conversation_id,
            "agent_id": tx.agent_id,
            "chain": tx.chain,
            "tx_hash": hash,
            "status": status.as_str(),
            "block_number": block,
            "gas_used": null,
            "confirmations": confirmations,
            "explorer_url": hash.as_deref().map(|h| chain.tx_url(h)),
            "asset": tx.asset,
            "amount": amount,
            "to": tx.to.to_checksum(None),
            "url": record.url,
        });
        let content = match status {
            TxState::Cancelled => format!(
                "The x402 payment of {amount} {} to {} for {} was cancelled on chain; nothing moved.",
                tx.asset,
                tx.to.to_checksum(None),
                record.url
            ),
            _ => format!(
                "The x402 payment of {amount} {} to {} for {} is settled{}.",
                tx.asset,
                tx.to.to_checksum(None),
                record.url,
                hash.as_deref()
                    .map(|h| format!(" in transaction {h}"))
                    .unwrap_or_default()
            ),
        };
        let message = tx.conversation_id.map(|conversation_id| Message {
            id: Uuid::new_v4(),
            conversation_id,
            role: Role::Assistant,
            content,
            chain_calls: json!([]),
            tokens_used: 0,
            created_at: self.now(),
        });
        let settlement = Settlement {
            status,
            landed: None,
            block_number: block,
            gas_used: None,
            actual_cost_wei: Some(U256::ZERO),
            counts: Vec::new(),
        };
        let done = self
            .state
            .store
            .settle_transaction(tx.id, &settlement, event, message.as_ref())
            .await?;
        Ok(done.is_some())
    }
}
