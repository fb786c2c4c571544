//! The ERC-20 calls agentd makes, as `sol!` types: `balanceOf` and `decimals` to read, `transfer(address,uint256)`
//! to move tokens. Pure encoding, no I/O.

use alloy::primitives::{Address, Bytes, U256};
use alloy::sol_types::SolCall;

alloy::sol! {
    /// The ERC-20 functions agentd calls.
    interface IERC20 {
        function balanceOf(address owner) external view returns (uint256);
        function decimals() external view returns (uint8);
        function transfer(address to, uint256 value) external returns (bool);
    }
}

/// The calldata of `transfer(to, value)`.
pub fn transfer_calldata(to: Address, value: U256) -> Bytes {
    IERC20::transferCall { to, value }.abi_encode().into()
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
}
