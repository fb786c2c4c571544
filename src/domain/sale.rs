//! Selling over x402 (§23), the checks that need no chain: what an agent accepts for a payment (`Terms`, the one
//! `accepts` entry of an offer, or a facilitator caller's requirements for the agent's own `payTo`), the payment a
//! buyer sent as x402 v2 carries it (`Payment`), and the checks in §23's order up to the signature — the shape, the
//! requirements, the recipient and value, the time window, the EIP-712 digest the buyer signed and the address an
//! ECDSA signature recovers. Each refusal is a `Reason` with the official SDKs' reason code.

use alloy::primitives::{Address, B256, Bytes, U256};
use alloy::sol_types::{SolStruct, eip712_domain};
use serde_json::{Value, json};

/// Why a payment is refused (§23), in the order the checks run; `code` is x402's reason string.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reason {
    OfferPaused,
    InvalidPayload,
    RequirementsMismatch,
    RecipientMismatch,
    ValueMismatch,
    ValidAfter,
    ValidBefore,
    Signature,
    PayerBlocked,
    NonceAlreadyUsed,
    InsufficientBalance,
    SimulationFailed,
    /// Facilitator requirements whose `payTo` is not the agent's wallet: agentd is no public facilitator.
    PayToNotAgent,
    UnsupportedScheme,
    NetworkMismatch,
    /// The payer (its signature verified) sent more payments than the per-payer limit allows (§15): a 429, not a
    /// 402, with the seconds to wait.
    RateLimited(u64),
}

impl Reason {
    pub fn code(self) -> &'static str {
        match self {
            Reason::OfferPaused => "offer_paused",
            Reason::InvalidPayload => "invalid_payload",
            Reason::RequirementsMismatch => "requirements_mismatch",
            Reason::RecipientMismatch => "invalid_exact_evm_payload_recipient_mismatch",
            Reason::ValueMismatch => "invalid_exact_evm_payload_authorization_value_mismatch",
            Reason::ValidAfter => "invalid_exact_evm_payload_authorization_valid_after",
            Reason::ValidBefore => "invalid_exact_evm_payload_authorization_valid_before",
            Reason::Signature => "invalid_exact_evm_payload_signature",
            Reason::PayerBlocked => "payer_blocked",
            Reason::NonceAlreadyUsed => "invalid_exact_evm_nonce_already_used",
            Reason::InsufficientBalance => "invalid_exact_evm_insufficient_balance",
            Reason::SimulationFailed => "invalid_exact_evm_transaction_simulation_failed",
            Reason::PayToNotAgent => "pay_to_not_agent",
            Reason::UnsupportedScheme => "unsupported_scheme",
            Reason::NetworkMismatch => "network_mismatch",
            Reason::RateLimited(_) => "rate_limited",
        }
    }
}

impl Reason {
    /// Every refusal a payment's checks give, in §23's order (the facilitator's own after them).
    pub const ALL: [Reason; 15] = [
        Reason::OfferPaused,
        Reason::InvalidPayload,
        Reason::RequirementsMismatch,
        Reason::RecipientMismatch,
        Reason::ValueMismatch,
        Reason::ValidAfter,
        Reason::ValidBefore,
        Reason::Signature,
        Reason::PayerBlocked,
        Reason::NonceAlreadyUsed,
        Reason::InsufficientBalance,
        Reason::SimulationFailed,
        Reason::PayToNotAgent,
        Reason::UnsupportedScheme,
        Reason::NetworkMismatch,
    ];

    /// The refusal of `code`.
    pub fn of_code(code: &str) -> Option<Reason> {
        Reason::ALL.into_iter().find(|r| r.code() == code)
    }
}

/// What the agent accepts: the `exact` scheme of an EIP-3009 token on one chain, for one amount, to its wallet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Terms {
    pub chain_id: u64,
    pub token: Address,
    /// In the token's base units.
    pub amount: U256,
    pub pay_to: Address,
    pub max_timeout_seconds: u64,
    /// The token's own EIP-712 domain.
    pub name: String,
    pub version: String,
    /// `extra.paymentFlow: "upfront"` (an offer settled before serving).
    pub upfront: bool,
}

impl Terms {
    pub fn network(&self) -> String {
        format!("eip155:{}", self.chain_id)
    }

