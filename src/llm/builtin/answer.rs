//! Answers composed from tool results, quoting their figures exactly and explaining `{"error": …}` results.

use serde_json::Value;

use crate::llm::{ToolCall, TurnContext};

/// The final answer after tools ran: one paragraph per call, in call order.
pub fn compose(calls: &[ToolCall], results: &[Option<&str>], context: &TurnContext) -> String {
    let parts: Vec<String> = calls
        .iter()
        .zip(results.iter().chain(std::iter::repeat(&None)))
        .map(|(call, result)| match result {
            None => format!("{} gave no result.", call.name),
            Some(text) => match serde_json::from_str::<Value>(text) {
                Ok(value) => describe(call, &value, context),
                Err(_) => format!("{}: {}", call.name, text.trim()),
            },
        })
        .collect();
    parts.join("\n")
}

/// The explorer link of a transaction result after `lead`, or, for a chain on a local node (`local_node`), that no
/// public explorer shows it (a link there would lead nowhere).
fn explorer(value: &Value, lead: &str) -> String {
    if value.get("local_node").and_then(Value::as_bool) == Some(true) {
        return " It is on a local node: no public explorer shows it.".to_string();
    }
    field(value, "explorer_url").map_or_else(String::new, |url| format!("{lead}{url}"))
}

/// A scalar as written in the result (strings unquoted, numbers as JSON renders them).
fn field(value: &Value, key: &str) -> Option<String> {
    match value.get(key)? {
        Value::String(s) => Some(s.clone()),
        Value::Null => None,
        Value::Object(_) | Value::Array(_) => None,
        other => Some(other.to_string()),
    }
}

fn text(value: &Value, key: &str) -> String {
    field(value, key).unwrap_or_else(|| "?".into())
}

fn chain_of(call: &ToolCall, value: &Value) -> String {
    field(value, "chain")
        .or_else(|| field(&call.arguments, "chain"))
        .unwrap_or_else(|| "the chain".into())
}

/// Describes one tool result, falling back to compact JSON for shapes it does not know.
pub fn describe(call: &ToolCall, value: &Value, context: &TurnContext) -> String {
    if let Some(error) = value
        .get("error")
        .filter(|_| value.get("chains").is_none() && value.get("balances").is_none())
    {
        return describe_error(call, value, error, context);
    }
    let chain = chain_of(call, value);
    let known = match call.name.as_str() {
        "get_balance" => balance_line(value).map(|b| {
            let line = format!("Balance on {chain}: {b}.");
            match field(&call.arguments, "token") {
                Some(token) => format!("{} {line}", token_line(&chain, value, &token)),
                None => format!("{line}{}", tokens_line(value)),
            }
        }),
        "get_gas_price" => field(value, "gas_price_gwei").map(|g| {
            let mut line = format!("Gas price on {chain}: {g} gwei");
            if let (Some(base), Some(tip)) = (field(value, "base_fee_gwei"), field(value, "priority_fee_gwei")) {
                line.push_str(&format!(" (base fee {base} gwei, priority fee {tip} gwei)"));
            }
            line + "."
        }),
        "get_block_number" => field(value, "block_number").map(|n| format!("The latest block on {chain} is {n}.")),
        "get_transaction" => field(value, "status").map(|status| transaction_line(&chain, value, &status)),
        "compare_gas" => value
            .get("chains")
            .and_then(Value::as_array)
            .map(|rows| compare_gas(value, rows)),
        "compare_balances" => value
            .get("balances")
            .and_then(Value::as_array)
            .map(|rows| compare_balances(value, rows)),
        "estimate_transfer_cost" => field(value, "fee").map(|fee| estimate(&chain, value, &fee)),
        "send_native" | "send_token" if field(value, "status").as_deref() == Some("awaiting_approval") => {
            Some(awaiting(value))
        }
        "send_native" | "send_token" => field(value, "tx_hash").map(|hash| sent(&chain, value, &hash)),
        "pay_http" => Some(paid_line(value)),
        "spending_summary" => value.get("chains").and_then(Value::as_array).map(|rows| spending(rows)),
        "transaction_history" => value
            .get("transactions")
            .and_then(Value::as_array)
            .map(|rows| history(rows)),
        _ => None,
    };
    known.unwrap_or_else(|| format!("{} returned: {}", call.name, compact(value)))
}

