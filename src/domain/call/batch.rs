//! A batch of calls (§22 "Batches"): 2 to 16 calls the agent's account runs in order, all or nothing, through its
//! ERC-7579 `execute` in batch mode. Each call is judged by the `calls` rules on its own (`to`, selector, arguments,
//! value); the first the rules deny is the batch's refusal, any the rules hold holds the batch. Pure: what the
//! record keeps of each call and the verdict over them.

use alloy::primitives::{Address, Bytes, U256};
use serde::{Deserialize, Serialize};

use super::CallsPolicy;
use super::policy::{CallFacts, CallRuleRef, CallVerdict};

/// The fewest calls a batch holds.
pub const MIN_CALLS: usize = 2;
/// The most calls a batch holds.
pub const MAX_CALLS: usize = 16;

/// One call of a batch as the record keeps it: what it sends (`to`, `value` in wei, `data`) and what its calldata
/// was decoded as (shown as a single call's `call` is).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BatchedCall {
    pub to: Address,
    pub value: U256,
    pub data: Bytes,
    pub selector: Option<String>,
    pub function: Option<String>,
    pub args: Option<Vec<serde_json::Value>>,
}

impl BatchedCall {
    /// The facts the `calls` rules read of it, for the agent at `agent` on `chain`.
    pub fn facts<'a>(&'a self, chain: &'a str, agent: Address) -> CallFacts<'a> {
        CallFacts {
            chain,
            to: self.to,
            calldata: &self.data,
            value_wei: self.value,
            agent,
        }
    }

    /// As the API shows it (one entry of `calls`, shaped as a single call's `call`).
    pub fn shown(&self) -> serde_json::Value {
        serde_json::json!({"to": self.to.to_checksum(None), "selector": self.selector,
            "function": self.function, "args": self.args})
    }
}

/// What the `calls` rules judge of a batch: each of its calls, from the agent's address on one chain.
#[derive(Debug, Clone, Copy)]
pub struct BatchFacts<'a> {
    pub chain: &'a str,
    pub calls: &'a [BatchedCall],
    pub agent: Address,
}

impl BatchFacts<'_> {
    /// The batch's verdict: `Deny` with the index of the first call the rules deny; else `Approve` (by the first
    /// call's rule that holds it) when any is held; else `Allow`.
    /// `calls` is the policy's `calls` rules (none: every call is judged as unruled, by whether the agent is guarded).
    pub fn judge(
        &self,
        calls: Option<&CallsPolicy>,
        guarded: bool,
    ) -> (CallVerdict, Option<CallRuleRef>, Option<usize>) {
        let mut held = None;
        for (index, call) in self.calls.iter().enumerate() {
            let facts = call.facts(self.chain, self.agent);
            let judged = calls.map_or((CallVerdict::unruled(guarded), None), |c| c.judged_by(&facts, guarded));
            match judged {
                (CallVerdict::Deny, by) => return (CallVerdict::Deny, by, Some(index)),
                (CallVerdict::Approve, by) if held.is_none() => held = Some(by),
                (CallVerdict::Approve | CallVerdict::Allow, _) => {}
            }
        }
        match held {
            Some(by) => (CallVerdict::Approve, by, None),
            None => (CallVerdict::Allow, None, None),
        }
    }

    /// The first call the rules deny: its index and why, in words.
    pub fn denial(&self, calls: Option<&CallsPolicy>, guarded: bool) -> Option<(usize, String)> {
        let (_, _, index) = self.judge(calls, guarded);
        let index = index?;
        let facts = self.calls[index].facts(self.chain, self.agent);
        Some((index, super::policy::denial(calls, &facts, guarded)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(to: u8, data: &[u8]) -> BatchedCall {
        BatchedCall {
            to: Address::repeat_byte(to),
            value: U256::ZERO,
            data: Bytes::copy_from_slice(data),
            selector: None,
            function: None,
            args: None,
        }
    }

    fn policy(rules: serde_json::Value) -> CallsPolicy {
        CallsPolicy::try_from(rules).expect("calls rules")
    }

    #[test]
    fn the_first_call_the_rules_deny_is_named() {
        let allowed = Address::repeat_byte(0x11).to_string();
        let policy = policy(serde_json::json!({"default": "deny",
            "rules": [{"chain": "*", "to": allowed, "function": "*", "action": "allow"}]}));
        let calls = [
            call(0x11, &[1, 2, 3, 4]),
            call(0x22, &[1, 2, 3, 4]),
            call(0x33, &[1, 2, 3, 4]),
        ];
        let batch = BatchFacts {
            chain: "base",
            calls: &calls,
            agent: Address::repeat_byte(0xaa),
        };
        assert_eq!(batch.judge(Some(&policy), true).0, CallVerdict::Deny);
        assert_eq!(batch.judge(Some(&policy), true).2, Some(1));
        let (index, words) = batch.denial(Some(&policy), true).expect("denied");
        assert_eq!(index, 1);
        assert!(words.contains("calls.default is deny"), "{words}");
        let all_allowed = [call(0x11, &[1, 2, 3, 4]), call(0x11, &[5, 6, 7, 8])];
        let batch = BatchFacts {
            calls: &all_allowed,
            ..batch
        };
        assert_eq!(batch.judge(Some(&policy), true).0, CallVerdict::Allow);
        assert_eq!(batch.denial(Some(&policy), true), None);
    }
}