    /// The `accepts` entry of a 402 (§23).
    pub fn entry(&self) -> Value {
        let mut extra = json!({"name": self.name, "version": self.version});
        if self.upfront {
            extra["paymentFlow"] = json!("upfront");
        }
        json!({
            "scheme": "exact",
            "network": self.network(),
            "amount": self.amount.to_string(),
            "asset": self.token.to_checksum(None),
            "payTo": self.pay_to.to_checksum(None),
            "maxTimeoutSeconds": self.max_timeout_seconds,
            "extra": extra,
        })
    }
}

/// An EIP-3009 `TransferWithAuthorization` as signed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Authorization {
    pub from: Address,
    pub to: Address,
    pub value: U256,
    pub valid_after: u64,
    pub valid_before: u64,
    pub nonce: B256,
}

/// A buyer's payment as x402 v2 sends it (`PAYMENT-SIGNATURE`, or a facilitator's `paymentPayload`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Payment {
    /// The requirements the buyer says it paid (`accepted`).
    pub accepted: Value,
    pub signature: Bytes,
    pub authorization: Authorization,
}

impl Payment {
    /// Reads a v2 payment document; unknown and optional fields are ignored.
    pub fn parse(document: &Value) -> Result<Payment, Reason> {
        let bad = || Reason::InvalidPayload;
        if document.get("x402Version").and_then(Value::as_u64) != Some(2) {
            return Err(bad());
        }
        let accepted = document.get("accepted").filter(|a| a.is_object()).ok_or_else(bad)?;
        let payload = document.get("payload").ok_or_else(bad)?;
        let signature: Bytes = text(payload, "signature")
            .and_then(|s| s.parse().ok())
            .ok_or_else(bad)?;
        let auth = payload.get("authorization").ok_or_else(bad)?;
        let address = |key| text(auth, key).and_then(|s| s.parse::<Address>().ok()).ok_or_else(bad);
        let integer = |key| {
            text(auth, key)
                .and_then(|s| U256::from_str_radix(s, 10).ok())
                .ok_or_else(bad)
        };
        let seconds = |key| integer(key).map(|v| u64::try_from(v).unwrap_or(u64::MAX));
        let nonce = text(auth, "nonce")
            .and_then(|s| s.parse::<B256>().ok())
            .ok_or_else(bad)?;
        Ok(Payment {
            accepted: accepted.clone(),
            signature,
            authorization: Authorization {
                from: address("from")?,
                to: address("to")?,
                value: integer("value")?,
                valid_after: seconds("validAfter")?,
                valid_before: seconds("validBefore")?,
                nonce,
            },
        })
    }

    /// The `PAYMENT-SIGNATURE` header's document (base64 of JSON).
    pub fn from_header(header: &str) -> Result<Payment, Reason> {
        use base64::Engine;
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(header.trim())
            .map_err(|_| Reason::InvalidPayload)?;
        let document: Value = serde_json::from_slice(&bytes).map_err(|_| Reason::InvalidPayload)?;
        Payment::parse(&document)
    }

    /// What identifies the payment's signature across requests (a repeat of the same settle answers its first
    /// outcome): the keccak of the signature bytes.
    pub fn signature_key(&self) -> String {
        format!("{:x}", alloy::primitives::keccak256(&self.signature))
    }

    /// Whether the signature is an ERC-6492 wrapped one (refused: a counterfactual account's signature).
    pub fn is_erc6492(&self) -> bool {
        const MAGIC: [u8; 32] =
            alloy::primitives::hex!("6492649264926492649264926492649264926492649264926492649264926492");
        self.signature.len() >= 32 && self.signature[self.signature.len() - 32..] == MAGIC
    }
}

fn text<'a>(value: &'a Value, key: &str) -> Option<&'a str> {
    value.get(key)?.as_str()
}

