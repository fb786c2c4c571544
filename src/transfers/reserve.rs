//! The one reservation protocol of every outflow: the decision (`decide_in`: the store's reserving transaction reads
//! the facts, `domain::decision::decide` answers), applied in that transaction (`apply`: refused, held, or stored
//! with its signature at the nonce the decision named), the one sign-and-apply loop over a group of outflows
//! (`sign_and_apply_all`: a key in memory signs in the transaction, any other between two), and how a refusal is
//! said (`refusal`). A round of sends (`rounds`), a send alone (`sign_and_apply`: a round of one, run at once) and a
//! preview (`Transfers::judge_outflow`, `decide_in` rolled back) all go through it.

use alloy::primitives::U256;
use uuid::Uuid;

use super::{TransferError, insufficient_tokens, store_error};
use crate::domain::chain::ChainInfo;
use crate::domain::decision::{Decision, Gate, Refusal};
use crate::domain::outflow::CallCount;
use crate::domain::policy::PolicyRule;
use crate::store::{
    Gathered, OutflowEntry, Presigned, Reservation, Reserve, Reserving, SignedTx, StoreError, TransferRequest,
    TransferStore,
};

/// How many times a reservation is signed when the nonce it named was taken meanwhile (see `sign_and_apply_all`).
pub(super) const SIGNING_ROUNDS: usize = 16;

