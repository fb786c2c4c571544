//! §23 beside §18: an authorization this service holds for a payment to the agent is settled through no other path —
//! a contract call of the token's `transferWithAuthorization` or `cancelAuthorization` naming it is refused
//! (`call_denied`), nothing sent. And `drive_sale`: `/x402/{oid}` answered for the document's check (a 402 without a
//! payment, a 200 with one, a 404 for an unknown offer, a 405 for a POST to an offer settled on success).

use alloy::primitives::{Address, B256, Bytes, U256};
use alloy::signers::SignerSync;
use alloy::signers::local::PrivateKeySigner;
use alloy::sol_types::{SolCall, SolStruct, eip712_domain};
use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use crate::anvil::Anvil;
use crate::helpers::chain::{BASE_CHAIN_ID, funded_agent, transfer_app, wallet};
use crate::helpers::solidity::{authorization_state, mint, token_balance, usdc_on_base};
use crate::helpers::{CreatedAgent, TestApp, TestResponse};

alloy::sol! {
    struct TransferWithAuthorization {
        address from;
        address to;
        uint256 value;
        uint256 validAfter;
        uint256 validBefore;
        bytes32 nonce;
    }

    interface IUse {
        function transferWithAuthorization(address from, address to, uint256 value, uint256 validAfter,
            uint256 validBefore, bytes32 nonce, bytes signature) external;
        function cancelAuthorization(address authorizer, bytes32 nonce, bytes signature) external;
    }
}

struct Shop {
    anvil: Anvil,
    app: TestApp,
    agent: CreatedAgent,
    usdc: Address,
    payer: PrivateKeySigner,
}

async fn shop() -> Shop {
    let anvil = Anvil::start(BASE_CHAIN_ID);
    let app = transfer_app(&anvil, &[]).await;
    let agent = funded_agent(&app, &anvil, Some(0.5)).await;
    let usdc = usdc_on_base(&anvil).await;
    let payer = PrivateKeySigner::random();
    mint(&anvil, usdc, payer.address(), U256::from(1_000_000u64)).await;
    Shop {
        anvil,
        app,
        agent,
        usdc,
        payer,
    }
}

impl Shop {
    /// A stored body sold for 0.01 USDC, settled as `settle` says; its id.
    async fn offer(&self, settle: &str) -> String {
        let body = json!({"chain": "base", "asset": "USDC", "price": "0.01", "description": "a stored answer",
            "resource": {"content": "forty-two", "content_type": "application/octet-stream"},
            "settle": settle, "gas_per_day": "0.01"});
        let path = format!("/api/agents/{}/offers", self.agent.id);
        let (status, offer) = self
            .app
            .request(Method::POST, &path, Some(&self.agent.token), Some(body))
            .await;
        assert_eq!(status, StatusCode::CREATED, "{offer}");
        offer["id"].as_str().unwrap().to_string()
    }

    async fn get(&self, oid: &str, payment: Option<&str>) -> TestResponse {
        let mut builder = self.app.client.get(self.app.url(&format!("/x402/{oid}")));
        if let Some(payment) = payment {
            builder = builder.header("PAYMENT-SIGNATURE", payment);
        }
        self.app.send(builder).await
    }

    fn pay(&self, required: &Value) -> (String, B256) {
        pay_terms(&self.payer, self.usdc, required)
    }
}

/// `payer`'s signed payment of the terms `required` (a `PAYMENT-REQUIRED` document) in the EIP-3009 token `usdc`
/// (USDC's domain on base), and its nonce.
pub fn pay_terms(payer: &PrivateKeySigner, usdc: Address, required: &Value) -> (String, B256) {
    let accepted = &required["accepts"][0];
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let nonce = B256::from(PrivateKeySigner::random().to_bytes());
    let message = TransferWithAuthorization {
        from: payer.address(),
        to: accepted["payTo"].as_str().unwrap().parse().unwrap(),
        value: accepted["amount"].as_str().unwrap().parse().unwrap(),
        validAfter: U256::from(now - 5),
        validBefore: U256::from(now + 120),
        nonce,
    };
    let domain = eip712_domain! {
        name: "USD Coin".to_owned(),
        version: "2".to_owned(),
        chain_id: BASE_CHAIN_ID,
        verifying_contract: usdc,
    };
    let signature = payer.sign_hash_sync(&message.eip712_signing_hash(&domain)).unwrap();
    let document = json!({"x402Version": 2, "accepted": accepted, "payload": {
        "signature": format!("0x{}", alloy::hex::encode(signature.as_bytes())),
        "authorization": {"from": message.from.to_checksum(None), "to": message.to.to_checksum(None),
            "value": message.value.to_string(), "validAfter": message.validAfter.to_string(),
            "validBefore": message.validBefore.to_string(), "nonce": nonce.to_string()}}});
    (STANDARD.encode(document.to_string()), nonce)
}

/// The terms of a 402.
pub fn required_of(response: &TestResponse) -> Value {
    let header = response.headers["payment-required"].to_str().unwrap();
    serde_json::from_slice(&STANDARD.decode(header).unwrap()).unwrap()
}

