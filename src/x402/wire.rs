//! The x402 messages as they travel: protocol v2 (base64 JSON in `PAYMENT-REQUIRED`, `PAYMENT-SIGNATURE`,
//! `PAYMENT-RESPONSE`) and v1 (requirements in the 402's JSON body, `X-PAYMENT`, `X-PAYMENT-RESPONSE`). Field names
//! follow coinbase/x402's `specs/x402-specification-v2.md` and `-v1.md`.
//!
//! An `accepts` entry is kept as the raw JSON object it arrived as: v2 requires the chosen entry to be echoed in
//! `accepted` exactly, and a server may add fields this module does not know.

use base64::Engine;
use base64::engine::general_purpose::{STANDARD, STANDARD_NO_PAD, URL_SAFE, URL_SAFE_NO_PAD};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// The header a v2 402 carries its requirements in.
pub const PAYMENT_REQUIRED: &str = "payment-required";
/// The request header a v2 payment travels in.
pub const PAYMENT_SIGNATURE: &str = "PAYMENT-SIGNATURE";
/// The header a v2 server answers a settlement in.
pub const PAYMENT_RESPONSE: &str = "payment-response";
/// The request header a v1 payment travels in.
pub const X_PAYMENT: &str = "X-PAYMENT";
/// The header a v1 server answers a settlement in.
pub const X_PAYMENT_RESPONSE: &str = "x-payment-response";

/// Largest payment-required document read (header or body). A price list larger than this is not a price list.
const MAX_DOCUMENT_BYTES: usize = 64 * 1024;

/// Which protocol version a resource speaks; the payment is answered in the same one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum Protocol {
    V1,
    V2,
}

impl Protocol {
    pub fn number(self) -> u8 {
        match self {
            Protocol::V1 => 1,
            Protocol::V2 => 2,
        }
    }
}

/// Why a 402 could not be read as an x402 price list.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WireError {
    #[error("the 402 carries no x402 payment requirements")]
    NotX402,
    #[error("the payment requirements are not valid base64 JSON: {0}")]
    Malformed(String),
    #[error("x402 version {0} is not supported")]
    Version(u64),
}

/// A 402's price list, whichever version carried it.
#[derive(Debug, Clone, PartialEq)]
pub struct PaymentRequired {
    pub protocol: Protocol,
    /// Why the server asks (`error`), e.g. after a payment it refused.
    pub error: Option<String>,
    /// v2's `resource` object, echoed in the payment as received.
    pub resource: Option<Value>,
    pub accepts: Vec<Requirements>,
    /// v2's `extensions`, echoed in the payment (the spec asks clients to include at least what they received).
    pub extensions: Option<Value>,
}

/// One `accepts` entry: the fields a client reads, and the object itself.
#[derive(Debug, Clone, PartialEq)]
pub struct Requirements {
    pub raw: Map<String, Value>,
    pub scheme: Option<String>,
    /// v2: CAIP-2 (`eip155:8453`); v1: a name (`base`).
    pub network: Option<String>,
    /// Atomic units as a decimal string: v2 `amount`, v1 `maxAmountRequired`.
    pub amount: Option<String>,
    pub asset: Option<String>,
    pub pay_to: Option<String>,
    pub max_timeout_seconds: Option<u64>,
    /// The token's EIP-712 domain name and version (`extra.name`, `extra.version`).
    pub eip712_name: Option<String>,
    pub eip712_version: Option<String>,
}

impl Requirements {
    /// Reads the known fields of an entry; a field of the wrong type reads as absent (the entry then fits nothing).
    pub fn from_raw(raw: Map<String, Value>, protocol: Protocol) -> Self {
        let text = |key: &str| raw.get(key).and_then(Value::as_str).map(str::to_owned);
        let extra = raw.get("extra").and_then(Value::as_object);
        let extra_text = |key: &str| {
            extra
                .and_then(|e| e.get(key))
                .and_then(Value::as_str)
                .map(str::to_owned)
        };
        let amount_key = match protocol {
            Protocol::V1 => "maxAmountRequired",
            Protocol::V2 => "amount",
        };
        Requirements {
            scheme: text("scheme"),
            network: text("network"),
            amount: text(amount_key),
            asset: text("asset"),
            pay_to: text("payTo"),
            max_timeout_seconds: raw.get("maxTimeoutSeconds").and_then(Value::as_u64),
            eip712_name: extra_text("name"),
            eip712_version: extra_text("version"),
            raw,
        }
    }
}

