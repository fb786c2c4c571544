//! §23's checks of a payment, in their order: `offer_paused` (the settlement priced now against the offer's
//! `gas_per_day` and the cap) → the payload, the requirements, the recipient, the value and the time window, and the
//! ECDSA signature, none of which reads the chain → then, together, what the rest needs (the payer's code, its
//! blocking, the nonce held here or used on chain, its balance less what it holds here, the settlement's simulation
//! from the agent's wallet), judged in order.

use alloy::primitives::{Address, Bytes, U256};
use alloy::sol_types::SolCall;

use super::{Refused, SETTLE_GAS, SellError, Seller, Verified};
use crate::chain::Node;
use crate::chain::authorizations::SettleCall;
use crate::chain::delegations::Read;
use crate::domain::agent::Agent;
use crate::domain::chain::ChainInfo;
use crate::domain::sale::{self, Payment, Reason, Terms};
use crate::store::offers::Offer;

/// How old a fee read may be to price a settlement before it is signed.
const FEE_MAX_AGE: std::time::Duration = std::time::Duration::from_secs(2);

alloy::sol! {
    /// ERC-1271, the token's own check of a signature by an account with code.
    interface IErc1271 {
        function isValidSignature(bytes32 hash, bytes signature) external view returns (bytes4);
    }
}

/// ERC-1271's answer for a valid signature.
const ERC1271_MAGIC: [u8; 4] = [0x16, 0x26, 0xba, 0x7e];

/// What one check of a payment came to.
pub(super) type Checked = Result<Verified, Refused>;

impl Seller {
    /// The settlement priced now: `SETTLE_GAS` times the latest base fee plus the priority fee.
    async fn price(&self, chain: &'static ChainInfo) -> Result<U256, SellError> {
        let fees = self.chains.get(chain.name)?.recent_fees(FEE_MAX_AGE).await?;
        let per_gas = fees.base_fee_per_gas.saturating_add(fees.max_priority_fee_per_gas);
        Ok(U256::from(SETTLE_GAS).saturating_mul(U256::from(per_gas)))
    }

    /// Whether the offer's `gas_per_day` or the agent's cap cannot pay one more settlement priced at `priced`.
    async fn paused(&self, agent: &Agent, offer: Option<&Offer>, chain: &str, priced: U256) -> Result<bool, SellError> {
        let spent = agent.spent_wei.get(chain).copied().unwrap_or_default();
        if agent.spending_cap_wei.saturating_sub(spent) < priced {
            return Ok(true);
        }
        if let Some(offer) = offer {
            let counted = self.store.offer_gas_counted(offer.id).await?;
            if counted.saturating_add(priced) > offer.gas_per_day {
                return Ok(true);
            }
        }
        Ok(false)
    }

