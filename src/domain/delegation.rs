//! On-chain delegations (§21: ERC-7710, the MetaMask Delegation Framework v1.3) without I/O: the delegation as the
//! framework's JSON form gives it, its EIP-712 hash and digest exactly as the `DelegationManager` computes them, the
//! caveats decoded per enforcer, the rule that the caveats together bound every execution, the limits they set,
//! and the calldata of the manager's functions (the redemption the money path signs, and the reads around it).

use alloy::primitives::{Address, B256, Bytes, FixedBytes, U256};
use alloy::sol_types::{Eip712Domain, SolCall, SolStruct, SolValue};
use serde::Deserialize;

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

/// A caveat's terms read as its enforcer reads them (the layouts of the enforcers' `getTermsInfo`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Terms {
    /// `token(20) ‖ periodAmount(32) ‖ periodDuration(32) ‖ startDate(32)`.
    Erc20PeriodTransfer {
        token: Address,
        amount: U256,
        period: u64,
        start: u64,
    },
    /// `periodAmount(32) ‖ periodDuration(32) ‖ startDate(32)`.
    NativeTokenPeriodTransfer { amount: U256, period: u64, start: u64 },
    /// `token(20) ‖ maxTokens(32)`.
    Erc20TransferAmount { token: Address, amount: U256 },
    /// `allowance(32)`.
    NativeTokenTransferAmount { amount: U256 },
    /// The calldata allowed, whole (empty: plain native sends only).
    ExactCalldata { calldata: Bytes },
    /// `address(20)` repeated, at least one.
    AllowedTargets { targets: Vec<Address> },
    /// `bytes4` repeated, at least one.
    AllowedMethods { methods: Vec<FixedBytes<4>> },
    /// `value(32)`: the most an execution may carry.
    ValueLte { value: U256 },
    /// `after(16) ‖ before(16)` (uint128 each, 0 = none; both exclusive).
    Timestamp { after: u64, before: u64 },
    /// `limit(32)`: redemptions in all.
    LimitedCalls { limit: U256 },
}

/// Why a caveat cannot be read: its enforcer is not configured, or its terms are not what the enforcer accepts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnknownCaveat {
    pub index: usize,
    pub reason: String,
}

impl Terms {
    pub fn kind(&self) -> Kind {
        match self {
            Terms::Erc20PeriodTransfer { .. } => Kind::Erc20PeriodTransfer,
            Terms::NativeTokenPeriodTransfer { .. } => Kind::NativeTokenPeriodTransfer,
            Terms::Erc20TransferAmount { .. } => Kind::Erc20TransferAmount,
            Terms::NativeTokenTransferAmount { .. } => Kind::NativeTokenTransferAmount,
            Terms::ExactCalldata { .. } => Kind::ExactCalldata,
            Terms::AllowedTargets { .. } => Kind::AllowedTargets,
            Terms::AllowedMethods { .. } => Kind::AllowedMethods,
            Terms::ValueLte { .. } => Kind::ValueLte,
            Terms::Timestamp { .. } => Kind::Timestamp,
            Terms::LimitedCalls { .. } => Kind::LimitedCalls,
        }
    }

