//! Paying for a URL (x402, docs/api.md §16): "pay up to 0.05 USDC for https://…" or "pay 0.05 USDC for …" becomes a
//! `pay_http` call when it is one imperative request with exactly one URL and one amount with a token symbol. The
//! §15 rules hold: a negation, a question, several URLs, several amounts or an amount without a symbol pays
//! nothing. URLs are taken out before the words are scanned, so their digits never read as amounts.

use serde_json::json;

use super::transfer::{Declined, PAST_VERBS, SEND_VERBS};
use super::{Intent, PlannedCall, Planner};
use crate::domain::chain as registry;

/// Characters that may close a sentence around a URL without being part of it.
const TRAILING: &[char] = &['.', ',', ';', ':', '!', '?', ')', ']', '"', '\'', '>'];

/// The `http://` and `https://` URLs of a message, as written (trailing punctuation dropped).
pub fn urls(text: &str) -> Vec<String> {
    text.split_whitespace()
        .map(|w| w.trim_start_matches(['(', '[', '"', '\'', '<']))
        .filter(|w| {
            let lower = w.to_ascii_lowercase();
            lower.starts_with("http://") || lower.starts_with("https://")
        })
        .map(|w| w.trim_end_matches(TRAILING).to_string())
        .collect()
}

/// The message with its URLs taken out.
pub fn without_urls(text: &str) -> String {
    text.split_whitespace()
        .filter(|w| {
            let lower = w.trim_start_matches(['(', '[', '"', '\'', '<']).to_ascii_lowercase();
            !(lower.starts_with("http://") || lower.starts_with("https://"))
        })
        .collect::<Vec<_>>()
        .join(" ")
}

impl Planner<'_> {
    /// A message with URLs that asks to pay: a `pay_http` call, or why nothing is paid; `None` when the message
    /// is not about paying (it is then read as any other).
    pub(super) fn pay_for(&self, urls: &[String]) -> Option<Intent> {
        let s = self.scan;
        if !(s.has(SEND_VERBS) || s.has(PAST_VERBS)) {
            return None;
        }
        let example = "pay up to 0.05 USDC for https://…".to_string();
        if self.negated() {
            return Some(Intent::Declined(Declined::Negated));
        }
        if self.question() {
            return Some(Intent::Declined(Declined::Question { example }));
        }
        if !self.imperative() {
            return Some(Intent::Declined(Declined::NotImperative { example }));
        }
        if urls.len() > 1 {
            return Some(Intent::Declined(Declined::SeveralUrls(urls.to_vec())));
        }
        if let Some(word) = s.unreadable.first() {
            return Some(Intent::Declined(Declined::UnreadableAmount(word.clone())));
        }
        let amount = match s.amounts.as_slice() {
            [] => return Some(Intent::NeedAmount { tool: "pay_http" }),
            [one] => one,
            several => {
                let written = several.iter().map(|a| a.value.clone()).collect();
                return Some(Intent::Declined(Declined::SeveralAmounts(written)));
            }
        };
        let Some(symbol) = amount.symbol() else {
            return Some(Intent::Declined(Declined::PaymentWithoutToken(amount.value.clone())));
        };
        // A registry token of one of the agent's chains (x402 pays tokens, never the native coin).
        let known = self
            .context
            .chains
            .iter()
            .filter_map(|c| registry::find(c))
            .any(|chain| {
                self.context
                    .assets
                    .find(chain, &symbol)
                    .is_some_and(|asset| !asset.is_native())
            });
        if !known {
            return Some(Intent::Declined(Declined::PaymentWithoutToken(format!(
                "{} {symbol}",
                amount.value
            ))));
        }
        if !self.offered("pay_http") {
            return Some(self.lacks("pay_http"));
        }
        Some(Intent::Call(vec![PlannedCall {
            tool: "pay_http",
            args: json!({"url": urls[0], "max_amount": amount.value, "asset": symbol}),
        }]))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::llm::TurnContext;
    use crate::llm::builtin::intent::{Intent, parse_intent};

    const TOOLS: &[&str] = &["get_balance", "send_native", "send_token", "pay_http"];

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
    fn one_url_and_one_token_amount_pay() {
        for text in [
            "pay up to 0.05 USDC for https://api.example.com/v1/data?key=1",
            "please pay 0.05 usdc for https://api.example.com/v1/data?key=1.",
        ] {
            match parse_intent(text, &ctx(), TOOLS) {
                Intent::Call(calls) => {
                    assert_eq!(calls.len(), 1);
                    assert_eq!(calls[0].tool, "pay_http");
                    assert_eq!(
                        calls[0].args,
                        json!({"url": "https://api.example.com/v1/data?key=1", "max_amount": "0.05", "asset": "USDC"})
                    );
                }
                other => panic!("{text}: {other:?}"),
            }
        }
    }

    #[test]
    fn negations_questions_several_urls_and_bare_amounts_pay_nothing() {
        let cases = [
            "don't pay 0.05 USDC for https://a.example/x",
            "never pay up to 0.05 USDC for https://a.example/x",
            "can I pay 0.05 USDC for https://a.example/x?",
            "pay 0.05 USDC for https://a.example/x or https://b.example/y",
            "pay up to 0.05 for https://a.example/x",
            "pay 0.05 USDC or 0.1 USDC for https://a.example/x",
            "pay 0.05 ETH for https://a.example/x",
        ];
        for text in cases {
            if let Intent::Call(calls) = parse_intent(text, &ctx(), TOOLS) {
                panic!("{text} planned {calls:?}");
            }
        }
        assert!(matches!(
            parse_intent(
                "pay 0.05 USDC for https://a.example/x https://b.example/y",
                &ctx(),
                TOOLS
            ),
            Intent::Declined(Declined::SeveralUrls(_))
        ));
    }

    #[test]
    fn a_url_in_a_message_about_something_else_is_read_as_usual() {
        assert!(urls("see https://a.example/x, then").contains(&"https://a.example/x".to_string()));
        assert_eq!(without_urls("what is at https://a.example/x now"), "what is at now");
    }
}
