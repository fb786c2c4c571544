//! Test helper: the real, unmodified MetaMask Delegation Framework v1.3 on a test node — the creation bytecode npm
//! `@metamask/delegation-abis` 2.0.0 ships (read by `test-tools/delegation-bytecode.mjs`): an EntryPoint v0.7, the
//! `DelegationManager` (owned by anvil's development account), the `EIP7702StatelessDeleGator` implementation and
//! the ten enforcers agentd reads. An owner EOA whose key only the test holds is upgraded to the delegator by an
//! EIP-7702 transaction, signs delegations (EIP-712 under the manager's domain) and disables them; any key sends
//! raw transactions (the agent's exported key redeeming directly, without agentd).
#![allow(dead_code)] // Each test file uses a different part of this helper.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

use agentd::domain::delegation::{Caveat, Delegation, IDelegationManager, Kind, ROOT_AUTHORITY};
use alloy::consensus::{SignableTransaction, TxEip1559, TxEip7702, TxEnvelope};
use alloy::eips::eip2718::Encodable2718;
use alloy::eips::eip7702::Authorization;
use alloy::primitives::{Address, B256, Bytes, TxKind, U256};
use alloy::providers::Provider;
use alloy::rpc::types::TransactionReceipt;
use alloy::signers::SignerSync;
use alloy::signers::local::PrivateKeySigner;
use alloy::sol_types::{SolCall, SolValue};
use serde_json::Value;

use crate::anvil::Anvil;
use crate::helpers::solidity::deploy;

/// The framework deployed on one node.
#[derive(Debug, Clone)]
pub struct Framework {
    pub entry_point: Address,
    pub manager: Address,
    /// `EIP7702StatelessDeleGator(manager, entryPoint)`: what an owner EOA designates.
    pub delegator: Address,
    pub enforcers: Vec<(Kind, Address)>,
    pub chain_id: u64,
}