/// What a `pay_http` call gave: the resource's status and the payment made for it, if any (§16).
fn paid_line(value: &Value) -> String {
    let status = field(value, "status").unwrap_or_default();
    let payment = value.get("payment").filter(|p| !p.is_null());
    let Some(payment) = payment else {
        return format!("The resource answered {status} and asked for no payment; nothing was paid.");
    };
    let amount = field(payment, "amount").unwrap_or_default();
    let asset = field(payment, "asset").unwrap_or_default();
    let to = field(payment, "to").unwrap_or_default();
    let id = field(payment, "transfer_id").unwrap_or_default();
    if field(payment, "status").as_deref() == Some("awaiting_approval") {
        return format!(
            "The resource asks {amount} {asset} (to {to}); the payment awaits an owner's approval (transfer {id}). Nothing is signed yet."
        );
    }
    format!("Paid {amount} {asset} to {to} (transfer {id}); the resource answered {status}.")
}

/// A transfer held for an owner's approval: nothing is signed yet.
fn awaiting(value: &Value) -> String {
    let id = field(value, "transfer_id").unwrap_or_else(|| "the transfer".into());
    let mut line = format!("Transfer {id} waits for an owner's approval; nothing is signed or sent until then");
    if let Some(expires) = field(value, "expires_at") {
        line.push_str(&format!(" (it expires at {expires} if nobody approves it)"));
    }
    line + "."
}

fn chains(count: usize) -> String {
    if count == 1 {
        "1 chain".into()
    } else {
        format!("{count} chains")
    }
}

fn compact(value: &Value) -> String {
    let text = value.to_string();
    if text.chars().count() > 1500 {
        format!("{}…", text.chars().take(1500).collect::<String>())
    } else {
        text
    }
}

/// `0.5 ETH (500000000000000000 wei) at 0x…`
fn balance_line(value: &Value) -> Option<String> {
    let formatted = field(value, "formatted")?;
    let mut line = format!("{formatted} {}", field(value, "symbol").unwrap_or_default())
        .trim_end()
        .to_string();
    if let Some(wei) = field(value, "wei") {
        line.push_str(&format!(" ({wei} wei)"));
    }
    if let Some(address) = field(value, "address") {
        line.push_str(&format!(" at {address}"));
    }
    Some(line)
}

/// One token's balance from a `get_balance` result (`5 USDC (5000000 units) on base`), or why it has none.
fn token_line(chain: &str, value: &Value, wanted: &str) -> String {
    let tokens = value.get("tokens").and_then(Value::as_object);
    let found = tokens.and_then(|t| t.iter().find(|(symbol, _)| symbol.eq_ignore_ascii_case(wanted)));
    match found {
        Some((symbol, entry)) => match (field(entry, "formatted"), entry.get("error")) {
            (Some(formatted), _) => format!(
                "{symbol} balance on {chain}: {formatted} {symbol} ({} base units, token {}).",
                text(entry, "units"),
                text(entry, "address")
            ),
            (None, Some(error)) => format!(
                "The {symbol} balance on {chain} could not be read: {}.",
                field(error, "message").unwrap_or_else(|| text(error, "code"))
            ),
            (None, None) => format!("The {symbol} balance on {chain} could not be read."),
        },
        None => format!("{wanted} is not a token I know on {chain}."),
    }
}

/// ` Tokens: 5 USDC, 0 WETH.` from a `get_balance` result (empty when the chain has no tokens).
fn tokens_line(value: &Value) -> String {
    let Some(tokens) = value.get("tokens").and_then(Value::as_object).filter(|t| !t.is_empty()) else {
        return String::new();
    };
    let parts: Vec<String> = tokens
        .iter()
        .map(|(symbol, entry)| match field(entry, "formatted") {
            Some(formatted) => format!("{formatted} {symbol}"),
            None => format!("{symbol} unavailable"),
        })
        .collect();
    format!(" Tokens: {}.", parts.join(", "))
}

