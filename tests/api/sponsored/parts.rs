//! The parts of sponsored user operations (§22) against the real, unmodified contracts on anvil — EntryPoint v0.7 and
//! `EIP7702StatelessDeleGator` from npm `@metamask/delegation-abis` 2.0.0, `SingletonPaymaster` v0.7 from npm
//! `@pimlico/mock-paymaster` 0.0.7: agentd's own digests (`agentd::chain::userop`) equal the contracts' answers, an
//! EOA holding no ETH moves a token in operations a paymaster pays for (designated by an EIP-7702 authorization in
//! the sponsor's bundle), a batch runs all its calls or none, and the EntryPoint refuses a forged or withdrawn
//! approval, a bundle from a sender the paymaster does not allow, and a deposit one wei short of the operation's
//! maximum cost. Assertions read the chain.

use std::collections::BTreeSet;

use agentd::chain::userop::{self, Execution, IEntryPoint, PackedUserOperation, PaymasterApproval};
use alloy::consensus::{SignableTransaction, TxEip1559, TxEip7702, TxEnvelope};
use alloy::eips::eip2718::Encodable2718;
use alloy::eips::eip7702::{Authorization, SignedAuthorization};
use alloy::primitives::aliases::U192;
use alloy::primitives::{Address, Bytes, TxKind, U256, keccak256};
use alloy::providers::Provider;
use alloy::rpc::types::{Filter, TransactionReceipt, TransactionRequest};
use alloy::signers::SignerSync;
use alloy::signers::local::PrivateKeySigner;
use alloy::sol_types::{SolCall, SolError, SolValue};

use crate::anvil::Anvil;
use crate::helpers::chain::{BASE_CHAIN_ID, ONE_ETH, fresh_address, wei};
use crate::helpers::delegation_framework::{Framework, chain_now, upgrade_to_delegator};
use crate::helpers::paymaster::Paymaster;
use crate::helpers::solidity::{deploy_test_token, mint, read, token_balance};

const GWEI: u128 = 1_000_000_000;
/// 1 token in base units (6 decimals).
const UNIT: u64 = 1_000_000;

alloy::sol! {
    function transfer(address to, uint256 amount) external returns (bool);

    /// The account's EIP-712 type hash, to check it apart from the digest.
    function PACKED_USER_OP_TYPEHASH() external view returns (bytes32);
}

/// The account's `getPackedUserOperationHash(op)` calldata (its EIP-712 struct hash of `op`).
fn struct_hash_call(op: &PackedUserOperation) -> Bytes {
    let signature = "getPackedUserOperationHash((address,uint256,bytes,bytes,bytes32,uint256,bytes32,bytes,bytes))";
    [&keccak256(signature)[..4], &op.abi_encode()].concat().into()
}

/// A node with the framework, a paymaster trusting and allowlisting `sponsor` with 1 ETH deposited, the sponsor
/// holding 1 ETH for the bundles' gas, and a test token.
struct World {
    anvil: Anvil,
    framework: Framework,
    paymaster: Paymaster,
    sponsor: PrivateKeySigner,
    token: Address,
}

async fn world() -> World {
    let anvil = Anvil::start(BASE_CHAIN_ID);
    let framework = Framework::deploy(&anvil, BASE_CHAIN_ID).await;
    let paymaster = Paymaster::deploy(&anvil, framework.entry_point).await;
    let sponsor = PrivateKeySigner::random();
    anvil.set_balance(sponsor.address(), wei(ONE_ETH)).await;
    paymaster.sponsor(&anvil, sponsor.address(), wei(ONE_ETH)).await;
    let token = deploy_test_token(&anvil, "Test Dollar", "TUSD", 6).await;
    World {
        anvil,
        framework,
        paymaster,
        sponsor,
        token,
    }
}

fn token_transfer(to: Address, amount: u64) -> Vec<u8> {
    transferCall {
        to,
        amount: U256::from(amount),
    }
    .abi_encode()
}

impl World {
    /// The next nonce of `account`'s EntryPoint sequence 0, as agentd reads it.
    async fn entry_point_nonce(&self, account: Address) -> U256 {
        let out = read(
            &self.anvil,
            self.framework.entry_point,
            userop::get_nonce_call(account, U192::ZERO),
        )
        .await;
        userop::uint_answer(&out).expect("a uint256")
    }

