//! An outflow to reserve, as the transfer service asks for it: what it is (`Body`), what it costs, what it was read
//! against on chain, what besides the cap clears it, and on whose word it moves. `request` turns it, with what a
//! call counts, into the `decision::Request` the one `decide` judges; the store only reads the facts.

use alloy::primitives::{Address, U256};
use uuid::Uuid;

use crate::domain::call::CallFacts;
use crate::domain::call::ledger::{self, Counted, Remaining};
use crate::domain::decision::{CallSite, PaymentSite, Request, SponsoredSite, Subject};
use crate::domain::policy::PolicyRule;
use crate::domain::transaction::{Action, Body, OnChain};

/// The `Idempotency-Key` claim a request runs under: checked, and marked as having moved money, in the transaction
/// that reserves for it, so that a claim taken over (its lease ran out) moves nothing, and a claim that moved money is
/// never taken over.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClaimFence {
    pub key: String,
    pub claim_id: Uuid,
}

/// On whose word money moves, checked again in the reserving transaction: the agent token the request came with
/// (none for an owner's approval, §15) and the `Idempotency-Key` claim it runs under (none without a key, §12).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Mandate {
    pub token_hash: Option<String>,
    pub claim: Option<ClaimFence>,
}

impl Mandate {
    /// No agent token and no key: an owner's approval, a retry already decided.
    pub const NONE: Mandate = Mandate {
        token_hash: None,
        claim: None,
    };

    /// A request authenticated with the agent token of this hash, without a key.
    pub fn token(token_hash: Option<String>) -> Mandate {
        Mandate {
            token_hash,
            claim: None,
        }
    }
}

/// A transfer to reserve: the cap check, nonce allocation and insert happen in one database transaction.
#[derive(Debug, Clone)]
pub struct TransferRequest {
    pub id: Uuid,
    pub agent_id: Uuid,
    pub chain: String,
    pub conversation_id: Option<Uuid>,
    pub from: Address,
    pub to: Address,
    /// In base units of the asset.
    pub value_wei: U256,
    /// The native value plus twice `gas_limit * max_fee_per_gas`.
    pub reserved_wei: U256,
    /// The asset symbol (`ETH`); with `chain`, the policy's asset key.
    pub asset: String,
    /// The token moved, for an ERC-20 transfer (`value_wei` is then in its base units).
    pub token: Option<crate::domain::transaction::TokenRef>,
    /// What besides the cap the reservation checks.
    pub clearance: Clearance,
    /// What it is: a transaction (a transfer, or a call signed with its calldata and stored with what its
    /// simulation showed, §18), an x402 authorization (§16: no native cost and no nonce; `sign` is called with 0 and
    /// its `raw` is the signed payment document), or typed data to sign.
    pub body: crate::domain::transaction::Body<()>,
    /// What the node said before the reservation, which the reservation judges again with what is on its way.
    pub reads: ChainReads,
    /// What the reservation judges besides the cap, the policy's limits and recipients, by what it does.
    pub check: Check,
    /// The agent token and the idempotency claim the request came with, checked again in the reserving transaction.
    pub mandate: Mandate,
    /// Its `transfer_accepted` entry, stored with its reservation until the entry written after the node answered
    /// takes its place (`OwedEntry`); none for an outflow whose entry is written with its reservation or after.
    pub owed: Option<crate::domain::audit::OwedEntry>,
}

/// What the node said before the reservation.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ChainReads {
    /// The node's pending nonce, used when the store has none yet (or to move past transactions sent elsewhere).
    pub node_nonce: Option<u64>,
    /// The wallet's native balance, and what this outflow needs of it: the reservation refuses it when the balance
    /// less the reservations of the agent's transfers still on their way on the chain (signed or pending: the read
    /// may not show them yet) is below that (`InsufficientFunds`). None: it needs no native coin (a payment).
    pub native: Option<NativeFunds>,
    /// The token balance (a token transfer, a payment): the reservation refuses a token amount above it less what
    /// the agent's unused x402 authorizations and open transfers of that token hold (`InsufficientTokens`).
    pub token_balance: Option<U256>,
    /// The wallet's nonce the node has mined, read before the balances: the agent's open outflows below it have
    /// landed and the balances read already show them, so only the others are held against them.
    pub mined_nonce: Option<u64>,
    /// A sponsored outflow (§22): its maximum cost and what was read of the sponsor and the paymaster (then
    /// `node_nonce` is the account's EntryPoint nonce, not the wallet's).
    pub sponsor: Option<SponsorReads>,
}