fn transaction_line(chain: &str, value: &Value, status: &str) -> String {
    let hash = field(value, "tx_hash").unwrap_or_else(|| "the transaction".into());
    if status == "not_found" {
        return format!("Transaction {hash} was not found on {chain}.");
    }
    let mut line = format!("Transaction {hash} on {chain} is {status}");
    if let Some(block) = field(value, "block_number") {
        line.push_str(&format!(", in block {block}"));
    }
    if let Some(confirmations) = field(value, "confirmations") {
        line.push_str(&format!(", {confirmations} confirmations"));
    }
    line.push('.');
    if let Some(from) = field(value, "from") {
        line.push_str(&format!(" From {from}"));
        if let Some(to) = field(value, "to") {
            line.push_str(&format!(" to {to}"));
        }
        line.push('.');
    }
    match (field(value, "value"), field(value, "value_wei")) {
        (Some(amount), Some(wei)) => {
            let symbol = field(value, "symbol").unwrap_or_default();
            line.push_str(&format!(" Value: {amount} {symbol} ({wei} wei)."));
        }
        (None, Some(wei)) => line.push_str(&format!(" Value: {wei} wei.")),
        _ => {}
    }
    if let Some(gas) = field(value, "gas_used") {
        line.push_str(&format!(" Gas used: {gas}."));
    }
    line.push_str(&explorer(value, " "));
    line
}

fn row_error(row: &Value) -> Option<String> {
    let error = row.get("error")?;
    Some(match error {
        Value::String(message) => message.clone(),
        other => field(other, "message")
            .or_else(|| field(other, "code"))
            .unwrap_or_else(|| compact(other)),
    })
}

fn compare_gas(value: &Value, rows: &[Value]) -> String {
    let mut lines = vec![match field(value, "cheapest") {
        Some(cheapest) => format!(
            "Gas compared across {}; the cheapest is {cheapest}.",
            chains(rows.len())
        ),
        None => format!("Gas compared across {}.", chains(rows.len())),
    }];
    for row in rows {
        let chain = text(row, "chain");
        lines.push(match row_error(row) {
            Some(error) => format!("- {chain}: unavailable ({error})"),
            None => {
                let mut line = format!("- {chain}: {} gwei", text(row, "gas_price_gwei"));
                if let Some(cost) = field(row, "transfer_cost") {
                    line.push_str(&format!(
                        ", a transfer costs {cost} {}",
                        field(row, "symbol").unwrap_or_default()
                    ));
                    let line_trimmed = line.trim_end().to_string();
                    line = line_trimmed;
                }
                if let Some(wei) = field(row, "transfer_cost_wei") {
                    line.push_str(&format!(" ({wei} wei)"));
                }
                line
            }
        });
    }
    lines.join("\n")
}

fn compare_balances(value: &Value, rows: &[Value]) -> String {
    let mut lines = vec![format!("Balances on {}:", chains(rows.len()))];
    for row in rows {
        let chain = text(row, "chain");
        lines.push(match (row_error(row), balance_line(row)) {
            (Some(error), _) => format!("- {chain}: unavailable ({error})"),
            (None, Some(balance)) => format!("- {chain}: {balance}"),
            (None, None) => format!("- {chain}: {}", compact(row)),
        });
    }
    match value.get("total") {
        None | Some(Value::Null) => {}
        Some(Value::String(total)) => lines.push(format!("Total: {total}")),
        Some(Value::Object(map)) => {
            let parts: Vec<String> = map
                .iter()
                .map(|(k, v)| format!("{} {k}", v.as_str().map_or_else(|| v.to_string(), str::to_string)))
                .collect();
            lines.push(format!("Total: {}", parts.join(", ")));
        }
        Some(other) => lines.push(format!("Total: {other}")),
    }
    lines.join("\n")
}

fn estimate(chain: &str, value: &Value, fee: &str) -> String {
    let symbol = field(value, "symbol").unwrap_or_default();
    let mut line = format!(
        "Sending {} {symbol} on {chain} would cost about {fee} {symbol} in fees",
        text(value, "amount")
    );
    if let Some(wei) = field(value, "fee_wei") {
        line.push_str(&format!(" ({wei} wei"));
        if let (Some(gas), Some(max_fee)) = (field(value, "gas_limit"), field(value, "max_fee_per_gas_gwei")) {
            line.push_str(&format!(": {gas} gas at up to {max_fee} gwei"));
        }
        if let Some(l1) = field(value, "l1_fee_wei").filter(|l1| l1 != "0") {
            line.push_str(&format!(", of which {l1} wei is the L1 data fee"));
        }
        line.push(')');
    }
    if let Some(total) = field(value, "total") {
        line.push_str(&format!(", {total} {symbol} in total"));
        if let Some(wei) = field(value, "total_wei") {
            line.push_str(&format!(" ({wei} wei)"));
        }
    }
    // An estimate often answers a question about sending: say plainly that it moved nothing.
    line + ". This is an estimate: nothing was sent."
}

