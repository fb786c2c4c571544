//! Contract calls (docs/api.md §18), the pure part: the calldata a request asks for, what the calldata actually sent
//! means, the `calls` rules of a policy and their verdict, which allowances count as unlimited, a simulated call's
//! effect on the agent's wallet, and why a call reverted. No I/O: the chain layer simulates, the store counts.

pub mod batch;
pub mod condition;
pub mod decode;
pub mod effect;
pub mod known;
pub mod ledger;
pub mod policy;
pub mod request;
pub mod revert;
pub mod typed;
pub mod unlimited;
pub mod value;

pub use decode::{DecodedCall, decode};
pub use effect::{Change, Direction, Effect, Grant, SimLog, effect};
pub use policy::{CallAction, CallFacts, CallRuleRef, CallVerdict, CallsPolicy};
pub use request::{CallInput, Encoded, RequestError, encode, selector_hex};
pub use revert::revert_reason;
pub use unlimited::{grants_unlimited, is_unlimited_amount, is_unlimited_permit2_amount};
