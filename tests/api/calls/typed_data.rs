//! EIP-712 signatures (docs/api.md §18 `sign-typed-data`) judged by typed-data rules and counted as the allowances
//! they grant. The permit signed is the real one of an unmodified Uniswap V2 pair (its LP token implements an
//! EIP-2612 `permit`): what the chain accepts from the signature is the assertion.

use alloy::primitives::{B256, Signature, U256};
use alloy::sol_types::SolCall;
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use crate::anvil::Anvil;
use crate::helpers::chain::{BASE_CHAIN_ID, ONE_ETH, funded_agent, transfer_app, wallet, wei};
use crate::helpers::solidity::{call_as_dev, read};
use crate::helpers::uniswap::{Uniswap, deploy_uniswap};
use crate::helpers::{CreatedAgent, TestApp, assert_error};

alloy::sol! {
    function allowance(address owner, address spender) external view returns (uint256);
    function permit(address owner, address spender, uint256 value, uint256 deadline, uint8 v, bytes32 r, bytes32 s) external;
}

struct Setup {
    anvil: Anvil,
    app: TestApp,
    agent: CreatedAgent,
    uni: Uniswap,
}

async fn setup(vars: &[(&str, &str)]) -> Setup {
    let anvil = Anvil::start(BASE_CHAIN_ID);
    let uni = deploy_uniswap(&anvil, U256::from(1_000_000_000_000u64), wei(500 * ONE_ETH)).await;
    let app = transfer_app(&anvil, vars).await;
    let agent = funded_agent(&app, &anvil, Some(0.5)).await;
    Setup { anvil, app, agent, uni }
}

/// The pair's EIP-2612 permit of `value` LP units to the router, as a wallet would ask for it.
fn permit_of(s: &Setup, value: &str, chain_id: u64, nonce: u64) -> Value {
    json!({
        "types": {
            "EIP712Domain": [
                {"name": "name", "type": "string"}, {"name": "version", "type": "string"},
                {"name": "chainId", "type": "uint256"}, {"name": "verifyingContract", "type": "address"}],
            "Permit": [
                {"name": "owner", "type": "address"}, {"name": "spender", "type": "address"},
                {"name": "value", "type": "uint256"}, {"name": "nonce", "type": "uint256"},
                {"name": "deadline", "type": "uint256"}]
        },
        "primaryType": "Permit",
        "domain": {"name": "Uniswap V2", "version": "1", "chainId": chain_id,
            "verifyingContract": s.uni.pair.to_string()},
        "message": {"owner": wallet(&s.agent).to_string(), "spender": s.uni.router.to_string(), "value": value,
            "nonce": nonce, "deadline": "99999999999"}
    })
}

async fn sign(s: &Setup, typed_data: Value) -> (StatusCode, Value) {
    let path = format!("/api/agents/{}/sign-typed-data", s.agent.id);
    let body = json!({"chain": "base", "typed_data": typed_data});
    s.app
        .request(Method::POST, &path, Some(&s.agent.token), Some(body))
        .await
}

async fn put_policy(s: &Setup, policy: Value) {
    let path = format!("/api/agents/{}/policy", s.agent.id);
    let (status, body) = crate::money::policy::call(&s.app, &s.agent, true, Method::PUT, &path, Some(policy)).await;
    assert_eq!(status, StatusCode::OK, "{body}");
}

fn permit_rule(s: &Setup, action: &str) -> Value {
    json!({"calls": {"default": "allow", "rules": [
        {"typed_data": {"primary_type": "Permit", "domain": {"verifyingContract": {"eq": s.uni.pair.to_string()}},
            "message": {"spender": {"eq": s.uni.router.to_string()}, "owner": {"eq": "$agent"},
                "value": {"lte": "1000000"}}},
         "action": action}]}})
}

