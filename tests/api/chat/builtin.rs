//! `POST /api/chat` with the builtin engine against real nodes (docs/api.md §6): each request form, with the figures in
//! the answer checked against what the node holds; the response shape; conversations; validation; auth order; and
//! the capability limits of the engine.

use alloy::consensus::{SignableTransaction, TxEip1559, TxEnvelope};
use alloy::eips::eip2718::Encodable2718;
use alloy::primitives::{Address, B256, Bytes, TxKind, U256};
use alloy::providers::Provider;
use alloy::signers::SignerSync;
use alloy::signers::local::PrivateKeySigner;
use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::anvil::Anvil;
use crate::helpers::assert_error;
use crate::helpers::chat::{
    ALL_CAPABILITIES, BASE_ID, address, agent_with, assert_contains, chat, chat_in, post_chat, post_turn, tools_of,
    two_chains,
};

const ETHER: u128 = 1_000_000_000_000_000_000;

#[tokio::test]
async fn my_balance_on_base_quotes_the_node_exactly() {
    let env = two_chains(&[], &[]).await;
    let agent = agent_with(&env.app, "Ledger", ALL_CAPABILITIES).await;
    let wallet = address(&agent, "base");
    let wei = U256::from(1_234_567_000_000_000_000u128);
    env.base.set_balance(wallet, wei).await;

    let turn = chat(&env.app, &agent, "what is my balance on base").await;

    assert_eq!(tools_of(&turn), ["get_balance"], "{turn}");
    let call = &turn["chain_calls"][0];
    assert_eq!(call["args"], json!({"chain": "base"}), "{call}");
    assert_eq!(env.base.balance(wallet).await, wei);
    assert_eq!(call["result"]["wei"], wei.to_string(), "{call}");
    assert_eq!(call["result"]["formatted"], "1.234567", "{call}");
    assert_eq!(call["result"]["symbol"], "ETH", "{call}");
    assert_eq!(call["result"]["address"], agent.address("base"), "{call}");
    assert!(call.get("error").is_none_or(Value::is_null), "{call}");
    assert_contains(&turn["response"], "1.234567 ETH");
    assert_contains(&turn["response"], "1234567000000000000");
    assert!(turn["tokens_used"].as_u64().unwrap() > 0, "{turn}");

    // The stored assistant message is the one the response names, with the same chain calls.
    let conversation = turn["conversation_id"].as_str().unwrap();
    let messages = env.app.messages(&agent, conversation).await;
    assert_eq!(messages.len(), 2, "{messages:?}");
    assert_eq!(messages[0]["role"], "user");
    assert_eq!(messages[0]["content"], "what is my balance on base");
    assert_eq!(messages[1]["id"], turn["message_id"]);
    assert_eq!(messages[1]["content"], turn["response"]);
    assert_eq!(messages[1]["chain_calls"], turn["chain_calls"]);
}

#[tokio::test]
async fn balances_lists_every_chain_of_the_agent() {
    let env = two_chains(&[], &[]).await;
    let agent = agent_with(&env.app, "Ledger", ALL_CAPABILITIES).await;
    let wallet = address(&agent, "base");
    env.base.set_balance(wallet, U256::from(ETHER / 2)).await;
    // 2 ETH and one wei: every digit matters.
    env.ethereum.set_balance(wallet, U256::from(2 * ETHER + 1)).await;

    let turn = chat(&env.app, &agent, "balances").await;

    assert_eq!(tools_of(&turn), ["compare_balances"], "{turn}");
    let rows = turn["chain_calls"][0]["result"]["balances"].as_array().unwrap().clone();
    let row = |chain: &str| rows.iter().find(|r| r["chain"] == chain).cloned().unwrap();
    assert_eq!(row("base")["wei"], "500000000000000000");
    assert_eq!(row("base")["formatted"], "0.5");
    assert_eq!(row("ethereum")["wei"], "2000000000000000001");
    assert_eq!(row("ethereum")["formatted"], "2.000000000000000001");
    assert_contains(&turn["response"], "0.5 ETH");
    assert_contains(&turn["response"], "2.000000000000000001 ETH");
}

