//! ERC-20 reads and calldata: balances of several tokens in one JSON-RPC batch of `eth_call`s (one round trip per
//! chain, a failing token failing alone), each registry token's `decimals()` checked once per process against the
//! registry (again after a minute while they disagree) (the calls themselves are `domain::erc20`).

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use alloy::eips::BlockNumberOrTag;
use alloy::primitives::{Address, Bytes, U256};
use alloy::providers::Provider;
use alloy::rpc::client::BatchRequest;
use alloy::rpc::types::TransactionRequest;
use alloy::sol_types::SolCall;

use super::ChainClient;
use crate::chain::error::{ChainError, classify};
use crate::chain::node::Node;
use crate::domain::asset::Asset;
use crate::domain::erc20::IERC20;

/// How long a token found reporting other decimals than the registry stays refused before it is asked again: the
/// node may have answered wrong (a proxy mid-upgrade, a lagging node), and a refusal must not outlive the cause until
/// the next restart.
pub const DECIMALS_RECHECK: Duration = Duration::from_secs(60);

/// The decimals each token contract reported, by address, and when: asked once per process while they agree with
/// the registry, again after `DECIMALS_RECHECK` while they do not; compared with the registry on every use.
#[derive(Debug, Default)]
pub(super) struct DecimalsSeen(Mutex<HashMap<Address, (u8, Instant)>>);

impl DecimalsSeen {
    /// What `token` reported, unless that disagreed with `expected` long enough before `now` to ask again.
    fn get(&self, token: Address, expected: u8, now: Instant) -> Option<u8> {
        let mut seen = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        match seen.get(&token) {
            Some((actual, at)) if *actual != expected && now.saturating_duration_since(*at) >= DECIMALS_RECHECK => {
                seen.remove(&token);
                None
            }
            other => other.map(|(actual, _)| *actual),
        }
    }

    fn put(&self, token: Address, decimals: u8, now: Instant) {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(token, (decimals, now));
    }
}

impl ChainClient {
    /// The balance of `owner` in each of `tokens` (in base units), in one batch; a token whose decimals were not
    /// yet checked is checked in the same batch. The outer error is the node's (nothing could be read); an inner
    /// one is that token's alone.
    pub async fn token_balances(
        &self,
        owner: Address,
        tokens: &[Asset],
    ) -> Result<Vec<Result<U256, ChainError>>, ChainError> {
        let mut calls = Vec::with_capacity(tokens.len() * 2);
        // Which tokens' decimals are asked in this batch: decided once, so that the answers are read back in the
        // order they were asked even if another request records some decimals meanwhile.
        let mut asked = Vec::with_capacity(tokens.len());
        for token in tokens {
            let address = token.token.unwrap_or_default();
            calls.push((address, IERC20::balanceOfCall { owner }.abi_encode().into()));
            let ask = self
                .decimals_seen()
                .get(address, token.decimals, self.clock().instant())
                .is_none();
            if ask {
                calls.push((address, IERC20::decimalsCall {}.abi_encode().into()));
            }
            asked.push(ask);
        }
        let mut answers = self.eth_call_batch(calls).await?.into_iter();
        let mut balances = Vec::with_capacity(tokens.len());
        for (token, ask) in tokens.iter().zip(asked) {
            let balance = answers.next().unwrap_or_else(|| Err(self.not_a_token(token)));
            let checked = match ask {
                false => Ok(()),
                true => answers
                    .next()
                    .unwrap_or_else(|| Err(self.not_a_token(token)))
                    .and_then(|bytes| self.record_decimals(token, &bytes)),
            };
            balances.push(checked.and_then(|()| self.verify_decimals(token)).and_then(|()| {
                let bytes = balance?;
                IERC20::balanceOfCall::abi_decode_returns(&bytes).map_err(|_| self.not_a_token(token))
            }));
        }
        Ok(balances)
    }

    /// The native balance of `owner` and its balance in each of `tokens`, read concurrently (two round trips in
    /// parallel: the native balance and one batch for the tokens). A token's failure is its own.
    pub async fn balances_with_tokens(
        &self,
        owner: Address,
        tokens: &[Asset],
    ) -> (Result<U256, ChainError>, Vec<Result<U256, ChainError>>) {
        let (native, in_tokens) = tokio::join!(self.balance(owner), self.token_balances(owner, tokens));
        let in_tokens = match in_tokens {
            Ok(balances) => balances,
            Err(e) => tokens.iter().map(|_| Err(e.clone())).collect(),
        };
        (native, in_tokens)
    }

    /// Sends `eth_call`s as one JSON-RPC batch (one round trip), under the client's timeout and retry.
    async fn eth_call_batch(&self, calls: Vec<(Address, Bytes)>) -> Result<Vec<Result<Bytes, ChainError>>, ChainError> {
        if calls.is_empty() {
            return Ok(Vec::new());
        }
        let client = self.provider().client();
        let answers = self
            .call(|| {
                let calls = &calls;
                async move {
                    let mut batch = BatchRequest::new(client);
                    let mut waiters = Vec::with_capacity(calls.len());
                    for (to, data) in calls {
                        let request = TransactionRequest::default().to(*to).input(data.clone().into());
                        waiters.push(batch.add_call::<_, Bytes>("eth_call", &(request, BlockNumberOrTag::Latest))?);
                    }
                    batch.send().await?;
                    Ok(futures::future::join_all(waiters).await)
                }
            })
            .await?;
        Ok(answers
            .into_iter()
            .map(|answer| answer.map_err(|e| classify(self.name(), &e).error))
            .collect())
    }

    fn record_decimals(&self, token: &Asset, bytes: &Bytes) -> Result<(), ChainError> {
        let decimals = IERC20::decimalsCall::abi_decode_returns(bytes).map_err(|_| self.not_a_token(token))?;
        self.decimals_seen()
            .put(token.token.unwrap_or_default(), decimals, self.clock().instant());
        if decimals != token.decimals {
            tracing::error!(
                chain = self.name(),
                token = %token.symbol,
                expected = token.decimals,
                actual = decimals,
                "a registry token reports other decimals; it is refused (asked again in a minute)"
            );
        }
        Ok(())
    }

    /// The registry's decimals against what the contract reported (once checked).
    fn verify_decimals(&self, token: &Asset) -> Result<(), ChainError> {
        match self
            .decimals_seen()
            .get(token.token.unwrap_or_default(), token.decimals, self.clock().instant())
        {
            Some(actual) if actual != token.decimals => Err(ChainError::TokenDecimalsMismatch {
                chain: self.name().to_string(),
                symbol: token.symbol.clone(),
                expected: token.decimals,
                actual,
            }),
            _ => Ok(()),
        }
    }

    pub(super) fn not_a_token(&self, token: &Asset) -> ChainError {
        ChainError::NotAToken {
            chain: self.name().to_string(),
            symbol: token.symbol.clone(),
        }
    }
}