/// Decodes base64 in any of its common alphabets and paddings (servers differ).
pub fn decode_base64(text: &str) -> Option<Vec<u8>> {
    let text = text.trim();
    [&STANDARD, &STANDARD_NO_PAD, &URL_SAFE, &URL_SAFE_NO_PAD]
        .iter()
        .find_map(|engine| engine.decode(text).ok())
}

/// Encodes a JSON document as the headers carry it: standard base64 with padding, as the official SDKs send.
pub fn encode_header(document: &Value) -> String {
    STANDARD.encode(serde_json::to_vec(document).unwrap_or_default())
}

/// The price list of a 402: from `PAYMENT-REQUIRED` (v2) when present, else from a v1 JSON body.
pub fn payment_required(header: Option<&str>, body: &[u8]) -> Result<PaymentRequired, WireError> {
    if let Some(header) = header {
        if header.len() > MAX_DOCUMENT_BYTES * 2 {
            return Err(WireError::Malformed("the header is too large".into()));
        }
        let bytes = decode_base64(header).ok_or_else(|| WireError::Malformed("not base64".into()))?;
        let document: Value =
            serde_json::from_slice(&bytes).map_err(|e| WireError::Malformed(format!("not JSON ({e})")))?;
        return from_document(document, Protocol::V2);
    }
    if body.is_empty() || body.len() > MAX_DOCUMENT_BYTES {
        return Err(WireError::NotX402);
    }
    let document: Value = serde_json::from_slice(body).map_err(|_| WireError::NotX402)?;
    if document.get("x402Version").is_none() {
        return Err(WireError::NotX402);
    }
    from_document(document, Protocol::V1)
}

fn from_document(document: Value, expected: Protocol) -> Result<PaymentRequired, WireError> {
    let Value::Object(mut document) = document else {
        return Err(WireError::Malformed("not a JSON object".into()));
    };
    let version = document
        .get("x402Version")
        .and_then(Value::as_u64)
        .ok_or_else(|| WireError::Malformed("no x402Version".into()))?;
    if version != u64::from(expected.number()) {
        return Err(WireError::Version(version));
    }
    let accepts = match document.remove("accepts") {
        Some(Value::Array(entries)) => entries
            .into_iter()
            .filter_map(|entry| match entry {
                Value::Object(raw) => Some(Requirements::from_raw(raw, expected)),
                _ => None,
            })
            .collect(),
        _ => return Err(WireError::Malformed("no accepts list".into())),
    };
    Ok(PaymentRequired {
        protocol: expected,
        error: document.get("error").and_then(Value::as_str).map(str::to_owned),
        resource: match expected {
            Protocol::V2 => document.remove("resource").filter(|r| !r.is_null()),
            Protocol::V1 => None,
        },
        accepts,
        extensions: match expected {
            Protocol::V2 => document.remove("extensions").filter(|e| !e.is_null()),
            Protocol::V1 => None,
        },
    })
}

/// The EIP-3009 authorization as the `payload.authorization` object carries it: EIP-55 addresses, decimal
/// integers, the nonce as 0x-hex of 32 bytes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AuthorizationJson {
    pub from: String,
    pub to: String,
    pub value: String,
    pub valid_after: String,
    pub valid_before: String,
    pub nonce: String,
}

/// The `exact` scheme's payload: the signature and what it signs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExactPayload {
    pub signature: String,
    pub authorization: AuthorizationJson,
}

/// The payment document of a request: v2 `{x402Version: 2, resource?, accepted, payload, extensions?}` or v1
/// `{x402Version: 1, scheme, network, payload}`.
pub fn payment_document(required: &PaymentRequired, entry: &Requirements, payload: &ExactPayload) -> Value {
    let mut document = Map::new();
    document.insert("x402Version".into(), Value::from(required.protocol.number()));
    match required.protocol {
        Protocol::V2 => {
            if let Some(resource) = &required.resource {
                document.insert("resource".into(), resource.clone());
            }
            document.insert("accepted".into(), Value::Object(entry.raw.clone()));
        }
        Protocol::V1 => {
            document.insert("scheme".into(), entry.raw.get("scheme").cloned().unwrap_or(Value::Null));
            document.insert(
                "network".into(),
                entry.raw.get("network").cloned().unwrap_or(Value::Null),
            );
        }
    }
    document.insert("payload".into(), serde_json::to_value(payload).unwrap_or(Value::Null));
    if let (Protocol::V2, Some(extensions)) = (required.protocol, &required.extensions) {
        document.insert("extensions".into(), extensions.clone());
    }
    Value::Object(document)
}

