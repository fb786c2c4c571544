//! EIP-712 typed data an agent is asked to sign (§18 `sign-typed-data`), judged exactly as it is signed (§18,
//! "Counting that holds against a hostile agent"):
//!
//! - its size is bounded before alloy reads it (at most 64 types, structs and arrays nested at most 16 deep, 1,024
//!   values), by walks that use no recursion, so no JSON can exhaust a worker's stack;
//! - a message key that its type does not declare is refused, at any depth, and so is a domain key alloy's domain
//!   does not hash;
//! - every value a rule or a count reads comes from the one parse that makes the digest (alloy's coercion of the
//!   message by its declared types, and alloy's domain): an integer written in hex, octal, with `_` or as a JSON
//!   number is that integer, a boolean written as a string that boolean;
//! - what signing grants is decided by the declared types (the type string the verifying contract hashes), never
//!   by the keys the message holds: EIP-2612 and DAI permits as allowances the token keeps, Permit2's
//!   `PermitSingle` / `PermitBatch` as allowances Permit2 keeps, its `PermitTransferFrom` and
//!   `PermitBatchTransferFrom` (witness forms included) as transfers the spender may make;
//! - Permit2-domain or `Permit…` typed data the service does not decode, a delegation of the MetaMask Delegation
//!   Framework, and typed data the agent's own account would honour (§22) are refused whatever the rules
//!   (`forbidden`). EIP-3009 authorizations are refused: x402 pays them.

use alloy::primitives::{Address, B256, U256, address};
use alloy_dyn_abi::{DynSolValue, Eip712Domain, TypedData};
use serde_json::{Map, Value};

use super::condition::{Operand, loose, operand_of};
use super::unlimited::{is_unlimited_amount, is_unlimited_permit2_amount};

/// Why typed data is refused whatever the `calls` rules say (§18); the policy's rule of the same name
/// (`PolicyRule::DelegationSignature`, `PolicyRule::PermitNotUnderstood`) is what the refusal reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Forbidden {
    /// A delegation of the Delegation Framework's authority, typed data a `DelegationManager` verifies, or typed
    /// data the agent's own account would honour (§22: its address as the verifying contract, or a
    /// `PackedUserOperation` declared — the account executes any operation its key signs).
    DelegationSignature,
    /// Permit2-domain or `Permit…` typed data the service does not decode.
    PermitNotUnderstood,
}

/// Permit2's canonical deployment, the same address on every chain (Uniswap's published deployments).
pub const PERMIT2: Address = address!("0x000000000022D473030F116dDEE9F6B43aC78BA3");

/// At most this many types (§18).
pub const MAX_TYPES: usize = 64;
/// Structs and arrays nested at most this deep, each a level (§18).
pub const MAX_DEPTH: usize = 16;
/// At most this many values in the message, and this many fields declared in all (§18).
pub const MAX_VALUES: usize = 1024;

/// The keys of a domain alloy hashes (`EIP712Domain`'s fields).
const DOMAIN_KEYS: [&str; 5] = ["name", "version", "chainId", "verifyingContract", "salt"];

/// Typed data that may be judged and signed.
#[derive(Debug, Clone)]
pub struct Typed {
    /// As the request wrote it (what is stored and signed again on approval); a JSON string holding the typed data
    /// is stored as the object it holds.
    pub json: Value,
    pub data: TypedData,
    /// The message as the digest encodes it: alloy's coercion by the declared types.
    pub message: DynSolValue,
    /// The EIP-712 hash that is signed.
    pub digest: B256,
    /// What the declared types make it.
    pub form: Form,
    /// What signing it grants, read once from the coerced message (`read` refuses typed data whose grants it cannot
    /// read).
    pub grants: Vec<TypedGrant>,
}

/// What typed data is, by its declared primary type and fields (the type string its verifier hashes).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Form {
    /// EIP-2612 `Permit(owner, spender, value, nonce, deadline)`.
    Eip2612,
    /// DAI's `Permit(holder, spender, nonce, expiry, allowed)`.
    Dai,
    /// Permit2 `PermitSingle` (one allowance) or `PermitBatch` (several).
    Permit2Allowance { batch: bool },
    /// Permit2 `PermitTransferFrom` / `PermitBatchTransferFrom`, with or without a witness.
    Permit2Transfer { batch: bool },
    /// The MetaMask Delegation Framework's `Delegation`.
    Delegation,
    /// Anything else: judged by the rules alone, granting nothing the service counts.
    Other,
}

