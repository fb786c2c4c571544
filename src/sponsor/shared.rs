//! What every sponsored request of a chain reads of its parts (§22): the paymaster's deposit at the EntryPoint, its
//! word on the sponsor (`signers`, `isBundlerAllowed`), the sponsor's balance, all at the latest block, and that
//! block's time. They are the same for every agent, and a read at a block is the same whenever it is made: each
//! request asks the node for its latest block (one call, which the time needed anyway) and reads the rest at that
//! block only when no request read them at it (or a later one) before. The first request to find them read at an
//! earlier block reads them while the others wait for its answer: one read a block, not one a request. Nothing is
//! kept past its block, so what a request is judged on is what it would have read itself.

use alloy::primitives::{Address, Bytes, U256};
use alloy::sol_types::SolCall;

use crate::chain::ChainError;
use crate::chain::Node;
use crate::chain::client::ChainClient;
use crate::chain::delegations::Read;
use crate::chain::userop::{self, ISingletonPaymaster};

/// A chain's parts as read at one block.
#[derive(Debug, Clone, Copy)]
pub struct Parts {
    /// The block they were read at.
    pub block: u64,
    /// The paymaster's deposit at the EntryPoint.
    pub deposit: U256,
    /// The paymaster trusts the sponsor as signer and allows it as bundler.
    pub trusted: bool,
    pub bundler_allowed: bool,
    /// The sponsor's own balance (what it pays a bundle's gas with until the EntryPoint pays it back).
    pub sponsor_balance: U256,
    /// The latest block's time, in seconds (of the block the request found latest).
    pub block_time: u64,
}

/// The last read of a chain's parts, shared by its requests.
#[derive(Debug, Default)]
pub struct SharedParts {
    last: tokio::sync::Mutex<Option<Parts>>,
}

impl SharedParts {
    /// The parts at the latest block of the chain `client` reaches, for the EntryPoint `entry_point`, the paymaster
    /// `paymaster` and the sponsor `sponsor`.
    pub async fn get(
        &self,
        client: &ChainClient,
        (entry_point, paymaster, sponsor): (Address, Address, Address),
    ) -> Result<Parts, ChainError> {
        let (latest, block_time) = client.latest_block().await?;
        let mut last = self.last.lock().await;
        if let Some(parts) = *last
            && parts.block >= latest
        {
            // Read at this block, or at a later one another request found latest meanwhile.
            return Ok(Parts {
                block_time: block_time.max(parts.block_time),
                ..parts
            });
        }
        let parts = read_at(client, (entry_point, paymaster, sponsor), (latest, block_time)).await?;
        *last = Some(parts);
        Ok(parts)
    }
}

/// Reads the parts side by side, at block `block`.
async fn read_at(
    client: &ChainClient,
    (entry_point, paymaster, sponsor): (Address, Address, Address),
    (block, block_time): (u64, u64),
) -> Result<Parts, ChainError> {
    let (deposit, trusted, allowed, balance) = tokio::join!(
        read_uint_at(client, entry_point, userop::deposit_call(paymaster), block),
        read_bool_at(
            client,
            paymaster,
            ISingletonPaymaster::signersCall { account: sponsor }.abi_encode(),
            block
        ),
        read_bool_at(
            client,
            paymaster,
            ISingletonPaymaster::isBundlerAllowedCall { bundler: sponsor }.abi_encode(),
            block
        ),
        client.balance_at(sponsor, block),
    );
    Ok(Parts {
        block,
        deposit: deposit?,
        trusted: trusted?,
        bundler_allowed: allowed?,
        sponsor_balance: balance?,
        block_time,
    })
}

/// A `uint256` read at block `block`.
async fn read_uint_at(client: &ChainClient, to: Address, data: Bytes, block: u64) -> Result<U256, ChainError> {
    match client.read_at(to, data, block).await? {
        Read::Answer(out) => userop::uint_answer(&out).ok_or_else(|| unreadable(client, to)),
        Read::Reverted => Err(unreadable(client, to)),
    }
}

/// A `bool` read at block `block` (a revert reads as `false`).
async fn read_bool_at(client: &ChainClient, to: Address, data: Vec<u8>, block: u64) -> Result<bool, ChainError> {
    match client.read_at(to, data.into(), block).await? {
        Read::Answer(out) => Ok(userop::bool_answer(&out).unwrap_or(false)),
        Read::Reverted => Ok(false),
    }
}

fn unreadable(client: &ChainClient, to: Address) -> ChainError {
    ChainError::Unavailable {
        chain: client.info().name.to_string(),
        reason: format!("{to} did not answer a read the sponsorship needs"),
    }
}