/// The header name a payment of `protocol` travels in.
pub fn payment_header_name(protocol: Protocol) -> &'static str {
    match protocol {
        Protocol::V1 => X_PAYMENT,
        Protocol::V2 => PAYMENT_SIGNATURE,
    }
}

/// A settlement answer (`PAYMENT-RESPONSE` / `X-PAYMENT-RESPONSE`): `{success, transaction, network, payer?,
/// errorReason?}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SettleResponse {
    pub success: bool,
    #[serde(default)]
    pub transaction: String,
    #[serde(default)]
    pub network: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub payer: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error_reason: Option<String>,
}

/// The settlement answer in a response header (both versions share the document; the header name differs, see
/// `settle_header_name`), if there is one that reads.
pub fn settle_response(header: Option<&str>) -> Option<SettleResponse> {
    let bytes = decode_base64(header?)?;
    serde_json::from_slice(&bytes).ok()
}

/// The (lower-case) response header a settlement answer of `protocol` arrives in.
pub fn settle_header_name(protocol: Protocol) -> &'static str {
    match protocol {
        Protocol::V1 => X_PAYMENT_RESPONSE,
        Protocol::V2 => PAYMENT_RESPONSE,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// `specs/x402-specification-v2.md` §5.1.1, with an unknown field added to the entry.
    fn v2_example() -> Value {
        json!({
          "x402Version": 2,
          "error": "PAYMENT-SIGNATURE header is required",
          "resource": {"url": "https://api.example.com/premium-data", "description": "Access to premium market data",
                       "mimeType": "application/json"},
          "accepts": [{
              "scheme": "exact", "network": "eip155:84532", "amount": "10000",
              "asset": "0x036CbD53842c5426634e7929541eC2318f3dCF7e",
              "payTo": "0x209693Bc6afc0C5328bA36FaF03C514EF312287C", "maxTimeoutSeconds": 60,
              "extra": {"name": "USDC", "version": "2"}, "futureField": {"kept": [1, 2]}
          }],
          "extensions": {}
        })
    }

    #[test]
    fn a_v2_payment_required_header_reads_with_its_entry_kept_whole() {
        let header = encode_header(&v2_example());
        let required = payment_required(Some(&header), b"ignored").unwrap();
        assert_eq!(required.protocol, Protocol::V2);
        assert_eq!(required.error.as_deref(), Some("PAYMENT-SIGNATURE header is required"));
        assert_eq!(required.resource, Some(v2_example()["resource"].clone()));
        let entry = &required.accepts[0];
        assert_eq!(entry.scheme.as_deref(), Some("exact"));
        assert_eq!(entry.network.as_deref(), Some("eip155:84532"));
        assert_eq!(entry.amount.as_deref(), Some("10000"));
        assert_eq!(
            entry.pay_to.as_deref(),
            Some("0x209693Bc6afc0C5328bA36FaF03C514EF312287C")
        );
        assert_eq!(entry.max_timeout_seconds, Some(60));
        assert_eq!(
            (entry.eip712_name.as_deref(), entry.eip712_version.as_deref()),
            (Some("USDC"), Some("2"))
        );
        assert_eq!(Value::Object(entry.raw.clone()), v2_example()["accepts"][0]);
    }

    #[test]
    fn the_v2_payment_document_echoes_the_entry_and_resource_exactly() {
        let required = payment_required(Some(&encode_header(&v2_example())), b"").unwrap();
        let payload = ExactPayload {
            signature: "0x2d6a".into(),
            authorization: AuthorizationJson {
                from: "0x857b06519E91e3A54538791bDbb0E22373e36b66".into(),
                to: "0x209693Bc6afc0C5328bA36FaF03C514EF312287C".into(),
                value: "10000".into(),
                valid_after: "0".into(),
                valid_before: "1740672154".into(),
                nonce: "0xf3746613c2d920b5fdabc0856f2aeb2d4f88ee6037b8cc5d04a71a4462f13480".into(),
            },
        };
        let document = payment_document(&required, &required.accepts[0], &payload);
        // §5.2.1's shape: the same keys, the entry copied with its unknown field.
        assert_eq!(
            document,
            json!({
                "x402Version": 2,
                "resource": v2_example()["resource"],
                "accepted": v2_example()["accepts"][0],
                "payload": {"signature": "0x2d6a", "authorization": {
                    "from": "0x857b06519E91e3A54538791bDbb0E22373e36b66",
                    "to": "0x209693Bc6afc0C5328bA36FaF03C514EF312287C",
                    "value": "10000", "validAfter": "0", "validBefore": "1740672154",
                    "nonce": "0xf3746613c2d920b5fdabc0856f2aeb2d4f88ee6037b8cc5d04a71a4462f13480"}},
                "extensions": {}
            })
        );
        let header = encode_header(&document);
        let back: Value = serde_json::from_slice(&decode_base64(&header).unwrap()).unwrap();
        assert_eq!(back, document);
        assert_eq!(payment_header_name(Protocol::V2), "PAYMENT-SIGNATURE");
    }

    #[test]
    fn a_v1_body_reads_and_its_payment_names_scheme_and_network() {
        // `specs/x402-specification-v1.md` §5.1.1.
        let body = json!({
          "x402Version": 1, "error": "X-PAYMENT header is required",
          "accepts": [{"scheme": "exact", "network": "base-sepolia", "maxAmountRequired": "10000",
                       "asset": "0x036CbD53842c5426634e7929541eC2318f3dCF7e",
                       "payTo": "0x209693Bc6afc0C5328bA36FaF03C514EF312287C",
                       "resource": "https://api.example.com/premium-data", "description": "Access to premium market data",
                       "mimeType": "application/json", "outputSchema": null, "maxTimeoutSeconds": 60,
                       "extra": {"name": "USDC", "version": "2"}}]
        });
        let required = payment_required(None, body.to_string().as_bytes()).unwrap();
        assert_eq!(required.protocol, Protocol::V1);
        assert_eq!(required.accepts[0].amount.as_deref(), Some("10000"));
        assert_eq!(required.accepts[0].network.as_deref(), Some("base-sepolia"));
        let payload = ExactPayload {
            signature: "0x00".into(),
            authorization: AuthorizationJson {
                from: "a".into(),
                to: "b".into(),
                value: "1".into(),
                valid_after: "0".into(),
                valid_before: "2".into(),
                nonce: "0x01".into(),
            },
        };
        let document = payment_document(&required, &required.accepts[0], &payload);
        assert_eq!(
            document,
            json!({"x402Version": 1, "scheme": "exact", "network": "base-sepolia",
                   "payload": serde_json::to_value(&payload).unwrap()})
        );
        assert_eq!(payment_header_name(Protocol::V1), "X-PAYMENT");
    }

    #[test]
    fn settlement_answers_read_in_both_versions() {
        // §5.3.1 of both specifications; `errorReason` when it failed.
        let ok = json!({"success": true, "transaction": "0x1234", "network": "eip155:84532",
                        "payer": "0x857b06519E91e3A54538791bDbb0E22373e36b66"});
        let read = settle_response(Some(&encode_header(&ok))).unwrap();
        assert!(read.success);
        assert_eq!(read.transaction, "0x1234");
        assert_eq!(serde_json::to_value(&read).unwrap(), ok);
        let failed = json!({"success": false, "errorReason": "insufficient_funds", "transaction": "",
                            "network": "base-sepolia", "payer": "0x857b06519E91e3A54538791bDbb0E22373e36b66"});
        let read = settle_response(Some(&encode_header(&failed))).unwrap();
        assert_eq!(read.error_reason.as_deref(), Some("insufficient_funds"));
        assert!(settle_response(Some("not base64!")).is_none());
        assert!(settle_response(None).is_none());
        assert_eq!(settle_header_name(Protocol::V1), "x-payment-response");
    }

    #[test]
    fn what_is_not_an_x402_price_list_is_told_apart() {
        assert_eq!(payment_required(None, b""), Err(WireError::NotX402));
        assert_eq!(payment_required(None, b"<html>pay me</html>"), Err(WireError::NotX402));
        assert_eq!(payment_required(None, br#"{"price": 1}"#), Err(WireError::NotX402));
        assert!(matches!(
            payment_required(Some("%%%"), b""),
            Err(WireError::Malformed(_))
        ));
        let v3 = encode_header(&json!({"x402Version": 3, "accepts": []}));
        assert_eq!(payment_required(Some(&v3), b""), Err(WireError::Version(3)));
        // A v1 document in the v2 header is a version mismatch, not a price list.
        let v1 = encode_header(&json!({"x402Version": 1, "accepts": []}));
        assert_eq!(payment_required(Some(&v1), b""), Err(WireError::Version(1)));
        // URL-safe base64 without padding is read too.
        let doc = json!({"x402Version": 2, "accepts": [], "resource": {"url": "https://a.example/?"}});
        let url_safe = URL_SAFE_NO_PAD.encode(doc.to_string());
        assert!(payment_required(Some(&url_safe), b"").is_ok());
    }
}
