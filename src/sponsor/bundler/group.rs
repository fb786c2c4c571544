//! Which waiting operations go together (§22): an account still without code alone with its designation, an
//! agent whose key was ever exported or one of whose operations failed validation on chain in bundles of its own,
//! the others together, up to `MAX_OPERATIONS` a bundle.

use alloy::eips::eip7702::{Authorization, SignedAuthorization};
use alloy::primitives::{Address, U256};
use alloy::sol_types::SolValue;
use uuid::Uuid;

use super::{Bundler, MAX_OPERATIONS};
use crate::chain::Node;
use crate::chain::client::ChainClient;
use crate::chain::userop::PackedUserOperation;
use crate::store::operations::OpenOperation;

/// Operations to carry in one bundle, with the authorization that designates the account of the first when it
/// has no code yet.
pub(super) struct Group {
    pub ops: Vec<(Uuid, PackedUserOperation)>,
    pub authorization: Option<SignedAuthorization>,
}

impl Bundler {
    /// The bundles to send now: each account still without code alone with its designation (when its wallet has
    /// nothing of its own open on the chain), each agent whose key was ever exported, or one of whose operations
    /// failed validation on chain, with its own operations only (another's key may use its nonces: one that fails
    /// validation on chain must not take others down with it), the others together; up to `MAX_OPERATIONS` a
    /// bundle.
    pub(super) async fn groups(
        &self,
        client: &ChainClient,
        waiting: &[&OpenOperation],
        senders: &super::Senders,
    ) -> anyhow::Result<Vec<Group>> {
        let mut shared = Vec::new();
        let mut own: Vec<(Address, Vec<(Uuid, PackedUserOperation)>)> = Vec::new();
        let mut alone = Vec::new();
        let mut designating: Vec<Address> = Vec::new();
        // Each sender's code as the round read it (`senders`, at the block its events were looked for at; `waiting`
        // carries only operations of senders it read): a designation seen there is checked again by each bundle's
        // simulation.
        let designated = |sender: &Address| senders.get(sender).is_some_and(|(code, _)| *code);
        for op in waiting {
            let packed = PackedUserOperation::abi_decode(&op.packed)?;
            if designated(&op.sender) {
                match op.alone {
                    true => match own.iter_mut().find(|(sender, _)| *sender == op.sender) {
                        Some((_, ops)) => ops.push((op.transfer_id, packed)),
                        None => own.push((op.sender, vec![(op.transfer_id, packed)])),
                    },
                    false => shared.push((op.transfer_id, packed)),
                }
                continue;
            }
            // One designation per account at a time; its later operations wait for it to land.
            if designating.contains(&op.sender) {
                continue;
            }
            designating.push(op.sender);
            match self.authorization(client, op).await? {
                Some(authorization) => alone.push(Group {
                    ops: vec![(op.transfer_id, packed)],
                    authorization: Some(authorization),
                }),
                None => continue,
            }
        }
        let mut groups = alone;
        let bundles = own.into_iter().map(|(_, mut ops)| {
            ops.truncate(MAX_OPERATIONS);
            ops
        });
        for ops in bundles.chain(pack(shared)) {
            groups.push(Group {
                ops,
                authorization: None,
            });
        }
        Ok(groups)
    }

