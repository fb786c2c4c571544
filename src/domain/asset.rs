//! Assets a transfer can move, named by key `<chain>:<SYMBOL>` (`base:ETH`). Today each registry chain has one
//! asset, its native coin; the ERC-20 registry adds entries to `resolve` without changing the policy rules.

use super::chain::{self, ChainInfo};

/// One transferable asset on one chain.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Asset {
    pub chain: &'static ChainInfo,
    pub symbol: &'static str,
    pub decimals: u8,
}

impl Asset {
    /// The native coin of `chain`.
    pub fn native(chain: &'static ChainInfo) -> Asset {
        Asset {
            chain,
            symbol: chain.native_symbol,
            decimals: chain.decimals,
        }
    }

    /// `<chain>:<SYMBOL>`, the key policies use.
    pub fn key(&self) -> String {
        key(self.chain.name, self.symbol)
    }
}

/// The key of `symbol` on `chain`.
pub fn key(chain: &str, symbol: &str) -> String {
    format!("{chain}:{symbol}")
}

/// The asset a key names, if the registry knows it. The chain part is exact (registry names are lower-case);
/// the symbol is compared without regard to case and answered in its registry spelling.
pub fn resolve(key: &str) -> Option<Asset> {
    let (chain_name, symbol) = key.split_once(':')?;
    let chain = chain::find(chain_name)?;
    on_chain(chain)
        .into_iter()
        .find(|a| a.symbol.eq_ignore_ascii_case(symbol))
}

/// The assets the registry knows on `chain` (today its native coin; the token registry adds to it).
pub fn on_chain(chain: &'static ChainInfo) -> Vec<Asset> {
    vec![Asset::native(chain)]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn native_coins_resolve_by_key() {
        let asset = resolve("base:ETH").expect("base:ETH");
        assert_eq!(asset.chain.name, "base");
        assert_eq!(asset.decimals, 18);
        assert_eq!(resolve("polygon:pol").map(|a| a.symbol), Some("POL"));
        assert_eq!(asset.key(), "base:ETH");
    }

    #[test]
    fn unknown_chains_and_symbols_do_not_resolve() {
        assert!(resolve("base:DOGE").is_none());
        assert!(resolve("mars:ETH").is_none());
        assert!(resolve("ETH").is_none());
    }
}
