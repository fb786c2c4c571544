//! Sponsored user operations and batches (docs/api.md §22) against the real EntryPoint v0.7,
//! `EIP7702StatelessDeleGator` and Pimlico's `SingletonPaymaster` v0.7 on anvil.

pub mod batches;
pub mod bundles;
pub mod calls;
pub mod crash;
pub mod designation_order;
pub mod endpoints;
pub mod parts;
pub mod safety;
pub mod settlements;
pub mod transfers;