/// Submits the signed permit to the pair from another account and reads the allowance the chain then shows.
async fn use_permit(s: &Setup, value: u64, signature: &str) -> U256 {
    let bytes = alloy::hex::decode(signature).expect("hex");
    assert_eq!(bytes.len(), 65, "{signature}");
    let data = permitCall {
        owner: wallet(&s.agent),
        spender: s.uni.router,
        value: U256::from(value),
        deadline: U256::from(99_999_999_999u64),
        v: bytes[64],
        r: B256::from_slice(&bytes[..32]),
        s: B256::from_slice(&bytes[32..64]),
    };
    call_as_dev(&s.anvil, s.uni.pair, data.abi_encode().into()).await;
    pair_allowance(s).await
}

/// The allowance of the agent's pair tokens to the router, as the chain shows it.
async fn pair_allowance(s: &Setup) -> U256 {
    let owner = wallet(&s.agent);
    let data = allowanceCall {
        owner,
        spender: s.uni.router,
    }
    .abi_encode();
    let out = read(&s.anvil, s.uni.pair, data.into()).await;
    U256::from_be_slice(&out[..32])
}

#[tokio::test]
async fn a_permit_is_signed_under_a_rule_and_refused_without_one() {
    let s = setup(&[]).await;
    // No typed-data rule: refused, even on an unguarded agent whose calls are allowed by default.
    put_policy(&s, json!({"calls": {"default": "allow"}})).await;
    let refused = sign(&s, permit_of(&s, "500", BASE_CHAIN_ID, 0)).await;
    assert_error(&refused, StatusCode::FORBIDDEN, "policy_denied");
    assert_eq!(refused.1["error"]["details"]["rule"], "call_denied", "{}", refused.1);

    // The domain must name the request's chain; EIP-3009 is for x402 only.
    put_policy(&s, permit_rule(&s, "allow")).await;
    let other_chain = sign(&s, permit_of(&s, "500", 1, 0)).await;
    assert_error(&other_chain, StatusCode::UNPROCESSABLE_ENTITY, "validation_failed");
    let mut no_chain = permit_of(&s, "500", BASE_CHAIN_ID, 0);
    no_chain["domain"].as_object_mut().unwrap().remove("chainId");
    assert_error(
        &sign(&s, no_chain).await,
        StatusCode::UNPROCESSABLE_ENTITY,
        "validation_failed",
    );
    let mut eip3009 = permit_of(&s, "500", BASE_CHAIN_ID, 0);
    eip3009["primaryType"] = json!("TransferWithAuthorization");
    eip3009["types"]["TransferWithAuthorization"] = json!([{"name": "from", "type": "address"}]);
    eip3009["message"] = json!({"from": wallet(&s.agent).to_string()});
    assert_error(
        &sign(&s, eip3009).await,
        StatusCode::UNPROCESSABLE_ENTITY,
        "validation_failed",
    );

    // Above what the rule allows: no rule matches. Unlimited: the guard, whatever the rules say.
    let above = sign(&s, permit_of(&s, "2000000", BASE_CHAIN_ID, 0)).await;
    assert_eq!(above.1["error"]["details"]["rule"], "call_denied", "{}", above.1);
    put_policy(
        &s,
        json!({"calls": {"rules": [{"typed_data": {"primary_type": "Permit"}, "action": "allow"}]}}),
    )
    .await;
    let unlimited = sign(&s, permit_of(&s, &U256::MAX.to_string(), BASE_CHAIN_ID, 0)).await;
    assert_error(&unlimited, StatusCode::FORBIDDEN, "policy_denied");
    assert_eq!(
        unlimited.1["error"]["details"]["rule"], "unlimited_approval",
        "{}",
        unlimited.1
    );

    // Within the rule: signed by the agent's key, and the pair accepts it.
    put_policy(&s, permit_rule(&s, "allow")).await;
    let (status, signed) = sign(&s, permit_of(&s, "500", BASE_CHAIN_ID, 0)).await;
    assert_eq!(status, StatusCode::OK, "{signed}");
    let digest: B256 = signed["digest"].as_str().unwrap().parse().unwrap();
    let signature: Signature = signed["signature"].as_str().unwrap().parse().unwrap();
    assert_eq!(
        signature.recover_address_from_prehash(&digest).unwrap(),
        wallet(&s.agent)
    );
    assert_eq!(
        use_permit(&s, 500, signed["signature"].as_str().unwrap()).await,
        U256::from(500)
    );
    assert_eq!(s.anvil.nonce(wallet(&s.agent)).await, 0, "the agent sent nothing");
}

