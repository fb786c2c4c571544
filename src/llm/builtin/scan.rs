//! Lexical scanning of a chat message: words, chain names and aliases, amounts, addresses and transaction hashes.
//! Chain names come from the registry (`crate::domain::chain::CHAINS`), so a new registry line is understood at once.

use crate::domain::chain as registry;

/// What a message mentions, independent of what the user wants done with it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Scan {
    /// Lower-cased words, with addresses and hashes removed and punctuation split off.
    pub words: Vec<String>,
    /// Registry names of the chains mentioned, in order, without duplicates.
    pub chains: Vec<&'static str>,
    /// The first `0x` + 40 hex address, as written.
    pub address: Option<String>,
    /// The first `0x` + 64 hex transaction hash, as written.
    pub tx_hash: Option<String>,
    /// The amount: the first number followed by a native symbol, else the first number.
    pub amount: Option<Amount>,
    /// The first whole number (e.g. "last 5 transactions").
    pub count: Option<u32>,
}

/// A decimal amount kept exactly as the user wrote it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Amount {
    pub value: String,
    /// `ETH` or `POL` when a symbol followed the number.
    pub symbol: Option<&'static str>,
}

/// Registry names that mean something else before these words (`base fee` is a fee, not the chain).
const NOT_A_CHAIN_BEFORE: &[(&str, &[&str])] = &[("base", &["fee", "fees"])];

/// The registry's own spelling of an alias target; `None` if the registry no longer has that chain.
fn registry_name(name: &str) -> Option<&'static str> {
    registry::find(name).map(|chain| chain.name)
}

/// Words after which `eth` names the chain rather than the coin.
const CHAIN_PREPOSITIONS: &[&str] = &["on", "in", "at", "for", "from", "over", "via", "across", "using"];

impl Scan {
    pub fn new(text: &str) -> Self {
        let mut scan = Scan::default();
        let mut rest = String::with_capacity(text.len());
        let mut last = 0;
        for (start, end) in hex_spans(text) {
            let token = &text[start..end];
            match end - start - 2 {
                40 if scan.address.is_none() => scan.address = Some(token.to_string()),
                64 if scan.tx_hash.is_none() => scan.tx_hash = Some(token.to_string()),
                _ => {}
            }
            rest.push_str(&text[last..start]);
            rest.push(' ');
            last = end;
        }
        rest.push_str(&text[last..]);
        scan.words = tokenize(&rest.to_lowercase());
        scan.find_chains();
        scan.find_numbers();
        scan
    }

    /// True when any of `words` occurs.
    pub fn has(&self, words: &[&str]) -> bool {
        self.words.iter().any(|w| words.contains(&w.as_str()))
    }

    /// True when the words contain `phrase` (space-separated words) consecutively.
    pub fn has_phrase(&self, phrase: &str) -> bool {
        let parts: Vec<&str> = phrase.split(' ').collect();
        self.words
            .windows(parts.len())
            .any(|w| w.iter().zip(&parts).all(|(a, b)| a == b))
    }

    fn word(&self, i: usize) -> &str {
        self.words.get(i).map_or("", String::as_str)
    }

    fn find_chains(&mut self) {
        let mut i = 0;
        while i < self.words.len() {
            let (chain, used) = self.chain_at(i);
            if let Some(chain) = chain
                && !self.chains.contains(&chain)
            {
                self.chains.push(chain);
            }
            i += used.max(1);
        }
    }

    /// The chain named at word `i`, if any, and how many words the name takes. Registry names are recognised as
    /// written (`base-sepolia` also as `base sepolia` or `basesepolia`); the aliases below map onto them.
    fn chain_at(&self, i: usize) -> (Option<&'static str>, usize) {
        let (word, next) = (self.word(i), self.word(i + 1));
        let previous = if i == 0 { "" } else { self.word(i - 1) };
        let after_number = parse_number(previous).is_some();
        if let Some((chain, used)) = self.multi_word_chain_at(i) {
            return (Some(chain), used);
        }
        let two = match (word, next) {
            ("eth" | "ethereum", "mainnet") => Some("ethereum"),
            ("op" | "optimism", "mainnet") => Some("optimism"),
            ("arbitrum", "one") | ("arb", "one") => Some("arbitrum"),
            ("base", "mainnet" | "chain" | "network") => Some("base"),
            ("polygon", "pos" | "mainnet") => Some("polygon"),
            _ => None,
        };
        if two.is_some() {
            return (two.and_then(registry_name), 2);
        }
        if let Some(chain) = registry::CHAINS
            .iter()
            .find(|c| c.name == word || c.name.replace('-', "") == word)
        {
            let other_meaning = NOT_A_CHAIN_BEFORE
                .iter()
                .any(|(name, followers)| *name == chain.name && followers.contains(&next));
            return (if other_meaning { None } else { Some(chain.name) }, 1);
        }
        let one = match word {
            "mainnet" => Some("ethereum"),
            "op" => Some("optimism"),
            "arb" => Some("arbitrum"),
            "matic" | "pol" if !after_number => Some("polygon"),
            "eth" if CHAIN_PREPOSITIONS.contains(&previous) || matches!(next, "chain" | "network" | "l1") => {
                Some("ethereum")
            }
            _ => None,
        };
        (one.and_then(registry_name), 1)
    }

