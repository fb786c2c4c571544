//! Which chains are sponsorable (§22): all three parts configured, and each checked by its answers at start —
//! the paymaster's `entryPoint()` and its `getHash` of a probe operation against agentd's own computation, the
//! implementation's `entryPoint()`, `delegationManager()` and `eip712Domain()` — then the chain's sponsor key made
//! (or opened: one per chain, shared by every instance on the database).

use std::collections::BTreeMap;
use std::sync::Arc;

use alloy::primitives::{Address, Bytes, U256, keccak256};
use alloy::sol_types::{SolCall, SolValue};
use uuid::Uuid;

use super::{SponsorChain, Sponsors};
use crate::chain::Chains;
use crate::chain::Node;
use crate::chain::client::ChainClient;
use crate::chain::delegations::Read;
use crate::chain::userop::{self, IDeleGator, ISingletonPaymaster, PackedUserOperation};
use crate::config::Config;
use crate::domain::chain as registry;
use crate::signer::Keys;
use crate::store::Store;

/// The sponsorable chains: each configured one whose parts check out, with its sponsor key. A chain that does not
/// check out is left out, and the log says why; nothing here stops the start.
pub async fn start(config: &Config, chains: &Chains, store: &Arc<dyn Store>, keys: &Arc<Keys>) -> Sponsors {
    let mut checked = BTreeMap::new();
    for (name, parts) in &config.sponsorship.chains {
        let (Some(entry_point), Some(implementation), Some(paymaster)) =
            (parts.entry_point, parts.account_implementation, parts.paymaster)
        else {
            continue;
        };
        let (Some(chain), Ok(client)) = (registry::find(name), chains.get(name)) else {
            continue;
        };
        let manager = config
            .chains
            .delegation_manager(name)
            .unwrap_or(crate::domain::delegation::deployments::DELEGATION_MANAGER);
        if let Err(why) = check(client, (entry_point, implementation, paymaster, manager)).await {
            tracing::warn!(
                chain = name.as_str(),
                reason = why.as_str(),
                "the chain is not sponsorable"
            );
            continue;
        }
        let key = match sponsor_key(name, store, keys).await {
            Ok(key) => key,
            Err(why) => {
                tracing::error!(
                    chain = name.as_str(),
                    reason = why.as_str(),
                    "the sponsor key could not be opened"
                );
                continue;
            }
        };
        tracing::info!(chain = name.as_str(), sponsor = %key.address(), %paymaster, "the chain is sponsorable");
        checked.insert(
            name.clone(),
            SponsorChain {
                chain,
                entry_point,
                paymaster,
                account_implementation: implementation,
                previous_implementations: parts.previous_implementations.clone(),
                manager,
                key,
                parts: Default::default(),
            },
        );
    }
    Sponsors::new(checked)
}

/// Checks the parts by their answers; `Err` says which does not check out.
pub async fn check(
    client: &ChainClient,
    (entry_point, implementation, paymaster, manager): (Address, Address, Address, Address),
) -> Result<(), String> {
    let answer = |to: Address, data: Vec<u8>| async move {
        match client.read(to, data.into()).await {
            Ok(Read::Answer(out)) => Ok(out),
            Ok(Read::Reverted) => Err(format!("{to} reverted a read")),
            Err(e) => Err(format!("{to} could not be read: {e}")),
        }
    };
    let said = answer(paymaster, ISingletonPaymaster::entryPointCall {}.abi_encode()).await?;
    if userop::address_answer(&said) != Some(entry_point) {
        return Err("the paymaster's entryPoint() is not ENTRY_POINT".into());
    }
    let probe = probe_operation(paymaster);
    let hash = answer(
        paymaster,
        ISingletonPaymaster::getHashCall {
            mode: 0,
            userOp: probe.clone(),
        }
        .abi_encode(),
    )
    .await?;
    let ours = userop::paymaster_hash(&probe, client.info().chain_id).map_err(|e| e.to_string())?;
    if userop::word_answer(&hash) != Some(ours) {
        return Err("the paymaster's getHash differs from SingletonPaymaster v0.7's".into());
    }
    let said = answer(implementation, IDeleGator::entryPointCall {}.abi_encode()).await?;
    if userop::address_answer(&said) != Some(entry_point) {
        return Err("the account implementation's entryPoint() is not ENTRY_POINT".into());
    }
    let said = answer(implementation, IDeleGator::delegationManagerCall {}.abi_encode()).await?;
    if userop::address_answer(&said) != Some(manager) {
        return Err("the account implementation's delegationManager() is not the chain's manager".into());
    }
    let domain = answer(implementation, IDeleGator::eip712DomainCall {}.abi_encode()).await?;
    let domain = IDeleGator::eip712DomainCall::abi_decode_returns(&domain).map_err(|e| e.to_string())?;
    if domain.name != userop::ACCOUNT_DOMAIN_NAME || domain.version != userop::ACCOUNT_DOMAIN_VERSION {
        return Err("the account implementation's eip712Domain() is not EIP7702StatelessDeleGator, version 1".into());
    }
    Ok(())
}

/// An operation whose every field is set, for comparing the paymaster's hash with agentd's.
fn probe_operation(paymaster: Address) -> PackedUserOperation {
    let approval = userop::PaymasterApproval {
        paymaster,
        verification_gas_limit: 80_000,
        valid_until: 1_900_000_000,
        valid_after: 7,
    };
    PackedUserOperation {
        sender: Address::repeat_byte(0x11),
        nonce: U256::from(3),
        initCode: Bytes::from_static(b"init"),
        callData: Bytes::from_static(b"call"),
        accountGasLimits: userop::account_gas_limits(150_000, 90_000),
        preVerificationGas: U256::from(60_000),
        gasFees: userop::gas_fees(1_000_000, 2_000_000_000),
        paymasterAndData: userop::unsigned_paymaster_and_data(&approval).unwrap_or_default(),
        signature: Bytes::new(),
    }
}

/// The id a chain's sponsor key is sealed under (the vault's associated data, the token's label): derived from
/// the chain's name, so that every instance finds the same one.
pub fn sponsor_key_id(chain: &str) -> Uuid {
    let digest = keccak256(format!("agentd sponsor key {chain}").abi_encode_packed());
    let mut bytes = [0u8; 16];
    bytes.copy_from_slice(&digest[..16]);
    Uuid::from_bytes(bytes)
}

/// The chain's sponsor key: the stored one, or one made now (in the token with `KEY_BACKEND=pkcs11`).
async fn sponsor_key(
    chain: &str,
    store: &Arc<dyn Store>,
    keys: &Arc<Keys>,
) -> Result<Arc<dyn crate::signer::WalletSigner>, String> {
    let id = sponsor_key_id(chain);
    let stored = match store.sponsor_key(chain).await.map_err(|e| e.to_string())? {
        Some(key) => key,
        None => {
            let keys2 = keys.clone();
            let made = tokio::task::spawn_blocking(move || keys2.generate(id))
                .await
                .map_err(|e| e.to_string())?
                .map_err(|e| e.to_string())?;
            store
                .init_sponsor_key(chain, id, &made)
                .await
                .map_err(|e| e.to_string())?
        }
    };
    keys.open(id, &stored).map_err(|e| e.to_string())
}