#[tokio::test]
async fn gas_price_on_ethereum_quotes_the_base_fee_of_the_node() {
    let env = two_chains(&[], &["--base-fee", "7000000000"]).await;
    let agent = agent_with(&env.app, "Gauge", ALL_CAPABILITIES).await;
    let latest = env
        .ethereum
        .provider()
        .get_block_by_number(alloy::eips::BlockNumberOrTag::Latest)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(latest.header.base_fee_per_gas, Some(7_000_000_000));
    let tip = env.ethereum.provider().get_max_priority_fee_per_gas().await.unwrap();

    let turn = chat(&env.app, &agent, "gas price on ethereum").await;

    assert_eq!(tools_of(&turn), ["get_gas_price"], "{turn}");
    let call = &turn["chain_calls"][0];
    assert_eq!(call["args"], json!({"chain": "ethereum"}));
    assert_eq!(call["result"]["base_fee_gwei"], "7", "{call}");
    let total_gwei = gwei(7_000_000_000 + tip);
    assert_eq!(call["result"]["gas_price_gwei"], total_gwei, "{call}");
    assert_contains(&turn["response"], "base fee 7 gwei");
    assert_contains(&turn["response"], &format!("{total_gwei} gwei"));
}

/// Wei as exact gwei text, `7000000000` -> `7`, `1500000000` -> `1.5`.
pub(crate) fn gwei(wei: u128) -> String {
    let whole = wei / 1_000_000_000;
    let frac = wei % 1_000_000_000;
    if frac == 0 {
        whole.to_string()
    } else {
        format!("{whole}.{}", format!("{frac:09}").trim_end_matches('0'))
    }
}

#[tokio::test]
async fn compare_gas_names_the_cheaper_chain() {
    for (base_fee, ethereum_fee, cheapest) in [
        ("1000000000", "30000000000", "base"),
        ("40000000000", "2000000000", "ethereum"),
    ] {
        let env = two_chains(&["--base-fee", base_fee], &["--base-fee", ethereum_fee]).await;
        let agent = agent_with(&env.app, "Gauge", ALL_CAPABILITIES).await;

        let turn = chat(&env.app, &agent, "compare gas").await;

        assert_eq!(tools_of(&turn), ["compare_gas"], "{turn}");
        let result = &turn["chain_calls"][0]["result"];
        assert_eq!(result["cheapest"], cheapest, "{result}");
        let rows = result["chains"].as_array().unwrap();
        assert_eq!(rows.len(), 2, "{result}");
        for row in rows {
            let expected = if row["chain"] == "base" { base_fee } else { ethereum_fee };
            assert_eq!(row["base_fee_gwei"], gwei(expected.parse().unwrap()), "{row}");
        }
        assert_contains(&turn["response"], &format!("the cheapest is {cheapest}"));
    }
}

#[tokio::test]
async fn latest_block_on_base_is_the_node_head() {
    let env = two_chains(&[], &[]).await;
    let agent = agent_with(&env.app, "Watcher", &["read"]).await;
    env.base.mine(17).await;
    let head = env.base.block_number().await;
    assert_eq!(head, 17);

    let turn = chat(&env.app, &agent, "latest block on base").await;

    assert_eq!(tools_of(&turn), ["get_block_number"], "{turn}");
    assert_eq!(turn["chain_calls"][0]["result"]["block_number"], head, "{turn}");
    assert_contains(&turn["response"], &format!("The latest block on base is {head}."));
}

#[tokio::test]
async fn the_cost_of_a_transfer_is_estimated_from_the_node_fees() {
    let env = two_chains(&["--base-fee", "2000000000"], &[]).await;
    let agent = agent_with(&env.app, "Quoter", ALL_CAPABILITIES).await;
    let tip = env.base.provider().get_max_priority_fee_per_gas().await.unwrap();

    let turn = chat(&env.app, &agent, "how much would it cost to send 0.01 ETH on base").await;

    assert_eq!(tools_of(&turn), ["estimate_transfer_cost"], "{turn}");
    let call = &turn["chain_calls"][0];
    assert_eq!(call["args"], json!({"chain": "base", "amount": "0.01"}), "{call}");
    let result = &call["result"];
    assert_eq!(result["amount_wei"], "10000000000000000", "{result}");
    assert_eq!(result["gas_limit"], 21_000, "{result}");
    let fee = 21_000u128 * (2_000_000_000 + tip);
    assert_eq!(result["fee_wei"], fee.to_string(), "{result}");
    assert_eq!(
        result["total_wei"],
        (10_000_000_000_000_000 + fee).to_string(),
        "{result}"
    );
    let fee_text = result["fee"].as_str().unwrap().to_string();
    let total_text = result["total"].as_str().unwrap().to_string();
    assert_contains(&turn["response"], &format!("{fee_text} ETH"));
    assert_contains(&turn["response"], &fee.to_string());
    assert_contains(&turn["response"], &format!("{total_text} ETH"));
    // Nothing was sent.
    assert_eq!(env.base.nonce(address(&agent, "base")).await, 0);
}