/// Why typed data is refused before any rule reads it (422).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TypedError {
    #[error("typed_data is not EIP-712 typed data ({{types, primaryType, domain, message}}): {0}")]
    Malformed(String),
    #[error("typed_data is too large: {0}")]
    TooLarge(String),
    #[error("typed_data.{0} is not declared by its type")]
    Undeclared(String),
    #[error("typed_data.domain.chainId is required: one key signs for every chain")]
    NoChainId,
    #[error("typed_data.domain.chainId is {found}, but the request's chain has id {expected}")]
    WrongChain { found: U256, expected: u64 },
    #[error("{0} is an EIP-3009 authorization: those are paid through x402 only")]
    Eip3009(String),
    #[error("typed_data: {0}")]
    Unreadable(String),
}

/// Reads `json` as typed data for the chain of id `chain_id`.
pub fn parse(json: &Value, chain_id: u64) -> Result<Typed, TypedError> {
    let typed = read(json)?;
    match typed.data.domain.chain_id {
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
        typed.data.primary_type.as_str(),
        "TransferWithAuthorization" | "ReceiveWithAuthorization"
    ) {
        return Err(TypedError::Eip3009(typed.data.primary_type.clone()));
    }
    Ok(typed)
}

/// Reads typed data whatever its chain: bounded, checked for undeclared keys, coerced and hashed.
pub fn read(json: &Value) -> Result<Typed, TypedError> {
    let json = match json {
        // alloy also takes the typed data as a JSON string: it is read, bounded and stored as the object it holds.
        Value::String(text) => {
            serde_json::from_str(text).map_err(|e| TypedError::Malformed(first_line(&e.to_string())))?
        }
        other => other.clone(),
    };
    check_shape(&json)?;
    let data: TypedData =
        serde_json::from_value(json.clone()).map_err(|e| TypedError::Malformed(first_line(&e.to_string())))?;
    let message = data
        .coerce()
        .map_err(|e| TypedError::Malformed(first_line(&e.to_string())))?;
    let digest = data
        .eip712_signing_hash()
        .map_err(|e| TypedError::Malformed(first_line(&e.to_string())))?;
    let form = form_of(&json, &data.primary_type);
    let mut typed = Typed {
        json,
        data,
        message,
        digest,
        form,
        grants: Vec::new(),
    };
    // A value a count needs that cannot be read is a refusal, never "grants nothing".
    typed.grants = typed.read_grants()?;
    Ok(typed)
}

fn first_line(text: &str) -> String {
    text.lines().next().unwrap_or_default().chars().take(200).collect()
}

/// A declared type: `(field name, field type)` in order.
type Fields<'a> = Vec<(&'a str, &'a str)>;

/// The declared types of `json` (`types`), as written.
fn declared(json: &Value) -> Result<Vec<(&str, Fields<'_>)>, TypedError> {
    let malformed = |what: &str| TypedError::Malformed(what.to_string());
    let types = json
        .get("types")
        .and_then(Value::as_object)
        .ok_or_else(|| malformed("types must be an object"))?;
    if types.len() > MAX_TYPES {
        return Err(TypedError::TooLarge(format!(
            "{} types (at most {MAX_TYPES})",
            types.len()
        )));
    }
    let mut all = Vec::with_capacity(types.len());
    let mut total = 0usize;
    for (name, fields) in types {
        let fields = fields
            .as_array()
            .ok_or_else(|| malformed("each type must be a list of {name, type}"))?;
        total += fields.len();
        if total > MAX_VALUES {
            return Err(TypedError::TooLarge(format!("more than {MAX_VALUES} fields declared")));
        }
        let mut list = Vec::with_capacity(fields.len());
        for field in fields {
            let (Some(n), Some(t)) = (
                field.get("name").and_then(Value::as_str),
                field.get("type").and_then(Value::as_str),
            ) else {
                return Err(malformed("each field must be {name, type}"));
            };
            list.push((n, t));
        }
        all.push((name.as_str(), list));
    }
    Ok(all)
}

