//! What an outflow does, its `Purpose` (the first axis; how it reaches the chain, its `Carrier`, is the second:
//! `carriers`): each purpose has its draft and quote in a file of its own under `kinds/` (what the node says it will
//! cost and what the wallet holds for it), and the send path asks of every purpose its symbol, its carrier, its
//! quote, what it signs and the request the store records. Adding a purpose is a file under `kinds/` and one arm in
//! each `match` here; no match over purposes has a wildcard arm, so the compiler names every place to decide.

mod call;
mod native;
mod payment;
mod redeem;
mod settle;
mod sweep;
pub(super) mod token;
mod typed;

use alloy::primitives::{Address, U256};
use uuid::Uuid;

use super::carriers::Carrier;
use super::carriers::wallet::sign_designating;
use super::{FEE_MAX_AGE, TransferError, sign_transfer, token_ref};
use crate::chain::{ChainError, Fees, Node};
use crate::domain::asset::Asset;
use crate::domain::audit::OwedEntry;
use crate::domain::chain::ChainInfo;
use crate::domain::decision::Cost;
use crate::domain::outflow::{ChainReads, Check};
use crate::domain::transaction::{Action, Body, OnChain, Payer};
use crate::signer::{SignerError, WalletSigner};
use crate::store::{Clearance, Mandate, NativeFunds, SignedTx, TransferRequest};
pub(super) use call::CallDraft;
pub(super) use native::native_funds;
pub(super) use payment::PaymentDraft;
pub(super) use redeem::RedeemDraft;
pub(super) use settle::SettleDraft;
pub(super) use typed::TypedDraft;

/// One outflow to send, whatever its kind.
pub(super) struct Outflow<'a> {
    pub id: Uuid,
    pub agent_id: Uuid,
    pub chain: &'static ChainInfo,
    pub conversation_id: Option<Uuid>,
    pub from: Address,
    /// The recipient (of the token, for a token or a payment).
    pub to: Address,
    /// In base units of the asset.
    pub value: U256,
    pub purpose: Purpose<'a>,
    /// Who pays its gas (§22): the wallet, or the operator's sponsorship (a user operation of the agent's account).
    pub gas: Payer,
    /// What the reservation checks besides the cap: the policy (a new outflow) or the approval (a waiting one).
    pub clearance: Clearance,
    /// The agent token and idempotency claim that asked, checked again as the outflow is reserved.
    pub mandate: Mandate,
    /// Its `transfer_accepted` entry, kept with its reservation (`TransferRequest::owed`): a transfer's.
    pub owed: Option<OwedEntry>,
}

/// What is moved, and so what is quoted and signed.
pub(super) enum Purpose<'a> {
    /// The chain's native coin: a plain EIP-1559 transaction.
    Native,
    /// A registry token: an EIP-1559 call of its `transfer(to, value)`.
    Token(Asset),
    /// An x402 payment (§16): an EIP-3009 authorization, signed off chain and delivered by the paid request.
    Payment(Box<PaymentDraft<'a>>),
    /// A contract call (§18): its calldata with native `value`, at the gas limit its simulation found.
    Call(Box<CallDraft>),
    /// An EIP-712 signature (§18 `sign-typed-data`): its digest signed, nothing sent; its record carries the typed
    /// data (`CallRecord::typed_data`) and what it grants.
    TypedData(Box<TypedDraft>),
    /// An owner's sweep (§20) of the whole balance of the native coin (`None`: less the maximum fee) or of a token
    /// (the gas paid in the native coin): its amount is the quote's, read from the node.
    Sweep(Option<Asset>),
    /// A transfer redeemed through an on-chain delegation (§21): the delegator's money, the agent's gas.
    Redeem(Box<RedeemDraft>),
    /// The settlement of a payment to the agent (§23): the token's `transferWithAuthorization`, the agent's gas.
    Settle(Box<SettleDraft>),
}

/// What the node says an outflow will cost, read before anything is reserved.
pub(super) struct Quote {
    pub gas_limit: u64,
    pub max_fee_per_gas: u128,
    pub priority_fee: u128,
    /// What it holds against the cap until it settles.
    pub reserved: U256,
    /// The native balance as read and what the wallet must hold of it; the reservation checks it again, less what
    /// the agent's transfers on their way hold. `None`: no native coin is needed (a payment).
    pub funds: Option<NativeFunds>,
    /// The token balance as read (a token transfer or a payment): the reservation subtracts unused x402
    /// authorizations from it.
    pub token_balance: Option<U256>,
    /// The wallet's nonce the node has mined, read with the token balance (a token transfer, a redemption).
    pub mined_nonce: Option<u64>,
    /// The amount the quote found (a sweep: the whole balance), in place of the outflow's.
    pub value: Option<U256>,
}

/// What a transaction's gas may cost: its limit at the fees read, and the L1 fee estimate of OP-stack chains (§14;
/// zero elsewhere).
pub(super) struct Gas {
    pub limit: u64,
    pub fees: Fees,
    pub l1_fee: U256,
}