/// What `node test-tools/<script> <args>` prints (JSON), read once per test run: cached under the target directory as
/// `cache`, written whole (a temporary file renamed) so that tests running at once never read half of it.
pub fn node_output_cached(script: &str, args: &[&str], cache: &str) -> String {
    let cache = Path::new(env!("CARGO_TARGET_TMPDIR")).join(cache);
    if let Ok(text) = std::fs::read_to_string(&cache) {
        return text;
    }
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let output = Command::new("node")
        .arg(root.join("test-tools").join(script))
        .args(args)
        .output()
        .expect("node runs (the test tools need Node.js)");
    assert!(
        output.status.success(),
        "{script} could not read what npm installed (npm ci --prefix test-tools?): {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let text = String::from_utf8(output.stdout).expect("JSON text");
    let partial = cache.with_extension(format!("{}.tmp", uuid::Uuid::new_v4().simple()));
    std::fs::write(&partial, &text).expect("the cache is writable");
    std::fs::rename(&partial, &cache).expect("the cache is writable");
    text
}

/// The creation bytecode of each named contract, read once per test run (cached under the target directory).
fn bytecodes(names: &[&str]) -> BTreeMap<String, Bytes> {
    let text = node_output_cached("delegation-bytecode.mjs", names, "delegation-abis-2.0.0.json");
    let parsed: BTreeMap<String, String> = serde_json::from_str(&text).expect("a JSON object of hex strings");
    parsed
        .into_iter()
        .map(|(name, hex)| (name, hex.parse().expect("bytecode is hex")))
        .collect()
}

impl Framework {
    /// Deploys the EntryPoint, the manager, the 7702 delegator implementation and every enforcer of `Kind::ALL`.
    pub async fn deploy(anvil: &Anvil, chain_id: u64) -> Framework {
        let mut names = vec!["EntryPoint", "DelegationManager", "EIP7702StatelessDeleGator"];
        names.extend(Kind::ALL.iter().map(|k| k.contract()));
        let code = bytecodes(&names);
        let creation = |name: &str, args: Vec<u8>| -> Bytes { [code[name].to_vec(), args].concat().into() };
        let dev: Address = Anvil::DEV_ADDRESS.parse().unwrap();
        let entry_point = deploy(anvil, creation("EntryPoint", Vec::new())).await;
        let manager = deploy(anvil, creation("DelegationManager", dev.abi_encode())).await;
        let delegator = deploy(
            anvil,
            creation("EIP7702StatelessDeleGator", (manager, entry_point).abi_encode_params()),
        )
        .await;
        let mut enforcers = Vec::new();
        for kind in Kind::ALL {
            enforcers.push((kind, deploy(anvil, creation(kind.contract(), Vec::new())).await));
        }
        Framework {
            entry_point,
            manager,
            delegator,
            enforcers,
            chain_id,
        }
    }

    pub fn enforcer(&self, kind: Kind) -> Address {
        self.enforcers.iter().find(|(k, _)| *k == kind).expect("deployed").1
    }

    /// `DELEGATION_MANAGER_BASE` and `DELEGATION_ENFORCERS_BASE` naming this deployment.
    pub fn vars(&self) -> Vec<(String, String)> {
        let enforcers: Vec<String> = self
            .enforcers
            .iter()
            .map(|(k, a)| format!("{}={a}", k.name()))
            .collect();
        vec![
            ("DELEGATION_MANAGER_BASE".into(), self.manager.to_string()),
            ("DELEGATION_ENFORCERS_BASE".into(), enforcers.join(",")),
        ]
    }

    /// What the deployed manager answers to `data`.
    pub async fn call_manager(&self, anvil: &Anvil, data: Vec<u8>) -> Bytes {
        crate::helpers::solidity::read(anvil, self.manager, data.into()).await
    }

    /// The manager's own `getDelegationHash`.
    pub async fn delegation_hash(&self, anvil: &Anvil, delegation: &Delegation) -> B256 {
        let out = self
            .call_manager(
                anvil,
                IDelegationManager::getDelegationHashCall {
                    input: delegation.abi(),
                }
                .abi_encode(),
            )
            .await;
        IDelegationManager::getDelegationHashCall::abi_decode_returns(&out).expect("a bytes32")
    }

    /// The manager's own `getDomainHash`.
    pub async fn domain_hash(&self, anvil: &Anvil) -> B256 {
        let out = self
            .call_manager(anvil, IDelegationManager::getDomainHashCall {}.abi_encode())
            .await;
        IDelegationManager::getDomainHashCall::abi_decode_returns(&out).expect("a bytes32")
    }

    /// A root delegation from `owner` to `delegate` with `caveats` (`(kind, terms)`, empty args), signed by `owner`.
    pub fn grant(
        &self,
        owner: &PrivateKeySigner,
        delegate: Address,
        caveats: &[(Kind, Vec<u8>)],
        salt: u64,
    ) -> Delegation {
        let mut delegation = Delegation {
            delegate,
            delegator: owner.address(),
            authority: ROOT_AUTHORITY,
            caveats: caveats
                .iter()
                .map(|(kind, terms)| Caveat {
                    enforcer: self.enforcer(*kind),
                    terms: terms.clone().into(),
                    args: Bytes::new(),
                })
                .collect(),
            salt: U256::from(salt),
            signature: Bytes::new(),
        };
        self.sign(owner, &mut delegation);
        delegation
    }

    /// Signs `delegation` as `signer` (EIP-712 under this manager's domain; 65 bytes r ‖ s ‖ v).
    pub fn sign(&self, signer: &PrivateKeySigner, delegation: &mut Delegation) {
        let digest = delegation.digest(self.chain_id, self.manager);
        let signature = signer.sign_hash_sync(&digest).expect("signing");
        delegation.signature = signature.as_bytes().to_vec().into();
    }

    /// The delegator disables `delegation` on chain (`disableDelegation` sent by the delegator's own EOA).
    pub async fn disable(
        &self,
        anvil: &Anvil,
        owner: &PrivateKeySigner,
        delegation: &Delegation,
    ) -> TransactionReceipt {
        let data = IDelegationManager::disableDelegationCall {
            delegation: delegation.abi(),
        }
        .abi_encode();
        send_as_key(anvil, owner, self.manager, U256::ZERO, data.into(), 300_000).await
    }
}

impl Framework {
    /// The delegator enables a disabled `delegation` again (`enableDelegation`).
    pub async fn enable(&self, anvil: &Anvil, owner: &PrivateKeySigner, delegation: &Delegation) -> TransactionReceipt {
        let data = IDelegationManager::enableDelegationCall {
            delegation: delegation.abi(),
        }
        .abi_encode();
        send_as_key(anvil, owner, self.manager, U256::ZERO, data.into(), 300_000).await
    }
}

/// The framework's JSON form of `delegation`, as a client posts it.
pub fn delegation_json(delegation: &Delegation) -> Value {
    agentd::delegations::canonical_json(delegation)
}

/// Upgrades the EOA of `owner` to `implementation` (an EIP-7702 type-4 transaction sent and paid by anvil's
/// development account; the authorization is signed by `owner`, whose key stays with the test).
pub async fn upgrade_to_delegator(anvil: &Anvil, owner: &PrivateKeySigner, implementation: Address, chain_id: u64) {
    let p = anvil.provider();
    let authorization = Authorization {
        chain_id: U256::from(chain_id),
        address: implementation,
        nonce: p.get_transaction_count(owner.address()).await.expect("nonce"),
    };
    let signature = owner.sign_hash_sync(&authorization.signature_hash()).expect("signing");
    let sponsor = crate::helpers::parse_private_key(Anvil::DEV_PRIVATE_KEY);
    let tx = TxEip7702 {
        chain_id,
        nonce: p.get_transaction_count(sponsor.address()).await.expect("nonce"),
        gas_limit: 200_000,
        max_fee_per_gas: 20_000_000_000,
        max_priority_fee_per_gas: 1_000_000_000,
        to: owner.address(),
        value: U256::ZERO,
        access_list: Default::default(),
        authorization_list: vec![authorization.into_signed(signature)],
        input: Bytes::new(),
    };
    let signature = sponsor.sign_hash_sync(&tx.signature_hash()).expect("signing");
    let raw = TxEnvelope::from(tx.into_signed(signature)).encoded_2718();
    let hash = *p
        .send_raw_transaction(&raw)
        .await
        .expect("the node takes the type-4 transaction")
        .tx_hash();
    let receipt = anvil.receipt(hash).await;
    assert!(receipt.status(), "the EIP-7702 upgrade succeeded");
    let code = p.get_code_at(owner.address()).await.expect("eth_getCode");
    assert_eq!(
        &code[..3],
        &[0xef, 0x01, 0x00],
        "the owner's code is a 7702 designation"
    );
    assert_eq!(&code[3..], implementation.as_slice());
}

/// Signs with `signer` and sends one EIP-1559 transaction (the key pays the gas), then waits for its receipt;
/// a revert is reported in the receipt, not a panic.
pub async fn send_as_key(
    anvil: &Anvil,
    signer: &PrivateKeySigner,
    to: Address,
    value: U256,
    input: Bytes,
    gas_limit: u64,
) -> TransactionReceipt {
    let p = anvil.provider();
    let tx = TxEip1559 {
        chain_id: p.get_chain_id().await.expect("eth_chainId"),
        nonce: p.get_transaction_count(signer.address()).await.expect("nonce"),
        gas_limit,
        max_fee_per_gas: 20_000_000_000,
        max_priority_fee_per_gas: 1_000_000_000,
        to: TxKind::Call(to),
        value,
        access_list: Default::default(),
        input,
    };
    let signature = signer.sign_hash_sync(&tx.signature_hash()).expect("signing");
    let raw = TxEnvelope::from(tx.into_signed(signature)).encoded_2718();
    let hash = *p
        .send_raw_transaction(&raw)
        .await
        .expect("the node takes the transaction")
        .tx_hash();
    anvil.receipt(hash).await
}

/// A transaction from `from` sent by the node itself (anvil's impersonation): money moved on chain outside agentd
/// from an agent's address, whichever key backend holds its key (a PKCS#11 key cannot be exported).
pub async fn send_as_address(
    anvil: &Anvil,
    from: Address,
    to: Address,
    value: U256,
    input: Bytes,
) -> TransactionReceipt {
    let p = anvil.provider();
    let _: Value = p
        .raw_request("anvil_impersonateAccount".into(), (from,))
        .await
        .expect("anvil impersonates the address");
    let tx = serde_json::json!({"from": from, "to": to, "value": value, "data": input, "gas": "0x7a120"});
    let hash: B256 = p
        .raw_request("eth_sendTransaction".into(), (tx,))
        .await
        .expect("the node takes the transaction");
    let _: Value = p
        .raw_request("anvil_stopImpersonatingAccount".into(), (from,))
        .await
        .expect("anvil stops impersonating");
    anvil.receipt(hash).await
}

/// Big-endian 32-byte word of `n`.
pub fn word(n: U256) -> [u8; 32] {
    n.to_be_bytes::<32>()
}

/// `ERC20PeriodTransferEnforcer` terms.
pub fn erc20_period_terms(token: Address, amount: U256, period: u64, start: u64) -> Vec<u8> {
    [
        token.as_slice(),
        &word(amount),
        &word(U256::from(period)),
        &word(U256::from(start)),
    ]
    .concat()
}

/// `NativeTokenPeriodTransferEnforcer` terms.
pub fn native_period_terms(amount: U256, period: u64, start: u64) -> Vec<u8> {
    [word(amount), word(U256::from(period)), word(U256::from(start))].concat()
}

/// The latest block's timestamp (the chain's clock).
pub async fn chain_now(anvil: &Anvil) -> u64 {
    let block = anvil
        .provider()
        .get_block_by_number(alloy::eips::BlockNumberOrTag::Latest)
        .await
        .expect("eth_getBlockByNumber")
        .expect("a latest block");
    block.header.timestamp
}
