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
    /// Every `0x` + 40 hex address, as written and in order, with where it stands among `words`.
    pub addresses: Vec<Mention>,
    /// `0x…` tokens that are neither an address nor a hash (a mistyped address).
    pub malformed_hex: Vec<String>,
    /// The first `0x` + 64 hex transaction hash, as written.
    pub tx_hash: Option<String>,
    /// Every number, in order, with the unit written after it (or glued to it).
    pub amounts: Vec<Amount>,
    /// Words that start like a number but are not one (`-0.01`, `1e18`, `2nd`).
    pub unreadable: Vec<String>,
    /// Words that may name an asset without being an amount's unit: currency words and upper-case tickers.
    pub asset_words: Vec<String>,
    /// The first whole number (e.g. "last 5 transactions").
    pub count: Option<u32>,
    /// Whether the text holds a question mark anywhere.
    pub question_mark: bool,
}

/// A `0x` address in the text; `at` is the number of words before it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mention {
    pub text: String,
    pub at: usize,
}

/// A decimal amount kept exactly as the user wrote it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Amount {
    pub value: String,
    /// The lower-cased word after the number (or glued to it: `0.01eth`), when it can be a unit; `usd` for `$5`.
    pub unit: Option<String>,
}

impl Amount {
    /// The canonical symbol the unit names (`ether` and `eth` are `ETH`, `matic` is `POL`), upper-cased otherwise.
    pub fn symbol(&self) -> Option<String> {
        self.unit.as_deref().map(symbol_of)
    }

    /// Whether the unit is a fraction of a coin (wei, gwei), which the engine does not take as an amount.
    pub fn is_subunit(&self) -> bool {
        matches!(self.unit.as_deref(), Some("wei" | "gwei"))
    }
}

/// Words after a number that are not its unit.
const NOT_A_UNIT: &[&str] = &[
    "to", "on", "in", "at", "for", "from", "of", "via", "using", "please", "now", "and", "or", "then", "with", "into",
    "onto", "over", "across", "the", "a", "an", "my", "me", "your", "it", "this", "that", "each", "per", "back", "as",
    "by", "if", "so", "but", "right", "today", "again", "only", "just", "ok", "okay",
];

/// Words that name a currency or token anywhere in a message (in any case).
const CURRENCY_WORDS: &[&str] = &[
    "usd",
    "usdc",
    "usdt",
    "dai",
    "weth",
    "wbtc",
    "btc",
    "bitcoin",
    "dollar",
    "dollars",
    "euro",
    "euros",
    "eur",
    "token",
    "tokens",
    "stablecoin",
    "stablecoins",
];

/// Upper-case words that are not tickers (a shouted "OK" or "NOT").
const NOT_A_TICKER: &[&str] = &[
    "ok", "okay", "now", "please", "pls", "send", "transfer", "pay", "to", "on", "in", "not", "do", "dont", "never",
    "no", "me", "my", "i", "it", "and", "or", "the", "asap", "fyi", "btw", "thx", "hi", "hey", "id", "tx",
];

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
        let mut scan = Scan {
            question_mark: text.contains('?'),
            ..Scan::default()
        };
        let mut raw_words = Vec::new();
        let mut last = 0;
        for (start, end) in hex_spans(text) {
            raw_words.extend(tokenize(&text[last..start]));
            let token = &text[start..end];
            match end - start - 2 {
                40 => scan.addresses.push(Mention {
                    text: token.to_string(),
                    at: raw_words.len(),
                }),
                64 if scan.tx_hash.is_none() => scan.tx_hash = Some(token.to_string()),
                64 => {}
                _ => scan.malformed_hex.push(token.to_string()),
            }
            last = end;
        }
        raw_words.extend(tokenize(&text[last..]));
        scan.address = scan.addresses.first().map(|m| m.text.clone());
        scan.words = raw_words.iter().map(|w| w.to_lowercase()).collect();
        // A glued or prefixed `0x…` that `hex_spans` did not take is a mistyped address, not a word.
        scan.malformed_hex
            .extend(scan.words.iter().filter(|w| glued_hex(w)).cloned());
        scan.find_chains();
        scan.find_numbers();
        scan.find_asset_words(&raw_words);
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
        for (i, word) in self.words.iter().enumerate() {
            let starts_like_number = word
                .trim_start_matches(['-', '+', '$', '.'])
                .starts_with(|c: char| c.is_ascii_digit());
            if !starts_like_number {
                continue;
            }
            let Some((value, glued)) = split_unit(word) else {
                self.unreadable.push(word.clone());
                continue;
            };
            if self.count.is_none() && !value.contains('.') {
                self.count = value.parse().ok();
            }
            let next = self.word(i + 1);
            let unit = glued.or_else(|| is_unit_word(next).then(|| next.to_string()));
            self.amounts.push(Amount {
                value: value.to_string(),
                unit,
            });
        }
    }

    /// Currency words anywhere, and upper-case tickers in a message that is not shouted as a whole.
    fn find_asset_words(&mut self, raw_words: &[String]) {
        let units: Vec<usize> = (0..self.words.len())
            .filter(|&i| i > 0 && split_unit(self.word(i - 1)).is_some_and(|(_, glued)| glued.is_none()))
            .filter(|&i| is_unit_word(self.word(i)))
            .collect();
        let shouted = !raw_words.iter().any(|w| w.chars().any(|c| c.is_lowercase()));
        for (i, (raw, word)) in raw_words.iter().zip(&self.words).enumerate() {
            if units.contains(&i) {
                continue;
            }
            let ticker = !shouted
                && (2..=10).contains(&raw.len())
                && raw.chars().all(|c| c.is_ascii_uppercase() || c.is_ascii_digit())
                && raw.chars().any(|c| c.is_ascii_uppercase())
                && !NOT_A_TICKER.contains(&word.as_str())
                && registry::find(word).is_none();
            if ticker || CURRENCY_WORDS.contains(&word.as_str()) {
                self.asset_words.push(word.clone());
            }
        }
    }
}

