//! `ApiJson`: the JSON body extractor that answers with the contract's error codes (400/413/422).

use axum::extract::rejection::JsonRejection;
use axum::extract::{FromRequest, Request};
use axum::http::StatusCode;
use serde::de::DeserializeOwned;

use super::error::AppError;

/// Like `axum::Json`, with rejections mapped to `invalid_json` (400), `payload_too_large` (413) and
/// `validation_failed` (422, wrong types, missing or unknown fields).
pub struct ApiJson<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequest<S> for ApiJson<T> {
    type Rejection = AppError;

    async fn from_request(req: Request, state: &S) -> Result<Self, Self::Rejection> {
        match axum::Json::<T>::from_request(req, state).await {
            Ok(axum::Json(value)) => Ok(ApiJson(value)),
            Err(rejection) => Err(map_rejection(rejection)),
        }
    }
}

fn map_rejection(rejection: JsonRejection) -> AppError {
    match rejection {
        JsonRejection::JsonDataError(e) => {
            let detail = e.body_text();
            let detail = detail
                .strip_prefix("Failed to deserialize the JSON body into the target type: ")
                .unwrap_or(&detail);
            let (field, message) = match detail.split_once(": ") {
                Some((path, msg)) if !path.contains(' ') => (path.to_string(), msg.to_string()),
                _ => ("body".to_string(), detail.to_string()),
            };
            AppError::field(&field, message)
        }
        JsonRejection::JsonSyntaxError(_) => AppError::InvalidJson("check the syntax".into()),
        JsonRejection::MissingJsonContentType(_) => AppError::BadRequest {
            code: "invalid_content_type",
            message: "expected Content-Type: application/json".into(),
        },
        JsonRejection::BytesRejection(e) if e.status() == StatusCode::PAYLOAD_TOO_LARGE => AppError::PayloadTooLarge,
        other => AppError::InvalidJson(other.body_text()),
    }
}

/// Parses an optional JSON body: empty means `T::default()`; otherwise the same errors as `ApiJson`.
pub fn parse_optional_body<T: DeserializeOwned + Default>(body: &[u8]) -> Result<T, AppError> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Ok(T::default());
    }
    let mut de = serde_json::Deserializer::from_slice(body);
    let value = T::deserialize(&mut de).and_then(|v| de.end().map(|()| v));
    value.map_err(|e| match e.classify() {
        serde_json::error::Category::Data => AppError::field("body", e.to_string()),
        _ => AppError::InvalidJson("check the syntax".into()),
    })
}