    /// A registry name of several dash-separated words (the tokenizer splits on dashes) starting at word `i`, the
    /// longest that matches.
    fn multi_word_chain_at(&self, i: usize) -> Option<(&'static str, usize)> {
        registry::CHAINS
            .iter()
            .filter_map(|chain| {
                let parts: Vec<&str> = chain.name.split('-').collect();
                let matches = parts.len() > 1 && parts.iter().enumerate().all(|(k, part)| self.word(i + k) == *part);
                matches.then_some((chain.name, parts.len()))
            })
            .max_by_key(|(_, used)| *used)
    }

    fn find_numbers(&mut self) {
        let mut first_plain = None;
        for (i, word) in self.words.iter().enumerate() {
            let (number, glued) = split_symbol(word);
            let Some(value) = parse_number(number) else { continue };
            if self.count.is_none() && !value.contains('.') {
                self.count = value.parse().ok();
            }
            let symbol = glued.or_else(|| symbol_of(self.word(i + 1)));
            if matches!(self.word(i + 1), "wei" | "gwei") {
                continue;
            }
            if symbol.is_some() {
                self.amount = Some(Amount {
                    value: value.to_string(),
                    symbol,
                });
                return;
            }
            first_plain.get_or_insert_with(|| value.to_string());
        }
        self.amount = first_plain.map(|value| Amount { value, symbol: None });
    }
}

/// Native symbols a user may write after an amount.
fn symbol_of(word: &str) -> Option<&'static str> {
    match word {
        "eth" | "ether" | "ethers" => Some("ETH"),
        "pol" | "matic" => Some("POL"),
        _ => None,
    }
}

/// `0.01eth` -> (`0.01`, ETH); anything else unchanged.
fn split_symbol(word: &str) -> (&str, Option<&'static str>) {
    for suffix in ["ethers", "ether", "eth", "matic", "pol"] {
        if let Some(number) = word.strip_suffix(suffix)
            && parse_number(number).is_some()
        {
            return (number, symbol_of(suffix));
        }
    }
    (word, None)
}

/// A plain non-negative decimal: `1`, `0.01`, `.5`.
pub fn parse_number(word: &str) -> Option<&str> {
    let (int, frac) = word.split_once('.').unwrap_or((word, ""));
    let digits_ok = int.bytes().all(|b| b.is_ascii_digit()) && frac.bytes().all(|b| b.is_ascii_digit());
    (digits_ok && !(int.is_empty() && frac.is_empty()) && !word.ends_with('.')).then_some(word)
}

/// Byte ranges of `0x…` hex tokens that stand alone as words.
fn hex_spans(text: &str) -> Vec<(usize, usize)> {
    let bytes = text.as_bytes();
    let mut spans = Vec::new();
    let mut i = 0;
    while i + 1 < bytes.len() {
        let starts = bytes[i] == b'0' && matches!(bytes[i + 1], b'x' | b'X');
        let boundary = i == 0 || !bytes[i - 1].is_ascii_alphanumeric();
        if starts && boundary {
            let end = i + 2 + bytes[i + 2..].iter().take_while(|b| b.is_ascii_hexdigit()).count();
            let clean_end = bytes.get(end).is_none_or(|b| !b.is_ascii_alphanumeric());
            if end > i + 2 && clean_end {
                spans.push((i, end));
                i = end;
                continue;
            }
        }
        i += 1;
    }
    spans
}