    /// An unsigned operation of `account` executing `call_data` at its next nonce, with the paymaster's unsigned
    /// approval valid for ten minutes of the chain's clock.
    async fn unsigned(&self, account: Address, call_data: Bytes) -> PackedUserOperation {
        let approval = PaymasterApproval {
            paymaster: self.paymaster.address,
            verification_gas_limit: 100_000,
            valid_until: chain_now(&self.anvil).await + 600,
            valid_after: 0,
        };
        PackedUserOperation {
            sender: account,
            nonce: self.entry_point_nonce(account).await,
            initCode: Bytes::new(),
            callData: call_data,
            accountGasLimits: userop::account_gas_limits(150_000, 150_000),
            preVerificationGas: U256::from(50_000),
            gasFees: userop::gas_fees(GWEI, 3 * GWEI),
            paymasterAndData: userop::unsigned_paymaster_and_data(&approval).unwrap(),
            signature: Bytes::new(),
        }
    }

    /// `op` approved by `approver` (the paymaster's signature over agentd's hash), then signed by `account`'s key
    /// over agentd's EIP-712 digest of the account.
    fn sign(
        &self,
        mut op: PackedUserOperation,
        approver: &PrivateKeySigner,
        account: &PrivateKeySigner,
    ) -> PackedUserOperation {
        let digest = userop::paymaster_digest(&op, BASE_CHAIN_ID).unwrap();
        let approval = approver.sign_hash_sync(&digest).expect("signing");
        userop::attach_paymaster_signature(&mut op, &approval).unwrap();
        let digest = userop::account_digest(&op, self.framework.entry_point, BASE_CHAIN_ID);
        userop::attach_account_signature(&mut op, &account.sign_hash_sync(&digest).expect("signing"));
        op
    }

    /// A signed operation of `account` executing `call_data`, approved by the sponsor.
    async fn operation(&self, account: &PrivateKeySigner, call_data: Bytes) -> PackedUserOperation {
        let op = self.unsigned(account.address(), call_data).await;
        self.sign(op, &self.sponsor, account)
    }

    /// A signed operation of `account` transferring `amount` of the test token to `to` (single mode).
    async fn transfer(&self, account: &PrivateKeySigner, to: Address, amount: u64) -> PackedUserOperation {
        let call = userop::execute_single(self.token, U256::ZERO, &token_transfer(to, amount));
        self.operation(account, call).await
    }

    /// The sponsor's bundle of `op` alone (carrying `authorizations`), mined: the bundle succeeded with one
    /// `UserOperationEvent`, of agentd's `userOpHash` and this paymaster, and the deposit fell by exactly its
    /// `actualGasCost`.
    async fn land(
        &self,
        op: &PackedUserOperation,
        authorizations: Vec<SignedAuthorization>,
    ) -> (TransactionReceipt, IEntryPoint::UserOperationEvent) {
        let (ep, deposit) = (self.framework.entry_point, self.deposit().await);
        let receipt = self
            .bundle(&self.sponsor, std::slice::from_ref(op), authorizations)
            .await;
        assert!(receipt.status(), "the bundle succeeded");
        let [event] = events(ep, &receipt).try_into().expect("one UserOperationEvent");
        assert_eq!(event.userOpHash, userop::user_op_hash(op, ep, BASE_CHAIN_ID));
        assert_eq!((event.sender, event.paymaster), (op.sender, self.paymaster.address));
        assert_eq!(
            self.deposit().await,
            deposit - event.actualGasCost,
            "the deposit paid exactly actualGasCost"
        );
        (receipt, event)
    }

    /// `handleOps(ops, sender)` signed and sent by `sender` (type 4 when it carries `authorizations`), mined.
    async fn bundle(
        &self,
        sender: &PrivateKeySigner,
        ops: &[PackedUserOperation],
        authorizations: Vec<SignedAuthorization>,
    ) -> TransactionReceipt {
        let data = userop::handle_ops_call(ops, sender.address());
        send(&self.anvil, sender, self.framework.entry_point, data, authorizations).await
    }

