//! What a chat message asks for, decided by keyword rules over the scanned words: tool calls or a direct reply.

use serde_json::{Map, Value, json};

mod delegated;
mod payment;
mod transfer;

use super::scan::Scan;
use crate::domain::chain as registry;
use crate::llm::TurnContext;
pub(super) use delegated::follow_up;
use transfer::{Declined, PAST_VERBS, SEND_VERBS};

/// One tool call the builtin engine wants to make.
#[derive(Debug, Clone, PartialEq)]
pub struct PlannedCall {
    pub tool: &'static str,
    pub args: Value,
}

/// The outcome of reading a user message.
#[derive(Debug, Clone, PartialEq)]
pub enum Intent {
    /// Run these tools, then answer from their results.
    Call(Vec<PlannedCall>),
    /// The request needs a tool this agent is not offered.
    Lacks {
        tool: &'static str,
        capability: &'static str,
    },
    /// The request names a chain the agent is not on.
    NotOnChain(String),
    /// The agent has no chains at all.
    NoChains,
    /// A transfer or estimate without an amount.
    NeedAmount { tool: &'static str },
    /// A transfer without a recipient.
    NeedRecipient,
    /// The user referred to a connected wallet, but none was given.
    NoConnectedWallet,
    /// A transaction status request without a hash.
    NeedTxHash,
    /// The user asked for the agent's own addresses.
    Addresses,
    /// A message about moving money that moves none (§15): the reason, to explain or to ask back.
    Declined(Declined),
    /// Nothing recognised: answer with what the agent can do.
    Help,
}

pub(super) const COST: &[&str] = &[
    "cost",
    "costs",
    "fee",
    "fees",
    "estimate",
    "gas",
    "expensive",
    "cheap",
    "price",
];
const SPENDING: &[&str] = &["spent", "spending", "spend", "spendings", "cap", "budget", "allowance"];
const HISTORY: &[&str] = &["history", "transactions", "txs", "transfers", "activity", "txns"];
const SINGLE_TX: &[&str] = &["transaction", "tx", "txn", "receipt"];
const GAS: &[&str] = &["gas", "gwei", "fee", "fees"];
const COMPARE: &[&str] = &[
    "compare",
    "comparison",
    "cheapest",
    "lowest",
    "all",
    "across",
    "every",
    "each",
    "everywhere",
    "which",
];
const BALANCE: &[&str] = &["balance", "balances", "funds", "holdings"];
const ALL: &[&str] = &[
    "balances",
    "all",
    "every",
    "each",
    "everywhere",
    "across",
    "compare",
    "total",
];
/// Reads `text` against the agent's facts; only tools named in `offered_tools` are ever planned.
pub fn parse_intent(text: &str, context: &TurnContext, offered_tools: &[&str]) -> Intent {
    // Delegation ids are taken out first: their digits are no amount.
    let (text, named) = delegated::take_ids(text);
    let text = text.as_str();
    let urls = payment::urls(text);
    if !urls.is_empty() {
        let scan = Scan::new(&payment::without_urls(text));
        let planner = Planner {
            scan: &scan,
            context,
            offered: offered_tools,
            named: &named,
        };
        if let Some(intent) = planner.pay_for(&urls) {
            return intent;
        }
    }
    let scan = Scan::new(text);
    let planner = Planner {
        scan: &scan,
        context,
        offered: offered_tools,
        named: &named,
    };
    planner.plan()
}

/// The send a message asks for "using the delegation" without naming one (its plan is the lookup of the
/// delegations), without its delegation: what the engine sends once it has read them (`delegated::follow_up`).
pub(super) fn delegated_send(text: &str, context: &TurnContext, offered_tools: &[&str]) -> Option<PlannedCall> {
    let (text, named) = delegated::take_ids(text);
    let scan = Scan::new(&text);
    let planner = Planner {
        scan: &scan,
        context,
        offered: offered_tools,
        named: &named,
    };
    match planner.plan() {
        Intent::Call(calls)
            if calls.len() == 1 && calls[0].tool == "list_delegations" && delegated::asked(&scan.words) =>
        {
            planner.send_call().ok()
        }
        _ => None,
    }
}

pub(super) struct Planner<'a> {
    pub(super) scan: &'a Scan,
    pub(super) context: &'a TurnContext,
    offered: &'a [&'a str],
    /// Delegation ids the message names (§21), taken out of its text.
    pub(super) named: &'a [String],
}

