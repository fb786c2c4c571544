// SPDX-License-Identifier: MIT
// An EIP-3009 token for the test suite, behaving as USDC (FiatToken v2) does towards x402: 6 decimals,
// `transferWithAuthorization` / `receiveWithAuthorization` / `cancelAuthorization` in the (v, r, s) and `bytes
// signature` forms, `authorizationState`, the `AuthorizationUsed` / `AuthorizationCanceled` events and FiatToken's
// revert strings (the official x402 SDK classifies failures by them). Name, symbol and the EIP-712 domain are held
// in immutables, so a copy of the code at USDC's canonical address (`anvil_setCode`) keeps the domain USDC has
// there, with that address as the verifying contract. Anyone may mint: it exists only on a test node.
pragma solidity ^0.8.24;

import {ERC20} from "@openzeppelin/contracts/token/ERC20/ERC20.sol";
import {EIP712} from "@openzeppelin/contracts/utils/cryptography/EIP712.sol";
import {ECDSA} from "@openzeppelin/contracts/utils/cryptography/ECDSA.sol";
import {ShortString, ShortStrings} from "@openzeppelin/contracts/utils/ShortStrings.sol";

contract Eip3009Token is ERC20, EIP712 {
    using ShortStrings for string;
    using ShortStrings for ShortString;

    bytes32 public constant TRANSFER_WITH_AUTHORIZATION_TYPEHASH = keccak256(
        "TransferWithAuthorization(address from,address to,uint256 value,uint256 validAfter,uint256 validBefore,bytes32 nonce)"
    );
    bytes32 public constant RECEIVE_WITH_AUTHORIZATION_TYPEHASH = keccak256(
        "ReceiveWithAuthorization(address from,address to,uint256 value,uint256 validAfter,uint256 validBefore,bytes32 nonce)"
    );
    bytes32 public constant CANCEL_AUTHORIZATION_TYPEHASH =
        keccak256("CancelAuthorization(address authorizer,bytes32 nonce)");

    ShortString private immutable _tokenName;
    ShortString private immutable _tokenSymbol;
    ShortString private immutable _tokenVersion;

    mapping(address => mapping(bytes32 => bool)) private _authorizationStates;

    event AuthorizationUsed(address indexed authorizer, bytes32 indexed nonce);
    event AuthorizationCanceled(address indexed authorizer, bytes32 indexed nonce);

    /// One authorization's terms (a struct keeps the legacy code generator's stack small).
    struct Terms {
        address from;
        address to;
        uint256 value;
        uint256 validAfter;
        uint256 validBefore;
        bytes32 nonce;
    }

    constructor(string memory name_, string memory version_, string memory symbol_)
        ERC20(name_, symbol_)
        EIP712(name_, version_)
    {
        _tokenName = name_.toShortString();
        _tokenSymbol = symbol_.toShortString();
        _tokenVersion = version_.toShortString();
    }

    function name() public view override returns (string memory) {
        return _tokenName.toString();
    }

    function symbol() public view override returns (string memory) {
        return _tokenSymbol.toString();
    }

    function version() external view returns (string memory) {
        return _tokenVersion.toString();
    }

    function decimals() public pure override returns (uint8) {
        return 6;
    }

    // solhint-disable-next-line func-name-mixedcase
    function DOMAIN_SEPARATOR() external view returns (bytes32) {
        return _domainSeparatorV4();
    }

    function mint(address to, uint256 amount) external {
        _mint(to, amount);
    }

    function authorizationState(address authorizer, bytes32 nonce) external view returns (bool) {
        return _authorizationStates[authorizer][nonce];
    }

    function transferWithAuthorization(
        address from,
        address to,
        uint256 value,
        uint256 validAfter,
        uint256 validBefore,
        bytes32 nonce,
        uint8 v,
        bytes32 r,
        bytes32 s
    ) external {
        _transferWithAuthorization(
            TRANSFER_WITH_AUTHORIZATION_TYPEHASH,
            Terms(from, to, value, validAfter, validBefore, nonce),
            abi.encodePacked(r, s, v)
        );
    }

    function transferWithAuthorization(
        address from,
        address to,
        uint256 value,
        uint256 validAfter,
        uint256 validBefore,
        bytes32 nonce,
        bytes memory signature
    ) external {
        _transferWithAuthorization(
            TRANSFER_WITH_AUTHORIZATION_TYPEHASH, Terms(from, to, value, validAfter, validBefore, nonce), signature
        );
    }

    function receiveWithAuthorization(
        address from,
        address to,
        uint256 value,
        uint256 validAfter,
        uint256 validBefore,
        bytes32 nonce,
        uint8 v,
        bytes32 r,
        bytes32 s
    ) external {
        require(to == msg.sender, "FiatTokenV2: caller must be the payee");
        _transferWithAuthorization(
            RECEIVE_WITH_AUTHORIZATION_TYPEHASH,
            Terms(from, to, value, validAfter, validBefore, nonce),
            abi.encodePacked(r, s, v)
        );
    }

    function cancelAuthorization(address authorizer, bytes32 nonce, uint8 v, bytes32 r, bytes32 s) external {
        _cancelAuthorization(authorizer, nonce, abi.encodePacked(r, s, v));
    }

    function cancelAuthorization(address authorizer, bytes32 nonce, bytes memory signature) external {
        _cancelAuthorization(authorizer, nonce, signature);
    }

    function _transferWithAuthorization(bytes32 typeHash, Terms memory t, bytes memory signature) internal {
        require(block.timestamp > t.validAfter, "FiatTokenV2: authorization is not yet valid");
        require(block.timestamp < t.validBefore, "FiatTokenV2: authorization is expired");
        _requireUnused(t.from, t.nonce);
        bytes32 structHash =
            keccak256(abi.encode(typeHash, t.from, t.to, t.value, t.validAfter, t.validBefore, t.nonce));
        _requireSignedBy(t.from, structHash, signature);
        _authorizationStates[t.from][t.nonce] = true;
        emit AuthorizationUsed(t.from, t.nonce);
        _transfer(t.from, t.to, t.value);
    }

    function _cancelAuthorization(address authorizer, bytes32 nonce, bytes memory signature) internal {
        _requireUnused(authorizer, nonce);
        _requireSignedBy(authorizer, keccak256(abi.encode(CANCEL_AUTHORIZATION_TYPEHASH, authorizer, nonce)), signature);
        _authorizationStates[authorizer][nonce] = true;
        emit AuthorizationCanceled(authorizer, nonce);
    }

    function _requireUnused(address authorizer, bytes32 nonce) private view {
        require(!_authorizationStates[authorizer][nonce], "FiatTokenV2: authorization is used or canceled");
    }

    function _requireSignedBy(address signer, bytes32 structHash, bytes memory signature) private view {
        (address recovered, ECDSA.RecoverError error,) = ECDSA.tryRecover(_hashTypedDataV4(structHash), signature);
        require(error == ECDSA.RecoverError.NoError && recovered == signer, "FiatTokenV2: invalid signature");
    }
}
