//! The MCP dispatcher: JSON-RPC 2.0 framing (requests, notifications, batches, errors) and the methods
//! `initialize`, `ping`, `tools/list` and `tools/call`. Transport-agnostic: stdio and `POST /mcp` both feed it.

use serde_json::{Map, Value, json};

use super::session::{Session, SessionError};
use crate::domain::agent::Agent;
use crate::state::AppState;
use crate::store::AuditEvent;
use crate::tools::{self, Effect, ToolContext, ToolError};

/// Protocol versions this server speaks, newest first.
pub const SUPPORTED_VERSIONS: &[&str] = &["2025-06-18", "2025-03-26", "2024-11-05"];

pub const PARSE_ERROR: i64 = -32700;
pub const INVALID_REQUEST: i64 = -32600;
pub const METHOD_NOT_FOUND: i64 = -32601;
pub const INVALID_PARAMS: i64 = -32602;
pub const INTERNAL_ERROR: i64 = -32603;
/// Messages one batch may carry: each may be a tool call that queries every chain, so a batch is bounded.
pub const MAX_BATCH: usize = 20;

/// Server-defined: the access token no longer authorizes the session (agent deleted, token revoked).
pub const UNAUTHORIZED: i64 = -32001;

/// A JSON-RPC error object.
#[derive(Debug, Clone, PartialEq)]
pub struct RpcError {
    pub code: i64,
    pub message: String,
    pub data: Option<Value>,
}

impl RpcError {
    pub fn new(code: i64, message: impl Into<String>) -> Self {
        RpcError {
            code,
            message: message.into(),
            data: None,
        }
    }

    fn invalid_params(message: impl Into<String>) -> Self {
        Self::new(INVALID_PARAMS, message)
    }

    fn to_json(&self) -> Value {
        let mut error = json!({ "code": self.code, "message": self.message });
        if let Some(data) = &self.data {
            error["data"] = data.clone();
        }
        error
    }
}

impl From<SessionError> for RpcError {
    fn from(err: SessionError) -> Self {
        let code = if matches!(err, SessionError::Store(_)) {
            INTERNAL_ERROR
        } else {
            UNAUTHORIZED
        };
        RpcError {
            code,
            message: err.to_string(),
            data: Some(json!({ "code": err.code() })),
        }
    }
}

/// A JSON-RPC response (`result` or `error`) for `id`.
pub fn response(id: Value, outcome: Result<Value, RpcError>) -> Value {
    match outcome {
        Ok(result) => json!({ "jsonrpc": "2.0", "id": id, "result": result }),
        Err(error) => json!({ "jsonrpc": "2.0", "id": id, "error": error.to_json() }),
    }
}

/// The version to answer `initialize` with: the client's when supported, else the newest.
pub fn negotiate_version(requested: &str) -> &'static str {
    SUPPORTED_VERSIONS
        .iter()
        .copied()
        .find(|v| *v == requested)
        .unwrap_or(SUPPORTED_VERSIONS[0])
}

/// Answers the MCP requests of one session (one agent).
pub struct Dispatcher {
    state: AppState,
    session: Session,
    /// `stdio` or `http`, recorded in the audit detail.
    transport: &'static str,
}

impl Dispatcher {
    pub fn new(state: AppState, session: Session, transport: &'static str) -> Self {
        Dispatcher {
            state,
            session,
            transport,
        }
    }

    /// Handles one transport message (a JSON text: a message or a batch). `None` when nothing is to be sent back
    /// (notifications and responses only).
    pub async fn handle_text(&self, text: &[u8]) -> Option<Value> {
        let message: Value = match serde_json::from_slice(text) {
            Ok(message) => message,
            Err(e) => {
                let error = RpcError::new(PARSE_ERROR, format!("Parse error: {e}"));
                return Some(response(Value::Null, Err(error)));
            }
        };
        match message {
            Value::Array(batch) if batch.is_empty() => Some(response(
                Value::Null,
                Err(RpcError::new(INVALID_REQUEST, "Invalid Request: empty batch")),
            )),
            Value::Array(batch) if batch.len() > MAX_BATCH => Some(response(
                Value::Null,
                Err(RpcError::new(
                    INVALID_REQUEST,
                    format!("Invalid Request: a batch carries at most {MAX_BATCH} messages"),
                )),
            )),
            Value::Array(batch) => {
                let mut replies = Vec::new();
                for message in batch {
                    replies.extend(self.handle_message(message).await);
                }
                (!replies.is_empty()).then_some(Value::Array(replies))
            }
            message => self.handle_message(message).await,
        }
    }