/// The one decision on `request`: the store reads the facts under the agent's lock (a call's windows once its counts
/// are known), the domain builds the request and decides. The same for a send, an approval and a preview. With the
/// decision, what applying it stores besides: what counted against the cap on the chain as read, and what a call
/// counts (and leaves of the allowances it moves).
pub(super) async fn decide_in(
    tx: &mut (dyn Reserving + '_),
    request: &TransferRequest,
) -> Result<(Decision, U256, CallCount), TransferError> {
    let Gathered { mut facts, counted } = tx.facts(request).await.map_err(store_error)?;
    let count = request.call_count(&counted);
    if let (Some(_), Gate::Policy { policy, .. }) = (request.check.call(), &facts.gate) {
        facts.call_windows = tx
            .call_windows(request, &count.counts, policy)
            .await
            .map_err(store_error)?;
    }
    let asset_key = request.asset_key();
    let judged = request
        .decision_request(&asset_key, &count.counts)
        .map_err(|_| store_error(StoreError::Corrupt("typed data came without its parse".into())))?;
    let decision = crate::domain::decision::decide(&judged, &facts);
    Ok((decision, facts.spent, count))
}

/// What `apply` did with a decision.
pub(super) enum Applied {
    /// Refused (nothing written), held for approval (stored), or reserved and stored with its signature.
    Final(Reservation),
    /// Allowed at `nonce`, but not signed for it: the caller signs there (outside the database) and comes again.
    Unsigned { nonce: Option<u64> },
    /// Allowed, and the key in memory failed to sign at the nonce: nothing of it written, the transaction goes on.
    SignerFailed(TransferError),
}

/// Signs a request at the nonce its decision named, inside the reserving transaction: only a key in this process's
/// memory (`WalletSigner::in_memory`), which takes microseconds.
pub(super) type SignNow<'a> = dyn Fn(Option<u64>) -> Result<SignedTx, TransferError> + Send + Sync + 'a;

/// The decision on `request` (`decide_in`), applied in `tx`: refused; or held for approval (stored); or allowed at
/// a nonce, then stored as signed with `signed` when it was made at that nonce, or with what `sign_now` signs there
/// (a key in memory: the decision allowed it first, in this transaction). Unsigned for that nonce, nothing is
/// written unless `stand_in`: then the reservation is written with a stand-in for its signature, so that what a
/// round decides after it counts it, and the caller must roll `tx` back. A token never signs inside `tx`.
pub(super) async fn apply(
    tx: &mut (dyn Reserving + '_),
    request: &TransferRequest,
    signed: Option<&Presigned>,
    stand_in: bool,
    sign_now: Option<&SignNow<'_>>,
) -> Result<Applied, TransferError> {
    let (decision, spent, count) = decide_in(tx, request).await?;
    let (nonce, release) = match decision {
        Decision::Refuse(r) => return Ok(Applied::Final(Reservation::Refused(r))),
        Decision::Hold { ttl_secs, holds } => {
            let approval = tx.hold(request, (ttl_secs, holds), &count).await.map_err(store_error)?;
            return Ok(Applied::Final(Reservation::AwaitingApproval(Box::new(approval))));
        }
        Decision::Reserve { nonce, release } => (nonce, release),
    };
    let reserve = Reserve { nonce, spent, release };
    let (signature, made) = match (signed.filter(|p| p.nonce == nonce), sign_now) {
        (Some(p), _) => (p.signed.clone(), true),
        (None, Some(sign)) => match sign(nonce) {
            Ok(signature) => (signature, true),
            Err(e) => return Ok(Applied::SignerFailed(e)),
        },
        (None, None) if stand_in => {
            let stand_in = SignedTx {
                raw: Vec::new(),
                // Unique, as every stored hash must be; never committed.
                hash: format!("0x{}{}", Uuid::new_v4().simple(), Uuid::new_v4().simple()),
            };
            (stand_in, false)
        }
        (None, None) => return Ok(Applied::Unsigned { nonce }),
    };
    let record = tx
        .reserve(request, reserve, signature, &count)
        .await
        .map_err(store_error)?;
    match made {
        true => Ok(Applied::Final(Reservation::Reserved(Box::new(record)))),
        false => Ok(Applied::Unsigned { nonce }),
    }
}

/// One outflow to reserve (`sign_and_apply_all`): its request, how it is signed at a nonce, and whether its caller
/// still waits. A round's send (`rounds`) and an outflow reserved alone (`Alone`) are two.
pub(super) trait ToReserve: Send + Sync {
    fn request(&self) -> &TransferRequest;
    /// Whether its key is in this process's memory (`WalletSigner::in_memory`), and so signs in microseconds,
    /// inside the reserving transaction.
    fn in_memory(&self) -> bool;
    /// Signs its request at `nonce`; a failure is its answer (nothing of it is stored).
    fn sign(&self, nonce: Option<u64>) -> Result<SignedTx, TransferError>;
    /// Whether nobody waits for its answer any more: it is left out before anything of it is stored.
    fn gone(&self) -> bool;
}

/// An outflow reserved by itself: `sign_and_apply`'s round of one, and `reserve_once`'s single pass.
struct Alone<'a> {
    request: &'a TransferRequest,
    /// `None`: signed by nobody here (`reserve_once` answers the nonce to sign at instead).
    sign: Option<&'a SignNow<'a>>,
    in_memory: bool,
}

impl ToReserve for Alone<'_> {
    fn request(&self) -> &TransferRequest {
        self.request
    }

    fn in_memory(&self) -> bool {
        self.in_memory
    }

    fn sign(&self, nonce: Option<u64>) -> Result<SignedTx, TransferError> {
        match self.sign {
            Some(sign) => sign(nonce),
            None => Err(store_error(StoreError::Corrupt(
                "a reservation had nothing to sign it".into(),
            ))),
        }
    }

    fn gone(&self) -> bool {
        false
    }
}

/// One reservation of one request, in one reserving transaction (`pass`, signing in it with `sign_now`): committed
/// when held or stored; `Reservation::Sign` with the nonce to sign at when allowed but not signed for it (nothing
/// written).
pub async fn reserve_once(
    store: &dyn TransferStore,
    request: &TransferRequest,
    signed: Option<&Presigned>,
    sign_now: Option<&SignNow<'_>>,
) -> Result<Reservation, TransferError> {
    let alone = Alone {
        request,
        sign: sign_now,
        in_memory: sign_now.is_some(),
    };
    match pass(store, &[(alone, signed.cloned())], &[]).await? {
        Passed::Sign(mut to_sign) => match to_sign.pop() {
            Some((_, nonce)) => Ok(Reservation::Sign { nonce }),
            None => Err(unanswered()),
        },
        Passed::Done(mut answers) => answers.pop().unwrap_or_else(|| Err(unanswered())),
        Passed::Unknown(e) => Err(store_error(e)),
    }
}