    /// The agent key's EIP-7702 authorization of the configured implementation, with the chain's own id, at the
    /// wallet's next nonce (the node's pending count, or the store's counter when higher), recorded with the
    /// operation under the agent's lock (`designate`): none while the wallet has a transaction of its own open on the
    /// chain, and none of the wallet's is signed there from then until the operation settles (§22), so the
    /// authorization and the wallet's own transactions never take one nonce twice, nor leave one unused.
    async fn authorization(
        &self,
        client: &ChainClient,
        op: &OpenOperation,
    ) -> anyhow::Result<Option<SignedAuthorization>> {
        let chain = self.sponsor.chain.name;
        if !self.store.open_transactions_of(op.agent_id, chain).await?.is_empty() {
            return Ok(None);
        }
        let (pending, counted) = tokio::join!(
            client.pending_nonce(op.sender),
            self.store.next_nonce(op.agent_id, chain)
        );
        let nonce = pending?.max(counted?.unwrap_or(0));
        let authorization = Authorization {
            chain_id: U256::from(self.sponsor.chain.chain_id),
            address: self.sponsor.account_implementation,
            nonce,
        };
        let key = self.store.wallet_key(op.agent_id).await?;
        let signer = self.keys.open(op.agent_id, &key)?;
        let signature = signer.sign_hash(&authorization.signature_hash())?;
        let signed = authorization.into_signed(signature);
        let rlp = alloy::rlp::encode(&signed);
        match self
            .store
            .designate((op.transfer_id, op.agent_id, chain), nonce, &rlp)
            .await?
        {
            true => Ok(Some(signed)),
            // The wallet signed a transaction of its own meanwhile: the operation waits for it to settle.
            false => Ok(None),
        }
    }
}

/// The shared operations (by sender, each sender's in nonce order) in bundles of at most `MAX_OPERATIONS`, each
/// sender's in one bundle of the round (the first with room): a sender's operation in a later bundle than its
/// predecessor would fail its simulation while that one is not yet mined. A sender's operations past
/// `MAX_OPERATIONS` wait for the next round.
fn pack(shared: Vec<(Uuid, PackedUserOperation)>) -> Vec<Vec<(Uuid, PackedUserOperation)>> {
    let mut runs: Vec<Vec<(Uuid, PackedUserOperation)>> = Vec::new();
    for op in shared {
        match runs.last_mut() {
            Some(run) if run[0].1.sender == op.1.sender => run.push(op),
            _ => runs.push(vec![op]),
        }
    }
    let mut bundles: Vec<Vec<(Uuid, PackedUserOperation)>> = Vec::new();
    for mut run in runs {
        run.truncate(MAX_OPERATIONS);
        match bundles.iter_mut().find(|b| b.len() + run.len() <= MAX_OPERATIONS) {
            Some(bundle) => bundle.extend(run),
            None => bundles.push(run),
        }
    }
    bundles
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloy::primitives::Address;

    fn ops(sender: u8, n: u64) -> Vec<(Uuid, PackedUserOperation)> {
        (0..n)
            .map(|nonce| {
                let op = PackedUserOperation {
                    sender: Address::repeat_byte(sender),
                    nonce: U256::from(nonce),
                    ..Default::default()
                };
                (Uuid::new_v4(), op)
            })
            .collect()
    }

    fn senders(bundles: &[Vec<(Uuid, PackedUserOperation)>]) -> Vec<Vec<(u8, u64)>> {
        bundles
            .iter()
            .map(|b| b.iter().map(|(_, op)| (op.sender[0], op.nonce.to::<u64>())).collect())
            .collect()
    }

    /// Each sender's nonces 0..n, one sender after another.
    fn runs(senders: &[(u8, u64)]) -> Vec<(u8, u64)> {
        senders.iter().flat_map(|&(s, n)| (0..n).map(move |k| (s, k))).collect()
    }

    #[test]
    fn a_senders_operations_go_in_one_bundle_of_the_round_and_those_past_sixteen_wait() {
        // 10 + 4 + 5 + 2: the third sender does not fit beside the first two, the fourth does.
        let shared: Vec<_> = [ops(1, 10), ops(2, 4), ops(3, 5), ops(4, 2)].concat();
        let expected = vec![runs(&[(1, 10), (2, 4), (4, 2)]), runs(&[(3, 5)])];
        assert_eq!(senders(&pack(shared)), expected);
        // One sender with 20: 16 go now, nonces 0-15; the rest wait for the next round.
        assert_eq!(senders(&pack(ops(5, 20))), vec![runs(&[(5, 16)])]);
    }
}
