//! EIP-3009 for x402 payments (§16): the interface, what the token's log says became of an authorization
//! (`AuthorizationUsed`: settled, with the settlement transaction; `AuthorizationCanceled`: cancelled), and what §23's
//! checks read of a payer. The reads themselves are the client's: whether an authorization is used and its log are
//! `Node` reads (`authorization_state`, `authorization_log`, which the watcher asks), the payer's in one batch
//! `ChainClient::payer_reads` (`client::payer`).

use alloy::primitives::{Address, Bytes, TxHash, U256};

use super::error::ChainError;

alloy::sol! {
    /// The EIP-3009 parts the watcher reads.
    interface IEip3009 {
        function authorizationState(address authorizer, bytes32 nonce) external view returns (bool);
        event AuthorizationUsed(address indexed authorizer, bytes32 indexed nonce);
        event AuthorizationCanceled(address indexed authorizer, bytes32 indexed nonce);
    }
}

/// How far back (in blocks) the watcher looks for an authorization's log. An authorization lives at most ten
/// minutes; the window leaves room for a watcher that was stopped a while.
pub const LOG_WINDOW_BLOCKS: u64 = 20_000;

/// What §23's checks read of a payer and its payment, in one JSON-RPC batch at the latest block.
#[derive(Debug)]
pub struct PayerReads {
    /// The payer's code (`0xef0100 ‖ address` for an EIP-7702 designation).
    pub code: Bytes,
    /// `authorizationState(payer, nonce)`: the authorization was used or cancelled on chain.
    pub used: bool,
    /// The payer's balance of the token.
    pub balance: U256,
    /// The settlement's `eth_call`, exactly as the agent's wallet would send it and with its gas limit: `Err` with
    /// a refusal when it reverts (or runs out of that gas).
    pub settles: Result<(), ChainError>,
}

/// The settlement a payment's checks simulate: `calldata` sent by `from` to the token with `gas`.
#[derive(Debug, Clone)]
pub struct SettleCall {
    pub from: Address,
    pub calldata: Bytes,
    pub gas: u64,
}

/// What the token's log says became of an authorization.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuthorizationLog {
    /// `true`: `AuthorizationUsed` (the transfer happened); `false`: `AuthorizationCanceled`.
    pub used: bool,
    pub tx_hash: Option<TxHash>,
    pub block_number: Option<u64>,
}
