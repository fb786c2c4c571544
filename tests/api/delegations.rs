//! On-chain delegations (docs/api.md §21) against the real MetaMask Delegation Framework on anvil.

mod budget;
pub mod framework;
