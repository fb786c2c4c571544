//! One fixed detail per action (several where an action has several shapes), its canonical JSON written out: a
//! renamed field, or a `null` turned into an absent field, fails here before it changes the audit chain's contract
//! (docs/api.md §10, §15). `examples` matches every action, so a new action does not compile without its snapshot.

use alloy::primitives::B256;
use chrono::TimeZone;
use serde_json::{Value, json};
use uuid::Uuid;

use super::detail::*;
use super::{Action, Detail, canonical_json};

const OWNER: &str = "0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAed";
const PAYEE: &str = "0xfB6916095ca1df60bB79Ce92cE3Ea74c37c5d359";
const URL: &str = "https://hooks.example.com/agentd";

fn s(text: &str) -> String {
    text.to_string()
}

fn id(n: u128) -> Uuid {
    Uuid::from_u128(n)
}

fn hash(byte: u8) -> String {
    format!("{:#x}", B256::repeat_byte(byte))
}

fn simulation() -> Value {
    json!({"changes": [{"asset": "USDC", "amount": "-1"}]})
}

fn asset() -> AssetAsked {
    AssetAsked {
        chain: s("base"),
        asset: s("ETH"),
        to: s(PAYEE),
        amount: Some(s("0.5")),
        delegation_id: None,
    }
}

fn call(previewed: bool) -> CallAsked {
    CallAsked {
        chain: s("base"),
        to: s(PAYEE),
        kind: CallKind::Call,
        amount: s("0"),
        previewed: previewed.then(|| CallPreview {
            selector: Some(s("0x095ea7b3")),
            function: Some(s("approve(address,uint256)")),
            simulation: simulation(),
        }),
    }
}

fn typed() -> TypedAsked {
    TypedAsked {
        chain: s("base"),
        kind: TypedKind::TypedData,
        to: s(PAYEE),
        domain: json!({"name": "USD Coin", "version": "2"}),
        primary_type: s("Permit"),
        digest: B256::repeat_byte(0xab),
        simulation: simulation(),
    }
}

fn sent(status: &str, tx_hash: Option<String>) -> Accepted {
    Accepted {
        transfer_id: id(1),
        status: s(status),
        tx_hash: Some(tx_hash),
    }
}

fn held() -> Accepted {
    Accepted {
        transfer_id: id(1),
        status: s("awaiting_approval"),
        tx_hash: None,
    }
}

fn refused(code: &str, rule: Option<&str>) -> Refused {
    Refused {
        code: s(code),
        rule: rule.map(s),
        limit: None,
        denial: None,
    }
}

fn decided(asset: &str, amount: &str, kind: &str) -> Decided {
    Decided {
        transfer_id: id(1),
        chain: s("base"),
        asset: s(asset),
        to: s(PAYEE),
        amount: s(amount),
        tx_hash: None,
        kind: s(kind),
        url: None,
        reason: None,
    }
}

fn replaced(tx_hash: Option<String>) -> Replaced {
    Replaced {
        transfer_id: id(1),
        chain: s("base"),
        nonce: 7,
        replaced: hash(0x11),
        tx_hash,
    }
}

fn fetch(chosen: bool, transfer: bool) -> X402Fetch {
    X402Fetch {
        host: Some(s("api.example.com")),
        path: s("/weather"),
        max_amount: Some(s("0.01")),
        chosen: chosen.then(|| X402Choice {
            chain: s("base"),
            asset: s("USDC"),
            amount: s("0.001"),
            pay_to: s(PAYEE),
        }),
        transfer_id: transfer.then(|| id(1)),
    }
}

fn facilitator_token() -> FacilitatorToken {
    FacilitatorToken {
        token_id: id(1),
        prefix: s("fac_Q2mX9aLp"),
    }
}

fn endpoint() -> WebhookEndpoint {
    WebhookEndpoint {
        webhook_id: id(2),
        url: s(URL),
        events: vec![s("transfer.confirmed")],
        enabled: true,
        description: None,
    }
}