impl Planner<'_> {
    fn plan(&self) -> Intent {
        let s = self.scan;
        let how_much = s.has_phrase("how much");
        if let Some(hash) = &s.tx_hash {
            return self.single("get_transaction", json!({"tx_hash": hash}));
        }
        let past_payment = s.has(PAST_VERBS) && !s.amounts.is_empty();
        if (s.has(SEND_VERBS) || past_payment) && !s.has(HISTORY) {
            return self.transfer();
        }
        if s.has(SPENDING) {
            return self.simple("spending_summary", json!({}));
        }
        let asks_status = s.has(&["status", "confirmed", "check", "receipt", "pending", "mined"]);
        if ((s.has(SINGLE_TX) || s.has_phrase("is it")) && asks_status) || s.has(&["confirmed", "mined"]) {
            return if self.offered("get_transaction") {
                Intent::NeedTxHash
            } else {
                self.lacks("get_transaction")
            };
        }
        if s.has(HISTORY)
            || (s.has(SINGLE_TX) && s.has(&["last", "latest", "recent", "my", "previous", "show", "list"]))
        {
            return self.history();
        }
        let gas = s.has(GAS) || s.has_phrase("cheapest chain");
        if (gas && (s.has(COMPARE) || s.chains.len() > 1)) || s.has(&["cheapest"]) {
            return self.fan_out("compare_gas", "get_gas_price", json!({}));
        }
        if gas {
            return self.per_chain("get_gas_price", json!({}));
        }
        if s.has(&["block", "blocks", "height", "blocknumber", "blockheight"]) {
            return self.per_chain("get_block_number", json!({}));
        }
        if s.has(BALANCE) || (how_much && s.has(&["have", "hold", "own", "got"])) {
            let args = match self.address() {
                Ok(args) => args,
                Err(intent) => return intent,
            };
            let args = match self.named_token() {
                Some(token) => with(args, "token", json!(token)),
                None => args,
            };
            if s.has(ALL) {
                return self.fan_out("compare_balances", "get_balance", args);
            }
            return self.per_chain("get_balance", args);
        }
        if s.has(&[
            "address",
            "addresses",
            "deposit",
            "fund",
            "receive",
            "wallet",
            "wallets",
        ]) {
            return Intent::Addresses;
        }
        Intent::Help
    }

    pub(super) fn offered(&self, tool: &str) -> bool {
        self.offered.contains(&tool)
    }

    pub(super) fn lacks(&self, tool: &'static str) -> Intent {
        Intent::Lacks {
            tool,
            capability: self.context.capability_of(tool),
        }
    }

    /// The first named chain that the agent is not on.
    fn foreign_chain(&self, chains: &[&str]) -> Option<Intent> {
        chains
            .iter()
            .find(|c| !self.context.chains.iter().any(|own| own == *c))
            .map(|c| Intent::NotOnChain(c.to_string()))
    }

    /// The chain a single-chain request is about.
    fn chain(&self) -> Result<String, Intent> {
        let symbol = self.scan.amounts.first().and_then(|a| a.symbol());
        self.chain_for(symbol.as_deref())
    }

    /// The named chain, else the only registry chain that knows `symbol` (POL: polygon; ETH: many), else the
    /// agent's first chain; a named or implied chain the agent is not on is refused.
    pub(super) fn chain_for(&self, symbol: Option<&str>) -> Result<String, Intent> {
        let implied = symbol.and_then(|symbol| {
            let mut chains = registry::CHAINS
                .iter()
                .filter(|c| self.context.assets.find(c, symbol).is_some());
            match (chains.next(), chains.next()) {
                (Some(only), None) => Some(only.name),
                _ => None,
            }
        });
        match self.scan.chains.first().copied().or(implied) {
            Some(chain) => self.foreign_chain(&[chain]).map_or(Ok(chain.to_string()), Err),
            None => self.context.chains.first().cloned().ok_or(Intent::NoChains),
        }
    }

    /// A registry token the message names ("what is my USDC balance"), in its registry spelling.
    fn named_token(&self) -> Option<String> {
        self.scan.words.iter().find_map(|word| {
            let symbol = super::scan::symbol_of(word);
            registry::CHAINS
                .iter()
                .flat_map(|c| self.context.assets.tokens(c))
                .find(|t| t.symbol == symbol)
                .map(|t| t.symbol.clone())
        })
    }

    /// The `address` argument: an address in the text, or the connected wallet when the user refers to it.
    fn address(&self) -> Result<Value, Intent> {
        let mut args = Map::new();
        if let Some(address) = &self.scan.address {
            args.insert("address".into(), json!(address));
        } else if self.scan.has_phrase("connected wallet") || self.scan.has_phrase("my wallet") {
            match &self.context.connected_wallet {
                Some(wallet) => {
                    args.insert("address".into(), json!(wallet));
                }
                None if self.scan.has_phrase("connected wallet") => return Err(Intent::NoConnectedWallet),
                None => {}
            }
        }
        Ok(Value::Object(args))
    }

    /// A tool without a chain argument.
    fn simple(&self, tool: &'static str, args: Value) -> Intent {
        if !self.offered(tool) {
            return self.lacks(tool);
        }
        Intent::Call(vec![PlannedCall { tool, args }])
    }

    /// A tool on one chain: `args` plus `chain`.
    fn single(&self, tool: &'static str, args: Value) -> Intent {
        if !self.offered(tool) {
            return self.lacks(tool);
        }
        match self.chain() {
            Ok(chain) => Intent::Call(vec![PlannedCall {
                tool,
                args: with(args, "chain", json!(chain)),
            }]),
            Err(intent) => intent,
        }
    }

    /// A per-chain tool, called once for every named chain (or once on the default chain).
    fn per_chain(&self, tool: &'static str, args: Value) -> Intent {
        if self.scan.chains.len() < 2 {
            return self.single(tool, args);
        }
        if !self.offered(tool) {
            return self.lacks(tool);
        }
        if let Some(intent) = self.foreign_chain(&self.scan.chains) {
            return intent;
        }
        let calls = self.scan.chains.iter().map(|c| PlannedCall {
            tool,
            args: with(args.clone(), "chain", json!(c)),
        });
        Intent::Call(calls.collect())
    }

    /// A multi-chain tool (`compare_*`), or one `fallback` call per chain when only that is offered.
    fn fan_out(&self, tool: &'static str, fallback: &'static str, args: Value) -> Intent {
        if let Some(intent) = self.foreign_chain(&self.scan.chains) {
            return intent;
        }
        if self.offered(tool) {
            let args = if self.scan.chains.len() > 1 {
                with(args, "chains", json!(self.scan.chains))
            } else {
                args
            };
            return Intent::Call(vec![PlannedCall { tool, args }]);
        }
        if !self.offered(fallback) {
            return self.lacks(if fallback == "get_balance" { fallback } else { tool });
        }
        let chains: Vec<String> = if self.scan.chains.len() > 1 {
            self.scan.chains.iter().map(|c| c.to_string()).collect()
        } else {
            self.context.chains.clone()
        };
        if chains.is_empty() {
            return Intent::NoChains;
        }
        Intent::Call(
            chains
                .into_iter()
                .map(|c| PlannedCall {
                    tool: fallback,
                    args: with(args.clone(), "chain", json!(c)),
                })
                .collect(),
        )
    }

    fn history(&self) -> Intent {
        let mut args = json!({});
        if let Some(chain) = self.scan.chains.first() {
            if let Some(intent) = self
                .foreign_chain(&[chain])
                .filter(|_| self.offered("transaction_history"))
            {
                return intent;
            }
            args = with(args, "chain", json!(chain));
        }
        if let Some(count) = self.scan.count.filter(|n| (1..=100).contains(n)) {
            args = with(args, "limit", json!(count));
        }
        self.simple("transaction_history", args)
    }
}

