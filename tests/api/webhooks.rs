//! Webhooks (docs/api.md §19): signed deliveries to a real receiver.

mod delivery;
