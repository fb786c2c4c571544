//! Finishing touches on the document the handlers' annotations build, applied to every operation alike (so a new
//! route gets them without a line of its own): the errors every body-taking route can answer, the optional `fund`
//! body (an object, never `null`), and the OpenAPI links from `POST /api/agents` to the agent's routes that let a
//! client (or a stateful fuzzer) follow a created agent's `id`; the 5xx every operation (500) or every operation
//! that reaches a chain node or the LLM (502/503/504) can answer; an example on every request body and on the
//! main success response of every operation (`examples.rs`); and on every error response, a refusal the operation
//! really answers with that status (`errors.rs`).

mod errors;
mod examples;

use utoipa::openapi::path::{Operation, PathItem};
use utoipa::openapi::request_body::RequestBody;
use utoipa::openapi::schema::{ArrayItems, Schema};
use utoipa::openapi::{Content, ContentBuilder, OpenApi, Ref, RefOr, Required, ResponseBuilder};

/// Applies the finishing touches; called on the document served and on the one `agentd openapi` prints.
pub fn finish(mut doc: OpenApi) -> OpenApi {
    add_body_errors(&mut doc);
    optional_bodies(&mut doc);
    add_agent_links(&mut doc);
    add_server_errors(&mut doc);
    describe_responses(&mut doc);
    add_examples(&mut doc);
    add_error_examples(&mut doc);
    doc
}

fn operations(item: &mut PathItem) -> impl Iterator<Item = (&'static str, &mut Operation)> {
    [
        ("get", item.get.as_mut()),
        ("put", item.put.as_mut()),
        ("post", item.post.as_mut()),
        ("delete", item.delete.as_mut()),
        ("patch", item.patch.as_mut()),
    ]
    .into_iter()
    .filter_map(|(method, op)| op.map(|op| (method, op)))
}

fn error_response(description: &str) -> RefOr<utoipa::openapi::Response> {
    ResponseBuilder::new()
        .description(description)
        .content(
            "application/json",
            ContentBuilder::new()
                .schema(Some(Ref::from_schema_name("ErrorBody")))
                .build(),
        )
        .into()
}

/// Every route with a JSON body answers 400 for malformed JSON or another content type, and 413 past the limit.
fn add_body_errors(doc: &mut OpenApi) {
    for item in doc.paths.paths.values_mut() {
        for (_, op) in operations(item) {
            if op.request_body.is_none() {
                continue;
            }
            let responses = &mut op.responses.responses;
            responses
                .entry("400".into())
                .or_insert_with(|| error_response("Malformed JSON (`invalid_json`) or not `application/json`"));
            responses.entry("413".into()).or_insert_with(|| {
                error_response("The body is over the limit (`payload_too_large`, 64 KiB by default)")
            });
        }
    }
}

/// `fund` and `reject` take no body or an object: the annotation's `Option` would also admit `null`.
fn optional_bodies(doc: &mut OpenApi) {
    let optional = [
        (
            "/api/agents/{id}/fund",
            "FundRequest",
            "Optional: without a body, one deposit per agent chain in its native coin",
        ),
        (
            "/api/agents/{id}/transfers/{transfer_id}/reject",
            "RejectRequest",
            "Optional: the owner's reason, kept in the rejection's audit entry",
        ),
    ];
    for (path, schema, description) in optional {
        let Some(op) = doc.paths.paths.get_mut(path).and_then(|item| item.post.as_mut()) else {
            continue;
        };
        let mut body = RequestBody::new();
        body.description = Some(description.into());
        body.required = Some(Required::False);
        body.content.insert(
            "application/json".into(),
            ContentBuilder::new()
                .schema(Some(Ref::from_schema_name(schema)))
                .build()
                .into(),
        );
        op.request_body = Some(body.into());
    }
}

/// What a status means when the annotation gives no description of its own.
fn status_description(status: &str) -> &'static str {
    match status {
        "200" => "OK",
        "201" => "Created",
        "204" => "No content",
        "400" => "Malformed request (e.g. `invalid_json`)",
        "401" => "Missing or wrong credential (`missing_token`, `invalid_token`, `unauthorized`, ...)",
        "403" => "The credential may not do this (`forbidden`, `policy_denied`, ...)",
        "404" => "No such resource (`agent_not_found`, `conversation_not_found`, `transfer_not_found`, ...)",
        "409" => "Conflicts with the resource's state",
        "410" => "The agent is deleted (`agent_inactive`)",
        "413" => "The body is over the limit (`payload_too_large`)",
        "422" => "A field is invalid (`validation_failed`, ...)",
        "429" => "Too many requests (`rate_limited`); see Retry-After",
        "500" => "Internal error (`internal_error`); details only in the server's log",
        "502" => {
            "A chain node, the LLM or a paid resource failed (`upstream_unavailable`, or `token_unavailable`: \
                  a token address that does not answer as an ERC-20)"
        }
        "503" => {
            "A chain or the LLM is not configured or not usable (`upstream_unavailable`, or \
                  `token_decimals_mismatch`: the token's decimals on chain differ from the registry's)"
        }
        "504" => "A chain node, the LLM or a paid resource did not answer in time (`upstream_timeout`)",
        _ => "See the error code",
    }
}

