//! On-chain delegations (§21) against the real, unmodified MetaMask Delegation Framework v1.3 on anvil: agentd's
//! hashes, terms and redemption encoding checked against the deployed contracts; a redemption built by agentd
//! spending from the owner's account, and the agent's own key refused by the chain beyond the period; registration
//! through the HTTP API with each of §21's refusals in order, listing with `available`, removal, and a revocation
//! on chain noticed. Money assertions read the chain.

use agentd::domain::delegation::{self as rules, Delegation, Kind, Terms};
use alloy::primitives::{Address, B256, Bytes, U256};
use alloy::signers::local::PrivateKeySigner;
use alloy::sol_types::SolCall;
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use crate::anvil::Anvil;
use crate::helpers::chain::{BASE_CHAIN_ID, ONE_ETH, fresh_address, transfer_app, wallet, wei};
use crate::helpers::delegation_framework::{
    Framework, chain_now, delegation_json, erc20_period_terms, native_period_terms, send_as_address, send_as_key,
    upgrade_to_delegator, word,
};
use crate::helpers::solidity::{mint, token_balance, usdc_on_base};
use crate::helpers::{CreatedAgent, TestApp, assert_error};

const ADMIN: &str = "admin-token-for-delegation-tests-0123456789";
const DAY: u64 = 86_400;
/// 1 USDC in base units (6 decimals).
const USDC: u64 = 1_000_000;

alloy::sol! {
    function transfer(address to, uint256 amount) external returns (bool);
    function getTermsInfo(bytes terms) external view returns (bytes);
}

/// A node with the framework, an owner EOA upgraded to the 7702 delegator holding 100 USDC and 10 ETH.
struct World {
    anvil: Anvil,
    framework: Framework,
    owner: PrivateKeySigner,
    usdc: Address,
}

async fn world() -> World {
    let anvil = Anvil::start(BASE_CHAIN_ID);
    let framework = Framework::deploy(&anvil, BASE_CHAIN_ID).await;
    let owner = PrivateKeySigner::random();
    anvil.set_balance(owner.address(), wei(10 * ONE_ETH)).await;
    upgrade_to_delegator(&anvil, &owner, framework.delegator, BASE_CHAIN_ID).await;
    let usdc = usdc_on_base(&anvil).await;
    mint(&anvil, usdc, owner.address(), U256::from(100 * USDC)).await;
    World {
        anvil,
        framework,
        owner,
        usdc,
    }
}

impl World {
    /// A daily budget of `amount` USDC base units to `delegate`, started an hour ago on the chain's clock.
    async fn daily_usdc(&self, delegate: Address, amount: u64, salt: u64) -> Delegation {
        let start = chain_now(&self.anvil).await - 3600;
        self.framework.grant(
            &self.owner,
            delegate,
            &[(
                Kind::Erc20PeriodTransfer,
                erc20_period_terms(self.usdc, U256::from(amount), DAY, start),
            )],
            salt,
        )
    }

    async fn app(&self) -> TestApp {
        self.app_with(&[]).await
    }

    async fn app_with(&self, more: &[(&str, &str)]) -> TestApp {
        let vars = self.framework.vars();
        let mut extra: Vec<(&str, &str)> = vars.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        extra.push(("ADMIN_TOKEN", ADMIN));
        extra.extend_from_slice(more);
        transfer_app(&self.anvil, &extra).await
    }
}

/// The agent's own key redeems `delegation` directly (without agentd) for `USDC.transfer(to, amount)`.
async fn redeem_usdc(world: &World, key: &PrivateKeySigner, delegation: &Delegation, to: Address, amount: u64) -> bool {
    let calldata = transferCall {
        to,
        amount: U256::from(amount),
    }
    .abi_encode();
    let redemption = rules::redemption(delegation, world.usdc, U256::ZERO, &calldata);
    let receipt = send_as_key(
        &world.anvil,
        key,
        world.framework.manager,
        U256::ZERO,
        redemption,
        500_000,
    )
    .await;
    receipt.status()
}

/// The same redemption sent from the delegate's address by the node (outside agentd, whatever holds its key).
async fn redeem_usdc_outside(
    world: &World,
    delegate: Address,
    delegation: &Delegation,
    to: Address,
    amount: u64,
) -> bool {
    let calldata = transferCall {
        to,
        amount: U256::from(amount),
    }
    .abi_encode();
    let redemption = rules::redemption(delegation, world.usdc, U256::ZERO, &calldata);
    let receipt = send_as_address(&world.anvil, delegate, world.framework.manager, U256::ZERO, redemption).await;
    receipt.status()
}

#[tokio::test]
async fn agentds_hash_domain_and_terms_are_the_deployed_frameworks() {
    let world = world().await;
    let delegation = world.daily_usdc(fresh_address(), 5 * USDC, 7).await;
    assert_eq!(
        world.framework.domain_hash(&world.anvil).await,
        rules::domain_hash(BASE_CHAIN_ID, world.framework.manager)
    );
    assert_eq!(
        world.framework.delegation_hash(&world.anvil, &delegation).await,
        delegation.hash()
    );
    // Each enforcer's `getTermsInfo` accepts the terms agentd decodes, and refuses one byte less.
    let mut ts = [0u8; 32];
    ts[15] = 1;
    ts[31] = 200;
    let samples: Vec<(Kind, Vec<u8>)> = vec![
        (
            Kind::Erc20PeriodTransfer,
            erc20_period_terms(world.usdc, U256::from(5), DAY, 9),
        ),
        (
            Kind::NativeTokenPeriodTransfer,
            native_period_terms(U256::from(5), DAY, 9),
        ),
        (
            Kind::Erc20TransferAmount,
            [world.usdc.as_slice(), &word(U256::from(3))].concat(),
        ),
        (Kind::NativeTokenTransferAmount, word(U256::from(3)).to_vec()),
        (
            Kind::AllowedTargets,
            [world.usdc.as_slice(), Address::ZERO.as_slice()].concat(),
        ),
        (Kind::AllowedMethods, vec![0xa9, 0x05, 0x9c, 0xbb]),
        (Kind::ValueLte, word(U256::from(1)).to_vec()),
        (Kind::Timestamp, ts.to_vec()),
        (Kind::LimitedCalls, word(U256::from(2)).to_vec()),
    ];
    for (kind, terms) in samples {
        let decoded = Terms::decode(kind, &terms).unwrap_or_else(|e| panic!("{kind:?}: {e}"));
        let enforcer = world.framework.enforcer(kind);
        let call = getTermsInfoCall {
            terms: terms.clone().into(),
        }
        .abi_encode();
        let accepted = read_ok(&world.anvil, enforcer, call).await;
        assert!(
            accepted,
            "{} accepts the terms agentd reads as {decoded:?}",
            kind.contract()
        );
        let short = getTermsInfoCall {
            terms: terms[..terms.len() - 1].to_vec().into(),
        }
        .abi_encode();
        assert!(
            !read_ok(&world.anvil, enforcer, short).await,
            "{} refuses terms one byte short",
            kind.contract()
        );
        assert!(
            Terms::decode(kind, &terms[..terms.len() - 1]).is_err(),
            "{kind:?} one byte short"
        );
    }
}

/// Whether an `eth_call` succeeds.
async fn read_ok(anvil: &Anvil, to: Address, data: Vec<u8>) -> bool {
    use alloy::providers::Provider;
    let request = alloy::rpc::types::TransactionRequest::default()
        .to(to)
        .input(Bytes::from(data).into());
    anvil.provider().call(request).await.is_ok()
}

