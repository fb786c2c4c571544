// SPDX-License-Identifier: MIT
// A contract that refuses transactions priced above a limit, as anti-front-running guards do (`tx.gasprice` checked
// against a ceiling). A simulation that leaves out the fees the transaction will carry sees a call to it succeed;
// the transaction as signed, with today's fees, reverts.
pragma solidity ^0.8.24;

contract GasPriceLimit {
    uint256 public immutable limit;
    uint256 public hits;

    constructor(uint256 limit_) {
        limit = limit_;
    }

    function hit() external {
        require(tx.gasprice <= limit, "gas price above the limit");
        hits += 1;
    }
}