/// Each action's examples and the canonical JSON each must give.
fn examples(action: Action) -> Vec<(Detail, &'static str)> {
    match action {
        Action::AgentCreated => vec![(
            Detail::AgentCreated(AgentCreated {
                name: s("treasury"),
                chains: vec![s("base"), s("ethereum")],
                capabilities: vec![s("read"), s("transact")],
                spending_cap: s("1.5"),
                owner_addresses: [(s("base"), s(OWNER))].into(),
            }),
            r#"{"capabilities":["read","transact"],"chains":["base","ethereum"],"name":"treasury","owner_addresses":{"base":"0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAed"},"spending_cap":"1.5"}"#,
        )],
        Action::AgentUpdated => vec![(
            Detail::AgentUpdated(AgentUpdated {
                fields: vec![s("name"), s("description"), s("spending_cap")],
                to: AgentChanges {
                    name: Some(s("ops")),
                    spending_cap: Some(s("2")),
                    spending_cap_before: Some(s("1.5")),
                    ..AgentChanges::default()
                },
            }),
            r#"{"fields":["name","description","spending_cap"],"to":{"name":"ops","spending_cap":"2","spending_cap_before":"1.5"}}"#,
        )],
        Action::AgentDeleted => vec![(Detail::AgentDeleted(Nothing {}), r#"{}"#)],
        Action::AgentReactivated => vec![(Detail::AgentReactivated(Nothing {}), r#"{}"#)],
        Action::TokenReissued => vec![
            (
                Detail::TokenReissued(TokenReissued {
                    proof: Proof::CurrentToken,
                    client: s("127.0.0.1"),
                }),
                r#"{"client":"127.0.0.1","proof":"current_token"}"#,
            ),
            (
                Detail::TokenReissued(TokenReissued {
                    proof: Proof::WalletSignature {
                        chain: s("base"),
                        signer: s(OWNER),
                    },
                    client: s("127.0.0.1"),
                }),
                r#"{"chain":"base","client":"127.0.0.1","proof":"wallet_signature","signer":"0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAed"}"#,
            ),
        ],
        Action::OwnerSessionOpened => vec![(
            Detail::OwnerSessionOpened(OwnerSessionOpened {
                address: s(OWNER),
                chain: s("base"),
                expires_at: chrono::Utc.with_ymd_and_hms(2026, 11, 27, 12, 15, 0).unwrap(),
                client: s("127.0.0.1"),
            }),
            r#"{"address":"0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAed","chain":"base","client":"127.0.0.1","expires_at":"2026-11-27T12:15:00Z"}"#,
        )],
        Action::OwnerSessionClosed => vec![(
            Detail::OwnerSessionClosed(OwnerSessionClosed {
                address: s(OWNER),
                chain: None,
            }),
            r#"{"address":"0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAed","chain":null}"#,
        )],
        Action::KeyExported => vec![(
            Detail::KeyExported(KeyExported {
                chain: s("base"),
                address: s(OWNER),
            }),
            r#"{"address":"0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAed","chain":"base"}"#,
        )],
        Action::PolicyUpdated => vec![(
            Detail::PolicyUpdated(PolicyUpdated {
                policy: json!({"limits": {}, "allowed_recipients": null, "blocked_recipients": [],
                    "approve_new_recipients": false, "approval_ttl_secs": 3600, "allowed_hosts": null}),
            }),
            r#"{"policy":{"allowed_hosts":null,"allowed_recipients":null,"approval_ttl_secs":3600,"approve_new_recipients":false,"blocked_recipients":[],"limits":{}}}"#,
        )],
        Action::TransferAccepted => vec![
            (
                Detail::TransferAccepted(TransferAccepted {
                    asked: Asked::Asset(asset()),
                    accepted: sent("pending", Some(hash(0x11))),
                }),
                r#"{"amount":"0.5","asset":"ETH","chain":"base","status":"pending","to":"0xfB6916095ca1df60bB79Ce92cE3Ea74c37c5d359","transfer_id":"00000000-0000-0000-0000-000000000001","tx_hash":"0x1111111111111111111111111111111111111111111111111111111111111111"}"#,
            ),
            (
                Detail::TransferAccepted(TransferAccepted {
                    asked: Asked::Asset(asset()),
                    accepted: held(),
                }),
                r#"{"amount":"0.5","asset":"ETH","chain":"base","status":"awaiting_approval","to":"0xfB6916095ca1df60bB79Ce92cE3Ea74c37c5d359","transfer_id":"00000000-0000-0000-0000-000000000001"}"#,
            ),
            (
                Detail::TransferAccepted(TransferAccepted {
                    asked: Asked::Call(call(true)),
                    accepted: sent("signed", None),
                }),
                r#"{"amount":"0","chain":"base","function":"approve(address,uint256)","kind":"call","selector":"0x095ea7b3","simulation":{"changes":[{"amount":"-1","asset":"USDC"}]},"status":"signed","to":"0xfB6916095ca1df60bB79Ce92cE3Ea74c37c5d359","transfer_id":"00000000-0000-0000-0000-000000000001","tx_hash":null}"#,
            ),
            (
                Detail::TransferAccepted(TransferAccepted {
                    asked: Asked::TypedData(typed()),
                    accepted: held(),
                }),
                r#"{"chain":"base","digest":"0xabababababababababababababababababababababababababababababababab","domain":{"name":"USD Coin","version":"2"},"kind":"typed_data","primary_type":"Permit","simulation":{"changes":[{"amount":"-1","asset":"USDC"}]},"status":"awaiting_approval","to":"0xfB6916095ca1df60bB79Ce92cE3Ea74c37c5d359","transfer_id":"00000000-0000-0000-0000-000000000001"}"#,
            ),
        ],
        Action::TransferRefused => vec![
            (
                Detail::TransferRefused(TransferRefused {
                    asked: Asked::Asset(asset()),
                    refused: refused("policy_denied", Some("per_transfer")),
                }),
                r#"{"amount":"0.5","asset":"ETH","chain":"base","code":"policy_denied","rule":"per_transfer","to":"0xfB6916095ca1df60bB79Ce92cE3Ea74c37c5d359"}"#,
            ),
            (
                Detail::TransferRefused(TransferRefused {
                    asked: Asked::Call(call(false)),
                    refused: refused("simulation_failed", None),
                }),
                r#"{"amount":"0","chain":"base","code":"simulation_failed","kind":"call","to":"0xfB6916095ca1df60bB79Ce92cE3Ea74c37c5d359"}"#,
            ),
            (
                Detail::TransferRefused(TransferRefused {
                    asked: Asked::Call(call(false)),
                    refused: Refused {
                        denial: Some(s(
                            "rule 1 (deposit() on any contract) did not allow it: value must be 0; it was 1",
                        )),
                        ..refused("policy_denied", Some("call_denied"))
                    },
                }),
                r#"{"amount":"0","chain":"base","code":"policy_denied","denial":"rule 1 (deposit() on any contract) did not allow it: value must be 0; it was 1","kind":"call","rule":"call_denied","to":"0xfB6916095ca1df60bB79Ce92cE3Ea74c37c5d359"}"#,
            ),
            (
                Detail::TransferRefused(TransferRefused {
                    asked: Asked::Asset(AssetAsked {
                        amount: Some(s("abc")),
                        ..asset()
                    }),
                    refused: refused("invalid_amount", None),
                }),
                r#"{"amount":"abc","asset":"ETH","chain":"base","code":"invalid_amount","to":"0xfB6916095ca1df60bB79Ce92cE3Ea74c37c5d359"}"#,
            ),
        ],
        Action::TypedDataSigned => vec![(
            Detail::TypedDataSigned(TypedDataSigned {
                asked: typed(),
                transfer_id: id(1),
            }),
            r#"{"chain":"base","digest":"0xabababababababababababababababababababababababababababababababab","domain":{"name":"USD Coin","version":"2"},"kind":"typed_data","primary_type":"Permit","simulation":{"changes":[{"amount":"-1","asset":"USDC"}]},"to":"0xfB6916095ca1df60bB79Ce92cE3Ea74c37c5d359","transfer_id":"00000000-0000-0000-0000-000000000001"}"#,
        )],
        Action::TransferApproved => vec![(
            Detail::TransferApproved(Decided {
                tx_hash: Some(hash(0x11)),
                ..decided("ETH", "0.5", "transfer")
            }),
            r#"{"amount":"0.5","asset":"ETH","chain":"base","kind":"transfer","to":"0xfB6916095ca1df60bB79Ce92cE3Ea74c37c5d359","transfer_id":"00000000-0000-0000-0000-000000000001","tx_hash":"0x1111111111111111111111111111111111111111111111111111111111111111","url":null}"#,
        )],
        Action::TransferRejected => vec![(
            Detail::TransferRejected(Decided {
                reason: Some(s("not this week")),
                ..decided("ETH", "0.5", "transfer")
            }),
            r#"{"amount":"0.5","asset":"ETH","chain":"base","kind":"transfer","reason":"not this week","to":"0xfB6916095ca1df60bB79Ce92cE3Ea74c37c5d359","transfer_id":"00000000-0000-0000-0000-000000000001","tx_hash":null,"url":null}"#,
        )],
        Action::TransferExpired => vec![(
            Detail::TransferExpired(Decided {
                url: Some(s("https://api.example.com/weather")),
                ..decided("USDC", "0.001", "x402")
            }),
            r#"{"amount":"0.001","asset":"USDC","chain":"base","kind":"x402","to":"0xfB6916095ca1df60bB79Ce92cE3Ea74c37c5d359","transfer_id":"00000000-0000-0000-0000-000000000001","tx_hash":null,"url":"https://api.example.com/weather"}"#,
        )],
        Action::TransferCancelRequested => vec![(
            Detail::TransferCancelRequested(replaced(Some(hash(0x22)))),
            r#"{"chain":"base","nonce":7,"replaced":"0x1111111111111111111111111111111111111111111111111111111111111111","transfer_id":"00000000-0000-0000-0000-000000000001","tx_hash":"0x2222222222222222222222222222222222222222222222222222222222222222"}"#,
        )],
        Action::TransferFeeBumped => vec![(
            Detail::TransferFeeBumped(replaced(None)),
            r#"{"chain":"base","nonce":7,"replaced":"0x1111111111111111111111111111111111111111111111111111111111111111","transfer_id":"00000000-0000-0000-0000-000000000001","tx_hash":null}"#,
        )],
        Action::NonceFilled => vec![
            (
                Detail::NonceFilled(NonceFilled {
                    transfer_id: id(1),
                    fill_id: id(2),
                    chain: s("base"),
                    nonce: Some(7),
                    tx_hash: Some(hash(0x22)),
                }),
                r#"{"chain":"base","fill_id":"00000000-0000-0000-0000-000000000002","nonce":7,"transfer_id":"00000000-0000-0000-0000-000000000001","tx_hash":"0x2222222222222222222222222222222222222222222222222222222222222222"}"#,
            ),
            (
                Detail::NonceFilled(NonceFilled {
                    transfer_id: id(1),
                    fill_id: id(2),
                    chain: s("base"),
                    nonce: None,
                    tx_hash: None,
                }),
                r#"{"chain":"base","fill_id":"00000000-0000-0000-0000-000000000002","nonce":null,"transfer_id":"00000000-0000-0000-0000-000000000001","tx_hash":null}"#,
            ),
        ],
        Action::FundsSwept => vec![(
            Detail::FundsSwept(FundsSwept {
                asked: AssetAsked {
                    to: s(OWNER),
                    amount: Some(s("1.25")),
                    ..asset()
                },
                accepted: sent("pending", Some(hash(0x11))),
            }),
            r#"{"amount":"1.25","asset":"ETH","chain":"base","status":"pending","to":"0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAed","transfer_id":"00000000-0000-0000-0000-000000000001","tx_hash":"0x1111111111111111111111111111111111111111111111111111111111111111"}"#,
        )],
        Action::SweepRefused => vec![(
            Detail::SweepRefused(SweepRefused {
                asked: AssetAsked {
                    amount: None,
                    ..asset()
                },
                refused: refused("policy_denied", Some("sweep_destination")),
            }),
            r#"{"asset":"ETH","chain":"base","code":"policy_denied","rule":"sweep_destination","to":"0xfB6916095ca1df60bB79Ce92cE3Ea74c37c5d359"}"#,
        )],
        Action::X402PaymentAccepted => vec![
            (
                Detail::X402PaymentAccepted(X402PaymentAccepted {
                    fetch: fetch(true, true),
                    status: s("pending"),
                }),
                r#"{"amount":"0.001","asset":"USDC","chain":"base","host":"api.example.com","max_amount":"0.01","path":"/weather","pay_to":"0xfB6916095ca1df60bB79Ce92cE3Ea74c37c5d359","status":"pending","transfer_id":"00000000-0000-0000-0000-000000000001"}"#,
            ),
            (
                Detail::X402PaymentAccepted(X402PaymentAccepted {
                    fetch: fetch(true, true),
                    status: s("awaiting_approval"),
                }),
                r#"{"amount":"0.001","asset":"USDC","chain":"base","host":"api.example.com","max_amount":"0.01","path":"/weather","pay_to":"0xfB6916095ca1df60bB79Ce92cE3Ea74c37c5d359","status":"awaiting_approval","transfer_id":"00000000-0000-0000-0000-000000000001"}"#,
            ),
        ],
        Action::X402PaymentOutcome => vec![
            (
                Detail::X402PaymentOutcome(X402PaymentOutcome {
                    fetch: fetch(true, true),
                    result: X402Result::Answered {
                        status: s("pending"),
                        response_status: 200,
                    },
                }),
                r#"{"amount":"0.001","asset":"USDC","chain":"base","host":"api.example.com","max_amount":"0.01","path":"/weather","pay_to":"0xfB6916095ca1df60bB79Ce92cE3Ea74c37c5d359","response_status":200,"status":"pending","transfer_id":"00000000-0000-0000-0000-000000000001"}"#,
            ),
            (
                Detail::X402PaymentOutcome(X402PaymentOutcome {
                    fetch: fetch(true, true),
                    result: X402Result::Failed {
                        code: s("payment_failed"),
                    },
                }),
                r#"{"amount":"0.001","asset":"USDC","chain":"base","code":"payment_failed","host":"api.example.com","max_amount":"0.01","path":"/weather","pay_to":"0xfB6916095ca1df60bB79Ce92cE3Ea74c37c5d359","transfer_id":"00000000-0000-0000-0000-000000000001"}"#,
            ),
            (
                Detail::X402PaymentOutcome(X402PaymentOutcome {
                    fetch: X402Fetch {
                        max_amount: None,
                        ..fetch(true, true)
                    },
                    result: X402Result::Unanswered {
                        status: s("pending"),
                        error: s("timed out"),
                    },
                }),
                r#"{"amount":"0.001","asset":"USDC","chain":"base","error":"timed out","host":"api.example.com","path":"/weather","pay_to":"0xfB6916095ca1df60bB79Ce92cE3Ea74c37c5d359","status":"pending","transfer_id":"00000000-0000-0000-0000-000000000001"}"#,
            ),
        ],
        Action::X402PaymentExpired => vec![(
            Detail::X402PaymentExpired(X402PaymentExpired {
                transfer_id: id(1),
                chain: s("base"),
                asset: s("USDC"),
                pay_to: s(PAYEE),
                amount: s("0.001"),
                host: Some(s("api.example.com")),
                path: Some(s("/weather")),
            }),
            r#"{"amount":"0.001","asset":"USDC","chain":"base","host":"api.example.com","path":"/weather","pay_to":"0xfB6916095ca1df60bB79Ce92cE3Ea74c37c5d359","transfer_id":"00000000-0000-0000-0000-000000000001"}"#,
        )],
        Action::McpToolCall => vec![
            (
                Detail::McpToolCall(McpToolCall {
                    transport: s("http"),
                    tool: s("send_native"),
                    ok: true,
                    arguments: json!({"chain": "base", "to": PAYEE, "amount": "0.5"}),
                    duration_ms: 42,
                    error_code: None,
                    tx_hash: Some(json!(hash(0x11))),
                }),
                r#"{"arguments":{"amount":"0.5","chain":"base","to":"0xfB6916095ca1df60bB79Ce92cE3Ea74c37c5d359"},"duration_ms":42,"ok":true,"tool":"send_native","transport":"http","tx_hash":"0x1111111111111111111111111111111111111111111111111111111111111111"}"#,
            ),
            (
                Detail::McpToolCall(McpToolCall {
                    transport: s("stdio"),
                    tool: s("get_balance"),
                    ok: false,
                    arguments: json!({}),
                    duration_ms: 0,
                    error_code: Some(s("invalid_token")),
                    tx_hash: None,
                }),
                r#"{"arguments":{},"duration_ms":0,"error_code":"invalid_token","ok":false,"tool":"get_balance","transport":"stdio"}"#,
            ),
        ],
        Action::WebhookCreated => vec![(
            Detail::WebhookCreated(endpoint()),
            r#"{"description":null,"enabled":true,"events":["transfer.confirmed"],"url":"https://hooks.example.com/agentd","webhook_id":"00000000-0000-0000-0000-000000000002"}"#,
        )],
        Action::WebhookUpdated => vec![(
            Detail::WebhookUpdated(WebhookEndpoint {
                enabled: false,
                description: Some(s("ops")),
                ..endpoint()
            }),
            r#"{"description":"ops","enabled":false,"events":["transfer.confirmed"],"url":"https://hooks.example.com/agentd","webhook_id":"00000000-0000-0000-0000-000000000002"}"#,
        )],
        Action::WebhookDeleted => vec![(
            Detail::WebhookDeleted(endpoint()),
            r#"{"description":null,"enabled":true,"events":["transfer.confirmed"],"url":"https://hooks.example.com/agentd","webhook_id":"00000000-0000-0000-0000-000000000002"}"#,
        )],
        Action::WebhookSecretRotated => vec![(
            Detail::WebhookSecretRotated(endpoint()),
            r#"{"description":null,"enabled":true,"events":["transfer.confirmed"],"url":"https://hooks.example.com/agentd","webhook_id":"00000000-0000-0000-0000-000000000002"}"#,
        )],
        Action::WebhookDisabled => vec![(
            Detail::WebhookDisabled(WebhookDisabled {
                webhook_id: id(2),
                url: s(URL),
                reason: s("every attempt failed for 24 hours"),
            }),
            r#"{"reason":"every attempt failed for 24 hours","url":"https://hooks.example.com/agentd","webhook_id":"00000000-0000-0000-0000-000000000002"}"#,
        )],
        Action::X402FetchFree => vec![(
            Detail::X402FetchFree(X402FetchFree {
                fetch: fetch(false, false),
                status: 200,
            }),
            r#"{"host":"api.example.com","max_amount":"0.01","path":"/weather","status":200}"#,
        )],
        Action::X402PaymentRefused => vec![
            (
                Detail::X402PaymentRefused(X402PaymentRefused {
                    fetch: fetch(true, false),
                    refused: refused("price_above_max", None),
                }),
                r#"{"amount":"0.001","asset":"USDC","chain":"base","code":"price_above_max","host":"api.example.com","max_amount":"0.01","path":"/weather","pay_to":"0xfB6916095ca1df60bB79Ce92cE3Ea74c37c5d359"}"#,
            ),
            (
                Detail::X402PaymentRefused(X402PaymentRefused {
                    fetch: fetch(false, false),
                    refused: refused("policy_denied", Some("host_not_allowed")),
                }),
                r#"{"code":"policy_denied","host":"api.example.com","max_amount":"0.01","path":"/weather","rule":"host_not_allowed"}"#,
            ),
            (
                Detail::X402SaleRefused(X402SaleRefused {
                    offer_id: Some(id(1)),
                    reason: s("payer_blocked"),
                    payer: s(OWNER),
                }),
                r#"{"offer_id":"00000000-0000-0000-0000-000000000001","payer":"0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAed","reason":"payer_blocked"}"#,
            ),
        ],
        Action::DelegationAdded => vec![(
            Detail::DelegationAdded(DelegationAdded {
                delegation_id: id(1),
                chain: s("base"),
                hash: hash(0xcd),
                delegator: s(OWNER),
            }),
            r#"{"chain":"base","delegation_id":"00000000-0000-0000-0000-000000000001","delegator":"0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAed","hash":"0xcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcd"}"#,
        )],
        Action::DelegationRemoved => vec![(
            Detail::DelegationRemoved(DelegationRemoved { delegation_id: id(1) }),
            r#"{"delegation_id":"00000000-0000-0000-0000-000000000001"}"#,
        )],
        Action::DelegationRevoked => vec![(
            Detail::DelegationRevoked(DelegationRevoked {
                delegation_id: id(1),
                chain: s("base"),
                hash: hash(0xcd),
                delegator: s(OWNER),
                status: s("revoked"),
            }),
            r#"{"chain":"base","delegation_id":"00000000-0000-0000-0000-000000000001","delegator":"0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAed","hash":"0xcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcd","status":"revoked"}"#,
        )],
        Action::SponsorshipSet => vec![(
            Detail::SponsorshipSet(SponsorshipSet {
                chain: s("base"),
                per_day: s("0.05"),
            }),
            r#"{"chain":"base","per_day":"0.05"}"#,
        )],
        Action::X402PaymentReceived => vec![(
            Detail::X402PaymentReceived(X402PaymentReceived {
                offer_id: None,
                chain: s("base"),
                asset: s("USDC"),
                payer: s(OWNER),
                amount: s("0.01"),
                nonce: hash(0xab),
                tx_hash: Some(hash(0xcd)),
            }),
            r#"{"amount":"0.01","asset":"USDC","chain":"base","nonce":"0xabababababababababababababababababababababababababababababababab","offer_id":null,"payer":"0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAed","tx_hash":"0xcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcd"}"#,
        )],
        Action::OfferCreated => vec![(
            Detail::OfferCreated(OfferCreated {
                offer_id: id(1),
                chain: s("base"),
                asset: s("USDC"),
                price: s("0.01"),
                resource: s("https://api.example.com/weather"),
                settle: s("on_success"),
            }),
            r#"{"asset":"USDC","chain":"base","offer_id":"00000000-0000-0000-0000-000000000001","price":"0.01","resource":"https://api.example.com/weather","settle":"on_success"}"#,
        )],
        Action::OfferClosed => vec![(
            Detail::OfferClosed(OfferClosed { offer_id: id(1) }),
            r#"{"offer_id":"00000000-0000-0000-0000-000000000001"}"#,
        )],
        Action::FacilitatorTokenCreated => vec![(
            Detail::FacilitatorTokenCreated(facilitator_token()),
            r#"{"prefix":"fac_Q2mX9aLp","token_id":"00000000-0000-0000-0000-000000000001"}"#,
        )],
        Action::FacilitatorTokenDeleted => vec![(
            Detail::FacilitatorTokenDeleted(facilitator_token()),
            r#"{"prefix":"fac_Q2mX9aLp","token_id":"00000000-0000-0000-0000-000000000001"}"#,
        )],
    }
}

#[test]
fn every_action_has_a_snapshot_of_its_detail() {
    for action in Action::ALL {
        let examples = examples(action);
        assert!(!examples.is_empty(), "{action} has no snapshot");
        for (detail, expected) in examples {
            assert_eq!(detail.action(), action, "a {action} example records another action");
            let json = detail.to_json().unwrap();
            assert_eq!(canonical_json(&json), expected, "{action}'s detail changed");
        }
    }
}

#[test]
fn every_snapshot_reads_back_as_the_detail_it_came_from() {
    for action in Action::ALL {
        for (detail, expected) in examples(action) {
            let stored: Value = serde_json::from_str(expected).unwrap();
            let read = Detail::parse(action, stored).unwrap_or_else(|e| panic!("{action}: {e}: {expected}"));
            assert_eq!(read, detail, "{action}: {expected}");
        }
    }
}

#[test]
fn a_detail_is_not_read_under_an_action_it_does_not_fit() {
    let created = json!({"name": "a", "chains": [], "capabilities": [], "spending_cap": "0", "owner_addresses": {}});
    assert!(Detail::parse(Action::AgentCreated, created.clone()).is_ok());
    assert!(Detail::parse(Action::KeyExported, created).is_err());
    let sent = json!({"chain": "base", "asset": "ETH", "to": PAYEE, "amount": "1", "code": "zero_amount"});
    assert!(
        Detail::parse(Action::TransferAccepted, sent).is_err(),
        "a refusal has no transfer_id"
    );
}
