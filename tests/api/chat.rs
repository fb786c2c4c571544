//! Chat (docs/api.md §6, §7): the builtin engine, which messages move money, the event stream, the OpenAI-compatible
//! provider, conversations, and the streams' leases on their token.

mod builtin;
mod conversations;
mod intent;
mod openai;
mod stream;
mod stream_leases;
