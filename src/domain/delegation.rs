//! On-chain delegations (§21: ERC-7710, the MetaMask Delegation Framework v1.3) without I/O: the delegation as the
//! framework's JSON form gives it, its EIP-712 hash and digest exactly as the `DelegationManager` computes them, the
//! caveats decoded per enforcer, the rule that the caveats together bound every execution, the limits they set,
//! and the calldata of the manager's functions (the redemption the money path signs, and the reads around it). The
//! caveats live in `terms`, the calldata in `calldata`.

use alloy::primitives::{Address, B256, Bytes, U256};
use alloy::sol_types::{Eip712Domain, SolStruct};
// The tests decode the calldata back through the parent's imports (`use super::*`).
#[cfg(test)]
use alloy::sol_types::{SolCall, SolValue};
use serde::Deserialize;

mod calldata;
mod terms;

pub use calldata::{
    available_answer, available_call, disabled_answer, disabled_call, execution, is_valid_signature_answer,
    is_valid_signature_call, redemption,
};
pub use terms::{
    AvailableRead, Enforcers, EnforcersByChain, Limit, LimitAsset, Terms, UnknownCaveat, conflicting_caveats,
    decode_caveats, is_bounded, limits, methods, targets, window,
};

/// `authority` of a delegation granted directly by its delegator (no chain of redelegation).
pub const ROOT_AUTHORITY: B256 = B256::repeat_byte(0xff);

/// The manager's EIP-712 domain name and version (its `NAME()` and `DOMAIN_VERSION()`).
pub const DOMAIN_NAME: &str = "DelegationManager";
pub const DOMAIN_VERSION: &str = "1";

/// ERC-1271's answer for a valid signature (`isValidSignature.selector`).
pub const ERC1271_MAGIC: [u8; 4] = [0x16, 0x26, 0xba, 0x7e];

/// The ERC-7579 execution mode of one call with the default exec type (reverts on failure): all zero.
pub const SINGLE_CALL_MODE: B256 = B256::ZERO;

/// The structs as the manager hashes them: `args` and `signature` are not signed.
mod signed {
    alloy::sol! {
        struct Caveat {
            address enforcer;
            bytes terms;
        }
        struct Delegation {
            address delegate;
            address delegator;
            bytes32 authority;
            Caveat[] caveats;
            uint256 salt;
        }
    }
}

alloy::sol! {
    /// The framework's functions and structs agentd calls, from the ABIs of npm `@metamask/delegation-abis` 2.0.0.
    interface IDelegationManager {
        struct Caveat {
            address enforcer;
            bytes terms;
            bytes args;
        }
        struct Delegation {
            address delegate;
            address delegator;
            bytes32 authority;
            Caveat[] caveats;
            uint256 salt;
            bytes signature;
        }
        function redeemDelegations(bytes[] permissionContexts, bytes32[] modes, bytes[] executionCallDatas) external;
        function disabledDelegations(bytes32 delegationHash) external view returns (bool isDisabled);
        function getDelegationHash(Delegation input) external pure returns (bytes32);
        function getDomainHash() external view returns (bytes32);
        function disableDelegation(Delegation delegation) external;
        function enableDelegation(Delegation delegation) external;
    }

    interface IERC1271 {
        function isValidSignature(bytes32 hash, bytes signature) external view returns (bytes4 magicValue);
    }

    /// `ERC20PeriodTransferEnforcer` and `NativeTokenPeriodTransferEnforcer`.
    interface IPeriodTransferEnforcer {
        function getAvailableAmount(bytes32 delegationHash, address delegationManager, bytes terms)
            external view returns (uint256 availableAmount, bool isNewPeriod, uint256 currentPeriod);
    }

    /// `ERC20TransferAmountEnforcer` and `NativeTokenTransferAmountEnforcer`: spent so far, by manager and hash.
    interface ISpentMapEnforcer {
        function spentMap(address delegationManager, bytes32 delegationHash) external view returns (uint256 amount);
    }
}

/// A delegation as the framework defines it, parsed from its JSON form.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Delegation {
    pub delegate: Address,
    pub delegator: Address,
    pub authority: B256,
    pub caveats: Vec<Caveat>,
    pub salt: U256,
    pub signature: Bytes,
}

/// One caveat: the enforcer contract, its terms (signed) and the redeemer's `args` (not signed).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Caveat {
    pub enforcer: Address,
    pub terms: Bytes,
    pub args: Bytes,
}

