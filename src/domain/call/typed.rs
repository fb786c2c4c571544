//! EIP-712 typed data an agent is asked to sign (§18 `sign-typed-data`): read once into alloy's `TypedData` (the
//! digest is its `eip712_signing_hash`), tied to the request's chain, and decoded as what it grants once signed —
//! EIP-2612 and DAI permits as allowances of the token that verifies them, Permit2's `PermitSingle` and
//! `PermitBatch` as allowances through Permit2, `PermitTransferFrom` as a transfer the spender may make. EIP-3009
//! authorizations are refused: they are paid through x402 only.

use alloy::primitives::{Address, B256, U256};
use alloy_dyn_abi::TypedData;
use serde_json::Value;

use super::condition::{Operand, loose};
use super::unlimited::is_unlimited_amount;
use super::value::parse_uint;

/// Typed data that may be judged and signed.
#[derive(Debug, Clone)]
pub struct Typed {
    /// As the request wrote it (what is stored and signed again on approval).
    pub json: Value,
    pub data: TypedData,
    /// The EIP-712 hash that is signed.
    pub digest: B256,
}

/// Why typed data is refused before any rule reads it (422).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TypedError {
    #[error("typed_data is not EIP-712 typed data ({{types, primaryType, domain, message}}): {0}")]
    Malformed(String),
    #[error("typed_data.domain.chainId is required: one key signs for every chain")]
    NoChainId,
    #[error("typed_data.domain.chainId is {found}, but the request's chain has id {expected}")]
    WrongChain { found: U256, expected: u64 },
    #[error("{0} is an EIP-3009 authorization: those are paid through x402 only")]
    Eip3009(String),
}

/// Reads `json` as typed data for the chain of id `chain_id`.
pub fn parse(json: &Value, chain_id: u64) -> Result<Typed, TypedError> {
    let data: TypedData =
        serde_json::from_value(json.clone()).map_err(|e| TypedError::Malformed(first_line(&e.to_string())))?;
    match data.domain.chain_id {
        None => return Err(TypedError::NoChainId),
        Some(found) if found != U256::from(chain_id) => {
            return Err(TypedError::WrongChain {
                found,
                expected: chain_id,
            });
        }
        Some(_) => {}
    }
    if matches!(
        data.primary_type.as_str(),
        "TransferWithAuthorization" | "ReceiveWithAuthorization"
    ) {
        return Err(TypedError::Eip3009(data.primary_type.clone()));
    }
    let digest = data
        .eip712_signing_hash()
        .map_err(|e| TypedError::Malformed(first_line(&e.to_string())))?;
    Ok(Typed {
        json: json.clone(),
        data,
        digest,
    })
}

fn first_line(text: &str) -> String {
    text.lines().next().unwrap_or_default().chars().take(200).collect()
}

/// One thing a signature grants: an allowance of `token` to `spender` (set to `amount`), or a one-time transfer of
/// up to `amount` that `spender` may make.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TypedGrant {
    pub token: Address,
    pub spender: Address,
    pub amount: U256,
    pub unlimited: bool,
    /// An allowance the token itself keeps (EIP-2612, DAI): its `allowance(owner, spender)` shows it.
    pub erc20_allowance: bool,
    /// A one-time transfer (Permit2 `PermitTransferFrom`), not an allowance.
    pub transfer: bool,
}

impl Typed {
    pub fn primary_type(&self) -> &str {
        &self.data.primary_type
    }

