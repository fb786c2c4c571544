//! `run_turn`: persist the user message, run the provider with the agent's tools (at most five tool rounds),
//! persist the answer, and report every step as a `ChatEvent`. Runs as its own task, so a client that goes away
//! never leaves a half-written turn. The whole turn has a deadline (`LLM_TURN_TIMEOUT_MS`, below the HTTP
//! timeout): past it the turn is stored as failed with what it did, and a tool still running is left to finish in
//! its own task, never cut half-way through a transfer.

use alloy::primitives::Address;
use serde_json::{Value, json};
use tokio::sync::mpsc;
use tokio::time::{Instant, timeout_at};
use uuid::Uuid;

use super::{ChainCall, ChatError, ChatEvent, ChatServices, TurnResult, prompt};
use crate::domain::agent::Agent;
use crate::llm::{LlmError, LlmMessage, LlmRequest, Usage};
use crate::store::{Conversation, Mandate, Message, Role};
use crate::tools::{self, ToolContext};

/// Tool rounds before the model must answer in text.
pub const MAX_TOOL_ROUNDS: usize = 5;

/// A validated turn whose conversation is known to belong to the agent.
pub struct Turn {
    pub agent: Agent,
    pub conversation: Conversation,
    pub is_new_conversation: bool,
    pub message: String,
    pub connected_wallet: Option<Address>,
    /// The agent token the turn was authenticated with and the idempotency claim it runs under, checked again
    /// when a tool moves money.
    pub mandate: Mandate,
    /// Whether the agent is guarded (decides calls no rule decides, §18); set by the caller that knows.
    pub guarded: bool,
}

/// The checks that fail before a stream starts: the conversation exists and is the agent's.
pub async fn prepare(
    chat: &ChatServices,
    agent: Agent,
    conversation_id: Option<Uuid>,
    message: String,
    connected_wallet: Option<Address>,
    mandate: Mandate,
) -> Result<Turn, ChatError> {
    let (conversation, is_new_conversation) = match conversation_id {
        Some(id) => {
            let conversation = chat.store.get_conversation(id).await?;
            if conversation.agent_id != agent.id {
                return Err(ChatError::ForeignConversation);
            }
            (conversation, false)
        }
        None => {
            let now = chat.clock.now();
            let title: String = message.trim().chars().take(80).collect();
            let conversation = Conversation {
                id: Uuid::new_v4(),
                agent_id: agent.id,
                title,
                created_at: now,
                updated_at: now,
                message_count: 0,
            };
            (conversation, true)
        }
    };
    Ok(Turn {
        agent,
        conversation,
        is_new_conversation,
        message,
        connected_wallet,
        mandate,
        guarded: true,
    })
}

