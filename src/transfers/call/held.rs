//! Authorizations this service holds for payments to the agent (§23): a held authorization — taken, settled or let
//! go, until its `validBefore` — is settled through no other path. A contract call of the token's
//! `transferWithAuthorization`, `receiveWithAuthorization` or `cancelAuthorization` naming a held (payer, nonce) is
//! refused before anything is simulated, as `call_denied` naming the call (`details.index`), a batch's calls alike.

use alloy::primitives::{Address, B256, Bytes};
use alloy::sol_types::SolCall;

use crate::domain::chain::ChainInfo;
use crate::transfers::{TransferError, Transfers, store_error};

alloy::sol! {
    /// EIP-3009's entry points that use or cancel an authorization (FiatToken's `v, r, s` and `bytes` forms).
    interface IEip3009Use {
        function transferWithAuthorization(address from, address to, uint256 value, uint256 validAfter,
            uint256 validBefore, bytes32 nonce, uint8 v, bytes32 r, bytes32 s) external;
        function transferWithAuthorization(address from, address to, uint256 value, uint256 validAfter,
            uint256 validBefore, bytes32 nonce, bytes signature) external;
        function receiveWithAuthorization(address from, address to, uint256 value, uint256 validAfter,
            uint256 validBefore, bytes32 nonce, uint8 v, bytes32 r, bytes32 s) external;
        function receiveWithAuthorization(address from, address to, uint256 value, uint256 validAfter,
            uint256 validBefore, bytes32 nonce, bytes signature) external;
        function cancelAuthorization(address authorizer, bytes32 nonce, uint8 v, bytes32 r, bytes32 s) external;
        function cancelAuthorization(address authorizer, bytes32 nonce, bytes signature) external;
    }
}

/// The (authorizer, nonce) a call of one of EIP-3009's entry points names, if it is one.
pub fn authorization_named(data: &[u8]) -> Option<(Address, B256)> {
    use IEip3009Use::*;
    let selector: [u8; 4] = data.get(..4)?.try_into().ok()?;
    match selector {
        transferWithAuthorization_0Call::SELECTOR => transferWithAuthorization_0Call::abi_decode(data)
            .ok()
            .map(|c| (c.from, c.nonce)),
        transferWithAuthorization_1Call::SELECTOR => transferWithAuthorization_1Call::abi_decode(data)
            .ok()
            .map(|c| (c.from, c.nonce)),
        receiveWithAuthorization_0Call::SELECTOR => receiveWithAuthorization_0Call::abi_decode(data)
            .ok()
            .map(|c| (c.from, c.nonce)),
        receiveWithAuthorization_1Call::SELECTOR => receiveWithAuthorization_1Call::abi_decode(data)
            .ok()
            .map(|c| (c.from, c.nonce)),
        cancelAuthorization_0Call::SELECTOR => cancelAuthorization_0Call::abi_decode(data)
            .ok()
            .map(|c| (c.authorizer, c.nonce)),
        cancelAuthorization_1Call::SELECTOR => cancelAuthorization_1Call::abi_decode(data)
            .ok()
            .map(|c| (c.authorizer, c.nonce)),
        _ => None,
    }
}

impl Transfers {
    /// Refuses the first of `calls` (target, calldata) that uses or cancels an authorization this service holds.
    pub(crate) async fn refuse_held_authorizations(
        &self,
        chain: &'static ChainInfo,
        calls: &[(Address, &Bytes)],
    ) -> Result<(), TransferError> {
        for (index, (to, data)) in calls.iter().enumerate() {
            let Some((authorizer, nonce)) = authorization_named(data) else {
                continue;
            };
            let held = self
                .store
                .income_by_nonce(chain.name, *to, authorizer, nonce)
                .await
                .map_err(store_error)?;
            if held.is_some() {
                let which = match calls.len() {
                    1 => "the call".to_string(),
                    _ => format!("call {index}"),
                };
                return Err(TransferError::CallTargetDenied {
                    index,
                    words: format!(
                        "{which} uses or cancels an authorization this service holds for a payment to the agent; \
                         it is settled through no other path"
                    ),
                });
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloy::primitives::U256;

    #[test]
    fn each_form_names_its_authorizer_and_nonce_and_other_calls_none() {
        let (from, nonce) = (Address::repeat_byte(5), B256::repeat_byte(9));
        let signed: Bytes = IEip3009Use::transferWithAuthorization_1Call {
            from,
            to: Address::repeat_byte(6),
            value: U256::from(1),
            validAfter: U256::ZERO,
            validBefore: U256::from(10),
            nonce,
            signature: Bytes::from(vec![1; 65]),
        }
        .abi_encode()
        .into();
        assert_eq!(authorization_named(&signed), Some((from, nonce)));
        let cancel: Bytes = IEip3009Use::cancelAuthorization_0Call {
            authorizer: from,
            nonce,
            v: 27,
            r: B256::ZERO,
            s: B256::ZERO,
        }
        .abi_encode()
        .into();
        assert_eq!(authorization_named(&cancel), Some((from, nonce)));
        assert_eq!(authorization_named(&[0xa9, 0x05, 0x9c, 0xbb]), None);
    }
}
