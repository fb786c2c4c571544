//! What the MCP server shows of the tool registry (`crate::tools`): the `tools/list` entries an agent's
//! capabilities allow, with behaviour hints per effect, and a tool's outcome as a `tools/call` result. Nothing
//! here names a tool: a tool added to the registry is listed and callable as it is.

use rmcp::model::{CallToolResult, JsonObject, Tool, ToolAnnotations};
use serde_json::{Value, json};

use crate::domain::agent::Agent;
use crate::tools::{self, Effect, ToolResult};

/// The `tools/list` entries for the agent: only the tools its capabilities allow.
pub fn tools_for(agent: &Agent) -> Vec<Tool> {
    tools::offered(agent)
        .map(|tool| {
            let schema = match tool.schema(&agent.chains) {
                Value::Object(schema) => schema,
                _ => JsonObject::new(),
            };
            let title = title(tool.name);
            Tool::new(tool.name, tool.description, schema)
                .with_title(title.clone())
                .with_annotations(annotations(tool.effect, title))
        })
        .collect()
}

/// Hints per effect: reads change nothing; reading the service's own records is a closed world; moving funds is
/// irreversible and not idempotent.
fn annotations(effect: Effect, title: String) -> ToolAnnotations {
    let hints = ToolAnnotations::with_title(title);
    match effect {
        Effect::MovesFunds => hints
            .read_only(false)
            .destructive(true)
            .idempotent(false)
            .open_world(true),
        Effect::ChangesRecords => hints
            .read_only(false)
            .destructive(false)
            .idempotent(false)
            .open_world(true),
        Effect::ReadsRecords => hints.read_only(true).open_world(false),
        Effect::ReadsChain => hints.read_only(true).open_world(true),
    }
}

/// `get_balance` -> `Get balance`.
fn title(name: &str) -> String {
    let spaced = name.replace('_', " ");
    let mut chars = spaced.chars();
    match chars.next() {
        Some(first) => first.to_uppercase().chain(chars).collect(),
        None => spaced,
    }
}

/// The `tools/call` result: the JSON as text content and as structured content; a refusal is `isError: true`
/// with `{"error": {code, message}}`.
pub fn call_result(result: &ToolResult) -> CallToolResult {
    match result {
        Ok(value) => CallToolResult::structured(value.clone()),
        Err(e) => CallToolResult::structured_error(json!({ "error": e.to_json() })),
    }
}

/// Only the argument names the registry's tools declare are kept (chains, addresses, amounts, hashes, limits:
/// nothing secret). Anything else a client adds is left out of the audit record, and long values are cut. A `url`
/// (`pay_http`) is kept without its query, fragment and credentials, which may hold the caller's keys (§16).
pub fn audited_arguments(arguments: &Value) -> Value {
    let Some(object) = arguments.as_object() else {
        return json!({});
    };
    let keys = tools::argument_names();
    let kept = object
        .iter()
        .filter(|(key, _)| keys.contains(key))
        .map(|(key, value)| {
            let value = match (key.as_str(), value.as_str()) {
                ("url", Some(url)) => json!(audited_url(url)),
                _ => value.clone(),
            };
            let text = value.to_string();
            let value = if text.len() > 200 {
                json!(format!("{}...", text.chars().take(200).collect::<String>()))
            } else {
                value
            };
            (key.clone(), value)
        })
        .collect();
    Value::Object(kept)
}

/// A URL as the audit log keeps it: scheme, host, port and path only. Text that does not parse as a URL (and so
/// was never fetched) is not kept at all.
fn audited_url(text: &str) -> String {
    match reqwest::Url::parse(text) {
        Ok(mut url) => {
            url.set_query(None);
            url.set_fragment(None);
            // Both fail only for URLs that cannot carry credentials.
            let _ = url.set_username("");
            let _ = url.set_password(None);
            url.to_string()
        }
        Err(_) => "(not a URL)".to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tools::ToolError;

    #[test]
    fn results_carry_text_and_structured_content() {
        let ok = serde_json::to_value(call_result(&Ok(json!({ "wei": "1" })))).unwrap();
        assert_eq!(ok["isError"], false);
        assert_eq!(ok["structuredContent"]["wei"], "1");
        let text: Value = serde_json::from_str(ok["content"][0]["text"].as_str().unwrap()).unwrap();
        assert_eq!(text, ok["structuredContent"]);
        let err = call_result(&Err(ToolError::new("capability_denied", "no")));
        let err = serde_json::to_value(err).unwrap();
        assert_eq!(err["isError"], true);
        assert_eq!(err["structuredContent"]["error"]["code"], "capability_denied");
    }

    #[test]
    fn audited_arguments_keep_only_tool_keys() {
        let args = json!({ "chain": "base", "amount": "0.1", "api_key": "secret", "to": "0xabc" });
        assert_eq!(
            audited_arguments(&args),
            json!({ "chain": "base", "amount": "0.1", "to": "0xabc" })
        );
        let paid =
            json!({ "url": "https://user:pw@api.example.com:8443/v1/data?api_key=k1#frag", "max_amount": "0.05" });
        assert_eq!(
            audited_arguments(&paid),
            json!({ "url": "https://api.example.com:8443/v1/data", "max_amount": "0.05" })
        );
        assert_eq!(audited_arguments(&json!({ "url": "api_key=k1" }))["url"], "(not a URL)");
        let long = json!({ "address": "x".repeat(500) });
        assert!(audited_arguments(&long)["address"].as_str().unwrap().len() < 220);
    }

    #[test]
    fn hints_follow_effects() {
        let hints = |effect| serde_json::to_value(annotations(effect, "t".into())).unwrap();
        assert_eq!(hints(Effect::ReadsChain)["readOnlyHint"], true);
        assert_eq!(hints(Effect::ReadsRecords)["readOnlyHint"], true);
        assert_eq!(hints(Effect::ReadsRecords)["openWorldHint"], false);
        let send = hints(Effect::MovesFunds);
        assert_eq!(send["readOnlyHint"], false);
        assert_eq!(send["destructiveHint"], true);
        assert_eq!(send["idempotentHint"], false);
        assert_eq!(title("send_native"), "Send native");
    }
}
