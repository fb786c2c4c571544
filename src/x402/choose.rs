//! Choosing what to pay from a 402's `accepts` list, and the price check: the first `exact` entry on one of the
//! agent's chains in a token the caller knows (and the one the request names, when it names one); its amount in
//! base units compared with the caller's `max_amount`, exactly.

use alloy::primitives::{Address, U256};
use serde::Serialize;

use super::wire::{PaymentRequired, Protocol, Requirements};
use crate::domain::amount::{format_units, parse_units};

/// Entries listed back in a refusal at most (a server may offer many).
const MAX_OFFERED_LISTED: usize = 20;
/// Longest text of one offered field listed back; longer values are cut.
const MAX_OFFERED_FIELD: usize = 100;

/// A token the agent may pay in: one of its chains and a registry token there. Given by the caller, so this module
/// does not depend on where the registry lives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KnownToken {
    /// Registry chain name (`base`), also the v1 network name.
    pub chain: String,
    pub chain_id: u64,
    pub symbol: String,
    pub address: Address,
    pub decimals: u8,
    /// The token's EIP-712 domain name and version when known (`USD Coin`, `2` for USDC on base): an entry that
    /// names another domain for this token is not signed for.
    pub eip712: Option<(String, String)>,
}

/// The entry chosen and everything signing it needs, read and checked.
#[derive(Debug, Clone, PartialEq)]
pub struct Choice {
    pub protocol: Protocol,
    /// Index into `accepts`.
    pub index: usize,
    pub entry: Requirements,
    pub token: KnownToken,
    /// Base units of `token`.
    pub amount: U256,
    pub pay_to: Address,
    pub max_timeout_seconds: u64,
    /// EIP-712 domain name and version, from the entry's `extra`.
    pub domain_name: String,
    pub domain_version: String,
}

impl Choice {
    /// The price in whole units of the token (`0.05`).
    pub fn price(&self) -> String {
        format_units(self.amount, self.token.decimals)
    }

    /// The policy's asset key, `<chain>:<SYMBOL>`.
    pub fn asset_key(&self) -> String {
        format!("{}:{}", self.token.chain, self.token.symbol)
    }
}

/// An entry of a refused price list, as the refusal lists it back (`details.offered`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Offered {
    pub scheme: Option<String>,
    pub network: Option<String>,
    pub asset: Option<String>,
    pub amount: Option<String>,
    pub pay_to: Option<String>,
}

impl Offered {
    fn of(entry: &Requirements) -> Self {
        let cut = |v: &Option<String>| v.as_ref().map(|s| s.chars().take(MAX_OFFERED_FIELD).collect());
        Offered {
            scheme: cut(&entry.scheme),
            network: cut(&entry.network),
            asset: cut(&entry.asset),
            amount: cut(&entry.amount),
            pay_to: cut(&entry.pay_to),
        }
    }
}

/// Why nothing is paid, before anything is signed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum X402Error {
    /// No entry fits (or the 402 is no x402 price list): 422 `x402_unsupported` with what was offered.
    #[error("the resource asks for no payment this agent can make: {reason}")]
    Unsupported { reason: String, offered: Vec<Offered> },
    /// 422 `price_above_max`.
    #[error("the price {price} {symbol} is above max_amount {max}")]
    PriceAboveMax { price: String, max: String, symbol: String },
    /// `max_amount` is no amount of the chosen token (a 422 on that field).
    #[error("max_amount {0}")]
    InvalidMaxAmount(String),
}

/// The first entry of `required` the agent can pay: scheme `exact`, a network of one of `tokens`' chains
/// (`eip155:<id>` in v2, the registry name in v1), an asset that is one of `tokens` there (and is `asset`, a symbol
/// or address, when given), a positive amount, a `payTo` address, a timeout and the EIP-712 domain in `extra`.
pub fn choose(required: &PaymentRequired, tokens: &[KnownToken], asset: Option<&str>) -> Result<Choice, X402Error> {
    required
        .accepts
        .iter()
        .enumerate()
        .find_map(|(index, entry)| fit(required.protocol, index, entry, tokens, asset))
        .ok_or_else(|| X402Error::Unsupported {
            reason: match (required.accepts.is_empty(), asset) {
                (true, _) => "the 402 lists no payment options".into(),
                (false, Some(asset)) => format!("no exact payment in {asset} on the agent's chains is offered"),
                (false, None) => "no exact payment in a known token on the agent's chains is offered".into(),
            },
            offered: unsupported_list(required),
        })
}