fn sent(chain: &str, value: &Value, hash: &str) -> String {
    let symbol = field(value, "symbol").unwrap_or_default();
    let mut line = format!(
        "Sent {} {symbol} to {} on {chain}. Transaction {hash} is {}.",
        text(value, "amount"),
        text(value, "to"),
        text(value, "status")
    );
    line.push_str(&explorer(value, " Explorer: "));
    line
}

fn spending(rows: &[Value]) -> String {
    if rows.is_empty() {
        return "No spending recorded on any chain.".into();
    }
    let mut lines = vec!["Spending against the cap:".to_string()];
    for row in rows {
        let symbol = field(row, "symbol").unwrap_or_default();
        lines.push(format!(
            "- {}: spent {} {symbol} of a {} {symbol} cap, {} {symbol} remaining",
            text(row, "chain"),
            text(row, "spent"),
            text(row, "spending_cap"),
            text(row, "remaining")
        ));
    }
    lines.join("\n")
}

fn history(rows: &[Value]) -> String {
    if rows.is_empty() {
        return "No transactions yet.".into();
    }
    let mut lines = vec![format!(
        "{} transaction{}:",
        rows.len(),
        if rows.len() == 1 { "" } else { "s" }
    )];
    for row in rows {
        let mut line = format!(
            "- {} {}: {}",
            text(row, "chain"),
            text(row, "tx_hash"),
            text(row, "status")
        );
        if let Some(to) = field(row, "to") {
            line.push_str(&format!(", to {to}"));
        }
        if let Some(wei) = field(row, "value_wei") {
            line.push_str(&format!(", {wei} wei"));
        } else if let Some(amount) = field(row, "amount") {
            line.push_str(format!(", {amount} {}", field(row, "symbol").unwrap_or_default()).trim_end());
        }
        if let Some(block) = field(row, "block_number") {
            line.push_str(&format!(", block {block}"));
        }
        if let Some(at) = field(row, "created_at") {
            line.push_str(&format!(" ({at})"));
        }
        lines.push(line);
    }
    lines.join("\n")
}

/// What a failed tool call means, in words.
fn describe_error(call: &ToolCall, value: &Value, error: &Value, context: &TurnContext) -> String {
    let (code, message) = match error {
        Value::String(message) => (None, Some(message.clone())),
        other => (field(other, "code"), field(other, "message")),
    };
    let action = match call.name.as_str() {
        "get_balance" | "compare_balances" => "read the balance",
        "get_gas_price" | "compare_gas" => "get the gas price",
        "get_block_number" => "get the latest block",
        "get_transaction" => "look up the transaction",
        "estimate_transfer_cost" => "estimate the transfer cost",
        "send_native" | "send_token" => "send the transfer",
        "spending_summary" => "summarise the spending",
        "transaction_history" => "list the transactions",
        _ => "run that",
    };
    let place = match (field(value, "chain"), field(&call.arguments, "chain")) {
        (Some(chain), _) | (None, Some(chain)) => format!(" on {chain}"),
        _ => String::new(),
    };
    let mut line = format!("I couldn't {action}{place}");
    if let Some(message) = message {
        line.push_str(&format!(": {}", message.trim_end_matches('.')));
    }
    if let Some(code) = code {
        line.push_str(&format!(
            " ({code}: {})",
            code_meaning(&code, context.capability_of(&call.name))
        ));
    }
    line + "."
}

