//! The offline engine: a deterministic "model" that maps plain requests to tool calls and phrases the results.

mod answer;
mod intent;
mod reply;
mod scan;

use async_trait::async_trait;
use tokio::sync::mpsc;

pub use intent::{Intent, PlannedCall, parse_intent};

use super::{LlmError, LlmMessage, LlmProvider, LlmRequest, LlmResponse, ToolCall, TurnContext, Usage};

/// The builtin engine. Needs no key and no network; the same request always gives the same answer.
#[derive(Debug, Clone, Copy, Default)]
pub struct BuiltinProvider;

impl BuiltinProvider {
    pub fn new() -> Self {
        Self
    }

    /// Decides the turn's next step without streaming: tool calls, or the final text.
    pub fn respond(request: &LlmRequest) -> (String, Vec<ToolCall>) {
        let offered: Vec<&str> = request.tools.iter().map(|t| t.name.as_str()).collect();
        match request.messages.last() {
            Some(LlmMessage::User(text)) => match parse_intent(text, &request.context, &offered) {
                Intent::Call(planned) => {
                    let calls = planned
                        .into_iter()
                        .enumerate()
                        .map(|(i, p)| ToolCall {
                            id: format!("call_{}", i + 1),
                            name: p.tool.to_string(),
                            arguments: p.args,
                        })
                        .collect();
                    (String::new(), calls)
                }
                other => (reply::reply(&other, &request.context), Vec::new()),
            },
            // After a delegated send's lookup, the send through the delegation it found (or why there is none).
            Some(LlmMessage::Tool { .. }) => intent::follow_up(&request.messages, |asked| {
                intent::delegated_send(asked, &request.context, &offered)
            })
            .unwrap_or_else(|| (answer_from_results(&request.messages, &request.context), Vec::new())),
            _ => (reply::help(&request.context), Vec::new()),
        }
    }
}

/// Phrases the results that follow the last assistant message with tool calls.
fn answer_from_results(messages: &[LlmMessage], context: &TurnContext) -> String {
    let Some(start) = messages
        .iter()
        .rposition(|m| matches!(m, LlmMessage::Assistant { tool_calls, .. } if !tool_calls.is_empty()))
    else {
        return "I have results but no record of asking for them.".into();
    };
    let LlmMessage::Assistant { tool_calls, .. } = &messages[start] else {
        unreachable!("matched above")
    };
    let results: Vec<Option<&str>> = tool_calls
        .iter()
        .map(|call| {
            messages[start + 1..].iter().find_map(|m| match m {
                LlmMessage::Tool { call_id, content } if *call_id == call.id => Some(content.as_str()),
                _ => None,
            })
        })
        .collect();
    answer::compose(tool_calls, &results, context)
}

/// The contract's tools and their capabilities (§6), as the service's registry hands them to the engine.
#[cfg(test)]
pub(crate) fn test_tool_capabilities() -> Vec<(String, crate::domain::agent::Capability)> {
    use crate::domain::agent::Capability::*;
    [
        ("get_balance", Read),
        ("get_gas_price", Read),
        ("get_block_number", Read),
        ("get_transaction", Read),
        ("compare_gas", Compare),
        ("compare_balances", Compare),
        ("estimate_transfer_cost", Compare),
        ("send_native", Transact),
        ("spending_summary", Analytics),
        ("transaction_history", Analytics),
    ]
    .into_iter()
    .map(|(name, capability)| (name.to_string(), capability))
    .collect()
}

/// Roughly four characters per token, at least one for non-empty text.
fn tokens(text: &str) -> u64 {
    (text.chars().count() as u64).div_ceil(4)
}

fn usage(request: &LlmRequest, text: &str, calls: &[ToolCall]) -> Usage {
    let call_tokens = |calls: &[ToolCall]| {
        calls
            .iter()
            .map(|c| tokens(&c.name) + tokens(&c.arguments.to_string()))
            .sum::<u64>()
    };
    let prompt = tokens(&request.system)
        + request
            .messages
            .iter()
            .map(|m| match m {
                LlmMessage::User(text) => tokens(text),
                LlmMessage::Assistant { content, tool_calls } => tokens(content) + call_tokens(tool_calls),
                LlmMessage::Tool { content, .. } => tokens(content),
            })
            .sum::<u64>();
    Usage {
        prompt_tokens: prompt,
        completion_tokens: tokens(text) + call_tokens(calls),
    }
}

/// Splits text into pieces of about three words; the pieces concatenate to `text` exactly.
pub fn pieces(text: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut start = 0;
    let mut words = 0;
    let mut in_space = false;
    for (i, c) in text.char_indices() {
        if c.is_whitespace() {
            in_space = true;
        } else if in_space {
            in_space = false;
            words += 1;
            if words == 3 {
                out.push(&text[start..i]);
                start = i;
                words = 0;
            }
        }
    }
    if start < text.len() {
        out.push(&text[start..]);
    }
    out
}

