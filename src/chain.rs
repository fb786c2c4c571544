//! Chain access: the static registry of EVM chains and JSON-RPC clients for the configured ones.
//!
//! `Chains` is built once from the `RPC_URL_<CHAIN>` settings and shared. Each `ChainClient`
//! bounds every call by a timeout, retries once on transient failures, and verifies lazily (and
//! in the background at start, never blocking it) that its node reports the registry's chain id;
//! a node of another chain is refused with `ChainError::WrongChainId`, never signed for.
//!
//! What the transfer service and the watcher ask of a chain's node is the trait `Node` (`node`); `ChainClient`
//! implements it over JSON-RPC, and a unit test may stand a scripted node in for a chain (`Chains::with_node`).

pub mod authorizations;
pub mod bundles;
pub mod chains;
pub mod client;
pub mod delegations;
pub mod error;
pub mod fees;
pub mod node;
pub mod simulate;
pub mod tx;
pub mod userop;

pub use chains::Chains;
pub use client::{ChainClient, DEFAULT_TIMEOUT};
pub use error::{ChainError, RefusalKind};
pub use fees::{Fees, GWEI, TRANSFER_GAS, format_gwei, format_native};
pub use node::Node;

pub use tx::{ReceiptInfo, TxInfo, TxStatus, raw_tx_hash};
