//! x402 (docs/api.md §16): the protocol core, the guarded fetch, and paying paywalls through the API.

mod fetch;
mod pay;
mod protocol;
pub mod sale_calls;
mod sell;
mod sell_safety;
