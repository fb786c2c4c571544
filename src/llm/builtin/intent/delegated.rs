//! A send "using the delegation" (§21): the money leaves an owner's account through one of the agent's on-chain
//! delegations. A delegation named by its id is used as named; otherwise the engine first lists the delegations
//! (`list_delegations`), then, with their list in hand, sends through the only active one of that chain with a
//! limit on the asset, or asks which when there are several, or says there is none. Nothing is sent from the agent's
//! own wallet when the message asked for a delegation.

use serde_json::{Value, json};

use super::PlannedCall;
use crate::llm::{LlmMessage, ToolCall};

/// Words that ask for a delegation's money.
pub(super) const WORDS: &[&str] = &["delegation", "delegated"];

/// The delegation ids (UUIDs) written in `text`, and the text without them, so that their digits are never read as
/// an amount or a recipient.
pub(super) fn take_ids(text: &str) -> (String, Vec<String>) {
    let mut ids = Vec::new();
    let mut rest = String::with_capacity(text.len());
    for piece in text.split_inclusive(char::is_whitespace) {
        let word = piece.trim_end();
        let bare = word.trim_matches(|c: char| !c.is_ascii_hexdigit());
        if is_uuid(bare) {
            ids.push(bare.to_ascii_lowercase());
            rest.push_str(&piece.replace(bare, ""));
        } else {
            rest.push_str(piece);
        }
    }
    (rest, ids)
}

fn is_uuid(text: &str) -> bool {
    let groups: Vec<&str> = text.split('-').collect();
    groups.len() == 5
        && groups
            .iter()
            .zip([8, 4, 4, 4, 12])
            .all(|(g, n)| g.len() == n && g.chars().all(|c| c.is_ascii_hexdigit()))
}

/// The lookup planned before a delegated send that names no delegation.
pub(super) fn lookup(chain: &str) -> PlannedCall {
    PlannedCall {
        tool: "list_delegations",
        args: json!({ "chain": chain }),
    }
}

