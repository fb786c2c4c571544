//! Errors of the chain-access layer, and how alloy's transport errors map onto them.
//!
//! No message built here ever contains an RPC URL: hosted node URLs often embed an API key, and
//! reqwest's own error text names the URL, so transport errors are classified, never displayed.

use alloy::transports::http::reqwest;
use alloy::transports::{RpcError, TransportError, TransportErrorKind};

use crate::domain::chain as registry;
use crate::domain::erc20;

/// The longest node error message passed on to callers; a node could answer with a whole page.
const MAX_RPC_MESSAGE: usize = 300;

/// Why a chain call failed. Every variant names the chain; none holds a URL or a key.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ChainError {
    /// The chain is in the registry but no `RPC_URL_<CHAIN>` is configured for it.
    #[error("chain {chain} is not configured: set RPC_URL_{}", registry::env_suffix(.chain))]
    NotConfigured { chain: String },
    /// The configured `RPC_URL_<CHAIN>` is not a usable http(s) URL (a configuration error).
    #[error("RPC_URL_{} is not a valid http(s) URL", registry::env_suffix(.chain))]
    InvalidUrl { chain: String },
    /// The node answered `eth_chainId` with another chain: nothing is read from it or sent to it.
    #[error("the node configured for {chain} reports chain id {actual}, expected {expected}; it is not used")]
    WrongChainId { chain: String, expected: u64, actual: u64 },
    /// The node did not answer within the per-call timeout (after one retry).
    #[error("the {chain} node did not answer in time")]
    Timeout { chain: String },
    /// The node could not be reached or answered with a transport-level failure (after one retry).
    #[error("the {chain} node is unavailable: {reason}")]
    Unavailable { chain: String, reason: String },
    /// The node answered with a JSON-RPC error, classified once here so callers match `reason`, never the text.
    #[error("the {chain} node refused the request: {message}")]
    Refused {
        chain: String,
        reason: RefusalKind,
        message: String,
    },
    /// The name is not in the chain registry.
    #[error("unknown chain {chain}")]
    UnknownChain { chain: String },
    /// A registry token whose contract reports other decimals than the registry: it is refused (amounts would be
    /// off by powers of ten), the chain's other assets are not.
    #[error("token {symbol} on {chain} reports {actual} decimals but the registry says {expected}; it is not used")]
    TokenDecimalsMismatch {
        chain: String,
        symbol: String,
        expected: u8,
        actual: u8,
    },
    /// A token contract's answer could not be read as an ERC-20 answer (no contract there, or not an ERC-20).
    #[error("token {symbol} on {chain} did not answer as an ERC-20 token")]
    NotAToken { chain: String, symbol: String },
}

impl ChainError {
    /// The snake_case error code used in API errors and tool results.
    pub fn code(&self) -> &'static str {
        match self {
            Self::NotConfigured { .. } => "chain_not_configured",
            Self::InvalidUrl { .. } => "invalid_rpc_url",
            Self::WrongChainId { .. } => "wrong_chain_id",
            Self::Timeout { .. } => "upstream_timeout",
            Self::Unavailable { .. } => "upstream_unavailable",
            Self::Refused { .. } => "rpc_error",
            Self::UnknownChain { .. } => "unknown_chain",
            Self::TokenDecimalsMismatch { .. } => "token_decimals_mismatch",
            Self::NotAToken { .. } => "token_unavailable",
        }
    }

    /// A suggested HTTP status when the error ends a whole request (docs/api.md §2: 502/503/504 upstream).
    pub fn http_status(&self) -> u16 {
        match self {
            Self::NotConfigured { .. } | Self::InvalidUrl { .. } => 503,
            Self::WrongChainId { .. } | Self::Unavailable { .. } | Self::Refused { .. } | Self::NotAToken { .. } => 502,
            // The registry and the contract disagree: the service cannot use that token until it is reconfigured.
            Self::TokenDecimalsMismatch { .. } => 503,
            Self::Timeout { .. } => 504,
            Self::UnknownChain { .. } => 422,
        }
    }

    /// True for failures to reach the node (as opposed to answers from it), which make the
    /// client verify the chain id again once the node is back.
    pub fn is_transport(&self) -> bool {
        matches!(self, Self::Timeout { .. } | Self::Unavailable { .. })
    }

    /// Why the node refused, when it answered with a refusal.
    pub fn refusal(&self) -> Option<RefusalKind> {
        match self {
            Self::Refused { reason, .. } => Some(*reason),
            _ => None,
        }
    }
}