#[tokio::test]
async fn spending_is_summarised_against_the_cap() {
    let env = two_chains(&[], &[]).await;
    let agent = env
        .app
        .create_agent_ok(
            json!({"name": "Saver", "chains": ["base"], "capabilities": ["analytics"], "spending_cap": 0.25}),
        )
        .await;

    let turn = chat(&env.app, &agent, "how much have I spent").await;

    assert_eq!(tools_of(&turn), ["spending_summary"], "{turn}");
    let rows = turn["chain_calls"][0]["result"]["chains"].as_array().unwrap().clone();
    assert_eq!(rows.len(), 1, "{turn}");
    assert_eq!(rows[0]["chain"], "base");
    assert_eq!(rows[0]["spending_cap"], "0.25");
    assert_eq!(rows[0]["spent"], "0");
    assert_eq!(rows[0]["remaining"], "0.25");
    assert_contains(&turn["response"], "spent 0 ETH of a 0.25 ETH cap, 0.25 ETH remaining");
}

#[tokio::test]
async fn transactions_are_listed_after_a_transfer() {
    let env = two_chains(&[], &[]).await;
    let agent = agent_with(&env.app, "Payer", ALL_CAPABILITIES).await;
    let wallet = address(&agent, "base");
    env.base.set_balance(wallet, U256::from(2 * ETHER)).await;

    let empty = chat(&env.app, &agent, "show my transactions").await;
    assert_eq!(tools_of(&empty), ["transaction_history"], "{empty}");
    assert_eq!(empty["chain_calls"][0]["result"]["count"], 0, "{empty}");
    assert_contains(&empty["response"], "No transactions yet.");

    let recipient: Address = Anvil::DEV_ADDRESS.parse().unwrap();
    let before = env.base.balance(recipient).await;
    let sent = chat(
        &env.app,
        &agent,
        &format!("send 0.01 ETH to {} on base", Anvil::DEV_ADDRESS),
    )
    .await;
    assert_eq!(tools_of(&sent), ["send_native"], "{sent}");
    let hash = sent["chain_calls"][0]["result"]["tx_hash"]
        .as_str()
        .unwrap_or_else(|| panic!("the transfer has a hash: {sent}"))
        .to_string();
    // anvil is a local node: no public explorer knows the transaction, and the answer does not link to one.
    assert_eq!(sent["chain_calls"][0]["result"]["local_node"], true, "{sent}");
    assert_contains(&sent["response"], "local node");
    assert!(
        !sent["response"].as_str().unwrap_or_default().contains("basescan"),
        "{sent}"
    );
    // anvil's automine answers the broadcast before the block is sealed: the balance moves a moment later.
    let expected = before + U256::from(10_000_000_000_000_000u128);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while env.base.balance(recipient).await != expected {
        assert!(std::time::Instant::now() < deadline, "anvil mined the transfer");
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }

    let listed = chat(&env.app, &agent, "show my transactions").await;
    let result = &listed["chain_calls"][0]["result"];
    assert_eq!(result["count"], 1, "{result}");
    assert_eq!(result["transactions"][0]["tx_hash"], hash, "{result}");
    assert_eq!(result["transactions"][0]["value_wei"], "10000000000000000", "{result}");
    assert_contains(&listed["response"], &hash);
    assert_contains(&listed["response"], "10000000000000000 wei");
    // The tool lists a transfer in the shape of the transactions endpoint.
    let keys = |entry: &Value| entry.as_object().map(|o| o.keys().cloned().collect::<Vec<_>>());
    let endpoint = crate::helpers::chain::transactions(&env.app, &agent).await;
    assert_eq!(keys(&result["transactions"][0]), keys(&endpoint[0]), "{result}");
}