/// The framework's JSON form: byte strings 0x-hex, `salt` a decimal or 0x string.
#[derive(Debug, Clone, Deserialize)]
pub struct DelegationJson {
    pub delegate: String,
    pub delegator: String,
    pub authority: String,
    pub caveats: Vec<CaveatJson>,
    pub salt: serde_json::Value,
    pub signature: String,
}

#[derive(Debug, Clone, Deserialize)]
pub struct CaveatJson {
    pub enforcer: String,
    pub terms: String,
    #[serde(default)]
    pub args: Option<String>,
}

/// A field of the JSON form that does not parse: `(field, reason)`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldError(pub String, pub &'static str);

impl DelegationJson {
    /// The delegation it spells, or the first field that does not parse.
    pub fn parse(&self) -> Result<Delegation, FieldError> {
        let field = |name: &str, reason| FieldError(format!("delegation.{name}"), reason);
        let address = |name: &str, text: &str| {
            text.trim()
                .parse::<Address>()
                .map_err(|_| field(name, "must be a 0x address"))
        };
        let mut caveats = Vec::with_capacity(self.caveats.len());
        for (i, c) in self.caveats.iter().enumerate() {
            caveats.push(Caveat {
                enforcer: address(&format!("caveats[{i}].enforcer"), &c.enforcer)?,
                terms: hex_bytes(&c.terms)
                    .ok_or_else(|| field(&format!("caveats[{i}].terms"), "must be 0x-hex bytes"))?,
                args: match &c.args {
                    Some(args) => {
                        hex_bytes(args).ok_or_else(|| field(&format!("caveats[{i}].args"), "must be 0x-hex bytes"))?
                    }
                    None => Bytes::new(),
                },
            });
        }
        let authority = hex_bytes(&self.authority)
            .filter(|b| b.len() == 32)
            .map(|b| B256::from_slice(&b))
            .ok_or_else(|| field("authority", "must be 32 bytes of 0x-hex"))?;
        Ok(Delegation {
            delegate: address("delegate", &self.delegate)?,
            delegator: address("delegator", &self.delegator)?,
            authority,
            caveats,
            salt: parse_salt(&self.salt).ok_or_else(|| field("salt", "must be a decimal or 0x string"))?,
            signature: hex_bytes(&self.signature).ok_or_else(|| field("signature", "must be 0x-hex bytes"))?,
        })
    }
}

/// `0x`-prefixed hex (an even number of digits, `0x` alone is empty).
fn hex_bytes(text: &str) -> Option<Bytes> {
    let digits = text
        .trim()
        .strip_prefix("0x")
        .or_else(|| text.trim().strip_prefix("0X"))?;
    alloy::hex::decode(digits).ok().map(Bytes::from)
}

/// A decimal string, a 0x string (`0x` alone is 0, as the toolkit writes a zero salt) or a non-negative integer.
fn parse_salt(value: &serde_json::Value) -> Option<U256> {
    match value {
        serde_json::Value::String(text) => {
            let text = text.trim();
            match text.strip_prefix("0x").or_else(|| text.strip_prefix("0X")) {
                Some("") => Some(U256::ZERO),
                Some(hex) if hex.len() <= 64 => U256::from_str_radix(hex, 16).ok(),
                Some(_) => None,
                None if !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit()) => {
                    U256::from_str_radix(text, 10).ok()
                }
                None => None,
            }
        }
        serde_json::Value::Number(n) => n.as_u64().map(U256::from),
        _ => None,
    }
}

impl Delegation {
    fn signed(&self) -> signed::Delegation {
        signed::Delegation {
            delegate: self.delegate,
            delegator: self.delegator,
            authority: self.authority,
            caveats: self
                .caveats
                .iter()
                .map(|c| signed::Caveat {
                    enforcer: c.enforcer,
                    terms: c.terms.clone(),
                })
                .collect(),
            salt: self.salt,
        }
    }

    /// The framework's ABI tuple (for `redeemDelegations`, `disableDelegation`, `getDelegationHash`).
    pub fn abi(&self) -> IDelegationManager::Delegation {
        IDelegationManager::Delegation {
            delegate: self.delegate,
            delegator: self.delegator,
            authority: self.authority,
            caveats: self
                .caveats
                .iter()
                .map(|c| IDelegationManager::Caveat {
                    enforcer: c.enforcer,
                    terms: c.terms.clone(),
                    args: c.args.clone(),
                })
                .collect(),
            salt: self.salt,
            signature: self.signature.clone(),
        }
    }