    /// Reads `terms` as the enforcer of `kind` does; `Err` with the reason where the enforcer would refuse them (a
    /// wrong length) or could never use them (a period of zero length, amount or start: the enforcer reverts on
    /// its first use), or where a figure does not fit what agentd shows (a timestamp or period beyond u64).
    pub fn decode(kind: Kind, terms: &[u8]) -> Result<Terms, String> {
        let word = |at: usize| U256::from_be_slice(&terms[at..at + 32]);
        let seconds = |at: usize, what: &str| -> Result<u64, String> {
            u64::try_from(word(at)).map_err(|_| format!("{} terms: the {what} does not fit 64 bits", kind.name()))
        };
        let length = |expected: usize| -> Result<(), String> {
            if terms.len() == expected {
                Ok(())
            } else {
                Err(format!(
                    "{} terms must be {expected} bytes, not {}",
                    kind.name(),
                    terms.len()
                ))
            }
        };
        let period = |amount: U256, period: u64, start: u64| -> Result<(), String> {
            if amount.is_zero() || period == 0 || start == 0 {
                return Err(format!(
                    "{} terms: the period amount, duration and start date must not be zero",
                    kind.name()
                ));
            }
            Ok(())
        };
        Ok(match kind {
            Kind::Erc20PeriodTransfer => {
                length(116)?;
                let (amount, period_s, start) = (
                    U256::from_be_slice(&terms[20..52]),
                    seconds(52, "period")?,
                    seconds(84, "start date")?,
                );
                period(amount, period_s, start)?;
                Terms::Erc20PeriodTransfer {
                    token: Address::from_slice(&terms[..20]),
                    amount,
                    period: period_s,
                    start,
                }
            }
            Kind::NativeTokenPeriodTransfer => {
                length(96)?;
                let (amount, period_s, start) = (word(0), seconds(32, "period")?, seconds(64, "start date")?);
                period(amount, period_s, start)?;
                Terms::NativeTokenPeriodTransfer {
                    amount,
                    period: period_s,
                    start,
                }
            }
            Kind::Erc20TransferAmount => {
                length(52)?;
                Terms::Erc20TransferAmount {
                    token: Address::from_slice(&terms[..20]),
                    amount: U256::from_be_slice(&terms[20..52]),
                }
            }
            Kind::NativeTokenTransferAmount => {
                length(32)?;
                Terms::NativeTokenTransferAmount { amount: word(0) }
            }
            Kind::ExactCalldata => Terms::ExactCalldata {
                calldata: Bytes::copy_from_slice(terms),
            },
            Kind::AllowedTargets => {
                if terms.is_empty() || !terms.len().is_multiple_of(20) {
                    return Err("allowed_targets terms must be one or more 20-byte addresses".into());
                }
                Terms::AllowedTargets {
                    targets: terms.chunks(20).map(Address::from_slice).collect(),
                }
            }
            Kind::AllowedMethods => {
                if terms.is_empty() || !terms.len().is_multiple_of(4) {
                    return Err("allowed_methods terms must be one or more 4-byte selectors".into());
                }
                Terms::AllowedMethods {
                    methods: terms.chunks(4).map(FixedBytes::<4>::from_slice).collect(),
                }
            }
            Kind::ValueLte => {
                length(32)?;
                Terms::ValueLte { value: word(0) }
            }
            Kind::Timestamp => {
                length(32)?;
                let half = |range: std::ops::Range<usize>, what: &str| {
                    u64::try_from(U256::from_be_slice(&terms[range]))
                        .map_err(|_| format!("timestamp terms: the {what} threshold does not fit 64 bits"))
                };
                Terms::Timestamp {
                    after: half(0..16, "after")?,
                    before: half(16..32, "before")?,
                }
            }
            Kind::LimitedCalls => {
                length(32)?;
                Terms::LimitedCalls { limit: word(0) }
            }
        })
    }
}

/// The configured enforcers of a chain: kind and address.
pub type Enforcers = [(Kind, Address)];

/// The configured enforcers of every chain, by chain name.
pub type EnforcersByChain = Vec<(String, Vec<(Kind, Address)>)>;

/// Decodes every caveat of `delegation` with the enforcers configured on its chain; refuses a caveat whose enforcer
/// is not one of them, whose terms it would not accept, or that carries `args` (the redeemer's input, which agentd
/// would have to supply and cannot mirror).
pub fn decode_caveats(delegation: &Delegation, enforcers: &Enforcers) -> Result<Vec<Terms>, UnknownCaveat> {
    delegation
        .caveats
        .iter()
        .enumerate()
        .map(|(index, caveat)| {
            let refuse = |reason: String| UnknownCaveat { index, reason };
            let kind = enforcers
                .iter()
                .find(|(_, address)| *address == caveat.enforcer)
                .map(|(kind, _)| *kind)
                .ok_or_else(|| refuse(format!("enforcer {} is not a configured enforcer", caveat.enforcer)))?;
            if !caveat.args.is_empty() {
                return Err(refuse("args must be empty (0x)".into()));
            }
            Terms::decode(kind, &caveat.terms).map_err(refuse)
        })
        .collect()
}

/// Two caveats naming one stateful enforcer (§21 `caveat_conflict`), as `(first, second)` caveat indexes; `terms`
/// are the caveats decoded in order (`decode_caveats`), so each caveat's kind is its enforcer's.
pub fn conflicting_caveats(delegation: &Delegation, terms: &[Terms]) -> Option<(usize, usize)> {
    let stateful: Vec<(usize, Address)> = delegation
        .caveats
        .iter()
        .zip(terms)
        .enumerate()
        .filter(|(_, (_, t))| t.kind().is_stateful())
        .map(|(index, (caveat, _))| (index, caveat.enforcer))
        .collect();
    stateful.iter().enumerate().find_map(|(at, (second, enforcer))| {
        stateful[..at]
            .iter()
            .find(|(_, earlier)| earlier == enforcer)
            .map(|(first, _)| (*first, *second))
    })
}