    /// What the EntryPoint answers to `handleOps(ops, from)` called from `from` (`eth_call`): `Err` with the
    /// EntryPoint's `FailedOp` reason and inner revert data when it refuses.
    async fn simulate(&self, from: Address, ops: &[PackedUserOperation]) -> Result<(), (String, Bytes)> {
        let request = TransactionRequest::default()
            .from(from)
            .to(self.framework.entry_point)
            .gas_limit(2_000_000)
            .input(userop::handle_ops_call(ops, from).into());
        match self.anvil.provider().call(request).await {
            Ok(_) => Ok(()),
            Err(e) => {
                let revert = e
                    .as_error_resp()
                    .and_then(|p| p.as_revert_data())
                    .unwrap_or_else(|| panic!("a revert with data: {e}"));
                let (_, reason, inner) = userop::failed_op(&revert).unwrap_or_else(|| panic!("a FailedOp: {revert}"));
                Err((reason, inner))
            }
        }
    }

    async fn deposit(&self) -> U256 {
        self.paymaster.deposit_balance(&self.anvil).await
    }
}

/// Signs with `signer` and sends one transaction to `to` (EIP-7702 when `authorizations` are given, else EIP-1559),
/// then waits for its receipt; a revert is reported in the receipt.
async fn send(
    anvil: &Anvil,
    signer: &PrivateKeySigner,
    to: Address,
    input: Bytes,
    authorizations: Vec<SignedAuthorization>,
) -> TransactionReceipt {
    let p = anvil.provider();
    let nonce = p.get_transaction_count(signer.address()).await.expect("nonce");
    let (gas_limit, max_fee_per_gas, max_priority_fee_per_gas) = (1_000_000, 20 * GWEI, GWEI);
    let envelope = if authorizations.is_empty() {
        let tx = TxEip1559 {
            chain_id: BASE_CHAIN_ID,
            nonce,
            gas_limit,
            max_fee_per_gas,
            max_priority_fee_per_gas,
            to: TxKind::Call(to),
            value: U256::ZERO,
            access_list: Default::default(),
            input,
        };
        let signature = signer.sign_hash_sync(&tx.signature_hash()).expect("signing");
        TxEnvelope::from(tx.into_signed(signature))
    } else {
        let tx = TxEip7702 {
            chain_id: BASE_CHAIN_ID,
            nonce,
            gas_limit,
            max_fee_per_gas,
            max_priority_fee_per_gas,
            to,
            value: U256::ZERO,
            access_list: Default::default(),
            authorization_list: authorizations,
            input,
        };
        let signature = signer.sign_hash_sync(&tx.signature_hash()).expect("signing");
        TxEnvelope::from(tx.into_signed(signature))
    };
    let hash = *p
        .send_raw_transaction(&envelope.encoded_2718())
        .await
        .expect("the node takes the transaction")
        .tx_hash();
    anvil.receipt(hash).await
}

/// `key`'s EIP-7702 authorization of `implementation` on the test chain at `key`'s current account nonce.
async fn authorization(anvil: &Anvil, key: &PrivateKeySigner, implementation: Address) -> SignedAuthorization {
    let authorization = Authorization {
        chain_id: U256::from(BASE_CHAIN_ID),
        address: implementation,
        nonce: anvil.nonce(key.address()).await,
    };
    let signature = key.sign_hash_sync(&authorization.signature_hash()).expect("signing");
    authorization.into_signed(signature)
}

/// The code of an EOA that designates `implementation` (EIP-7702): `0xef0100 ‖ implementation`.
fn designation_code(implementation: Address) -> Bytes {
    [&[0xef, 0x01, 0x00][..], implementation.as_slice()].concat().into()
}

/// The `UserOperationEvent`s of a receipt, as agentd reads them.
fn events(entry_point: Address, receipt: &TransactionReceipt) -> Vec<IEntryPoint::UserOperationEvent> {
    receipt
        .inner
        .logs()
        .iter()
        .filter_map(|log| userop::user_operation_event(entry_point, &log.inner))
        .collect()
}