    /// Every check of §23 in its order (see the module's doc); nothing is written. `held_here`: whether this
    /// service holds the payment's authorization, when the caller has read it already (else it is read here).
    pub(super) async fn check(
        &self,
        agent: &Agent,
        offer: Option<&Offer>,
        (terms, chain): (&Terms, &'static ChainInfo),
        payment: Result<Payment, Reason>,
        held_here: Option<bool>,
    ) -> Result<Checked, SellError> {
        let priced = self.price(chain).await?;
        if self.paused(agent, offer, chain.name, priced).await? {
            return Ok(Err(Reason::OfferPaused.into()));
        }
        let payment = match payment {
            Ok(payment) => payment,
            Err(reason) => return Ok(Err(reason.into())),
        };
        if let Err(reason) = sale::check_requirements(&payment.accepted, terms)
            .and_then(|()| sale::check_authorization(&payment.authorization, terms, self.now_unix()))
        {
            return Ok(Err(reason.into()));
        }
        let auth = payment.authorization;
        if payment.is_erc6492() {
            return Ok(Err(Reason::Signature.into()));
        }
        let digest = sale::digest(&auth, terms);
        let client = self.chains.get(chain.name)?;
        let recovered = match self.signed_by(client, auth.from, digest, &payment.signature).await? {
            Ok(recovered) => recovered,
            Err(reason) => return Ok(Err(reason.into())),
        };
        let refused = |reason| {
            Ok(Err(Refused {
                reason,
                payer: Some(auth.from),
            }))
        };
        // A buyer of an offer is limited per payer before the reads that cost the node (§15).
        if offer.is_some()
            && let Err(seconds) = self.per_payer.check(&auth.from)
        {
            return refused(Reason::RateLimited(seconds));
        }
        let settle = SettleCall {
            from: terms.pay_to,
            calldata: sale::settle_calldata(&payment),
            gas: SETTLE_GAS,
        };
        // The node's part in one batch (the payer's code, the authorization's state, its balance, the settlement's
        // `eth_call` with the gas it will be signed with), the store's beside it.
        let (reads, blocked, held_here, held_of_payer) = tokio::join!(
            client.payer_reads(terms.token, (auth.from, auth.nonce), &settle),
            self.store.payer_blocked(auth.from),
            async {
                match held_here {
                    Some(held) => Ok(held),
                    None => self
                        .store
                        .income_by_nonce(chain.name, terms.token, auth.from, auth.nonce)
                        .await
                        .map(|income| income.is_some()),
                }
            },
            self.store.held_of_payer(chain.name, terms.token, auth.from),
        );
        let reads = reads?;
        // An ECDSA signature by an address with code (an EIP-7702 designation included) is judged as the token judges
        // it: by the account's ERC-1271 (read beside the rest, the signature having recovered `from`).
        if recovered
            && !reads.code.is_empty()
            && !self.valid_1271(client, auth.from, digest, &payment.signature).await?
        {
            return refused(Reason::Signature);
        }
        if blocked? {
            return refused(Reason::PayerBlocked);
        }
        if held_here? || reads.used {
            return refused(Reason::NonceAlreadyUsed);
        }
        if reads.balance.saturating_sub(held_of_payer?) < auth.value {
            return refused(Reason::InsufficientBalance);
        }
        let has_code = !reads.code.is_empty();
        let gas_limit = match settlement_gas(client, (terms, settle.calldata), reads.settles, has_code).await? {
            Ok(gas_limit) => gas_limit,
            Err(reason) => return refused(reason),
        };
        let gas = U256::from(gas_limit.max(SETTLE_GAS)).saturating_mul(priced) / U256::from(SETTLE_GAS);
        Ok(Ok(Verified {
            payer: auth.from,
            payment,
            gas_limit,
            gas,
        }))
    }

    /// Whether the payment's signature is `from`'s, judged before anything else is read for the payer: `Ok(true)`
    /// when it recovers `from` (ECDSA); otherwise it can only be an account's, so its code is read first and the
    /// account's ERC-1271 answer judges it (`Ok(false)`); `Err` the refusal.
    async fn signed_by(
        &self,
        client: &crate::chain::ChainClient,
        from: Address,
        digest: alloy::primitives::B256,
        signature: &Bytes,
    ) -> Result<Result<bool, Reason>, SellError> {
        if sale::recover(signature, digest) == Some(from) {
            return Ok(Ok(true));
        }
        if client.code(from).await?.is_empty() || !self.valid_1271(client, from, digest, signature).await? {
            return Ok(Err(Reason::Signature));
        }
        Ok(Ok(false))
    }

    /// The account's `isValidSignature(digest, signature)` answers ERC-1271's magic value.
    async fn valid_1271(
        &self,
        client: &crate::chain::ChainClient,
        account: Address,
        digest: alloy::primitives::B256,
        signature: &Bytes,
    ) -> Result<bool, SellError> {
        let data = IErc1271::isValidSignatureCall {
            hash: digest,
            signature: signature.clone(),
        }
        .abi_encode();
        Ok(match client.read(account, data.into()).await? {
            Read::Answer(out) => out.len() >= 4 && out[..4] == ERC1271_MAGIC,
            Read::Reverted => false,
        })
    }
}

/// The settlement's gas limit: `SETTLE_GAS` when its `eth_call` passed at it (`settles`). An account's signature
/// check may need more than a plain one, so a payer with code whose call failed has the settlement estimated (rare,
/// one read more, a fifth added); any other refusal of the call, or of that estimate, refuses the payment.
async fn settlement_gas(
    client: &crate::chain::ChainClient,
    (terms, calldata): (&Terms, Bytes),
    settles: Result<(), crate::chain::ChainError>,
    has_code: bool,
) -> Result<Result<u64, Reason>, SellError> {
    match settles {
        Ok(()) => Ok(Ok(SETTLE_GAS)),
        Err(e) if e.refusal().is_some() && has_code => {
            match client.estimate_call_gas(terms.pay_to, terms.token, calldata).await {
                Ok(gas) => Ok(Ok(gas.saturating_mul(6) / 5)),
                Err(e) if e.refusal().is_some() => Ok(Err(Reason::SimulationFailed)),
                Err(e) => Err(e.into()),
            }
        }
        Err(e) if e.refusal().is_some() => Ok(Err(Reason::SimulationFailed)),
        Err(e) => Err(e.into()),
    }
}
