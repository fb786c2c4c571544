//! Test helper: Solidity contracts of `tests/contracts/`, compiled with npm `solc` (solc-js, in `test-tools/`, with
//! OpenZeppelin's sources from npm `@openzeppelin/contracts`), and deployed on a test node from anvil's first
//! development account. A compiled contract is cached on disk under the target directory, keyed by its source, so
//! a test run compiles each contract once.
#![allow(dead_code)] // Each test file uses a different part of this helper.

use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};
use std::process::Command;

use alloy::primitives::{Address, Bytes, TxHash};
use alloy::providers::Provider;
use serde_json::{Value, json};

use crate::anvil::Anvil;

/// The creation bytecode of `contract` in `tests/contracts/<file>` (without constructor arguments).
pub fn bytecode(file: &str, contract: &str) -> Bytes {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let source_path = root.join("tests/contracts").join(file);
    let source = std::fs::read_to_string(&source_path)
        .unwrap_or_else(|e| panic!("could not read {}: {e}", source_path.display()));
    compiled(
        contract,
        &source,
        &[
            root.join("test-tools/solc-compile.mjs"),
            source_path.clone(),
            contract.into(),
        ],
    )
}

/// Uniswap's Permit2 as npm ships its source (`test-tools/solc-permit2.mjs`): creation bytecode.
pub fn permit2_bytecode() -> Bytes {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let script = root.join("test-tools/solc-permit2.mjs");
    let source = std::fs::read_to_string(&script).expect("the Permit2 build script is there");
    compiled("Permit2", &source, &[script])
}

/// What `node <args>` prints as `{"bytecode"}`, cached under `name` and a hash of `source` (a compile takes seconds).
fn compiled(name: &str, source: &str, args: &[PathBuf]) -> Bytes {
    let mut hasher = DefaultHasher::new();
    (source, name).hash(&mut hasher);
    let cache = cache_dir().join(format!("{name}-{:016x}.hex", hasher.finish()));
    if let Ok(hex) = std::fs::read_to_string(&cache) {
        return hex.trim().parse().expect("the cached bytecode is hex");
    }
    let output = Command::new("node")
        .args(args)
        .output()
        .expect("node runs (the test tools need Node.js)");
    assert!(
        output.status.success(),
        "solc could not compile {name} (npm ci --prefix test-tools?): {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let compiled: Value = serde_json::from_slice(&output.stdout).expect("the compile script prints JSON");
    let hex = compiled["bytecode"]
        .as_str()
        .expect("the output has a bytecode")
        .to_owned();
    // Written to a temporary name of its own first (tests of one process run side by side and may compile the same
    // contract at once), so a parallel test never reads half a file nor renames another's away.
    let partial = cache.with_extension(format!("{}.tmp", uuid::Uuid::new_v4().simple()));
    std::fs::write(&partial, &hex).expect("the compile cache is writable");
    std::fs::rename(&partial, &cache).expect("the compile cache is writable");
    hex.parse().expect("solc's bytecode is hex")
}

/// Permit2 deployed and its code put at its canonical address (where the service knows it): deployed elsewhere
/// first, since its constructor keeps its domain separator (signatures are not used here; allowances are).
pub async fn permit2_at_canonical_address(anvil: &Anvil) -> Address {
    let deployed = deploy(anvil, permit2_bytecode()).await;
    let canonical: Address = "0x000000000022D473030F116dDEE9F6B43aC78BA3".parse().unwrap();
    copy_code(anvil, deployed, canonical).await;
    canonical
}

fn cache_dir() -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("solc");
    std::fs::create_dir_all(&dir).expect("the compile cache directory can be made");
    dir
}

/// Deploys `creation` (bytecode followed by its ABI-encoded constructor arguments) from anvil's first development
/// account (unlocked on the node) and returns the new contract's address.
pub async fn deploy(anvil: &Anvil, creation: Bytes) -> Address {
    let hash: TxHash = anvil
        .provider()
        .raw_request(
            "eth_sendTransaction".into(),
            (json!({"from": Anvil::DEV_ADDRESS, "data": creation, "gas": "0x1c9c380"}),),
        )
        .await
        .expect("eth_sendTransaction of a contract creation");
    let receipt = mined(anvil, hash).await;
    assert!(receipt.status(), "the contract creation succeeded");
    receipt.contract_address.expect("a creation receipt names the contract")
}

