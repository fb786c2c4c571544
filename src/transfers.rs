//! Native transfers: validate -> estimate -> (one DB transaction: cap, nonce, sign, store) -> broadcast -> record.
//! Sends of one (agent, chain) are serialised by a store lock, so a refused broadcast gives its nonce back and
//! no nonce is ever reused or skipped.

use alloy::consensus::{SignableTransaction, TxEip1559, TxEnvelope};
use alloy::eips::eip2718::Encodable2718;
use alloy::network::TxSignerSync;
use alloy::primitives::{Address, TxKind, U256};
use serde_json::{Value, json};
use uuid::Uuid;

use crate::chain::{ChainClient, ChainError, format_gwei};
use crate::chat::tools::ToolError;
use crate::domain::agent::Agent;
use crate::domain::amount::{format_units, parse_units};
use crate::domain::chain::ChainInfo;
use crate::domain::transaction::StoredTx;
use crate::state::AppState;
use crate::store::{Reservation, SignedTx, StoreError, TransferRequest};

/// How old a fee reading a transfer may use (its fee cap covers the base-fee growth of a few blocks).
const FEE_MAX_AGE: std::time::Duration = std::time::Duration::from_secs(2);

/// A transfer the agent was asked to make.
pub struct TransferOrder<'a> {
    pub agent: &'a Agent,
    pub chain: &'static ChainInfo,
    pub to: Address,
    pub amount: &'a str,
    pub conversation_id: Option<Uuid>,
}

fn store_error(err: StoreError) -> ToolError {
    tracing::error!(error = %err, "store error during a transfer");
    ToolError::new("internal_error", "the transfer could not be recorded; nothing was sent")
}

fn is_insufficient_funds(err: &ChainError) -> bool {
    matches!(err, ChainError::Rpc { message, .. } if message.to_ascii_lowercase().contains("insufficient funds"))
}

fn is_nonce_too_low(err: &ChainError) -> bool {
    matches!(err, ChainError::Rpc { message, .. } if {
        let m = message.to_ascii_lowercase();
        m.contains("nonce too low") || m.contains("nonce is too low") || m.contains("already been used")
    })
}

fn insufficient(chain: &ChainInfo, needed: U256, balance: Option<U256>) -> ToolError {
    let have = balance.map(|b| {
        format!(
            ", the wallet holds {} {}",
            format_units(b, chain.decimals),
            chain.native_symbol
        )
    });
    ToolError::new(
        "insufficient_funds",
        format!(
            "the wallet cannot pay {} {} (amount plus maximum fee){}",
            format_units(needed, chain.decimals),
            chain.native_symbol,
            have.unwrap_or_default()
        ),
    )
}

/// Sends native tokens, returning the tool result. Refusals create no transaction.
pub async fn send_native(state: &AppState, order: TransferOrder<'_>) -> Result<Value, ToolError> {
    let chain = order.chain;
    let value = parse_units(order.amount, chain.decimals)
        .map_err(|e| ToolError::new("invalid_arguments", format!("amount {e}")))?;
    if value.is_zero() {
        return Err(ToolError::new("invalid_arguments", "amount must be greater than zero"));
    }
    let from = *order
        .agent
        .wallet_addresses
        .get(chain.name)
        .ok_or_else(|| ToolError::new("invalid_arguments", "no wallet on this chain"))?;
    let client = state.chains.get(chain.name)?;
    let _guard = state
        .store
        .lock_sender(order.agent.id, chain.name)
        .await
        .map_err(store_error)?;

    // Independent reads, asked together: one round trip instead of three.
    let (gas_limit, fees, balance) = tokio::join!(
        client.estimate_transfer_gas(from, order.to, value),
        client.recent_fees(FEE_MAX_AGE),
        client.balance(from),
    );
    let gas_limit = match gas_limit {
        Ok(gas) => gas,
        Err(e) if is_insufficient_funds(&e) => return Err(insufficient(chain, value, balance.ok())),
        Err(e) => return Err(e.into()),
    };
    let (fees, balance) = (fees?, balance?);
    let reserved = value + fees.max_cost(gas_limit);
    if balance < reserved {
        return Err(insufficient(chain, reserved, Some(balance)));
    }
    let mut node_nonce = match state
        .store
        .next_nonce(order.agent.id, chain.name)
        .await
        .map_err(store_error)?
    {
        Some(_) => None,
        None => Some(client.pending_nonce(from).await?),
    };
    let mut request = TransferRequest {
        id: Uuid::new_v4(),
        agent_id: order.agent.id,
        chain: chain.name.to_string(),
        conversation_id: order.conversation_id,
        from,
        to: order.to,
        value_wei: value,
        gas_limit,
        max_fee_per_gas: fees.max_fee_per_gas,
        reserved_wei: reserved,
        node_nonce,
    };
    for attempt in 0..2 {
        let tx = reserve(state, &request, chain, fees.max_priority_fee_per_gas).await?;
        if state.config.faults.exit_before_broadcast {
            tracing::error!(tx_id = %tx.id, "FAULT_EXIT_BEFORE_BROADCAST: exiting after storing a signed transfer");
            std::process::exit(86);
        }
        if state.config.faults.lost_broadcast_answer {
            let _ = client.send_raw(&tx.raw_tx).await;
        }
        let sent = client.send_raw(&tx.raw_tx).await;
        // A refusal can follow our own earlier attempt that did land (the client retries once after a lost
        // answer; the node then calls the nonce used). A transaction the node knows is never discarded.
        let sent = match sent {
            Err(e) if !e.is_transport() && node_knows(client, &tx).await => Ok(()),
            other => other.map(|_| ()),
        };
        match sent {
            Ok(()) => {
                state.store.mark_broadcast(tx.id).await.map_err(store_error)?;
                return Ok(result_json(chain, &tx, "pending"));
            }
            Err(e) if e.is_transport() => {
                // It may have reached the node: it stays stored as signed and the watcher broadcasts it again.
                tracing::warn!(tx_id = %tx.id, chain = chain.name, error = %e, "broadcast not confirmed; will retry");
                return Ok(result_json(chain, &tx, "submitted"));
            }
            Err(e) if is_nonce_too_low(&e) && attempt == 0 => {
                let pending = client.pending_nonce(from).await?;
                tracing::warn!(tx_id = %tx.id, chain = chain.name, pending, "nonce too low; resynchronising from the node");
                state
                    .store
                    .discard_transfer(tx.id, Some(pending))
                    .await
                    .map_err(store_error)?;
                node_nonce = Some(pending);
                request.id = Uuid::new_v4();
                request.node_nonce = node_nonce;
            }
            Err(e) => {
                state.store.discard_transfer(tx.id, None).await.map_err(store_error)?;
                tracing::warn!(chain = chain.name, error = %e, "the node refused the transfer");
                if is_insufficient_funds(&e) {
                    return Err(insufficient(chain, reserved, client.balance(from).await.ok()));
                }
                return Err(ToolError::new(
                    "broadcast_rejected",
                    format!("the node refused the transaction: {e}"),
                ));
            }
        }
    }
    Err(ToolError::new(
        "broadcast_rejected",
        "the node kept refusing the nonce; nothing was sent",
    ))
}

