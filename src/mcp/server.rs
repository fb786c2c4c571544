//! The MCP server of one agent on `rmcp` (the official SDK): `initialize`, `ping`, `tools/list` and `tools/call`
//! over the tool registry. The SDK owns the protocol (framing, versions, sessions); this file owns what the
//! agent may do. The agent is loaded again for every listing and call, so a changed capability applies within an
//! open session and a revoked token or a deleted agent ends access at the next call (-32001, `data.code`).

use std::borrow::Cow;
use std::sync::Arc;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CancelTaskParams, CustomRequest, CustomResult, ErrorCode, GetTaskParams,
    GetTaskResult, Implementation, InitializeRequestParams, InitializeResult, ListToolsResult, PaginatedRequestParams,
    ProtocolVersion, ServerCapabilities, ServerConfig, UpdateTaskParams,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler};
use serde_json::{Value, json};

use super::{approval, catalog, tasks};
use crate::auth::{AuthError, OwnerAuthority};
use crate::domain::agent::Agent;
use crate::state::AppState;
use crate::store::AuditEvent;
use crate::tools::{self, Effect, ToolContext};

/// Server-defined JSON-RPC code: the access token no longer authorizes this client (agent deleted, token revoked).
pub const UNAUTHORIZED: i32 = -32001;

/// Who an MCP request acts for: the agent whose token it carries (kept as the token's hash, checked again on every
/// use) and, over HTTP, the owner authority presented beside it (`X-Owner-Token` or the admin bearer), which is
/// what lets an elicited approval approve.
#[derive(Debug, Clone)]
pub struct McpCaller {
    pub session: crate::auth::AgentSession,
    pub owner: Option<OwnerAuthority>,
}

/// The transport, as the audit records it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transport {
    Stdio,
    Http,
}

impl Transport {
    fn as_str(self) -> &'static str {
        match self {
            Transport::Stdio => "stdio",
            Transport::Http => "http",
        }
    }
}

/// The MCP handler. Over stdio it holds the caller proven at start; over HTTP each request carries its own
/// (`McpCaller` in the request's extensions, put there by `POST /mcp` after checking the headers).
#[derive(Clone)]
pub struct AgentServer {
    pub(super) state: AppState,
    transport: Transport,
    caller: Option<Arc<McpCaller>>,
}

/// A refusal of the token or agent as a JSON-RPC error: -32001 with the API's code in `data.code` (a store
/// failure is an internal error whose cause stays in the log).
pub fn auth_error(err: &AuthError) -> ErrorData {
    if let AuthError::Store(cause) = err {
        tracing::error!(error = %cause, "MCP authentication failed on the store");
        return ErrorData::internal_error("internal error", Some(json!({ "code": "internal_error" })));
    }
    ErrorData::new(
        ErrorCode(UNAUTHORIZED),
        err.to_string(),
        Some(json!({ "code": err.code() })),
    )
}

impl AgentServer {
    pub fn stdio(state: AppState, caller: McpCaller) -> Self {
        AgentServer {
            state,
            transport: Transport::Stdio,
            caller: Some(Arc::new(caller)),
        }
    }

    pub fn http(state: AppState) -> Self {
        AgentServer {
            state,
            transport: Transport::Http,
            caller: None,
        }
    }

    fn caller(&self, cx: &RequestContext<RoleServer>) -> Result<McpCaller, ErrorData> {
        if let Some(caller) = &self.caller {
            return Ok(caller.as_ref().clone());
        }
        cx.extensions
            .get::<axum::http::request::Parts>()
            .and_then(|parts| parts.extensions.get::<McpCaller>())
            .cloned()
            .ok_or_else(|| auth_error(&AuthError::MissingToken))
    }

    /// The caller and its agent, loaded afresh: the token still live, the agent still active.
    async fn agent(&self, cx: &RequestContext<RoleServer>) -> Result<(McpCaller, Agent), ErrorData> {
        let caller = self.caller(cx)?;
        let agent = self
            .state
            .auth
            .session_agent(&caller.session)
            .await
            .map_err(|e| auth_error(&e))?;
        Ok((caller, agent))
    }