/// What a node's JSON-RPC refusal means. Nodes word these differently (geth, reth, anvil, hosted
/// providers), so the wording is read once, here, when the answer arrives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RefusalKind {
    /// The nonce was already used by a mined (or replaced) transaction of the sender.
    NonceTooLow,
    /// The sender cannot pay value plus maximum fee.
    InsufficientFunds,
    /// The node already has this exact transaction in its pool.
    AlreadyKnown,
    /// The fee is too low to be accepted or to replace a pending transaction.
    Underpriced,
    /// The call reverted because the sender holds less of a token than it moves (`erc20::reverted_for_balance`).
    TokenBalanceTooLow,
    /// Any other refusal: an unsupported method, an invalid parameter, a revert.
    Other,
}

impl RefusalKind {
    /// Classifies a node's error message.
    pub fn classify(message: &str) -> Self {
        let m = message.to_ascii_lowercase();
        // "Known transaction" is checked first: some nodes word a duplicate as "known transaction: nonce too low".
        if m.contains("already known") || m.contains("known transaction") || m.contains("already imported") {
            Self::AlreadyKnown
        } else if m.contains("nonce too low") || m.contains("nonce is too low") || m.contains("already been used") {
            Self::NonceTooLow
        } else if m.contains("insufficient funds") {
            Self::InsufficientFunds
        } else if m.contains("underpriced") || m.contains("fee too low") {
            Self::Underpriced
        } else {
            Self::Other
        }
    }
}

/// A classified failure of one attempt: the error to report and whether one retry may help.
pub(crate) struct Failure {
    pub error: ChainError,
    pub transient: bool,
}

/// Maps one alloy transport error to a `ChainError`, deciding whether it is worth a retry:
/// connection failures, timeouts, HTTP 5xx/429 and rate-limit answers are; JSON-RPC errors are not.
pub(crate) fn classify(chain: &str, err: &TransportError) -> Failure {
    let unavailable = |reason: &str, transient: bool| Failure {
        error: ChainError::Unavailable {
            chain: chain.to_owned(),
            reason: reason.to_owned(),
        },
        transient,
    };
    match err {
        // Rate limiting arrives as a JSON-RPC error from some hosted nodes: it is about load, not
        // about the request, so it is retried and then reported as unavailability.
        RpcError::ErrorResp(payload) if payload.is_retry_err() => {
            unavailable("the node is rate limiting requests", true)
        }
        RpcError::ErrorResp(payload) => Failure {
            error: ChainError::Refused {
                chain: chain.to_owned(),
                // Classified on the whole message, before it is cut for display, and on the revert data if any.
                reason: match payload.as_revert_data() {
                    Some(revert) if erc20::reverted_for_balance(&revert) => RefusalKind::TokenBalanceTooLow,
                    _ => RefusalKind::classify(&payload.message),
                },
                message: short_message(&payload.message),
            },
            transient: false,
        },
        RpcError::Transport(kind) => classify_transport(chain, kind),
        RpcError::NullResp => unavailable("the node returned an empty response", true),
        RpcError::DeserError { .. } => unavailable("the node returned a malformed response", false),
        _ => unavailable("the request to the node failed", false),
    }
}

fn classify_transport(chain: &str, kind: &TransportErrorKind) -> Failure {
    let unavailable = |reason: String, transient: bool| Failure {
        error: ChainError::Unavailable {
            chain: chain.to_owned(),
            reason,
        },
        transient,
    };
    if let Some(http) = kind.as_http_error() {
        // The body is not shown: it may be an HTML page from a proxy.
        let transient = http.status >= 500 || http.status == 429 || http.status == 408;
        return unavailable(format!("the node answered HTTP {}", http.status), transient);
    }
    let Some(source) = kind.as_custom() else {
        return unavailable("the connection to the node failed".to_owned(), kind.is_retry_err());
    };
    match source.downcast_ref::<reqwest::Error>() {
        Some(e) if e.is_timeout() => Failure {
            error: ChainError::Timeout {
                chain: chain.to_owned(),
            },
            transient: true,
        },
        Some(e) if e.is_connect() => unavailable("could not connect to the node".to_owned(), true),
        _ => unavailable("the connection to the node failed".to_owned(), true),
    }
}

