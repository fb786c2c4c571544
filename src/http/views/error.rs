//! The error body every failing request answers with, and the `{code, message}` pair also used inside
//! successful bodies (a chain whose balance could not be read, a refused tool call).

use std::collections::BTreeMap;

use serde::Serialize;
use utoipa::ToSchema;

/// `{"error": {"code", "message", "details?"}}`.
#[derive(Debug, Serialize, ToSchema)]
pub struct ErrorBody {
    pub error: ErrorDetail,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct ErrorDetail {
    /// snake_case, e.g. `validation_failed`, `agent_not_found`, `rate_limited`.
    pub code: String,
    pub message: String,
    /// Only on 422 `validation_failed`: which fields failed and why.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub details: Option<FieldErrors>,
}

/// `{"fields": {"<field>": "<problem>"}}`.
#[derive(Debug, Serialize, ToSchema)]
pub struct FieldErrors {
    pub fields: BTreeMap<String, String>,
}

/// A failure reported inside a successful body: `{code, message}`.
#[derive(Debug, Serialize, ToSchema)]
pub struct FailureView {
    /// snake_case, e.g. `chain_not_configured`, `capability_denied`.
    pub code: String,
    pub message: String,
}
