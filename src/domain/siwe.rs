//! Sign-In with Ethereum (EIP-4361) messages for owner sessions: built from their fields and parsed back, as plain
//! text. The service only ever accepts the exact message it issued (compared with the stored challenge), so parsing
//! is there to tell a malformed message (400) from an unknown or altered one (401), and to find its nonce.
//!
//! The layout follows the EIP's ABNF: a blank line after the address, the statement (optional) followed by a blank
//! line, then one `Key: value` line per field, with no newline after the last one.

use alloy::primitives::Address;
use chrono::{DateTime, SecondsFormat, Utc};

/// How long an owner challenge can be used.
pub const CHALLENGE_LIFETIME_SECS: i64 = 300;
/// How long an owner session lasts.
pub const SESSION_LIFETIME_SECS: i64 = 900;

const HEADER_SUFFIX: &str = " wants you to sign in with your Ethereum account:";

/// The fields of a Sign-In with Ethereum message that agentd issues and reads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SiweMessage {
    /// RFC 3986 authority (host, optionally with a port) asking for the signature.
    pub domain: String,
    pub address: Address,
    pub statement: Option<String>,
    pub uri: String,
    pub chain_id: u64,
    /// At least 8 alphanumeric characters.
    pub nonce: String,
    pub issued_at: DateTime<Utc>,
    pub expiration_time: Option<DateTime<Utc>>,
}

impl SiweMessage {
    /// The message text, with the address in its EIP-55 checksum form.
    pub fn to_text(&self) -> String {
        let mut text = format!("{}{HEADER_SUFFIX}\n{}\n\n", self.domain, self.address.to_checksum(None));
        if let Some(statement) = &self.statement {
            text.push_str(statement);
            text.push('\n');
        }
        text.push('\n');
        text.push_str(&format!(
            "URI: {}\nVersion: 1\nChain ID: {}\nNonce: {}\nIssued At: {}",
            self.uri,
            self.chain_id,
            self.nonce,
            timestamp(self.issued_at)
        ));
        if let Some(expiration) = self.expiration_time {
            text.push_str(&format!("\nExpiration Time: {}", timestamp(expiration)));
        }
        text
    }

    /// Parses a message of the EIP-4361 shape; `None` when it is not one (unknown or missing fields, a bad
    /// address, checksum, nonce or timestamp). Optional fields agentd never issues (Not Before, Request ID,
    /// Resources) are refused as well: the message must be one agentd could have issued.
    pub fn parse(text: &str) -> Option<SiweMessage> {
        let mut lines = text.split('\n');
        let domain = lines.next()?.strip_suffix(HEADER_SUFFIX)?;
        if domain.is_empty() || domain.contains(char::is_whitespace) {
            return None;
        }
        let address = parse_address(lines.next()?)?;
        if !lines.next()?.is_empty() {
            return None;
        }
        let statement = match lines.next()? {
            "" => None,
            statement => {
                if !lines.next()?.is_empty() {
                    return None;
                }
                Some(statement.to_string())
            }
        };
        let uri = field(lines.next()?, "URI")?;
        if field(lines.next()?, "Version")? != "1" {
            return None;
        }
        let chain_id = field(lines.next()?, "Chain ID")?.parse().ok()?;
        let nonce = field(lines.next()?, "Nonce")?;
        if nonce.len() < 8 || nonce.len() > 128 || !nonce.bytes().all(|b| b.is_ascii_alphanumeric()) {
            return None;
        }
        let issued_at = parse_time(field(lines.next()?, "Issued At")?)?;
        let expiration_time = match lines.next() {
            None => None,
            Some(line) => Some(parse_time(field(line, "Expiration Time")?)?),
        };
        if lines.next().is_some() || uri.is_empty() {
            return None;
        }
        Some(SiweMessage {
            domain: domain.to_string(),
            address,
            statement,
            uri: uri.to_string(),
            chain_id,
            nonce: nonce.to_string(),
            issued_at,
            expiration_time,
        })
    }
}

