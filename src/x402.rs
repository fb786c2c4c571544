//! x402, the protocol by which software pays for HTTP resources (§16): a 402's price list read (`wire`), the entry
//! to pay chosen and its price checked (`choose`), an already-decided payment signed as an EIP-3009
//! `TransferWithAuthorization` and put in its header (`sign`), and the guarded fetch every such request goes
//! through (`fetch`, with the URL and address rules in `guard`). Nothing here decides whether to pay: the policy,
//! the cap and the reservation are the transfers service's, and the caller runs them between `choose` and `sign`.
//!
//! Crates: the x402-rs project's `x402-types` 2.0 was considered for the wire types. It resolves against the tree
//! without a second alloy, reqwest or hyper line (it uses `alloy-primitives` 1.7 as alloy 2.5 does), but it declares
//! rust-version 1.93 where this crate declares 1.88, adds `rust_decimal`, `serde_with` and a second `num-traits`,
//! and holds only the scheme-independent envelope: the `exact` EVM payload and the EIP-712 types live in further
//! crates of that project that bring their own alloy feature set. `x402-reqwest` is a transparent paying
//! middleware (over `reqwest-middleware`): it would sign before the policy is consulted, which §16 forbids. The
//! few wire types below are written here instead, with the chosen `accepts` entry kept as raw JSON so it is
//! echoed exactly.

pub mod choose;
pub mod sign;
pub mod wire;

pub use choose::{Choice, KnownToken, Offered, X402Error, check_price, choose};
pub use sign::{Authorization, SignError, SignedPayment, sign_payment};
pub use wire::{PaymentRequired, Protocol, Requirements, SettleResponse, WireError};

/// A 402 that carries no price list this module reads is a resource that cannot be paid.
impl From<WireError> for X402Error {
    fn from(err: WireError) -> Self {
        X402Error::Unsupported {
            reason: err.to_string(),
            offered: Vec::new(),
        }
    }
}