    /// Where the console is, for links to its approval page: `PUBLIC_URL`, else the address this instance listens
    /// on (`BIND_ADDR`; an unspecified address as the loopback one); over stdio without `PUBLIC_URL`, nowhere. Never
    /// the request's `Host`, which whoever sends it chooses: a link an owner follows must not lead elsewhere.
    fn console_origin(&self) -> Option<String> {
        if let Some(public) = &self.state.config.security.public_url {
            return Some(public.origin.to_string());
        }
        let bound = *self.state.listening.get()?;
        let ip = match bound.ip() {
            std::net::IpAddr::V4(v4) if v4.is_unspecified() => std::net::IpAddr::V4(std::net::Ipv4Addr::LOCALHOST),
            std::net::IpAddr::V6(v6) if v6.is_unspecified() => std::net::IpAddr::V6(std::net::Ipv6Addr::LOCALHOST),
            ip => ip,
        };
        Some(format!("http://{}", std::net::SocketAddr::new(ip, bound.port())))
    }

    /// The task of this agent named `task_id`, or the not-found error (the same for another agent's task).
    async fn task(
        &self,
        task_id: &str,
        cx: &RequestContext<RoleServer>,
    ) -> Result<rmcp::model::DetailedTask, ErrorData> {
        let (_, agent) = self.agent(cx).await?;
        let url = tasks::url_elicitation(cx.client_capabilities().as_ref())
            .then(|| self.console_origin())
            .flatten()
            .map(|origin| tasks::approval_page(&origin, agent.id));
        match tasks::detailed(&self.state, &agent, task_id, url).await {
            Ok(Some(task)) => Ok(task),
            Ok(None) => Err(ErrorData::invalid_params(
                "Task not found",
                Some(json!({ "code": "task_not_found" })),
            )),
            Err(e) => {
                tracing::error!(agent_id = %agent.id, error = %e, "could not read an MCP task");
                Err(ErrorData::internal_error(
                    "internal error",
                    Some(json!({ "code": "internal_error" })),
                ))
            }
        }
    }

    /// Records a tool call in the audit table: the tool, its outcome and its (non-secret) arguments.
    async fn audit(&self, caller: &McpCaller, tool: &str, arguments: &Value, outcome: Outcome<'_>) {
        let detail = crate::domain::audit::detail::McpToolCall {
            transport: self.transport.as_str().into(),
            tool: tool.into(),
            ok: outcome.error_code.is_none(),
            arguments: catalog::audited_arguments(arguments),
            duration_ms: outcome.duration_ms,
            error_code: outcome.error_code.map(str::to_owned),
            tx_hash: outcome.tx_hash,
        };
        let event = AuditEvent::new(
            caller.session.agent_id(),
            crate::auth::Actor::Mcp,
            crate::domain::audit::Detail::McpToolCall(detail),
        );
        if let Err(e) = self.state.store.insert_audit(&event).await {
            tracing::error!(agent_id = %event.agent_id, tool, error = %e, "could not audit an MCP tool call");
        }
    }
}

struct Outcome<'a> {
    error_code: Option<&'a str>,
    duration_ms: u64,
    tx_hash: Option<Value>,
}

impl ServerHandler for AgentServer {
    fn get_info(&self) -> ServerConfig {
        let mut server = Implementation::new("agentd", env!("CARGO_PKG_VERSION"));
        server.title = Some("agentd".into());
        let capabilities = ServerCapabilities::builder().enable_tools().enable_tasks().build();
        InitializeResult::new(capabilities)
            .with_server_info(server)
            .with_protocol_version(ProtocolVersion::LATEST_WITH_INITIALIZE)
    }