/// RFC 3339 in UTC with millisecond precision, as wallets and libraries print it.
fn timestamp(at: DateTime<Utc>) -> String {
    at.to_rfc3339_opts(SecondsFormat::Millis, true)
}

fn field<'a>(line: &'a str, name: &str) -> Option<&'a str> {
    line.strip_prefix(name)?.strip_prefix(": ")
}

fn parse_time(text: &str) -> Option<DateTime<Utc>> {
    DateTime::parse_from_rfc3339(text).ok().map(|t| t.with_timezone(&Utc))
}

/// A 0x address in its EIP-55 form (the EIP requires the checksum).
fn parse_address(text: &str) -> Option<Address> {
    let address: Address = text.parse().ok()?;
    (address.to_checksum(None) == text).then_some(address)
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    fn sample() -> SiweMessage {
        SiweMessage {
            domain: "wallet.example.com".into(),
            address: "0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAed".parse().unwrap(),
            statement: Some("Sign in as an owner of agent 1b4e28ba-2fa1-11d2-883f-0016d3cca427.".into()),
            uri: "https://wallet.example.com/api/agents/1b4e28ba-2fa1-11d2-883f-0016d3cca427".into(),
            chain_id: 8453,
            nonce: "0123456789abcdef".into(),
            issued_at: Utc.with_ymd_and_hms(2026, 11, 23, 10, 0, 0).unwrap(),
            expiration_time: Some(Utc.with_ymd_and_hms(2026, 11, 23, 10, 5, 0).unwrap()),
        }
    }

    #[test]
    fn the_message_has_the_eip_4361_layout() {
        let expected = "wallet.example.com wants you to sign in with your Ethereum account:\n\
            0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAed\n\
            \n\
            Sign in as an owner of agent 1b4e28ba-2fa1-11d2-883f-0016d3cca427.\n\
            \n\
            URI: https://wallet.example.com/api/agents/1b4e28ba-2fa1-11d2-883f-0016d3cca427\n\
            Version: 1\n\
            Chain ID: 8453\n\
            Nonce: 0123456789abcdef\n\
            Issued At: 2026-11-23T10:00:00.000Z\n\
            Expiration Time: 2026-11-23T10:05:00.000Z";
        assert_eq!(sample().to_text(), expected);
    }

    #[test]
    fn a_message_without_statement_keeps_both_blank_lines() {
        let message = SiweMessage {
            statement: None,
            expiration_time: None,
            ..sample()
        };
        let text = message.to_text();
        assert!(text.contains("BeAed\n\n\nURI: "), "{text}");
        assert!(text.ends_with("Issued At: 2026-11-23T10:00:00.000Z"));
        assert_eq!(SiweMessage::parse(&text), Some(message));
    }

    #[test]
    fn a_built_message_parses_back_to_its_fields() {
        assert_eq!(SiweMessage::parse(&sample().to_text()), Some(sample()));
    }

    #[test]
    fn malformed_messages_are_refused() {
        let text = sample().to_text();
        let cases = [
            text.replace(
                "0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAed",
                "0x5aaeb6053f3e94c9b9a09f33669435e7ef1beaed",
            ),
            text.replace("Version: 1", "Version: 2"),
            text.replace("Nonce: 0123456789abcdef", "Nonce: short"),
            text.replace("Chain ID: 8453", "Chain ID: base"),
            text.replace("\n\nURI", "\nURI"),
            text.replace("Issued At: 2026-11-23T10:00:00.000Z", "Issued At: yesterday"),
            format!("{text}\n"),
            format!("{text}\nRequest ID: 1"),
            "agentd:reissue:1b4e28ba-2fa1-11d2-883f-0016d3cca427:ab:1".to_string(),
            String::new(),
        ];
        for case in cases {
            assert_eq!(SiweMessage::parse(&case), None, "{case:?}");
        }
    }
}