/// Sends `data` to `contract` from anvil's first development account and waits for it to succeed
/// (e.g. a token's `mint`).
pub async fn call_as_dev(anvil: &Anvil, contract: Address, data: Bytes) {
    let hash: TxHash = anvil
        .provider()
        .raw_request(
            "eth_sendTransaction".into(),
            (json!({"from": Anvil::DEV_ADDRESS, "to": contract, "data": data}),),
        )
        .await
        .expect("eth_sendTransaction");
    assert!(mined(anvil, hash).await.status(), "the call to {contract} succeeded");
}

/// Sends `data` with `value` wei to `contract` from anvil's first development account and waits for it to succeed.
pub async fn call_as_dev_with_value(anvil: &Anvil, contract: Address, data: Bytes, value: alloy::primitives::U256) {
    let hash: TxHash = anvil
        .provider()
        .raw_request(
            "eth_sendTransaction".into(),
            (json!({"from": Anvil::DEV_ADDRESS, "to": contract, "data": data, "value": value, "gas": "0x7a1200"}),),
        )
        .await
        .expect("eth_sendTransaction");
    assert!(mined(anvil, hash).await.status(), "the call to {contract} succeeded");
}

/// What `contract` answers to `data` (`eth_call` at the latest block).
pub async fn read(anvil: &Anvil, contract: Address, data: Bytes) -> Bytes {
    anvil
        .provider()
        .raw_request("eth_call".into(), (json!({"to": contract, "data": data}), "latest"))
        .await
        .expect("eth_call")
}

/// The receipt of `hash` once the node has mined it (anvil's automine answers before the block is sealed).
async fn mined(anvil: &Anvil, hash: TxHash) -> alloy::rpc::types::TransactionReceipt {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        if let Some(receipt) = anvil
            .provider()
            .get_transaction_receipt(hash)
            .await
            .expect("eth_getTransactionReceipt")
        {
            return receipt;
        }
        assert!(std::time::Instant::now() < deadline, "{hash} was not mined within 10 s");
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
}

/// Copies the runtime code at `from` to `to` (anvil_setCode), e.g. a test token to USDC's canonical address.
/// Immutables travel with the code; storage (balances, name, symbol) does not.
pub async fn copy_code(anvil: &Anvil, from: Address, to: Address) {
    let code = anvil.provider().get_code_at(from).await.expect("eth_getCode");
    set_code(anvil, to, code).await;
}

/// Puts `code` at `to` (anvil_setCode).
pub async fn set_code(anvil: &Anvil, to: Address, code: alloy::primitives::Bytes) {
    let _: Value = anvil
        .provider()
        .raw_request("anvil_setCode".into(), (to, code))
        .await
        .expect("anvil_setCode");
}

alloy::sol! {
    /// The parts of `tests/contracts/TestToken.sol` the tests call.
    contract TestToken {
        constructor(string name_, string symbol_, uint8 decimals_);
        function decimals() external view returns (uint8);
        function balanceOf(address owner) external view returns (uint256);
        function mint(address to, uint256 amount) external;
    }
}

/// Deploys a fresh `TestToken` with `decimals` and returns its address.
pub async fn deploy_test_token(anvil: &Anvil, name: &str, symbol: &str, decimals: u8) -> Address {
    use alloy::sol_types::SolConstructor;
    let mut creation = bytecode("TestToken.sol", "TestToken").to_vec();
    creation.extend(TestToken::constructorCall::new((name.to_owned(), symbol.to_owned(), decimals)).abi_encode());
    deploy(anvil, creation.into()).await
}

/// Mints `amount` base units of the test token at `token` to `to`.
pub async fn mint(anvil: &Anvil, token: Address, to: Address, amount: alloy::primitives::U256) {
    use alloy::sol_types::SolCall;
    call_as_dev(anvil, token, TestToken::mintCall { to, amount }.abi_encode().into()).await;
}

/// The token balance of `owner` on the node (`balanceOf`).
pub async fn token_balance(anvil: &Anvil, token: Address, owner: Address) -> alloy::primitives::U256 {
    use alloy::sol_types::SolCall;
    let data: Bytes = TestToken::balanceOfCall { owner }.abi_encode().into();
    let out: Bytes = anvil
        .provider()
        .raw_request("eth_call".into(), (json!({"to": token, "data": data}), "latest"))
        .await
        .expect("eth_call balanceOf");
    TestToken::balanceOfCall::abi_decode_returns(&out).expect("balanceOf returns a uint256")
}

