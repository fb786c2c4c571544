//! Agents (docs/api.md §3, §5): their lifecycle, their wallets and the chains they can use.

mod chains;
mod lifecycle;
mod wallets;