/// `args` with `key` set (args is always an object here).
fn with(mut args: Value, key: &str, value: Value) -> Value {
    if let Value::Object(map) = &mut args {
        map.insert(key.to_string(), value);
    }
    args
}

#[cfg(test)]
mod tests {
    use super::*;

    const ADDR: &str = "0x52908400098527886E0F7030069857D2E4169EE7";
    const ALL_TOOLS: &[&str] = &[
        "get_balance",
        "get_gas_price",
        "get_block_number",
        "get_transaction",
        "compare_gas",
        "compare_balances",
        "estimate_transfer_cost",
        "send_native",
        "spending_summary",
        "transaction_history",
    ];
    const READ: &[&str] = &["get_balance", "get_gas_price", "get_block_number", "get_transaction"];

    fn ctx() -> TurnContext {
        TurnContext {
            agent_name: "Scout".into(),
            chains: vec![
                "ethereum".into(),
                "base".into(),
                "base-sepolia".into(),
                "polygon".into(),
            ],
            capabilities: vec!["read".into(), "compare".into(), "transact".into(), "analytics".into()],
            wallet_addresses: vec![("ethereum".into(), ADDR.into())],
            connected_wallet: Some("0x00000000000000000000000000000000000000aA".into()),
            tool_capabilities: crate::llm::builtin::test_tool_capabilities(),
            ..Default::default()
        }
    }

