//! Test helper: Pimlico's real, unmodified `SingletonPaymaster` v0.7 on a test node — the creation code npm
//! `@pimlico/mock-paymaster` 0.0.7 ships (read by `test-tools/paymaster-bytecode.mjs`) — deployed against the test's
//! own EntryPoint v0.7 (`delegation_framework::Framework`), owned and managed by anvil's development account, with
//! no signer until the test adds one. The owner's part of §22: trusting a signer, allowlisting a bundler, funding
//! the deposit.
#![allow(dead_code)] // Each test file uses a different part of this helper.

use alloy::primitives::{Address, Bytes, U256};
use alloy::sol_types::{SolCall, SolConstructor, SolValue};

use crate::anvil::Anvil;
use crate::helpers::solidity::{call_as_dev, call_as_dev_with_value, deploy, read};

alloy::sol! {
    /// The owner's functions of the deployed `SingletonPaymaster` v0.7 (read from its bytecode; the package's
    /// `singletonPaymaster07Abi` describes an older contract).
    contract SingletonPaymasterV7 {
        constructor(address entryPoint, address owner, address manager, address[] signers);
        function addSigner(address signer) external;
        function removeSigner(address signer) external;
        function updateBundlerAllowlist(address[] bundlers, bool allowed) external;
        function deposit() external payable;
    }

    /// The EntryPoint's deposit of an account.
    function balanceOf(address account) external view returns (uint256);
}

/// One deployed paymaster.
#[derive(Debug, Clone, Copy)]
pub struct Paymaster {
    pub address: Address,
    pub entry_point: Address,
}

/// The paymaster's creation code, read once per test run (cached under the target directory).
fn creation_code() -> Bytes {
    let text = crate::helpers::delegation_framework::node_output_cached(
        "paymaster-bytecode.mjs",
        &[],
        "pimlico-mock-paymaster-0.0.7.json",
    );
    let parsed: serde_json::Value = serde_json::from_str(&text).expect("a JSON object");
    parsed["SingletonPaymasterV7"]
        .as_str()
        .expect("the paymaster's creation code")
        .parse()
        .expect("bytecode is hex")
}

impl Paymaster {
    /// Deploys `SingletonPaymaster(entryPoint, owner = manager = anvil's development account, signers = [])`.
    pub async fn deploy(anvil: &Anvil, entry_point: Address) -> Paymaster {
        let dev: Address = Anvil::DEV_ADDRESS.parse().unwrap();
        let arguments = SingletonPaymasterV7::constructorCall {
            entryPoint: entry_point,
            owner: dev,
            manager: dev,
            signers: Vec::new(),
        }
        .abi_encode();
        let creation = [creation_code().to_vec(), arguments].concat();
        let address = deploy(anvil, creation.into()).await;
        Paymaster { address, entry_point }
    }

    /// `addSigner(signer)` by the owner: the paymaster trusts `signer`'s approvals.
    pub async fn add_signer(&self, anvil: &Anvil, signer: Address) {
        let data = SingletonPaymasterV7::addSignerCall { signer }.abi_encode();
        call_as_dev(anvil, self.address, data.into()).await;
    }

    /// `removeSigner(signer)` by the owner.
    pub async fn remove_signer(&self, anvil: &Anvil, signer: Address) {
        let data = SingletonPaymasterV7::removeSignerCall { signer }.abi_encode();
        call_as_dev(anvil, self.address, data.into()).await;
    }

    /// `updateBundlerAllowlist(bundlers, allowed)` by the owner.
    pub async fn allow_bundlers(&self, anvil: &Anvil, bundlers: &[Address], allowed: bool) {
        let data = SingletonPaymasterV7::updateBundlerAllowlistCall {
            bundlers: bundlers.to_vec(),
            allowed,
        }
        .abi_encode();
        call_as_dev(anvil, self.address, data.into()).await;
    }

    /// `deposit()` with `value` wei from the development account: the paymaster's deposit at the EntryPoint.
    pub async fn deposit(&self, anvil: &Anvil, value: U256) {
        let data = SingletonPaymasterV7::depositCall {}.abi_encode();
        call_as_dev_with_value(anvil, self.address, data.into(), value).await;
    }

    /// The paymaster's deposit at the EntryPoint (`EntryPoint.balanceOf(paymaster)`), at the latest block.
    pub async fn deposit_balance(&self, anvil: &Anvil) -> U256 {
        let data = balanceOfCall { account: self.address }.abi_encode();
        let out = read(anvil, self.entry_point, data.into()).await;
        U256::abi_decode(&out).expect("a uint256")
    }

    /// The owner's setup of §22 for `sponsor`: trusted signer, allowlisted bundler, and `deposit` wei deposited.
    pub async fn sponsor(&self, anvil: &Anvil, sponsor: Address, deposit: U256) {
        self.add_signer(anvil, sponsor).await;
        self.allow_bundlers(anvil, &[sponsor], true).await;
        self.deposit(anvil, deposit).await;
    }
}