/// Sends 0.25 ETH from anvil's first development account and returns the transaction hash.
async fn dev_transfer(anvil: &Anvil, chain_id: u64, to: Address) -> B256 {
    let signer: PrivateKeySigner = Anvil::DEV_PRIVATE_KEY.trim_start_matches("0x").parse().unwrap();
    let nonce = anvil.nonce(signer.address()).await;
    let tx = TxEip1559 {
        chain_id,
        nonce,
        gas_limit: 21_000,
        max_fee_per_gas: 100_000_000_000,
        max_priority_fee_per_gas: 1_000_000_000,
        to: TxKind::Call(to),
        value: U256::from(ETHER / 4),
        access_list: Default::default(),
        input: Bytes::new(),
    };
    let signature = signer.sign_hash_sync(&tx.signature_hash()).unwrap();
    let raw = TxEnvelope::from(tx.into_signed(signature)).encoded_2718();
    let pending = anvil.provider().send_raw_transaction(&raw).await.unwrap();
    *pending.tx_hash()
}

#[tokio::test]
async fn the_status_of_a_transaction_is_read_from_the_node() {
    let env = two_chains(&[], &[]).await;
    let agent = agent_with(&env.app, "Tracker", &["read"]).await;
    let to = Address::repeat_byte(0x42);
    let hash = dev_transfer(&env.base, BASE_ID, to).await;
    env.base.mine(2).await;
    let receipt = env
        .base
        .provider()
        .get_transaction_receipt(hash)
        .await
        .unwrap()
        .expect("mined");
    let block = receipt.block_number.unwrap();
    let hash_text = format!("{hash:#x}");

    let turn = chat(&env.app, &agent, &format!("status of {hash_text} on base")).await;

    assert_eq!(tools_of(&turn), ["get_transaction"], "{turn}");
    let call = &turn["chain_calls"][0];
    assert_eq!(call["args"]["chain"], "base", "{call}");
    assert_eq!(call["args"]["tx_hash"].as_str().unwrap().to_lowercase(), hash_text);
    let result = &call["result"];
    assert_eq!(result["status"], "confirmed", "{result}");
    assert_eq!(result["block_number"], block, "{result}");
    assert_eq!(result["confirmations"], 3, "included plus two blocks on top: {result}");
    assert_eq!(result["value_wei"], "250000000000000000", "{result}");
    assert_eq!(result["from"], Anvil::DEV_ADDRESS, "{result}");
    assert_eq!(result["to"], to.to_checksum(None), "{result}");
    assert_contains(&turn["response"], "confirmed");
    assert_contains(&turn["response"], &format!("block {block}"));
    assert_contains(&turn["response"], "0.25 ETH");

    let unknown = format!("0x{}", "ab".repeat(32));
    let turn = chat(&env.app, &agent, &format!("status of {unknown} on base")).await;
    assert_eq!(turn["chain_calls"][0]["result"]["status"], "not_found", "{turn}");
    assert_contains(&turn["response"], "was not found on base");
}

#[tokio::test]
async fn anything_else_gets_a_help_text_for_the_agents_capabilities() {
    let env = two_chains(&[], &[]).await;
    let reader = agent_with(&env.app, "Reader Bot", &["read"]).await;
    let full = agent_with(&env.app, "Full Bot", ALL_CAPABILITIES).await;

    let turn = chat(&env.app, &reader, "tell me a joke about penguins").await;
    assert_eq!(turn["chain_calls"], json!([]), "{turn}");
    assert!(turn["tokens_used"].as_u64().unwrap() > 0, "{turn}");
    let text = turn["response"].as_str().unwrap();
    assert!(text.contains("Reader Bot"), "{text}");
    assert!(text.contains("balance"), "{text}");
    assert!(text.contains("gas"), "{text}");
    assert!(
        !text.contains("send"),
        "a read-only agent does not offer transfers: {text}"
    );
    assert!(!text.contains("compare gas"), "{text}");

    let turn = chat(&env.app, &full, "tell me a joke about penguins").await;
    let text = turn["response"].as_str().unwrap();
    for capability in ALL_CAPABILITIES {
        assert!(text.contains(capability), "{capability} is missing from {text}");
    }
}

