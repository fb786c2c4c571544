//! Examples for the document: one per request body schema and per success body schema, written once per component
//! so that every operation using a view shows the same realistic value. Full-length dummy values (uuids, EIP-55
//! addresses, 32-byte hashes, tokens of the real length) so that each example validates against its own schema;
//! `tests/api/openapi.rs` checks that they do.

use serde_json::{Value, json};

const AGENT_ID: &str = "1b4e28ba-2fa1-11d2-883f-0016d3cca427";
const TRANSFER_ID: &str = "7d444840-9dc0-11d1-b245-5ffdce74fad2";
const CONVERSATION_ID: &str = "c56a4180-65aa-42ec-a945-5fd21dec0538";
const MESSAGE_ID: &str = "9f1c2b3a-4d5e-4f60-8a7b-6c5d4e3f2a1b";
const WALLET: &str = "0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAed";
const OWNER: &str = "0xfB6916095ca1df60bB79Ce92cE3Ea74c37c5d359";
const RECIPIENT: &str = "0xdbF03B407c01E7cD3CBea99509d93f8DDDC8C6FB";
const USDC_BASE: &str = "0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913";
const TX_HASH: &str = "0x88df016429689c079f3b2f6ad39fa052532c56795b733da78a91ebe6a713944b";
const AGENT_TOKEN: &str = "agt_Q2xhdWRlIHNheXMgaGVsbG8gdG8gdGhlIGFnZW50ZC";
const OWNER_TOKEN: &str = "own_T3duZXIgc2Vzc2lvbiB0b2tlbiBmb3IgdGhlIGRvY3";
const CREATED_AT: &str = "2026-11-23T10:00:00Z";
const UPDATED_AT: &str = "2026-11-23T10:05:00Z";
const NONCE: &str = "0123456789abcdef";
const SIGNATURE: &str = "0x2c6401216c9031b9a6fb8cbfccab4fcec6c951cdf40e2320108d1856eb532250\
5d6c2e0a1f3b4c5d6e7f8091a2b3c4d5e6f708192a3b4c5d6e7f8091a2b3c4da1b";

const WEBHOOK_ID: &str = "5f0c7a52-3c1e-4d8b-9a6f-2e4b8c1d0f37";
const EVENT_ID: &str = "0b7e9d2a-6c4f-4e1a-8d3b-5a9c2e7f1b64";

fn webhook() -> Value {
    json!({
        "id": WEBHOOK_ID,
        "url": "https://hooks.example.com/agentd",
        "events": ["transfer.confirmed", "approval.required"],
        "agent_id": AGENT_ID,
        "description": "treasury alerts",
        "enabled": true,
        "created_at": CREATED_AT,
    })
}

const DELEGATION_ID: &str = "3e8a1f5c-7b2d-4c9e-a6f1-0d4b2c8e5a73";
const PERIOD_ENFORCER: &str = "0x474e3Ae7E169e940607cC624Da8A15Eb120139aB";
/// `erc20_period_transfer` terms: USDC on base, 25 USDC a day from 2025-11-23T00:00:00Z.
const PERIOD_TERMS: &str = "0x833589fcd6edb6e08f4c7c32d4f71b54bda02913\
00000000000000000000000000000000000000000000000000000000017d7840\
0000000000000000000000000000000000000000000000000000000000015180\
0000000000000000000000000000000000000000000000000000000069224e80";

fn delegation_form() -> Value {
    json!({
        "delegate": WALLET,
        "delegator": OWNER,
        "authority": format!("0x{}", "f".repeat(64)),
        "caveats": [{"enforcer": PERIOD_ENFORCER, "terms": PERIOD_TERMS, "args": "0x"}],
        "salt": "1",
        "signature": SIGNATURE,
    })
}