/// Runs the turn to the end, sending events as it goes. A closed event channel does not stop it.
#[tracing::instrument(skip_all, fields(agent_id = %turn.agent.id, conversation_id = %turn.conversation.id))]
pub async fn run_turn(
    chat: ChatServices,
    turn: Turn,
    events: mpsc::Sender<ChatEvent>,
) -> Result<TurnResult, ChatError> {
    let conversation_id = turn.conversation.id;
    let user_message = Message {
        id: Uuid::new_v4(),
        conversation_id,
        role: Role::User,
        content: turn.message.clone(),
        chain_calls: json!([]),
        tokens_used: 0,
        created_at: chat.clock.now(),
    };
    let earlier = if turn.is_new_conversation {
        chat.store.start_conversation(&turn.conversation, &user_message).await?;
        Vec::new()
    } else {
        let earlier = chat
            .store
            .recent_messages(conversation_id, prompt::HISTORY_MESSAGES)
            .await?;
        chat.store.insert_message(&user_message).await?;
        earlier
    };
    let _ = events.send(ChatEvent::Start { conversation_id }).await;

    let mut transcript = TurnTranscript::default();
    let deadline = Instant::now() + chat.turn_timeout;
    let outcome = converse(&chat, &turn, earlier, &events, &mut transcript, deadline).await;
    let mut content = transcript.text.clone();
    if let Err(err) = &outcome {
        tracing::warn!(agent_id = %turn.agent.id, error = %err, "chat turn failed upstream");
        if !content.is_empty() {
            content.push_str("\n\n");
        }
        content.push_str(&format!("[error] {err}"));
    }
    let assistant = Message {
        id: Uuid::new_v4(),
        conversation_id,
        role: Role::Assistant,
        content,
        chain_calls: serde_json::to_value(&transcript.calls).unwrap_or_else(|_| json!([])),
        tokens_used: transcript.usage.total() as i64,
        created_at: chat
            .clock
            .now()
            .max(user_message.created_at + chrono::Duration::microseconds(1)),
    };
    chat.store.insert_message(&assistant).await?;
    chat.metrics.record_turn(if outcome.is_ok() { "ok" } else { "error" });
    match outcome {
        Ok(()) => {
            let result = TurnResult {
                response: transcript.text,
                conversation_id,
                chain_calls: transcript.calls,
                tokens_used: transcript.usage.total(),
                message_id: assistant.id,
            };
            let _ = events.send(ChatEvent::Final(result.clone())).await;
            Ok(result)
        }
        Err(error) => {
            let _ = events
                .send(ChatEvent::Error {
                    code: error.code().to_string(),
                    message: error.to_string(),
                })
                .await;
            Err(error)
        }
    }
}

/// What a turn produced so far: the text as streamed, the chain calls, the usage.
#[derive(Default)]
struct TurnTranscript {
    text: String,
    calls: Vec<ChainCall>,
    usage: Usage,
}

async fn converse(
    chat: &ChatServices,
    turn: &Turn,
    earlier: Vec<Message>,
    events: &mpsc::Sender<ChatEvent>,
    transcript: &mut TurnTranscript,
    deadline: Instant,
) -> Result<(), ChatError> {
    let context = prompt::context(
        &turn.agent,
        turn.connected_wallet.map(|a| a.to_checksum(None)),
        chat.tools.chains.tokens().clone(),
    );
    let mut messages = prompt::history(&earlier);
    messages.push(LlmMessage::User(turn.message.clone()));
    let specs = tools::specs(&turn.agent);
    for round in 0..=MAX_TOOL_ROUNDS {
        let tools = if round < MAX_TOOL_ROUNDS {
            specs.clone()
        } else {
            Vec::new()
        };
        let request = LlmRequest {
            system: prompt::system_prompt(&context),
            messages: messages.clone(),
            tools,
            context: context.clone(),
        };
        let response = timeout_at(
            deadline,
            complete_streaming(chat, &request, events, &mut transcript.text),
        )
        .await
        .map_err(|_| ChatError::Deadline)??;
        transcript.usage.prompt_tokens += response.usage.prompt_tokens;
        transcript.usage.completion_tokens += response.usage.completion_tokens;
        if response.tool_calls.is_empty() || round == MAX_TOOL_ROUNDS {
            return Ok(());
        }
        let mut results = Vec::new();
        for (index, call) in response.tool_calls.iter().enumerate() {
            let id = if call.id.is_empty() {
                format!("call_{}_{}", round + 1, index + 1)
            } else {
                call.id.clone()
            };
            let _ = events
                .send(ChatEvent::ToolCall {
                    id: id.clone(),
                    tool: call.name.clone(),
                    args: call.arguments.clone(),
                })
                .await;
            let (result, duration_ms) = match run_tool(chat, turn, &call.name, &call.arguments, deadline).await {
                Some(done) => done,
                None => {
                    transcript.calls.push(unfinished_call(id, call));
                    return Err(ChatError::Deadline);
                }
            };
            chat.metrics
                .record_tool_call(&call.name, result.as_ref().map_or_else(|e| e.code, |_| "ok"));
            let (result, error) = match result {
                Ok(value) => (value, None),
                Err(e) => (Value::Null, Some(e.to_json())),
            };
            let model_view = match &error {
                Some(e) => json!({ "error": e }),
                None => result.clone(),
            };
            let chain_call = ChainCall {
                id: id.clone(),
                tool: call.name.clone(),
                args: call.arguments.clone(),
                result,
                error,
                duration_ms,
            };
            let _ = events.send(ChatEvent::ToolResult(chain_call.clone())).await;
            transcript.calls.push(chain_call);
            results.push(LlmMessage::Tool {
                call_id: id,
                content: model_view.to_string(),
            });
        }
        messages.push(LlmMessage::Assistant {
            content: response.text.clone(),
            tool_calls: response.tool_calls.clone(),
        });
        messages.extend(results);
    }
    Ok(())
}

