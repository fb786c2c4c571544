//! The store: its contract checked directly on SQLite and PostgreSQL (transfers, their attempts, delegations), reads
//! that show every change at once, and the purge of what grows with use.

mod attempts;
mod contract;
mod delegations;
mod purge;
mod reads;