/// Splits lower-cased text into words: separators are whitespace, punctuation, `-`, `_` and `/`;
/// a trailing full stop is dropped, a leading one kept (`.5`).
fn tokenize(text: &str) -> Vec<String> {
    text.split(|c: char| c.is_whitespace() || ",;:!?()[]{}\"'`/_-".contains(c) || c == '\u{2019}')
        .map(|w| w.trim_end_matches('.'))
        .filter(|w| !w.is_empty() && *w != ".")
        .map(str::to_string)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chains(text: &str) -> Vec<&'static str> {
        Scan::new(text).chains
    }

    #[test]
    fn every_registry_chain_is_recognised_by_name() {
        for chain in registry::CHAINS {
            assert_eq!(chains(&format!("balance on {}", chain.name)), [chain.name]);
            assert_eq!(chains(&format!("on {}", chain.name.replace('-', " "))), [chain.name]);
        }
    }

    #[test]
    fn chain_aliases() {
        assert_eq!(chains("balance on Ethereum"), ["ethereum"]);
        assert_eq!(chains("on eth mainnet"), ["ethereum"]);
        assert_eq!(chains("ethereum mainnet please"), ["ethereum"]);
        assert_eq!(chains("what about mainnet?"), ["ethereum"]);
        assert_eq!(chains("gas on eth"), ["ethereum"]);
        assert_eq!(chains("base chain"), ["base"]);
        assert_eq!(chains("on Base mainnet"), ["base"]);
        assert_eq!(chains("on OP"), ["optimism"]);
        assert_eq!(chains("op mainnet"), ["optimism"]);
        assert_eq!(chains("optimism"), ["optimism"]);
        assert_eq!(chains("arb"), ["arbitrum"]);
        assert_eq!(chains("Arbitrum One"), ["arbitrum"]);
        assert_eq!(chains("on matic"), ["polygon"]);
        assert_eq!(chains("pol network"), ["polygon"]);
        assert_eq!(chains("polygon"), ["polygon"]);
        assert_eq!(chains("sepolia"), ["sepolia"]);
        assert_eq!(chains("on base sepolia"), ["base-sepolia"]);
        assert_eq!(chains("on Base-Sepolia."), ["base-sepolia"]);
        assert_eq!(chains("base_sepolia"), ["base-sepolia"]);
        assert_eq!(chains("base and optimism, then base"), ["base", "optimism"]);
    }

    #[test]
    fn symbols_and_other_words_are_not_chains() {
        assert!(chains("send 0.01 ETH to me").is_empty());
        assert!(chains("my eth balance").is_empty());
        assert!(chains("send 2 POL").is_empty());
        assert!(chains("what is the base fee").is_empty());
        assert!(chains("database").is_empty());
        assert_eq!(chains("send 0.01 eth on eth"), ["ethereum"]);
    }

    #[test]
    fn amounts() {
        let amount = |t: &str| Scan::new(t).amount.map(|a| (a.value, a.symbol));
        assert_eq!(amount("send 0.01 ETH"), Some(("0.01".into(), Some("ETH"))));
        assert_eq!(amount("send .5 eth to x"), Some((".5".into(), Some("ETH"))));
        assert_eq!(amount("send 1 to bob"), Some(("1".into(), None)));
        assert_eq!(amount("send 0.010eth"), Some(("0.010".into(), Some("ETH"))));
        assert_eq!(amount("send 3 MATIC"), Some(("3".into(), Some("POL"))));
        assert_eq!(amount("pay 2.5 pol."), Some(("2.5".into(), Some("POL"))));
        assert_eq!(amount("in 2 days send 0.3 eth"), Some(("0.3".into(), Some("ETH"))));
        assert_eq!(amount("send 1000 wei"), None);
        assert_eq!(amount("send 1.2.3 eth"), None);
        assert_eq!(amount("send eth"), None);
        assert_eq!(Scan::new("last 5 transactions").count, Some(5));
    }

    #[test]
    fn addresses_and_hashes() {
        let addr = "0x52908400098527886E0F7030069857D2E4169EE7";
        let hash = format!("0x{}", "ab".repeat(32));
        let scan = Scan::new(&format!("send 0.1 eth to {addr}, then status of {hash}?"));
        assert_eq!(scan.address.as_deref(), Some(addr));
        assert_eq!(scan.tx_hash.as_deref(), Some(hash.as_str()));
        assert!(!scan.words.iter().any(|w| w.starts_with("0x")));
        assert_eq!(scan.amount.map(|a| a.value).as_deref(), Some("0.1"));
        // Wrong lengths and glued tokens are not addresses.
        assert_eq!(
            Scan::new("0x1234 and 0x52908400098527886E0F7030069857D2E4169EE7Z").address,
            None
        );
        assert_eq!(Scan::new("x0x52908400098527886E0F7030069857D2E4169EE7").address, None);
        assert_eq!(Scan::new(&format!("({addr})")).address.as_deref(), Some(addr));
    }
}