#[tokio::test]
async fn a_held_permit_is_signed_once_the_owner_approves_and_counts_against_the_day() {
    use crate::money::policy::ADMIN;
    let s = setup(&[("ADMIN_TOKEN", ADMIN)]).await;
    let pair_key = format!("base:{}", format!("{:#x}", s.uni.pair).to_lowercase());
    let mut policy = permit_rule(&s, "approve");
    policy["limits"] = json!({ pair_key: {"per_day": "1500"} });
    put_policy(&s, policy).await;

    let (status, held) = sign(&s, permit_of(&s, "1000", BASE_CHAIN_ID, 0)).await;
    assert_eq!(status, StatusCode::ACCEPTED, "{held}");
    assert_eq!(held["status"], "awaiting_approval", "{held}");
    let id = held["transfer_id"].as_str().unwrap().to_owned();
    let list = format!("/api/agents/{}/approvals", s.agent.id);
    let (_, waiting) = crate::money::policy::call(&s.app, &s.agent, true, Method::GET, &list, None).await;
    assert_eq!(waiting[0]["kind"], "typed_data", "{waiting}");
    assert_eq!(waiting[0]["held_by"], json!(["calls.rules[0]"]), "{waiting}");
    assert!(
        waiting[0].get("max_fee").is_none(),
        "a signature pays no fee: {waiting}"
    );
    assert_eq!(waiting[0]["simulation"]["approvals"][0]["amount"], "1000", "{waiting}");

    let approve = format!("/api/agents/{}/transfers/{id}/approve", s.agent.id);
    let (status, approved) = crate::money::policy::call(&s.app, &s.agent, true, Method::POST, &approve, None).await;
    assert_eq!(status, StatusCode::OK, "{approved}");
    let get = format!("/api/agents/{}/transfers/{id}", s.agent.id);
    let (status, got) = s.app.request(Method::GET, &get, Some(&s.agent.token), None).await;
    assert_eq!(status, StatusCode::OK, "{got}");
    assert_eq!(got["kind"], "typed_data", "{got}");
    assert_eq!(got["typed_data"]["digest"], held["digest"], "{got}");
    let signature = got["typed_data"]["signature"].as_str().unwrap().to_owned();
    assert_eq!(use_permit(&s, 1000, &signature).await, U256::from(1000));

    // The day has 500 of the pair's token left. A permit sets the allowance it names whatever the chain shows
    // (1,000): it counts whole (§18), so 600 is refused and 500 fits, and waits for the owner again.
    let over = sign(&s, permit_of(&s, "600", BASE_CHAIN_ID, 1)).await;
    assert_error(&over, StatusCode::FORBIDDEN, "policy_denied");
    assert_eq!(over.1["error"]["details"]["rule"], "per_day", "{}", over.1);
    let (status, fits) = sign(&s, permit_of(&s, "500", BASE_CHAIN_ID, 1)).await;
    assert_eq!(status, StatusCode::ACCEPTED, "{fits}");
}