/// `accepted` against the agent's terms: scheme, network, amount, asset, payTo and maxTimeoutSeconds, and
/// `extra`'s name and version.
pub fn check_requirements(accepted: &Value, terms: &Terms) -> Result<(), Reason> {
    let same_address = |key, expected: Address| {
        text(accepted, key)
            .and_then(|s| s.parse::<Address>().ok())
            .is_some_and(|a| a == expected)
    };
    let extra = accepted.get("extra");
    let extra_is = |key, expected: &str| extra.and_then(|e| text(e, key)) == Some(expected);
    let ok = text(accepted, "scheme") == Some("exact")
        && text(accepted, "network") == Some(terms.network().as_str())
        && text(accepted, "amount").and_then(|a| U256::from_str_radix(a, 10).ok()) == Some(terms.amount)
        && same_address("asset", terms.token)
        && same_address("payTo", terms.pay_to)
        && accepted.get("maxTimeoutSeconds").and_then(Value::as_u64) == Some(terms.max_timeout_seconds)
        && extra_is("name", &terms.name)
        && extra_is("version", &terms.version);
    if ok { Ok(()) } else { Err(Reason::RequirementsMismatch) }
}

/// The authorization against the terms and the wall clock (`now`, unix seconds): its recipient, its value, then
/// `validAfter` ≤ now and now + 6 s < `validBefore` ≤ now + `maxTimeoutSeconds` + 60.
pub fn check_authorization(auth: &Authorization, terms: &Terms, now: u64) -> Result<(), Reason> {
    if auth.to != terms.pay_to {
        return Err(Reason::RecipientMismatch);
    }
    if auth.value != terms.amount {
        return Err(Reason::ValueMismatch);
    }
    check_window(auth, terms, now)
}

/// The time window alone (run again right before signing the settlement).
pub fn check_window(auth: &Authorization, terms: &Terms, now: u64) -> Result<(), Reason> {
    if auth.valid_after > now {
        return Err(Reason::ValidAfter);
    }
    if auth.valid_before <= now.saturating_add(6)
        || auth.valid_before > now.saturating_add(terms.max_timeout_seconds).saturating_add(60)
    {
        return Err(Reason::ValidBefore);
    }
    Ok(())
}

alloy::sol! {
    /// EIP-3009's typed data, as USDC (FiatToken v2) and the x402 `exact` scheme define it.
    #[derive(Debug, PartialEq, Eq)]
    struct TransferWithAuthorization {
        address from;
        address to;
        uint256 value;
        uint256 validAfter;
        uint256 validBefore;
        bytes32 nonce;
    }
}

alloy::sol! {
    /// The token's settlement entry points: the `v, r, s` form for a 65-byte signature, the `bytes` form otherwise.
    interface IEip3009Settle {
        function transferWithAuthorization(address from, address to, uint256 value, uint256 validAfter,
            uint256 validBefore, bytes32 nonce, uint8 v, bytes32 r, bytes32 s) external;
        function transferWithAuthorization(address from, address to, uint256 value, uint256 validAfter,
            uint256 validBefore, bytes32 nonce, bytes signature) external;
    }
}

/// The EIP-712 digest of the authorization under the token's domain and the chain's own id.
pub fn digest(auth: &Authorization, terms: &Terms) -> B256 {
    let domain = eip712_domain! {
        name: terms.name.clone(),
        version: terms.version.clone(),
        chain_id: terms.chain_id,
        verifying_contract: terms.token,
    };
    TransferWithAuthorization {
        from: auth.from,
        to: auth.to,
        value: auth.value,
        validAfter: U256::from(auth.valid_after),
        validBefore: U256::from(auth.valid_before),
        nonce: auth.nonce,
    }
    .eip712_signing_hash(&domain)
}

/// The address a 65-byte ECDSA signature over `digest` recovers (`None`: not a 65-byte signature, or none).
pub fn recover(signature: &[u8], digest: B256) -> Option<Address> {
    if signature.len() != 65 {
        return None;
    }
    let parsed = alloy::primitives::Signature::try_from(signature).ok()?;
    parsed.recover_address_from_prehash(&digest).ok()
}