#[tokio::test]
async fn a_test_token_compiles_deploys_mints_and_survives_a_code_copy() {
    use alloy::primitives::U256;
    let anvil = Anvil::start(31337);
    let token = deploy_test_token(&anvil, "Test Dollar", "TUSD", 6).await;
    let holder: Address = "0x00000000000000000000000000000000000000a1".parse().unwrap();
    mint(&anvil, token, holder, U256::from(5_000_000u64)).await;
    assert_eq!(token_balance(&anvil, token, holder).await, U256::from(5_000_000u64));
    // The code copied elsewhere still works (decimals is an immutable); balances start empty there.
    let copy: Address = "0x00000000000000000000000000000000000000b2".parse().unwrap();
    copy_code(&anvil, token, copy).await;
    mint(&anvil, copy, holder, U256::from(7u64)).await;
    assert_eq!(token_balance(&anvil, copy, holder).await, U256::from(7u64));
    use alloy::sol_types::SolCall;
    let out: Bytes = anvil
        .provider()
        .raw_request(
            "eth_call".into(),
            (
                json!({"to": copy, "data": Bytes::from(TestToken::decimalsCall {}.abi_encode())}),
                "latest",
            ),
        )
        .await
        .expect("eth_call decimals");
    assert_eq!(TestToken::decimalsCall::abi_decode_returns(&out).unwrap(), 6);
}

alloy::sol! {
    /// The parts of `tests/contracts/Eip3009Token.sol` the tests call (balances and `mint` as `TestToken`'s).
    contract Eip3009Token {
        constructor(string name_, string version_, string symbol_);
        function authorizationState(address authorizer, bytes32 nonce) external view returns (bool);
        function transferWithAuthorization(address from, address to, uint256 value, uint256 validAfter,
            uint256 validBefore, bytes32 nonce, bytes signature) external;
        function name() external view returns (string);
        function DOMAIN_SEPARATOR() external view returns (bytes32);
    }
}

/// USDC's canonical address on base (§13), where `usdc_on_base` puts the EIP-3009 test token.
pub const USDC_BASE: &str = "0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913";

/// Deploys a fresh `Eip3009Token` (6 decimals) whose EIP-712 domain is `name`/`version`.
pub async fn deploy_eip3009_token(anvil: &Anvil, name: &str, version: &str, symbol: &str) -> Address {
    use alloy::sol_types::SolConstructor;
    let mut creation = bytecode("Eip3009Token.sol", "Eip3009Token").to_vec();
    creation.extend(
        Eip3009Token::constructorCall::new((name.to_owned(), version.to_owned(), symbol.to_owned())).abi_encode(),
    );
    deploy(anvil, creation.into()).await
}

/// An EIP-3009 token at USDC's address on base with USDC's domain there ("USD Coin", version "2"), as x402 servers
/// name it: deployed elsewhere, then its code copied over.
pub async fn usdc_on_base(anvil: &Anvil) -> Address {
    let deployed = deploy_eip3009_token(anvil, "USD Coin", "2", "USDC").await;
    let usdc: Address = USDC_BASE.parse().unwrap();
    copy_code(anvil, deployed, usdc).await;
    usdc
}

/// Whether `authorizer`'s authorization `nonce` is used or cancelled on `token`.
pub async fn authorization_state(
    anvil: &Anvil,
    token: Address,
    authorizer: Address,
    nonce: alloy::primitives::B256,
) -> bool {
    use alloy::sol_types::SolCall;
    let data: Bytes = Eip3009Token::authorizationStateCall { authorizer, nonce }
        .abi_encode()
        .into();
    let out: Bytes = anvil
        .provider()
        .raw_request("eth_call".into(), (json!({"to": token, "data": data}), "latest"))
        .await
        .expect("eth_call authorizationState");
    Eip3009Token::authorizationStateCall::abi_decode_returns(&out).expect("authorizationState returns a bool")
}

/// Sends `data` to `contract` from `from` (an account the node holds unlocked, e.g. one of anvil's development
/// accounts) and returns the transaction hash and whether it succeeded. A revert is reported, not a panic.
pub async fn send_as(anvil: &Anvil, from: Address, contract: Address, data: Bytes) -> (TxHash, bool) {
    let hash: TxHash = anvil
        .provider()
        .raw_request(
            "eth_sendTransaction".into(),
            (json!({"from": from, "to": contract, "data": data, "gas": "0x7a120"}),),
        )
        .await
        .expect("eth_sendTransaction");
    (hash, mined(anvil, hash).await.status())
}
