//! The service's own way out to the network: `egress`, the guarded HTTP client every request to an address a caller
//! chose goes through (an agent's x402 fetch, §16; webhook deliveries, §19).

pub mod egress;