/// What one pass over a group of outflows came to.
enum Passed {
    /// Every outflow decided, and what was allowed stored with its signature (or failed to sign): committed with the
    /// entries (or rolled back, when nothing at all was written).
    Done(Vec<Result<Reservation, TransferError>>),
    /// Outflows (by index) allowed at a nonce they are not signed for: rolled back, to be signed at these nonces.
    Sign(Vec<(usize, Option<u64>)>),
    /// The commit failed: whether it was applied is not known.
    Unknown(StoreError),
}

/// Decides each outflow in turn in one reserving transaction. One whose key is in memory is signed in it, at the
/// nonce its decision named, once the decision allowed it. One allowed at a nonce it is not signed for (a token's
/// key) is applied with a stand-in for its signature when outflows come after it, so that they are decided with it
/// counted, and the transaction is rolled back: nothing is committed before every allowed outflow carries its
/// signature. The committing pass writes `entries` last, just before its commit; a pass that would write nothing
/// (every outflow refused, or its signer failed, and no entries) is rolled back instead.
async fn pass<R: ToReserve>(
    store: &dyn TransferStore,
    outflows: &[(R, Option<Presigned>)],
    entries: &[&OutflowEntry],
) -> Result<Passed, TransferError> {
    let mut tx = store.reserving().await.map_err(store_error)?;
    let mut answers = Vec::with_capacity(outflows.len());
    let mut to_sign = Vec::new();
    for (i, (outflow, signed)) in outflows.iter().enumerate() {
        // The last outflow's stand-in would count for nobody: it is decided as alone, writing nothing unsigned.
        let stand_in = i + 1 < outflows.len();
        let sign = |nonce: Option<u64>| outflow.sign(nonce);
        let sign_now: Option<&SignNow<'_>> = match outflow.in_memory() {
            true => Some(&sign),
            false => None,
        };
        match apply(tx.as_mut(), outflow.request(), signed.as_ref(), stand_in, sign_now).await? {
            Applied::Final(reservation) => answers.push(Ok(reservation)),
            Applied::SignerFailed(e) => answers.push(Err(e)),
            Applied::Unsigned { nonce } => to_sign.push((i, nonce)),
        }
    }
    if !to_sign.is_empty() {
        drop(tx);
        return Ok(Passed::Sign(to_sign));
    }
    let stored = |a: &Result<Reservation, TransferError>| {
        matches!(a, Ok(Reservation::Reserved(_) | Reservation::AwaitingApproval(_)))
    };
    if entries.is_empty() && !answers.iter().any(stored) {
        drop(tx);
        return Ok(Passed::Done(answers));
    }
    if !entries.is_empty() {
        tx.record_outflows(entries).await.map_err(store_error)?;
    }
    // Before the commit every failure rolls back (the outflows may reserve again); a failed commit may not have.
    if let Err(e) = tx.commit().await {
        return Ok(Passed::Unknown(e));
    }
    Ok(Passed::Done(answers))
}

/// What `sign_and_apply_all` did with a group of outflows.
pub(super) struct Outcome<R> {
    /// The outflows answered, each with its reservation (refused, held or reserved) or failure, in no set order; one
    /// whose caller went away is left out.
    pub decided: Vec<(R, Result<Reservation, TransferError>)>,
    pub end: End<R>,
}

/// How `sign_and_apply_all` ended.
pub(super) enum End<R> {
    /// Every outflow answered, and what was stored committed with the entries.
    Committed,
    /// Every outflow answered (or gone), and nothing committed, the entries neither: every caller went away, or the
    /// nonce to sign at moved `SIGNING_ROUNDS` times.
    Uncommitted,
    /// A store failure before the commit: nothing of these outflows (nor the entries) stored; each may reserve again.
    Failed(Vec<R>, TransferError),
    /// The commit failed: whether these outflows and the entries were stored is not known.
    Unknown(Vec<R>, StoreError),
}

