//! What a sponsorable chain's parts say now (§22 `GET /api/chains` `sponsorship`): whether the paymaster trusts
//! the sponsor and allows it as bundler, every signer its `SignerAdded`/`SignerRemoved` logs leave trusted, the
//! deposit it holds at the EntryPoint and the sponsor's own balance, all read at the latest block.

use alloy::primitives::{Address, U256};
use alloy::sol_types::{SolCall, SolEvent};

use super::SponsorChain;
use crate::chain::Node;
use crate::chain::client::ChainClient;
use crate::chain::delegations::Read;
use crate::chain::userop::{self, ISingletonPaymaster};

/// A sponsorable chain's parts as read.
#[derive(Debug, Clone)]
pub struct Status {
    pub trusted: bool,
    pub bundler_allowed: bool,
    /// Every address the paymaster's signer logs leave trusted, the sponsor first when it is one.
    pub signers: Vec<Address>,
    pub deposit: U256,
    pub sponsor_balance: U256,
}

impl Status {
    /// Some signer is not the sponsor: the deposit is not agentd's alone.
    pub fn shared(&self, sponsor: Address) -> bool {
        self.signers.iter().any(|s| *s != sponsor)
    }
}

/// Reads `sponsor`'s parts on `client`.
pub async fn read(client: &ChainClient, sponsor: &SponsorChain) -> Result<Status, crate::chain::ChainError> {
    let address = sponsor.key.address();
    let call = |to: Address, data: Vec<u8>| async move {
        match client.read(to, data.into()).await? {
            Read::Answer(out) => Ok(out.to_vec()),
            Read::Reverted => Ok(Vec::new()),
        }
    };
    let (trusted, allowed, deposit, balance, signers) = tokio::join!(
        call(
            sponsor.paymaster,
            ISingletonPaymaster::signersCall { account: address }.abi_encode()
        ),
        call(
            sponsor.paymaster,
            ISingletonPaymaster::isBundlerAllowedCall { bundler: address }.abi_encode()
        ),
        call(sponsor.entry_point, userop::deposit_call(sponsor.paymaster).to_vec()),
        client.balance(address),
        signers(client, sponsor.paymaster),
    );
    Ok(Status {
        trusted: userop::bool_answer(&trusted?).unwrap_or(false),
        bundler_allowed: userop::bool_answer(&allowed?).unwrap_or(false),
        deposit: userop::uint_answer(&deposit?).unwrap_or_default(),
        sponsor_balance: balance?,
        signers: signers?,
    })
}

/// The signers the paymaster's `SignerAdded`/`SignerRemoved` logs leave trusted, in the order they were added.
async fn signers(client: &ChainClient, paymaster: Address) -> Result<Vec<Address>, crate::chain::ChainError> {
    let added = ISingletonPaymaster::SignerAdded::SIGNATURE_HASH;
    let removed = ISingletonPaymaster::SignerRemoved::SIGNATURE_HASH;
    let logs = client.logs_of(paymaster, vec![added, removed]).await?;
    let mut trusted: Vec<Address> = Vec::new();
    for log in logs {
        let Some(topic) = log.topics().first() else { continue };
        if *topic == added {
            if let Ok(event) = ISingletonPaymaster::SignerAdded::decode_log_data(&log.data)
                && !trusted.contains(&event.signer)
            {
                trusted.push(event.signer);
            }
        } else if let Ok(event) = ISingletonPaymaster::SignerRemoved::decode_log_data(&log.data) {
            trusted.retain(|s| *s != event.signer);
        }
    }
    Ok(trusted)
}
