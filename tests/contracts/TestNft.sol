// SPDX-License-Identifier: MIT
// A plain ERC-721 collection for the test suite: anyone may mint any id to anyone; it exists only on a test node.
pragma solidity ^0.8.24;

import {ERC721} from "@openzeppelin/contracts/token/ERC721/ERC721.sol";

contract TestNft is ERC721 {
    constructor() ERC721("Test Collection", "TNFT") {}

    function mint(address to, uint256 id) external {
        _mint(to, id);
    }
}