/// The entries of a price list, as a refusal lists them back.
pub fn unsupported_list(required: &PaymentRequired) -> Vec<Offered> {
    required
        .accepts
        .iter()
        .take(MAX_OFFERED_LISTED)
        .map(Offered::of)
        .collect()
}

fn fit(
    protocol: Protocol,
    index: usize,
    entry: &Requirements,
    tokens: &[KnownToken],
    asset: Option<&str>,
) -> Option<Choice> {
    if entry.scheme.as_deref() != Some("exact") {
        return None;
    }
    let network = entry.network.as_deref()?;
    let entry_asset: Address = entry.asset.as_deref()?.trim().parse().ok()?;
    let token = tokens.iter().find(|t| {
        let on_chain = match protocol {
            Protocol::V2 => network
                .strip_prefix("eip155:")
                .and_then(|id| id.parse::<u64>().ok())
                .is_some_and(|id| id == t.chain_id),
            Protocol::V1 => network == t.chain,
        };
        on_chain && t.address == entry_asset
    })?;
    if let Some(wanted) = asset.map(str::trim) {
        let by_address = wanted.parse::<Address>().is_ok_and(|a| a == token.address);
        if !by_address && !wanted.eq_ignore_ascii_case(&token.symbol) {
            return None;
        }
    }
    let amount = base_units(entry.amount.as_deref()?)?;
    let pay_to: Address = entry.pay_to.as_deref()?.trim().parse().ok()?;
    if pay_to == Address::ZERO {
        return None;
    }
    let max_timeout_seconds = entry.max_timeout_seconds.filter(|s| *s > 0)?;
    let (domain_name, domain_version) = (entry.eip712_name.clone()?, entry.eip712_version.clone()?);
    if let Some((name, version)) = &token.eip712
        && (name != &domain_name || version != &domain_version)
    {
        return None;
    }
    Some(Choice {
        protocol,
        index,
        entry: entry.clone(),
        token: token.clone(),
        amount,
        pay_to,
        max_timeout_seconds,
        domain_name,
        domain_version,
    })
}

/// Atomic units as the wire gives them: a positive decimal integer, no sign, no fraction, no exponent.
fn base_units(text: &str) -> Option<U256> {
    if text.is_empty() || !text.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    U256::from_str_radix(text, 10).ok().filter(|v| !v.is_zero())
}