fn delegation() -> Value {
    json!({
        "id": DELEGATION_ID,
        "chain": "base",
        "hash": TX_HASH,
        "delegator": OWNER,
        "delegate": WALLET,
        "authority": "0xffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff",
        "salt": "1",
        "signature": format!("0x{}", "ab".repeat(65)),
        "caveats": [{
            "enforcer": PERIOD_ENFORCER, "kind": "erc20_period_transfer", "terms": PERIOD_TERMS,
            "token": USDC_BASE, "amount": "25000000", "period_seconds": 86400, "start": 1763856000u64,
        }],
        "limits": [{
            "asset": "base:USDC", "token": USDC_BASE, "amount": "25", "period_seconds": 86400,
            "start": 1763856000u64, "available": "12.5",
        }],
        "targets": null,
        "methods": null,
        "not_before": null,
        "expires_at": null,
        "status": "active",
        "created_at": CREATED_AT,
    })
}

fn siwe_message() -> String {
    format!(
        "agentd.example.com wants you to sign in with your Ethereum account:\n{OWNER}\n\nSign in as an owner of \
         agent {AGENT_ID}.\n\nURI: https://agentd.example.com/api/agents/{AGENT_ID}\nVersion: 1\nChain ID: 8453\n\
         Nonce: {NONCE}\nIssued At: 2026-11-23T10:00:00.000Z\nExpiration Time: 2026-11-23T10:05:00.000Z"
    )
}

fn agent_detail() -> Value {
    json!({
        "id": AGENT_ID,
        "name": "treasury-bot",
        "description": "Pays invoices under 50 USDC on Base",
        "chains": ["base"],
        "capabilities": ["read", "transact"],
        "spending_cap": 100.0,
        "wallet_addresses": {"base": WALLET},
        "owner_addresses": {"base": OWNER},
        "spent": {"base": "0.01"},
        "is_active": true,
        "guarded": true,
        "created_at": CREATED_AT,
        "updated_at": UPDATED_AT,
    })
}

fn transfer() -> Value {
    json!({
        "id": TRANSFER_ID,
        "transfer_id": TRANSFER_ID,
        "chain": "base",
        "kind": "transfer",
        "asset": "USDC",
        "token_address": USDC_BASE,
        "from": WALLET,
        "to": RECIPIENT,
        "amount": "12.5",
        "amount_wei": "12500000",
        "status": "confirmed",
        "tx_hash": TX_HASH,
        "nonce": 7,
        "replaced_hashes": [],
        "block_number": 23456789,
        "conversation_id": null,
        "explorer_url": format!("https://basescan.org/tx/{TX_HASH}"),
        "expires_at": null,
        "created_at": CREATED_AT,
        "updated_at": UPDATED_AT,
    })
}

fn chain_call() -> Value {
    json!({
        "id": "call_1",
        "tool": "get_balance",
        "args": {"chain": "base"},
        "result": {"chain": "base", "address": WALLET, "formatted": "0.25", "symbol": "ETH"},
        "duration_ms": 84,
    })
}

/// A sponsorship of the agent's gas (§22).
fn sponsorship() -> Value {
    json!({"chain": "base", "per_day": "0.05", "counted": "0.0012", "left": "0.0488"})
}

const FACILITATOR_TOKEN_ID: &str = "6a2d9e41-8b3c-4f7a-9e1d-2c5b8a4f0e93";

/// An x402 v2 facilitator request (§23): a buyer's payment of 0.01 USDC to the agent on base, and the requirements
/// it answers.
fn facilitator_request() -> Value {
    let requirements = json!({
        "scheme": "exact",
        "network": "eip155:8453",
        "amount": "10000",
        "asset": USDC_BASE,
        "payTo": WALLET,
        "maxTimeoutSeconds": 300,
        "extra": {"name": "USD Coin", "version": "2"},
    });
    json!({
        "x402Version": 2,
        "paymentPayload": {
            "x402Version": 2,
            "resource": {"url": "https://api.example.com/weather", "description": "Weather", "mimeType": "application/json"},
            "accepted": requirements,
            "payload": {
                "signature": SIGNATURE,
                "authorization": {
                    "from": OWNER,
                    "to": WALLET,
                    "value": "10000",
                    "validAfter": "0",
                    "validBefore": "1795428300",
                    "nonce": "0x3f1c2b3a4d5e4f608a7b6c5d4e3f2a1b9f1c2b3a4d5e4f608a7b6c5d4e3f2a1b",
                },
            },
        },
        "paymentRequirements": requirements,
    })
}

