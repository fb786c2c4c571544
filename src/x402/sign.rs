//! Signing a payment that has already been decided: the EIP-3009 `TransferWithAuthorization` typed data (EIP-712,
//! alloy `sol!`), in the token's domain (name and version from the entry's `extra`, chain id from its network,
//! verifying contract the token), and the request header that carries it. Nothing here decides whether to pay.

use alloy::primitives::{Address, B256, U256};
use alloy::sol_types::{Eip712Domain, SolStruct};
use rand_core::{OsRng, RngCore};

use super::choose::Choice;
use super::wire::{self, AuthorizationJson, ExactPayload, PaymentRequired};

/// The longest an authorization stays valid, whatever `maxTimeoutSeconds` a server asks for: a signed
/// authorization is money that can move until then.
pub const MAX_VALIDITY_SECS: u64 = 600;

/// EIP-3009's typed data, as USDC (FiatToken v2) and the x402 `exact` scheme define it: the one definition the
/// selling side checks with too.
use crate::domain::sale::TransferWithAuthorization;

/// The authorization to be signed: fixed (and storable) before the signature exists.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Authorization {
    pub from: Address,
    pub to: Address,
    pub value: U256,
    pub valid_after: u64,
    pub valid_before: u64,
    pub nonce: B256,
}

impl Authorization {
    /// From `from` to the entry's `payTo` for its amount: valid from 0 until `now` + min(`maxTimeoutSeconds`, 600),
    /// with a random 32-byte nonce.
    pub fn new(from: Address, choice: &Choice, now_unix: u64) -> Self {
        let mut nonce = [0u8; 32];
        OsRng.fill_bytes(&mut nonce);
        Authorization {
            from,
            to: choice.pay_to,
            value: choice.amount,
            valid_after: 0,
            valid_before: now_unix.saturating_add(choice.max_timeout_seconds.min(MAX_VALIDITY_SECS)),
            nonce: B256::from(nonce),
        }
    }

    fn typed(&self) -> TransferWithAuthorization {
        TransferWithAuthorization {
            from: self.from,
            to: self.to,
            value: self.value,
            validAfter: U256::from(self.valid_after),
            validBefore: U256::from(self.valid_before),
            nonce: self.nonce,
        }
    }

    /// The `payload.authorization` object: EIP-55 addresses, decimal strings, the nonce 0x-hex.
    pub fn to_json(&self) -> AuthorizationJson {
        AuthorizationJson {
            from: self.from.to_checksum(None),
            to: self.to.to_checksum(None),
            value: self.value.to_string(),
            valid_after: self.valid_after.to_string(),
            valid_before: self.valid_before.to_string(),
            nonce: self.nonce.to_string(),
        }
    }
}

/// The token's EIP-712 domain for the chosen entry.
pub fn domain(choice: &Choice) -> Eip712Domain {
    Eip712Domain::new(
        Some(choice.domain_name.clone().into()),
        Some(choice.domain_version.clone().into()),
        Some(U256::from(choice.token.chain_id)),
        Some(choice.token.address),
        None,
    )
}

/// The EIP-712 hash the signature is over.
pub fn signing_hash(authorization: &Authorization, choice: &Choice) -> B256 {
    authorization.typed().eip712_signing_hash(&domain(choice))
}