/// The settlement's calldata: `transferWithAuthorization` in the `v, r, s` form for a 65-byte signature, the
/// `bytes signature` form otherwise.
pub fn settle_calldata(payment: &Payment) -> Bytes {
    use alloy::sol_types::SolCall;
    let a = &payment.authorization;
    let (after, before) = (U256::from(a.valid_after), U256::from(a.valid_before));
    let sig = &payment.signature;
    if sig.len() == 65 {
        let v = match sig[64] {
            0 | 1 => sig[64] + 27,
            v => v,
        };
        IEip3009Settle::transferWithAuthorization_0Call {
            from: a.from,
            to: a.to,
            value: a.value,
            validAfter: after,
            validBefore: before,
            nonce: a.nonce,
            v,
            r: B256::from_slice(&sig[..32]),
            s: B256::from_slice(&sig[32..64]),
        }
        .abi_encode()
        .into()
    } else {
        IEip3009Settle::transferWithAuthorization_1Call {
            from: a.from,
            to: a.to,
            value: a.value,
            validAfter: after,
            validBefore: before,
            nonce: a.nonce,
            signature: sig.clone(),
        }
        .abi_encode()
        .into()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloy::signers::SignerSync;
    use alloy::signers::local::PrivateKeySigner;

    fn terms(pay_to: Address) -> Terms {
        Terms {
            chain_id: 8453,
            token: Address::repeat_byte(0x11),
            amount: U256::from(10_000u64),
            pay_to,
            max_timeout_seconds: 300,
            name: "USD Coin".into(),
            version: "2".into(),
            upfront: false,
        }
    }

    fn signed(terms: &Terms, signer: &PrivateKeySigner, now: u64) -> Value {
        let auth = Authorization {
            from: signer.address(),
            to: terms.pay_to,
            value: terms.amount,
            valid_after: now - 10,
            valid_before: now + 120,
            nonce: B256::repeat_byte(7),
        };
        let sig = signer.sign_hash_sync(&digest(&auth, terms)).unwrap();
        json!({"x402Version": 2, "accepted": terms.entry(), "payload": {
            "signature": format!("0x{}", alloy::primitives::hex::encode(sig.as_bytes())),
            "authorization": {"from": auth.from.to_checksum(None), "to": auth.to.to_checksum(None),
                "value": auth.value.to_string(), "validAfter": auth.valid_after.to_string(),
                "validBefore": auth.valid_before.to_string(), "nonce": auth.nonce.to_string()}},
            "extensions": {"ignored": true}})
    }

    #[test]
    fn a_signed_payment_parses_matches_and_recovers_its_payer() {
        let signer = PrivateKeySigner::random();
        let terms = terms(Address::repeat_byte(0x22));
        let now = 1_800_000_000;
        let payment = Payment::parse(&signed(&terms, &signer, now)).unwrap();
        check_requirements(&payment.accepted, &terms).unwrap();
        check_authorization(&payment.authorization, &terms, now).unwrap();
        let recovered = recover(&payment.signature, digest(&payment.authorization, &terms));
        assert_eq!(recovered, Some(signer.address()));
        assert!(!payment.is_erc6492());
    }

    #[test]
    fn each_check_refuses_with_its_reason() {
        let signer = PrivateKeySigner::random();
        let terms = terms(Address::repeat_byte(0x22));
        let now = 1_800_000_000;
        let good = signed(&terms, &signer, now);
        assert_eq!(Payment::parse(&json!({"x402Version": 1})), Err(Reason::InvalidPayload));
        let mut other = good.clone();
        other["accepted"]["amount"] = json!("1");
        let p = Payment::parse(&other).unwrap();
        assert_eq!(
            check_requirements(&p.accepted, &terms),
            Err(Reason::RequirementsMismatch)
        );
        let mut other = good.clone();
        other["payload"]["authorization"]["to"] = json!(Address::repeat_byte(3).to_checksum(None));
        let p = Payment::parse(&other).unwrap();
        assert_eq!(
            check_authorization(&p.authorization, &terms, now),
            Err(Reason::RecipientMismatch)
        );
        let mut other = good.clone();
        other["payload"]["authorization"]["value"] = json!("9999");
        let p = Payment::parse(&other).unwrap();
        assert_eq!(
            check_authorization(&p.authorization, &terms, now),
            Err(Reason::ValueMismatch)
        );
        let p = Payment::parse(&good).unwrap();
        assert_eq!(
            check_authorization(&p.authorization, &terms, now - 20),
            Err(Reason::ValidAfter)
        );
        assert_eq!(
            check_authorization(&p.authorization, &terms, now + 115),
            Err(Reason::ValidBefore)
        );
        let mut long = p.authorization;
        long.valid_before = now + 300 + 61;
        assert_eq!(check_authorization(&long, &terms, now), Err(Reason::ValidBefore));
        long.valid_before = now + 300 + 60;
        assert_eq!(check_authorization(&long, &terms, now), Ok(()));
    }
}