/// A type as written split into its root and its array dimensions (`Foo[][2]` → `Foo`, 2), without recursion.
fn split_type(ty: &str) -> (&str, usize) {
    let mut root = ty.trim();
    let mut dims = 0;
    while let Some(open) = root.strip_suffix(']').and_then(|r| r.rfind('[')) {
        root = &root[..open];
        dims += 1;
    }
    (root, dims)
}

/// Bounds the typed data before alloy reads it and refuses keys no type declares; iterative throughout.
fn check_shape(json: &Value) -> Result<(), TypedError> {
    let types = declared(json)?;
    let index = |name: &str| types.iter().position(|(n, _)| *n == name);
    // Depth of each type, relaxed until it settles: a cycle (a type that contains itself) never settles and passes
    // the bound, as does any nesting deeper than it.
    let mut depth = vec![0usize; types.len()];
    loop {
        let mut changed = false;
        for (i, (_, fields)) in types.iter().enumerate() {
            let inner = fields
                .iter()
                .map(|(_, ty)| {
                    let (root, dims) = split_type(ty);
                    dims + index(root).map_or(0, |j| depth[j])
                })
                .max()
                .unwrap_or(0);
            let d = inner + 1;
            if d > MAX_DEPTH {
                return Err(TypedError::TooLarge(format!(
                    "types nest deeper than {MAX_DEPTH} levels (or contain themselves)"
                )));
            }
            if d != depth[i] {
                depth[i] = d;
                changed = true;
            }
        }
        if !changed {
            break;
        }
    }
    if let Some(domain) = json.get("domain") {
        let domain = domain
            .as_object()
            .ok_or_else(|| TypedError::Malformed("domain must be an object".into()))?;
        if let Some(key) = domain.keys().find(|k| !DOMAIN_KEYS.contains(&k.as_str())) {
            return Err(TypedError::Undeclared(format!("domain.{key}")));
        }
    }
    let primary = json.get("primaryType").and_then(Value::as_str).unwrap_or_default();
    let Some(message) = json.get("message") else {
        return Ok(());
    };
    // The message walked along its types: every node counted, every object's keys declared.
    let mut stack: Vec<(&Value, &str, String, usize)> = vec![(message, primary, "message".to_string(), 1)];
    let mut values = 0usize;
    while let Some((value, ty, path, level)) = stack.pop() {
        values += 1;
        if values > MAX_VALUES {
            return Err(TypedError::TooLarge(format!("more than {MAX_VALUES} values")));
        }
        if level > MAX_DEPTH + 1 {
            return Err(TypedError::TooLarge(format!("nested deeper than {MAX_DEPTH} levels")));
        }
        let (root, dims) = split_type(ty);
        if dims > 0 {
            let element = ty.trim()[..ty.trim().rfind('[').unwrap_or(0)].trim_end();
            if let Some(items) = value.as_array() {
                for (i, item) in items.iter().enumerate() {
                    stack.push((item, element, format!("{path}.{i}"), level + 1));
                }
            }
            continue;
        }
        let (Some(i), Some(object)) = (index(root), value.as_object()) else {
            // A primitive, or a shape alloy's coercion refuses.
            continue;
        };
        let fields = &types[i].1;
        if let Some(key) = undeclared(object, fields) {
            return Err(TypedError::Undeclared(format!("{path}.{key}")));
        }
        for (name, ty) in fields {
            if let Some(v) = object.get(*name) {
                stack.push((v, ty, format!("{path}.{name}"), level + 1));
            }
        }
    }
    Ok(())
}

fn undeclared<'a>(object: &'a Map<String, Value>, fields: &[(&str, &str)]) -> Option<&'a str> {
    object
        .keys()
        .map(String::as_str)
        .find(|k| !fields.iter().any(|(name, _)| name == k))
}

/// The declared fields of `name`, with their types as written.
fn fields_of<'a>(json: &'a Value, name: &str) -> Option<Vec<(&'a str, &'a str)>> {
    json.get("types")?
        .get(name)?
        .as_array()?
        .iter()
        .map(|f| Some((f.get("name")?.as_str()?, f.get("type")?.as_str()?.trim())))
        .collect()
}

fn same(fields: &[(&str, &str)], expected: &[(&str, &str)]) -> bool {
    fields.len() == expected.len() && fields.iter().zip(expected).all(|(a, b)| a == b)
}

