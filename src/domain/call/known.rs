//! The functions and custom errors agentd names without a policy ABI (§18): the token standards an agent's calls
//! most often touch, and the allowance machinery (Permit2, EIP-2612, DAI) whose grants the policy must see. The
//! signatures come from the real interfaces (the token standards' and Permit2's published ABIs); the selectors are
//! computed by alloy at first use, and a test pins them to the 4-byte values solc gives for those signatures.

use std::sync::LazyLock;

use alloy::json_abi::{Error, Function};
use alloy::primitives::Selector;

/// Standard functions, names kept for readability. ERC-20 and ERC-721 share `approve` and `transferFrom`, ERC-721
/// and ERC-1155 share `setApprovalForAll`: one entry serves both, since the selector and types are the same.
const FUNCTIONS: &[&str] = &[
    // ERC-20 (and OZ 4 / FiatToken allowance helpers)
    "transfer(address to, uint256 value)",
    "approve(address spender, uint256 value)",
    "transferFrom(address from, address to, uint256 value)",
    "increaseAllowance(address spender, uint256 addedValue)",
    "decreaseAllowance(address spender, uint256 subtractedValue)",
    // ERC-721 / ERC-1155
    "setApprovalForAll(address operator, bool approved)",
    "safeTransferFrom(address from, address to, uint256 tokenId)",
    "safeTransferFrom(address from, address to, uint256 tokenId, bytes data)",
    "safeTransferFrom(address from, address to, uint256 id, uint256 value, bytes data)",
    "safeBatchTransferFrom(address from, address to, uint256[] ids, uint256[] values, bytes data)",
    // WETH9
    "deposit()",
    "withdraw(uint256 wad)",
    // EIP-2612 and DAI permits
    "permit(address owner, address spender, uint256 value, uint256 deadline, uint8 v, bytes32 r, bytes32 s)",
    "permit(address holder, address spender, uint256 nonce, uint256 expiry, bool allowed, uint8 v, bytes32 r, bytes32 s)",
    // Permit2 AllowanceTransfer
    "approve(address token, address spender, uint160 amount, uint48 expiration)",
    "permit(address owner, ((address,uint160,uint48,uint48),address,uint256) permitSingle, bytes signature)",
    "permit(address owner, ((address,uint160,uint48,uint48)[],address,uint256) permitBatch, bytes signature)",
    "transferFrom(address from, address to, uint160 amount, address token)",
    "transferFrom((address,address,uint160,address)[] transferDetails)",
    "lockdown((address,address)[] approvals)",
    "invalidateNonces(address token, address spender, uint48 newNonce)",
    // Permit2 SignatureTransfer
    "permitTransferFrom(((address,uint256),uint256,uint256) permit, (address,uint256) transferDetails, address owner, bytes signature)",
    "permitTransferFrom(((address,uint256)[],uint256,uint256) permit, (address,uint256)[] transferDetails, address owner, bytes signature)",
];

/// Custom errors named in revert reasons without a policy ABI: OpenZeppelin 5's ERC-6093 and Permit2's.
const ERRORS: &[&str] = &[
    "ERC20InsufficientBalance(address sender, uint256 balance, uint256 needed)",
    "ERC20InsufficientAllowance(address spender, uint256 allowance, uint256 needed)",
    "ERC20InvalidReceiver(address receiver)",
    "ERC20InvalidSpender(address spender)",
    "ERC20InvalidSender(address sender)",
    "ERC20InvalidApprover(address approver)",
    "ERC721NonexistentToken(uint256 tokenId)",
    "ERC721InsufficientApproval(address operator, uint256 tokenId)",
    "ERC721IncorrectOwner(address sender, uint256 tokenId, address owner)",
    "ERC721InvalidReceiver(address receiver)",
    "ERC1155InsufficientBalance(address sender, uint256 balance, uint256 needed, uint256 tokenId)",
    "ERC1155MissingApprovalForAll(address operator, address owner)",
    "AllowanceExpired(uint256 deadline)",
    "InsufficientAllowance(uint256 amount)",
    "InvalidAmount(uint256 maxAmount)",
    "LengthMismatch()",
];

static KNOWN_FUNCTIONS: LazyLock<Vec<Function>> =
    LazyLock::new(|| FUNCTIONS.iter().filter_map(|s| Function::parse(s).ok()).collect());

static KNOWN_ERRORS: LazyLock<Vec<Error>> =
    LazyLock::new(|| ERRORS.iter().filter_map(|s| Error::parse(s).ok()).collect());

/// The standard function with this selector, if any.
pub fn function(selector: Selector) -> Option<&'static Function> {
    KNOWN_FUNCTIONS.iter().find(|f| f.selector() == selector)
}