#[tokio::test]
async fn agentds_digests_and_reads_are_the_deployed_contracts() {
    let world = world().await;
    let (anvil, ep) = (&world.anvil, world.framework.entry_point);
    let account = PrivateKeySigner::random();
    upgrade_to_delegator(anvil, &account, world.framework.delegator, BASE_CHAIN_ID).await;

    let call_data = userop::execute_batch(&[
        Execution {
            target: world.token,
            value: U256::ZERO,
            callData: token_transfer(fresh_address(), UNIT).into(),
        },
        Execution {
            target: fresh_address(),
            value: U256::from(5),
            callData: Bytes::new(),
        },
    ]);
    let mut unsigned = world.unsigned(account.address(), call_data).await;
    unsigned.nonce = (U256::from(3) << 64) | U256::from(9); // A key of its own and a sequence number.
    unsigned.initCode = Bytes::from(vec![0xab; 41]);
    let signed = world.sign(unsigned.clone(), &world.sponsor, &account);
    for op in [&unsigned, &signed] {
        let out = read(anvil, ep, userop::get_user_op_hash_call(op)).await;
        assert_eq!(
            userop::word_answer(&out),
            Some(userop::user_op_hash(op, ep, BASE_CHAIN_ID))
        );
        let out = read(anvil, account.address(), userop::account_digest_call(op)).await;
        assert_eq!(
            userop::word_answer(&out),
            Some(userop::account_digest(op, ep, BASE_CHAIN_ID))
        );
        let out = read(anvil, account.address(), struct_hash_call(op)).await;
        assert_eq!(userop::word_answer(&out), Some(userop::account_struct_hash(op, ep)));
        let out = read(anvil, world.paymaster.address, userop::paymaster_get_hash_call(op)).await;
        assert_eq!(
            userop::word_answer(&out),
            userop::paymaster_hash(op, BASE_CHAIN_ID).ok()
        );
    }
    assert_eq!(
        userop::paymaster_hash(&signed, BASE_CHAIN_ID),
        userop::paymaster_hash(&unsigned, BASE_CHAIN_ID),
        "the paymaster's hash covers neither signature"
    );
    // The account's typehash, and its domain: its own address as the verifying contract.
    let out = read(
        anvil,
        account.address(),
        PACKED_USER_OP_TYPEHASHCall {}.abi_encode().into(),
    )
    .await;
    assert_eq!(
        userop::word_answer(&out),
        Some(keccak256(
            "PackedUserOperation(address sender,uint256 nonce,bytes initCode,bytes callData,bytes32 accountGasLimits,\
             uint256 preVerificationGas,bytes32 gasFees,bytes paymasterAndData,address entryPoint)"
        ))
    );
    let out = read(anvil, account.address(), userop::eip712_domain_call()).await;
    let domain = userop::IDeleGator::eip712DomainCall::abi_decode_returns(&out).unwrap();
    assert_eq!(domain.verifyingContract, account.address());
    assert_eq!(domain.chainId, U256::from(BASE_CHAIN_ID));

    // The configuration agentd checks at start, read at the implementation itself.
    let implementation = world.framework.delegator;
    let out = read(anvil, implementation, userop::eip712_domain_call()).await;
    assert_eq!(
        userop::eip712_domain_answer(&out),
        Some((
            userop::ACCOUNT_DOMAIN_NAME.to_string(),
            userop::ACCOUNT_DOMAIN_VERSION.to_string()
        ))
    );
    let out = read(anvil, implementation, userop::entry_point_call()).await;
    assert_eq!(userop::address_answer(&out), Some(ep));
    let out = read(anvil, implementation, userop::delegation_manager_call()).await;
    assert_eq!(userop::address_answer(&out), Some(world.framework.manager));
    let out = read(anvil, world.paymaster.address, userop::entry_point_call()).await;
    assert_eq!(userop::address_answer(&out), Some(ep));

    let out = read(anvil, ep, userop::get_nonce_call(account.address(), U192::ZERO)).await;
    assert_eq!(userop::uint_answer(&out), Some(U256::ZERO));
    let out = read(anvil, ep, userop::deposit_call(world.paymaster.address)).await;
    assert_eq!(userop::uint_answer(&out), Some(wei(ONE_ETH)));
}

