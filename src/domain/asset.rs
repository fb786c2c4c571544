//! Assets a transfer can move, named by key `<chain>:<SYMBOL>` (`base:ETH`, `base:USDC`): each registry chain's
//! native coin and the ERC-20 tokens of the token registry (`Registry`): the built-in list below, to which
//! `TOKENS_<CHAIN>=SYMBOL:0xADDRESS:DECIMALS,...` adds tokens or replaces one of the same symbol.

use alloy::primitives::{Address, address};

use super::chain::{self, CHAINS, ChainInfo};

/// One transferable asset on one chain: the native coin (`token: None`) or an ERC-20 token.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Asset {
    pub chain: &'static ChainInfo,
    pub symbol: String,
    pub decimals: u8,
    /// The token contract; `None` for the native coin.
    pub token: Option<Address>,
    /// The token's EIP-712 domain `(name, version)` where the issuer publishes it (EIP-3009 tokens); unset
    /// otherwise.
    pub eip712: Option<(String, String)>,
}

impl Asset {
    /// The native coin of `chain`.
    pub fn native(chain: &'static ChainInfo) -> Asset {
        Asset {
            chain,
            symbol: chain.native_symbol.to_string(),
            decimals: chain.decimals,
            token: None,
            eip712: None,
        }
    }

    /// `<chain>:<SYMBOL>`, the key policies use.
    pub fn key(&self) -> String {
        key(self.chain.name, &self.symbol)
    }

    pub fn is_native(&self) -> bool {
        self.token.is_none()
    }
}

/// The key of `symbol` on `chain`.
pub fn key(chain: &str, symbol: &str) -> String {
    format!("{chain}:{symbol}")
}

/// A built-in token: chain, symbol, contract, decimals.
type Builtin = (&'static str, &'static str, Address, u8);

/// The tokens every installation knows. Addresses are the issuers' published ones:
/// - USDC: Circle's list, <https://developers.circle.com/stablecoins/usdc-contract-addresses> (mainnets: Ethereum,
///   Base, OP Mainnet, Arbitrum, Polygon PoS; testnets: Ethereum Sepolia, Base Sepolia); the OP-stack chains' entries
///   also match the Optimism token list (`ethereum-optimism.github.io`, `data/USDC/data.json`).
/// - USDT on Ethereum: Tether's contract, as listed in the Optimism token list's `data/USDT/data.json`
///   (website tether.to) and by the block explorers.
/// - DAI on Ethereum: Maker's Dai Stablecoin (Multi-Collateral DAI), Optimism token list `data/DAI/data.json`.
/// - WETH on Base and Optimism: the OP-stack `WETH9` predeploy at `0x4200…0006` (Optimism token list
///   `data/WETH/data.json`; `contracts/L2/predeploys/WETH9.sol` of `@eth-optimism/contracts`).
const BUILTIN: &[Builtin] = &[
    (
        "ethereum",
        "USDC",
        address!("A0b86991c6218b36c1d19D4a2e9Eb0cE3606eB48"),
        6,
    ),
    (
        "ethereum",
        "USDT",
        address!("dAC17F958D2ee523a2206206994597C13D831ec7"),
        6,
    ),
    (
        "ethereum",
        "DAI",
        address!("6B175474E89094C44Da98b954EedeAC495271d0F"),
        18,
    ),
    ("base", "USDC", address!("833589fCD6eDb6E08f4c7C32D4f71b54bdA02913"), 6),
    ("base", "WETH", address!("4200000000000000000000000000000000000006"), 18),
    (
        "optimism",
        "USDC",
        address!("0b2C639c533813f4Aa9D7837CAf62653d097Ff85"),
        6,
    ),
    (
        "optimism",
        "WETH",
        address!("4200000000000000000000000000000000000006"),
        18,
    ),
    (
        "arbitrum",
        "USDC",
        address!("af88d065e77c8cC2239327C5EDb3A432268e5831"),
        6,
    ),
    (
        "polygon",
        "USDC",
        address!("3c499c542cEF5E3811e1192ce70d8cC03d5c3359"),
        6,
    ),
    (
        "sepolia",
        "USDC",
        address!("1c7D4B196Cb0C7B01d743Fbc6116a902379C7238"),
        6,
    ),
    (
        "base-sepolia",
        "USDC",
        address!("036CbD53842c5426634e7929541eC2318f3dCF7e"),
        6,
    ),
];

/// The ERC-20 tokens of every registry chain: the built-in list with the operator's additions and replacements.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Registry {
    /// Tokens only (native coins are implied by the chain registry), in chain order, then as listed.
    tokens: Vec<Asset>,
}

impl Default for Registry {
    /// The built-in tokens.
    fn default() -> Self {
        let tokens = CHAINS
            .iter()
            .flat_map(|c| BUILTIN.iter().filter(move |b| b.0 == c.name).map(move |b| (c, b)))
            .map(|(chain, (_, symbol, address, decimals))| Asset {
                chain,
                symbol: symbol.to_string(),
                decimals: *decimals,
                token: Some(*address),
                // USDC's EIP-712 domain on base as Circle's FiatToken there declares it (the x402 core's finding);
                // others are left unset, and an x402 entry's `extra` names the domain it is paid in.
                eip712: (chain.name == "base" && *symbol == "USDC").then(|| ("USD Coin".to_string(), "2".to_string())),
            })
            .collect();
        Registry { tokens }
    }
}