impl Gas {
    /// One maximum fee: the gas limit at the maximum fee per gas, and the L1 fee.
    pub(super) fn max_fee(&self) -> U256 {
        self.fees.max_cost(self.limit).saturating_add(self.l1_fee)
    }
}

/// The fees and the L1 fee estimate of the transaction `probe` encodes (`l1_probe`), read together, each reused for
/// `FEE_MAX_AGE`: the fee reads every wallet-paid quote shares.
pub(super) async fn recent_fees(client: &dyn Node, probe: &[u8]) -> Result<(Fees, U256), ChainError> {
    let (fees, l1_fee) = tokio::join!(
        client.recent_fees(FEE_MAX_AGE),
        client.recent_l1_fee(probe, FEE_MAX_AGE)
    );
    Ok((fees?, l1_fee?))
}

impl Quote {
    /// The one place a transaction's quote is built: at `gas`, holding `value` and one maximum fee against the cap
    /// (`Cost::of`), with the native `balance` as read and what the wallet needs of it. `refuse_short`: refused at
    /// once when the balance alone falls short (`native_funds`); else the funds are judged last, in the reservation
    /// (a call's, §18). What a purpose reads besides (a token balance, the mined nonce, a sweep's amount) it sets on
    /// the result.
    pub(super) fn transaction(
        chain: &'static ChainInfo,
        gas: &Gas,
        value: U256,
        balance: U256,
        refuse_short: bool,
    ) -> Result<Quote, TransferError> {
        let cost = Cost::of(value, gas.max_fee());
        let funds = match refuse_short {
            true => native_funds(chain, balance, cost.needed)?,
            false => NativeFunds {
                balance,
                needed: cost.needed,
            },
        };
        Ok(Quote {
            gas_limit: gas.limit,
            max_fee_per_gas: gas.fees.max_fee_per_gas,
            priority_fee: gas.fees.max_priority_fee_per_gas,
            reserved: cost.reserved,
            funds: Some(funds),
            token_balance: None,
            mined_nonce: None,
            value: None,
        })
    }
}

impl Purpose<'_> {
    /// The asset's symbol.
    pub(super) fn symbol(&self, chain: &ChainInfo) -> String {
        match self {
            Purpose::Native => chain.native_symbol.to_string(),
            Purpose::Token(asset) | Purpose::Sweep(Some(asset)) => asset.symbol.clone(),
            Purpose::Payment(p) => p.token.symbol.clone(),
            Purpose::Call(_) | Purpose::TypedData(_) | Purpose::Sweep(None) | Purpose::Settle(_) => {
                chain.native_symbol.to_string()
            }
            Purpose::Redeem(r) => r
                .token
                .as_ref()
                .map_or(chain.native_symbol, |t| t.symbol.as_str())
                .to_string(),
        }
    }

    /// How it reaches the chain.
    pub(super) fn carrier(&self) -> Carrier {
        match self {
            Purpose::Native
            | Purpose::Token(_)
            | Purpose::Call(_)
            | Purpose::Sweep(_)
            | Purpose::Redeem(_)
            | Purpose::Settle(_) => Carrier::Wallet,
            Purpose::Payment(_) | Purpose::TypedData(_) => Carrier::Handed,
        }
    }

    /// Whether it is a transaction of the agent's wallet (a nonce, a broadcast): its carrier's word.
    pub(super) fn on_chain(&self) -> bool {
        self.carrier().is_transaction()
    }

    /// What the node says it will cost and what the wallet holds for it (each kind's file: `kinds/*.rs`).
    pub(super) async fn quote(&self, client: &dyn Node, o: &Outflow<'_>) -> Result<Quote, TransferError> {
        match self {
            Purpose::Native => native::quote(client, o.chain, o.from, o.to, o.value).await,
            Purpose::Call(call) => call::quote(client, o.chain, call, o.from, o.to, o.value).await,
            Purpose::Token(asset) => token::quote(client, o.chain, asset, o.from, o.to, o.value).await,
            Purpose::Redeem(r) => redeem::quote(client, o.chain, r, o.from, o.value).await,
            Purpose::Sweep(None) => sweep::quote_native(client, o.chain, o.from, o.to).await,
            Purpose::Sweep(Some(asset)) => sweep::quote_token(client, o.chain, asset, o.from, o.to).await,
            Purpose::TypedData(_) => Ok(typed::quote()),
            Purpose::Payment(p) => payment::quote(client, p, o.from).await,
            Purpose::Settle(s) => settle::quote(client, o.chain, s, o.from, o.to).await,
        }
    }

    /// Signs the reserved outflow at `nonce` (ignored by an authorization, which carries its own random nonce).
    /// Every kind signs a 32-byte digest through the signer seam: a transaction's signature hash, an EIP-3009
    /// authorization's or an EIP-712 message's digest.
    pub(super) fn sign(
        &self,
        signer: &dyn WalletSigner,
        chain: &ChainInfo,
        request: &TransferRequest,
        priority_fee: u128,
        nonce: u64,
    ) -> Result<SignedTx, SignerError> {
        match self {
            Purpose::Payment(p) => payment::sign(signer, p),
            Purpose::TypedData(t) => typed::sign(signer, t),
            // A wallet-paid batch from an agent still an EOA designates the account in its own transaction (§22).
            Purpose::Call(c) => match c.designate {
                Some(implementation) => sign_designating(signer, chain, request, (priority_fee, nonce), implementation),
                None => sign_transfer(signer, chain, request, priority_fee, nonce),
            },
            Purpose::Native | Purpose::Token(_) | Purpose::Sweep(_) | Purpose::Redeem(_) | Purpose::Settle(_) => {
                sign_transfer(signer, chain, request, priority_fee, nonce)
            }
        }
    }
}

