//! When a message moves money (docs/api.md §15): only one imperative request (`send`, `transfer` or `pay` first,
//! after an optional `please`, `now` or `ok`) with exactly one amount, one asset the registry knows on the chain and
//! one recipient (the address after "to"; with none, the connected wallet). Negations, questions, unknown assets and
//! ambiguity move nothing: the engine estimates the cost, explains why, or asks which was meant.
//!
//! Assets are looked up in `domain::asset` by `<chain>:<SYMBOL>`, so a symbol the registry learns (an ERC-20 token)
//! becomes sendable here without a change: a native asset is `send_native`, any other `send_token`.

use serde_json::json;

use super::{Intent, PlannedCall, Planner};
use crate::domain::asset::Asset;
use crate::domain::chain::{self as registry, ChainInfo};
use crate::llm::builtin::scan::{Amount, symbol_of};

/// Words of a request to move money.
pub const SEND_VERBS: &[&str] = &[
    "send",
    "transfer",
    "pay",
    "sending",
    "transferring",
    "paying",
    "withdraw",
];
/// The same in the past: about money that moved, or a hypothesis ("what if I sent…").
pub const PAST_VERBS: &[&str] = &["sent", "paid"];
/// The verbs an imperative request starts with.
const IMPERATIVE_VERBS: &[&str] = &["send", "transfer", "pay"];
/// Words that may come before the verb of an imperative request.
const LEAD_WORDS: &[&str] = &["please", "now", "ok", "okay"];
/// Words that negate or hold back a request anywhere in a message (`don't` is split into `don` and `t`).
const NEGATIONS: &[&str] = &[
    "not", "never", "no", "nothing", "dont", "cannot", "stop", "cancel", "wait",
];
/// Contracted negations, split at the apostrophe: `don't` is `don` + `t`.
const NEGATED_BEFORE_T: &[&str] = &[
    "don", "doesn", "didn", "won", "wouldn", "shouldn", "can", "couldn", "isn", "aren", "mustn",
];
/// First words of a question or a hypothesis.
const QUESTION_WORDS: &[&str] = &[
    "how", "can", "could", "would", "should", "what", "whats", "why", "when", "where", "who", "which", "is", "are",
    "am", "do", "does", "did", "will", "shall", "may", "might", "must", "if", "suppose", "imagine", "whether",
];
/// Words that may stand between "to" and the address it names.
const RECIPIENT_FILLER: &[&str] = &["the", "this", "my", "address", "wallet", "account"];
/// Ways to name the connected wallet after "to".
const CONNECTED: &[&str] = &[
    "me",
    "myself",
    "my wallet",
    "my connected wallet",
    "my own wallet",
    "my address",
    "the connected wallet",
    "connected wallet",
];

/// Why a message about moving money moves none.
#[derive(Debug, Clone, PartialEq)]
pub enum Declined {
    /// "don't send", "never pay", "send … no wait".
    Negated,
    /// "how would I send…?", "can I send…?", "what if I sent…".
    Question {
        example: String,
    },
    /// The message talks about a transfer but is no request to make one ("I want to send…").
    NotImperative {
        example: String,
    },
    /// Several send verbs: several requests in one message.
    SeveralRequests,
    SeveralAmounts(Vec<String>),
    SeveralRecipients(Vec<String>),
    SeveralChains(Vec<String>),
    /// The only address is not the one after "to" ("send 0xA… 1 ETH", "send 1 ETH from 0xA…").
    RecipientNotAfterTo(String),
    /// A `0x…` token that is not a 40-hex-digit address.
    MalformedAddress(String),
    /// A number the engine cannot read as a plain positive decimal (`-0.01`, `1e18`).
    UnreadableAmount(String),
    /// An amount in wei or gwei.
    Subunit(String),
    /// A symbol the registry does not know on the chain.
    UnknownAsset {
        symbol: String,
        chain: &'static str,
        known: Vec<String>,
    },
    /// The amount's asset and another asset named elsewhere in the message.
    SeveralAssets(Vec<String>),
    /// A cost question about an asset the estimate tool does not price.
    NoEstimate(String),
    /// A payment request naming several URLs (§16).
    SeveralUrls(Vec<String>),
    /// A payment request whose amount names no token the agent can pay in (§16).
    PaymentWithoutToken(String),
}