const EIP2612: [(&str, &str); 5] = [
    ("owner", "address"),
    ("spender", "address"),
    ("value", "uint256"),
    ("nonce", "uint256"),
    ("deadline", "uint256"),
];
const DAI: [(&str, &str); 5] = [
    ("holder", "address"),
    ("spender", "address"),
    ("nonce", "uint256"),
    ("expiry", "uint256"),
    ("allowed", "bool"),
];
const PERMIT_DETAILS: [(&str, &str); 4] = [
    ("token", "address"),
    ("amount", "uint160"),
    ("expiration", "uint48"),
    ("nonce", "uint48"),
];
const TOKEN_PERMISSIONS: [(&str, &str); 2] = [("token", "address"), ("amount", "uint256")];
const DELEGATION: [(&str, &str); 5] = [
    ("delegate", "address"),
    ("delegator", "address"),
    ("authority", "bytes32"),
    ("caveats", "Caveat[]"),
    ("salt", "uint256"),
];

/// What the declared types make the typed data (see `Form`).
fn form_of(json: &Value, primary: &str) -> Form {
    let fields = |name: &str| fields_of(json, name).unwrap_or_default();
    if json
        .get("types")
        .and_then(Value::as_object)
        .is_some_and(|t| t.contains_key("Delegation") && same(&fields("Delegation"), &DELEGATION))
    {
        return Form::Delegation;
    }
    let own = fields(primary);
    let transfer_head = |list: &'static str| -> [(&str, &str); 4] {
        [
            ("permitted", list),
            ("spender", "address"),
            ("nonce", "uint256"),
            ("deadline", "uint256"),
        ]
    };
    let permissions = || same(&fields("TokenPermissions"), &TOKEN_PERMISSIONS);
    let details = || same(&fields("PermitDetails"), &PERMIT_DETAILS);
    match primary {
        "Permit" if same(&own, &EIP2612) => Form::Eip2612,
        "Permit" if same(&own, &DAI) => Form::Dai,
        "PermitSingle"
            if details()
                && same(
                    &own,
                    &[
                        ("details", "PermitDetails"),
                        ("spender", "address"),
                        ("sigDeadline", "uint256"),
                    ],
                ) =>
        {
            Form::Permit2Allowance { batch: false }
        }
        "PermitBatch"
            if details()
                && same(
                    &own,
                    &[
                        ("details", "PermitDetails[]"),
                        ("spender", "address"),
                        ("sigDeadline", "uint256"),
                    ],
                ) =>
        {
            Form::Permit2Allowance { batch: true }
        }
        "PermitTransferFrom" if permissions() && same(&own, &transfer_head("TokenPermissions")) => {
            Form::Permit2Transfer { batch: false }
        }
        "PermitBatchTransferFrom" if permissions() && same(&own, &transfer_head("TokenPermissions[]")) => {
            Form::Permit2Transfer { batch: true }
        }
        // Permit2 hashes the plain fields, then the witness the caller names (one more field of any type).
        "PermitWitnessTransferFrom"
            if permissions() && own.len() == 5 && same(&own[..4], &transfer_head("TokenPermissions")) =>
        {
            Form::Permit2Transfer { batch: false }
        }
        "PermitBatchWitnessTransferFrom"
            if permissions() && own.len() == 5 && same(&own[..4], &transfer_head("TokenPermissions[]")) =>
        {
            Form::Permit2Transfer { batch: true }
        }
        _ => Form::Other,
    }
}

/// What a grant is: an allowance kept by `holder` (the token itself, or Permit2), or a one-time transfer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GrantKind {
    /// An allowance the token keeps (EIP-2612, DAI): its `allowance(owner, spender)` shows it.
    TokenAllowance,
    /// An allowance Permit2 keeps (`PermitSingle`, `PermitBatch`): Permit2's `allowance(owner, token, spender)`.
    Permit2Allowance,
    /// A one-time transfer of up to the amount (Permit2 `PermitTransferFrom`, batch and witness forms).
    Transfer,
}