/// Trims a node's error message to one reasonable line.
fn short_message(message: &str) -> String {
    let line = message.lines().next().unwrap_or_default().trim();
    match line.char_indices().nth(MAX_RPC_MESSAGE) {
        Some((cut, _)) => format!("{}...", &line[..cut]),
        None => line.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A JSON-RPC error answer as alloy reports it (`ErrorPayload` is not re-exported by `alloy`).
    fn error_resp(json: &str) -> TransportError {
        RpcError::ErrorResp(serde_json::from_str(json).unwrap())
    }

    #[test]
    fn messages_name_the_variable_not_the_url() {
        let e = ChainError::NotConfigured {
            chain: "base-sepolia".into(),
        };
        assert_eq!(
            e.to_string(),
            "chain base-sepolia is not configured: set RPC_URL_BASE_SEPOLIA"
        );
        assert_eq!(e.code(), "chain_not_configured");
        let e = ChainError::InvalidUrl { chain: "base".into() };
        assert_eq!(e.to_string(), "RPC_URL_BASE is not a valid http(s) URL");
    }

    #[test]
    fn json_rpc_errors_keep_the_node_message_and_are_not_retried() {
        let failure = classify("base", &error_resp(r#"{"code":-32000,"message":"nonce too low"}"#));
        assert!(!failure.transient);
        assert_eq!(
            failure.error,
            ChainError::Refused {
                chain: "base".into(),
                reason: RefusalKind::NonceTooLow,
                message: "nonce too low".into()
            }
        );
        assert_eq!(failure.error.code(), "rpc_error");
    }

    #[test]
    fn a_token_revert_for_the_balance_is_classified_from_its_data() {
        // As anvil answers an estimate of such a transfer: the revert data under `data`.
        let revert = "0xe450d38c00000000000000000000000064b7fedec3e0f940e1ecf12b067e224a5eca16cb\
            00000000000000000000000000000000000000000000000000000000000f4240\
            00000000000000000000000000000000000000000000000000000000002dc6c0";
        let answer =
            format!(r#"{{"code":3,"message":"execution reverted: custom error 0xe450d38c","data":"{revert}"}}"#);
        let failure = classify("base", &error_resp(&answer));
        assert_eq!(failure.error.refusal(), Some(RefusalKind::TokenBalanceTooLow));
        // Another revert stays a plain refusal.
        let paused = r#"{"code":3,"message":"execution reverted","data":"0xdeadbeef"}"#;
        assert_eq!(
            classify("base", &error_resp(paused)).error.refusal(),
            Some(RefusalKind::Other)
        );
    }

    #[test]
    fn refusals_are_classified_by_their_wording() {
        let cases = [
            ("nonce too low: next nonce 5, tx nonce 4", RefusalKind::NonceTooLow),
            ("Nonce is too low", RefusalKind::NonceTooLow),
            ("the nonce has already been used", RefusalKind::NonceTooLow),
            (
                "insufficient funds for gas * price + value",
                RefusalKind::InsufficientFunds,
            ),
            ("already known", RefusalKind::AlreadyKnown),
            ("Known transaction: 0xabc", RefusalKind::AlreadyKnown),
            ("replacement transaction underpriced", RefusalKind::Underpriced),
            ("method not found", RefusalKind::Other),
        ];
        for (message, kind) in cases {
            assert_eq!(RefusalKind::classify(message), kind, "{message}");
        }
    }

    #[test]
    fn rate_limits_and_server_errors_are_retried() {
        assert!(classify("base", &error_resp(r#"{"code":429,"message":"Too many requests"}"#)).transient);
        let failure = classify(
            "base",
            &TransportErrorKind::http_error(503, "<html>secret</html>".into()),
        );
        assert!(failure.transient);
        assert_eq!(
            failure.error.to_string(),
            "the base node is unavailable: the node answered HTTP 503"
        );
        assert!(!classify("base", &TransportErrorKind::http_error(401, String::new())).transient);
    }

    #[test]
    fn long_messages_are_cut() {
        let long = "x".repeat(1000);
        assert_eq!(short_message(&long).len(), MAX_RPC_MESSAGE + 3);
        assert_eq!(short_message("a\nb"), "a");
    }
}