    /// What signing it grants; empty for typed data that is none of the permits §18 names.
    pub fn grants(&self) -> Vec<TypedGrant> {
        let m = &self.data.message;
        let address = |v: Option<&Value>| v.and_then(Value::as_str).and_then(|s| s.trim().parse::<Address>().ok());
        let amount = |v: Option<&Value>| v.and_then(parse_uint);
        let grant = |token: Option<Address>, spender: Option<Address>, value: Option<U256>, erc20, transfer| {
            let (token, spender, amount) = (token?, spender?, value?);
            Some(TypedGrant {
                token,
                spender,
                amount,
                unlimited: is_unlimited_amount(amount),
                erc20_allowance: erc20,
                transfer,
            })
        };
        let verifying = self.data.domain.verifying_contract;
        let spender = address(m.get("spender"));
        let detail = |d: &Value, transfer: bool| {
            let amount_of = amount(d.get("amount"));
            grant(address(d.get("token")), spender, amount_of, false, transfer)
        };
        let list = |v: Option<&Value>| v.and_then(Value::as_array).cloned().unwrap_or_default();
        match self.primary_type() {
            // DAI's permit: all or nothing.
            "Permit" if m.get("allowed").is_some() => {
                let allowed = m.get("allowed").and_then(Value::as_bool) == Some(true);
                let amount = if allowed { U256::MAX } else { U256::ZERO };
                grant(verifying, spender, Some(amount), true, false)
                    .map(|g| TypedGrant {
                        unlimited: allowed,
                        ..g
                    })
                    .into_iter()
                    .collect()
            }
            "Permit" => grant(verifying, spender, amount(m.get("value")), true, false)
                .into_iter()
                .collect(),
            "PermitSingle" => m.get("details").and_then(|d| detail(d, false)).into_iter().collect(),
            "PermitBatch" => list(m.get("details")).iter().filter_map(|d| detail(d, false)).collect(),
            "PermitTransferFrom" => m.get("permitted").and_then(|p| detail(p, true)).into_iter().collect(),
            "PermitBatchTransferFrom" => list(m.get("permitted"))
                .iter()
                .filter_map(|p| detail(p, true))
                .collect(),
            _ => Vec::new(),
        }
    }

    /// Whether signing grants an unlimited allowance (§18's forms, DAI's `allowed: true` included).
    pub fn grants_unlimited(&self) -> bool {
        self.grants().iter().any(|g| g.unlimited && !g.transfer)
            || super::typed_data_grants_unlimited(self.primary_type(), &self.data.message)
    }

    /// The typed data as the `calls` rules see it.
    pub fn facts(&self, agent: Address) -> TypedFacts<'_> {
        TypedFacts::of(&self.json, agent)
    }
}

/// Typed data as the rules see it: the domain and message as written (fields read by name, the message's by
/// dotted path), the primary type, and the agent's address for `"$agent"`.
#[derive(Debug, Clone, Copy)]
pub struct TypedFacts<'a> {
    pub domain: &'a Value,
    pub primary_type: &'a str,
    pub message: &'a Value,
    pub agent: Address,
}

impl<'a> TypedFacts<'a> {
    /// The facts of typed data as written (`{types, primaryType, domain, message}`).
    pub fn of(json: &'a Value, agent: Address) -> Self {
        TypedFacts {
            domain: json.get("domain").unwrap_or(&Value::Null),
            primary_type: json.get("primaryType").and_then(Value::as_str).unwrap_or_default(),
            message: json.get("message").unwrap_or(&Value::Null),
            agent,
        }
    }