/// Why a `TOKENS_<CHAIN>` entry was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("entry {entry:?}: {reason} (expected SYMBOL:0xADDRESS:DECIMALS)")]
pub struct TokenSpecError {
    pub entry: String,
    pub reason: &'static str,
}

impl Registry {
    /// Parses `SYMBOL:0xADDRESS:DECIMALS,...` (a `TOKENS_<CHAIN>` value) into tokens of `chain`.
    pub fn parse_spec(chain: &'static ChainInfo, text: &str) -> Result<Vec<Asset>, TokenSpecError> {
        let mut found: Vec<Asset> = Vec::new();
        for entry in text.split(',').map(str::trim).filter(|e| !e.is_empty()) {
            let fail = |reason| TokenSpecError {
                entry: entry.to_string(),
                reason,
            };
            let parts: Vec<&str> = entry.split(':').map(str::trim).collect();
            let [symbol, address, decimals] = parts.as_slice() else {
                return Err(fail("three parts separated by ':' are needed"));
            };
            let valid_symbol = (1..=11).contains(&symbol.len())
                && symbol.bytes().all(|b| b.is_ascii_alphanumeric())
                && symbol.bytes().any(|b| b.is_ascii_alphabetic());
            if !valid_symbol {
                return Err(fail("the symbol must be 1 to 11 letters or digits"));
            }
            let symbol = symbol.to_ascii_uppercase();
            if symbol.eq_ignore_ascii_case(chain.native_symbol) {
                return Err(fail("the symbol is the chain's native coin"));
            }
            let hex_ok =
                address.len() == 42 && address.starts_with("0x") && address[2..].bytes().all(|b| b.is_ascii_hexdigit());
            let address: Address = address
                .parse()
                .ok()
                .filter(|_| hex_ok)
                .ok_or_else(|| fail("the address must be 0x followed by 40 hex digits"))?;
            if address == Address::ZERO {
                return Err(fail("the zero address is no token"));
            }
            let decimals: u8 = decimals
                .parse()
                .ok()
                .filter(|d| *d <= 36)
                .ok_or_else(|| fail("decimals must be an integer from 0 to 36"))?;
            found.retain(|t| t.symbol != symbol);
            found.push(Asset {
                chain,
                symbol,
                decimals,
                token: Some(address),
                eip712: None,
            });
        }
        Ok(found)
    }

    /// The registry with `extra` tokens of `chain` added; one of the same symbol replaces the built-in one.
    pub fn with(mut self, extra: Vec<Asset>) -> Registry {
        for token in extra {
            match self
                .tokens
                .iter_mut()
                .find(|t| t.chain.name == token.chain.name && t.symbol == token.symbol)
            {
                Some(existing) => *existing = token,
                None => {
                    let after = self
                        .tokens
                        .iter()
                        .rposition(|t| chain_index(t.chain) <= chain_index(token.chain))
                        .map_or(0, |i| i + 1);
                    self.tokens.insert(after, token);
                }
            }
        }
        self
    }

    /// The ERC-20 tokens of `chain`.
    pub fn tokens<'a>(&'a self, chain: &'a ChainInfo) -> impl Iterator<Item = &'a Asset> + 'a {
        self.tokens.iter().filter(move |t| t.chain.name == chain.name)
    }

    /// The assets of `chain`: its native coin first, then its tokens.
    pub fn on_chain(&self, chain: &'static ChainInfo) -> Vec<Asset> {
        std::iter::once(Asset::native(chain))
            .chain(self.tokens(chain).cloned())
            .collect()
    }

    /// The asset a key names. The chain part is exact (registry names are lower-case); the symbol is compared
    /// without regard to case and answered in its registry spelling.
    /// A policy's `limits` key (§11, §18) as stored, with the decimals its amounts are written in: a registry
    /// asset by `<chain>:<SYMBOL>` (or its token address) in whole units, or any other ERC-20 of a known chain by
    /// `<chain>:<token address>` (lower case) in base units.
    pub fn limit_key(&self, key: &str) -> Option<(String, u8)> {
        if let Some(asset) = self.resolve(key) {
            return Some((asset.key(), asset.decimals));
        }
        let (chain_name, address) = key.trim().split_once(':')?;
        let chain = chain::find(chain_name.trim())?;
        let address = address.trim();
        let token: Address = address.parse().ok().filter(|_| address.starts_with("0x"))?;
        Some((format!("{}:{}", chain.name, format!("{token:#x}").to_lowercase()), 0))
    }

    pub fn resolve(&self, key: &str) -> Option<Asset> {
        let (chain_name, symbol) = key.split_once(':')?;
        self.find(chain::find(chain_name)?, symbol)
    }

    /// The asset a request names on `chain` (`None`: the native coin), or why none: what handlers and tools answer
    /// alike ("unknown asset DOGE on base: one of ETH, USDC").
    pub fn named(&self, chain: &'static ChainInfo, wanted: Option<&str>) -> Result<Asset, UnknownAsset> {
        let Some(wanted) = wanted.map(str::trim) else {
            return Ok(Asset::native(chain));
        };
        self.find(chain, wanted).ok_or_else(|| UnknownAsset {
            wanted: wanted.to_string(),
            chain: chain.name,
            known: self.on_chain(chain).into_iter().map(|a| a.symbol).collect(),
        })
    }

    /// An asset of `chain` by symbol (any case) or, for tokens, by contract address.
    pub fn find(&self, chain: &'static ChainInfo, symbol_or_address: &str) -> Option<Asset> {
        let wanted = symbol_or_address.trim();
        if let Ok(address) = wanted.parse::<Address>()
            && wanted.starts_with("0x")
        {
            return self.tokens(chain).find(|t| t.token == Some(address)).cloned();
        }
        self.on_chain(chain)
            .into_iter()
            .find(|a| a.symbol.eq_ignore_ascii_case(wanted))
    }
}