#[tokio::test]
async fn a_redemption_spends_from_the_owner_and_the_chain_refuses_the_delegates_key_beyond_the_period() {
    let world = world().await;
    let delegate = PrivateKeySigner::random();
    world.anvil.set_balance(delegate.address(), wei(ONE_ETH)).await;
    let delegation = world.daily_usdc(delegate.address(), 5 * USDC, 1).await;
    let (to, owner) = (fresh_address(), world.owner.address());

    assert!(
        redeem_usdc(&world, &delegate, &delegation, to, 3 * USDC).await,
        "within the period"
    );
    assert_eq!(token_balance(&world.anvil, world.usdc, to).await, U256::from(3 * USDC));
    assert_eq!(
        token_balance(&world.anvil, world.usdc, owner).await,
        U256::from(97 * USDC)
    );
    assert_eq!(
        world.anvil.nonce(owner).await,
        1,
        "the owner sent nothing: only its 7702 upgrade counted"
    );

    // The key alone, without agentd: the enforcer refuses what the period no longer holds.
    assert!(
        !redeem_usdc(&world, &delegate, &delegation, to, 3 * USDC).await,
        "beyond the period"
    );
    assert_eq!(token_balance(&world.anvil, world.usdc, to).await, U256::from(3 * USDC));
    assert_eq!(
        token_balance(&world.anvil, world.usdc, owner).await,
        U256::from(97 * USDC)
    );

    // A plain native send under a native period and exact empty calldata.
    let start = chain_now(&world.anvil).await - 10;
    let native = world.framework.grant(
        &world.owner,
        delegate.address(),
        &[
            (
                Kind::NativeTokenPeriodTransfer,
                native_period_terms(wei(ONE_ETH / 10), DAY, start),
            ),
            (Kind::ExactCalldata, Vec::new()),
        ],
        2,
    );
    let before = world.anvil.balance(owner).await;
    let redemption = rules::redemption(&native, to, wei(ONE_ETH / 20), &[]);
    let receipt = send_as_key(
        &world.anvil,
        &delegate,
        world.framework.manager,
        U256::ZERO,
        redemption,
        500_000,
    )
    .await;
    assert!(receipt.status());
    assert_eq!(world.anvil.balance(to).await, wei(ONE_ETH / 20));
    assert_eq!(
        world.anvil.balance(owner).await,
        before - wei(ONE_ETH / 20),
        "the owner paid no gas"
    );
    let beyond = rules::redemption(&native, to, wei(ONE_ETH / 10), &[]);
    let refused = send_as_key(
        &world.anvil,
        &delegate,
        world.framework.manager,
        U256::ZERO,
        beyond,
        500_000,
    )
    .await;
    assert!(!refused.status());
    assert_eq!(world.anvil.balance(to).await, wei(ONE_ETH / 20));
}

#[tokio::test]
async fn a_redemption_costs_this_much_gas_against_a_plain_erc20_transfer() {
    let world = world().await;
    let delegate = PrivateKeySigner::random();
    world.anvil.set_balance(delegate.address(), wei(ONE_ETH)).await;
    let delegation = world.daily_usdc(delegate.address(), 5 * USDC, 3).await;
    let (to, other) = (fresh_address(), fresh_address());
    // Warm both recipients' balances the same way: each receives once before the measured transfer.
    let holder = PrivateKeySigner::random();
    world.anvil.set_balance(holder.address(), wei(ONE_ETH)).await;
    mint(&world.anvil, world.usdc, holder.address(), U256::from(10 * USDC)).await;
    let plain = |to: Address| -> Bytes {
        transferCall {
            to,
            amount: U256::from(USDC),
        }
        .abi_encode()
        .into()
    };
    let fresh = send_as_key(&world.anvil, &holder, world.usdc, U256::ZERO, plain(other), 100_000).await;
    let direct = send_as_key(&world.anvil, &holder, world.usdc, U256::ZERO, plain(other), 100_000).await;
    assert!(fresh.status() && direct.status());
    let calldata = transferCall {
        to,
        amount: U256::from(USDC),
    }
    .abi_encode();
    let first = send_as_key(
        &world.anvil,
        &delegate,
        world.framework.manager,
        U256::ZERO,
        rules::redemption(&delegation, world.usdc, U256::ZERO, &calldata),
        500_000,
    )
    .await;
    let redeemed = send_as_key(
        &world.anvil,
        &delegate,
        world.framework.manager,
        U256::ZERO,
        rules::redemption(&delegation, world.usdc, U256::ZERO, &calldata),
        500_000,
    )
    .await;
    assert!(first.status() && redeemed.status());
    println!(
        "gas: plain ERC-20 transfer {} (first to a fresh holder {}); redemption of one {} (first of the delegation {})",
        direct.gas_used, fresh.gas_used, redeemed.gas_used, first.gas_used
    );
    assert!(redeemed.gas_used > direct.gas_used);
}

/// `POST …/delegations` as the agent (and the operator when `owner`).
async fn post(app: &TestApp, agent: &CreatedAgent, owner: bool, body: Value) -> (StatusCode, Value) {
    call(
        app,
        agent,
        owner,
        Method::POST,
        &format!("/api/agents/{}/delegations", agent.id),
        Some(body),
    )
    .await
}

async fn call(
    app: &TestApp,
    agent: &CreatedAgent,
    owner: bool,
    method: Method,
    path: &str,
    body: Option<Value>,
) -> (StatusCode, Value) {
    let mut builder = app.build(method, path, Some(&agent.token), body);
    if owner {
        builder = builder.bearer_auth(ADMIN);
    }
    let response = app.send(builder).await;
    (response.status, response.body)
}

async fn agent_on_base(app: &TestApp) -> CreatedAgent {
    let body = json!({"name": "delegate", "chains": ["base"], "capabilities": ["read", "transact"]});
    let response = app
        .send(
            app.build(Method::POST, "/api/agents", None, Some(body))
                .bearer_auth(ADMIN),
        )
        .await;
    assert_eq!(response.status, StatusCode::CREATED, "{}", response.body);
    CreatedAgent {
        id: response.body["id"].as_str().unwrap().to_string(),
        token: response.body["access_token"].as_str().unwrap().to_string(),
        body: response.body,
    }
}