    /// The delegation's hash (`getDelegationHash`): its EIP-712 struct hash. `signature` and `args` are not in it,
    /// so every spelling and signature of one grant has the same hash.
    pub fn hash(&self) -> B256 {
        self.signed().eip712_hash_struct()
    }

    /// What the delegator signs: the EIP-712 digest of the delegation under the manager's domain on `chain_id`.
    pub fn digest(&self, chain_id: u64, manager: Address) -> B256 {
        self.signed().eip712_signing_hash(&domain(chain_id, manager))
    }

    pub fn is_root(&self) -> bool {
        self.authority == ROOT_AUTHORITY
    }
}

/// The manager's EIP-712 domain on `chain_id`.
pub fn domain(chain_id: u64, manager: Address) -> Eip712Domain {
    alloy::sol_types::eip712_domain! {
        name: DOMAIN_NAME,
        version: DOMAIN_VERSION,
        chain_id: chain_id,
        verifying_contract: manager,
    }
}

/// The domain separator (`getDomainHash`).
pub fn domain_hash(chain_id: u64, manager: Address) -> B256 {
    domain(chain_id, manager).hash_struct()
}

/// Whether `code` lets the manager execute from the account: contract code, including an EIP-7702 designation
/// (`0xef0100 ‖ address`).
pub fn is_smart_account(code: &[u8]) -> bool {
    !code.is_empty()
}

/// The enforcers agentd reads, by their configuration names (§21).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Kind {
    Erc20PeriodTransfer,
    NativeTokenPeriodTransfer,
    Erc20TransferAmount,
    NativeTokenTransferAmount,
    ExactCalldata,
    AllowedTargets,
    AllowedMethods,
    ValueLte,
    Timestamp,
    LimitedCalls,
}

impl Kind {
    pub const ALL: [Kind; 10] = [
        Kind::Erc20PeriodTransfer,
        Kind::NativeTokenPeriodTransfer,
        Kind::Erc20TransferAmount,
        Kind::NativeTokenTransferAmount,
        Kind::ExactCalldata,
        Kind::AllowedTargets,
        Kind::AllowedMethods,
        Kind::ValueLte,
        Kind::Timestamp,
        Kind::LimitedCalls,
    ];

    /// The configuration name (`DELEGATION_ENFORCERS_<CHAIN>`) and the `kind` of a caveat in a view.
    pub fn name(self) -> &'static str {
        match self {
            Kind::Erc20PeriodTransfer => "erc20_period_transfer",
            Kind::NativeTokenPeriodTransfer => "native_token_period_transfer",
            Kind::Erc20TransferAmount => "erc20_transfer_amount",
            Kind::NativeTokenTransferAmount => "native_token_transfer_amount",
            Kind::ExactCalldata => "exact_calldata",
            Kind::AllowedTargets => "allowed_targets",
            Kind::AllowedMethods => "allowed_methods",
            Kind::ValueLte => "value_lte",
            Kind::Timestamp => "timestamp",
            Kind::LimitedCalls => "limited_calls",
        }
    }

    /// The framework's contract name.
    pub fn contract(self) -> &'static str {
        match self {
            Kind::Erc20PeriodTransfer => "ERC20PeriodTransferEnforcer",
            Kind::NativeTokenPeriodTransfer => "NativeTokenPeriodTransferEnforcer",
            Kind::Erc20TransferAmount => "ERC20TransferAmountEnforcer",
            Kind::NativeTokenTransferAmount => "NativeTokenTransferAmountEnforcer",
            Kind::ExactCalldata => "ExactCalldataEnforcer",
            Kind::AllowedTargets => "AllowedTargetsEnforcer",
            Kind::AllowedMethods => "AllowedMethodsEnforcer",
            Kind::ValueLte => "ValueLteEnforcer",
            Kind::Timestamp => "TimestampEnforcer",
            Kind::LimitedCalls => "LimitedCallsEnforcer",
        }
    }

    /// Whether the enforcer keeps state per manager and delegation hash (§21 `caveat_conflict`): a period enforcer's
    /// `periodicAllowances[manager][hash]` is set by whichever of its caveats runs first and ignores the others'
    /// amount and period; the transfer-amount enforcers' `spentMap[manager][hash]` and `LimitedCallsEnforcer`'s
    /// `callCounts[manager][hash]` add every redemption once per caveat. Two caveats on one such enforcer cannot be
    /// mirrored.
    pub fn is_stateful(self) -> bool {
        match self {
            Kind::Erc20PeriodTransfer
            | Kind::NativeTokenPeriodTransfer
            | Kind::Erc20TransferAmount
            | Kind::NativeTokenTransferAmount
            | Kind::LimitedCalls => true,
            Kind::ExactCalldata | Kind::AllowedTargets | Kind::AllowedMethods | Kind::ValueLte | Kind::Timestamp => {
                false
            }
        }
    }

    pub fn from_name(name: &str) -> Option<Kind> {
        Kind::ALL.into_iter().find(|k| k.name() == name)
    }
}

