//! A user operation of the agent's own account as carrier (§22): the agent's address designates the account
//! implementation by EIP-7702, the account's ERC-7579 `execute` runs the outflow's execution (a transfer, a call, a
//! redemption), the paymaster the operator owns pays its gas with the sponsor key's approval, and a bundle the
//! sponsor key sends carries it (`sponsor::bundler`). It settles by its `UserOperationEvent`. Every digest signed
//! here is computed from fields built here (`chain::userop`).

use alloy::primitives::{Address, Bytes, U256};
use alloy::sol_types::SolValue;

use crate::chain::Node;
use crate::chain::client::ChainClient;
use crate::chain::userop::{self, PackedUserOperation, PaymasterApproval};
use crate::signer::{SignerError, WalletSigner};
use crate::sponsor::{Account, SponsorChain};
use crate::store::SignedTx;
use crate::transfers::TransferError;

/// The account's validation: its ECDSA check over the EIP-712 digest, and the EntryPoint's bookkeeping around it.
const VERIFICATION_GAS: u128 = 150_000;
/// The paymaster's validation in verifying mode: one `ecrecover` and its signer and allowlist reads.
const PAYMASTER_GAS: u128 = 80_000;
/// What the bundle spends on the operation outside its limits: its share of the intrinsic cost and its calldata.
const PRE_VERIFICATION_GAS: u128 = 60_000;
/// Gas of the account's `execute` around the execution's own.
const EXECUTE_OVERHEAD: u128 = 25_000;
/// How long the paymaster's approval lasts past the latest block's time (§22: at most 600 s).
pub(in crate::transfers) const VALIDITY_SECS: u64 = 600;

/// A user operation as decided before its nonce is known: every field but the nonce and the signatures.
#[derive(Debug, Clone)]
pub(in crate::transfers) struct Operation {
    pub sender: Address,
    pub call_data: Bytes,
    pub call_gas: u128,
    pub pre_verification_gas: u128,
    pub max_fee_per_gas: u128,
    pub priority_fee: u128,
    pub valid_until: u64,
    pub entry_point: Address,
    pub paymaster: Address,
    pub chain_id: u64,
}

impl Operation {
    /// Every gas limit, the paymaster's included, times `maxFeePerGas` (what the sponsorship holds until mined).
    pub fn max_cost(&self) -> U256 {
        let gas = VERIFICATION_GAS + self.call_gas + PAYMASTER_GAS + self.pre_verification_gas;
        U256::from(gas) * U256::from(self.max_fee_per_gas)
    }

    /// Its gas limits added up.
    pub fn gas_limit(&self) -> u64 {
        u64::try_from(VERIFICATION_GAS + self.call_gas + PAYMASTER_GAS + self.pre_verification_gas).unwrap_or(u64::MAX)
    }

    /// The operation at `nonce` with the paymaster's unsigned approval.
    fn unsigned(&self, nonce: u64) -> Result<PackedUserOperation, SignerError> {
        let approval = PaymasterApproval {
            paymaster: self.paymaster,
            verification_gas_limit: PAYMASTER_GAS,
            valid_until: self.valid_until,
            valid_after: 0,
        };
        Ok(PackedUserOperation {
            sender: self.sender,
            nonce: U256::from(nonce),
            initCode: Bytes::new(),
            callData: self.call_data.clone(),
            accountGasLimits: userop::account_gas_limits(VERIFICATION_GAS, self.call_gas),
            preVerificationGas: U256::from(self.pre_verification_gas),
            gasFees: userop::gas_fees(self.priority_fee, self.max_fee_per_gas),
            paymasterAndData: userop::unsigned_paymaster_and_data(&approval)
                .map_err(|e| SignerError::Key(e.to_string()))?,
            signature: Bytes::new(),
        })
    }

    /// Signs the operation at `nonce`: the sponsor key approves it as the paymaster's signer (its hash covers
    /// neither signature), then the agent key signs the account's EIP-712 digest (which covers the approval). The
    /// stored bytes are the ABI-encoded operation, its hash the EntryPoint's `userOpHash`.
    pub fn sign(
        &self,
        agent: &dyn WalletSigner,
        sponsor: &dyn WalletSigner,
        nonce: u64,
    ) -> Result<SignedTx, SignerError> {
        let mut op = self.unsigned(nonce)?;
        let approval = userop::paymaster_digest(&op, self.chain_id).map_err(|e| SignerError::Key(e.to_string()))?;
        userop::attach_paymaster_signature(&mut op, &sponsor.sign_hash(&approval)?)
            .map_err(|e| SignerError::Key(e.to_string()))?;
        let digest = userop::account_digest(&op, self.entry_point, self.chain_id);
        userop::attach_account_signature(&mut op, &agent.sign_hash(&digest)?);
        let hash = userop::user_op_hash(&op, self.entry_point, self.chain_id);
        Ok(SignedTx {
            raw: op.abi_encode(),
            hash: format!("{hash:#x}"),
        })
    }
}