    fn one(text: &str) -> (&'static str, Value) {
        match parse_intent(text, &ctx(), ALL_TOOLS) {
            Intent::Call(calls) if calls.len() == 1 => (calls[0].tool, calls[0].args.clone()),
            other => panic!("{text:?} gave {other:?}"),
        }
    }

    #[test]
    fn phrasing_list() {
        let hash = format!("0x{}", "1f".repeat(32));
        let cases: Vec<(String, &str, Value)> = vec![
            (
                "what is my balance on base".into(),
                "get_balance",
                json!({"chain": "base"}),
            ),
            (
                "what is my USDC balance on base".into(),
                "get_balance",
                json!({"chain": "base", "token": "USDC"}),
            ),
            (
                "Balance on Ethereum".into(),
                "get_balance",
                json!({"chain": "ethereum"}),
            ),
            (
                format!("balance of {ADDR} on base?"),
                "get_balance",
                json!({"chain": "base", "address": ADDR}),
            ),
            (
                "balance of my wallet on base".into(),
                "get_balance",
                json!({"chain": "base", "address": "0x00000000000000000000000000000000000000aA"}),
            ),
            ("balances".into(), "compare_balances", json!({})),
            ("Show all balances".into(), "compare_balances", json!({})),
            (
                "gas price on ethereum".into(),
                "get_gas_price",
                json!({"chain": "ethereum"}),
            ),
            (
                "what's the base fee on eth?".into(),
                "get_gas_price",
                json!({"chain": "ethereum"}),
            ),
            ("compare gas".into(), "compare_gas", json!({})),
            ("which is the cheapest chain".into(), "compare_gas", json!({})),
            (
                "compare gas on base and polygon".into(),
                "compare_gas",
                json!({"chains": ["base", "polygon"]}),
            ),
            (
                "latest block on base".into(),
                "get_block_number",
                json!({"chain": "base"}),
            ),
            ("block number".into(), "get_block_number", json!({"chain": "ethereum"})),
            (
                "how much would it cost to send 0.01 ETH on base".into(),
                "estimate_transfer_cost",
                json!({"chain": "base", "amount": "0.01"}),
            ),
            (
                "fee to transfer .5 eth on base sepolia".into(),
                "estimate_transfer_cost",
                json!({"chain": "base-sepolia", "amount": ".5"}),
            ),
            (
                format!("send 0.01 ETH to {ADDR} on base"),
                "send_native",
                json!({"chain": "base", "to": ADDR, "amount": "0.01"}),
            ),
            (
                "send 1 eth to my wallet".into(),
                "send_native",
                json!({"chain": "ethereum", "to": "0x00000000000000000000000000000000000000aA", "amount": "1"}),
            ),
            (
                format!("transfer 2 MATIC to {ADDR}"),
                "send_native",
                json!({"chain": "polygon", "to": ADDR, "amount": "2"}),
            ),
            ("how much have I spent".into(), "spending_summary", json!({})),
            ("show my transactions".into(), "transaction_history", json!({})),
            (
                "transaction history on base".into(),
                "transaction_history",
                json!({"chain": "base"}),
            ),
            (
                "my last 3 transactions".into(),
                "transaction_history",
                json!({"limit": 3}),
            ),
            (
                format!("status of {hash} on base"),
                "get_transaction",
                json!({"chain": "base", "tx_hash": hash}),
            ),
            (
                hash.clone(),
                "get_transaction",
                json!({"chain": "ethereum", "tx_hash": hash}),
            ),
        ];
        for (text, tool, args) in cases {
            assert_eq!(one(&text), (tool, args), "{text}");
        }
    }

