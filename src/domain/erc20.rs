//! The ERC-20 calls agentd makes, as `sol!` types: `balanceOf` and `decimals` to read, `transfer(address,uint256)`
//! to move tokens, and how a token says a transfer is above the balance. Pure encoding, no I/O.

use alloy::primitives::{Address, Bytes, U256};
use alloy::sol_types::{Revert, SolCall, SolError};

alloy::sol! {
    /// The ERC-20 functions agentd calls.
    interface IERC20 {
        function balanceOf(address owner) external view returns (uint256);
        function decimals() external view returns (uint8);
        function transfer(address to, uint256 value) external returns (bool);
    }

    /// EIP-6093's error for a transfer above the sender's balance (OpenZeppelin Contracts 5 and later).
    error ERC20InsufficientBalance(address sender, uint256 balance, uint256 needed);
}

/// The reason string of the same refusal in tokens built on OpenZeppelin Contracts before EIP-6093 (USDC's
/// FiatToken among them).
const EXCEEDS_BALANCE: &str = "transfer amount exceeds balance";

/// The calldata of `transfer(to, value)`.
pub fn transfer_calldata(to: Address, value: U256) -> Bytes {
    IERC20::transferCall { to, value }.abi_encode().into()
}

/// Whether a reverted `transfer` says the sender's balance is below the amount: EIP-6093's `ERC20InsufficientBalance`
/// or the older "transfer amount exceeds balance" reason.
pub fn reverted_for_balance(revert: &[u8]) -> bool {
    ERC20InsufficientBalance::abi_decode(revert).is_ok()
        || Revert::abi_decode(revert).is_ok_and(|r| r.reason.contains(EXCEEDS_BALANCE))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transfer_calldata_is_the_selector_then_the_padded_arguments() {
        let to = Address::repeat_byte(0x11);
        let data = transfer_calldata(to, U256::from(5_000_000u64));
        // keccak256("transfer(address,uint256)")[..4]
        assert_eq!(&data[..4], &[0xa9, 0x05, 0x9c, 0xbb]);
        assert_eq!(data.len(), 4 + 32 + 32);
        assert_eq!(&data[16..36], to.as_slice());
        assert_eq!(U256::from_be_slice(&data[36..]), U256::from(5_000_000u64));
    }

    #[test]
    fn a_revert_for_the_balance_is_told_from_other_reverts() {
        let sender = Address::repeat_byte(0x11);
        let custom = ERC20InsufficientBalance {
            sender,
            balance: U256::from(1_000_000u64),
            needed: U256::from(3_000_000u64),
        }
        .abi_encode();
        // The selector a node showed for it: keccak256("ERC20InsufficientBalance(address,uint256,uint256)")[..4].
        assert_eq!(&custom[..4], &[0xe4, 0x50, 0xd3, 0x8c]);
        assert!(reverted_for_balance(&custom));
        let older = Revert::from("ERC20: transfer amount exceeds balance").abi_encode();
        assert!(reverted_for_balance(&older));

        let paused = Revert::from("Pausable: paused").abi_encode();
        assert!(!reverted_for_balance(&paused));
        assert!(!reverted_for_balance(&[]));
        assert!(!reverted_for_balance(&custom[..4]));
    }
}