/// One thing a signature grants: an allowance of `token` to `spender` set to `amount`, or a one-time transfer of
/// up to `amount` that `spender` may make.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TypedGrant {
    pub token: Address,
    pub spender: Address,
    pub amount: U256,
    pub unlimited: bool,
    pub kind: GrantKind,
    /// The contract that keeps the allowance or makes the transfer: the token, or Permit2.
    pub holder: Address,
}

impl TypedGrant {
    pub fn is_transfer(&self) -> bool {
        self.kind == GrantKind::Transfer
    }

    /// The allowance it names in the ledger's terms.
    pub fn pair(&self) -> super::ledger::Pair {
        super::ledger::Pair {
            holder: self.holder,
            token: self.token,
            spender: self.spender,
        }
    }
}

/// A field of a coerced struct, by its declared name.
fn field<'a>(value: &'a DynSolValue, name: &str) -> Option<&'a DynSolValue> {
    match value {
        DynSolValue::CustomStruct { prop_names, tuple, .. } => {
            prop_names.iter().position(|p| p == name).and_then(|i| tuple.get(i))
        }
        _ => None,
    }
}

impl Typed {
    pub fn primary_type(&self) -> &str {
        &self.data.primary_type
    }

    /// The contract that verifies the signature (the transfer's `to`); the zero address when the domain names none.
    pub fn verifying(&self) -> Address {
        self.data.domain.verifying_contract.unwrap_or_default()
    }

    /// What signing it grants, read from the coerced message; empty for typed data that is none of the permits §18
    /// names. A permit whose values cannot be read is an error (a refusal), never "grants nothing".
    fn read_grants(&self) -> Result<Vec<TypedGrant>, TypedError> {
        let unreadable = |what: &str| TypedError::Unreadable(format!("{} of {}", what, self.primary_type()));
        let address = |v: Option<&DynSolValue>, what: &str| match v {
            Some(DynSolValue::Address(a)) => Ok(*a),
            _ => Err(unreadable(what)),
        };
        let uint = |v: Option<&DynSolValue>, what: &str| match v {
            Some(DynSolValue::Uint(u, _)) => Ok(*u),
            _ => Err(unreadable(what)),
        };
        let m = &self.message;
        let holder = match self.data.domain.verifying_contract {
            Some(contract) => contract,
            None if matches!(self.form, Form::Eip2612 | Form::Dai) => {
                return Err(unreadable("domain.verifyingContract (the token)"));
            }
            None => PERMIT2,
        };
        let list = |v: Option<&DynSolValue>, what: &str| match v {
            Some(DynSolValue::Array(items) | DynSolValue::FixedArray(items)) => Ok(items.clone()),
            _ => Err(unreadable(what)),
        };
        Ok(match self.form {
            Form::Eip2612 => {
                let amount = uint(field(m, "value"), "value")?;
                vec![TypedGrant {
                    token: holder,
                    spender: address(field(m, "spender"), "spender")?,
                    amount,
                    unlimited: is_unlimited_amount(amount),
                    kind: GrantKind::TokenAllowance,
                    holder,
                }]
            }
            // DAI's permit: all or nothing.
            Form::Dai => {
                let allowed = match field(m, "allowed") {
                    Some(DynSolValue::Bool(b)) => *b,
                    _ => return Err(unreadable("allowed")),
                };
                vec![TypedGrant {
                    token: holder,
                    spender: address(field(m, "spender"), "spender")?,
                    amount: if allowed { U256::MAX } else { U256::ZERO },
                    unlimited: allowed,
                    kind: GrantKind::TokenAllowance,
                    holder,
                }]
            }
            Form::Permit2Allowance { batch } => {
                let spender = address(field(m, "spender"), "spender")?;
                let details = match batch {
                    true => list(field(m, "details"), "details")?,
                    false => vec![field(m, "details").cloned().ok_or_else(|| unreadable("details"))?],
                };
                details
                    .iter()
                    .map(|d| {
                        let amount = uint(field(d, "amount"), "details.amount")?;
                        Ok(TypedGrant {
                            token: address(field(d, "token"), "details.token")?,
                            spender,
                            amount,
                            unlimited: is_unlimited_permit2_amount(amount),
                            kind: GrantKind::Permit2Allowance,
                            holder,
                        })
                    })
                    .collect::<Result<_, _>>()?
            }
            Form::Permit2Transfer { batch } => {
                let spender = address(field(m, "spender"), "spender")?;
                let permitted = match batch {
                    true => list(field(m, "permitted"), "permitted")?,
                    false => vec![field(m, "permitted").cloned().ok_or_else(|| unreadable("permitted"))?],
                };
                permitted
                    .iter()
                    .map(|p| {
                        Ok(TypedGrant {
                            token: address(field(p, "token"), "permitted.token")?,
                            spender,
                            amount: uint(field(p, "amount"), "permitted.amount")?,
                            unlimited: false,
                            kind: GrantKind::Transfer,
                            holder,
                        })
                    })
                    .collect::<Result<_, _>>()?
            }
            Form::Delegation | Form::Other => Vec::new(),
        })
    }