/// Approving a held signature uses no nonce of the wallet's: transfers on their way keep theirs, and the next one
/// takes the one after them (the approval once set the wallet's nonce counter back to 1, so a later send reused the
/// nonce of a transfer still in the pool and the node refused it).
#[tokio::test]
async fn approving_a_held_signature_leaves_the_wallets_nonces_alone() {
    use crate::money::policy::ADMIN;
    let s = setup(&[("ADMIN_TOKEN", ADMIN)]).await;
    put_policy(&s, permit_rule(&s, "approve")).await;
    s.anvil.set_automine(false).await;
    let send = |to: alloy::primitives::Address| {
        let path = format!("/api/agents/{}/transfers", s.agent.id);
        let body = json!({"chain": "base", "to": to.to_string(), "amount": "0.001"});
        s.app
            .send(s.app.build(Method::POST, &path, Some(&s.agent.token), Some(body)))
    };
    let (first, second, third) = (
        crate::helpers::chain::fresh_address(),
        crate::helpers::chain::fresh_address(),
        crate::helpers::chain::fresh_address(),
    );
    assert_eq!(send(first).await.status, StatusCode::CREATED);
    assert_eq!(send(second).await.status, StatusCode::CREATED);
    let (status, held) = sign(&s, permit_of(&s, "500", BASE_CHAIN_ID, 0)).await;
    assert_eq!(status, StatusCode::ACCEPTED, "{held}");
    let id = held["transfer_id"].as_str().unwrap().to_owned();
    let approve = format!("/api/agents/{}/transfers/{id}/approve", s.agent.id);
    let (status, approved) = crate::money::policy::call(&s.app, &s.agent, true, Method::POST, &approve, None).await;
    assert_eq!(status, StatusCode::OK, "{approved}");
    let after = send(third).await;
    assert_eq!(after.status, StatusCode::CREATED, "{}", after.body);
    assert_eq!(after.body["nonce"], 2, "{}", after.body);
    s.anvil.mine(1).await;
    s.anvil.set_automine(true).await;
    assert_eq!(
        s.anvil.nonce(wallet(&s.agent)).await,
        3,
        "the chain shows all three transfers"
    );
    assert_eq!(s.anvil.balance(third).await, wei(ONE_ETH / 1000));
}

#[tokio::test]
async fn a_permit_the_rules_refuse_is_refused_naming_the_rule_and_the_condition() {
    let s = setup(&[]).await;
    let message = |answer: &(StatusCode, Value)| {
        assert_error(answer, StatusCode::FORBIDDEN, "policy_denied");
        assert_eq!(answer.1["error"]["details"]["rule"], "call_denied", "{}", answer.1);
        answer.1["error"]["message"].as_str().unwrap_or_default().to_owned()
    };
    // The rule names the permit's type, but its value condition does not hold: the rule, the condition and the
    // value the message had.
    put_policy(&s, permit_rule(&s, "allow")).await;
    let above = message(&sign(&s, permit_of(&s, "2000000", BASE_CHAIN_ID, 0)).await);
    assert!(
        above.ends_with(
            "(rule call_denied): rule 1 (typed data Permit) did not allow it: message.value must be at most 1000000; it was 2000000"
        ),
        "{above}"
    );
    // A spender other than the one the rule names: the domain holds, the message's spender does not.
    let mut other = permit_of(&s, "500", BASE_CHAIN_ID, 0);
    let stranger = alloy::primitives::Address::repeat_byte(0x42);
    other["message"]["spender"] = json!(stranger.to_string());
    let spender = message(&sign(&s, other).await);
    assert!(
        spender.ends_with(&format!(
            "rule 1 (typed data Permit) did not allow it: message.spender must be {}; it was {}",
            s.uni.router.to_checksum(None),
            stranger.to_checksum(None)
        )),
        "{spender}"
    );
    // A rule that denies it, and none that names its type.
    put_policy(&s, permit_rule(&s, "deny")).await;
    let denied = message(&sign(&s, permit_of(&s, "500", BASE_CHAIN_ID, 0)).await);
    assert!(denied.ends_with("rule 1 (typed data Permit) denies it"), "{denied}");
    put_policy(&s, json!({"calls": {"default": "allow"}})).await;
    let unnamed = message(&sign(&s, permit_of(&s, "500", BASE_CHAIN_ID, 0)).await);
    assert!(
        unnamed.ends_with("no rule names typed data Permit, and typed data is signed only when a rule allows it"),
        "{unnamed}"
    );
    // Nothing was signed: the pair shows no allowance to the router.
    assert_eq!(pair_allowance(&s).await, U256::ZERO);
}