    /// The revisions with an `initialize` handshake (2024-11-05 to 2025-11-25), whose `initialize` with an unknown
    /// newer version is answered with the newest of them, and 2026-07-28 (no handshake: every request carries its
    /// `_meta`, `server/discover` lists these), served statelessly.
    fn supported_protocol_versions(&self) -> Cow<'static, [ProtocolVersion]> {
        Cow::Borrowed(ProtocolVersion::known_up_to(&ProtocolVersion::V_2026_07_28))
    }

    async fn initialize(
        &self,
        request: InitializeRequestParams,
        cx: RequestContext<RoleServer>,
    ) -> Result<InitializeResult, ErrorData> {
        let (_, agent) = self.agent(&cx).await?;
        cx.peer.set_peer_info(request.clone());
        let client = request.client_info.name.as_str();
        let requested = request.protocol_version.as_str();
        tracing::info!(agent_id = %agent.id, client, requested, transport = self.transport.as_str(), "MCP session initialized");
        let instructions = format!(
            "Tools of the agentd agent \"{}\" on its chains ({}). Amounts are decimal strings in whole units \
             (\"0.01\"); results give exact base units as strings. Transfers are signed by the service within the \
             agent's spending cap and policy; one that needs an owner's approval waits for it.",
            agent.name,
            agent.chains.join(", ")
        );
        Ok(self.negotiate_initialize(&request)?.with_instructions(instructions))
    }

    /// rmcp hands over as "custom" any request it could not read, a standard method with malformed params among
    /// them (`tools/call` with `arguments: 5`): those are invalid params (-32602); anything else is an unknown
    /// method (-32601), so a newer client's probe falls back.
    async fn on_custom_request(
        &self,
        request: CustomRequest,
        _cx: RequestContext<RoleServer>,
    ) -> Result<CustomResult, ErrorData> {
        const STANDARD: &[&str] = &[
            "initialize",
            "ping",
            "tools/list",
            "tools/call",
            "server/discover",
            "tasks/get",
            "tasks/update",
            "tasks/cancel",
        ];
        if STANDARD.contains(&request.method.as_str()) {
            let message = format!("Invalid params for {}", request.method);
            return Err(ErrorData::invalid_params(message, None));
        }
        Err(ErrorData::new(
            ErrorCode::METHOD_NOT_FOUND,
            format!("Method not found: {}", request.method),
            None,
        ))
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        cx: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let (_, agent) = self.agent(&cx).await?;
        Ok(ListToolsResult::with_all_items(catalog::tools_for(&agent)))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        cx: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let name = request.name.as_ref();
        let Some(tool) = tools::find(name) else {
            return Err(ErrorData::invalid_params(format!("Unknown tool: {name}"), None));
        };
        let arguments = Value::Object(request.arguments.clone().unwrap_or_default());
        let caller = self.caller(&cx)?;
        let agent = match self.state.auth.session_agent(&caller.session).await {
            Ok(agent) => agent,
            Err(e) => {
                let outcome = Outcome {
                    error_code: Some(e.code()),
                    duration_ms: 0,
                    tx_hash: None,
                };
                self.audit(&caller, name, &arguments, outcome).await;
                return Err(auth_error(&e));
            }
        };
        let toolbox = ToolContext {
            services: &self.state.tools,
            agent: &agent,
            connected_wallet: None,
            conversation_id: None,
            actor: crate::auth::Actor::Mcp,
            mandate: &crate::store::Mandate::token(Some(caller.session.token_hash().to_string())),
            guarded: self.state.auth.is_guarded(&agent),
        };
        let (result, duration_ms) = toolbox.execute(name, &arguments).await;
        let tx_hash = result
            .as_ref()
            .ok()
            .and_then(|r| r.get("tx_hash"))
            .filter(|_| tool.effect == Effect::MovesFunds)
            .cloned();
        let outcome = Outcome {
            error_code: result.as_ref().err().map(|e| e.code),
            duration_ms,
            tx_hash,
        };
        self.audit(&caller, name, &arguments, outcome).await;
        // Held for the owner, for a client that follows tasks: a task handle now, the outcome from `tasks/get`.
        if let Some(transfer_id) = approval::awaiting_transfer(&result)
            && tasks::declared(cx.client_capabilities().as_ref())
        {
            let held = self.state.store.get_approval(transfer_id).await.ok().flatten();
            tracing::info!(agent_id = %agent.id, %transfer_id, "MCP call held for approval answered as a task");
            return Ok(CallToolResponse::Task(tasks::handle(
                held.as_ref(),
                transfer_id,
                self.state.clock.now(),
            )));
        }
        let result = approval::elicit_if_awaiting(&self.state, &cx, caller.owner.as_ref(), &agent, result).await;
        Ok(catalog::call_result(&result).into())
    }

    async fn get_task(
        &self,
        request: GetTaskParams,
        cx: RequestContext<RoleServer>,
    ) -> Result<GetTaskResult, ErrorData> {
        Ok(GetTaskResult::new(self.task(&request.task_id, &cx).await?))
    }

    /// An answer to the URL-mode elicitation (the owner was sent to the console) changes nothing here: the task
    /// moves when the owner decides. It is acknowledged for a task of the agent's.
    async fn update_task(&self, request: UpdateTaskParams, cx: RequestContext<RoleServer>) -> Result<(), ErrorData> {
        self.task(&request.task_id, &cx).await.map(|_| ())
    }

    /// A transfer held for the owner is the owner's to decide: the agent cannot withdraw it through its task.
    async fn cancel_task(&self, request: CancelTaskParams, cx: RequestContext<RoleServer>) -> Result<(), ErrorData> {
        self.task(&request.task_id, &cx).await?;
        Err(ErrorData::new(
            ErrorCode::INVALID_REQUEST,
            "a transfer held for approval is decided by its owner (approve or reject); it cannot be cancelled here",
            Some(json!({ "code": "owner_required" })),
        ))
    }
}
