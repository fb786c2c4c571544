//! The client's check that its node serves the registry's chain: `eth_chainId` asked once and cached, a mismatch
//! trusted for `MISMATCH_RECHECK` (then asked again, so a fixed node recovers without a restart), an unreachable node's
//! error shared with the callers already waiting for that check.

use std::sync::PoisonError;
use std::time::{Duration, Instant};

use alloy::providers::Provider;

use super::ChainClient;
use crate::chain::error::ChainError;

/// How long a chain-id mismatch is trusted before the node is asked again (a fixed node then
/// recovers without a restart, and a wrong one is not queried on every call).
const MISMATCH_RECHECK: Duration = Duration::from_secs(30);

/// The node's answer to `eth_chainId`, as far as it is known.
#[derive(Debug, Clone)]
pub(super) enum IdState {
    Unchecked,
    Verified,
    Mismatch {
        actual: u64,
        at: Instant,
    },
    /// The last check could not reach the node; callers that waited for it share its error
    /// instead of each waiting a full timeout in turn.
    Unreachable {
        error: ChainError,
        at: Instant,
    },
}

impl ChainClient {
    /// Returns the cached verdict on the node's chain id when there is one, else asks the node.
    pub(super) async fn ensure_chain_id(&self) -> Result<(), ChainError> {
        let asked_at = self.clock.instant();
        if let Some(verdict) = self.cached_verdict(None) {
            return verdict;
        }
        let _one_check_at_a_time = self.inner.id_check.lock().await;
        // Another caller may have finished a check while this one waited.
        if let Some(verdict) = self.cached_verdict(Some(asked_at)) {
            return verdict;
        }
        let p = &self.inner.provider;
        let checked = self.attempt_twice(|| p.get_chain_id()).await;
        let (state, verdict) = match checked {
            Ok(actual) if actual == self.info.chain_id => (IdState::Verified, Ok(())),
            Ok(actual) => {
                tracing::error!(
                    chain = self.info.name,
                    expected = self.info.chain_id,
                    actual,
                    "the node reports another chain id; the chain is refused"
                );
                (
                    IdState::Mismatch {
                        actual,
                        at: self.clock.instant(),
                    },
                    Err(self.wrong_chain_id(actual)),
                )
            }
            Err(error) => (
                IdState::Unreachable {
                    error: error.clone(),
                    at: self.clock.instant(),
                },
                Err(error),
            ),
        };
        *self.inner.id_state.lock().unwrap_or_else(PoisonError::into_inner) = state;
        verdict
    }

    /// The verdict that needs no query. An unreachable node's error is only shared with callers
    /// that were already waiting when it was found (`waited_since`).
    fn cached_verdict(&self, waited_since: Option<Instant>) -> Option<Result<(), ChainError>> {
        let state = self.inner.id_state.lock().unwrap_or_else(PoisonError::into_inner);
        match &*state {
            IdState::Verified => Some(Ok(())),
            IdState::Mismatch { actual, at } if self.age(*at) < MISMATCH_RECHECK => {
                Some(Err(self.wrong_chain_id(*actual)))
            }
            IdState::Unreachable { error, at } if waited_since.is_some_and(|since| *at >= since) => {
                Some(Err(error.clone()))
            }
            _ => None,
        }
    }

    fn wrong_chain_id(&self, actual: u64) -> ChainError {
        ChainError::WrongChainId {
            chain: self.info.name.to_owned(),
            expected: self.info.chain_id,
            actual,
        }
    }
}