#[tokio::test]
async fn the_paymasters_signers_and_allowlist_as_agentd_reads_them() {
    let world = world().await;
    let (anvil, paymaster) = (&world.anvil, world.paymaster);
    let (sponsor, other) = (world.sponsor.address(), fresh_address());
    let trusted = |who: Address| async move {
        let out = read(anvil, paymaster.address, userop::signers_call(who)).await;
        userop::bool_answer(&out).expect("a bool")
    };
    let allowed = |who: Address| async move {
        let out = read(anvil, paymaster.address, userop::is_bundler_allowed_call(who)).await;
        userop::bool_answer(&out).expect("a bool")
    };
    assert!(trusted(sponsor).await && allowed(sponsor).await);
    assert!(!trusted(other).await && !allowed(other).await);
    let logged = || async move {
        let filter = Filter::new().address(paymaster.address).from_block(0u64);
        let logs = anvil.provider().get_logs(&filter).await.expect("eth_getLogs");
        userop::logged_signers(paymaster.address, logs.iter().map(|l| &l.inner))
    };
    assert_eq!(logged().await, BTreeSet::from([sponsor]));

    paymaster.add_signer(anvil, other).await;
    assert!(trusted(other).await);
    assert_eq!(logged().await, BTreeSet::from([sponsor, other]));
    paymaster.remove_signer(anvil, sponsor).await;
    assert!(!trusted(sponsor).await);
    assert_eq!(
        logged().await,
        BTreeSet::from([other]),
        "shared: a signer that is not the sponsor"
    );
    paymaster.allow_bundlers(anvil, &[sponsor], false).await;
    assert!(!allowed(sponsor).await);
}

#[tokio::test]
async fn an_eoa_holding_no_eth_moves_a_token_in_operations_the_paymaster_pays_for() {
    let world = world().await;
    let (anvil, ep) = (&world.anvil, world.framework.entry_point);
    let account = PrivateKeySigner::random();
    let to = fresh_address();
    mint(anvil, world.token, account.address(), U256::from(10 * UNIT)).await;
    assert_eq!(anvil.balance(account.address()).await, U256::ZERO);
    assert!(
        anvil
            .provider()
            .get_code_at(account.address())
            .await
            .unwrap()
            .is_empty()
    );

    // The first operation designates the account in the sponsor's type-4 bundle.
    let op = world.transfer(&account, to, UNIT).await;
    let out = read(anvil, ep, userop::get_user_op_hash_call(&op)).await;
    assert_eq!(
        userop::word_answer(&out),
        Some(userop::user_op_hash(&op, ep, BASE_CHAIN_ID))
    );
    let sponsor_before = anvil.balance(world.sponsor.address()).await;
    let designation = authorization(anvil, &account, world.framework.delegator).await;
    let (first, event) = world.land(&op, vec![designation]).await;
    assert_eq!((event.sender, event.nonce), (account.address(), U256::ZERO));
    assert_eq!(token_balance(anvil, world.token, to).await, U256::from(UNIT));
    assert_eq!(
        token_balance(anvil, world.token, account.address()).await,
        U256::from(9 * UNIT)
    );
    assert_eq!(
        anvil.balance(account.address()).await,
        U256::ZERO,
        "the account paid nothing"
    );
    let code = anvil.provider().get_code_at(account.address()).await.unwrap();
    assert_eq!(code, designation_code(world.framework.delegator));
    assert_eq!(
        anvil.nonce(account.address()).await,
        1,
        "the authorization used the account's nonce 0"
    );
    assert_eq!(world.entry_point_nonce(account.address()).await, U256::from(1));
    // The sponsor paid the bundle's gas and, as beneficiary, received what the operation paid.
    let fee = U256::from(first.gas_used) * U256::from(first.effective_gas_price);
    assert_eq!(
        anvil.balance(world.sponsor.address()).await,
        sponsor_before - fee + event.actualGasCost
    );
    assert!(event.actualGasCost <= userop::max_cost(&op));

    // The next one needs no authorization: a plain EIP-1559 bundle.
    let op = world.transfer(&account, to, UNIT).await;
    let (second, again) = world.land(&op, Vec::new()).await;
    assert_eq!(token_balance(anvil, world.token, to).await, U256::from(2 * UNIT));
    assert_eq!(world.entry_point_nonce(account.address()).await, U256::from(2));
    assert_eq!(anvil.balance(account.address()).await, U256::ZERO);
    println!(
        "gas: handleOps of one transfer with its EIP-7702 authorization {} (actualGasUsed {}, actualGasCost {} wei), \
         without {} (actualGasUsed {}, actualGasCost {} wei); max cost of each {} wei",
        first.gas_used,
        event.actualGasUsed,
        event.actualGasCost,
        second.gas_used,
        again.actualGasUsed,
        again.actualGasCost,
        userop::max_cost(&op)
    );
}

