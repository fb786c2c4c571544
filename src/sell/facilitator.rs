//! The agent's own x402 facilitator (§23): `verify`, `settle` and `supported` in the x402 v2 facilitator format, for
//! requirements whose `payTo` is the agent's wallet only (agentd is no public facilitator). The same checks and the
//! same settlement as an offer's, without an offer: `verify` changes nothing; `settle` takes the hold and answers a
//! repeat of the same signature with its first outcome (`settlement_pending` again while it is not included).

use serde_json::{Value, json};

use super::{SellError, Seller, Settled};
use crate::domain::agent::Agent;
use crate::domain::asset::Asset;
use crate::domain::chain::ChainInfo;
use crate::domain::sale::{Payment, Reason, Terms};
use crate::store::income::IncomeStatus;

/// The requirements a facilitator caller sent, as the agent's terms (or why they are not the agent's to settle).
type Accepted = Result<(Terms, &'static ChainInfo, Asset), Reason>;

impl Seller {
    /// `GET …/x402/supported`: the `exact` scheme on each of the agent's chains, signed by its wallet.
    pub fn supported(&self, agent: &Agent) -> Value {
        let mut kinds = Vec::new();
        let mut signers = Vec::new();
        for name in &agent.chains {
            let (Some(chain), Some(wallet)) = (crate::domain::chain::find(name), agent.wallet_addresses.get(name))
            else {
                continue;
            };
            kinds.push(json!({"x402Version": 2, "scheme": "exact", "network": format!("eip155:{}", chain.chain_id)}));
            let wallet = wallet.to_checksum(None);
            if !signers.contains(&wallet) {
                signers.push(wallet);
            }
        }
        json!({"kinds": kinds, "extensions": [], "signers": {"eip155:*": signers}})
    }

    /// The agent's terms from `paymentRequirements`: the `exact` scheme, one of its chains, its own wallet as
    /// `payTo`, a registry token with an EIP-712 domain as `asset`.
    fn accepted(&self, agent: &Agent, requirements: &Value) -> Accepted {
        let text = |key: &str| requirements.get(key).and_then(Value::as_str);
        if text("scheme") != Some("exact") {
            return Err(Reason::UnsupportedScheme);
        }
        let chain = text("network")
            .and_then(|n| n.strip_prefix("eip155:"))
            .and_then(|id| id.parse::<u64>().ok())
            .and_then(|id| {
                agent
                    .chains
                    .iter()
                    .filter_map(|c| crate::domain::chain::find(c))
                    .find(|c| c.chain_id == id)
            })
            .ok_or(Reason::NetworkMismatch)?;
        let wallet = *agent.wallet_addresses.get(chain.name).ok_or(Reason::NetworkMismatch)?;
        let pay_to = text("payTo").and_then(|p| p.parse::<alloy::primitives::Address>().ok());
        if pay_to != Some(wallet) {
            return Err(Reason::PayToNotAgent);
        }
        let asset = text("asset")
            .and_then(|a| self.chains.tokens().find(chain, a))
            .filter(|a| a.token.is_some())
            .ok_or(Reason::RequirementsMismatch)?;
        let (name, version) = asset.eip712.clone().ok_or(Reason::RequirementsMismatch)?;
        let amount = text("amount")
            .and_then(|a| alloy::primitives::U256::from_str_radix(a, 10).ok())
            .filter(|a| !a.is_zero())
            .ok_or(Reason::RequirementsMismatch)?;
        let max_timeout_seconds = requirements
            .get("maxTimeoutSeconds")
            .and_then(Value::as_u64)
            .filter(|s| (1..=3600).contains(s))
            .ok_or(Reason::RequirementsMismatch)?;
        let terms = Terms {
            chain_id: chain.chain_id,
            token: asset.token.unwrap_or_default(),
            amount,
            pay_to: wallet,
            max_timeout_seconds,
            name,
            version,
            upfront: false,
        };
        Ok((terms, chain, asset))
    }

    /// The payment and the terms of a facilitator body `{x402Version: 2, paymentPayload, paymentRequirements}`.
    fn facilitated(&self, agent: &Agent, body: &Value) -> (Result<Payment, Reason>, Accepted) {
        let payment = body
            .get("paymentPayload")
            .ok_or(Reason::InvalidPayload)
            .and_then(Payment::parse);
        let accepted = match body.get("paymentRequirements") {
            Some(requirements) if body.get("x402Version").and_then(Value::as_u64) == Some(2) => {
                self.accepted(agent, requirements)
            }
            _ => Err(Reason::InvalidPayload),
        };
        (payment, accepted)
    }

    /// `POST …/x402/verify`: `{isValid, invalidReason?, payer}`; nothing is written. A node or store failure is
    /// logged and answered as x402's `unexpected_verify_error`.
    pub async fn facilitator_verify(&self, agent: &Agent, body: &Value) -> Value {
        self.try_verify(agent, body).await.unwrap_or_else(|e| {
            tracing::error!(error = %e, "a facilitator verify failed");
            invalid_code("unexpected_verify_error", &payer_of(&self.facilitated(agent, body).0))
        })
    }

    /// `POST …/x402/settle`: `{success, errorReason?, transaction, network, payer}`. A node or store failure is
    /// logged and answered as x402's `unexpected_settle_error`.
    pub async fn facilitator_settle(&self, agent: &Agent, body: &Value) -> Value {
        self.try_settle(agent, body).await.unwrap_or_else(|e| {
            tracing::error!(error = %e, "a facilitator settle failed");
            json!({"success": false, "errorReason": "unexpected_settle_error", "transaction": "",
                "network": body.pointer("/paymentRequirements/network").cloned().unwrap_or(json!("")),
                "payer": payer_of(&self.facilitated(agent, body).0)})
        })
    }

    async fn try_verify(&self, agent: &Agent, body: &Value) -> Result<Value, SellError> {
        let (payment, accepted) = self.facilitated(agent, body);
        let payer = payer_of(&payment);
        let (terms, chain, _) = match accepted {
            Ok(accepted) => accepted,
            Err(reason) => return Ok(invalid(reason, &payer)),
        };
        Ok(match self.check(agent, None, (&terms, chain), payment, None).await? {
            Ok(verified) => json!({"isValid": true, "payer": verified.payer.to_checksum(None)}),
            Err(refused) => invalid(refused.reason, &payer),
        })
    }

    async fn try_settle(&self, agent: &Agent, body: &Value) -> Result<Value, SellError> {
        let (payment, accepted) = self.facilitated(agent, body);
        let payer = payer_of(&payment);
        let network = body
            .pointer("/paymentRequirements/network")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string();
        let failed = |reason: &str, transaction: &str| {
            json!({"success": false, "errorReason": reason, "transaction": transaction, "network": network,
                "payer": payer})
        };
        let (terms, chain, asset) = match accepted {
            Ok(accepted) => accepted,
            Err(reason) => return Ok(failed(reason.code(), "")),
        };
        // A repeat of a settle this agent took: its first outcome, or where its settlement stands.
        let earlier = match &payment {
            Ok(payment) => {
                self.store
                    .income_by_nonce(
                        chain.name,
                        terms.token,
                        payment.authorization.from,
                        payment.authorization.nonce,
                    )
                    .await?
            }
            Err(_) => None,
        };
        if let Ok(payment) = &payment
            && let Some(income) = &earlier
            && income.agent_id == agent.id
            && income.offer_id.is_none()
            && income.signature_key == payment.signature_key()
        {
            if let Some(outcome) = &income.outcome {
                return Ok(outcome.clone());
            }
            if income.status == IncomeStatus::Settling
                && let Some(id) = income.transfer_id
            {
                let settled = match self.store.get_transaction(agent.id, id).await? {
                    Some(tx) => self.wait_for(agent, income, &terms, &tx).await?,
                    None => Settled::Pending {
                        transaction: String::new(),
                    },
                };
                return self.settle_answer(income, &terms, &payer, settled).await;
            }
            return Ok(failed(Reason::NonceAlreadyUsed.code(), ""));
        }
        let verified = match self
            .check(agent, None, (&terms, chain), payment, Some(earlier.is_some()))
            .await?
        {
            Ok(verified) => verified,
            Err(refused) => {
                self.audit_refusal(agent, None, refused).await;
                return Ok(failed(refused.reason.code(), ""));
            }
        };
        let income = match self.hold(agent, None, (chain, &asset), &verified).await {
            Ok(income) => income,
            Err(refused) => {
                self.audit_refusal(agent, None, refused).await;
                return Ok(failed(refused.reason.code(), ""));
            }
        };
        let settled = self.settle(agent, (chain, &terms), &income, &verified).await?;
        self.settle_answer(&income, &terms, &payer, settled).await
    }

    /// The settle answer of `settled`, kept as the payment's first outcome unless it is still pending.
    async fn settle_answer(
        &self,
        income: &crate::store::income::Income,
        terms: &Terms,
        payer: &str,
        settled: Settled,
    ) -> Result<Value, SellError> {
        let answer = |success: bool, reason: Option<&str>, transaction: &str| {
            let mut answer = json!({"success": success, "transaction": transaction, "network": terms.network(),
                "payer": payer});
            if let Some(reason) = reason {
                answer["errorReason"] = json!(reason);
            }
            answer
        };
        let (answer, last) = match settled {
            Settled::Done { transaction } => (answer(true, None, &transaction), true),
            Settled::Pending { transaction } => (answer(false, Some("settlement_pending"), &transaction), false),
            Settled::Failed { transaction } => (answer(false, Some("transaction_failed"), &transaction), true),
            Settled::Refused(reason) => (answer(false, Some(reason.code()), ""), true),
        };
        if last {
            self.store.keep_outcome(income.id, &answer).await?;
        }
        Ok(answer)
    }
}

fn payer_of(payment: &Result<Payment, Reason>) -> String {
    payment
        .as_ref()
        .map(|p| p.authorization.from.to_checksum(None))
        .unwrap_or_default()
}

fn invalid(reason: Reason, payer: &str) -> Value {
    invalid_code(reason.code(), payer)
}

fn invalid_code(code: &str, payer: &str) -> Value {
    json!({"isValid": false, "invalidReason": code, "payer": payer})
}