    /// Whether signing grants an unlimited allowance (§18's amounts, DAI's `allowed: true`).
    pub fn grants_unlimited(&self) -> bool {
        self.grants.iter().any(|g| g.unlimited && !g.is_transfer())
    }

    /// Why it is refused whatever the `calls` rules say: a delegation signature for a delegation of the framework,
    /// a domain verified by a configured `DelegationManager` (`managers`, every chain's) or by the agent's own
    /// account (`account`, its address), or a `PackedUserOperation` declared among the types (§22); then a permit
    /// not understood for Permit2-domain or `Permit…` typed data the service does not decode.
    pub fn forbidden(&self, managers: &[Address], account: Address) -> Option<Forbidden> {
        let verifying = self.data.domain.verifying_contract;
        let verified_by = |v: Address| v == account || managers.contains(&v);
        if self.form == Form::Delegation || verifying.is_some_and(verified_by) || self.declares_user_operation() {
            return Some(Forbidden::DelegationSignature);
        }
        let undecoded = matches!(self.form, Form::Other | Form::Delegation);
        if undecoded && (verifying == Some(PERMIT2) || self.primary_type().starts_with("Permit")) {
            return Some(Forbidden::PermitNotUnderstood);
        }
        None
    }

    /// Whether its types declare ERC-4337 v0.7's `PackedUserOperation`, the struct an account hashes to approve an
    /// operation (whichever type is primary).
    fn declares_user_operation(&self) -> bool {
        self.json
            .get("types")
            .and_then(Value::as_object)
            .is_some_and(|types| types.contains_key("PackedUserOperation"))
    }

    /// The typed data as the `calls` rules see it.
    pub fn facts(&self, agent: Address) -> TypedFacts<'_> {
        TypedFacts {
            domain: &self.data.domain,
            primary_type: self.primary_type(),
            message: &self.message,
            agent,
        }
    }
}

/// Typed data as the rules see it: the domain alloy hashes, the primary type, the message as the digest encodes it
/// (fields read by name, nested ones by dotted path, array items by index), and the agent's address for `"$agent"`.
#[derive(Debug, Clone, Copy)]
pub struct TypedFacts<'a> {
    pub domain: &'a Eip712Domain,
    pub primary_type: &'a str,
    pub message: &'a DynSolValue,
    pub agent: Address,
}

impl TypedFacts<'_> {
    /// A field of the domain, or of the message by its dotted path, as an operand; `None` when absent or not a
    /// scalar (conditions never reach structs and arrays). Integers, addresses, booleans and bytes are the values
    /// hashed; a string is read by its text as a condition's operand is.
    pub fn operand(&self, in_domain: bool, path: &str) -> Option<Operand> {
        if in_domain {
            let d = self.domain;
            let text = |s: &str| loose(&Value::String(s.to_string()));
            return match path {
                "name" => d.name.as_deref().and_then(text),
                "version" => d.version.as_deref().and_then(text),
                "chainId" => d.chain_id.map(Operand::Uint),
                "verifyingContract" => d.verifying_contract.map(Operand::Address),
                "salt" => d.salt.map(|s| Operand::Bytes(s.to_vec())),
                _ => None,
            };
        }
        let value = path.split('.').try_fold(self.message, |v, part| match v {
            DynSolValue::Array(items) | DynSolValue::FixedArray(items) => items.get(part.parse::<usize>().ok()?),
            other => field(other, part),
        })?;
        match value {
            DynSolValue::String(s) => loose(&Value::String(s.clone())),
            other => operand_of(other),
        }
    }
}

#[cfg(test)]
mod tests;