#[tokio::test]
async fn a_batch_runs_all_its_calls_or_none_and_pays_either_way() {
    let world = world().await;
    let anvil = &world.anvil;
    let account = PrivateKeySigner::random();
    upgrade_to_delegator(anvil, &account, world.framework.delegator, BASE_CHAIN_ID).await;
    mint(anvil, world.token, account.address(), U256::from(10 * UNIT)).await;
    let (to, other) = (fresh_address(), fresh_address());
    let batch = |second: u64| {
        userop::execute_batch(&[
            Execution {
                target: world.token,
                value: U256::ZERO,
                callData: token_transfer(to, UNIT).into(),
            },
            Execution {
                target: world.token,
                value: U256::ZERO,
                callData: token_transfer(other, second).into(),
            },
        ])
    };
    let op = world.operation(&account, batch(2 * UNIT)).await;
    let (receipt, batched) = world.land(&op, Vec::new()).await;
    assert!(batched.success);
    assert_eq!(token_balance(anvil, world.token, to).await, U256::from(UNIT));
    assert_eq!(token_balance(anvil, world.token, other).await, U256::from(2 * UNIT));

    // The second call reverts: nothing moves; the operation still pays, and its nonce is used.
    let op = world.operation(&account, batch(100 * UNIT)).await;
    let (failed, reverted) = world.land(&op, Vec::new()).await;
    assert!(!reverted.success, "the operation's execution reverted");
    assert_eq!(token_balance(anvil, world.token, to).await, U256::from(UNIT));
    assert_eq!(
        token_balance(anvil, world.token, account.address()).await,
        U256::from(7 * UNIT)
    );
    assert_eq!(world.entry_point_nonce(account.address()).await, U256::from(2));
    assert_eq!(anvil.balance(account.address()).await, U256::ZERO);
    println!(
        "gas: handleOps of a batch of two transfers {} (actualGasUsed {}); of one that reverted {} (actualGasUsed {})",
        receipt.gas_used, batched.actualGasUsed, failed.gas_used, reverted.actualGasUsed
    );
}

#[tokio::test]
async fn the_entry_point_refuses_a_forged_or_withdrawn_approval() {
    let world = world().await;
    let (anvil, ep) = (&world.anvil, world.framework.entry_point);
    let account = PrivateKeySigner::random();
    upgrade_to_delegator(anvil, &account, world.framework.delegator, BASE_CHAIN_ID).await;
    mint(anvil, world.token, account.address(), U256::from(10 * UNIT)).await;
    let to = fresh_address();
    let call = || userop::execute_single(world.token, U256::ZERO, &token_transfer(to, UNIT));
    let deposit = world.deposit().await;

    // Approved by a key the paymaster does not trust.
    let forger = PrivateKeySigner::random();
    let forged = world.sign(world.unsigned(account.address(), call()).await, &forger, &account);
    let refused = world
        .simulate(world.sponsor.address(), std::slice::from_ref(&forged))
        .await;
    assert_eq!(refused, Err(("AA34 signature error".to_string(), Bytes::new())));
    let receipt = world.bundle(&world.sponsor, &[forged], Vec::new()).await;
    assert!(!receipt.status(), "handleOps reverted");
    assert!(events(ep, &receipt).is_empty());

    // The sponsor's approval with one byte of the operation changed after it was signed.
    let mut tampered = world.operation(&account, call()).await;
    tampered.preVerificationGas += U256::from(1);
    let digest = userop::account_digest(&tampered, ep, BASE_CHAIN_ID);
    userop::attach_account_signature(&mut tampered, &account.sign_hash_sync(&digest).unwrap());
    let refused = world
        .simulate(world.sponsor.address(), std::slice::from_ref(&tampered))
        .await;
    assert_eq!(refused, Err(("AA34 signature error".to_string(), Bytes::new())));

    // The sponsor's own approval once the owner removed it as a signer.
    let op = world.operation(&account, call()).await;
    world.paymaster.remove_signer(anvil, world.sponsor.address()).await;
    let refused = world.simulate(world.sponsor.address(), std::slice::from_ref(&op)).await;
    assert_eq!(refused, Err(("AA34 signature error".to_string(), Bytes::new())));
    assert!(
        !world
            .bundle(&world.sponsor, std::slice::from_ref(&op), Vec::new())
            .await
            .status()
    );

    // Nothing moved, nothing was paid, no nonce used; trusted again, the same operation lands.
    assert_eq!(token_balance(anvil, world.token, to).await, U256::ZERO);
    assert_eq!(world.deposit().await, deposit);
    assert_eq!(world.entry_point_nonce(account.address()).await, U256::ZERO);
    world.paymaster.add_signer(anvil, world.sponsor.address()).await;
    let receipt = world.bundle(&world.sponsor, &[op], Vec::new()).await;
    assert!(receipt.status());
    assert_eq!(token_balance(anvil, world.token, to).await, U256::from(UNIT));
}