/// Why a payment could not be signed.
#[derive(Debug, thiserror::Error)]
pub enum SignError {
    #[error("the authorization is not from the signing wallet")]
    WrongSigner,
    #[error("signing failed: {0}")]
    Signer(#[from] crate::signer::SignerError),
}

/// A signed payment, ready to send.
#[derive(Debug, Clone)]
pub struct SignedPayment {
    /// `PAYMENT-SIGNATURE` (v2) or `X-PAYMENT` (v1).
    pub header_name: &'static str,
    /// Base64 JSON of the payment document.
    pub header_value: String,
    /// 65 bytes, r‖s‖v with v 27/28, 0x-hex.
    pub signature: String,
}

/// Signs `authorization` (whose `from` must be `signer`'s address) for `choice` and builds the header that carries
/// it in `required`'s protocol version.
pub fn sign_payment(
    signer: &dyn crate::signer::WalletSigner,
    required: &PaymentRequired,
    choice: &Choice,
    authorization: &Authorization,
) -> Result<SignedPayment, SignError> {
    if authorization.from != signer.address() {
        return Err(SignError::WrongSigner);
    }
    let signature = signer.sign_hash(&signing_hash(authorization, choice))?;
    let signature = alloy::hex::encode_prefixed(signature.as_bytes());
    let payload = ExactPayload {
        signature: signature.clone(),
        authorization: authorization.to_json(),
    };
    let document = wire::payment_document(required, &choice.entry, &payload);
    Ok(SignedPayment {
        header_name: wire::payment_header_name(required.protocol),
        header_value: wire::encode_header(&document),
        signature,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::x402::choose::{KnownToken, choose};
    use crate::x402::wire::{decode_base64, encode_header, payment_required};
    use alloy::primitives::Signature;
    use alloy::signers::local::PrivateKeySigner;
    use serde_json::{Value, json};

    const USDC_BASE: &str = "0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913";
    const PAY_TO: &str = "0x209693bc6afc0c5328ba36faf03c514ef312287c";

    fn setup(timeout: u64) -> (PaymentRequired, Choice) {
        let doc = json!({"x402Version": 2, "resource": {"url": "https://a.example/x"}, "accepts": [
            {"scheme": "exact", "network": "eip155:8453", "amount": "10000", "asset": USDC_BASE.to_lowercase(),
             "payTo": PAY_TO, "maxTimeoutSeconds": timeout, "extra": {"name": "USD Coin", "version": "2"}}]});
        let required = payment_required(Some(&encode_header(&doc)), b"").unwrap();
        let tokens = [KnownToken {
            chain: "base".into(),
            chain_id: 8453,
            symbol: "USDC".into(),
            address: USDC_BASE.parse().unwrap(),
            decimals: 6,
            eip712: Some(("USD Coin".into(), "2".into())),
        }];
        let choice = choose(&required, &tokens, None).unwrap();
        (required, choice)
    }

    #[test]
    fn the_type_hash_is_eip_3009s() {
        // keccak256("TransferWithAuthorization(address from,address to,uint256 value,uint256 validAfter,
        // uint256 validBefore,bytes32 nonce)"), the constant in FiatToken v2 and EIP-3009.
        assert_eq!(
            TransferWithAuthorization::eip712_type_hash(&Authorization::new(Address::ZERO, &setup(60).1, 0).typed()),
            "0x7c7c6cdb67a18743f49ec6fa9b35f50d52ed05cbed4cc592e13b44501c1a2267"
                .parse::<B256>()
                .unwrap()
        );
    }

    #[test]
    fn the_signed_header_recovers_to_the_agent_and_says_what_was_chosen() {
        let signer = PrivateKeySigner::random();
        let (required, choice) = setup(3600);
        let authorization = Authorization::new(signer.address(), &choice, 1_700_000_000);
        assert_eq!(
            authorization.valid_before,
            1_700_000_000 + MAX_VALIDITY_SECS,
            "capped at 600 s"
        );
        let payment = sign_payment(&signer, &required, &choice, &authorization).unwrap();
        assert_eq!(payment.header_name, "PAYMENT-SIGNATURE");
        let document: Value = serde_json::from_slice(&decode_base64(&payment.header_value).unwrap()).unwrap();
        assert_eq!(document["accepted"], Value::Object(choice.entry.raw.clone()));
        let auth = &document["payload"]["authorization"];
        assert_eq!(auth["from"], signer.address().to_checksum(None));
        assert_eq!(auth["to"], "0x209693Bc6afc0C5328bA36FaF03C514EF312287C", "EIP-55");
        assert_eq!(auth["value"], "10000");
        assert_eq!(auth["validAfter"], "0");
        assert_eq!(auth["validBefore"], (1_700_000_000 + 600).to_string());
        let nonce = auth["nonce"].as_str().unwrap();
        assert!(nonce.starts_with("0x") && nonce.len() == 66, "{nonce}");
        let signature: Signature = document["payload"]["signature"].as_str().unwrap().parse().unwrap();
        let recovered = signature
            .recover_address_from_prehash(&signing_hash(&authorization, &choice))
            .unwrap();
        assert_eq!(recovered, signer.address());
        // A short timeout is kept as given; two authorizations never share a nonce.
        let (_, short) = setup(30);
        let a = Authorization::new(signer.address(), &short, 100);
        assert_eq!(a.valid_before, 130);
        assert_ne!(a.nonce, Authorization::new(signer.address(), &short, 100).nonce);
    }

    #[test]
    fn an_authorization_from_another_wallet_is_not_signed() {
        let (required, choice) = setup(60);
        let authorization = Authorization::new(Address::repeat_byte(7), &choice, 0);
        assert!(matches!(
            sign_payment(&PrivateKeySigner::random(), &required, &choice, &authorization),
            Err(SignError::WrongSigner)
        ));
    }
}