#[tokio::test]
async fn a_second_turn_continues_the_same_conversation() {
    let env = two_chains(&[], &[]).await;
    let agent = agent_with(&env.app, "Talker", ALL_CAPABILITIES).await;

    let first = chat(&env.app, &agent, "latest block on base").await;
    let conversation = first["conversation_id"].as_str().unwrap().to_string();
    let second = chat_in(&env.app, &agent, "gas price on base", Some(&conversation)).await;

    assert_eq!(second["conversation_id"], conversation.as_str());
    assert_ne!(second["message_id"], first["message_id"]);
    let messages = env.app.messages(&agent, &conversation).await;
    let contents: Vec<&str> = messages.iter().map(|m| m["content"].as_str().unwrap()).collect();
    assert_eq!(
        contents,
        [
            "latest block on base",
            first["response"].as_str().unwrap(),
            "gas price on base",
            second["response"].as_str().unwrap()
        ]
    );
    // A turn without a conversation id starts a new one.
    let third = chat(&env.app, &agent, "latest block on base").await;
    assert_ne!(third["conversation_id"], conversation.as_str());
}

#[tokio::test]
async fn another_agents_or_an_unknown_conversation_is_refused() {
    let env = two_chains(&[], &[]).await;
    let alice = agent_with(&env.app, "Alice", &["read"]).await;
    let bob = agent_with(&env.app, "Bob", &["read"]).await;
    let turn = chat(&env.app, &alice, "hello").await;
    let conversation = turn["conversation_id"].as_str().unwrap();

    let foreign = post_chat(
        &env.app,
        "/api/chat",
        Some(&bob.token),
        json!({"agent_id": bob.id, "message": "hi", "conversation_id": conversation}),
    )
    .await;
    assert_error(&(foreign.status, foreign.body), StatusCode::FORBIDDEN, "forbidden");

    let unknown = post_chat(
        &env.app,
        "/api/chat",
        Some(&alice.token),
        json!({"agent_id": alice.id, "message": "hi", "conversation_id": uuid::Uuid::new_v4()}),
    )
    .await;
    assert_error(
        &(unknown.status, unknown.body),
        StatusCode::NOT_FOUND,
        "conversation_not_found",
    );
    // Neither refusal added anything to Alice's conversation.
    let messages = env.app.messages(&alice, conversation).await;
    assert_eq!(messages.len(), 2, "{messages:?}");
}

#[tokio::test]
async fn chat_validates_the_message_and_the_connected_wallet() {
    let env = two_chains(&[], &[]).await;
    let agent = agent_with(&env.app, "Strict", &["read"]).await;
    let send = |body: Value| post_chat(&env.app, "/api/chat", Some(&agent.token), body);

    for message in [json!(""), json!("   \n "), json!("x".repeat(8001))] {
        let response = send(json!({"agent_id": agent.id, "message": message})).await;
        assert_error(
            &(response.status, response.body),
            StatusCode::UNPROCESSABLE_ENTITY,
            "validation_failed",
        );
    }
    for wallet in ["0x1234", "hello", "0xZZ9Fd6e51aad88F6F4ce6aB8827279cffFb92266"] {
        let response =
            send(json!({"agent_id": agent.id, "message": "balances", "connected_wallet_address": wallet})).await;
        assert_error(
            &(response.status, response.body),
            StatusCode::UNPROCESSABLE_ENTITY,
            "validation_failed",
        );
    }
    // No refused request left a conversation behind.
    let list = env.app.list_conversations(&agent).await;
    assert_eq!(list, Vec::<Value>::new());

    // The limits themselves are accepted: 8000 characters (multi-byte ones count once) and a 0x address.
    let response = send(json!({"agent_id": agent.id, "message": "é".repeat(8000)})).await;
    assert_eq!(response.status, StatusCode::OK, "{}", response.text);
    let response = send(json!({
        "agent_id": agent.id,
        "message": "what is the balance of my connected wallet on base",
        "connected_wallet_address": Anvil::DEV_ADDRESS.to_lowercase(),
    }))
    .await;
    assert_eq!(response.status, StatusCode::OK, "{}", response.text);
    // The connected wallet is the address read.
    let call = &response.body["chain_calls"][0];
    assert_eq!(call["tool"], "get_balance", "{}", response.body);
    assert_eq!(call["result"]["address"], Anvil::DEV_ADDRESS, "{}", response.body);
    assert_eq!(call["result"]["formatted"], "10000", "anvil's dev account: {call}");
}