/// `capability` is the one the called tool needs.
fn code_meaning(code: &str, capability: &str) -> String {
    match code {
        "capability_denied" => format!("this agent lacks the {capability} capability this needs"),
        "spending_cap_exceeded" => {
            "the transfer plus its maximum fee would exceed the agent's spending cap on this chain".into()
        }
        "invalid_recipient" => {
            "the recipient is the zero address or the agent's own wallet, so nothing was sent".into()
        }
        "insufficient_funds" => "the wallet does not hold enough to cover the amount plus fees".into(),
        "upstream_unavailable" => "the chain node is unavailable right now".into(),
        "upstream_timeout" => "the chain node did not answer in time".into(),
        "validation_failed" | "invalid_arguments" | "invalid_args" => "the request had an invalid value".into(),
        "chain_not_configured" | "unknown_chain" | "chain_not_enabled" => {
            "that chain is not available to this agent".into()
        }
        "chain_id_mismatch" => {
            "the chain node reports a different chain id than expected, so nothing was signed".into()
        }
        "not_found" | "transaction_not_found" | "tx_not_found" => "no such transaction was found".into(),
        "unknown_tool" => "that tool does not exist".into(),
        "agent_inactive" => "the agent is deactivated".into(),
        "internal_error" => "the service could not read its own records".into(),
        _ => "an error reported by the tool".into(),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    const ADDR: &str = "0x52908400098527886E0F7030069857D2E4169EE7";

    fn describe(call: &ToolCall, value: &Value) -> String {
        let context = TurnContext {
            tool_capabilities: crate::llm::builtin::test_tool_capabilities(),
            ..TurnContext::default()
        };
        super::describe(call, value, &context)
    }

    fn compose(calls: &[ToolCall], results: &[Option<&str>]) -> String {
        super::compose(calls, results, &TurnContext::default())
    }

    fn call(name: &str, args: Value) -> ToolCall {
        ToolCall {
            id: "call_1".into(),
            name: name.into(),
            arguments: args,
        }
    }

    #[test]
    fn describes_tool_results_with_their_figures() {
        let gas = describe(
            &call("get_gas_price", json!({"chain": "ethereum"})),
            &json!({"chain": "ethereum", "base_fee_gwei": "11.2", "priority_fee_gwei": "0.05", "gas_price_gwei": "11.25"}),
        );
        assert!(
            gas.contains("11.25 gwei") && gas.contains("11.2") && gas.contains("0.05"),
            "{gas}"
        );
        let block = describe(
            &call("get_block_number", json!({})),
            &json!({"chain": "base", "block_number": 30123456}),
        );
        assert_eq!(block, "The latest block on base is 30123456.");
        let tx = describe(
            &call("get_transaction", json!({})),
            &json!({"chain": "base", "tx_hash": "0xabc", "status": "confirmed", "block_number": 7}),
        );
        assert!(
            tx.contains("0xabc") && tx.contains("confirmed") && tx.contains("block 7"),
            "{tx}"
        );
        let compare = describe(
            &call("compare_gas", json!({})),
            &json!({"cheapest": "base", "chains": [
                {"chain": "base", "gas_price_gwei": "0.01", "transfer_cost_wei": "210000000000", "transfer_cost": "0.00000021", "symbol": "ETH"},
                {"chain": "ethereum", "error": {"code": "upstream_timeout", "message": "timed out"}}]}),
        );
        assert!(
            compare.contains("cheapest is base")
                && compare.contains("0.00000021 ETH")
                && compare.contains("210000000000 wei")
                && compare.contains("timed out"),
            "{compare}"
        );
        let estimate = describe(
            &call("estimate_transfer_cost", json!({})),
            &json!({"chain": "base", "amount": "0.01", "gas_limit": 21000, "max_fee_per_gas_gwei": "0.02", "fee_wei": "420000000000", "fee": "0.00000042", "total_wei": "10000420000000000", "total": "0.01000042", "symbol": "ETH"}),
        );
        for figure in [
            "0.01 ETH",
            "0.00000042 ETH",
            "420000000000 wei",
            "21000 gas",
            "0.01000042 ETH",
            "10000420000000000 wei",
        ] {
            assert!(estimate.contains(figure), "{estimate} lacks {figure}");
        }
        let sent = describe(
            &call("send_native", json!({})),
            &json!({"chain": "base", "tx_hash": "0xfeed", "status": "pending", "to": ADDR, "amount": "0.01", "symbol": "ETH", "explorer_url": "https://basescan.org/tx/0xfeed"}),
        );
        assert!(
            sent.contains("0xfeed") && sent.contains("pending") && sent.contains("https://basescan.org/tx/0xfeed"),
            "{sent}"
        );
        // On a local node (the demo's anvil) no explorer knows the transaction: the answer says so, without a link.
        let local = describe(
            &call("send_native", json!({})),
            &json!({"chain": "base", "tx_hash": "0xfeed", "status": "pending", "to": ADDR, "amount": "0.01", "symbol": "ETH", "explorer_url": "https://basescan.org/tx/0xfeed", "local_node": true}),
        );
        assert!(local.contains("0xfeed") && local.contains("local node"), "{local}");
        assert!(!local.contains("basescan"), "{local}");
        let spending = describe(
            &call("spending_summary", json!({})),
            &json!({"chains": [{"chain": "base", "spending_cap": "0.5", "spent": "0.1", "remaining": "0.4", "symbol": "ETH"}]}),
        );
        assert!(
            spending.contains("spent 0.1 ETH of a 0.5 ETH cap, 0.4 ETH remaining"),
            "{spending}"
        );
        let balances = describe(
            &call("compare_balances", json!({})),
            &json!({"balances": [{"chain": "base", "wei": "5", "formatted": "0.000000000000000005", "symbol": "ETH"}, {"chain": "ethereum", "error": "node down"}]}),
        );
        assert!(
            balances.contains("0.000000000000000005 ETH") && balances.contains("node down"),
            "{balances}"
        );
        assert_eq!(
            describe(&call("transaction_history", json!({})), &json!({"transactions": []})),
            "No transactions yet."
        );
        let waiting = describe(
            &call("send_native", json!({"chain": "base"})),
            &json!({"transfer_id": "t-1", "status": "awaiting_approval", "expires_at": "2026-11-23T12:00:00Z"}),
        );
        assert_eq!(
            waiting,
            "Transfer t-1 waits for an owner's approval; nothing is signed or sent until then (it expires at \
             2026-11-23T12:00:00Z if nobody approves it)."
        );
        let unknown = describe(&call("mystery", json!({})), &json!({"x": 1}));
        assert_eq!(unknown, "mystery returned: {\"x\":1}");
    }

    #[test]
    fn explains_errors() {
        let denied = describe(
            &call("send_native", json!({"chain": "base"})),
            &json!({"error": {"code": "capability_denied", "message": "the agent lacks transact"}}),
        );
        assert!(
            denied.contains("capability_denied")
                && denied.contains("lacks the transact capability")
                && denied.contains("on base"),
            "{denied}"
        );
        let capped = describe(
            &call("send_native", json!({"chain": "base"})),
            &json!({"error": {"code": "spending_cap_exceeded", "message": "over the cap"}}),
        );
        assert!(
            capped.contains("spending_cap_exceeded") && capped.contains("spending cap"),
            "{capped}"
        );
        let text = compose(
            &[call("get_balance", json!({})), call("get_block_number", json!({}))],
            &[Some("not json"), None],
        );
        assert_eq!(text, "get_balance: not json\nget_block_number gave no result.");
    }

    #[test]
    fn a_token_balance_question_is_answered_with_that_token_first() {
        let value = json!({"chain": "base", "address": ADDR, "wei": "1000000000000000000", "formatted": "1",
            "symbol": "ETH", "tokens": {"USDC": {"address": "0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913",
            "units": "5000000", "formatted": "5", "decimals": 6},
            "WETH": {"address": "0x4200000000000000000000000000000000000006",
            "error": {"code": "token_unavailable", "message": "no token"}}}});
        let asked = describe(&call("get_balance", json!({"chain": "base", "token": "USDC"})), &value);
        assert!(
            asked.starts_with("USDC balance on base: 5 USDC (5000000 base units"),
            "{asked}"
        );
        let all = describe(&call("get_balance", json!({"chain": "base"})), &value);
        assert!(all.ends_with("Tokens: 5 USDC, WETH unavailable."), "{all}");
        let sent = describe(
            &call("send_token", json!({"chain": "base"})),
            &json!({"chain": "base", "tx_hash": "0xab", "status": "pending", "amount": "5", "symbol": "USDC",
                "to": ADDR}),
        );
        assert!(sent.starts_with(&format!("Sent 5 USDC to {ADDR} on base.")), "{sent}");
    }
}