const NOTHING_SENT: &str = "Nothing was sent.";

impl Declined {
    /// The reply: why nothing moved, and what to say instead.
    pub fn explain(&self) -> String {
        let body = match self {
            Declined::Negated => "Your message says not to send, so I am not sending anything.".to_string(),
            Declined::Question { example } => format!(
                "That reads as a question, so I only answer it: I move money only on a direct request. To send, say \"{example}\"."
            ),
            Declined::NotImperative { example } => format!(
                "I move money only on a direct request that starts with send, transfer or pay. If you want me to send it, say \"{example}\"."
            ),
            Declined::SeveralRequests => {
                "Your message holds more than one transfer request; send me one request at a time.".into()
            }
            Declined::SeveralAmounts(amounts) => format!(
                "Your message names several amounts ({}); which one should I send? Say it as one request, e.g. \"send 0.01 ETH to 0x… on base\".",
                amounts.join(", ")
            ),
            Declined::SeveralRecipients(addresses) => format!(
                "Your message names several addresses ({}); which one is the recipient? Say \"send <amount> to <address>\" with only that address.",
                addresses.join(", ")
            ),
            Declined::SeveralChains(chains) => format!(
                "Your message names several chains ({}); on which one should I send?",
                chains.join(", ")
            ),
            Declined::RecipientNotAfterTo(address) => format!(
                "I send only to the address that follows \"to\". Did you mean {address} as the recipient? Then say \"send <amount> to {address}\"."
            ),
            Declined::MalformedAddress(token) => {
                format!("{token} is not a valid address (0x followed by 40 hex digits).")
            }
            Declined::UnreadableAmount(word) => {
                format!("I can't read {word} as an amount; write a plain positive decimal such as 0.01.")
            }
            Declined::Subunit(unit) => {
                format!("Give the amount in whole coins (for example 0.01 ETH), not in {unit}.")
            }
            Declined::UnknownAsset { symbol, chain, known } => format!(
                "I don't know an asset {symbol} on {chain}; there I can send {}.",
                known.join(", ")
            ),
            Declined::NoEstimate(symbol) => {
                format!("I can estimate the cost of native transfers only, not of {symbol}.")
            }
            Declined::SeveralUrls(urls) => format!(
                "Your message names several URLs ({}); which one should I pay for? Say \"pay up to 0.05 USDC for <url>\" with only that URL.",
                urls.join(", ")
            ),
            Declined::PaymentWithoutToken(amount) => format!(
                "I pay for URLs in a token such as USDC: {amount} names none I can pay in. Say \"pay up to 0.05 USDC for <url>\"."
            ),
            Declined::SeveralAssets(symbols) => format!(
                "Your message names several assets ({}); which one should I send?",
                symbols.join(", ")
            ),
        };
        format!("{body} {NOTHING_SENT}")
    }
}