#[tokio::test]
async fn chat_checks_token_agent_and_activity_in_order() {
    let env = two_chains(&[], &[]).await;
    let agent = agent_with(&env.app, "Guarded", &["read"]).await;
    let other = agent_with(&env.app, "Other", &["read"]).await;
    let body = |id: &str| json!({"agent_id": id, "message": "balances"});

    let missing = post_chat(&env.app, "/api/chat", None, body(&agent.id)).await;
    assert_error(
        &(missing.status, missing.body),
        StatusCode::UNAUTHORIZED,
        "missing_token",
    );
    let invalid = post_chat(
        &env.app,
        "/api/chat",
        Some("agt_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"),
        body(&agent.id),
    )
    .await;
    assert_error(
        &(invalid.status, invalid.body),
        StatusCode::UNAUTHORIZED,
        "invalid_token",
    );
    let foreign = post_chat(&env.app, "/api/chat", Some(&other.token), body(&agent.id)).await;
    assert_error(&(foreign.status, foreign.body), StatusCode::FORBIDDEN, "forbidden");
    let unknown = post_chat(
        &env.app,
        "/api/chat",
        Some(&agent.token),
        body(&uuid::Uuid::new_v4().to_string()),
    )
    .await;
    assert_error(
        &(unknown.status, unknown.body),
        StatusCode::NOT_FOUND,
        "agent_not_found",
    );

    let (status, _) = env.app.delete_agent(&agent.id, &agent.token).await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    let inactive = post_chat(&env.app, "/api/chat", Some(&agent.token), body(&agent.id)).await;
    assert_error(&(inactive.status, inactive.body), StatusCode::GONE, "agent_inactive");
    // The order: a deleted agent with the wrong token is still 403, an empty message of a deleted agent is 410.
    let foreign = post_chat(&env.app, "/api/chat", Some(&other.token), body(&agent.id)).await;
    assert_error(&(foreign.status, foreign.body), StatusCode::FORBIDDEN, "forbidden");
    let empty = post_turn(&env.app, &agent, "").await;
    assert_error(&(empty.status, empty.body), StatusCode::GONE, "agent_inactive");
}

#[tokio::test]
async fn the_builtin_engine_stays_within_the_agents_capabilities() {
    let env = two_chains(&[], &[]).await;
    let reader = agent_with(&env.app, "Reader", &["read"]).await;
    let wallet = address(&reader, "base");
    env.base.set_balance(wallet, U256::from(ETHER)).await;
    let recipient = Address::repeat_byte(0x77);

    // Each request needs a capability the agent lacks: the answer names it and no tool of it runs.
    for (message, capability, tool) in [
        (
            "how much would it cost to send 0.01 ETH on base".to_string(),
            "compare",
            "estimate_transfer_cost",
        ),
        ("how much have I spent".to_string(), "analytics", "spending_summary"),
        ("show my transactions".to_string(), "analytics", "transaction_history"),
        (
            format!("send 0.01 ETH to {} on base", recipient.to_checksum(None)),
            "transact",
            "send_native",
        ),
    ] {
        let turn = chat(&env.app, &reader, &message).await;
        assert_eq!(turn["chain_calls"], json!([]), "{message}: {turn}");
        let text = turn["response"].as_str().unwrap();
        assert!(
            text.contains(&format!("{capability} capability")),
            "{message}: the answer names the missing capability: {text}"
        );
        assert!(text.contains(tool), "{message}: {text}");
    }
    assert_eq!(env.base.balance(recipient).await, U256::ZERO);
    assert_eq!(env.base.nonce(wallet).await, 0, "nothing was sent");

    // "compare gas" needs `compare`: no compare tool runs for a read-only agent (the engine may still read each
    // chain's gas price with its `read` tools, one chain at a time).
    let turn = chat(&env.app, &reader, "compare gas").await;
    let tools = tools_of(&turn);
    assert!(
        tools.iter().all(|t| t == "get_gas_price"),
        "only read tools run for a read-only agent: {turn}"
    );
    let text = turn["response"].as_str().unwrap();
    assert!(
        !tools.is_empty() || text.contains("compare capability"),
        "either the read tools answered or the answer names the missing capability: {text}"
    );
}