/// Runs one tool in a task of its own, waiting for it until the turn's deadline. `None` when the deadline came
/// first: the task goes on (a transfer is never cut between signing and broadcast) and its transfer, if any, is
/// recorded by the transfer service as usual.
async fn run_tool(
    chat: &ChatServices,
    turn: &Turn,
    name: &str,
    args: &Value,
    deadline: Instant,
) -> Option<(tools::ToolResult, u64)> {
    let (services, agent, name, args) = (chat.tools.clone(), turn.agent.clone(), name.to_string(), args.clone());
    let (connected_wallet, conversation_id) = (turn.connected_wallet, Some(turn.conversation.id));
    let (mandate, guarded) = (turn.mandate.clone(), turn.guarded);
    let task = tokio::spawn(async move {
        let toolbox = ToolContext {
            services: &services,
            agent: &agent,
            connected_wallet,
            conversation_id,
            actor: crate::domain::audit::Actor::Agent,
            mandate: &mandate,
            guarded,
        };
        toolbox.execute(&name, &args).await
    });
    match timeout_at(deadline, task).await {
        Ok(Ok(done)) => Some(done),
        Ok(Err(join)) => {
            tracing::error!(error = %join, "a tool task failed");
            let failure = tools::ToolError::new("internal_error", "the tool failed unexpectedly");
            Some((Err(failure), 0))
        }
        Err(_) => None,
    }
}

/// The chain call of a tool still running when the turn's deadline passed: its outcome is not known to the turn.
fn unfinished_call(id: String, call: &crate::llm::ToolCall) -> ChainCall {
    let error = tools::ToolError::new(
        "upstream_timeout",
        "the turn's deadline passed while this call was still running; it finishes on its own, and a transfer it \
         made appears in the agent's transactions",
    );
    ChainCall {
        id,
        tool: call.name.clone(),
        args: call.arguments.clone(),
        result: Value::Null,
        error: Some(error.to_json()),
        duration_ms: 0,
    }
}

/// One provider call; its text deltas go out as `text_delta` events and into `text` as they arrive.
async fn complete_streaming(
    chat: &ChatServices,
    request: &LlmRequest,
    events: &mpsc::Sender<ChatEvent>,
    text: &mut String,
) -> Result<crate::llm::LlmResponse, LlmError> {
    let streamed_before = text.len();
    let (tx, mut rx) = mpsc::channel::<String>(64);
    let completion = async move {
        let result = chat.llm.complete(request, &tx).await;
        drop(tx);
        result
    };
    let forward = async {
        while let Some(delta) = rx.recv().await {
            if delta.is_empty() {
                continue;
            }
            text.push_str(&delta);
            let _ = events.send(ChatEvent::TextDelta(delta)).await;
        }
    };
    let (result, ()) = tokio::join!(completion, forward);
    // A provider that answered without streaming deltas still has its text delivered as one delta.
    if let Ok(response) = &result
        && text.len() == streamed_before
        && !response.text.is_empty()
    {
        text.push_str(&response.text);
        let _ = events.send(ChatEvent::TextDelta(response.text.clone())).await;
    }
    result
}