impl Planner<'_> {
    /// A message that mentions moving money: an estimate, a transfer, or a reply saying why not.
    pub(super) fn transfer(&self) -> Intent {
        let s = self.scan;
        if s.has(super::COST) || s.has_phrase("how much") {
            return self.estimate();
        }
        if self.negated() {
            return Intent::Declined(Declined::Negated);
        }
        if self.question() {
            // Answered with an estimate when there is one to give; never with a transfer.
            return match self.estimate() {
                answer @ (Intent::Call(_) | Intent::Declined(_)) => answer,
                _ => Intent::Declined(Declined::Question {
                    example: self.example(),
                }),
            };
        }
        if !self.imperative() {
            // Several amounts or recipients: ask which was meant rather than how to phrase it.
            let problem = self.amount_and_asset("send_native").err();
            if let Some(ambiguous @ Intent::Declined(Declined::SeveralAmounts(_) | Declined::SeveralRecipients(_))) =
                problem.or_else(|| self.recipient().err())
            {
                return ambiguous;
            }
            return Intent::Declined(Declined::NotImperative {
                example: self.example(),
            });
        }
        self.send()
    }

    pub(super) fn negated(&self) -> bool {
        let words = &self.scan.words;
        words.iter().enumerate().any(|(i, w)| {
            NEGATIONS.contains(&w.as_str()) || (w == "t" && i > 0 && NEGATED_BEFORE_T.contains(&words[i - 1].as_str()))
        })
    }

    pub(super) fn question(&self) -> bool {
        self.scan.question_mark
            || self
                .scan
                .words
                .first()
                .is_some_and(|w| QUESTION_WORDS.contains(&w.as_str()))
    }

    /// Whether the first word after any `please`/`now`/`ok` is `send`, `transfer` or `pay`.
    pub(super) fn imperative(&self) -> bool {
        self.scan
            .words
            .iter()
            .find(|w| !LEAD_WORDS.contains(&w.as_str()))
            .is_some_and(|w| IMPERATIVE_VERBS.contains(&w.as_str()))
    }

    /// An imperative request: exactly one amount, one known asset, one recipient; "using the delegation" pays from
    /// an owner's account through the delegation named, or first looks the agent's delegations up
    /// (`super::delegated`).
    fn send(&self) -> Intent {
        let mut call = match self.send_call() {
            Ok(call) => call,
            Err(intent) => return intent,
        };
        if super::delegated::asked(&self.scan.words) {
            if let Some(id) = self.named.first() {
                call.args["delegation"] = json!(id);
            } else if !self.offered("list_delegations") {
                return self.lacks("list_delegations");
            } else {
                let chain = call.args["chain"].as_str().unwrap_or_default().to_string();
                return Intent::Call(vec![super::delegated::lookup(&chain)]);
            }
        }
        Intent::Call(vec![call])
    }

    /// The send an imperative request asks for, or why there is none.
    pub(super) fn send_call(&self) -> Result<PlannedCall, Intent> {
        if !self.offered("send_native") {
            return Err(self.lacks("send_native"));
        }
        let verbs = self.scan.words.iter();
        let verbs = verbs
            .filter(|w| SEND_VERBS.contains(&w.as_str()) || PAST_VERBS.contains(&w.as_str()))
            .count();
        if verbs > 1 {
            return Err(Intent::Declined(Declined::SeveralRequests));
        }
        let (amount, asset) = self.amount_and_asset("send_native")?;
        let to = self.recipient()?;
        let chain = asset.chain.name;
        if asset.symbol == asset.chain.native_symbol {
            Ok(PlannedCall {
                tool: "send_native",
                args: json!({"chain": chain, "to": to, "amount": amount.value}),
            })
        } else if !self.offered("send_token") {
            Err(self.lacks("send_token"))
        } else {
            Ok(PlannedCall {
                tool: "send_token",
                args: json!({"chain": chain, "token": asset.symbol, "to": to, "amount": amount.value}),
            })
        }
    }

    /// The estimate of a native transfer's cost, or why there is none.
    pub(super) fn estimate(&self) -> Intent {
        let tool = "estimate_transfer_cost";
        if !self.offered(tool) {
            return self.lacks(tool);
        }
        match self.amount_and_asset(tool) {
            Ok((amount, asset)) if asset.symbol == asset.chain.native_symbol => Intent::Call(vec![PlannedCall {
                tool,
                args: json!({"chain": asset.chain.name, "amount": amount.value}),
            }]),
            Ok((_, asset)) => Intent::Declined(Declined::NoEstimate(asset.symbol.to_string())),
            Err(intent) => intent,
        }
    }

    /// The one amount of the message and the asset it is in, on the one chain of the request.
    fn amount_and_asset(&self, tool: &'static str) -> Result<(&Amount, Asset), Intent> {
        let s = self.scan;
        if let Some(word) = s.unreadable.first() {
            return Err(Intent::Declined(Declined::UnreadableAmount(word.clone())));
        }
        let amount = match s.amounts.as_slice() {
            [] => return Err(Intent::NeedAmount { tool }),
            [one] => one,
            several => {
                let written = several.iter().map(written).collect();
                return Err(Intent::Declined(Declined::SeveralAmounts(written)));
            }
        };
        if amount.is_subunit() {
            return Err(Intent::Declined(Declined::Subunit(
                amount.unit.clone().unwrap_or_default(),
            )));
        }
        if s.chains.len() > 1 {
            let chains = s.chains.iter().map(|c| c.to_string()).collect();
            return Err(Intent::Declined(Declined::SeveralChains(chains)));
        }
        let chain = self.chain_info(amount.symbol().as_deref())?;
        let symbol = amount.symbol().unwrap_or_else(|| chain.native_symbol.to_string());
        let Some(asset) = self.context.assets.find(chain, &symbol) else {
            return Err(Intent::Declined(Declined::UnknownAsset {
                symbol,
                chain: chain.name,
                known: self
                    .context
                    .assets
                    .on_chain(chain)
                    .into_iter()
                    .map(|a| a.symbol)
                    .collect(),
            }));
        };
        let mut named = vec![asset.symbol.to_string()];
        for other in s.asset_words.iter().map(|w| symbol_of(w)) {
            if !named.contains(&other) {
                named.push(other);
            }
        }
        if named.len() > 1 {
            return Err(Intent::Declined(Declined::SeveralAssets(named)));
        }
        Ok((amount, asset))
    }

    /// The chain of a transfer: the one named, else the only registry chain whose assets include `symbol`, else
    /// the agent's first chain; a chain the agent is not on is refused.
    fn chain_info(&self, symbol: Option<&str>) -> Result<&'static ChainInfo, Intent> {
        let name = self.chain_for(symbol)?;
        registry::find(&name).ok_or(Intent::NotOnChain(name))
    }

    /// The recipient: the one address of the message, standing after "to"; with no address, the connected wallet
    /// (when "to" names anything, it must name that wallet).
    fn recipient(&self) -> Result<String, Intent> {
        let s = self.scan;
        if let Some(token) = s.malformed_hex.first() {
            return Err(Intent::Declined(Declined::MalformedAddress(token.clone())));
        }
        let mut distinct: Vec<&str> = Vec::new();
        for mention in &s.addresses {
            if !distinct.iter().any(|d| d.eq_ignore_ascii_case(&mention.text)) {
                distinct.push(&mention.text);
            }
        }
        match distinct.as_slice() {
            [] => {}
            [one] => {
                return if s.addresses.iter().any(|m| self.after_to(m.at)) {
                    Ok(one.to_string())
                } else {
                    Err(Intent::Declined(Declined::RecipientNotAfterTo(one.to_string())))
                };
            }
            several => {
                let addresses = several.iter().map(|a| a.to_string()).collect();
                return Err(Intent::Declined(Declined::SeveralRecipients(addresses)));
            }
        }
        let names_connected = CONNECTED.iter().any(|p| s.has_phrase(p));
        if let Some(to) = s.words.iter().position(|w| w == "to") {
            let after = &s.words[to + 1..];
            let is_connected = CONNECTED.iter().any(|p| {
                let parts: Vec<&str> = p.split(' ').collect();
                after.len() >= parts.len() && after.iter().zip(&parts).all(|(a, b)| a == b)
            });
            if !is_connected {
                return Err(Intent::NeedRecipient);
            }
        }
        match &self.context.connected_wallet {
            Some(wallet) => Ok(wallet.clone()),
            None if names_connected => Err(Intent::NoConnectedWallet),
            None => Err(Intent::NeedRecipient),
        }
    }

    /// Whether the address standing before word `at` follows "to" (with `the`, `address`, … between).
    fn after_to(&self, at: usize) -> bool {
        let before = &self.scan.words[..at];
        before
            .iter()
            .rev()
            .find(|w| !RECIPIENT_FILLER.contains(&w.as_str()))
            .is_some_and(|w| w == "to")
    }

    /// The request to say instead, filled with what the message gave.
    fn example(&self) -> String {
        let s = self.scan;
        let symbol = s.amounts.first().and_then(Amount::symbol);
        let chain = self.chain_for(symbol.as_deref()).unwrap_or_else(|_| "base".into());
        let symbol = registry::find(&chain).map_or("ETH", |c| c.native_symbol);
        let amount = match s.amounts.as_slice() {
            [one] => written(one),
            _ => format!("0.01 {symbol}"),
        };
        let to = match s.addresses.as_slice() {
            [one] => one.text.clone(),
            _ => "0x…".into(),
        };
        format!("send {amount} to {to} on {chain}")
    }
}