/// The standard custom errors.
pub fn errors() -> &'static [Error] {
    &KNOWN_ERRORS
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_signature_parses() {
        assert_eq!(KNOWN_FUNCTIONS.len(), FUNCTIONS.len());
        assert_eq!(KNOWN_ERRORS.len(), ERRORS.len());
    }

    #[test]
    fn selectors_match_the_table_solc_gives() {
        // keccak of the canonical signature, as solc reports it for these interfaces.
        let table = [
            ("0xa9059cbb", "transfer(address,uint256)"),
            ("0x095ea7b3", "approve(address,uint256)"),
            ("0x23b872dd", "transferFrom(address,address,uint256)"),
            ("0x39509351", "increaseAllowance(address,uint256)"),
            ("0xa457c2d7", "decreaseAllowance(address,uint256)"),
            ("0xa22cb465", "setApprovalForAll(address,bool)"),
            ("0x42842e0e", "safeTransferFrom(address,address,uint256)"),
            ("0xb88d4fde", "safeTransferFrom(address,address,uint256,bytes)"),
            ("0xf242432a", "safeTransferFrom(address,address,uint256,uint256,bytes)"),
            (
                "0x2eb2c2d6",
                "safeBatchTransferFrom(address,address,uint256[],uint256[],bytes)",
            ),
            ("0xd0e30db0", "deposit()"),
            ("0x2e1a7d4d", "withdraw(uint256)"),
            (
                "0xd505accf",
                "permit(address,address,uint256,uint256,uint8,bytes32,bytes32)",
            ),
            (
                "0x8fcbaf0c",
                "permit(address,address,uint256,uint256,bool,uint8,bytes32,bytes32)",
            ),
            ("0x87517c45", "approve(address,address,uint160,uint48)"),
            (
                "0x2b67b570",
                "permit(address,((address,uint160,uint48,uint48),address,uint256),bytes)",
            ),
            (
                "0x2a2d80d1",
                "permit(address,((address,uint160,uint48,uint48)[],address,uint256),bytes)",
            ),
            ("0x36c78516", "transferFrom(address,address,uint160,address)"),
            ("0x0d58b1db", "transferFrom((address,address,uint160,address)[])"),
            ("0xcc53287f", "lockdown((address,address)[])"),
            ("0x65d9723c", "invalidateNonces(address,address,uint48)"),
            (
                "0x30f28b7a",
                "permitTransferFrom(((address,uint256),uint256,uint256),(address,uint256),address,bytes)",
            ),
            (
                "0xedd9444b",
                "permitTransferFrom(((address,uint256)[],uint256,uint256),(address,uint256)[],address,bytes)",
            ),
        ];
        assert_eq!(table.len(), FUNCTIONS.len());
        for (hex, signature) in table {
            let selector: Selector = hex.parse().expect("selector");
            assert_eq!(
                function(selector).map(|f| f.signature()).as_deref(),
                Some(signature),
                "{hex}"
            );
        }
        let errors = [
            ("0xe450d38c", "ERC20InsufficientBalance(address,uint256,uint256)"),
            ("0xfb8f41b2", "ERC20InsufficientAllowance(address,uint256,uint256)"),
            ("0xec442f05", "ERC20InvalidReceiver(address)"),
            ("0x94280d62", "ERC20InvalidSpender(address)"),
            ("0x96c6fd1e", "ERC20InvalidSender(address)"),
            ("0xe602df05", "ERC20InvalidApprover(address)"),
            ("0x7e273289", "ERC721NonexistentToken(uint256)"),
            ("0x177e802f", "ERC721InsufficientApproval(address,uint256)"),
            ("0x64283d7b", "ERC721IncorrectOwner(address,uint256,address)"),
            ("0x64a0ae92", "ERC721InvalidReceiver(address)"),
            (
                "0x03dee4c5",
                "ERC1155InsufficientBalance(address,uint256,uint256,uint256)",
            ),
            ("0xe237d922", "ERC1155MissingApprovalForAll(address,address)"),
            ("0xd81b2f2e", "AllowanceExpired(uint256)"),
            ("0xf96fb071", "InsufficientAllowance(uint256)"),
            ("0x3728b83d", "InvalidAmount(uint256)"),
            ("0xff633a38", "LengthMismatch()"),
        ];
        assert_eq!(errors.len(), ERRORS.len());
        for (hex, signature) in errors {
            let error = KNOWN_ERRORS
                .iter()
                .find(|e| e.signature() == signature)
                .expect(signature);
            assert_eq!(alloy::hex::encode_prefixed(error.selector()), hex, "{signature}");
        }
    }
}