/// The framework's v1.3 deployments (npm `@metamask/delegation-deployments` 2.0.0, `DELEGATOR_CONTRACTS["1.3.0"]`):
/// the same addresses on every chain it lists, which include every chain of agentd's registry.
pub mod deployments {
    use super::Kind;
    use alloy::primitives::{Address, address};

    /// Registry chain ids where the framework v1.3 is deployed.
    pub const CHAIN_IDS: &[u64] = &[1, 8453, 10, 42161, 137, 11155111, 84532];

    pub const DELEGATION_MANAGER: Address = address!("0xdb9B1e94B5b69Df7e401DDbedE43491141047dB3");

    /// The canonical ERC-4337 EntryPoint v0.7 (§22's default `ENTRY_POINT_<CHAIN>` on every chain).
    pub const ENTRY_POINT_V07: Address = address!("0x0000000071727De22E5E9d8BAf0edAc6f37da032");

    /// The framework's v1.3 `EIP7702StatelessDeleGator` implementation (npm `@metamask/delegation-deployments`
    /// 2.0.0 `EIP7702StatelessDeleGatorImpl`), §22's default `ACCOUNT_IMPLEMENTATION_<CHAIN>` on `CHAIN_IDS`.
    pub const EIP7702_STATELESS_DELEGATOR: Address = address!("0x63c0c19a282a1B52b07dD5a65b58948A07DAE32B");

    /// The enforcer of `kind` on those chains.
    pub fn enforcer(kind: Kind) -> Address {
        match kind {
            Kind::Erc20PeriodTransfer => address!("0x474e3Ae7E169e940607cC624Da8A15Eb120139aB"),
            Kind::NativeTokenPeriodTransfer => address!("0x9BC0FAf4Aca5AE429F4c06aEEaC517520CB16BD9"),
            Kind::Erc20TransferAmount => address!("0xf100b0819427117EcF76Ed94B358B1A5b5C6D2Fc"),
            Kind::NativeTokenTransferAmount => address!("0xF71af580b9c3078fbc2BBF16FbB8EEd82b330320"),
            Kind::ExactCalldata => address!("0x99F2e9bF15ce5eC84685604836F71aB835DBBdED"),
            Kind::AllowedTargets => address!("0x7F20f61b1f09b08D970938F6fa563634d65c4EeB"),
            Kind::AllowedMethods => address!("0x2c21fD0Cb9DC8445CB3fb0DC5E7Bb0Aca01842B5"),
            Kind::ValueLte => address!("0x92Bf12322527cAA612fd31a0e810472BBB106A8F"),
            Kind::Timestamp => address!("0x1046bb45C8d673d4ea75321280DB34899413c069"),
            Kind::LimitedCalls => address!("0x04658B29F6b82ed55274221a06Fc97D318E25416"),
        }
    }
}

/// A registered delegation's status. `Expired` is never stored: it is read from the `timestamp` caveat.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    Active,
    Revoked,
    Expired,
    Removed,
}

impl Status {
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Active => "active",
            Status::Revoked => "revoked",
            Status::Expired => "expired",
            Status::Removed => "removed",
        }
    }

    pub fn parse(text: &str) -> Option<Status> {
        [Status::Active, Status::Revoked, Status::Expired, Status::Removed]
            .into_iter()
            .find(|s| s.as_str() == text)
    }

    /// The status shown at `now` (unix seconds): a stored `active` past the window's end is `expired`.
    pub fn at(self, expires_at: Option<u64>, now: u64) -> Status {
        match (self, expires_at) {
            (Status::Active, Some(end)) if now >= end => Status::Expired,
            (status, _) => status,
        }
    }
}

/// What is left of a limit: the chain's figure less this service's redemptions the latest block has not included
/// yet (`pending`, by the money path's records), never below zero.
pub fn available(on_chain: U256, pending: U256) -> U256 {
    on_chain.saturating_sub(pending)
}

#[cfg(test)]
mod tests;