/// An amount as the user wrote it, with its symbol when it had one.
fn written(amount: &Amount) -> String {
    match amount.symbol() {
        Some(symbol) => format!("{} {symbol}", amount.value),
        None => amount.value.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::llm::TurnContext;
    use crate::llm::builtin::parse_intent;

    const A: &str = "0x52908400098527886E0F7030069857D2E4169EE7";
    const B: &str = "0x8617E340B3D01FA5F11F306F4090FD50E238070D";
    const CONNECTED_WALLET: &str = "0x00000000000000000000000000000000000000aA";
    const TOOLS: &[&str] = &["get_balance", "estimate_transfer_cost", "send_native", "send_token"];

    fn ctx(connected: bool) -> TurnContext {
        TurnContext {
            agent_name: "Scout".into(),
            chains: vec!["base".into(), "ethereum".into(), "polygon".into()],
            capabilities: vec!["read".into(), "compare".into(), "transact".into()],
            connected_wallet: connected.then(|| CONNECTED_WALLET.to_string()),
            tool_capabilities: crate::llm::builtin::test_tool_capabilities(),
            ..Default::default()
        }
    }

    fn intent(text: &str, connected: bool) -> Intent {
        parse_intent(&text.replace("{A}", A).replace("{B}", B), &ctx(connected), TOOLS)
    }

    /// (chain, to, amount) of the one `send_native` call, or None.
    fn sends(text: &str, connected: bool) -> Option<(String, String, String)> {
        match intent(text, connected) {
            Intent::Call(calls) if calls.iter().any(|c| c.tool == "send_native") => {
                assert_eq!(calls.len(), 1, "{text}");
                let args = &calls[0].args;
                let field = |k: &str| args[k].as_str().unwrap_or_default().to_string();
                Some((field("chain"), field("to"), field("amount")))
            }
            _ => None,
        }
    }

    #[test]
    fn imperative_requests_send() {
        let sent = |chain: &str, to: &str, amount: &str| Some((chain.to_string(), to.to_string(), amount.to_string()));
        for (text, connected, expected) in [
            ("send 0.01 ETH to {A} on base", false, sent("base", A, "0.01")),
            ("please send 0.01 ETH to {A}", false, sent("base", A, "0.01")),
            (
                "ok now send 0.01 eth to {A} on ethereum",
                false,
                sent("ethereum", A, "0.01"),
            ),
            ("Pay 0.5 to {A}", false, sent("base", A, "0.5")),
            ("transfer 2 MATIC to {A}", false, sent("polygon", A, "2")),
            ("send 1 POL to the address {A}", false, sent("polygon", A, "1")),
            ("send 0.01 ETH to {A} and {A} again", false, sent("base", A, "0.01")),
            ("send 0.3 ETH", true, sent("base", CONNECTED_WALLET, "0.3")),
            (
                "send 0.3 ETH to my connected wallet",
                true,
                sent("base", CONNECTED_WALLET, "0.3"),
            ),
            ("send me 0.3 ETH", true, sent("base", CONNECTED_WALLET, "0.3")),
        ] {
            assert_eq!(sends(text, connected), expected, "{text}");
        }
    }

    #[test]
    fn nothing_else_sends_and_each_refusal_says_why() {
        let declined = |d: Declined| Intent::Declined(d);
        for (text, expected) in [
            ("Do NOT send 0.01 ETH to {A}", declined(Declined::Negated)),
            ("please don't pay 0.01 ETH to {A}", declined(Declined::Negated)),
            ("send 0.01 ETH to {A}, never mind, cancel", declined(Declined::Negated)),
            (
                "I want to send 0.01 ETH to {A}",
                declined(Declined::NotImperative {
                    example: format!("send 0.01 ETH to {A} on base"),
                }),
            ),
            (
                "send 0.02 DOGE to {A}",
                declined(Declined::UnknownAsset {
                    symbol: "DOGE".into(),
                    chain: "base",
                    known: vec!["ETH".into(), "USDC".into(), "WETH".into()],
                }),
            ),
            (
                "send 1 POL to {A} on base",
                declined(Declined::UnknownAsset {
                    symbol: "POL".into(),
                    chain: "base",
                    known: vec!["ETH".into(), "USDC".into(), "WETH".into()],
                }),
            ),
            (
                "send 5 to {A} in USDC",
                declined(Declined::SeveralAssets(vec!["ETH".into(), "USDC".into()])),
            ),
            (
                "I received 0.005 ETH from {A}; now send 0.002 ETH to {B}",
                declined(Declined::SeveralAmounts(vec!["0.005 ETH".into(), "0.002 ETH".into()])),
            ),
            (
                "send 0.01 ETH to {A} or {B}",
                declined(Declined::SeveralRecipients(vec![A.into(), B.into()])),
            ),
            ("send 0.01 ETH to {A} and pay {B}", declined(Declined::SeveralRequests)),
            (
                "send 0.01 ETH to {A} on base and ethereum",
                declined(Declined::SeveralChains(vec!["base".into(), "ethereum".into()])),
            ),
            (
                "send 0.01 ETH from {A}",
                declined(Declined::RecipientNotAfterTo(A.into())),
            ),
            (
                "send 0.01 ETH to 0x1234",
                declined(Declined::MalformedAddress("0x1234".into())),
            ),
            ("send -1 ETH to {A}", declined(Declined::UnreadableAmount("-1".into()))),
            ("send 1000 wei to {A}", declined(Declined::Subunit("wei".into()))),
            ("send 0.01 ETH to bob", Intent::NeedRecipient),
            ("send ETH to {A}", Intent::NeedAmount { tool: "send_native" }),
            ("send 1 eth to {A} on arbitrum", Intent::NotOnChain("arbitrum".into())),
        ] {
            assert_eq!(intent(text, true), expected, "{text}");
            if let Intent::Declined(d) = expected {
                assert!(d.explain().ends_with(NOTHING_SENT), "{text}: {}", d.explain());
            }
        }
    }

    /// (chain, token, to, amount) of the one `send_token` call, or None.
    fn sends_token(text: &str) -> Option<(String, String, String, String)> {
        match intent(text, false) {
            Intent::Call(calls) if calls.iter().any(|c| c.tool == "send_token") => {
                assert_eq!(calls.len(), 1, "{text}");
                let field = |k: &str| calls[0].args[k].as_str().unwrap_or_default().to_string();
                Some((field("chain"), field("token"), field("to"), field("amount")))
            }
            _ => None,
        }
    }

    #[test]
    fn an_imperative_with_a_registry_token_sends_that_token() {
        let sent = |chain: &str, token: &str, amount: &str| {
            Some((chain.to_string(), token.to_string(), A.to_string(), amount.to_string()))
        };
        assert_eq!(sends_token("send 5 USDC to {A} on base"), sent("base", "USDC", "5"));
        assert_eq!(
            sends_token("please pay 0.25 usdc to {A} on ethereum"),
            sent("ethereum", "USDC", "0.25")
        );
        assert_eq!(sends_token("transfer 1.5 DAI to {A}"), sent("ethereum", "DAI", "1.5"));
        // The token's amount is never sent as the native coin.
        assert_eq!(sends(&format!("send 5 USDC to {A} on base"), false), None);
    }

    #[test]
    fn negations_in_any_case_and_with_typographic_apostrophes_send_nothing() {
        // Re-run of the first review's probes (issue 22, point 12): spellings a person or a model actually writes.
        for text in [
            "Don\u{2019}t send 0.01 ETH to {A}",
            "DON'T SEND 0.01 ETH TO {A}",
            "Do NOT send 0.01 ETH to {A}",
            "please do not transfer 0.01 ETH to {A}",
            "send 0.01 ETH to {A}. Actually, don\u{2018}t.",
            "Send 0.01 ETH to {A} \u{2014} no, wait",
            "I won\u{2019}t ask twice: never pay 0.01 ETH to {A}",
            "send 0.01 ETH to {A}? Nope, cancel that",
            "Please don\u{2bc}t send 0.01 ETH to {A}",
            "\u{201c}send 0.01 ETH to {A}\u{201d} \u{2026} is what I will never say",
        ] {
            assert_eq!(sends(text, false), None, "{text}");
            assert_eq!(sends_token(&text.replace("ETH", "USDC")), None, "{text}");
        }
    }

    #[test]
    fn negated_questioned_or_unknown_tokens_send_nothing() {
        for text in [
            "don't send 5 USDC to {A} on base",
            "never send 5 USDC to {A}",
            "can I send 5 USDC to {A} on base?",
            "send 5 FOO to {A}",
            "send 5 USDT to {A} on base",
            "send 5 USDC to {A} or {B} on base",
        ] {
            assert_eq!(sends_token(text), None, "{text}");
            assert_eq!(sends(text, false), None, "{text}");
        }
        assert_eq!(
            intent("don't send 5 USDC to {A} on base", false),
            Intent::Declined(Declined::Negated)
        );
        assert!(matches!(
            intent("send 5 FOO to {A}", false),
            Intent::Declined(Declined::UnknownAsset { symbol, .. }) if symbol == "FOO"
        ));
        // A token is sent only with the tool that sends tokens.
        let native_only = parse_intent(&format!("send 5 USDC to {A} on base"), &ctx(false), &["send_native"]);
        assert!(
            matches!(native_only, Intent::Lacks { tool: "send_token", .. }),
            "{native_only:?}"
        );
    }

    #[test]
    fn questions_are_estimated_or_explained() {
        for text in [
            "can I send 0.01 ETH to {A}?",
            "how would I send 0.01 ETH to {A} on base?",
            "what if I sent 0.01 ETH to {A}",
            "send 0.01 ETH to {A}?",
            "how much would it cost to send 0.01 ETH on base",
        ] {
            let Intent::Call(calls) = intent(text, false) else {
                panic!("{text} is estimated")
            };
            assert_eq!(calls.len(), 1, "{text}");
            assert_eq!(calls[0].tool, "estimate_transfer_cost", "{text}");
            assert_eq!(calls[0].args["amount"], "0.01", "{text}");
        }
        let read_only = parse_intent(&format!("can I send 0.01 ETH to {A}?"), &ctx(false), &["get_balance"]);
        assert!(
            matches!(&read_only, Intent::Declined(Declined::Question { example }) if example.contains(A)),
            "{read_only:?}"
        );
        assert!(matches!(
            intent("can I send USDC to {A}?", false),
            Intent::Declined(Declined::Question { .. })
        ));
    }
}
