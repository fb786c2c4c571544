// SPDX-License-Identifier: MIT
// A plain ERC-20 for the test suite: any decimals, minted to whoever the test names.
pragma solidity ^0.8.24;

import {ERC20} from "@openzeppelin/contracts/token/ERC20/ERC20.sol";

contract TestToken is ERC20 {
    // An immutable (kept in the code), so a copy of this code at another address (`anvil_setCode`) keeps it.
    uint8 private immutable _decimals;

    constructor(string memory name_, string memory symbol_, uint8 decimals_) ERC20(name_, symbol_) {
        _decimals = decimals_;
    }

    function decimals() public view override returns (uint8) {
        return _decimals;
    }

    /// Anyone may mint: this token exists only on a test node.
    function mint(address to, uint256 amount) external {
        _mint(to, amount);
    }
}
