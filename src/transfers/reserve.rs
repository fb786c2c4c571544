//! The one reservation protocol of every outflow: the decision (`decide_in`: the store's reserving transaction reads
//! the facts, `domain::decision::decide` answers), applied in that transaction (`apply`: refused, held, or stored
//! with its signature at the nonce the decision named), and how a refusal is said (`refusal`). A send alone
//! (`reserve_once`, the sign-and-apply loop of `Transfers::reserve`), a round of sends (`rounds`) and a preview
//! (`Transfers::judge_outflow`) all go through it.

use alloy::primitives::U256;
use uuid::Uuid;

use super::{TransferError, insufficient_tokens, store_error};
use crate::domain::chain::ChainInfo;
use crate::domain::decision::{Decision, Gate, Refusal};
use crate::domain::outflow::CallCount;
use crate::domain::policy::PolicyRule;
use crate::store::{
    Gathered, Presigned, Reservation, Reserve, Reserving, SignedTx, StoreError, TransferRequest, TransferStore,
};

/// How many times a reservation is signed when the nonce it named was taken meanwhile (see `Transfers::reserve`).
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

/// One reservation of one request, in one reserving transaction (`apply`, signing in it with `sign_now`): committed
/// when held or stored; `Reservation::Sign` with the nonce to sign at when allowed but not signed for it (nothing
/// written).
pub async fn reserve_once(
    store: &dyn TransferStore,
    request: &TransferRequest,
    signed: Option<&Presigned>,
    sign_now: Option<&SignNow<'_>>,
) -> Result<Reservation, TransferError> {
    let mut tx = store.reserving().await.map_err(store_error)?;
    match apply(tx.as_mut(), request, signed, false, sign_now).await? {
        Applied::Unsigned { nonce } => Ok(Reservation::Sign { nonce }),
        Applied::SignerFailed(e) => Err(e),
        Applied::Final(refused @ Reservation::Refused(_)) => Ok(refused),
        Applied::Final(done) => {
            tx.commit().await.map_err(store_error)?;
            Ok(done)
        }
    }
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

/// Decides, signs and stores `request` alone (the send path's reservation outside a round): a key in memory
/// (`in_memory`) signs with `sign` inside the reserving transaction, once its decision allowed the request: one
/// transaction. Any other key signs outside it, between two: the store decides and names the nonce (writing
/// nothing), `sign` signs at it, and the store decides again and stores the signature only if it reserves at that
/// nonce. The caller holds the agent's send lock, so the nonce does not move between the two; another process on the
/// same SQLite file (`agentd mcp`, a second instance) takes no part in it and may take the nonce meanwhile: the store
/// then names the next one, and signing again converges within `SIGNING_ROUNDS`.
pub(super) async fn sign_and_apply(
    store: &dyn TransferStore,
    request: &TransferRequest,
    in_memory: bool,
    sign: &SignNow<'_>,
) -> Result<Reservation, TransferError> {
    let sign_now = in_memory.then_some(sign);
    let mut presigned: Option<Presigned> = None;
    for _ in 0..SIGNING_ROUNDS {
        let nonce = match reserve_once(store, request, presigned.as_ref(), sign_now).await? {
            Reservation::Sign { nonce } => nonce,
            other => return Ok(other),
        };
        presigned = Some(Presigned {
            nonce,
            signed: sign(nonce)?,
        });
    }
    Err(store_error(StoreError::Corrupt(
        "the nonce to sign at moved under the agent's send lock".into(),
    )))
}