#[tokio::test]
async fn a_bundle_from_a_sender_the_paymaster_does_not_allow_is_refused() {
    let world = world().await;
    let anvil = &world.anvil;
    let account = PrivateKeySigner::random();
    mint(anvil, world.token, account.address(), U256::from(10 * UNIT)).await;
    let outsider = PrivateKeySigner::random();
    anvil.set_balance(outsider.address(), wei(ONE_ETH)).await;
    let to = fresh_address();
    let op = world
        .operation(
            &account,
            userop::execute_single(world.token, U256::ZERO, &token_transfer(to, UNIT)),
        )
        .await;
    let deposit = world.deposit().await;

    // A type-4 bundle that reverts still applies its authorizations (they are processed before execution).
    let designation = authorization(anvil, &account, world.framework.delegator).await;
    let receipt = world
        .bundle(&outsider, std::slice::from_ref(&op), vec![designation])
        .await;
    assert!(!receipt.status(), "handleOps reverted");
    let code = anvil.provider().get_code_at(account.address()).await.unwrap();
    assert_eq!(code, designation_code(world.framework.delegator));
    assert_eq!(
        anvil.nonce(account.address()).await,
        1,
        "the authorization's nonce is used all the same"
    );

    // Why: the paymaster's validation reverts with BundlerNotAllowed(tx.origin).
    let refused = world.simulate(outsider.address(), std::slice::from_ref(&op)).await;
    let (reason, inner) = refused.expect_err("refused");
    assert_eq!(reason, "AA33 reverted");
    let not_allowed = userop::ISingletonPaymaster::BundlerNotAllowed::abi_decode(&inner).expect("BundlerNotAllowed");
    assert_eq!(not_allowed.bundler, outsider.address());

    assert_eq!(token_balance(anvil, world.token, to).await, U256::ZERO);
    assert_eq!(world.deposit().await, deposit);
    assert_eq!(world.entry_point_nonce(account.address()).await, U256::ZERO);
    // The allowlisted sponsor lands the very same operation.
    let receipt = world.bundle(&world.sponsor, &[op], Vec::new()).await;
    assert!(receipt.status());
    assert_eq!(token_balance(anvil, world.token, to).await, U256::from(UNIT));
}

#[tokio::test]
async fn the_entry_point_requires_exactly_agentds_maximum_cost_of_the_paymaster() {
    let world = world().await;
    let anvil = &world.anvil;
    let account = PrivateKeySigner::random();
    upgrade_to_delegator(anvil, &account, world.framework.delegator, BASE_CHAIN_ID).await;
    mint(anvil, world.token, account.address(), U256::from(10 * UNIT)).await;
    // A second paymaster, the sponsor trusted and allowlisted, with one wei less than the operation's maximum cost.
    let thin = Paymaster::deploy(anvil, world.framework.entry_point).await;
    let world = World {
        paymaster: thin,
        ..world
    };
    let call = userop::execute_single(world.token, U256::ZERO, &token_transfer(fresh_address(), UNIT));
    let op = world.operation(&account, call).await;
    let max_cost = userop::max_cost(&op);
    thin.sponsor(&world.anvil, world.sponsor.address(), max_cost - U256::from(1))
        .await;
    let refused = world.simulate(world.sponsor.address(), std::slice::from_ref(&op)).await;
    assert_eq!(
        refused,
        Err(("AA31 paymaster deposit too low".to_string(), Bytes::new()))
    );
    thin.deposit(&world.anvil, U256::from(1)).await;
    assert_eq!(
        world.simulate(world.sponsor.address(), std::slice::from_ref(&op)).await,
        Ok(())
    );
}