/// `/x402/{oid}` for `real_responses_of_every_route_validate_against_the_document`.
pub async fn drive_sale(oracle: &mut crate::helpers::openapi::Oracle) {
    let s = shop().await;
    let oid = s.offer("on_success").await;
    let template = "/x402/{oid}";
    let unpaid = s.get(&oid, None).await;
    assert_eq!(unpaid.status, StatusCode::PAYMENT_REQUIRED, "{}", unpaid.text);
    oracle.check("GET", template, &unpaid);
    let (payment, _) = s.pay(&required_of(&unpaid));
    let paid = s.get(&oid, Some(&payment)).await;
    assert_eq!(paid.status, StatusCode::OK, "{}", paid.text);
    oracle.check("GET", template, &paid);
    oracle.check("GET", template, &s.get(&uuid::Uuid::new_v4().to_string(), None).await);
    let posted = s.app.send(s.app.client.post(s.app.url(&format!("/x402/{oid}")))).await;
    assert_eq!(posted.status, StatusCode::METHOD_NOT_ALLOWED, "{}", posted.text);
    oracle.check("POST", template, &posted);
    let upfront = s.offer("before_serving").await;
    let unpaid = s
        .app
        .send(s.app.client.post(s.app.url(&format!("/x402/{upfront}"))))
        .await;
    assert_eq!(unpaid.status, StatusCode::PAYMENT_REQUIRED, "{}", unpaid.text);
    oracle.check("POST", template, &unpaid);
    let (payment, _) = s.pay(&required_of(&unpaid));
    let paid = s
        .app
        .send(
            s.app
                .client
                .post(s.app.url(&format!("/x402/{upfront}")))
                .header("PAYMENT-SIGNATURE", payment),
        )
        .await;
    assert_eq!(paid.status, StatusCode::OK, "{}", paid.text);
    oracle.check("POST", template, &paid);
}

#[tokio::test]
async fn a_held_authorization_is_settled_through_no_call_of_the_agents() {
    let s = shop().await;
    let oid = s.offer("on_success").await;
    let unpaid = s.get(&oid, None).await;
    let (payment, nonce) = s.pay(&required_of(&unpaid));
    let paid = s.get(&oid, Some(&payment)).await;
    assert_eq!(paid.status, StatusCode::OK, "{}", paid.text);
    let agent = wallet(&s.agent);
    let nonce_after_sale = s.anvil.nonce(agent).await;
    assert_eq!(nonce_after_sale, 1, "the settlement is the agent's one transaction");
    // Once the watcher settles the settlement, the income and the audit log say so.
    let income_path = format!("/api/agents/{}/income", s.agent.id);
    let income = s
        .app
        .settle_until(async || {
            let (_, body) = s
                .app
                .request(Method::GET, &income_path, Some(&s.agent.token), None)
                .await;
            match body["income"][0]["status"] == "settled" {
                true => Ok(body["income"][0].clone()),
                false => Err(format!("not settled yet: {body}")),
            }
        })
        .await;
    assert_eq!(income["settled_by"], "agentd", "{income}");
    assert_eq!(income["nonce"], nonce.to_string(), "{income}");
    let audit_path = format!("/api/agents/{}/audit", s.agent.id);
    let (status, log) = s
        .app
        .request(Method::GET, &audit_path, Some(&s.agent.token), None)
        .await;
    assert_eq!(status, StatusCode::OK, "{log}");
    let log = log.to_string();
    assert!(
        log.contains("x402_payment_received") && log.contains(&nonce.to_string()),
        "{log}"
    );

    // The agent asks to call the token with the same authorization, and to cancel it: both refused, unsigned.
    let uses: Vec<Bytes> = vec![
        IUse::transferWithAuthorizationCall {
            from: s.payer.address(),
            to: agent,
            value: U256::from(10_000u64),
            validAfter: U256::ZERO,
            validBefore: U256::from(u64::MAX),
            nonce,
            signature: Bytes::from(vec![0u8; 65]),
        }
        .abi_encode()
        .into(),
        IUse::cancelAuthorizationCall {
            authorizer: s.payer.address(),
            nonce,
            signature: Bytes::from(vec![0u8; 65]),
        }
        .abi_encode()
        .into(),
    ];
    let path = format!("/api/agents/{}/calls", s.agent.id);
    for data in uses {
        let body = json!({"chain": "base", "to": s.usdc.to_string(), "data": data.to_string()});
        let (status, answer) = s
            .app
            .request(Method::POST, &path, Some(&s.agent.token), Some(body))
            .await;
        assert_eq!(status, StatusCode::FORBIDDEN, "{answer}");
        assert_eq!(answer["error"]["details"]["rule"], "call_denied", "{answer}");
    }
    assert_eq!(s.anvil.nonce(agent).await, nonce_after_sale, "nothing more was sent");
    assert!(authorization_state(&s.anvil, s.usdc, s.payer.address(), nonce).await);
    assert_eq!(
        token_balance(&s.anvil, s.usdc, agent).await,
        U256::from(10_000u64),
        "the agent holds the price, once"
    );
}