/// OpenAPI requires a description on every response object; generators that validate the document refuse it
/// without one.
fn describe_responses(doc: &mut OpenApi) {
    for item in doc.paths.paths.values_mut() {
        for (_, op) in operations(item) {
            for (status, response) in op.responses.responses.iter_mut() {
                if let RefOr::T(response) = response
                    && response.description.trim().is_empty()
                {
                    response.description = status_description(status).to_string();
                }
            }
        }
    }
}

/// Operations that reach a chain node or the LLM, and so can answer 502/503/504.
const UPSTREAM_OPERATIONS: &[&str] = &[
    "create_transfer",
    "approve_transfer",
    "cancel_transfer",
    "fetch_paid",
    "chat",
    "chat_stream",
];

/// 500 on every operation; 502/503/504 on the operations that reach a chain node or the LLM. An annotation's own
/// description is kept.
fn add_server_errors(doc: &mut OpenApi) {
    for item in doc.paths.paths.values_mut() {
        for (_, op) in operations(item) {
            let upstream = op
                .operation_id
                .as_deref()
                .is_some_and(|id| UPSTREAM_OPERATIONS.contains(&id));
            let statuses: &[&str] = if upstream {
                &["500", "502", "503", "504"]
            } else {
                &["500"]
            };
            for status in statuses {
                op.responses
                    .responses
                    .entry((*status).into())
                    .or_insert_with(|| error_response(status_description(status)));
            }
        }
    }
}

/// The example of a schema as the document writes it: a named component, or a list of one.
fn schema_example(schema: &RefOr<Schema>) -> Option<serde_json::Value> {
    match schema {
        RefOr::Ref(reference) => examples::component(reference.ref_location.rsplit('/').next()?),
        RefOr::T(Schema::Array(array)) => match &array.items {
            ArrayItems::RefOrSchema(item) => Some(serde_json::Value::Array(vec![schema_example(item)?])),
            ArrayItems::False => None,
        },
        RefOr::T(_) => None,
    }
}

fn set_example(media_type: &str, content: &mut RefOr<Content>) {
    let RefOr::T(content) = content else {
        return;
    };
    if content.example.is_some() || !content.examples.is_empty() {
        return;
    }
    content.example = match &content.schema {
        Some(schema) if media_type == "application/json" => schema_example(schema),
        _ => examples::text(media_type),
    };
}

/// An example on every request body and on the lowest 2xx response (the main success) of every operation.
fn add_examples(doc: &mut OpenApi) {
    for item in doc.paths.paths.values_mut() {
        for (_, op) in operations(item) {
            if let Some(RefOr::T(body)) = op.request_body.as_mut() {
                for (media_type, content) in body.content.iter_mut() {
                    set_example(media_type, content);
                }
            }
            let success = op
                .responses
                .responses
                .iter_mut()
                .filter(|(status, _)| status.starts_with('2'))
                .min_by(|(a, _), (b, _)| a.cmp(b));
            if let Some((_, RefOr::T(response))) = success {
                for (media_type, content) in response.content.iter_mut() {
                    set_example(media_type, content);
                }
            }
        }
    }
}

/// An example body on every 4xx/5xx response: the refusal `errors::example` gives for the operation and status.
fn add_error_examples(doc: &mut OpenApi) {
    for item in doc.paths.paths.values_mut() {
        for (_, op) in operations(item) {
            let operation_id = op.operation_id.clone().unwrap_or_default();
            for (status, response) in op.responses.responses.iter_mut() {
                let RefOr::T(response) = response else {
                    continue;
                };
                if !(status.starts_with('4') || status.starts_with('5')) {
                    continue;
                }
                let Some(error) = errors::example(&operation_id, status) else {
                    continue;
                };
                for content in response.content.values_mut() {
                    if let RefOr::T(content) = content
                        && content.example.is_none()
                        && content.examples.is_empty()
                    {
                        content.example = Some(error.body());
                    }
                }
            }
        }
    }
}

/// `create_agent` -> `CreateAgent`.
fn link_name(operation_id: &str) -> String {
    operation_id
        .split('_')
        .map(|w| {
            let mut chars = w.chars();
            chars
                .next()
                .map(|c| c.to_ascii_uppercase().to_string() + chars.as_str())
                .unwrap_or_default()
        })
        .collect()
}

/// Links from the created agent to every route under `/api/agents/{id}` but the transfer-scoped ones, and to the
/// conversations list (keyed by `agent_id`).
fn add_agent_links(doc: &mut OpenApi) {
    let mut links = Vec::new();
    for (path, item) in doc.paths.paths.iter_mut() {
        for (method, op) in operations(item) {
            let Some(operation_id) = op.operation_id.clone() else {
                continue;
            };
            let parameter = if path.starts_with("/api/agents/{id}") && !path.contains("{transfer_id}") {
                "path.id"
            } else if path == "/api/conversations" && method == "get" {
                "query.agent_id"
            } else {
                continue;
            };
            let link = utoipa::openapi::link::LinkBuilder::new()
                .operation_id(&operation_id)
                .parameter(parameter, "$response.body#/id")
                .description(format!(
                    "{} {path} of the agent just created",
                    method.to_ascii_uppercase()
                ))
                .build();
            links.push((link_name(&operation_id), link));
        }
    }
    let created = doc
        .paths
        .paths
        .get_mut("/api/agents")
        .and_then(|item| item.post.as_mut())
        .and_then(|op| op.responses.responses.get_mut("201"));
    if let Some(RefOr::T(response)) = created {
        for (name, link) in links {
            response.links.insert(name, link.into());
        }
    }
}