#[tokio::test]
async fn a_registered_delegation_shows_its_caveats_limits_and_what_is_available() {
    let world = world().await;
    let app = world.app().await;
    let agent = agent_on_base(&app).await;
    let delegation = world.daily_usdc(wallet(&agent), 5 * USDC, 10).await;
    let (status, body) = post(
        &app,
        &agent,
        false,
        json!({"chain": "base", "delegation": delegation_json(&delegation)}),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    assert_eq!(body["chain"], "base");
    assert_eq!(body["hash"], format!("{:#x}", delegation.hash()));
    assert_eq!(body["delegator"], world.owner.address().to_checksum(None));
    assert_eq!(body["delegate"], wallet(&agent).to_checksum(None));
    assert_eq!(body["status"], "active");
    assert_eq!(body["caveats"][0]["kind"], "erc20_period_transfer");
    assert_eq!(body["caveats"][0]["period_seconds"], DAY);
    let limit = &body["limits"][0];
    assert_eq!(limit["asset"], "base:USDC");
    assert_eq!(limit["amount"], "5");
    assert_eq!(limit["available"], "5");
    assert_eq!(limit["period_seconds"], DAY);
    assert!(body["created_at"].is_string() && body["id"].is_string());
    assert!(body["targets"].is_null() && body["methods"].is_null() && body["expires_at"].is_null());

    // Spent on chain from the agent's address outside agentd: `available` follows the chain.
    world.anvil.set_balance(wallet(&agent), wei(ONE_ETH)).await;
    assert!(redeem_usdc_outside(&world, wallet(&agent), &delegation, fresh_address(), 2 * USDC).await);
    let id = body["id"].as_str().unwrap();
    let (status, one) = call(
        &app,
        &agent,
        false,
        Method::GET,
        &format!("/api/agents/{}/delegations/{id}", agent.id),
        None,
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{one}");
    assert_eq!(one["limits"][0]["available"], "3");
    let (status, list) = call(
        &app,
        &agent,
        false,
        Method::GET,
        &format!("/api/agents/{}/delegations", agent.id),
        None,
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(list.as_array().unwrap().len(), 1);
    assert_eq!(list[0]["limits"][0]["available"], "3");
    let unknown = format!("/api/agents/{}/delegations/{}", agent.id, uuid::Uuid::new_v4());
    assert_error(
        &call(&app, &agent, false, Method::GET, &unknown, None).await,
        StatusCode::NOT_FOUND,
        "delegation_not_found",
    );
}

#[tokio::test]
async fn each_refusal_of_a_registration_answers_in_the_contracts_order() {
    let world = world().await;
    let app = world.app().await;
    let agent = agent_on_base(&app).await;
    let good = world.daily_usdc(wallet(&agent), 5 * USDC, 20).await;
    let register = |d: &Delegation| json!({"chain": "base", "delegation": delegation_json(d)});
    let refused = async |d: &Delegation, status: StatusCode, code: &str| {
        let answer = post(&app, &agent, false, register(d)).await;
        assert_error(&answer, status, code);
    };

    // Everything wrong at once: the first check answers, and so on down the list.
    let mut d = world.daily_usdc(fresh_address(), 5 * USDC, 21).await;
    d.authority = B256::ZERO;
    refused(&d, StatusCode::UNPROCESSABLE_ENTITY, "delegate_mismatch").await;
    d.delegate = wallet(&agent);
    refused(&d, StatusCode::UNPROCESSABLE_ENTITY, "delegation_not_root").await;

    // A delegator without code (a plain EOA's signature).
    let plain = PrivateKeySigner::random();
    let mut not_smart = good.clone();
    not_smart.delegator = plain.address();
    world.framework.sign(&plain, &mut not_smart);
    refused(&not_smart, StatusCode::UNPROCESSABLE_ENTITY, "delegator_not_smart").await;

    // Signed by another key than the delegator's.
    let mut forged = good.clone();
    world.framework.sign(&PrivateKeySigner::random(), &mut forged);
    refused(
        &forged,
        StatusCode::UNPROCESSABLE_ENTITY,
        "invalid_delegation_signature",
    )
    .await;
    // Signed for another manager's domain.
    let mut elsewhere = good.clone();
    let digest = elsewhere.digest(BASE_CHAIN_ID, fresh_address());
    elsewhere.signature = sign_digest(&world.owner, digest);
    refused(
        &elsewhere,
        StatusCode::UNPROCESSABLE_ENTITY,
        "invalid_delegation_signature",
    )
    .await;

    // A caveat of an enforcer agentd does not know, terms its enforcer refuses, or args.
    let start = chain_now(&world.anvil).await;
    let mut unknown = good.clone();
    unknown.caveats[0].enforcer = fresh_address();
    world.framework.sign(&world.owner, &mut unknown);
    refused(&unknown, StatusCode::UNPROCESSABLE_ENTITY, "unknown_caveat").await;
    let short = world.framework.grant(
        &world.owner,
        wallet(&agent),
        &[(
            Kind::Erc20PeriodTransfer,
            erc20_period_terms(world.usdc, U256::from(5), DAY, start)[..115].to_vec(),
        )],
        22,
    );
    refused(&short, StatusCode::UNPROCESSABLE_ENTITY, "unknown_caveat").await;
    let mut with_args = good.clone();
    with_args.caveats[0].args = Bytes::from_static(&[1]);
    refused(&with_args, StatusCode::UNPROCESSABLE_ENTITY, "unknown_caveat").await;

    // Caveats that leave some execution unbounded: a native amount alone (any zero-value call), nothing at all.
    let native_alone = world.framework.grant(
        &world.owner,
        wallet(&agent),
        &[(
            Kind::NativeTokenPeriodTransfer,
            native_period_terms(wei(ONE_ETH), DAY, start),
        )],
        23,
    );
    refused(&native_alone, StatusCode::UNPROCESSABLE_ENTITY, "delegation_unbounded").await;
    let targets_only = world.framework.grant(
        &world.owner,
        wallet(&agent),
        &[(Kind::AllowedTargets, world.usdc.to_vec())],
        24,
    );
    refused(&targets_only, StatusCode::UNPROCESSABLE_ENTITY, "delegation_unbounded").await;

    // Disabled on chain before it was registered.
    let disabled = world.daily_usdc(wallet(&agent), 5 * USDC, 25).await;
    assert!(
        world
            .framework
            .disable(&world.anvil, &world.owner, &disabled)
            .await
            .status()
    );
    refused(&disabled, StatusCode::CONFLICT, "delegation_revoked").await;

    // Nothing of the above was stored.
    let (_, list) = call(
        &app,
        &agent,
        false,
        Method::GET,
        &format!("/api/agents/{}/delegations", agent.id),
        None,
    )
    .await;
    assert_eq!(list, json!([]));

    // A chain without a manager.
    let no_manager = transfer_app(&world.anvil, &[("ADMIN_TOKEN", ADMIN), ("DELEGATION_MANAGER_BASE", "")]).await;
    let other = agent_on_base(&no_manager).await;
    let answer = post(&no_manager, &other, false, register(&good)).await;
    assert_error(&answer, StatusCode::UNPROCESSABLE_ENTITY, "delegations_unavailable");
}

/// Issue 50 point 1, on the unmodified framework: a weekly and a daily budget on one token are two caveats on one
/// `ERC20PeriodTransferEnforcer`, which keeps one state per delegation set by the caveat that runs first, so the
/// chain lets 500 USDC through "100 a day" in one day. agentd refuses such a pair (and every other pair on a stateful
/// enforcer) as `caveat_conflict`, after `unknown_caveat` and before `delegation_unbounded`, storing nothing.
#[tokio::test]
async fn two_caveats_on_one_period_enforcer_are_refused_as_the_chain_enforces_only_one() {
    let world = world().await;
    mint(&world.anvil, world.usdc, world.owner.address(), U256::from(900 * USDC)).await;
    let start = chain_now(&world.anvil).await - 3600;
    let weekly_then_daily = [
        (
            Kind::Erc20PeriodTransfer,
            erc20_period_terms(world.usdc, U256::from(1000 * USDC), 7 * DAY, start),
        ),
        (
            Kind::Erc20PeriodTransfer,
            erc20_period_terms(world.usdc, U256::from(100 * USDC), DAY, start),
        ),
    ];

    // The chain, with the delegate's key alone: the daily caveat is never enforced.
    let delegate = PrivateKeySigner::random();
    world.anvil.set_balance(delegate.address(), wei(ONE_ETH)).await;
    let on_chain = world
        .framework
        .grant(&world.owner, delegate.address(), &weekly_then_daily, 40);
    let to = fresh_address();
    for amount in [100, 300, 100] {
        assert!(
            redeem_usdc(&world, &delegate, &on_chain, to, amount * USDC).await,
            "the chain lets {amount} USDC through"
        );
    }
    assert_eq!(
        token_balance(&world.anvil, world.usdc, to).await,
        U256::from(500 * USDC),
        "500 USDC left the owner in one day under a 100-a-day caveat"
    );

    // agentd refuses the pair, in either order, and a pair on any other stateful enforcer.
    let app = world.app().await;
    let agent = agent_on_base(&app).await;
    let register = |d: &Delegation| json!({"chain": "base", "delegation": delegation_json(d)});
    let refused = async |d: &Delegation, code: &str| {
        let answer = post(&app, &agent, false, register(d)).await;
        assert_error(&answer, StatusCode::UNPROCESSABLE_ENTITY, code);
    };
    let grant =
        |caveats: &[(Kind, Vec<u8>)], salt: u64| world.framework.grant(&world.owner, wallet(&agent), caveats, salt);
    refused(&grant(&weekly_then_daily, 41), "caveat_conflict").await;
    let daily_then_weekly = [weekly_then_daily[1].clone(), weekly_then_daily[0].clone()];
    refused(&grant(&daily_then_weekly, 42), "caveat_conflict").await;
    let native_pair = [
        (
            Kind::NativeTokenPeriodTransfer,
            native_period_terms(wei(ONE_ETH), 7 * DAY, start),
        ),
        (
            Kind::NativeTokenPeriodTransfer,
            native_period_terms(wei(ONE_ETH / 10), DAY, start),
        ),
        (Kind::ExactCalldata, Vec::new()),
    ];
    refused(&grant(&native_pair, 43), "caveat_conflict").await;
    let limited_twice = [
        weekly_then_daily[1].clone(),
        (Kind::LimitedCalls, word(U256::from(10)).to_vec()),
        (Kind::LimitedCalls, word(U256::from(2)).to_vec()),
    ];
    refused(&grant(&limited_twice, 44), "caveat_conflict").await;
    // The order: an unreadable caveat answers first; a conflicting pair answers before an unbounded set.
    let mut unknown_too = grant(&weekly_then_daily, 45);
    unknown_too.caveats.push(unknown_too.caveats[0].clone());
    unknown_too.caveats[2].enforcer = fresh_address();
    world.framework.sign(&world.owner, &mut unknown_too);
    refused(&unknown_too, "unknown_caveat").await;
    let unbounded_pair = [
        (
            Kind::NativeTokenPeriodTransfer,
            native_period_terms(wei(ONE_ETH), 7 * DAY, start),
        ),
        (
            Kind::NativeTokenPeriodTransfer,
            native_period_terms(wei(ONE_ETH / 10), DAY, start),
        ),
    ];
    refused(&grant(&unbounded_pair, 46), "caveat_conflict").await;

    // Two stateless caveats of one enforcer, or two amount caveats of different enforcers, are still taken.
    let different = [
        weekly_then_daily[1].clone(),
        (
            Kind::Erc20TransferAmount,
            [world.usdc.as_slice(), &word(U256::from(500 * USDC))].concat(),
        ),
        (Kind::AllowedTargets, world.usdc.to_vec()),
        (Kind::AllowedTargets, world.usdc.to_vec()),
    ];
    let (status, body) = post(&app, &agent, false, register(&grant(&different, 47))).await;
    assert_eq!(status, StatusCode::CREATED, "{body}");

    let (_, list) = call(
        &app,
        &agent,
        false,
        Method::GET,
        &format!("/api/agents/{}/delegations", agent.id),
        None,
    )
    .await;
    assert_eq!(
        list.as_array().map(Vec::len),
        Some(1),
        "only the last one is stored: {list}"
    );
}

fn sign_digest(signer: &PrivateKeySigner, digest: B256) -> Bytes {
    use alloy::signers::SignerSync;
    signer.sign_hash_sync(&digest).unwrap().as_bytes().to_vec().into()
}

#[tokio::test]
async fn a_hash_is_registered_once_and_only_owner_authority_brings_a_removed_one_back() {
    let world = world().await;
    let app = world.app().await;
    let agent = agent_on_base(&app).await;
    let delegation = world.daily_usdc(wallet(&agent), 5 * USDC, 30).await;
    let body = json!({"chain": "base", "delegation": delegation_json(&delegation)});
    let (status, first) = post(&app, &agent, false, body.clone()).await;
    assert_eq!(status, StatusCode::CREATED, "{first}");
    assert_error(
        &post(&app, &agent, false, body.clone()).await,
        StatusCode::CONFLICT,
        "delegation_exists",
    );
    // Another spelling and signature of the same grant is the same hash.
    let mut respelled = delegation_json(&delegation);
    respelled["salt"] = json!(format!("{:#x}", delegation.salt));
    respelled["delegator"] = json!(format!("{:#x}", delegation.delegator));
    let answer = post(&app, &agent, false, json!({"chain": "base", "delegation": respelled})).await;
    assert_error(&answer, StatusCode::CONFLICT, "delegation_exists");

    // Removing takes owner authority.
    let path = format!("/api/agents/{}/delegations/{}", agent.id, first["id"].as_str().unwrap());
    let answer = call(&app, &agent, false, Method::DELETE, &path, None).await;
    assert_error(&answer, StatusCode::FORBIDDEN, "owner_required");
    let (status, _) = call(&app, &agent, true, Method::DELETE, &path, None).await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    let (_, removed) = call(&app, &agent, false, Method::GET, &path, None).await;
    assert_eq!(removed["status"], "removed");
    assert!(removed["limits"][0]["available"].is_null());

    // The agent token cannot bring it back; owner authority can, under the same id.
    assert_error(
        &post(&app, &agent, false, body.clone()).await,
        StatusCode::CONFLICT,
        "delegation_exists",
    );
    let (status, back) = post(&app, &agent, true, body.clone()).await;
    assert_eq!(status, StatusCode::CREATED, "{back}");
    assert_eq!(back["id"], first["id"]);
    assert_eq!(back["status"], "active");
    assert_error(
        &post(&app, &agent, true, body).await,
        StatusCode::CONFLICT,
        "delegation_exists",
    );

    let audit = audit(&app, &agent).await;
    let actions: Vec<&str> = audit
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|e| e["action"].as_str())
        .collect();
    assert_eq!(
        actions
            .iter()
            .filter(|a| a.starts_with("delegation_"))
            .copied()
            .collect::<Vec<_>>(),
        vec!["delegation_added", "delegation_removed", "delegation_added"],
        "newest first: {actions:?}"
    );
}

#[tokio::test]
async fn a_revocation_on_chain_is_noticed_once_with_its_event_and_audit_entry() {
    let world = world().await;
    let app = world.app_with(&[("WEBHOOK_ALLOW_PRIVATE", "true")]).await;
    let agent = agent_on_base(&app).await;
    let delegation = world.daily_usdc(wallet(&agent), 5 * USDC, 40).await;
    let (status, body) = post(
        &app,
        &agent,
        true,
        json!({"chain": "base", "delegation": delegation_json(&delegation)}),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    let mut events = app.state.events.subscribe();
    let receiver = crate::helpers::webhook_receiver::Receiver::start().await;
    let hooks = format!("/api/agents/{}/webhooks", agent.id);
    let hook = json!({"url": receiver.url, "events": ["delegation.revoked"]});
    let (status, registered) = call(&app, &agent, true, Method::POST, &hooks, Some(hook)).await;
    assert_eq!(status, StatusCode::CREATED, "{registered}");

    assert_eq!(
        app.state.delegations.check_revocations("base").await.unwrap(),
        0,
        "still enabled"
    );
    assert!(
        world
            .framework
            .disable(&world.anvil, &world.owner, &delegation)
            .await
            .status()
    );
    assert_eq!(app.state.delegations.check_revocations("base").await.unwrap(), 1);
    assert_eq!(
        app.state.delegations.check_revocations("base").await.unwrap(),
        0,
        "recorded once"
    );

    let path = format!("/api/agents/{}/delegations/{}", agent.id, body["id"].as_str().unwrap());
    let (_, revoked) = call(&app, &agent, false, Method::GET, &path, None).await;
    assert_eq!(revoked["status"], "revoked");
    assert!(revoked["revoked_at"].is_string());
    let event = tokio::time::timeout(std::time::Duration::from_secs(5), async {
        loop {
            let event = events.recv().await.expect("the bus");
            if event.kind == "delegation_revoked" {
                return event;
            }
        }
    })
    .await
    .expect("a delegation_revoked event");
    assert_eq!(event.payload["delegation_id"], body["id"]);
    assert_eq!(event.payload["hash"], body["hash"]);
    let audit = audit(&app, &agent).await;
    let revocations: Vec<&Value> = audit
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["action"] == "delegation_revoked")
        .collect();
    assert_eq!(revocations.len(), 1);
    assert_eq!(revocations[0]["actor"], "system");
    let pushed = receiver.wait_for(1).await;
    assert_eq!(pushed.len(), 1);
    assert_eq!(pushed[0].ty(), "delegation.revoked");
    let pushed: Value = serde_json::from_str(&pushed[0].body).unwrap();
    assert_eq!(pushed["data"]["delegation_id"], body["id"]);
    assert_eq!(pushed["data"]["agent_id"], json!(agent.id));
    // Still disabled on chain: registering it again is refused as revoked, whoever asks.
    let body_again = json!({"chain": "base", "delegation": delegation_json(&delegation)});
    let again = post(&app, &agent, true, body_again.clone()).await;
    assert_error(&again, StatusCode::CONFLICT, "delegation_revoked");
    // Enabled again on chain: revoked is final in agentd for the agent token; owner authority registers it again.
    assert!(
        world
            .framework
            .enable(&world.anvil, &world.owner, &delegation)
            .await
            .status()
    );
    assert_error(
        &post(&app, &agent, false, body_again.clone()).await,
        StatusCode::CONFLICT,
        "delegation_exists",
    );
    let (status, back) = post(&app, &agent, true, body_again).await;
    assert_eq!(status, StatusCode::CREATED, "{back}");
    assert_eq!(
        (back["id"].clone(), back["status"].clone()),
        (body["id"].clone(), json!("active"))
    );
}

#[tokio::test]
async fn a_revocation_is_noticed_at_the_next_read_before_the_watchers_pass() {
    let world = world().await;
    let app = world.app().await;
    let agent = agent_on_base(&app).await;
    let delegation = world.daily_usdc(wallet(&agent), 5 * USDC, 60).await;
    let body = json!({"chain": "base", "delegation": delegation_json(&delegation)});
    let (status, created) = post(&app, &agent, false, body).await;
    assert_eq!(status, StatusCode::CREATED, "{created}");
    assert!(
        world
            .framework
            .disable(&world.anvil, &world.owner, &delegation)
            .await
            .status()
    );
    let list = format!("/api/agents/{}/delegations", agent.id);
    let (_, listed) = call(&app, &agent, false, Method::GET, &list, None).await;
    assert_eq!(listed[0]["status"], "revoked");
    assert!(listed[0]["limits"][0]["available"].is_null());
    assert_eq!(
        app.state.delegations.check_revocations("base").await.unwrap(),
        0,
        "recorded already"
    );
    let audit = audit(&app, &agent).await;
    let revocations = audit
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["action"] == "delegation_revoked")
        .count();
    assert_eq!(revocations, 1);
}

#[tokio::test]
async fn lifetime_amounts_read_what_the_enforcer_spent_and_every_caveat_kind_is_shown() {
    let world = world().await;
    let app = world.app().await;
    let agent = agent_on_base(&app).await;
    let now = chain_now(&world.anvil).await;
    let window = [
        U256::from(now - 60).to_be_bytes::<32>()[16..].to_vec(),
        U256::from(now + DAY).to_be_bytes::<32>()[16..].to_vec(),
    ]
    .concat();
    let transfer_selector = transferCall::SELECTOR.to_vec();
    let token = world.framework.grant(
        &world.owner,
        wallet(&agent),
        &[
            (
                Kind::Erc20TransferAmount,
                [world.usdc.as_slice(), &word(U256::from(10 * USDC))].concat(),
            ),
            (Kind::AllowedTargets, world.usdc.to_vec()),
            (Kind::AllowedMethods, transfer_selector.clone()),
            (Kind::ValueLte, word(U256::ZERO).to_vec()),
            (Kind::Timestamp, window),
            (Kind::LimitedCalls, word(U256::from(5)).to_vec()),
        ],
        70,
    );
    let native = world.framework.grant(
        &world.owner,
        wallet(&agent),
        &[
            (Kind::NativeTokenTransferAmount, word(wei(ONE_ETH)).to_vec()),
            (Kind::ExactCalldata, Vec::new()),
        ],
        71,
    );
    for d in [&token, &native] {
        let (status, body) = post(
            &app,
            &agent,
            false,
            json!({"chain": "base", "delegation": delegation_json(d)}),
        )
        .await;
        assert_eq!(status, StatusCode::CREATED, "{body}");
    }
    world.anvil.set_balance(wallet(&agent), wei(ONE_ETH)).await;
    assert!(redeem_usdc_outside(&world, wallet(&agent), &token, fresh_address(), 4 * USDC).await);
    let to = fresh_address();
    let redemption = rules::redemption(&native, to, wei(ONE_ETH / 4), &[]);
    let sent = send_as_address(
        &world.anvil,
        wallet(&agent),
        world.framework.manager,
        U256::ZERO,
        redemption,
    )
    .await;
    assert!(sent.status());
    assert_eq!(world.anvil.balance(to).await, wei(ONE_ETH / 4));

    let (_, list) = call(
        &app,
        &agent,
        false,
        Method::GET,
        &format!("/api/agents/{}/delegations", agent.id),
        None,
    )
    .await;
    let (first, second) = (&list[0], &list[1]);
    let kinds: Vec<&str> = first["caveats"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["kind"].as_str().unwrap())
        .collect();
    assert_eq!(
        kinds,
        [
            "erc20_transfer_amount",
            "allowed_targets",
            "allowed_methods",
            "value_lte",
            "timestamp",
            "limited_calls"
        ]
    );
    assert_eq!(first["limits"][0]["asset"], "base:USDC");
    assert_eq!(first["limits"][0]["amount"], "10");
    assert_eq!(first["limits"][0]["available"], "6");
    assert!(first["limits"][0]["period_seconds"].is_null());
    assert_eq!(first["targets"], json!([world.usdc.to_checksum(None)]));
    assert_eq!(first["methods"], json!(["0xa9059cbb"]));
    assert_eq!(
        (first["not_before"].as_u64(), first["expires_at"].as_u64()),
        (Some(now - 60), Some(now + DAY))
    );
    assert_eq!(first["caveats"][5]["limit"], "5");
    assert_eq!(second["caveats"][1]["calldata"], "0x");
    assert_eq!(second["limits"][0]["asset"], "base:ETH");
    assert_eq!(second["limits"][0]["amount"], "1");
    assert_eq!(second["limits"][0]["available"], "0.75");
}

#[tokio::test]
async fn a_send_finds_only_an_active_delegation_of_its_agent_and_chain() {
    use agentd::delegations::DelegationError;
    let world = world().await;
    let app = world.app().await;
    let agent = agent_on_base(&app).await;
    let other = agent_on_base(&app).await;
    let delegation = world.daily_usdc(wallet(&agent), 5 * USDC, 80).await;
    let body = json!({"chain": "base", "delegation": delegation_json(&delegation)});
    let (status, created) = post(&app, &agent, false, body).await;
    assert_eq!(status, StatusCode::CREATED, "{created}");
    let id: uuid::Uuid = created["id"].as_str().unwrap().parse().unwrap();
    let (agent_id, other_id): (uuid::Uuid, uuid::Uuid) = (agent.id.parse().unwrap(), other.id.parse().unwrap());
    let service = &app.state.delegations;

    let usable = service.for_send(agent_id, "base", id).await.expect("active");
    assert_eq!(
        usable.available(rules::LimitAsset::Token(world.usdc)),
        Some(U256::from(5 * USDC))
    );
    assert_eq!(usable.available(rules::LimitAsset::Native), None);
    for (who, chain, what) in [
        (other_id, "base", "another agent's"),
        (agent_id, "optimism", "another chain"),
    ] {
        let refused = service.for_send(who, chain, id).await;
        assert!(
            matches!(
                refused,
                Err(DelegationError::NotActive(_)) | Err(DelegationError::Unavailable(_))
            ),
            "{what}: {refused:?}"
        );
    }
    assert!(matches!(
        service.for_send(agent_id, "base", uuid::Uuid::new_v4()).await,
        Err(DelegationError::NotActive(_))
    ));
    // Disabled on chain: noticed at this use (409 once), not active afterwards.
    assert!(
        world
            .framework
            .disable(&world.anvil, &world.owner, &delegation)
            .await
            .status()
    );
    assert!(matches!(
        service.for_send(agent_id, "base", id).await,
        Err(DelegationError::Revoked)
    ));
    assert!(matches!(
        service.for_send(agent_id, "base", id).await,
        Err(DelegationError::NotActive(_))
    ));
}

/// The delegation routes for the OpenAPI check (`openapi.rs`): a registration, its refusals, the list, one
/// delegation, its removal.
pub async fn drive_delegations(oracle: &mut crate::helpers::openapi::Oracle) {
    let world = world().await;
    let app = world.app().await;
    let agent = agent_on_base(&app).await;
    let delegation = world.daily_usdc(wallet(&agent), 5 * USDC, 50).await;
    let list = format!("/api/agents/{}/delegations", agent.id);
    let template = "/api/agents/{id}/delegations";
    let send = async |owner: bool, method: Method, path: &str, body: Option<Value>| {
        let mut builder = app.build(method, path, Some(&agent.token), body);
        if owner {
            builder = builder.bearer_auth(ADMIN);
        }
        app.send(builder).await
    };
    let body = json!({"chain": "base", "delegation": delegation_json(&delegation)});
    let created = send(false, Method::POST, &list, Some(body.clone())).await;
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.text);
    oracle.check("POST", template, &created);
    oracle.check("POST", template, &send(false, Method::POST, &list, Some(body)).await);
    oracle.check("GET", template, &send(false, Method::GET, &list, None).await);
    let one = format!("{list}/{}", created.body["id"].as_str().unwrap());
    let one_template = "/api/agents/{id}/delegations/{did}";
    oracle.check("GET", one_template, &send(false, Method::GET, &one, None).await);
    oracle.check("DELETE", one_template, &send(false, Method::DELETE, &one, None).await);
    oracle.check("DELETE", one_template, &send(true, Method::DELETE, &one, None).await);
}

