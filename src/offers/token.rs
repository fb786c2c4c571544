//! Whether a token can be paid to an offer (§23): its contract answers EIP-3009's `authorizationState` with a bool,
//! and reports the EIP-712 domain buyers sign under, by EIP-5267's `eip712Domain()` or else by `name()` and
//! `version()` (USDC's FiatToken has the latter only). Read at the latest block; a revert or a malformed answer
//! means "not payable", a node that fails is the node's error.

use alloy::primitives::{Address, B256, Bytes};
use alloy::sol_types::SolCall;

use crate::chain::delegations::Read;
use crate::chain::{ChainClient, ChainError};

alloy::sol! {
    interface IPayableToken {
        function authorizationState(address authorizer, bytes32 nonce) external view returns (bool);
        function eip712Domain() external view returns (bytes1 fields, string name, string version, uint256 chainId, address verifyingContract, bytes32 salt, uint256[] extensions);
        function name() external view returns (string);
        function version() external view returns (string);
    }
}

/// EIP-5267's `fields` bits of the name and the version.
const HAS_NAME: u8 = 0x01;
const HAS_VERSION: u8 = 0x02;

/// The token's EIP-712 domain `(name, version)` if it implements EIP-3009; `None` when it does not.
pub async fn payable_domain(client: &ChainClient, token: Address) -> Result<Option<(String, String)>, ChainError> {
    let probe = IPayableToken::authorizationStateCall {
        authorizer: Address::repeat_byte(0x11),
        nonce: B256::ZERO,
    };
    let Some(state) = read(client, token, probe.abi_encode()).await? else {
        return Ok(None);
    };
    if IPayableToken::authorizationStateCall::abi_decode_returns(&state).is_err() {
        return Ok(None);
    }
    if let Some(answer) = read(client, token, IPayableToken::eip712DomainCall {}.abi_encode()).await?
        && let Ok(domain) = IPayableToken::eip712DomainCall::abi_decode_returns(&answer)
        && domain.fields.0[0] & (HAS_NAME | HAS_VERSION) == HAS_NAME | HAS_VERSION
        && !domain.name.is_empty()
    {
        return Ok(Some((domain.name, domain.version)));
    }
    let name = match read(client, token, IPayableToken::nameCall {}.abi_encode()).await? {
        Some(out) => IPayableToken::nameCall::abi_decode_returns(&out).ok(),
        None => None,
    };
    let version = match read(client, token, IPayableToken::versionCall {}.abi_encode()).await? {
        Some(out) => IPayableToken::versionCall::abi_decode_returns(&out).ok(),
        None => None,
    };
    Ok(match (name, version) {
        (Some(name), Some(version)) if !name.is_empty() => Some((name, version)),
        _ => None,
    })
}

/// What `token` answers to `data` (`None`: it reverted).
async fn read(client: &ChainClient, token: Address, data: Vec<u8>) -> Result<Option<Bytes>, ChainError> {
    Ok(match client.read(token, data.into()).await? {
        Read::Answer(out) => Some(out),
        Read::Reverted => None,
    })
}