    /// A field of the domain, or of the message by its dotted path, as an operand; `None` when absent or not a
    /// scalar (conditions never reach objects and arrays).
    pub fn operand(&self, in_domain: bool, path: &str) -> Option<Operand> {
        let root = if in_domain { self.domain } else { self.message };
        let value = path.split('.').try_fold(root, |v, part| match v {
            Value::Array(items) => items.get(part.parse::<usize>().ok()?),
            other => other.get(part),
        })?;
        loose(value)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const TOKEN: Address = Address::repeat_byte(0x70);
    const SPENDER: Address = Address::repeat_byte(0x5e);
    const OWNER: Address = Address::repeat_byte(0xa1);

    fn permit(chain_id: Value, primary: &str, message: Value, extra_types: Value) -> Value {
        let mut types = json!({
            "EIP712Domain": [
                {"name": "name", "type": "string"}, {"name": "version", "type": "string"},
                {"name": "chainId", "type": "uint256"}, {"name": "verifyingContract", "type": "address"}],
            "Permit": [
                {"name": "owner", "type": "address"}, {"name": "spender", "type": "address"},
                {"name": "value", "type": "uint256"}, {"name": "nonce", "type": "uint256"},
                {"name": "deadline", "type": "uint256"}]
        });
        if let (Some(types), Some(extra)) = (types.as_object_mut(), extra_types.as_object()) {
            types.extend(extra.clone());
        }
        json!({"types": types, "primaryType": primary,
            "domain": {"name": "USD Coin", "version": "2", "chainId": chain_id, "verifyingContract": TOKEN.to_string()},
            "message": message})
    }

    fn eip2612(value: &str) -> Value {
        permit(
            json!(8453),
            "Permit",
            json!({"owner": OWNER.to_string(), "spender": SPENDER.to_string(), "value": value, "nonce": "0",
                "deadline": "99999999999"}),
            json!({}),
        )
    }

    #[test]
    fn a_permit_is_tied_to_its_chain_and_grants_an_allowance_of_the_token_that_verifies_it() {
        let typed = parse(&eip2612("250000000"), 8453).expect("valid");
        assert_eq!(
            typed.grants(),
            vec![TypedGrant {
                token: TOKEN,
                spender: SPENDER,
                amount: U256::from(250_000_000u64),
                unlimited: false,
                erc20_allowance: true,
                transfer: false,
            }]
        );
        assert!(!typed.grants_unlimited());
        assert_eq!(typed.digest, typed.data.eip712_signing_hash().expect("hash"));
        assert_eq!(
            parse(&eip2612("1"), 1).expect_err("other chain"),
            TypedError::WrongChain {
                found: U256::from(8453),
                expected: 1
            }
        );
        let mut no_chain = eip2612("1");
        no_chain["domain"].as_object_mut().expect("object").remove("chainId");
        assert_eq!(parse(&no_chain, 8453).expect_err("no chain"), TypedError::NoChainId);
        let max = U256::MAX.to_string();
        assert!(parse(&eip2612(&max), 8453).expect("valid").grants_unlimited());
        assert!(matches!(
            parse(&json!({"types": {}}), 8453),
            Err(TypedError::Malformed(_))
        ));
    }

    #[test]
    fn eip3009_is_refused_and_dai_and_permit2_are_read_as_what_they_grant() {
        let auth = permit(
            json!(8453),
            "TransferWithAuthorization",
            json!({"from": OWNER.to_string()}),
            json!({"TransferWithAuthorization": [{"name": "from", "type": "address"}]}),
        );
        assert!(matches!(parse(&auth, 8453), Err(TypedError::Eip3009(_))));

        let dai = |allowed: bool| {
            let mut typed = permit(
                json!("8453"),
                "Permit",
                json!({"holder": OWNER.to_string(), "spender": SPENDER.to_string(), "nonce": 0, "expiry": 0,
                    "allowed": allowed}),
                json!({}),
            );
            typed["types"]["Permit"] = json!([
                {"name": "holder", "type": "address"}, {"name": "spender", "type": "address"},
                {"name": "nonce", "type": "uint256"}, {"name": "expiry", "type": "uint256"},
                {"name": "allowed", "type": "bool"}]);
            parse(&typed, 8453).expect("valid")
        };
        assert!(dai(true).grants_unlimited());
        assert!(!dai(false).grants_unlimited());
        assert_eq!(dai(false).grants()[0].amount, U256::ZERO);

        let single = permit(
            json!(8453),
            "PermitSingle",
            json!({"details": {"token": TOKEN.to_string(), "amount": "5", "expiration": 1, "nonce": 0},
                "spender": SPENDER.to_string(), "sigDeadline": "1"}),
            json!({"PermitSingle": [{"name": "details", "type": "PermitDetails"},
                    {"name": "spender", "type": "address"}, {"name": "sigDeadline", "type": "uint256"}],
                "PermitDetails": [{"name": "token", "type": "address"}, {"name": "amount", "type": "uint160"},
                    {"name": "expiration", "type": "uint48"}, {"name": "nonce", "type": "uint48"}]}),
        );
        let typed = parse(&single, 8453).expect("valid");
        let grants = typed.grants();
        assert_eq!(
            (grants[0].token, grants[0].spender, grants[0].amount),
            (TOKEN, SPENDER, U256::from(5))
        );
        assert!(!grants[0].erc20_allowance && !grants[0].transfer);
        let facts = typed.facts(OWNER);
        assert_eq!(
            facts.operand(false, "details.amount"),
            Some(Operand::Uint(U256::from(5)))
        );
        assert_eq!(facts.operand(true, "chainId"), Some(Operand::Uint(U256::from(8453))));
        assert_eq!(facts.operand(false, "details.missing"), None);
    }
}
