//! The service itself: starting and serving, health, metrics, the HTTP basics (errors, body limits, CORS), database
//! connections, the OpenAPI document, the module layering, and the demo and the guide run as written.

mod architecture;
mod body_limits;
mod cors;
mod database_connections;
mod demo;
mod errors;
mod guide;
mod health;
mod metrics;
mod openapi;
mod serve;
pub mod startup;