/// Whether a word holds `0x` and a hex digit (`x0x5290…`, `0x5290…z`): what is left of a mistyped address.
fn glued_hex(word: &str) -> bool {
    word.match_indices("0x")
        .any(|(i, _)| word[i + 2..].starts_with(|c: char| c.is_ascii_hexdigit()))
}

/// Whether the word after a number can be its unit: a short word with a letter that is no preposition or filler.
fn is_unit_word(word: &str) -> bool {
    (1..=11).contains(&word.len())
        && word.chars().all(|c| c.is_ascii_alphanumeric())
        && word.chars().any(|c| c.is_ascii_alphabetic())
        && !NOT_A_UNIT.contains(&word)
}

/// The canonical symbol of a unit or currency word: aliases of the native coins, `$` words as `USD`, any other
/// word upper-cased (an unknown symbol stays unknown: the asset registry decides).
pub fn symbol_of(word: &str) -> String {
    match word {
        "eth" | "ether" | "ethers" => "ETH".into(),
        "pol" | "matic" => "POL".into(),
        "usd" | "dollar" | "dollars" => "USD".into(),
        "euro" | "euros" | "eur" => "EUR".into(),
        other => other.to_ascii_uppercase(),
    }
}

/// `0.01` -> (`0.01`, None); `0.01eth` -> (`0.01`, `eth`); `$5` -> (`5`, `usd`); `None` when it is no number.
fn split_unit(word: &str) -> Option<(&str, Option<String>)> {
    if let Some(rest) = word.strip_prefix('$').or_else(|| word.strip_suffix('$')) {
        return parse_number(rest).map(|n| (n, Some("usd".to_string())));
    }
    let digits = word
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(word.len());
    let (number, suffix) = word.split_at(digits);
    let number = parse_number(number)?;
    match suffix {
        "" => Some((number, None)),
        unit if unit.chars().all(|c| c.is_ascii_alphabetic()) => Some((number, Some(unit.to_string()))),
        _ => None,
    }
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

/// Splits text into words: separators are whitespace, punctuation (any outside ASCII), `-`, `_` and `/`, except that a `-` or `+` that
/// starts a word before a digit stays (`-0.01` must not read as `0.01`); a trailing full stop is dropped, a leading
/// one kept (`.5`).
fn tokenize(text: &str) -> Vec<String> {
    // Beyond ASCII, every character that is not a letter or a digit separates: typographic apostrophes (`don’t`,
    // `don‘t`, `donʼt`), quotes, dashes and ellipses must split words as their ASCII forms do, or a negation written
    // with them would not be read as one.
    let separator =
        |c: char| c.is_whitespace() || ",;:!?()[]{}\"'`/_-".contains(c) || (!c.is_ascii() && !c.is_alphanumeric());
    let mut words = Vec::new();
    let mut word = String::new();
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        let signed_number =
            matches!(c, '-' | '+') && word.is_empty() && chars.peek().is_some_and(|n| n.is_ascii_digit() || *n == '.');
        if separator(c) && !signed_number {
            words.push(std::mem::take(&mut word));
        } else {
            word.push(c);
        }
    }
    words.push(word);
    words
        .iter()
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

    fn amounts(text: &str) -> Vec<(String, Option<String>)> {
        Scan::new(text)
            .amounts
            .into_iter()
            .map(|a| {
                let symbol = a.symbol();
                (a.value, symbol)
            })
            .collect()
    }

    fn one(value: &str, symbol: Option<&str>) -> Vec<(String, Option<String>)> {
        vec![(value.to_string(), symbol.map(str::to_string))]
    }

    #[test]
    fn amounts_and_their_units() {
        assert_eq!(amounts("send 0.01 ETH"), one("0.01", Some("ETH")));
        assert_eq!(amounts("send .5 eth to x"), one(".5", Some("ETH")));
        assert_eq!(amounts("send 1 to bob"), one("1", None));
        assert_eq!(amounts("send 0.010eth"), one("0.010", Some("ETH")));
        assert_eq!(amounts("send 3 MATIC"), one("3", Some("POL")));
        assert_eq!(amounts("pay 2.5 pol."), one("2.5", Some("POL")));
        assert_eq!(amounts("send 0.02 USDC to x"), one("0.02", Some("USDC")));
        assert_eq!(amounts("send 2.5 TST"), one("2.5", Some("TST")));
        assert_eq!(amounts("send $5 to x"), one("5", Some("USD")));
        assert_eq!(amounts("send 0.1 on base"), one("0.1", None));
        assert!(Scan::new("send 1000 wei").amounts[0].is_subunit());
        assert_eq!(
            amounts("in 2 days send 0.3 eth"),
            [
                ("2".to_string(), Some("DAYS".to_string())),
                ("0.3".to_string(), Some("ETH".to_string()))
            ]
        );
        assert_eq!(amounts("send eth"), []);
        assert_eq!(Scan::new("last 5 transactions").count, Some(5));
    }

    #[test]
    fn numbers_that_are_not_plain_amounts_are_unreadable() {
        for (text, word) in [
            ("send 1.2.3 eth", "1.2.3"),
            ("send -0.01 ETH", "-0.01"),
            ("send +1 ETH", "+1"),
            ("send 1e18 wei", "1e18"),
            ("send 2x3 ETH", "2x3"),
        ] {
            let scan = Scan::new(text);
            assert_eq!(scan.unreadable, [word], "{text}");
            assert!(scan.amounts.is_empty(), "{text}");
        }
        // A dash between words or numbers still separates them.
        assert_eq!(amounts("0.01-0.02").len(), 2);
        assert_eq!(chains("on base-sepolia"), ["base-sepolia"]);
    }

    #[test]
    fn asset_words_outside_amounts() {
        assert_eq!(Scan::new("send 5 to x in USDC").asset_words, ["usdc"]);
        assert_eq!(Scan::new("send 5 dollars").asset_words, Vec::<String>::new());
        assert_eq!(Scan::new("send 5 to x, in dollars").asset_words, ["dollars"]);
        assert_eq!(
            Scan::new("OK send 0.1 ETH to x on base").asset_words,
            Vec::<String>::new()
        );
        assert_eq!(Scan::new("send 0.1 to x, the ETH one").asset_words, ["eth"]);
        assert_eq!(Scan::new("SEND 0.1 ETH TO X ON BASE").asset_words, Vec::<String>::new());
    }

    #[test]
    fn addresses_and_hashes() {
        let addr = "0x52908400098527886E0F7030069857D2E4169EE7";
        let hash = format!("0x{}", "ab".repeat(32));
        let scan = Scan::new(&format!("send 0.1 eth to {addr}, then status of {hash}?"));
        assert_eq!(scan.address.as_deref(), Some(addr));
        assert_eq!(scan.tx_hash.as_deref(), Some(hash.as_str()));
        assert!(!scan.words.iter().any(|w| w.starts_with("0x")));
        assert_eq!(scan.amounts[0].value, "0.1");
        assert_eq!(
            scan.addresses,
            [Mention {
                text: addr.into(),
                at: 4
            }]
        );
        // Wrong lengths and glued tokens are not addresses.
        assert_eq!(
            Scan::new("0x1234 and 0x52908400098527886E0F7030069857D2E4169EE7Z").address,
            None
        );
        assert_eq!(Scan::new("x0x52908400098527886E0F7030069857D2E4169EE7").address, None);
        let typo = Scan::new("send 1 ETH to 0x1234 or x0x52908400098527886E0F7030069857D2E4169EE7");
        assert_eq!(
            typo.malformed_hex,
            ["0x1234", "x0x52908400098527886e0f7030069857d2e4169ee7"]
        );
        assert_eq!(Scan::new(&format!("({addr})")).address.as_deref(), Some(addr));
    }
}