/// Whether the caveats together bound every execution the chain would let through (§21): a token-amount caveat
/// pins its token's `transfer` (its enforcer refuses any other target or function); a native-amount caveat counts
/// only `value` and lets any calldata through, so it bounds only beside `exact_calldata` with empty terms (plain
/// sends). Without an amount caveat nothing bounds the delegation.
pub fn is_bounded(terms: &[Terms]) -> bool {
    let token_amount = terms
        .iter()
        .any(|t| matches!(t, Terms::Erc20PeriodTransfer { .. } | Terms::Erc20TransferAmount { .. }));
    let native_amount = terms.iter().any(|t| {
        matches!(
            t,
            Terms::NativeTokenPeriodTransfer { .. } | Terms::NativeTokenTransferAmount { .. }
        )
    });
    let plain_sends_only = terms
        .iter()
        .any(|t| matches!(t, Terms::ExactCalldata { calldata } if calldata.is_empty()));
    token_amount || (native_amount && plain_sends_only)
}

/// What a limit is counted in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum LimitAsset {
    Native,
    Token(Address),
}

/// One amount caveat's limit: the amount per period (or in all, without a period) and how its `available` figure
/// is read on chain.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Limit {
    /// The caveat it comes from (its index in `caveats`).
    pub caveat: usize,
    pub asset: LimitAsset,
    pub amount: U256,
    /// `None`: the amount counts over the delegation's whole life (`*_transfer_amount`).
    pub period_seconds: Option<u64>,
    pub start: Option<u64>,
    pub read: AvailableRead,
}

/// How the chain tells what is left of a limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AvailableRead {
    /// The enforcer's `getAvailableAmount(hash, manager, terms)`.
    GetAvailableAmount,
    /// The terms' amount less `spentMap(manager, hash)`.
    SpentMap,
}

/// The limits the amount caveats set, in caveat order.
pub fn limits(terms: &[Terms]) -> Vec<Limit> {
    terms
        .iter()
        .enumerate()
        .filter_map(|(caveat, t)| {
            let (asset, amount, period_seconds, start, read) = match t {
                Terms::Erc20PeriodTransfer {
                    token,
                    amount,
                    period,
                    start,
                } => (
                    LimitAsset::Token(*token),
                    *amount,
                    Some(*period),
                    Some(*start),
                    AvailableRead::GetAvailableAmount,
                ),
                Terms::NativeTokenPeriodTransfer { amount, period, start } => (
                    LimitAsset::Native,
                    *amount,
                    Some(*period),
                    Some(*start),
                    AvailableRead::GetAvailableAmount,
                ),
                Terms::Erc20TransferAmount { token, amount } => {
                    (LimitAsset::Token(*token), *amount, None, None, AvailableRead::SpentMap)
                }
                Terms::NativeTokenTransferAmount { amount } => {
                    (LimitAsset::Native, *amount, None, None, AvailableRead::SpentMap)
                }
                _ => return None,
            };
            Some(Limit {
                caveat,
                asset,
                amount,
                period_seconds,
                start,
                read,
            })
        })
        .collect()
}

/// The contracts the `allowed_targets` caveats let the delegate call (all of them must agree: their
/// intersection); `None` without such a caveat.
pub fn targets(terms: &[Terms]) -> Option<Vec<Address>> {
    intersect(terms.iter().filter_map(|t| match t {
        Terms::AllowedTargets { targets } => Some(targets.clone()),
        _ => None,
    }))
}

/// The selectors the `allowed_methods` caveats let through (their intersection); `None` without such a caveat.
pub fn methods(terms: &[Terms]) -> Option<Vec<FixedBytes<4>>> {
    intersect(terms.iter().filter_map(|t| match t {
        Terms::AllowedMethods { methods } => Some(methods.clone()),
        _ => None,
    }))
}

fn intersect<T: PartialEq>(mut lists: impl Iterator<Item = Vec<T>>) -> Option<Vec<T>> {
    let first = lists.next()?;
    Some(lists.fold(first, |acc, next| {
        acc.into_iter().filter(|x| next.contains(x)).collect()
    }))
}