const OFFER_ID: &str = "2b7f4c1e-9d3a-4e6b-8f2c-1a5d7e9b3c40";

/// An offer (§23) of a weather API for 0.01 USDC on base.
fn offer() -> Value {
    json!({
        "id": OFFER_ID,
        "url": format!("https://agentd.example.com/x402/{OFFER_ID}"),
        "chain": "base",
        "asset": "USDC",
        "price": "0.01",
        "pay_to": WALLET,
        "description": "Today's weather",
        "resource": {"kind": "url", "url": "https://api.example.com/weather", "method": "GET",
            "mime_type": "application/json", "headers": true},
        "settle": "on_success",
        "forward": [],
        "gas_per_day": "0.001",
        "max_timeout_seconds": 300,
        "status": "active",
        "created_at": CREATED_AT,
    })
}

/// The example of a named component schema, when the document shows one.
pub fn component(name: &str) -> Option<Value> {
    let example = match name {
        // Request bodies.
        "CreateAgent" => json!({
            "name": "treasury-bot",
            "chains": ["base"],
            "capabilities": ["read", "transact"],
            "spending_cap": 100.0,
            "owner_addresses": {"base": OWNER},
        }),
        "UpdateAgent" => json!({"name": "treasury-bot-2", "spending_cap": 250.0}),
        "CreateWebhook" => json!({
            "url": "https://hooks.example.com/agentd",
            "events": ["transfer.confirmed", "approval.required"],
            "description": "treasury alerts",
        }),
        "UpdateWebhook" => json!({"events": ["*"], "enabled": true}),
        "WebhookView" => webhook(),
        "AddDelegation" => json!({"chain": "base", "delegation": delegation_form()}),
        "DelegationView" => delegation(),
        "WebhookSecretView" => {
            let mut created = webhook();
            created["secret"] = json!("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSwJ4sbV1ExKRw=");
            created
        }
        "DeliveryView" => json!({
            "id": 42,
            "event_id": EVENT_ID,
            "type": "transfer.confirmed",
            "attempt": 2,
            "status_code": 500,
            "error": "the receiver answered 500",
            "duration_ms": 37,
            "at": UPDATED_AT,
            "next_attempt_at": "2026-11-23T10:05:30Z",
            "response": "{\"error\":\"try later\"}",
        }),
        "QueuedEventView" => json!({"event_id": EVENT_ID}),
        "ExportKey" => json!({"chain": "base", "confirm": true}),
        "FundRequest" => json!({"chain": "base", "asset": "USDC", "amount": "25"}),
        "RejectRequest" => json!({"reason": "unknown recipient"}),
        "OpenSession" => json!({"chain": "base", "message": siwe_message(), "signature": SIGNATURE}),
        "PolicyBody" => json!({
            "limits": {"USDC": {"per_transfer": "50", "per_day": "200", "approval_above": "25"}},
            "allowed_recipients": [RECIPIENT],
            "blocked_recipients": [],
            "approve_new_recipients": true,
            "approval_ttl_secs": 3600,
            "allowed_hosts": ["api.example.com"],
        }),
        "ReissueRequest" => json!({
            "proof": {"type": "wallet_signature", "chain": "base", "message": siwe_message(), "signature": SIGNATURE}
        }),
        "NewTransfer" => json!({"chain": "base", "to": RECIPIENT, "amount": "12.5", "asset": "USDC"}),
        "Sweep" => json!({"chain": "base", "to": OWNER, "asset": "USDC"}),
        "NewCall" => json!({
            "chain": "base",
            "to": "0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913",
            "function": "approve(address,uint256)",
            "args": [RECIPIENT, "100000000"],
        }),
        "NewSignature" => json!({
            "chain": "base",
            "typed_data": {
                "types": {
                    "EIP712Domain": [{"name": "name", "type": "string"}, {"name": "version", "type": "string"},
                        {"name": "chainId", "type": "uint256"}, {"name": "verifyingContract", "type": "address"}],
                    "Permit": [{"name": "owner", "type": "address"}, {"name": "spender", "type": "address"},
                        {"name": "value", "type": "uint256"}, {"name": "nonce", "type": "uint256"},
                        {"name": "deadline", "type": "uint256"}]
                },
                "primaryType": "Permit",
                "domain": {"name": "USD Coin", "version": "2", "chainId": 8453,
                    "verifyingContract": "0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913"},
                "message": {"owner": "0x2B5AD5c4795c026514f8317c7a215E218DcCD6cF", "spender": RECIPIENT,
                    "value": "100000000", "nonce": 0, "deadline": "1999999999"}
            }
        }),
        "FetchBody" => json!({
            "url": "https://api.example.com/reports/latest",
            "max_amount": "0.10",
            "method": "GET",
            "headers": {"accept": "application/json"},
            "asset": "USDC",
        }),
        "ChatRequest" => json!({
            "agent_id": AGENT_ID,
            "message": "What is my balance on Base?",
            "conversation_id": CONVERSATION_ID,
        }),
        // Responses.
        "AgentDetailView" => agent_detail(),
        "AgentCreatedView" => {
            let mut created = agent_detail();
            created["access_token"] = json!(AGENT_TOKEN);
            created
        }
        "AgentSummaryView" => json!({
            "id": AGENT_ID,
            "name": "treasury-bot",
            "description": "Pays invoices under 50 USDC on Base",
            "chains": ["base"],
            "capabilities": ["read", "transact"],
            "is_active": true,
            "created_at": CREATED_AT,
        }),
        "ReissuedView" => json!({"access_token": AGENT_TOKEN, "agent": agent_detail()}),
        "TransferView" => transfer(),
        "SignatureView" => json!({
            "signature": format!("0x{}1b", "ab".repeat(64)),
            "digest": format!("0x{}", "5e".repeat(32)),
        }),
        "SimulatedCall" => json!({
            "call": {"to": "0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913", "selector": "0x095ea7b3",
                "function": "approve(address,uint256)", "args": [RECIPIENT, "100000000"]},
            "simulation": {"changes": [], "approvals": [{"token": "0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913",
                "spender": RECIPIENT, "amount": "100", "unlimited": false}], "gas_used": 46_210},
            "decision": {"result": "allow"},
        }),
        // A USDC send the wallet pays on base: 62,000 gas × 0.012 gwei, plus an L1 fee estimate of 68 gwei.
        "TransferPreviewView" => json!({
            "decision": {"result": "allow"},
            "gas": "wallet",
            "max_fee": "0.000000812",
            "gas_limit": 62_000,
            "max_fee_per_gas_wei": "12000000",
        }),
        "AuditEntryView" => json!({
            "id": 42,
            "at": CREATED_AT,
            "actor": "owner",
            "action": "policy.updated",
            "detail": {"approve_new_recipients": true},
            "hash": "5f2b8c1d9e0a7f6b3c4d5e6f708192a3b4c5d6e7f8091a2b3c4d5e6f708192a3",
        }),
        "AuditHeadView" => json!({"id": 1042, "hash": TX_HASH.trim_start_matches("0x"), "at": UPDATED_AT}),
        "BalancesView" => json!({
            "agent_id": AGENT_ID,
            "balances": {
                "base": {
                    "address": WALLET,
                    "wei": "250000000000000000",
                    "formatted": "0.25",
                    "symbol": "ETH",
                    "tokens": {"USDC": {"address": USDC_BASE, "units": "40000000", "formatted": "40", "decimals": 6}},
                }
            },
        }),
        "ExportedKeyView" => json!({
            "chain": "base",
            "address": WALLET,
            "private_key": "0x4c0883a69102937d6231471b5dbb6204fe5129617082792ae468d01a3f362318",
        }),
        "FundingView" => json!({
            "agent_id": AGENT_ID,
            "deposits": [{
                "chain": "base",
                "chain_id": 8453,
                "address": WALLET,
                "symbol": "USDC",
                "token_address": USDC_BASE,
                "amount": "25",
                "amount_wei": "25000000",
                "payment_uri": format!("ethereum:{USDC_BASE}@8453/transfer?address={WALLET}&uint256=25000000"),
                "explorer_url": format!("https://basescan.org/address/{WALLET}"),
            }],
            "instructions": "Send 25 USDC on Base to the address above, or scan the payment URI with a wallet.",
        }),
        "OwnerChallengeView" | "ChallengeView" => json!({
            "message": siwe_message(),
            "nonce": NONCE,
            "expires_at": UPDATED_AT,
        }),
        "OwnerSessionView" => json!({"owner_token": OWNER_TOKEN, "expires_at": "2026-11-23T11:00:00Z"}),
        "PolicyView" => json!({
            "limits": {"USDC": {"per_transfer": "50", "per_day": "200", "approval_above": "25"}},
            "allowed_recipients": [RECIPIENT],
            "blocked_recipients": [],
            "approve_new_recipients": true,
            "approval_ttl_secs": 3600,
            "allowed_hosts": ["api.example.com"],
        }),
        "BudgetView" => json!({
            "limits": {"base:USDC": {
                "per_day": {"limit": "200", "counted": "120", "left": "80"},
                "per_week": {"limit": "1000", "counted": "420", "left": "580"},
            }},
            "caps": {"base": {"limit": "0.5", "counted": "0.0021", "left": "0.4979"}},
            "delegations": [{
                "delegation_id": DELEGATION_ID,
                "chain": "base",
                "delegator": OWNER,
                "asset": "base:USDC",
                "amount": "10",
                "period_seconds": 86400,
                "available": "6",
                "spendable": "6",
                "bound_by": "delegation",
            }],
            "sponsorships": [sponsorship()],
        }),
        "SetSponsorship" => json!({"chain": "base", "per_day": "0.05"}),
        "SponsorshipView" => sponsorship(),
        "SponsorshipsView" => json!({"sponsorships": [sponsorship()]}),
        "NewOffer" => json!({
            "chain": "base",
            "asset": "USDC",
            "price": "0.01",
            "description": "Today's weather",
            "resource": {"url": "https://api.example.com/weather", "headers": {"X-Api-Key": "upstream-key"}},
            "gas_per_day": "0.001",
        }),
        "OfferView" => offer(),
        "OffersView" => json!({"offers": [offer()]}),
        "IncomeListView" => json!({"income": [{
            "id": "8c3e1a7b-5d2f-4b9e-a1c6-7e4d2b9f0a35",
            "offer_id": OFFER_ID,
            "chain": "base",
            "asset": "USDC",
            "amount": "0.01",
            "payer": OWNER,
            "nonce": "0x3f1c2b3a4d5e4f608a7b6c5d4e3f2a1b9f1c2b3a4d5e4f608a7b6c5d4e3f2a1b",
            "status": "settled",
            "settled_by": "agentd",
            "tx_hash": TX_HASH,
            "fee": "0.0000021",
            "created_at": CREATED_AT,
            "settled_at": UPDATED_AT,
        }]}),
        "FacilitatorTokenCreatedView" => json!({
            "id": FACILITATOR_TOKEN_ID,
            "token": "fac_RmFjaWxpdGF0b3IgdG9rZW4gZm9yIGFuIHg0MDIgc2",
            "created_at": CREATED_AT,
        }),
        "FacilitatorTokensView" => json!({"facilitator_tokens": [{
            "id": FACILITATOR_TOKEN_ID,
            "prefix": "fac_RmFjaWxp",
            "created_at": CREATED_AT,
            "last_used_at": UPDATED_AT,
        }]}),
        "FacilitatorRequest" => facilitator_request(),
        "FacilitatorVerifyView" => json!({"isValid": true, "payer": OWNER}),
        "FacilitatorSettleView" => json!({
            "success": true,
            "transaction": TX_HASH,
            "network": "eip155:8453",
            "payer": OWNER,
        }),
        "FacilitatorSupportedView" => json!({
            "kinds": [{"x402Version": 2, "scheme": "exact", "network": "eip155:8453"}],
            "extensions": [],
            "signers": {"eip155:*": [WALLET]},
        }),
        "TransactionView" => json!({
            "id": TRANSFER_ID,
            "chain": "base",
            "kind": "transfer",
            "tx_hash": TX_HASH,
            "from": WALLET,
            "to": RECIPIENT,
            "value_wei": "0",
            "value": "0",
            "asset": "USDC",
            "amount": "12.5",
            "token_address": USDC_BASE,
            "nonce": 7,
            "replaced_hashes": [],
            "status": "confirmed",
            "block_number": 23456789,
            "gas_used": 51234,
            "conversation_id": null,
            "created_at": CREATED_AT,
            "updated_at": UPDATED_AT,
        }),
        "X402FetchView" => {
            let mut payment = transfer();
            payment["kind"] = json!("x402");
            payment["amount"] = json!("0.05");
            payment["amount_wei"] = json!("50000");
            payment["tx_hash"] = json!(null);
            payment["nonce"] = json!(null);
            payment["block_number"] = json!(null);
            payment["explorer_url"] = json!(null);
            payment["status"] = json!("pending");
            payment["x402"] = json!({
                "url": "https://api.example.com/reports/latest",
                "network": "base",
                "nonce": "0x3f1c2b3a4d5e4f608a7b6c5d4e3f2a1b9f1c2b3a4d5e4f608a7b6c5d4e3f2a1b",
                "valid_before": 1795428300,
            });
            json!({
                "status": 200,
                "headers": {"content-type": "application/json"},
                "body": "{\"report\":\"ok\"}",
                "truncated": false,
                "payment": payment,
            })
        }
        "ChainView" => json!({
            "name": "base",
            "chain_id": 8453,
            "native_symbol": "ETH",
            "decimals": 18,
            "explorer_url": "https://basescan.org",
            "configured": true,
            "local_node": false,
            "tokens": [{"symbol": "USDC", "address": USDC_BASE, "decimals": 6}],
            "contracts": [{"name": "Uniswap V2 router", "address": "0x4752ba5DBc23f44D87826276BF6Fd6b1C372aD24"}],
        }),
        "ChatResponseView" => json!({
            "response": "Your Base wallet holds 0.25 ETH.",
            "conversation_id": CONVERSATION_ID,
            "chain_calls": [chain_call()],
            "tokens_used": 412,
            "message_id": MESSAGE_ID,
        }),
        "ConversationView" => json!({
            "id": CONVERSATION_ID,
            "agent_id": AGENT_ID,
            "title": "What is my balance on Base?",
            "created_at": CREATED_AT,
            "updated_at": UPDATED_AT,
            "message_count": 2,
        }),
        "MessageView" => json!({
            "id": MESSAGE_ID,
            "role": "assistant",
            "content": "Your Base wallet holds 0.25 ETH.",
            "chain_calls": [chain_call()],
            "created_at": UPDATED_AT,
        }),
        "HealthView" => json!({
            "status": "ok",
            "version": env!("CARGO_PKG_VERSION"),
            "database": "ok",
            "database_pool": {
                "max_connections": 16,
                "open": 5,
                "idle": 2,
                "ran_out": 0,
                "last_ran_out_at": null,
                "ran_out_recently": false,
            },
        }),
        _ => return None,
    };
    Some(example)
}

/// The example of a body that is not JSON, by media type.
pub fn text(media_type: &str) -> Option<Value> {
    match media_type {
        "text/event-stream" => Some(Value::String(format!(
            "event: start\ndata: {{\"conversation_id\":\"{CONVERSATION_ID}\"}}\n\n\
             event: text_delta\ndata: {{\"text\":\"Your Base wallet holds 0.25 ETH.\"}}\n\n"
        ))),
        "application/octet-stream" => Some(Value::String("the bytes of the resource an offer sells".into())),
        "text/plain" => Some(Value::String(
            "# HELP agentd_http_requests_total HTTP requests answered.\n\
             # TYPE agentd_http_requests_total counter\n\
             agentd_http_requests_total{method=\"GET\",route=\"/health\",status=\"200\"} 42\n"
                .into(),
        )),
        _ => None,
    }
}