/// The one sign-and-apply loop: decides, signs and stores a group of outflows (`pass`), under the send locks of
/// their (agent, chain) its caller holds, writing `entries` in the committing transaction. A key in memory signs in
/// the reserving transaction once its decision allowed it: one pass and one commit. Any other key signs outside it,
/// between two: a pass decides and names the nonces (writing nothing), the keys sign at them, and the next pass
/// decides again and stores each signature only if it reserves at that nonce. The locks keep the nonces still between
/// the two; another process on the same SQLite file (`agentd mcp`, a second instance) takes no part in them and may
/// take a nonce meanwhile: the store then names the next one, and signing again converges within `SIGNING_ROUNDS`.
/// A signer that fails answers its outflow, and the others are decided again without it.
pub(super) async fn sign_and_apply_all<R: ToReserve>(
    store: &dyn TransferStore,
    outflows: Vec<R>,
    entries: &[&OutflowEntry],
) -> Outcome<R> {
    let mut pending: Vec<(R, Option<Presigned>)> = outflows.into_iter().map(|o| (o, None)).collect();
    let mut decided = Vec::new();
    let rest = |pending: Vec<(R, Option<Presigned>)>| pending.into_iter().map(|(o, _)| o).collect();
    for _ in 0..SIGNING_ROUNDS {
        // A caller that went away before anything was stored takes nothing.
        pending.retain(|(o, _)| !o.gone());
        if pending.is_empty() {
            return Outcome {
                decided,
                end: End::Uncommitted,
            };
        }
        let to_sign = match pass(store, &pending, entries).await {
            Ok(Passed::Done(answers)) => {
                decided.extend(pending.into_iter().map(|(o, _)| o).zip(answers));
                return Outcome {
                    decided,
                    end: End::Committed,
                };
            }
            Ok(Passed::Sign(to_sign)) => to_sign,
            Ok(Passed::Unknown(e)) => {
                return Outcome {
                    decided,
                    end: End::Unknown(rest(pending), e),
                };
            }
            Err(e) => {
                return Outcome {
                    decided,
                    end: End::Failed(rest(pending), e),
                };
            }
        };
        // Signed outside the transaction (a token's key), at the nonces the decisions named.
        let mut failed = Vec::new();
        for (i, nonce) in to_sign {
            let (outflow, signed) = &mut pending[i];
            match outflow.sign(nonce) {
                Ok(signature) => {
                    *signed = Some(Presigned {
                        nonce,
                        signed: signature,
                    })
                }
                Err(e) => failed.push((i, e)),
            }
        }
        for (i, e) in failed.into_iter().rev() {
            decided.push((pending.remove(i).0, Err(e)));
        }
    }
    decided.extend(pending.into_iter().map(|(o, _)| {
        let moved = StoreError::Corrupt("the nonce to sign at moved under the agent's send lock".into());
        (o, Err(store_error(moved)))
    }));
    Outcome {
        decided,
        end: End::Uncommitted,
    }
}

/// An outflow's reservation that came back without an answer.
fn unanswered() -> TransferError {
    store_error(StoreError::Corrupt("a reservation went unanswered".into()))
}