/// Reserves the cap, allocates the nonce and stores the signed transaction, all in one database transaction.
async fn reserve(
    state: &AppState,
    request: &TransferRequest,
    chain: &ChainInfo,
    priority_fee: u128,
) -> Result<StoredTx, ToolError> {
    let key = state.store.wallet_key(request.agent_id).await.map_err(store_error)?;
    let signer = state.vault.open(request.agent_id, &key).map_err(|e| {
        tracing::error!(agent_id = %request.agent_id, error = %e, "wallet key could not be opened");
        ToolError::new("internal_error", "the wallet key could not be opened; nothing was sent")
    })?;
    let sign = |nonce: u64| -> Result<SignedTx, String> {
        let mut tx = TxEip1559 {
            chain_id: chain.chain_id,
            nonce,
            gas_limit: request.gas_limit,
            max_fee_per_gas: request.max_fee_per_gas,
            max_priority_fee_per_gas: priority_fee.min(request.max_fee_per_gas),
            to: TxKind::Call(request.to),
            value: request.value_wei,
            ..Default::default()
        };
        let signature = signer.sign_transaction_sync(&mut tx).map_err(|e| e.to_string())?;
        let envelope = TxEnvelope::from(tx.into_signed(signature));
        Ok(SignedTx {
            hash: envelope.tx_hash().to_string(),
            raw: envelope.encoded_2718(),
        })
    };
    match state
        .store
        .reserve_transfer(request, &sign)
        .await
        .map_err(store_error)?
    {
        Reservation::Reserved(tx) => Ok(*tx),
        Reservation::CapExceeded { cap, spent } => Err(ToolError::new(
            "spending_cap_exceeded",
            format!(
                "this transfer needs up to {} {sym} (amount plus maximum fee) but the spending cap on {} is {} {sym} with {} {sym} already counted",
                format_units(request.reserved_wei, chain.decimals),
                chain.name,
                format_units(cap, chain.decimals),
                format_units(spent, chain.decimals),
                sym = chain.native_symbol,
            ),
        )),
    }
}

fn result_json(chain: &ChainInfo, tx: &StoredTx, status: &str) -> Value {
    json!({
        "chain": chain.name,
        "tx_hash": tx.tx_hash,
        "status": status,
        "from": tx.from.to_checksum(None),
        "to": tx.to.to_checksum(None),
        "amount": format_units(tx.value_wei, chain.decimals),
        "amount_wei": tx.value_wei.to_string(),
        "symbol": chain.native_symbol,
        "nonce": tx.nonce,
        "gas_limit": tx.gas_limit,
        "max_fee_per_gas_gwei": format_gwei(tx.max_fee_per_gas),
        "reserved": format_units(tx.reserved_wei, chain.decimals),
        "explorer_url": chain.tx_url(&tx.tx_hash),
    })
}

/// Whether the node knows this exact transaction (pending or mined). Unknown when the node cannot be asked: then
/// `true`, so that nothing that may be on chain is ever discarded; the watcher settles it later.
async fn node_knows(client: &ChainClient, tx: &StoredTx) -> bool {
    let Ok(hash) = tx.tx_hash.parse() else { return false };
    match client.transaction(hash).await {
        Ok(found) => found.is_some(),
        Err(e) => {
            tracing::warn!(tx_id = %tx.id, error = %e, "cannot tell whether the node has the transaction; keeping it");
            true
        }
    }
}

/// Broadcasts a stored transaction again (after a restart or a lost broadcast). `Ok(true)` when a node has it.
pub async fn rebroadcast(client: &ChainClient, tx: &StoredTx) -> Result<bool, ChainError> {
    match client.send_raw(&tx.raw_tx).await {
        Ok(_) => Ok(true),
        Err(e) if is_nonce_too_low(&e) => Ok(false),
        Err(e) => Err(e),
    }
}