impl Outflow<'_> {
    /// How it reaches the chain: its purpose's carrier, or a user operation of the agent's account for an on-chain
    /// purpose whose gas the sponsorship pays (§22).
    pub(super) fn carrier(&self) -> Carrier {
        match (self.purpose.carrier(), self.gas) {
            (Carrier::Wallet, Payer::Sponsor) => Carrier::Operation,
            (carrier, Payer::Sponsor | Payer::Wallet) => carrier,
        }
    }

    /// A transaction of the agent's wallet doing `action`, at the quote's gas and fee.
    fn transaction(&self, quote: &Quote, action: Action) -> Body<()> {
        Body::Transaction(OnChain {
            at: (),
            gas: self.gas,
            gas_limit: quote.gas_limit,
            max_fee_per_gas: quote.max_fee_per_gas,
            action,
        })
    }

    /// What the store records of it before its nonce is known.
    pub(super) fn request(&self, quote: &Quote, node_nonce: Option<u64>) -> TransferRequest {
        TransferRequest {
            id: self.id,
            agent_id: self.agent_id,
            chain: self.chain.name.to_string(),
            conversation_id: self.conversation_id,
            from: self.from,
            to: self.to,
            value_wei: quote.value.unwrap_or(self.value),
            reserved_wei: quote.reserved,
            asset: self.purpose.symbol(self.chain),
            token: match &self.purpose {
                Purpose::Native
                | Purpose::Call(_)
                | Purpose::TypedData(_)
                | Purpose::Sweep(None)
                | Purpose::Settle(_) => None,
                Purpose::Token(asset) | Purpose::Sweep(Some(asset)) => token_ref(asset),
                Purpose::Payment(p) => token_ref(&p.token),
                Purpose::Redeem(r) => r.token.as_ref().and_then(token_ref),
            },
            clearance: self.clearance,
            reads: ChainReads {
                node_nonce,
                native: quote.funds,
                token_balance: quote.token_balance,
                mined_nonce: quote.mined_nonce,
                sponsor: None,
            },
            body: match &self.purpose {
                Purpose::Payment(p) => Body::Authorization(p.record.clone()),
                Purpose::TypedData(t) => Body::Signature(t.record.clone()),
                Purpose::Call(c) => self.transaction(quote, Action::Call(c.record.clone())),
                Purpose::Settle(s) => self.transaction(quote, Action::Call(s.call.record.clone())),
                Purpose::Redeem(r) => self.transaction(quote, Action::Redeem(r.via.clone())),
                Purpose::Native | Purpose::Token(_) | Purpose::Sweep(_) => self.transaction(quote, Action::Transfer),
            },
            // A call or signature an owner approved carries no check: the approval decides (§18).
            check: match &self.purpose {
                Purpose::Call(c) => c.check.clone().map_or(Check::Transfer, Check::Call),
                Purpose::TypedData(t) => t.check.clone().map_or(Check::Transfer, Check::Call),
                Purpose::Redeem(r) => Check::Redeem(r.delegated()),
                // A settlement moves money in: the cap judges its gas, no rule its amount.
                Purpose::Native | Purpose::Token(_) | Purpose::Payment(_) | Purpose::Sweep(_) | Purpose::Settle(_) => {
                    Check::Transfer
                }
            },
            mandate: self.mandate.clone(),
            // A sweep's entry says the amount it was quoted, in the units its own entry uses.
            owed: self.owed.clone().map(|owed| {
                owed.with_amount(|| {
                    let decimals = match &self.purpose {
                        Purpose::Sweep(Some(asset)) | Purpose::Token(asset) => asset.decimals,
                        Purpose::Native
                        | Purpose::Sweep(None)
                        | Purpose::Payment(_)
                        | Purpose::Call(_)
                        | Purpose::TypedData(_)
                        | Purpose::Redeem(_)
                        | Purpose::Settle(_) => self.chain.decimals,
                    };
                    crate::domain::amount::format_units(quote.value.unwrap_or(self.value), decimals)
                })
            }),
        }
    }
}