/// A refusal over one of the asset's limits in words, with the figures the decision used (in whole units of the
/// asset; for a call or typed data, of the asset `counted_asset` whose counts broke it, named by its symbol, or by
/// its key in base units for a token outside the registry).
fn over_limit(
    rule: PolicyRule,
    (limit, counted, asked): (U256, U256, U256),
    counted_asset: Option<&str>,
    request: &TransferRequest,
    chain: &'static ChainInfo,
) -> TransferError {
    let (asset, decimals) = match (counted_asset, request.check.call()) {
        (Some(key), Some(check)) => {
            let name = match key.split_once(':') {
                Some((_, symbol)) if !symbol.starts_with("0x") => symbol.to_string(),
                _ => format!("(base units of {key})"),
            };
            (name, check.decimals_of(key))
        }
        _ => (
            request.asset.clone(),
            request.token.map_or(chain.decimals, |t| t.decimals),
        ),
    };
    let units = |v: U256| crate::domain::amount::format_units(v, decimals);
    let words = match rule {
        PolicyRule::PerTransfer => format!(
            "over the per-transfer limit of {} {asset}: it asked {}",
            units(limit),
            units(asked)
        ),
        _ => {
            let (name, span) = match rule {
                PolicyRule::PerDay => ("daily", "24 h"),
                _ => ("weekly", "7 days"),
            };
            format!(
                "over the {name} limit of {} {asset}: {} was already counted in the last {span}, {} was left, and it asked {}",
                units(limit),
                units(counted),
                units(limit.saturating_sub(counted)),
                units(asked)
            )
        }
    };
    TransferError::OverLimit { rule, words }
}

/// A reservation's refusal, as the transfer service says it.
pub(super) fn refusal(refusal: Refusal, request: &TransferRequest, chain: &'static ChainInfo) -> TransferError {
    match refusal {
        Refusal::CapExceeded { cap, spent } => TransferError::CapExceeded {
            chain,
            reserved: request.reserved_wei,
            cap,
            spent,
        },
        Refusal::PolicyDenied(rule) => TransferError::PolicyDenied(rule),
        Refusal::CallDenied(words) => TransferError::CallDenied(words),
        Refusal::OverLimit {
            rule,
            limit,
            counted,
            asked,
            asset,
        } => over_limit(rule, (limit, counted, asked), asset.as_deref(), request, chain),
        Refusal::AgentInactive => TransferError::AgentInactive,
        Refusal::TokenRevoked => TransferError::TokenRevoked,
        Refusal::ClaimLost => TransferError::ClaimLost,
        Refusal::NotAwaiting(status) => TransferError::NotAwaiting(status),
        Refusal::OwnerAddressRequired => TransferError::OwnerAddressRequired,
        Refusal::InsufficientTokens { available } => insufficient_tokens(request, available),
        Refusal::DelegationLimit { available } => TransferError::DelegationLimit {
            available: crate::domain::amount::format_units(
                available,
                request.token.map_or(chain.decimals, |t| t.decimals),
            ),
            symbol: request.asset.clone(),
        },
        Refusal::SponsorshipLimit { left } => TransferError::SponsorshipLimit {
            left: crate::domain::amount::format_units(left, chain.decimals),
        },
        Refusal::DesignationUnmined { nonce } => TransferError::DesignationUnmined {
            chain: chain.name,
            nonce,
        },
        Refusal::SponsorUnfunded => TransferError::SponsorUnfunded(
            "the paymaster does not trust or allow the sponsor, its deposit less what is held cannot cover the \
             operation, or the sponsor cannot pay the bundle"
                .into(),
        ),
        Refusal::InsufficientFunds { available } => TransferError::InsufficientFunds {
            chain,
            needed: request.reads.native.map_or(U256::ZERO, |f| f.needed),
            balance: Some(available),
        },
    }
}

/// Decides, signs and stores `request` alone, under the agent's send lock its caller holds: a round of one of the one
/// loop (`sign_and_apply_all`), run at once, with no entries. A key in memory (`in_memory`) signs with `sign` inside
/// the reserving transaction once its decision allowed the request: one transaction; any other key outside it,
/// between two.
pub(super) async fn sign_and_apply(
    store: &dyn TransferStore,
    request: &TransferRequest,
    in_memory: bool,
    sign: &SignNow<'_>,
) -> Result<Reservation, TransferError> {
    let alone = Alone {
        request,
        sign: Some(sign),
        in_memory,
    };
    let Outcome { mut decided, end } = sign_and_apply_all(store, vec![alone], &[]).await;
    match (decided.pop(), end) {
        (Some((_, answer)), _) => answer,
        (None, End::Failed(_, e)) => Err(e),
        (None, End::Unknown(_, e)) => Err(store_error(e)),
        (None, End::Committed | End::Uncommitted) => Err(unanswered()),
    }
}
