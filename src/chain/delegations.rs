//! Reads of the delegation framework (§21): an account's code, and `eth_call`s at the latest block whose calldata
//! and answers `domain::delegation` builds and reads. A revert is an answer here (`Read::Reverted`), not a node
//! failure: an `isValidSignature` that reverts refuses the signature.

use alloy::eips::BlockId;
use alloy::primitives::{Address, Bytes};
use alloy::providers::Provider;
use alloy::rpc::types::TransactionRequest;

use super::client::ChainClient;
use super::error::{ChainError, RefusalKind};

/// What an `eth_call` came to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Read {
    Answer(Bytes),
    /// The call reverted (or the node refused it as a call).
    Reverted,
}

impl ChainClient {
    /// The code at `address` at the latest block (`0xef0100 ‖ address` for an EIP-7702 designation).
    pub async fn code(&self, address: Address) -> Result<Bytes, ChainError> {
        let p = self.provider();
        self.call(|| p.get_code_at(address)).await
    }

    /// `eth_call` of `data` on `to` at the latest block.
    pub async fn read(&self, to: Address, data: Bytes) -> Result<Read, ChainError> {
        // At the latest block, named: a node's default may be its pending state, whose figures already count the
        // transactions in its pool (§21 reads `available` at the latest block).
        self.read_in(to, data, BlockId::latest()).await
    }

    /// `eth_call` of `data` on `to` at block `number`: reads that must agree with each other are pinned to one.
    pub async fn read_at(&self, to: Address, data: Bytes, number: u64) -> Result<Read, ChainError> {
        self.read_in(to, data, BlockId::number(number)).await
    }

    async fn read_in(&self, to: Address, data: Bytes, block: BlockId) -> Result<Read, ChainError> {
        let p = self.provider();
        let request = TransactionRequest::default().to(to).input(data.into());
        match self.call(|| p.call(request.clone()).block(block)).await {
            Ok(out) => Ok(Read::Answer(out)),
            Err(ChainError::Refused {
                reason: RefusalKind::Other | RefusalKind::TokenBalanceTooLow,
                ..
            }) => Ok(Read::Reverted),
            Err(e) => Err(e),
        }
    }
}