/// After the lookup: the send through the one delegation that fits, or the reply saying why nothing was sent.
/// `send` is the send the user's message asked for (without its delegation); `None` when the turn is not such a
/// lookup's follow-up.
pub(in crate::llm::builtin) fn follow_up(
    messages: &[LlmMessage],
    send: impl Fn(&str) -> Option<PlannedCall>,
) -> Option<(String, Vec<ToolCall>)> {
    let (at, call) = messages.iter().enumerate().rev().find_map(|(i, m)| match m {
        LlmMessage::Assistant { tool_calls, .. } if !tool_calls.is_empty() => Some((i, tool_calls)),
        _ => None,
    })?;
    let [lookup] = call.as_slice() else { return None };
    if lookup.name != "list_delegations" {
        return None;
    }
    let asked = messages[..at].iter().rev().find_map(|m| match m {
        LlmMessage::User(text) => Some(text.as_str()),
        _ => None,
    })?;
    let mut planned = send(asked)?;
    let listed = messages[at + 1..].iter().find_map(|m| match m {
        LlmMessage::Tool { call_id, content } if *call_id == lookup.id => serde_json::from_str::<Value>(content).ok(),
        _ => None,
    })?;
    if let Some(error) = listed.get("error") {
        let why = error
            .get("message")
            .and_then(Value::as_str)
            .unwrap_or("they could not be read");
        return Some((
            format!("I could not read the delegations: {why}. Nothing was sent."),
            Vec::new(),
        ));
    }
    let chain = planned.args["chain"].as_str().unwrap_or_default().to_string();
    let symbol = planned.args["token"]
        .as_str()
        .map(str::to_owned)
        .or_else(|| crate::domain::chain::find(&chain).map(|c| c.native_symbol.to_string()))
        .unwrap_or_default();
    let key = format!("{chain}:{symbol}");
    let fitting: Vec<&Value> = listed["delegations"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default()
        .iter()
        .filter(|d| d["status"] == "active" && d["chain"] == chain.as_str())
        .filter(|d| {
            d["limits"].as_array().is_some_and(|limits| {
                limits
                    .iter()
                    .any(|l| l["asset"].as_str().is_some_and(|a| a.eq_ignore_ascii_case(&key)))
            })
        })
        .collect();
    match fitting.as_slice() {
        [one] => {
            planned.args["delegation"] = one["id"].clone();
            let call = ToolCall {
                id: "call_2".into(),
                name: planned.tool.to_string(),
                arguments: planned.args,
            };
            Some((String::new(), vec![call]))
        }
        [] => Some((
            format!(
                "No active delegation lets this agent spend {symbol} on {chain} from an owner's account, so I did not \
                 send from its own wallet either. Nothing was sent."
            ),
            Vec::new(),
        )),
        several => {
            let which: Vec<String> = several.iter().map(|d| described(d, &key)).collect();
            Some((
                format!(
                    "Several delegations can pay {symbol} on {chain}: {}. Say which, e.g. \"… using delegation {}\". \
                     Nothing was sent.",
                    which.join("; "),
                    several[0]["id"].as_str().unwrap_or_default()
                ),
                Vec::new(),
            ))
        }
    }
}

/// "`<id>` from 0x… (3.5 USDC left)".
fn described(d: &Value, key: &str) -> String {
    let left = d["limits"]
        .as_array()
        .and_then(|limits| {
            limits
                .iter()
                .find(|l| l["asset"].as_str().is_some_and(|a| a.eq_ignore_ascii_case(key)))
        })
        .and_then(|l| l["available"].as_str())
        .map(|a| format!(" ({a} {} left)", key.split(':').nth(1).unwrap_or_default()))
        .unwrap_or_default();
    format!(
        "{} from {}{left}",
        d["id"].as_str().unwrap_or_default(),
        d["delegator"].as_str().unwrap_or_default()
    )
}

/// Whether the message's words ask for a delegation's money.
pub(super) fn asked(words: &[String]) -> bool {
    words.iter().any(|w| WORDS.contains(&w.as_str()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::llm::TurnContext;
    use crate::llm::builtin::intent::{Intent, delegated_send, parse_intent};

    const TO: &str = "0x52908400098527886E0F7030069857D2E4169EE7";
    const TOOLS: &[&str] = &["get_balance", "send_native", "send_token", "list_delegations"];

    fn ctx() -> TurnContext {
        TurnContext {
            agent_name: "Scout".into(),
            chains: vec!["base".into()],
            capabilities: vec!["read".into(), "transact".into()],
            tool_capabilities: crate::llm::builtin::test_tool_capabilities(),
            ..Default::default()
        }
    }

    #[test]
    fn a_send_using_the_delegation_looks_them_up_first_or_uses_the_one_named() {
        let asked = format!("send 1 USDC to {TO} on base using the delegation");
        assert_eq!(parse_intent(&asked, &ctx(), TOOLS), Intent::Call(vec![lookup("base")]));
        let send = delegated_send(&asked, &ctx(), TOOLS).expect("the send it asks for");
        assert_eq!(send.tool, "send_token");
        assert_eq!(
            send.args,
            json!({"chain": "base", "token": "USDC", "to": TO, "amount": "1"})
        );

        let named = format!("send 1 USDC to {TO} on base using delegation 0f8fad5b-d9cb-469f-a165-70867728950e");
        let Intent::Call(calls) = parse_intent(&named, &ctx(), TOOLS) else {
            panic!("a call")
        };
        assert_eq!(calls[0].args["delegation"], "0f8fad5b-d9cb-469f-a165-70867728950e");
        assert_eq!(calls[0].args["amount"], "1", "the id's digits are no amount");

        // Not asked for: the agent's own money, as before; asked without the lookup offered: said so.
        let own = format!("send 1 USDC to {TO} on base");
        let Intent::Call(calls) = parse_intent(&own, &ctx(), TOOLS) else {
            panic!("a call")
        };
        assert!(calls[0].args.get("delegation").is_none());
        assert!(delegated_send(&own, &ctx(), TOOLS).is_none());
        assert!(matches!(
            parse_intent(&asked, &ctx(), &["send_native", "send_token"]),
            Intent::Lacks {
                tool: "list_delegations",
                ..
            }
        ));
    }

    #[test]
    fn ids_are_taken_out_of_the_text_before_it_is_read() {
        let (rest, ids) = take_ids("send 1 USDC to 0xab using delegation 0F8fad5b-d9cb-469f-a165-70867728950e.");
        assert_eq!(ids, ["0f8fad5b-d9cb-469f-a165-70867728950e"]);
        assert_eq!(rest, "send 1 USDC to 0xab using delegation .");
        let (rest, ids) = take_ids("send 1 USDC");
        assert!(ids.is_empty());
        assert_eq!(rest, "send 1 USDC");
    }

    fn turn(listed: Value) -> Vec<LlmMessage> {
        vec![
            LlmMessage::User("send 1 USDC using the delegation".into()),
            LlmMessage::Assistant {
                content: String::new(),
                tool_calls: vec![ToolCall {
                    id: "call_1".into(),
                    name: "list_delegations".into(),
                    arguments: json!({"chain": "base"}),
                }],
            },
            LlmMessage::Tool {
                call_id: "call_1".into(),
                content: listed.to_string(),
            },
        ]
    }

    fn send(_: &str) -> Option<PlannedCall> {
        Some(PlannedCall {
            tool: "send_token",
            args: json!({"chain": "base", "token": "USDC", "to": "0x52908400098527886E0F7030069857D2E4169EE7", "amount": "1"}),
        })
    }

    fn delegation(id: &str, status: &str, asset: &str) -> Value {
        json!({"id": id, "chain": "base", "status": status, "delegator": "0xd7E2", "limits": [{"asset": asset, "available": "2"}]})
    }

    #[test]
    fn the_only_active_delegation_of_the_asset_pays() {
        let listed = json!({"delegations": [
            delegation("a", "revoked", "base:USDC"),
            delegation("b", "active", "base:ETH"),
            delegation("c", "active", "base:USDC"),
        ]});
        let (text, calls) = follow_up(&turn(listed), send).expect("a follow-up");
        assert!(text.is_empty());
        assert_eq!(calls[0].name, "send_token");
        assert_eq!(calls[0].arguments["delegation"], "c");
        assert_eq!(calls[0].arguments["amount"], "1");
    }

    #[test]
    fn several_or_none_send_nothing_and_say_why() {
        let several =
            json!({"delegations": [delegation("c", "active", "base:USDC"), delegation("d", "active", "base:USDC")]});
        let (text, calls) = follow_up(&turn(several), send).expect("a follow-up");
        assert!(calls.is_empty());
        assert!(text.contains("c from 0xd7E2 (2 USDC left); d from 0xd7E2"), "{text}");
        assert!(text.ends_with("Nothing was sent."), "{text}");
        let (text, calls) = follow_up(&turn(json!({"delegations": []})), send).expect("a follow-up");
        assert!(calls.is_empty());
        assert!(
            text.starts_with("No active delegation lets this agent spend USDC on base"),
            "{text}"
        );
    }

    #[test]
    fn a_turn_that_did_not_look_delegations_up_is_no_follow_up() {
        let mut messages = turn(json!({"delegations": []}));
        messages[1] = LlmMessage::Assistant {
            content: String::new(),
            tool_calls: vec![ToolCall {
                id: "call_1".into(),
                name: "get_balance".into(),
                arguments: json!({}),
            }],
        };
        assert!(follow_up(&messages, send).is_none());
        assert!(follow_up(&turn(json!({"delegations": []})), |_: &str| None).is_none());
    }
}
