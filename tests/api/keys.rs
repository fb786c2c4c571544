//! The agents' keys: export (docs/api.md §4), `KEY_BACKEND=pkcs11` (§20), and secrets at rest and in logs.

mod export;
mod pkcs11;
mod secrets;