/// The window of the `timestamp` caveats, `(not_before, expires_at)` in unix seconds (the enforcer's thresholds,
/// both exclusive: usable strictly after the first and strictly before the second); the tightest of several.
pub fn window(terms: &[Terms]) -> (Option<u64>, Option<u64>) {
    let mut not_before = None;
    let mut expires_at: Option<u64> = None;
    for t in terms {
        if let Terms::Timestamp { after, before } = t {
            if *after > 0 {
                not_before = Some(not_before.map_or(*after, |n: u64| n.max(*after)));
            }
            if *before > 0 {
                expires_at = Some(expires_at.map_or(*before, |e| e.min(*before)));
            }
        }
    }
    (not_before, expires_at)
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

/// The execution a redemption performs, as ERC-7579 single-call `executionCalldata`: `target(20) ‖ value(32) ‖
/// calldata` packed.
pub fn execution(target: Address, value: U256, calldata: &[u8]) -> Bytes {
    let mut out = Vec::with_capacity(52 + calldata.len());
    out.extend_from_slice(target.as_slice());
    out.extend_from_slice(&value.to_be_bytes::<32>());
    out.extend_from_slice(calldata);
    out.into()
}

/// The manager's `redeemDelegations` calldata redeeming `delegation` (a root delegation: the chain is the
/// delegation alone) for one call of `target` with `value` and `calldata`, in single-call mode. A token transfer is
/// the token's `transfer(to, amount)` with no value; a native send is a call of `to` with `value` and no calldata.
pub fn redemption(delegation: &Delegation, target: Address, value: U256, calldata: &[u8]) -> Bytes {
    let context = vec![delegation.abi()].abi_encode();
    IDelegationManager::redeemDelegationsCall {
        permissionContexts: vec![context.into()],
        modes: vec![SINGLE_CALL_MODE],
        executionCallDatas: vec![execution(target, value, calldata)],
    }
    .abi_encode()
    .into()
}

/// `disabledDelegations(hash)` calldata.
pub fn disabled_call(hash: B256) -> Bytes {
    IDelegationManager::disabledDelegationsCall { delegationHash: hash }
        .abi_encode()
        .into()
}

/// Reads `disabledDelegations`'s answer.
pub fn disabled_answer(out: &[u8]) -> Option<bool> {
    IDelegationManager::disabledDelegationsCall::abi_decode_returns(out).ok()
}

/// `isValidSignature(digest, signature)` calldata, as the manager asks the delegator.
pub fn is_valid_signature_call(digest: B256, signature: &Bytes) -> Bytes {
    IERC1271::isValidSignatureCall {
        hash: digest,
        signature: signature.clone(),
    }
    .abi_encode()
    .into()
}

/// Whether an `isValidSignature` answer is the ERC-1271 magic value.
pub fn is_valid_signature_answer(out: &[u8]) -> bool {
    IERC1271::isValidSignatureCall::abi_decode_returns(out).is_ok_and(|magic| magic.0 == ERC1271_MAGIC)
}

/// The calldata reading what is left of `limit` of the delegation `hash` under `manager`, with the caveat's terms.
pub fn available_call(limit: &Limit, hash: B256, manager: Address, terms: &Bytes) -> Bytes {
    match limit.read {
        AvailableRead::GetAvailableAmount => IPeriodTransferEnforcer::getAvailableAmountCall {
            delegationHash: hash,
            delegationManager: manager,
            terms: terms.clone(),
        }
        .abi_encode()
        .into(),
        AvailableRead::SpentMap => ISpentMapEnforcer::spentMapCall {
            delegationManager: manager,
            delegationHash: hash,
        }
        .abi_encode()
        .into(),
    }
}

/// The figure `available_call`'s answer gives: the enforcer's available amount, or the amount less what it spent.
pub fn available_answer(limit: &Limit, out: &[u8]) -> Option<U256> {
    match limit.read {
        AvailableRead::GetAvailableAmount => IPeriodTransferEnforcer::getAvailableAmountCall::abi_decode_returns(out)
            .ok()
            .map(|r| r.availableAmount),
        AvailableRead::SpentMap => ISpentMapEnforcer::spentMapCall::abi_decode_returns(out)
            .ok()
            .map(|spent| limit.amount.saturating_sub(spent)),
    }
}

#[cfg(test)]
mod tests;
