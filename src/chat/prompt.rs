//! The system prompt and the history a model sees: newest messages, oldest first, earlier tool calls summarised.

use crate::domain::agent::Agent;
use crate::llm::{LlmMessage, TurnContext};
use crate::store::{Message, Role};

/// Messages of earlier turns a model sees.
pub const HISTORY_MESSAGES: i64 = 20;

pub fn context(
    agent: &Agent,
    connected_wallet: Option<String>,
    assets: std::sync::Arc<crate::domain::asset::Registry>,
) -> TurnContext {
    TurnContext {
        agent_name: agent.name.clone(),
        chains: agent.chains.clone(),
        capabilities: agent.capabilities.iter().map(|c| c.as_str().to_string()).collect(),
        wallet_addresses: agent
            .wallet_addresses
            .iter()
            .map(|(c, a)| (c.clone(), a.to_checksum(None)))
            .collect(),
        connected_wallet,
        tool_capabilities: crate::tools::capabilities(),
        assets,
    }
}

pub fn system_prompt(ctx: &TurnContext) -> String {
    let wallets: Vec<String> = ctx.wallet_addresses.iter().map(|(c, a)| format!("{c}: {a}")).collect();
    format!(
        "You are {name}, an AI agent with your own crypto wallet, operated by agentd.\n\
         Chains: {chains}.\nCapabilities: {caps}.\nYour wallet addresses: {wallets}.\n\
         The user's connected wallet: {connected}.\n\
         Use the tools for every figure you state and quote the figures exactly as the tools return them \
         (amounts are exact decimal strings). Never invent balances, prices or hashes. \
         If a tool returns an error, explain it plainly. Be concise.",
        name = ctx.agent_name,
        chains = ctx.chains.join(", "),
        caps = ctx.capabilities.join(", "),
        wallets = wallets.join("; "),
        connected = ctx.connected_wallet.as_deref().unwrap_or("none"),
    )
}

/// Earlier messages as model input. Assistant messages carry a short summary of their chain calls.
pub fn history(messages: &[Message]) -> Vec<LlmMessage> {
    messages
        .iter()
        .map(|m| match m.role {
            Role::User => LlmMessage::User(m.content.clone()),
            Role::Assistant => {
                let calls = m.chain_calls.as_array().map(Vec::as_slice).unwrap_or_default();
                let mut content = m.content.clone();
                if !calls.is_empty() {
                    let summary: Vec<String> = calls
                        .iter()
                        .map(|c| {
                            let mut result = c.get("result").map(|r| r.to_string()).unwrap_or_default();
                            if let Some(error) = c.get("error") {
                                result = format!("error {error}");
                            }
                            let result: String = result.chars().take(300).collect();
                            format!("{}({}) -> {}", c["tool"].as_str().unwrap_or("?"), c["args"], result)
                        })
                        .collect();
                    content.push_str(&format!("\n[earlier tool calls: {}]", summary.join("; ")));
                }
                LlmMessage::Assistant {
                    content,
                    tool_calls: Vec::new(),
                }
            }
        })
        .collect()
}