    /// Handles one JSON-RPC message: a request gets a response, a notification or a response gets nothing.
    pub async fn handle_message(&self, message: Value) -> Option<Value> {
        let Value::Object(message) = message else {
            return Some(response(
                Value::Null,
                Err(RpcError::new(INVALID_REQUEST, "Invalid Request: not an object")),
            ));
        };
        let id = message.get("id").cloned();
        let id_ok = matches!(id, None | Some(Value::String(_)) | Some(Value::Number(_)));
        let method = message.get("method").and_then(Value::as_str);
        if message.get("jsonrpc").and_then(Value::as_str) != Some("2.0") || !id_ok {
            let id = if id_ok { id.unwrap_or(Value::Null) } else { Value::Null };
            let error = RpcError::new(
                INVALID_REQUEST,
                "Invalid Request: expected JSON-RPC 2.0 with a string or number id",
            );
            return Some(response(id, Err(error)));
        }
        let Some(method) = method else {
            // A response to a server request (this server sends none) is ignored.
            if message.contains_key("result") || message.contains_key("error") {
                return None;
            }
            let error = RpcError::new(INVALID_REQUEST, "Invalid Request: no method");
            return Some(response(id.unwrap_or(Value::Null), Err(error)));
        };
        let params = match message.get("params") {
            None | Some(Value::Null) => Ok(Map::new()),
            Some(Value::Object(params)) => Ok(params.clone()),
            Some(_) => Err(RpcError::invalid_params("params must be an object")),
        };
        let Some(id) = id else {
            tracing::debug!(method, "MCP notification");
            return None;
        };
        let outcome = match params {
            Ok(params) => self.request(method, &params).await,
            Err(e) => Err(e),
        };
        if let Err(e) = &outcome {
            tracing::debug!(method, code = e.code, "MCP request failed: {}", e.message);
        }
        Some(response(id, outcome))
    }

    async fn request(&self, method: &str, params: &Map<String, Value>) -> Result<Value, RpcError> {
        match method {
            "initialize" => self.initialize(params).await,
            "ping" => Ok(json!({})),
            "tools/list" => {
                let agent = self.session.agent(&self.state).await?;
                Ok(json!({ "tools": tool_list(&agent) }))
            }
            "tools/call" => self.call_tool(params).await,
            _ => Err(RpcError::new(METHOD_NOT_FOUND, format!("Method not found: {method}"))),
        }
    }

    async fn initialize(&self, params: &Map<String, Value>) -> Result<Value, RpcError> {
        let requested = params
            .get("protocolVersion")
            .and_then(Value::as_str)
            .ok_or_else(|| RpcError::invalid_params("protocolVersion (a string) is required"))?;
        let agent = self.session.agent(&self.state).await?;
        let client = params
            .get("clientInfo")
            .and_then(|c| c.get("name"))
            .and_then(Value::as_str);
        tracing::info!(agent_id = %agent.id, client, requested, "MCP session initialized");
        Ok(json!({
            "protocolVersion": negotiate_version(requested),
            "capabilities": { "tools": { "listChanged": false } },
            "serverInfo": { "name": "agentd", "title": "agentd", "version": env!("CARGO_PKG_VERSION") },
            "instructions": format!(
                "Tools of the agentd agent \"{}\" on its chains ({}). Amounts are decimal strings in whole native \
                 units (\"0.01\"); results give exact wei as strings. Transfers are signed by the service within the \
                 agent's spending cap.",
                agent.name,
                agent.chains.join(", ")
            ),
        }))
    }

    async fn call_tool(&self, params: &Map<String, Value>) -> Result<Value, RpcError> {
        let name = params
            .get("name")
            .and_then(Value::as_str)
            .ok_or_else(|| RpcError::invalid_params("name (a string) is required"))?;
        let arguments = match params.get("arguments") {
            None | Some(Value::Null) => Value::Object(Map::new()),
            Some(args @ Value::Object(_)) => args.clone(),
            Some(_) => return Err(RpcError::invalid_params("arguments must be an object")),
        };
        if tools::find(name).is_none() {
            return Err(RpcError::invalid_params(format!("Unknown tool: {name}")));
        }
        let agent = match self.session.agent(&self.state).await {
            Ok(agent) => agent,
            Err(e) => {
                self.audit(name, &arguments, Err(e.code()), 0, None).await;
                return Err(e.into());
            }
        };
        let services = self.state.tool_services();
        let toolbox = ToolContext {
            services: &services,
            agent: &agent,
            connected_wallet: None,
            conversation_id: None,
            actor: crate::auth::Actor::Mcp,
        };
        let (result, duration_ms) = toolbox.execute(name, &arguments).await;
        let tx_hash = result
            .as_ref()
            .ok()
            .and_then(|r| r.get("tx_hash"))
            .filter(|_| tools::find(name).is_some_and(|tool| tool.effect == Effect::MovesFunds))
            .cloned();
        let outcome = result.as_ref().map(|_| ()).map_err(|e| e.code);
        self.audit(name, &arguments, outcome, duration_ms, tx_hash).await;
        Ok(call_result(result))
    }

