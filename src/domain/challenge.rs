//! Reissue challenges: `<prefix>:reissue:<agent_id>:<nonce>:<expires_at_unix>`.

use uuid::Uuid;

/// How long a challenge can be used.
pub const LIFETIME_SECS: i64 = 300;

/// The parts of a challenge message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParsedChallenge {
    pub agent_id: Uuid,
    pub nonce: String,
    pub expires_at_unix: i64,
}

/// Builds the canonical message.
pub fn message(prefix: &str, agent_id: Uuid, nonce: &str, expires_at_unix: i64) -> String {
    format!("{prefix}:reissue:{agent_id}:{nonce}:{expires_at_unix}")
}

/// Parses a message of the `prefix:reissue:…` shape; `None` when it is not of that shape.
pub fn parse(prefix: &str, text: &str) -> Option<ParsedChallenge> {
    let rest = text.strip_prefix(prefix)?.strip_prefix(":reissue:")?;
    let mut parts = rest.split(':');
    let (agent, nonce, expires) = (parts.next()?, parts.next()?, parts.next()?);
    if parts.next().is_some() || nonce.is_empty() || nonce.len() > 128 {
        return None;
    }
    if !nonce.bytes().all(|b| b.is_ascii_alphanumeric()) || !expires.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    Some(ParsedChallenge {
        agent_id: Uuid::parse_str(agent).ok()?,
        nonce: nonce.to_string(),
        expires_at_unix: expires.parse().ok()?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_built_message_parses_back() {
        let id = Uuid::new_v4();
        let text = message("agentd", id, "ab12", 1_700_000_000);
        assert_eq!(
            parse("agentd", &text),
            Some(ParsedChallenge {
                agent_id: id,
                nonce: "ab12".into(),
                expires_at_unix: 1_700_000_000
            })
        );
    }

    #[test]
    fn other_shapes_are_refused() {
        let id = Uuid::new_v4();
        assert_eq!(parse("agentd", &format!("other:reissue:{id}:ab:1")), None);
        assert_eq!(parse("agentd", &format!("agentd:login:{id}:ab:1")), None);
        assert_eq!(parse("agentd", "agentd:reissue:not-a-uuid:ab:1"), None);
        assert_eq!(parse("agentd", &format!("agentd:reissue:{id}:ab:1:extra")), None);
        assert_eq!(parse("agentd", &format!("agentd:reissue:{id}:ab:soon")), None);
        assert_eq!(parse("agentd", &format!("agentd:reissue:{id}::1")), None);
    }
}