#[async_trait]
impl LlmProvider for BuiltinProvider {
    async fn complete(&self, request: &LlmRequest, deltas: &mpsc::Sender<String>) -> Result<LlmResponse, LlmError> {
        let (text, tool_calls) = Self::respond(request);
        for piece in pieces(&text) {
            if deltas.send(piece.to_string()).await.is_err() {
                break; // nobody listens any more; the answer is complete anyway
            }
        }
        let usage = usage(request, &text, &tool_calls);
        Ok(LlmResponse {
            text,
            tool_calls,
            usage,
        })
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;
    use tokio::sync::mpsc;

    use super::*;
    use crate::llm::{ToolSpec, TurnContext};

    const ADDR: &str = "0x52908400098527886E0F7030069857D2E4169EE7";

    fn context(capabilities: &[&str]) -> TurnContext {
        TurnContext {
            agent_name: "Scout".into(),
            chains: vec!["ethereum".into(), "base".into()],
            capabilities: capabilities.iter().map(|c| c.to_string()).collect(),
            wallet_addresses: vec![("ethereum".into(), ADDR.into()), ("base".into(), ADDR.into())],
            connected_wallet: None,
            tool_capabilities: test_tool_capabilities(),
            ..Default::default()
        }
    }

    fn request(messages: Vec<LlmMessage>, tools: &[&str], capabilities: &[&str]) -> LlmRequest {
        LlmRequest {
            system: "You are Scout.".into(),
            messages,
            tools: tools
                .iter()
                .map(|t| ToolSpec {
                    name: t.to_string(),
                    description: String::new(),
                    parameters: json!({"type": "object"}),
                    capability: crate::domain::agent::Capability::Read,
                })
                .collect(),
            context: context(capabilities),
        }
    }

    async fn run(request: &LlmRequest) -> (LlmResponse, Vec<String>) {
        let (tx, mut rx) = mpsc::channel(256);
        let response = BuiltinProvider::new()
            .complete(request, &tx)
            .await
            .expect("builtin never fails");
        drop(tx);
        let mut pieces = Vec::new();
        while let Some(piece) = rx.recv().await {
            pieces.push(piece);
        }
        (response, pieces)
    }

    #[test]
    fn pieces_concatenate_exactly() {
        for text in [
            "",
            "one",
            "a b c d e f g",
            "  lead and trail  ",
            "line one\nline two\n\n- item: 0.5 ETH (500 wei)",
            "ünï cödé wörds ✓ here",
        ] {
            let parts = pieces(text);
            assert_eq!(parts.concat(), text);
            assert!(parts.iter().all(|p| !p.is_empty()));
        }
        assert_eq!(pieces("a b c d e f g").len(), 3);
    }

    #[tokio::test]
    async fn full_turn_balance() {
        let user = LlmMessage::User("what is my balance on base".into());
        let first = request(vec![user.clone()], &["get_balance"], &["read"]);
        let (response, deltas) = run(&first).await;
        assert!(response.text.is_empty() && deltas.is_empty());
        assert_eq!(
            response.tool_calls,
            vec![ToolCall {
                id: "call_1".into(),
                name: "get_balance".into(),
                arguments: json!({"chain": "base"})
            }]
        );
        assert!(response.usage.prompt_tokens > 0 && response.usage.completion_tokens > 0);

        let result = json!({"chain": "base", "address": ADDR, "wei": "1230000000000000", "formatted": "0.00123", "symbol": "ETH"});
        let second = request(
            vec![
                user,
                LlmMessage::Assistant {
                    content: String::new(),
                    tool_calls: response.tool_calls.clone(),
                },
                LlmMessage::Tool {
                    call_id: "call_1".into(),
                    content: result.to_string(),
                },
            ],
            &["get_balance"],
            &["read"],
        );
        let (answer, deltas) = run(&second).await;
        assert!(answer.tool_calls.is_empty());
        assert_eq!(deltas.concat(), answer.text);
        assert!(deltas.len() > 1);
        for figure in ["0.00123 ETH", "1230000000000000 wei", ADDR, "base"] {
            assert!(answer.text.contains(figure), "{} lacks {figure}", answer.text);
        }
        let (again, _) = run(&second).await;
        assert_eq!((again.text, again.usage), (answer.text, answer.usage));
    }

    #[tokio::test]
    async fn help_and_refusals_are_streamed() {
        let (response, deltas) = run(&request(
            vec![LlmMessage::User("hi".into())],
            &["get_balance"],
            &["read", "analytics"],
        ))
        .await;
        assert_eq!(deltas.concat(), response.text);
        assert!(
            response.text.contains("Scout")
                && response.text.contains("analytics")
                && !response.text.contains("send funds")
        );
        let (response, _) = run(&request(
            vec![LlmMessage::User(format!("send 1 eth to {ADDR}"))],
            &["get_balance"],
            &["read"],
        ))
        .await;
        assert!(
            response.text.contains("transact") && response.tool_calls.is_empty(),
            "{}",
            response.text
        );
        let (response, _) = run(&request(
            vec![LlmMessage::User("gas on polygon".into())],
            &["get_gas_price"],
            &["read"],
        ))
        .await;
        assert!(response.text.contains("not on polygon") && response.text.contains("ethereum, base"));
    }

    #[tokio::test]
    async fn closed_channel_is_not_an_error() {
        let (tx, rx) = mpsc::channel(1);
        drop(rx);
        let response = BuiltinProvider::new()
            .complete(&request(vec![LlmMessage::User("hello".into())], &[], &["read"]), &tx)
            .await;
        assert!(response.is_ok());
    }
}
