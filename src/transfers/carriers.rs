//! How an outflow reaches the chain (its carrier), the second axis beside what it does (its purpose, `kinds`): each
//! carrier signs and settles in its own way, in a file of its own under `carriers/`. Today the agent's wallet
//! carries every on-chain outflow by default (`wallet`: an EIP-1559 transaction at the wallet's nonce); the operator's
//! sponsorship carries it when asked (`operation`: a user operation of the agent's own account in a bundle, §22);
//! an x402 authorization and a typed-data signature are handed out signed, and nothing of the agent's is broadcast
//! for them.

pub(super) mod operation;
pub(super) mod wallet;

/// How an outflow reaches the chain.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Carrier {
    /// A transaction of the agent's wallet: a nonce of its own, a broadcast, a receipt (`wallet`).
    Wallet,
    /// A user operation of the agent's account, its gas paid by the operator's sponsorship, carried in a bundle
    /// the sponsor key sends; a nonce of the account's EntryPoint sequence (`operation`).
    Operation,
    /// Nothing of the agent's is broadcast: the signed digest is handed out, an x402 authorization in the paid request
    /// (the payee settles it), a typed-data signature to its caller. No nonce, no lock.
    Handed,
}

impl Carrier {
    /// Whether it takes a nonce of the agent's wallet, the send lock of (agent, chain) and a broadcast.
    pub(super) fn is_transaction(self) -> bool {
        match self {
            Carrier::Wallet | Carrier::Operation => true,
            Carrier::Handed => false,
        }
    }
}
