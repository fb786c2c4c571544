//! Contract calls (docs/api.md §18): calls against Uniswap V2 on anvil, their limits, EIP-712 signatures, and the
//! limits holding against a hostile agent.

mod account;
mod contract;
mod hostile;
mod limits;
mod typed_data;
