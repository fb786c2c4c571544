//! Test helper: the real, unmodified Uniswap V2 contracts on a test node — the creation bytecode published on npm in
//! `@uniswap/v2-core` (factory; its pair's code hash is the one the router hard-codes) and `@uniswap/v2-periphery`
//! (`UniswapV2Router02`, `WETH9`), read from `test-tools/node_modules` — with a USDC/WETH pair holding liquidity.
//! USDC is the registry's token on base (a test EIP-3009 token at the canonical address).
#![allow(dead_code)] // Each test file uses a different part of this helper.

use std::path::Path;

use alloy::primitives::{Address, Bytes, U256};
use alloy::sol_types::{SolCall, SolValue};

use crate::anvil::Anvil;
use crate::helpers::solidity::{call_as_dev, deploy, mint, usdc_on_base};

alloy::sol! {
    function approve(address spender, uint256 amount) external returns (bool);
    function addLiquidityETH(address token, uint256 amountTokenDesired, uint256 amountTokenMin, uint256 amountETHMin,
        address to, uint256 deadline) external payable returns (uint256, uint256, uint256);
    function getPair(address tokenA, address tokenB) external view returns (address);
}

/// The contracts of one deployment.
#[derive(Debug, Clone, Copy)]
pub struct Uniswap {
    pub weth: Address,
    pub factory: Address,
    pub router: Address,
    pub usdc: Address,
    pub pair: Address,
}

/// The creation bytecode in an npm build file (`bytecode`, hex without or with `0x`).
fn npm_bytecode(package_file: &str) -> Vec<u8> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("test-tools/node_modules")
        .join(package_file);
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{} ({e}): run npm ci --prefix test-tools", path.display()));
    let build: serde_json::Value = serde_json::from_str(&text).expect("an npm build file is JSON");
    let hex = build["bytecode"].as_str().expect("the build has a bytecode");
    alloy::hex::decode(hex).expect("the bytecode is hex")
}

/// Deploys WETH9, the factory and the router, and a USDC/WETH pair with `usdc` USDC (base units) and `eth` wei of
/// liquidity from anvil's development account.
pub async fn deploy_uniswap(anvil: &Anvil, usdc_liquidity: U256, eth_liquidity: U256) -> Uniswap {
    let dev: Address = Anvil::DEV_ADDRESS.parse().expect("the development account's address");
    let weth = deploy(anvil, npm_bytecode("@uniswap/v2-periphery/build/WETH9.json").into()).await;
    let mut factory_code = npm_bytecode("@uniswap/v2-core/build/UniswapV2Factory.json");
    factory_code.extend(dev.abi_encode());
    let factory = deploy(anvil, factory_code.into()).await;
    let mut router_code = npm_bytecode("@uniswap/v2-periphery/build/UniswapV2Router02.json");
    router_code.extend((factory, weth).abi_encode_params());
    let router = deploy(anvil, router_code.into()).await;
    let usdc = usdc_on_base(anvil).await;

    mint(anvil, usdc, dev, usdc_liquidity).await;
    call_as_dev(
        anvil,
        usdc,
        approveCall {
            spender: router,
            amount: usdc_liquidity,
        }
        .abi_encode()
        .into(),
    )
    .await;
    let add = addLiquidityETHCall {
        token: usdc,
        amountTokenDesired: usdc_liquidity,
        amountTokenMin: U256::ZERO,
        amountETHMin: U256::ZERO,
        to: dev,
        deadline: U256::from(u64::MAX),
    };
    crate::helpers::solidity::call_as_dev_with_value(anvil, router, add.abi_encode().into(), eth_liquidity).await;
    let pair = crate::helpers::solidity::read(
        anvil,
        factory,
        getPairCall {
            tokenA: usdc,
            tokenB: weth,
        }
        .abi_encode()
        .into(),
    )
    .await;
    let pair = Address::from_slice(&pair[12..32]);
    assert_ne!(pair, Address::ZERO, "the pair was made");
    Uniswap {
        weth,
        factory,
        router,
        usdc,
        pair,
    }
}

/// `data` as 0x-hex, as the calls API takes it.
pub fn hex(data: impl Into<Bytes>) -> String {
    alloy::hex::encode_prefixed(data.into())
}

#[tokio::test]
async fn the_published_uniswap_v2_builds_deploy_and_make_a_pool() {
    use crate::helpers::solidity::token_balance;
    let anvil = Anvil::start(crate::helpers::chain::BASE_CHAIN_ID);
    let u = deploy_uniswap(&anvil, U256::from(1_000_000_000_000u64), U256::from(10u128.pow(21))).await;
    assert_eq!(
        token_balance(&anvil, u.usdc, u.pair).await,
        U256::from(1_000_000_000_000u64)
    );
    assert_eq!(token_balance(&anvil, u.weth, u.pair).await, U256::from(10u128.pow(21)));
}