/// What the chain said of a sponsored outflow before its reservation.
pub(in crate::transfers) struct Reads {
    pub operation: Operation,
    /// The account's next EntryPoint nonce (key 0) at the latest block.
    pub entry_point_nonce: u64,
    /// The paymaster's deposit at the EntryPoint.
    pub deposit: U256,
    /// The paymaster trusts the sponsor, allows it as bundler, and the sponsor can pay the bundle's gas.
    pub ready: bool,
    /// The block the chain's parts were read at (the latest one then).
    pub read_block: u64,
    /// The account's native balance, when the execution moves the native coin (`read`'s `native`).
    pub native_balance: Option<U256>,
}

/// Reads what a sponsored execution of `(target, value, data)` from `from` needs: the account (refused when
/// foreign), its EntryPoint nonce and, with `native`, its balance (the three in one JSON-RPC batch), the execution's
/// gas, fees, the latest block's time, the paymaster's deposit and its word on the sponsor, and the sponsor's
/// balance. A batch (§22) brings the account's own `execute` and its gas (`batch`), used in place of the `execute`
/// of the one execution and its estimate.
pub(in crate::transfers) async fn read(
    client: &ChainClient,
    sponsor: &SponsorChain,
    from: Address,
    (target, value, data): (Address, U256, Bytes),
    batch: Option<(Bytes, u64)>,
    native: bool,
) -> Result<Reads, TransferError> {
    let sponsor_address = sponsor.key.address();
    let (account, gas, fees, parts) = tokio::join!(
        client.account_reads(from, sponsor.entry_point, native),
        // A batch (§22) brings the account's own `execute` and the gas its simulation found; a native transfer is
        // gassed as the wallet's would be (21,000 without an estimate for a recipient known to have no code, which
        // is what the node's estimate answers there).
        async {
            match &batch {
                Some((_, gas)) => Ok(*gas),
                None if data.is_empty() => client.transfer_gas(from, target, value).await,
                None => client.estimate_bundle(from, target, data.clone(), value, &[]).await,
            }
        },
        client.recent_fees(crate::transfers::FEE_MAX_AGE),
        sponsor
            .parts
            .get(client, (sponsor.entry_point, sponsor.paymaster, sponsor_address)),
    );
    let account = account?;
    if Account::of(
        &account.code,
        Some(sponsor.account_implementation),
        &sponsor.previous_implementations,
    ) == Account::Foreign
    {
        return Err(TransferError::AccountForeign);
    }
    let (fees, parts) = (fees?, parts?);
    let timestamp = parts.block_time;
    let call_gas = u128::from(gas.map_err(TransferError::from)?) + EXECUTE_OVERHEAD;
    let priority_fee = fees
        .max_priority_fee_per_gas
        .min(fees.max_fee_per_gas.saturating_sub(1));
    let operation = Operation {
        sender: from,
        call_data: batch.map_or_else(|| userop::execute_single(target, value, &data), |(call, _)| call),
        call_gas,
        pre_verification_gas: PRE_VERIFICATION_GAS,
        max_fee_per_gas: fees.max_fee_per_gas,
        priority_fee,
        valid_until: timestamp + VALIDITY_SECS,
        entry_point: sponsor.entry_point,
        paymaster: sponsor.paymaster,
        chain_id: client.info().chain_id,
    };
    // The bundle that carries it costs the sponsor about its limits at its fee, paid back by the EntryPoint.
    let bundle_cost = operation.max_cost();
    Ok(Reads {
        entry_point_nonce: u64::try_from(account.entry_point_nonce).unwrap_or(u64::MAX),
        native_balance: account.balance,
        deposit: parts.deposit,
        read_block: parts.block,
        ready: parts.trusted && parts.bundler_allowed && parts.sponsor_balance >= bundle_cost,
        operation,
    })
}
