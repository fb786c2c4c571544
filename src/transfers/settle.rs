//! Settling a payment to the agent (§23) on the one send path: the agent's wallet sends the token's
//! `transferWithAuthorization` with the buyer's signature. Decided in the same atomic step as any outflow — the cap
//! counts its fee, no policy rule judges money coming in (`Clearance::Decided`) — recorded before it is sent, sent at
//! most once, recovered after a crash by the watcher like any transaction. The seller (`crate::sell`) names the
//! transaction's id on the payment's hold before it asks, so that a crash anywhere leaves the two linked.
//!
//! Where the operator sponsors the agent's gas on the chain (§22) and the agent's address already designates
//! agentd's account, the settlement is a sponsored user operation instead (its gas the sponsorship's); a settlement
//! never designates the account — an address without code settles from its wallet.

use alloy::primitives::{Address, Bytes, U256};
use uuid::Uuid;

use super::kinds::{CallDraft, Outflow, Purpose, SettleDraft};
use super::{TransferError, TransferOutcome, Transfers};
use crate::domain::agent::Agent;
use crate::domain::chain::ChainInfo;
use crate::domain::transaction::{CallRecord, Payer};
use crate::sponsor::Account;
use crate::store::{Clearance, Mandate};

/// A settlement to send.
pub struct SettleOrder<'a> {
    /// The transaction's id, named on the payment's hold first.
    pub id: Uuid,
    pub agent: &'a Agent,
    pub chain: &'static ChainInfo,
    pub token: Address,
    /// `transferWithAuthorization(...)` as `domain::sale::settle_calldata` builds it.
    pub calldata: Bytes,
    /// What the simulation right before found, with room.
    pub gas_limit: u64,
}

impl Transfers {
    /// Decides, signs, records and broadcasts the settlement (see the module's doc).
    #[tracing::instrument(skip_all, fields(agent_id = %order.agent.id, chain = order.chain.name))]
    pub async fn settle_payment(&self, order: SettleOrder<'_>) -> Result<TransferOutcome, TransferError> {
        let from = *order
            .agent
            .wallet_addresses
            .get(order.chain.name)
            .ok_or(TransferError::NoWallet)?;
        let record = CallRecord {
            data: order.calldata,
            selector: None,
            function: Some("transferWithAuthorization".into()),
            args: None,
            simulation: serde_json::json!({"changes": [], "approvals": [], "gas_used": order.gas_limit}),
            figures: Vec::new(),
            calls: Vec::new(),
        };
        let gas = self.settlement_payer(order.agent.id, order.chain, from).await?;
        let outflow = Outflow {
            id: order.id,
            agent_id: order.agent.id,
            chain: order.chain,
            conversation_id: None,
            from,
            to: order.token,
            value: U256::ZERO,
            purpose: Purpose::Settle(Box::new(SettleDraft {
                call: CallDraft {
                    record,
                    check: None,
                    gas_limit: order.gas_limit,
                    designate: None,
                },
            })),
            gas,
            clearance: Clearance::Decided,
            mandate: Mandate::NONE,
            owed: None,
        };
        self.send_outflow(outflow).await
    }
}

impl Transfers {
    /// Who pays a settlement's gas: the sponsorship where the agent has one on the chain and its address already
    /// designates agentd's account (`Account::Smart`), else the wallet.
    async fn settlement_payer(
        &self,
        agent_id: Uuid,
        chain: &'static ChainInfo,
        from: Address,
    ) -> Result<Payer, TransferError> {
        let Some(sponsor) = self.sponsors.chain(chain.name) else {
            return Ok(Payer::Wallet);
        };
        if self.payer(agent_id, chain, None).await? != Payer::Sponsor {
            return Ok(Payer::Wallet);
        }
        let code = self.chains.get(chain.name)?.code(from).await?;
        Ok(
            match Account::of(
                &code,
                Some(sponsor.account_implementation),
                &sponsor.previous_implementations,
            ) {
                Account::Smart => Payer::Sponsor,
                Account::Eoa | Account::Foreign => Payer::Wallet,
            },
        )
    }
}
