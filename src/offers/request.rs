//! What a caller asks for (§23 `POST …/offers`, the `create_offer` tool): the request's types, and the checks of
//! its terms that need nothing but the request (settlement and forwarding against the method, media types).

use std::collections::BTreeMap;

use serde::Deserialize;
use utoipa::ToSchema;

use super::{OfferError, field};
use crate::store::offers::SettleWhen;

/// Longest MIME type or content type.
const MAX_TYPE_LEN: usize = 255;

/// `POST /api/agents/{id}/offers` and the `create_offer` tool: what to sell and on which terms.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct NewOffer {
    /// One of the agent's chains.
    pub chain: String,
    /// A registry token of `chain` (symbol or address) whose contract implements EIP-3009, e.g. `USDC`.
    pub asset: String,
    /// A decimal string in whole units of the asset, above 0, at most the token's decimals (`"0.01"`).
    pub price: String,
    /// What the 402 tells buyers they pay for.
    pub description: String,
    pub resource: NewResource,
    /// `on_success` (default; `GET`/`HEAD` only: settled once the upstream answered 2xx) or `before_serving`.
    #[schema(pattern = "^(on_success|before_serving)$")]
    pub settle: Option<String>,
    /// What of the buyer's request reaches the upstream: `[]` (default), `["query"]`, `["body"]` (`POST` only), or
    /// one of them as a string.
    #[schema(value_type = Option<Vec<String>>)]
    pub forward: Option<Forward>,
    /// A decimal string in whole native units of `chain`, above 0: what the offer's settlements may cost in gas
    /// over a rolling 24 h.
    pub gas_per_day: String,
    /// 60 to 3600, default 300.
    #[schema(minimum = 60, maximum = 3600)]
    pub max_timeout_seconds: Option<u64>,
}

/// What an offer sells: an upstream URL it fronts, or a stored body.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(untagged)]
pub enum NewResource {
    Upstream(NewUpstream),
    Content(NewContent),
}

/// An upstream fetched through the guarded client (§16's rules, no redirect followed).
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct NewUpstream {
    /// `http` or `https`, without credentials; no private or loopback address unless `OFFER_ALLOW_PRIVATE=true`.
    pub url: String,
    /// `GET` (default), `HEAD` or `POST` (`POST` with `settle: "before_serving"`).
    pub method: Option<String>,
    /// Sent to the upstream with every fetch (e.g. its API key): kept encrypted, never shown.
    pub headers: Option<BTreeMap<String, String>>,
    /// What the 402 advertises, default `application/json`.
    pub mime_type: Option<String>,
}

/// A stored body, served as is.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct NewContent {
    pub content: String,
    pub content_type: String,
}

/// `forward` as given: a list, or one entry as a string.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
pub enum Forward {
    One(String),
    Many(Vec<String>),
}

/// `forward` as a list of distinct `query` / `body`.
pub(super) fn forward_list(forward: Option<Forward>) -> Result<Vec<String>, OfferError> {
    let given = match forward {
        None => Vec::new(),
        Some(Forward::One(one)) => vec![one],
        Some(Forward::Many(many)) => many,
    };
    let mut list: Vec<String> = Vec::new();
    for entry in given {
        let entry = entry.trim().to_ascii_lowercase();
        if entry != "query" && entry != "body" {
            return Err(field("forward", "entries must be query or body"));
        }
        if !list.contains(&entry) {
            list.push(entry);
        }
    }
    Ok(list)
}

/// `settle` and `forward` against the method (`None`: a stored body): `on_success` only for `GET`/`HEAD`; nothing
/// forwarded to a stored body; the buyer's body only to a `POST`.
pub(super) fn check_terms(settle: SettleWhen, method: Option<&str>, forward: &[String]) -> Result<(), OfferError> {
    let Some(method) = method else {
        if !forward.is_empty() {
            return Err(field("forward", "a stored body takes nothing of the buyer's request"));
        }
        return Ok(());
    };
    if settle == SettleWhen::OnSuccess && method == "POST" {
        return Err(field(
            "settle",
            "on_success is for GET and HEAD only: a POST upstream is settled before_serving",
        ));
    }
    if forward.iter().any(|f| f == "body") && method != "POST" {
        return Err(field("forward", "body is forwarded to a POST upstream only"));
    }
    Ok(())
}

/// A MIME type as given (trimmed): `type/subtype`, printable ASCII, at most 255 characters.
pub(super) fn media_type(name: &'static str, text: &str) -> Result<String, OfferError> {
    let text = text.trim();
    let printable = text.bytes().all(|b| (0x20..0x7f).contains(&b));
    match text.split_once('/') {
        Some((kind, sub)) if printable && !kind.is_empty() && !sub.is_empty() && text.len() <= MAX_TYPE_LEN => {
            Ok(text.to_string())
        }
        _ => Err(field(name, "must be a media type such as application/json")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::offers::shown_resource;
    use crate::store::offers::Resource;

    #[test]
    fn settlement_and_forwarding_fit_the_method() {
        let none: Vec<String> = vec![];
        let body = vec!["body".to_string()];
        assert!(check_terms(SettleWhen::OnSuccess, Some("GET"), &none).is_ok());
        assert!(check_terms(SettleWhen::OnSuccess, Some("HEAD"), &none).is_ok());
        assert!(check_terms(SettleWhen::OnSuccess, Some("POST"), &none).is_err());
        assert!(check_terms(SettleWhen::BeforeServing, Some("POST"), &body).is_ok());
        assert!(check_terms(SettleWhen::BeforeServing, Some("GET"), &body).is_err());
        assert!(check_terms(SettleWhen::OnSuccess, None, &none).is_ok());
        assert!(check_terms(SettleWhen::OnSuccess, None, &body).is_err());
    }

    #[test]
    fn forward_is_a_set_of_query_and_body() {
        assert_eq!(forward_list(None).unwrap(), Vec::<String>::new());
        assert_eq!(forward_list(Some(Forward::One("Query".into()))).unwrap(), ["query"]);
        let both = Forward::Many(vec!["body".into(), "query".into(), "body".into()]);
        assert_eq!(forward_list(Some(both)).unwrap(), ["body", "query"]);
        assert!(forward_list(Some(Forward::One("headers".into()))).is_err());
    }

    #[test]
    fn resources_show_origin_and_path_only() {
        let upstream = Resource::Upstream {
            url: "https://user:pw@API.example.com:8443/v1/data?api_key=secret#x".into(),
            method: "GET".into(),
            mime_type: "application/json".into(),
            sealed_headers: None,
        };
        assert_eq!(shown_resource(&upstream), "https://api.example.com:8443/v1/data");
        assert!(media_type("t", "text/plain; charset=utf-8").is_ok());
        assert!(media_type("t", "json").is_err());
    }
}
