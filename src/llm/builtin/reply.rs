//! The builtin engine's direct replies: help text, refusals, and questions back when a request is incomplete.

use super::intent::Intent;
use crate::llm::TurnContext;

/// A direct reply for an intent that needs no tool.
pub fn reply(intent: &Intent, context: &TurnContext) -> String {
    let chains = chain_list(context);
    match intent {
        Intent::Call(_) | Intent::Help => help(context),
        Intent::Lacks { tool, capability } if context.capabilities.iter().any(|c| c == capability) => {
            format!("I can't do that here: the {tool} tool ({capability} capability) is not available in this chat.")
        }
        Intent::Lacks { tool, capability } => format!(
            "I can't do that: it needs the {capability} capability (tool {tool}), which this agent does not have. {}",
            can_do(context)
        ),
        Intent::NotOnChain(chain) => format!("This agent is not on {chain}. Its chains are: {chains}."),
        Intent::NoChains => "This agent has no chains configured, so there is nothing I can look up.".into(),
        Intent::NeedAmount { tool } if *tool == "send_native" => {
            "How much should I send? Say for example \"send 0.01 ETH to 0x… on base\".".into()
        }
        Intent::NeedAmount { .. } => {
            "For which amount? Say for example \"how much would it cost to send 0.01 ETH on base\".".into()
        }
        Intent::NeedRecipient => {
            "Whom should I send it to? Give a 0x address, or connect your wallet and say \"to my wallet\".".into()
        }
        Intent::NoConnectedWallet => "No wallet is connected to this chat. Give the 0x address instead.".into(),
        Intent::NeedTxHash => "Which transaction? Give its hash, e.g. \"status of 0x… on base\".".into(),
        Intent::Addresses => addresses(context),
        Intent::Declined(declined) => declined.explain(),
    }
}

fn chain_list(context: &TurnContext) -> String {
    if context.chains.is_empty() {
        "none".into()
    } else {
        context.chains.join(", ")
    }
}

fn addresses(context: &TurnContext) -> String {
    if context.wallet_addresses.is_empty() {
        return "This agent has no wallet yet.".into();
    }
    let lines: Vec<String> = context
        .wallet_addresses
        .iter()
        .map(|(chain, address)| format!("- {chain}: {address}"))
        .collect();
    format!("This agent's wallet addresses:\n{}", lines.join("\n"))
}

/// One sentence per capability, with an example request for each.
fn can_do(context: &TurnContext) -> String {
    let has = |c: &str| context.capabilities.iter().any(|own| own == c);
    let mut lines = Vec::new();
    if has("read") {
        lines.push("- read: balances (\"what is my balance on base\"), gas prices (\"gas price on ethereum\"), the latest block (\"latest block on base\") and transaction status (\"status of 0x… on base\")");
    }
    if has("compare") {
        lines.push("- compare: gas across chains (\"compare gas\"), balances on every chain (\"balances\") and transfer costs (\"how much would it cost to send 0.01 ETH on base\")");
    }
    if has("transact") {
        lines.push("- transact: send funds (\"send 0.01 ETH to 0x… on base\", or \"to my wallet\" when your wallet is connected)");
    }
    if has("analytics") {
        lines.push("- analytics: spending against the cap (\"how much have I spent\") and transaction history (\"show my transactions\")");
    }
    if lines.is_empty() {
        return "This agent has no capabilities enabled.".into();
    }
    format!(
        "Here is what I can do on {}:\n{}",
        chain_list(context),
        lines.join("\n")
    )
}

/// The help text: who the agent is and what it can do.
pub fn help(context: &TurnContext) -> String {
    let name = if context.agent_name.trim().is_empty() {
        "this agent"
    } else {
        context.agent_name.trim()
    };
    format!("I'm {name}, a wallet agent. {}", can_do(context))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn context(capabilities: &[&str]) -> TurnContext {
        TurnContext {
            agent_name: "Scout".into(),
            chains: vec!["ethereum".into(), "base".into()],
            capabilities: capabilities.iter().map(|c| c.to_string()).collect(),
            tool_capabilities: crate::llm::builtin::test_tool_capabilities(),
            ..Default::default()
        }
    }

    #[test]
    fn help_lists_only_granted_capabilities() {
        let text = help(&context(&["compare"]));
        assert!(text.contains("compare gas") && !text.contains("send funds") && text.contains("ethereum, base"));
        assert!(help(&context(&[])).contains("no capabilities"));
    }

    #[test]
    fn refusals_name_what_is_missing() {
        let text = reply(
            &Intent::Lacks {
                tool: "send_native",
                capability: "transact",
            },
            &context(&["read"]),
        );
        assert!(
            text.contains("transact capability") && text.contains("send_native"),
            "{text}"
        );
        let text = reply(&Intent::NotOnChain("polygon".into()), &context(&["read"]));
        assert_eq!(text, "This agent is not on polygon. Its chains are: ethereum, base.");
        let text = reply(
            &Intent::Lacks {
                tool: "send_native",
                capability: "transact",
            },
            &context(&["transact"]),
        );
        assert!(
            text.contains("not available") && !text.contains("does not have"),
            "{text}"
        );
    }
}