/// Refuses a price above `max_amount` (whole units of the chosen token, a decimal string): equal passes.
pub fn check_price(choice: &Choice, max_amount: &str) -> Result<(), X402Error> {
    let max = parse_units(max_amount, choice.token.decimals).map_err(|e| X402Error::InvalidMaxAmount(e.to_string()))?;
    if choice.amount > max {
        return Err(X402Error::PriceAboveMax {
            price: choice.price(),
            max: format_units(max, choice.token.decimals),
            symbol: choice.token.symbol.clone(),
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::x402::wire::{encode_header, payment_required};
    use serde_json::{Value, json};

    const USDC_BASE: &str = "0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913";
    const USDC_OPTIMISM: &str = "0x0b2C639c533813f4Aa9D7837CAf62653d097Ff85";
    const WETH_BASE: &str = "0x4200000000000000000000000000000000000006";
    const PAY_TO: &str = "0x209693Bc6afc0C5328bA36FaF03C514EF312287C";

    fn token(chain: &str, chain_id: u64, symbol: &str, address: &str, decimals: u8) -> KnownToken {
        KnownToken {
            chain: chain.into(),
            chain_id,
            symbol: symbol.into(),
            address: address.parse().unwrap(),
            decimals,
            eip712: None,
        }
    }

    fn tokens() -> Vec<KnownToken> {
        vec![
            KnownToken {
                eip712: Some(("USD Coin".into(), "2".into())),
                ..token("base", 8453, "USDC", USDC_BASE, 6)
            },
            token("base", 8453, "WETH", WETH_BASE, 18),
            token("optimism", 10, "USDC", USDC_OPTIMISM, 6),
        ]
    }

    fn entry(network: &str, asset: &str, amount: &str) -> Value {
        let name = if asset == WETH_BASE {
            "Wrapped Ether"
        } else {
            "USD Coin"
        };
        json!({"scheme": "exact", "network": network, "amount": amount, "asset": asset, "payTo": PAY_TO,
               "maxTimeoutSeconds": 60, "extra": {"name": name, "version": "2"}})
    }

    fn v2(accepts: Vec<Value>) -> PaymentRequired {
        let doc = json!({"x402Version": 2, "resource": {"url": "https://a.example/x"}, "accepts": accepts});
        payment_required(Some(&encode_header(&doc)), b"").unwrap()
    }

    #[test]
    fn the_first_exact_entry_in_a_known_token_of_the_agents_chains_is_chosen() {
        let required = v2(vec![
            json!({"scheme": "upto", "network": "eip155:8453", "amount": "1", "asset": USDC_BASE, "payTo": PAY_TO,
                   "maxTimeoutSeconds": 60, "extra": {"name": "USD Coin", "version": "2"}}),
            entry("eip155:1", USDC_BASE, "5"), // a chain the agent lacks
            entry("eip155:8453", "0x0000000000000000000000000000000000000bad", "5"), // unknown token
            entry(
                "solana:5eykt4UsFv8P8NJdTREpY1vzqKqZKvdp",
                "EPjFWdd5AufqSSqeM2qN1xzybapC8G4wEGGkZwyTDt1v",
                "5",
            ),
            entry("eip155:10", USDC_OPTIMISM, "20000"),
            entry("eip155:8453", USDC_BASE, "10000"),
        ]);
        let choice = choose(&required, &tokens(), None).unwrap();
        assert_eq!(choice.index, 4);
        assert_eq!(choice.token.chain, "optimism");
        assert_eq!(choice.amount, U256::from(20_000u64));
        assert_eq!(choice.pay_to, PAY_TO.parse::<Address>().unwrap());
        assert_eq!(choice.price(), "0.02");
        assert_eq!(choice.asset_key(), "optimism:USDC");
        assert_eq!(
            Value::Object(choice.entry.raw.clone()),
            entry("eip155:10", USDC_OPTIMISM, "20000")
        );
    }

    #[test]
    fn the_requested_asset_narrows_the_choice_by_symbol_or_address() {
        let required = v2(vec![
            entry("eip155:8453", WETH_BASE, "1000000000000"),
            entry("eip155:8453", USDC_BASE, "10000"),
        ]);
        assert_eq!(choose(&required, &tokens(), None).unwrap().token.symbol, "WETH");
        assert_eq!(choose(&required, &tokens(), Some("usdc")).unwrap().index, 1);
        assert_eq!(choose(&required, &tokens(), Some(USDC_BASE)).unwrap().index, 1);
        let err = choose(&required, &tokens(), Some("DAI")).unwrap_err();
        assert!(
            matches!(&err, X402Error::Unsupported { offered, .. } if offered.len() == 2),
            "{err:?}"
        );
    }

    #[test]
    fn none_fitting_is_refused_with_what_was_offered() {
        let required = v2(vec![entry("eip155:1", USDC_BASE, "5")]);
        let X402Error::Unsupported { offered, .. } = choose(&required, &tokens(), None).unwrap_err() else {
            panic!("expected Unsupported");
        };
        assert_eq!(
            serde_json::to_value(&offered).unwrap(),
            json!([{"scheme": "exact", "network": "eip155:1", "asset": USDC_BASE, "amount": "5", "pay_to": PAY_TO}])
        );
        assert!(matches!(
            choose(&v2(vec![]), &tokens(), None),
            Err(X402Error::Unsupported { offered, .. }) if offered.is_empty()
        ));
    }

    #[test]
    fn entries_with_bad_amounts_addresses_timeouts_or_domains_fit_nothing() {
        let base = entry("eip155:8453", USDC_BASE, "10000");
        let spoiled = |key: &str, value: Value| {
            let mut e = base.clone();
            e[key] = value;
            e
        };
        for bad in [
            spoiled("amount", json!("0")),
            spoiled("amount", json!("0.5")),
            spoiled("amount", json!("-1")),
            spoiled("amount", json!("1e6")),
            spoiled("amount", json!(10000)),
            spoiled(
                "amount",
                json!("1157920892373161954235709850086879078532699846656405640394575840079131296399361"),
            ),
            spoiled("payTo", json!("0x0000000000000000000000000000000000000000")),
            spoiled("payTo", json!("merchant")),
            spoiled("maxTimeoutSeconds", json!(0)),
            spoiled("extra", json!({})),
            // A domain other than the token's would be a signature the token refuses (or a lure): not signed.
            spoiled("extra", json!({"name": "USDC", "version": "2"})),
        ] {
            assert!(choose(&v2(vec![bad.clone()]), &tokens(), None).is_err(), "{bad}");
        }
        assert!(choose(&v2(vec![base]), &tokens(), None).is_ok());
    }

    #[test]
    fn v1_entries_name_the_network_and_carry_max_amount_required() {
        let body = json!({"x402Version": 1, "error": "X-PAYMENT header is required", "accepts": [
            {"scheme": "exact", "network": "eip155:8453", "maxAmountRequired": "1", "asset": USDC_BASE,
             "payTo": PAY_TO, "maxTimeoutSeconds": 60, "extra": {"name": "USD Coin", "version": "2"}},
            {"scheme": "exact", "network": "base", "maxAmountRequired": "2500", "asset": USDC_BASE,
             "payTo": PAY_TO, "resource": "https://a.example/x", "description": "", "mimeType": "",
             "maxTimeoutSeconds": 60, "extra": {"name": "USD Coin", "version": "2"}}]});
        let required = payment_required(None, body.to_string().as_bytes()).unwrap();
        let choice = choose(&required, &tokens(), None).unwrap();
        assert_eq!((choice.index, choice.protocol), (1, Protocol::V1));
        assert_eq!(choice.amount, U256::from(2500u64));
    }

    #[test]
    fn the_price_is_compared_exactly_in_the_tokens_decimals() {
        let choice =
            |amount: &str| choose(&v2(vec![entry("eip155:8453", USDC_BASE, amount)]), &tokens(), None).unwrap();
        assert_eq!(check_price(&choice("50000"), "0.05"), Ok(()));
        assert_eq!(check_price(&choice("49999"), "0.05"), Ok(()));
        assert_eq!(
            check_price(&choice("50001"), "0.05"),
            Err(X402Error::PriceAboveMax {
                price: "0.050001".into(),
                max: "0.05".into(),
                symbol: "USDC".into()
            })
        );
        assert_eq!(check_price(&choice("1"), "0.000001"), Ok(()));
        assert_eq!(check_price(&choice("1000000000000"), "1000000"), Ok(()));
        assert!(matches!(
            check_price(&choice("1"), "0.0000001"),
            Err(X402Error::InvalidMaxAmount(_))
        ));
        assert!(matches!(
            check_price(&choice("1"), "abc"),
            Err(X402Error::InvalidMaxAmount(_))
        ));
        assert!(matches!(
            check_price(&choice("1"), "-1"),
            Err(X402Error::InvalidMaxAmount(_))
        ));
        // 18 decimals: 0.1 + 0.2 is exactly 0.3, as floating point would not have it.
        let weth = choose(
            &v2(vec![entry("eip155:8453", WETH_BASE, "300000000000000000")]),
            &tokens(),
            None,
        )
        .unwrap();
        assert_eq!(check_price(&weth, "0.3"), Ok(()));
        assert!(check_price(&weth, "0.299999999999999999").is_err());
    }
}
