//! `ApiJson`: the JSON body extractor that answers with the contract's error codes (400/413/422).

use axum::body::Bytes;
use axum::extract::{FromRequest, Request};
use axum::http::{StatusCode, header};
use serde::de::DeserializeOwned;

use super::error::AppError;

/// Like `axum::Json`, with failures mapped to `invalid_content_type`/`invalid_json` (400), `payload_too_large`
/// (413) and `validation_failed` (422: wrong types, missing or unknown fields).
pub struct ApiJson<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequest<S> for ApiJson<T> {
    type Rejection = AppError;

    async fn from_request(req: Request, state: &S) -> Result<Self, Self::Rejection> {
        let content_type = req
            .headers()
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default();
        let essence = content_type
            .split(';')
            .next()
            .unwrap_or_default()
            .trim()
            .to_ascii_lowercase();
        if essence != "application/json" && !essence.ends_with("+json") {
            return Err(AppError::BadRequest {
                code: "invalid_content_type",
                message: "expected Content-Type: application/json".into(),
            });
        }
        let body = Bytes::from_request(req, state).await.map_err(|e| {
            if e.status() == StatusCode::PAYLOAD_TOO_LARGE {
                AppError::PayloadTooLarge
            } else {
                AppError::InvalidJson("the body could not be read".into())
            }
        })?;
        decode(&body).map(ApiJson)
    }
}

/// Parses JSON text (syntax errors are 400) and then maps it onto `T` (shape errors are 422, naming the field).
pub fn decode<T: DeserializeOwned>(body: &[u8]) -> Result<T, AppError> {
    let value: serde_json::Value =
        serde_json::from_slice(body).map_err(|_| AppError::InvalidJson("check the syntax".into()))?;
    shape(value)
}

/// Maps a parsed JSON value onto `T`; shape errors are 422, naming the field. For handlers that keep the value
/// itself (idempotency compares bodies as JSON values).
pub fn shape<T: DeserializeOwned>(value: serde_json::Value) -> Result<T, AppError> {
    // Every request body is a JSON object: serde would also read a struct from an array (`[null, null]`).
    if !value.is_object() {
        return Err(AppError::field("body", "must be a JSON object"));
    }
    serde_path_to_error::deserialize(value).map_err(|e| {
        let path = e.path().to_string();
        let field = if path.is_empty() || path == "." {
            "body".to_string()
        } else {
            path
        };
        AppError::field(&field, e.inner().to_string())
    })
}

/// Parses an optional JSON body: empty means `T::default()`; otherwise the same errors as `ApiJson`.
pub fn parse_optional_body<T: DeserializeOwned + Default>(body: &[u8]) -> Result<T, AppError> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Ok(T::default());
    }
    decode(body)
}