/// What a sponsored outflow read before its reservation (§22).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SponsorReads {
    /// Every gas limit of the operation, the paymaster's included, times its `maxFeePerGas`.
    pub max_cost: U256,
    /// The paymaster's deposit at the EntryPoint at the latest block.
    pub deposit: U256,
    /// The paymaster trusts the sponsor (`signers`) and allows it as bundler, and the sponsor's balance pays the
    /// bundle's gas.
    pub ready: bool,
    /// The paymaster approval's end (unix seconds): at most 600 s past the latest block's time.
    pub valid_until: u64,
    /// The block the reads were made at: the operation, signed after it, can only land in a later one.
    pub read_block: u64,
}

/// What the reservation judges besides the cap, the policy's limits and recipients, by what the outflow does.
#[derive(Debug, Clone)]
pub enum Check {
    /// A transfer of the native coin or a token, a sweep, an x402 payment; or a call or signature an owner approved
    /// (the approval decides; its counts were stored when it was held).
    Transfer,
    /// A call or typed data to sign (§18): the `calls` rules, the unlimited guard, and what it counts.
    Call(CallCheck),
    /// A redemption of an on-chain delegation (§21): what the caveats leave of the asset this period.
    Redeem(Delegated),
}

impl Check {
    /// A call's or a signature's check (none for what the rules of calls do not judge).
    pub fn call(&self) -> Option<&CallCheck> {
        match self {
            Check::Call(check) => Some(check),
            Check::Transfer | Check::Redeem(_) => None,
        }
    }

    /// A redemption's delegation as read.
    pub fn delegated(&self) -> Option<Delegated> {
        match self {
            Check::Redeem(delegated) => Some(*delegated),
            Check::Transfer | Check::Call(_) => None,
        }
    }
}

/// What a redemption's reservation reads of its delegation (§21): what the chain's caveats leave of the asset this
/// period, read at the latest block; the reservation holds the amount against it less this service's redemptions of
/// the delegation the block has not included.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Delegated {
    pub delegation_id: Uuid,
    pub available: U256,
}

/// What a call's reservation judges (§18): the unlimited-approval guard, the `calls` rules (whether the agent is
/// guarded decides when none does), and what it counts against the assets' limits.
#[derive(Debug, Clone)]
pub struct CallCheck {
    /// Why typed data is refused whatever the `calls` rules say (the policy's rule in
    /// `domain::decision::CallSite::forbidden`).
    pub forbidden: Option<crate::domain::call::typed::Forbidden>,
    /// Typed data to sign, as parsed: the rules read its values from the parse that made its digest.
    pub typed: Option<std::sync::Arc<crate::domain::call::typed::Typed>>,
    pub unlimited: bool,
    pub guarded: bool,
    /// What counts whatever the ledger holds: the native value.
    pub fixed: Vec<Counted>,
    /// What leaves the wallet of each token.
    pub outs: Vec<crate::domain::call::ledger::TokenOut>,
    /// The allowances it moves, read before and after it in its simulation.
    pub moves: Vec<crate::domain::call::ledger::AllowanceMove>,
    /// Every address that receives coin or tokens anywhere in its simulation, and every spender it names: each is
    /// judged by `blocked_recipients` (§18).
    pub receivers: Vec<alloy::primitives::Address>,
    /// Set when the call's selector is none the service decodes into counts (§18 `call_not_understood`).
    pub opaque: Option<crate::domain::decision::Opaque>,
    /// The decimals each asset it may count is written in by the policy's limits, by asset key: a registry asset's
    /// own, 0 (base units) for any other token. Refusals and holds state its limits with them.
    pub decimals: std::collections::BTreeMap<String, u8>,
}

impl CallCheck {
    /// The decimals `asset_key`'s limits are written in (base units for a key it does not count).
    pub fn decimals_of(&self, asset_key: &str) -> u8 {
        self.decimals.get(asset_key).copied().unwrap_or(0)
    }
}

/// A native balance as read, and what a transfer needs of it: its amount and one maximum fee (a token transfer: the
/// fee).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NativeFunds {
    pub balance: U256,
    pub needed: U256,
}

