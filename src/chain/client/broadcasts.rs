//! The broadcast queue behind `Node::send_raw`: signed transactions that arrive while a broadcast is in flight wait,
//! then go together in one JSON-RPC batch (issue 36), each caller answered on its own.

use std::sync::PoisonError;

use alloy::primitives::TxHash;
use alloy::providers::Provider;
use alloy::rpc::client::BatchRequest;

use super::{ChainClient, OnAbandon};
use crate::chain::error::{ChainError, RefusalKind, classify};
use crate::chain::tx::raw_tx_hash;

/// Signed transactions broadcast in one JSON-RPC batch at most.
const BROADCASTS_PER_BATCH: usize = 100;

/// Signed transactions waiting to be broadcast, each with its caller's answer, and whether a batch is in flight.
#[derive(Default)]
pub(super) struct Broadcasts {
    pub(super) waiting: Vec<(Vec<u8>, BroadcastAnswer)>,
    pub(super) sending: bool,
}

pub(super) type BroadcastAnswer = tokio::sync::oneshot::Sender<Result<TxHash, ChainError>>;

impl ChainClient {
    /// Sends the waiting broadcasts, a batch at a time, until none waits.
    pub(super) async fn broadcast_batches(self) {
        // Ended before every broadcast was answered (a panic, or its runtime stopped): the ones still queued see no
        // answer (stored `signed`, the watcher sends them again) and the next broadcast starts a new task, so the
        // chain's broadcasts are never left waiting for one that is gone.
        let abandoned = OnAbandon::new(|| {
            let mut broadcasts = self.inner.broadcasts.lock().unwrap_or_else(PoisonError::into_inner);
            broadcasts.waiting.clear();
            broadcasts.sending = false;
        });
        loop {
            // The sends of one round are answered together and come here one after the other: letting the tasks
            // already woken run first puts them in this batch, not each in one of its own.
            tokio::task::yield_now().await;
            let batch: Vec<_> = {
                let mut broadcasts = self.inner.broadcasts.lock().unwrap_or_else(PoisonError::into_inner);
                if broadcasts.waiting.is_empty() {
                    broadcasts.sending = false;
                    drop(broadcasts);
                    abandoned.disarm();
                    return;
                }
                let n = broadcasts.waiting.len().min(BROADCASTS_PER_BATCH);
                broadcasts.waiting.drain(..n).collect()
            };
            let (raws, answers): (Vec<_>, Vec<_>) = batch.into_iter().unzip();
            let sent = self.send_raw_batch(&raws).await;
            for (answer, sent) in answers.into_iter().zip(sent) {
                // A caller that went away needs no answer: the watcher settles what the node took.
                let _ = answer.send(sent);
            }
        }
    }

    /// `eth_sendRawTransaction` of each of `raws`, in their order: one request for one, a JSON-RPC batch for more.
    /// A batch that failed as a whole is that failure for each of its transactions.
    async fn send_raw_batch(&self, raws: &[Vec<u8>]) -> Vec<Result<TxHash, ChainError>> {
        let sent = match raws {
            [raw] => {
                let p = &self.inner.provider;
                vec![
                    self.call(|| async move {
                        p.raw_request("eth_sendRawTransaction".into(), (alloy::hex::encode_prefixed(raw),))
                            .await
                    })
                    .await,
                ]
            }
            _ => {
                let client = self.inner.provider.client();
                let answers = self
                    .call(|| async move {
                        let mut batch = BatchRequest::new(client);
                        let mut waiters = Vec::with_capacity(raws.len());
                        for raw in raws {
                            let params = (alloy::hex::encode_prefixed(raw),);
                            waiters.push(batch.add_call::<_, TxHash>("eth_sendRawTransaction", &params)?);
                        }
                        batch.send().await?;
                        Ok(futures::future::join_all(waiters).await)
                    })
                    .await;
                match answers {
                    Ok(answers) => answers
                        .into_iter()
                        .map(|answer| answer.map_err(|e| classify(self.info.name, &e).error))
                        .collect(),
                    Err(e) => vec![Err(e); raws.len()],
                }
            }
        };
        sent.into_iter()
            .zip(raws)
            .map(|(sent, raw)| match sent {
                // After a retry the first attempt may already have been accepted: the node then reports the
                // transaction as known, which is a success for the caller.
                Err(ChainError::Refused {
                    reason: RefusalKind::AlreadyKnown,
                    ..
                }) => Ok(raw_tx_hash(raw)),
                other => other,
            })
            .collect()
    }
}