/// An asset name that is none of a chain's assets.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown asset {wanted} on {chain}: one of {}", known.join(", "))]
pub struct UnknownAsset {
    pub wanted: String,
    pub chain: &'static str,
    /// The chain's assets: its native coin, then its registry tokens.
    pub known: Vec<String>,
}

fn chain_index(chain: &ChainInfo) -> usize {
    CHAINS.iter().position(|c| c.name == chain.name).unwrap_or(usize::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn base() -> &'static ChainInfo {
        chain::find("base").expect("base")
    }

    #[test]
    fn native_coins_and_tokens_resolve_by_key() {
        let registry = Registry::default();
        let asset = registry.resolve("base:ETH").expect("base:ETH");
        assert_eq!(asset.chain.name, "base");
        assert_eq!(asset.decimals, 18);
        assert!(asset.is_native());
        assert_eq!(registry.resolve("polygon:pol").map(|a| a.symbol), Some("POL".into()));
        assert_eq!(asset.key(), "base:ETH");
        let usdc = registry.resolve("base:usdc").expect("base:USDC");
        assert_eq!(usdc.decimals, 6);
        assert_eq!(usdc.token, Some(address!("833589fCD6eDb6E08f4c7C32D4f71b54bdA02913")));
        assert_eq!(usdc.key(), "base:USDC");
    }

    #[test]
    fn every_chain_has_usdc_and_the_named_tokens_are_where_they_belong() {
        let registry = Registry::default();
        for chain in CHAINS {
            assert!(registry.find(chain, "USDC").is_some(), "{}", chain.name);
        }
        for key in ["ethereum:USDT", "ethereum:DAI", "base:WETH", "optimism:WETH"] {
            assert!(registry.resolve(key).is_some(), "{key}");
        }
        assert!(registry.resolve("base:USDT").is_none());
    }

    #[test]
    fn unknown_chains_and_symbols_do_not_resolve() {
        let registry = Registry::default();
        assert!(registry.resolve("base:DOGE").is_none());
        assert!(registry.resolve("mars:ETH").is_none());
        assert!(registry.resolve("ETH").is_none());
    }

    #[test]
    fn tokens_are_found_by_address_too() {
        let registry = Registry::default();
        let found = registry.find(base(), "0x833589fcd6edb6e08f4c7c32d4f71b54bda02913");
        assert_eq!(found.map(|a| a.symbol), Some("USDC".into()));
        assert!(
            registry
                .find(base(), "0x0000000000000000000000000000000000000001")
                .is_none()
        );
    }

    #[test]
    fn token_specs_add_and_replace_by_symbol() {
        let extra = Registry::parse_spec(
            base(),
            "usdc:0x0000000000000000000000000000000000000abc:18, FOO:0x0000000000000000000000000000000000000def:0",
        )
        .expect("valid");
        let registry = Registry::default().with(extra);
        let usdc = registry.resolve("base:USDC").expect("usdc");
        assert_eq!(usdc.decimals, 18);
        assert_eq!(registry.tokens(base()).filter(|t| t.symbol == "USDC").count(), 1);
        assert_eq!(registry.resolve("base:FOO").map(|a| a.decimals), Some(0));
        assert!(registry.resolve("ethereum:FOO").is_none());
    }

    #[test]
    fn bad_token_specs_are_refused_with_the_entry() {
        for bad in [
            "USDC",
            "USDC:0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913",
            "USDC:0x1234:6",
            "USDC:0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913:x",
            "USDC:0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913:99",
            "U-S:0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913:6",
            "ETH:0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913:18",
            "ZERO:0x0000000000000000000000000000000000000000:6",
        ] {
            let err = Registry::parse_spec(base(), bad).expect_err(bad);
            assert!(err.to_string().contains("SYMBOL:0xADDRESS:DECIMALS"), "{err}");
        }
    }
}
