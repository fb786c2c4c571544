//! The store: its contract checked directly on SQLite and PostgreSQL (transfers, their attempts, delegations,
//! facilitator tokens), reads that show every change at once, and the purge of what grows with use.

mod attempts;
mod contract;
mod delegations;
mod facilitator;
mod offers;
mod purge;
mod reads;