/// Registers `delegation` with the agent's token; its id.
async fn register(app: &TestApp, agent: &CreatedAgent, delegation: &Delegation) -> String {
    let body = json!({"chain": "base", "delegation": delegation_json(delegation)});
    let (status, registered) = post(app, agent, false, body).await;
    assert_eq!(status, StatusCode::CREATED, "{registered}");
    registered["id"].as_str().expect("an id").to_string()
}

/// The agent's audit entries (owner authority), newest first.
async fn audit(app: &TestApp, agent: &CreatedAgent) -> Value {
    let (status, entries) = call(
        app,
        agent,
        true,
        Method::GET,
        &format!("/api/agents/{}/audit", agent.id),
        None,
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{entries}");
    entries
}

/// `to`'s USDC balance once it is `expected` (the node may still be mining), or what it is after 5 s.
async fn usdc_when(world: &World, to: Address, expected: U256) -> U256 {
    for _ in 0..100 {
        let balance = token_balance(&world.anvil, world.usdc, to).await;
        if balance == expected {
            return balance;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    token_balance(&world.anvil, world.usdc, to).await
}

/// `POST …/transfers` as the agent.
async fn transfer(app: &TestApp, agent: &CreatedAgent, body: Value) -> (StatusCode, Value) {
    call(
        app,
        agent,
        false,
        Method::POST,
        &format!("/api/agents/{}/transfers", agent.id),
        Some(body),
    )
    .await
}

#[tokio::test]
async fn a_delegated_usdc_transfer_leaves_the_owners_account_and_agentd_refuses_beyond_the_period_before_signing() {
    let world = world().await;
    let app = world.app().await;
    let agent = agent_on_base(&app).await;
    // The gas counts against the cap (§21); the delegated amount does not.
    let (status, body) = call(
        &app,
        &agent,
        true,
        Method::PUT,
        &format!("/api/agents/{}", agent.id),
        Some(json!({"spending_cap": 0.1})),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let wallet = wallet(&agent);
    world.anvil.set_balance(wallet, wei(ONE_ETH)).await;
    let delegation = world.daily_usdc(wallet, 5 * USDC, 21).await;
    let id = register(&app, &agent, &delegation).await;
    let id = id.as_str();
    let to = fresh_address();

    let (status, sent) = transfer(
        &app,
        &agent,
        json!({"chain": "base", "to": to.to_checksum(None), "amount": "2", "asset": "USDC", "delegation": id}),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED, "{sent}");
    assert_eq!(sent["from"], world.owner.address().to_checksum(None), "{sent}");
    assert_eq!(sent["delegation"]["id"], id);
    assert_eq!(sent["delegation"]["delegator"], world.owner.address().to_checksum(None));
    // The history says so too, as the transfer does: a client tells it from the agent's own money.
    let (status, history) = call(
        &app,
        &agent,
        false,
        Method::GET,
        &format!("/api/agents/{}/transactions", agent.id),
        None,
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{history}");
    assert_eq!(history[0]["delegation"], sent["delegation"], "{history}");
    assert_eq!(history[0]["from"], sent["from"], "{history}");
    // Audited as a transfer, with the delegation it redeemed.
    let audit = audit(&app, &agent).await;
    let accepted = audit
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["action"] == "transfer_accepted")
        .unwrap_or_else(|| panic!("no transfer_accepted in {audit}"));
    assert_eq!(accepted["detail"]["delegation_id"], id, "{accepted}");
    // What the chain shows: the owner's USDC went to the recipient; the agent's wallet held none and paid the gas.
    assert_eq!(usdc_when(&world, to, U256::from(2 * USDC)).await, U256::from(2 * USDC));
    assert_eq!(
        token_balance(&world.anvil, world.usdc, world.owner.address()).await,
        U256::from(98 * USDC)
    );
    assert_eq!(token_balance(&world.anvil, world.usdc, wallet).await, U256::ZERO);
    assert!(
        world.anvil.balance(wallet).await < wei(ONE_ETH),
        "the agent's wallet paid the gas"
    );
    let nonce = world.anvil.nonce(wallet).await;
    assert_eq!(nonce, 1);

    // 3 USDC are left this period: 4 are refused by agentd before anything is signed.
    let (status, refused) = transfer(
        &app,
        &agent,
        json!({"chain": "base", "to": to.to_checksum(None), "amount": "4", "asset": "USDC", "delegation": id}),
    )
    .await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{refused}");
    assert_eq!(refused["error"]["code"], "policy_denied");
    assert_eq!(refused["error"]["details"]["rule"], "delegation_limit");
    assert_eq!(refused["error"]["details"]["available"], "3");
    assert_eq!(world.anvil.nonce(wallet).await, nonce, "nothing was signed or sent");
    // Its audit entry names the delegation's rule and what it left, as the answer did (a history words it so).
    let entries = self::audit(&app, &agent).await;
    let entry = entries
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["action"] == "transfer_refused")
        .unwrap_or_else(|| panic!("no transfer_refused in {entries}"));
    assert_eq!(entry["detail"]["delegation_id"], id, "{entry}");
    assert_eq!(entry["detail"]["rule"], "delegation_limit", "{entry}");
    assert_eq!(
        entry["detail"]["limit"], "the delegation leaves 3 USDC this period; nothing was signed",
        "{entry}"
    );
    assert_eq!(token_balance(&world.anvil, world.usdc, to).await, U256::from(2 * USDC));

    // A delegation id the agent does not have.
    let (status, unknown) = transfer(
        &app,
        &agent,
        json!({"chain": "base", "to": to.to_checksum(None), "amount": "1", "asset": "USDC",
               "delegation": uuid::Uuid::new_v4().to_string()}),
    )
    .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{unknown}");
    assert_eq!(unknown["error"]["code"], "delegation_not_active");
    assert_eq!(world.anvil.nonce(wallet).await, nonce);
}

#[tokio::test]
async fn a_send_naming_a_delegation_on_a_chain_without_a_manager_is_refused() {
    let anvil = Anvil::start(BASE_CHAIN_ID);
    let app = transfer_app(
        &anvil,
        &[
            ("ADMIN_TOKEN", ADMIN),
            ("DELEGATION_MANAGER_BASE", "none"),
            ("DELEGATION_ENFORCERS_BASE", "none"),
        ],
    )
    .await;
    let agent = agent_on_base(&app).await;
    let (status, body) = transfer(
        &app,
        &agent,
        json!({"chain": "base", "to": fresh_address().to_checksum(None), "amount": "1",
               "delegation": uuid::Uuid::new_v4().to_string()}),
    )
    .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{body}");
    assert_eq!(body["error"]["code"], "delegations_unavailable");
}

#[tokio::test]
async fn concurrent_redemptions_from_two_instances_on_one_database_never_exceed_the_period() {
    let world = world().await;
    let first = world.app().await;
    let vars = world.framework.vars();
    let mut extra: Vec<(&str, &str)> = vars.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    extra.extend([
        ("ADMIN_TOKEN", ADMIN),
        ("DATABASE_URL", first.db_url.as_str()),
        ("RPC_URL_BASE", world.anvil.url()),
        ("WATCHER_INTERVAL_MS", "50"),
    ]);
    let second = crate::helpers::spawn_app_with(&extra).await;
    let agent = agent_on_base(&first).await;
    let (status, body) = call(
        &first,
        &agent,
        true,
        Method::PUT,
        &format!("/api/agents/{}", agent.id),
        Some(json!({"spending_cap": 1})),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let wallet = wallet(&agent);
    world.anvil.set_balance(wallet, wei(ONE_ETH)).await;
    let delegation = world.daily_usdc(wallet, 5 * USDC, 33).await;
    let id = register(&first, &agent, &delegation).await;
    let to = fresh_address();

    // Twelve transfers of 1 USDC at once, alternating between the instances, against 5 USDC a day.
    let sends = (0..12).map(|n| {
        let (app, agent, id) = (if n % 2 == 0 { &first } else { &second }, &agent, id.clone());
        async move {
            transfer(
                app,
                agent,
                json!({"chain": "base", "to": to.to_checksum(None), "amount": "1", "asset": "USDC",
                       "delegation": id}),
            )
            .await
        }
    });
    let answers = futures::future::join_all(sends).await;
    let sent = answers.iter().filter(|(s, _)| *s == StatusCode::CREATED).count();
    for (status, body) in answers.iter().filter(|(s, _)| *s != StatusCode::CREATED) {
        assert_eq!(*status, StatusCode::FORBIDDEN, "{body}");
        assert_eq!(body["error"]["details"]["rule"], "delegation_limit", "{body}");
    }
    if !(1..=5).contains(&sent) {
        tokio::time::sleep(std::time::Duration::from_secs(2)).await;
        let landed = token_balance(&world.anvil, world.usdc, to).await;
        let (_, list) = call(
            &first,
            &agent,
            false,
            Method::GET,
            &format!("/api/agents/{}/transactions", agent.id),
            None,
        )
        .await;
        let statuses: Vec<_> = list
            .as_array()
            .map(|a| a.iter().map(|t| (t["nonce"].clone(), t["status"].clone())).collect())
            .unwrap_or_default();
        panic!("{sent} sent, {landed} landed: {statuses:?}");
    }
    // What the chain shows: every redemption signed landed (none the chain refused), within the period.
    let mut landed = U256::ZERO;
    for _ in 0..100 {
        landed = token_balance(&world.anvil, world.usdc, to).await;
        if landed == U256::from(sent as u64 * USDC) {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    assert_eq!(landed, U256::from(sent as u64 * USDC));
    assert_eq!(
        world.anvil.nonce(wallet).await,
        sent as u64,
        "no redemption was signed that did not land"
    );
    assert_eq!(
        token_balance(&world.anvil, world.usdc, world.owner.address()).await,
        U256::from(100 * USDC - sent as u64 * USDC)
    );
}

/// An agent on base with a cap of 1 ETH for gas and 1 ETH in its wallet.
async fn spending_agent(world: &World, app: &TestApp) -> CreatedAgent {
    let agent = agent_on_base(app).await;
    let path = format!("/api/agents/{}", agent.id);
    let (status, body) = call(app, &agent, true, Method::PUT, &path, Some(json!({"spending_cap": 1}))).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    world.anvil.set_balance(wallet(&agent), wei(ONE_ETH)).await;
    agent
}

#[tokio::test]
async fn a_delegated_native_send_answers_to_the_policy_on_top_and_its_period_rolls_on_the_chains_clock() {
    use alloy::providers::Provider;
    let world = world().await;
    let app = world.app().await;
    let agent = spending_agent(&world, &app).await;
    let start = chain_now(&world.anvil).await - 3600;
    let delegation = world.framework.grant(
        &world.owner,
        wallet(&agent),
        &[
            (
                Kind::NativeTokenPeriodTransfer,
                native_period_terms(wei(ONE_ETH), DAY, start),
            ),
            (Kind::ExactCalldata, Vec::new()),
        ],
        41,
    );
    let id = register(&app, &agent, &delegation).await;
    let id = id.as_str();
    let policy = json!({"limits": {"base:ETH": {"per_transfer": "0.5"}}});
    let path = format!("/api/agents/{}/policy", agent.id);
    let (status, body) = call(&app, &agent, true, Method::PUT, &path, Some(policy)).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let to = fresh_address();
    let send = |amount: &'static str| {
        let (app, agent) = (&app, &agent);
        async move {
            transfer(
                app,
                agent,
                json!({"chain": "base", "to": to.to_checksum(None), "amount": amount, "delegation": id}),
            )
            .await
        }
    };
    let owner_before = world.anvil.balance(world.owner.address()).await;

    // The policy's own limits apply on top of the delegation's.
    let (status, refused) = send("0.6").await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{refused}");
    assert_eq!(refused["error"]["details"]["rule"], "per_transfer");
    let (status, sent) = send("0.4").await;
    assert_eq!(status, StatusCode::CREATED, "{sent}");
    let (status, sent) = send("0.5").await;
    assert_eq!(status, StatusCode::CREATED, "{sent}");
    for _ in 0..100 {
        if world.anvil.balance(to).await == wei(ONE_ETH * 9 / 10) {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    assert_eq!(world.anvil.balance(to).await, wei(ONE_ETH * 9 / 10));
    assert_eq!(
        world.anvil.balance(world.owner.address()).await,
        owner_before - wei(ONE_ETH * 9 / 10),
        "the coin left the owner's account"
    );
    // 0.1 ETH is left today.
    let (status, refused) = send("0.2").await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{refused}");
    assert_eq!(refused["error"]["details"]["rule"], "delegation_limit");
    assert_eq!(refused["error"]["details"]["available"], "0.1");
    // A day later on the chain's clock the period has rolled.
    let _: serde_json::Value = world
        .anvil
        .provider()
        .raw_request("evm_increaseTime".into(), (DAY,))
        .await
        .unwrap();
    world.anvil.mine(1).await;
    let (status, sent) = send("0.2").await;
    assert_eq!(status, StatusCode::CREATED, "{sent}");
    assert_eq!(world.anvil.nonce(wallet(&agent)).await, 3);
}

/// A redemption the chain includes while the next send reads what the delegation leaves is counted once: the
/// chain's figure and the delegate's nonce (from which on the service's redemptions are held against it) are read at
/// one block. Before, the nonce was read first and the figure after the block that mined the redemption, so it
/// counted both in the figure and as held: a 0.5 ETH send of a 1 ETH period after a 0.4 one was refused with 0.2
/// "available".
#[tokio::test]
async fn a_redemption_mined_while_the_next_send_reads_the_delegation_is_counted_once() {
    let world = world().await;
    let gate = crate::helpers::gated_rpc::GatedRpc::start(world.anvil.url()).await;
    let app = world.app_with(&[("RPC_URL_BASE", gate.url())]).await;
    let agent = spending_agent(&world, &app).await;
    let start = chain_now(&world.anvil).await - 3600;
    let delegation = world.framework.grant(
        &world.owner,
        wallet(&agent),
        &[
            (
                Kind::NativeTokenPeriodTransfer,
                native_period_terms(wei(ONE_ETH), DAY, start),
            ),
            (Kind::ExactCalldata, Vec::new()),
        ],
        42,
    );
    let id = register(&app, &agent, &delegation).await;
    let to = fresh_address();
    let body = |amount: &str| json!({"chain": "base", "to": to.to_checksum(None), "amount": amount, "delegation": id});
    let owner_before = world.anvil.balance(world.owner.address()).await;
    world.anvil.set_automine(false).await;
    let (status, sent) = transfer(&app, &agent, body("0.4")).await;
    assert_eq!(status, StatusCode::CREATED, "{sent}");

    // The next send stops at its first read of a contract; the first redemption is mined meanwhile.
    gate.hold_method("eth_call");
    let mine_meanwhile = async {
        gate.wait_held(1, std::time::Duration::from_secs(20)).await;
        world.anvil.mine(1).await;
        gate.release();
    };
    let ((status, sent), ()) = tokio::join!(transfer(&app, &agent, body("0.5")), mine_meanwhile);
    assert_eq!(status, StatusCode::CREATED, "0.6 ETH is left of the period: {sent}");
    world.anvil.mine(1).await;
    assert_eq!(world.anvil.balance(to).await, wei(ONE_ETH * 9 / 10));
    assert_eq!(
        world.anvil.balance(world.owner.address()).await,
        owner_before - wei(ONE_ETH * 9 / 10)
    );
    assert_eq!(world.anvil.nonce(wallet(&agent)).await, 2);
    // And what the API shows is the chain's 0.1.
    let one = format!("/api/agents/{}/delegations/{id}", agent.id);
    let (status, shown) = call(&app, &agent, false, Method::GET, &one, None).await;
    assert_eq!(status, StatusCode::OK, "{shown}");
    assert_eq!(shown["limits"][0]["available"], "0.1", "{shown}");
}

#[tokio::test]
async fn a_delegation_disabled_on_chain_refuses_the_next_send_once_as_revoked() {
    let world = world().await;
    let app = world.app().await;
    let agent = spending_agent(&world, &app).await;
    let delegation = world.daily_usdc(wallet(&agent), 5 * USDC, 51).await;
    let id = register(&app, &agent, &delegation).await;
    let id = id.as_str();
    assert!(
        world
            .framework
            .disable(&world.anvil, &world.owner, &delegation)
            .await
            .status()
    );
    let body = json!({"chain": "base", "to": fresh_address().to_checksum(None), "amount": "1", "asset": "USDC",
                      "delegation": id});
    let (status, refused) = transfer(&app, &agent, body.clone()).await;
    assert_eq!(status, StatusCode::CONFLICT, "{refused}");
    assert_eq!(refused["error"]["code"], "delegation_revoked");
    let (status, refused) = transfer(&app, &agent, body).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{refused}");
    assert_eq!(refused["error"]["code"], "delegation_not_active");
    // Said as revoked, not as a delegation that might be unknown, removed or expired.
    assert_eq!(
        refused["error"]["message"],
        "the delegation is not active for this agent on this chain: its delegator revoked it on chain",
        "{refused}"
    );
    assert_eq!(world.anvil.nonce(wallet(&agent)).await, 0, "nothing was signed");
}

#[tokio::test]
async fn available_is_the_chains_figure_less_this_services_redemptions_the_latest_block_has_not_included() {
    let world = world().await;
    let app = world.app().await;
    let agent = spending_agent(&world, &app).await;
    let delegation = world.daily_usdc(wallet(&agent), 5 * USDC, 61).await;
    let id = register(&app, &agent, &delegation).await;
    let id = id.as_str();
    let one = format!("/api/agents/{}/delegations/{id}", agent.id);
    let available = || async {
        let (status, body) = call(&app, &agent, false, Method::GET, &one, None).await;
        assert_eq!(status, StatusCode::OK, "{body}");
        body["limits"][0]["available"].clone()
    };
    world.anvil.set_automine(false).await;
    let (status, sent) = transfer(
        &app,
        &agent,
        json!({"chain": "base", "to": fresh_address().to_checksum(None), "amount": "2", "asset": "USDC",
               "delegation": id}),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED, "{sent}");
    // Not mined: the chain still says 5, less the 2 on their way.
    assert_eq!(available().await, "3");
    world.anvil.mine(1).await;
    assert_eq!(world.anvil.mined_nonce(wallet(&agent)).await, 1, "mined");
    // Mined: the chain says 3, and nothing is on its way.
    assert_eq!(available().await, "3");
    assert_eq!(
        token_balance(&world.anvil, world.usdc, world.owner.address()).await,
        U256::from(98 * USDC)
    );
}

#[tokio::test]
async fn a_delegated_call_is_judged_as_its_transfer_and_any_other_call_is_refused_as_a_caveat() {
    let world = world().await;
    let app = world.app().await;
    let agent = spending_agent(&world, &app).await;
    let delegation = world.daily_usdc(wallet(&agent), 5 * USDC, 71).await;
    let id = register(&app, &agent, &delegation).await;
    let id = id.as_str();
    let calls = format!("/api/agents/{}/calls", agent.id);
    let to = fresh_address();
    let body = json!({"chain": "base", "to": world.usdc.to_checksum(None), "function": "transfer(address,uint256)",
                      "args": [to.to_checksum(None), (USDC * 3 / 2).to_string()], "delegation": id});
    let (status, sent) = call(&app, &agent, false, Method::POST, &calls, Some(body)).await;
    assert_eq!(status, StatusCode::CREATED, "{sent}");
    assert_eq!(sent["delegation"]["id"], id, "{sent}");
    assert_eq!(
        usdc_when(&world, to, U256::from(USDC * 3 / 2)).await,
        U256::from(USDC * 3 / 2)
    );
    assert_eq!(
        token_balance(&world.anvil, world.usdc, world.owner.address()).await,
        U256::from(100 * USDC - USDC * 3 / 2)
    );
    let nonce = world.anvil.nonce(wallet(&agent)).await;
    let approve = json!({"chain": "base", "to": world.usdc.to_checksum(None), "function": "approve(address,uint256)",
                         "args": [to.to_checksum(None), "1"], "delegation": id});
    let (status, refused) = call(&app, &agent, false, Method::POST, &calls, Some(approve)).await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{refused}");
    assert_eq!(refused["error"]["details"]["rule"], "delegation_caveat", "{refused}");
    assert_eq!(world.anvil.nonce(wallet(&agent)).await, nonce, "nothing was signed");

    // The call_contract tool (MCP here) takes the same delegation: 1 USDC more leaves the owner's account.
    let arguments = json!({"chain": "base", "to": world.usdc.to_checksum(None), "function": "transfer(address,uint256)",
                           "args": [to.to_checksum(None), USDC.to_string()], "delegation": id});
    let rpc = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                     "params": {"name": "call_contract", "arguments": arguments}});
    let (status, body) = app.request(Method::POST, "/mcp", Some(&agent.token), Some(rpc)).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["result"]["isError"], false, "{body}");
    let text = body["result"]["content"][0]["text"].as_str().expect("a text result");
    let sent: Value = serde_json::from_str(text).expect("the result is JSON");
    assert_eq!(sent["delegation_id"], id, "{sent}");
    let expected = U256::from(USDC * 5 / 2);
    assert_eq!(usdc_when(&world, to, expected).await, expected);
    assert_eq!(
        token_balance(&world.anvil, world.usdc, world.owner.address()).await,
        U256::from(100 * USDC) - expected
    );
}