/// What clears an outflow besides the cap (read as a `domain::decision::Gate` in the reserving transaction): the
/// agent's policy, an owner's approval, a decision already taken, or an owner's sweep. (Not an x402 `Authorization`.)
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Clearance {
    /// The agent's policy: a refusal, or a transfer held for approval instead of signed.
    Policy,
    /// An owner (or the admin, `by`) approved the waiting transfer with the request's id: it must still be waiting
    /// and unexpired; its held reservation is released as this one is taken, and the approval audited with it.
    Approval { by: crate::domain::audit::Actor },
    /// Already decided (the retry of an approved transfer after a nonce resynchronisation).
    Decided,
    /// An owner's sweep of the agent's whole balance to its owner (§20): exempt from the cap and the policy, which
    /// guard the agent, not its owner, and allowed on an inactive agent; funds, nonce and lock apply as to any send.
    /// An owner session sweeps only to one of the agent's owner addresses, read in the reserving transaction; the
    /// admin token (`anywhere`) to any address.
    Sweep { anywhere: bool },
}

/// What a call counts against the assets' limits (§18), from the allowances counted before it: `counts` (in the
/// order the windows are read) and what is left of each allowance it moves (`ledger`, stored once it is reserved).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CallCount {
    pub counts: Vec<Counted>,
    pub ledger: Vec<Remaining>,
}

/// A request that names typed data to sign came without the parse the rules read (a defect of the caller).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UnparsedTypedData;

impl TransferRequest {
    /// The policy's asset key of what it moves (`base:ETH`).
    pub fn asset_key(&self) -> String {
        crate::domain::asset::key(&self.chain, &self.asset)
    }

    /// Whether it uses a nonce of the agent's (a transaction; not an x402 authorization or a signature).
    pub fn uses_nonce(&self) -> bool {
        self.body.transaction().is_some()
    }

    /// What it counts against the assets' limits, given the allowances the service counted for the agent on the
    /// chain (`ledger`, read under the agent's lock): nothing unless it is a call or typed data judged by the rules.
    pub fn call_count(&self, counted: &[Remaining]) -> CallCount {
        match self.check.call() {
            Some(check) => {
                let (counts, ledger) = ledger::count(&check.fixed, &check.outs, &check.moves, counted);
                CallCount { counts, ledger }
            }
            None => CallCount::default(),
        }
    }

    /// The request `decision::decide` judges, with `counts` from `call_count` and `asset_key` from `asset_key`.
    pub fn decision_request<'a>(
        &'a self,
        asset_key: &'a str,
        counts: &'a [Counted],
    ) -> Result<Request<'a>, UnparsedTypedData> {
        let call = match (&self.body, self.check.call()) {
            (
                Body::Transaction(OnChain {
                    action: Action::Transfer | Action::Redeem(_),
                    ..
                })
                | Body::Authorization(_),
                _,
            )
            | (_, None) => None,
            (body, Some(check)) => Some(CallSite {
                subject: match (body, &check.typed) {
                    (Body::Signature(_), Some(typed)) => Subject::TypedData(typed.facts(self.from)),
                    (
                        Body::Transaction(OnChain {
                            action: Action::Call(call),
                            ..
                        }),
                        _,
                    ) if !call.calls.is_empty() => Subject::Batch(crate::domain::call::batch::BatchFacts {
                        chain: &self.chain,
                        calls: &call.calls,
                        agent: self.from,
                    }),
                    (
                        Body::Transaction(OnChain {
                            action: Action::Call(call),
                            ..
                        }),
                        _,
                    ) => Subject::Call(CallFacts {
                        chain: &self.chain,
                        to: self.to,
                        calldata: &call.data,
                        value_wei: self.value_wei,
                        agent: self.from,
                    }),
                    _ => return Err(UnparsedTypedData),
                },
                forbidden: check.forbidden.map(PolicyRule::from),
                unlimited: check.unlimited,
                guarded: check.guarded,
                counts,
                receivers: &check.receivers,
                opaque: check.opaque.as_ref(),
            }),
        };
        Ok(Request {
            asset_key,
            to: self.to,
            value: self.value_wei,
            reserved: self.reserved_wei,
            native_needed: self.reads.native.map(|f| f.needed),
            node_nonce: self.reads.node_nonce,
            payment: self.body.x402().map(|x| PaymentSite {
                host: x.host.as_ref().map(|(host, port)| (host.as_str(), *port)),
            }),
            call,
            sponsored: self.reads.sponsor.map(|s| SponsoredSite {
                max_cost: s.max_cost,
                ready: s.ready,
            }),
        })
    }
}