    /// Records a tool call in the audit table: the tool, its outcome and its (non-secret) arguments.
    async fn audit(
        &self,
        tool: &str,
        arguments: &Value,
        outcome: Result<(), &str>,
        duration_ms: u64,
        tx_hash: Option<Value>,
    ) {
        let mut detail = json!({
            "transport": self.transport,
            "tool": tool,
            "ok": outcome.is_ok(),
            "arguments": audited_arguments(arguments),
            "duration_ms": duration_ms,
        });
        if let Err(code) = outcome {
            detail["error_code"] = json!(code);
        }
        if let Some(hash) = tx_hash {
            detail["tx_hash"] = hash;
        }
        let event = AuditEvent {
            agent_id: self.session.agent_id(),
            action: "mcp_tool_call",
            actor: crate::auth::Actor::Mcp.as_str().into(),
            detail,
        };
        if let Err(e) = self.state.store.insert_audit(&event).await {
            tracing::error!(agent_id = %event.agent_id, tool, error = %e, "could not audit an MCP tool call");
        }
    }
}

/// The `tools/call` result: the JSON as text content and as structured content.
pub fn call_result(result: Result<Value, ToolError>) -> Value {
    let (value, is_error) = match result {
        Ok(value) => (value, false),
        Err(e) => (json!({ "error": e.to_json() }), true),
    };
    json!({
        "content": [{ "type": "text", "text": value.to_string() }],
        "structuredContent": value,
        "isError": is_error,
    })
}

/// Only the argument names the registry's tools declare are kept (chains, addresses, amounts, hashes, limits:
/// nothing secret). Anything else a client adds is left out of the audit record, and long values are cut.
fn audited_arguments(arguments: &Value) -> Value {
    let Some(object) = arguments.as_object() else {
        return json!({});
    };
    let keys = tools::argument_names();
    let kept = object
        .iter()
        .filter(|(key, _)| keys.contains(key))
        .map(|(key, value)| {
            let text = value.to_string();
            let value = if text.len() > 200 {
                json!(format!("{}...", text.chars().take(200).collect::<String>()))
            } else {
                value.clone()
            };
            (key.clone(), value)
        })
        .collect();
    Value::Object(kept)
}

/// The `tools/list` entries for the agent: only the tools its capabilities allow, with behaviour hints.
pub fn tool_list(agent: &Agent) -> Vec<Value> {
    tools::offered(agent)
        .map(|tool| {
            let title = title(tool.name);
            json!({
                "name": tool.name,
                "title": title,
                "description": tool.description,
                "inputSchema": tool.schema(&agent.chains),
                "annotations": annotations(tool.effect, &title),
            })
        })
        .collect()
}

/// Hints per effect: reads change nothing; reading the service's own records is a closed world; moving funds is
/// irreversible and not idempotent.
fn annotations(effect: Effect, title: &str) -> Value {
    match effect {
        Effect::MovesFunds => json!({
            "title": title,
            "readOnlyHint": false,
            "destructiveHint": true,
            "idempotentHint": false,
            "openWorldHint": true,
        }),
        Effect::ReadsRecords => json!({ "title": title, "readOnlyHint": true, "openWorldHint": false }),
        Effect::ReadsChain => json!({ "title": title, "readOnlyHint": true, "openWorldHint": true }),
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_are_echoed_when_supported_else_the_newest() {
        assert_eq!(negotiate_version("2024-11-05"), "2024-11-05");
        assert_eq!(negotiate_version("2025-03-26"), "2025-03-26");
        assert_eq!(negotiate_version("2025-06-18"), "2025-06-18");
        assert_eq!(negotiate_version("2099-01-01"), "2025-06-18");
        assert_eq!(negotiate_version(""), "2025-06-18");
    }

    #[test]
    fn results_carry_text_and_structured_content() {
        let ok = call_result(Ok(json!({ "wei": "1" })));
        assert_eq!(ok["isError"], false);
        assert_eq!(ok["structuredContent"]["wei"], "1");
        let text: Value = serde_json::from_str(ok["content"][0]["text"].as_str().unwrap()).unwrap();
        assert_eq!(text, ok["structuredContent"]);
        let err = call_result(Err(ToolError::new("capability_denied", "no")));
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
        let long = json!({ "address": "x".repeat(500) });
        assert!(audited_arguments(&long)["address"].as_str().unwrap().len() < 220);
    }

    #[test]
    fn hints_follow_effects() {
        assert_eq!(annotations(Effect::ReadsChain, "t")["readOnlyHint"], true);
        assert_eq!(annotations(Effect::ReadsRecords, "t")["readOnlyHint"], true);
        assert_eq!(annotations(Effect::ReadsRecords, "t")["openWorldHint"], false);
        let send = annotations(Effect::MovesFunds, "t");
        assert_eq!(send["readOnlyHint"], false);
        assert_eq!(send["destructiveHint"], true);
        assert_eq!(title("send_native"), "Send native");
    }

    #[test]
    fn rpc_errors_have_the_json_rpc_shape() {
        let r = response(json!(7), Err(RpcError::new(METHOD_NOT_FOUND, "Method not found: x")));
        assert_eq!(
            r,
            json!({ "jsonrpc": "2.0", "id": 7, "error": { "code": -32601, "message": "Method not found: x" } })
        );
        let r = response(json!("a"), Ok(json!({})));
        assert_eq!(r, json!({ "jsonrpc": "2.0", "id": "a", "result": {} }));
    }
}