    #[test]
    fn several_chains_give_several_calls() {
        let Intent::Call(calls) = parse_intent("balance on base and ethereum", &ctx(), ALL_TOOLS) else {
            panic!()
        };
        let chains: Vec<&Value> = calls.iter().map(|c| &c.args["chain"]).collect();
        assert_eq!(chains, [&json!("base"), &json!("ethereum")]);
    }

    #[test]
    fn fallbacks_when_compare_is_not_offered() {
        let Intent::Call(calls) = parse_intent("balances", &ctx(), READ) else {
            panic!()
        };
        assert_eq!(calls.len(), 4);
        assert!(calls.iter().all(|c| c.tool == "get_balance"));
        assert_eq!(calls[2].args, json!({"chain": "base-sepolia"}));
        let Intent::Call(calls) = parse_intent("compare gas", &ctx(), READ) else {
            panic!()
        };
        assert!(calls.iter().all(|c| c.tool == "get_gas_price") && calls.len() == 4);
    }

    #[test]
    fn missing_capabilities_are_named() {
        let lacks = |text: &str| parse_intent(text, &ctx(), READ);
        assert_eq!(
            lacks(&format!("send 1 eth to {ADDR}")),
            Intent::Lacks {
                tool: "send_native",
                capability: "transact"
            }
        );
        assert_eq!(
            lacks("how much have I spent"),
            Intent::Lacks {
                tool: "spending_summary",
                capability: "analytics"
            }
        );
        assert_eq!(
            lacks("cost to send 1 eth"),
            Intent::Lacks {
                tool: "estimate_transfer_cost",
                capability: "compare"
            }
        );
        assert_eq!(
            parse_intent("gas on base", &ctx(), &[]),
            Intent::Lacks {
                tool: "get_gas_price",
                capability: "read"
            }
        );
    }

    #[test]
    fn foreign_chains_and_missing_arguments() {
        assert_eq!(
            parse_intent("balance on arbitrum one", &ctx(), ALL_TOOLS),
            Intent::NotOnChain("arbitrum".into())
        );
        assert_eq!(
            parse_intent("gas on OP", &ctx(), ALL_TOOLS),
            Intent::NotOnChain("optimism".into())
        );
        assert_eq!(
            parse_intent("send to 0x1 on base", &ctx(), ALL_TOOLS),
            Intent::NeedAmount { tool: "send_native" }
        );
        let mut no_wallet = ctx();
        no_wallet.connected_wallet = None;
        assert_eq!(
            parse_intent("send 0.1 eth", &no_wallet, ALL_TOOLS),
            Intent::NeedRecipient
        );
        assert_eq!(
            parse_intent("send 0.1 eth to my wallet", &no_wallet, ALL_TOOLS),
            Intent::NoConnectedWallet
        );
        assert_eq!(
            parse_intent("is my transaction confirmed?", &ctx(), ALL_TOOLS),
            Intent::NeedTxHash
        );
        assert_eq!(
            parse_intent("balance", &TurnContext::default(), ALL_TOOLS),
            Intent::NoChains
        );
        assert_eq!(parse_intent("hello there", &ctx(), ALL_TOOLS), Intent::Help);
        assert_eq!(
            parse_intent("what is your deposit address", &ctx(), ALL_TOOLS),
            Intent::Addresses
        );
    }
}
