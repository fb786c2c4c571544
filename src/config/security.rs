//! The `security` section: keys, tokens and the limits around them (the master key, the admin token, the PKCS#11
//! key backend, the public URL owners sign in to).

use std::num::NonZeroU32;
use std::path::PathBuf;

use secrecy::{ExposeSecret, SecretBox, SecretString};

use super::vars::Vars;
use super::{AppEnv, ConfigError, invalid};

/// The 32-byte master key that encrypts wallet keys at rest.
pub type EncryptionKey = SecretBox<[u8; 32]>;

/// Keys, tokens and the limits around them.
#[derive(Debug)]
pub struct SecurityConfig {
    /// `None` in development means "generate or reuse the key file in `data_dir`".
    pub encryption_key: Option<EncryptionKey>,
    pub disable_agent_auth: bool,
    pub admin_token: Option<SecretString>,
    pub allow_key_export: bool,
    /// `KEY_BACKEND=pkcs11` (§20): the token new agents' keys are generated and signed in; `None`: `local`.
    pub pkcs11: Option<Pkcs11Config>,
    pub challenge_prefix: String,
    /// `PUBLIC_URL`: the service's public origin; its host is the Sign-In with Ethereum domain of owner challenges.
    pub public_url: Option<PublicUrl>,
    /// Failed proofs a minute per agent, reissue and owner session together.
    pub reissue_limit_per_agent: NonZeroU32,
    /// Requests a minute per client address on each reissue and owner-session endpoint.
    pub reissue_limit_per_ip: NonZeroU32,
}

/// The service's public origin (`PUBLIC_URL`), split into what Sign-In with Ethereum messages name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PublicUrl {
    /// `scheme://authority`, without a trailing slash.
    pub origin: String,
    /// The authority (host, and port when not the scheme's default): the EIP-4361 `domain`.
    pub host: String,
}

impl PublicUrl {
    fn parse(text: &str) -> Result<Self, ConfigError> {
        let url = reqwest::Url::parse(text.trim()).map_err(|e| invalid("PUBLIC_URL", e.to_string()))?;
        let host = match (url.host_str(), url.scheme()) {
            (Some(host), "http" | "https") => host,
            _ => return Err(invalid("PUBLIC_URL", "must be an http or https URL with a host")),
        };
        if !url.username().is_empty() || url.password().is_some() {
            return Err(invalid("PUBLIC_URL", "must not hold credentials"));
        }
        let host = match url.port() {
            Some(port) => format!("{host}:{port}"),
            None => host.to_string(),
        };
        Ok(PublicUrl {
            origin: format!("{}://{host}", url.scheme()),
            host,
        })
    }
}

impl SecurityConfig {
    pub(super) fn read(vars: &Vars, app_env: AppEnv) -> Result<Self, ConfigError> {
        let encryption_key = vars
            .secret("ENCRYPTION_KEY")?
            .map(|k| parse_encryption_key(k.expose_secret()))
            .transpose()?;
        let disable_agent_auth = vars.flag("DISABLE_AGENT_AUTH", false)?;
        if app_env == AppEnv::Production {
            if encryption_key.is_none() {
                return Err(ConfigError::Refused(
                    "ENCRYPTION_KEY is required when APP_ENV=production",
                ));
            }
            if disable_agent_auth {
                return Err(ConfigError::Refused(
                    "DISABLE_AGENT_AUTH=true is refused when APP_ENV=production",
                ));
            }
        }
        let admin_token = vars.admin_token()?;
        if app_env == AppEnv::Production && admin_token.is_none() {
            return Err(ConfigError::Refused(
                "ADMIN_TOKEN or ADMIN_TOKEN_FILE is required when APP_ENV=production",
            ));
        }
        let public_url = vars.get("PUBLIC_URL").map(|u| PublicUrl::parse(&u)).transpose()?;
        // Without it the sign-in domain would come from each request's `Host`, which a phishing page can choose.
        if app_env == AppEnv::Production && public_url.is_none() {
            return Err(ConfigError::Refused(
                "PUBLIC_URL is required when APP_ENV=production (the Sign-In with Ethereum domain never comes from a request's Host)",
            ));
        }
        let challenge_prefix = vars.get("CHALLENGE_PREFIX").unwrap_or_else(|| "agentd".into());
        if challenge_prefix.contains(':') || challenge_prefix.len() > 64 {
            return Err(invalid(
                "CHALLENGE_PREFIX",
                "must not contain ':' and be at most 64 characters",
            ));
        }
        Ok(SecurityConfig {
            encryption_key,
            disable_agent_auth,
            admin_token,
            allow_key_export: vars.flag("ALLOW_KEY_EXPORT", true)?,
            pkcs11: vars.key_backend()?,
            challenge_prefix,
            public_url,
            reissue_limit_per_agent: vars.positive("REISSUE_LIMIT_PER_AGENT", 10)?,
            reissue_limit_per_ip: vars.positive("REISSUE_LIMIT_PER_IP", 100)?,
        })
    }
}

impl Vars {
    /// `ADMIN_TOKEN`, or the contents of `ADMIN_TOKEN_FILE` (`ADMIN_TOKEN` wins). Set but blank, or a blank or
    /// unreadable file, is refused: read as unset it would silently open the admin endpoints.
    pub(super) fn admin_token(&self) -> Result<Option<SecretString>, ConfigError> {
        let token = match (self.0.get("ADMIN_TOKEN"), self.0.get("ADMIN_TOKEN_FILE")) {
            (Some(token), _) => {
                if token.trim().is_empty() {
                    return Err(ConfigError::Refused(
                        "ADMIN_TOKEN is set but empty: set a token, or unset it (development only)",
                    ));
                }
                token.trim().to_string()
            }
            (None, Some(path)) => {
                let token = std::fs::read_to_string(path.trim()).map_err(|source| ConfigError::File {
                    var: "ADMIN_TOKEN_FILE",
                    source,
                })?;
                if token.trim().is_empty() {
                    return Err(ConfigError::Refused("ADMIN_TOKEN_FILE is set but names an empty file"));
                }
                token.trim().to_string()
            }
            (None, None) => return Ok(None),
        };
        Ok(Some(SecretString::from(token)))
    }

    /// `KEY_BACKEND` (`local` or `pkcs11`) and, for `pkcs11`, the module, the token's label and the PIN
    /// (`PKCS11_PIN` wins over `PKCS11_PIN_FILE`; set but empty, or an empty file, is refused).
    fn key_backend(&self) -> Result<Option<Pkcs11Config>, ConfigError> {
        match self.get("KEY_BACKEND").map(|v| v.to_ascii_lowercase()).as_deref() {
            None | Some("local") => return Ok(None),
            Some("pkcs11") => {}
            Some(_) => return Err(invalid("KEY_BACKEND", "must be local or pkcs11")),
        }
        let module = self.get("PKCS11_MODULE").ok_or(ConfigError::Refused(
            "KEY_BACKEND=pkcs11 needs PKCS11_MODULE (the module's path)",
        ))?;
        let token_label = self
            .get("PKCS11_TOKEN_LABEL")
            .ok_or(ConfigError::Refused("KEY_BACKEND=pkcs11 needs PKCS11_TOKEN_LABEL"))?;
        let pin = match (self.0.get("PKCS11_PIN"), self.0.get("PKCS11_PIN_FILE")) {
            (Some(pin), _) => {
                if pin.trim().is_empty() {
                    return Err(ConfigError::Refused("PKCS11_PIN is set but empty"));
                }
                pin.trim().to_string()
            }
            (None, Some(path)) => {
                let pin = std::fs::read_to_string(path.trim()).map_err(|source| ConfigError::File {
                    var: "PKCS11_PIN_FILE",
                    source,
                })?;
                if pin.trim().is_empty() {
                    return Err(ConfigError::Refused("PKCS11_PIN_FILE is set but names an empty file"));
                }
                pin.trim().to_string()
            }
            (None, None) => {
                return Err(ConfigError::Refused(
                    "KEY_BACKEND=pkcs11 needs the user PIN in PKCS11_PIN or PKCS11_PIN_FILE",
                ));
            }
        };
        Ok(Some(Pkcs11Config {
            module: PathBuf::from(module),
            token_label,
            pin: SecretString::from(pin),
        }))
    }
}

/// Accepts 64 hex characters or standard/url-safe base64 of exactly 32 bytes.
pub fn parse_encryption_key(text: &str) -> Result<EncryptionKey, ConfigError> {
    parse_key("ENCRYPTION_KEY", text)
}

/// The key `agentd rotate-key` moves the wallet keys to: `--new-key` when given, else `NEW_ENCRYPTION_KEY`, else the
/// file named by `NEW_ENCRYPTION_KEY_FILE` (read from the environment and `.env`).
pub fn new_encryption_key(flag: Option<&str>) -> Result<EncryptionKey, ConfigError> {
    let _ = dotenvy::dotenv();
    if let Some(text) = flag {
        return parse_key("--new-key", text);
    }
    let vars = Vars(std::env::vars().collect());
    match vars.secret("NEW_ENCRYPTION_KEY")? {
        Some(text) => parse_key("NEW_ENCRYPTION_KEY", text.expose_secret()),
        None => Err(ConfigError::Refused(
            "rotate-key needs the new key in NEW_ENCRYPTION_KEY, NEW_ENCRYPTION_KEY_FILE or --new-key",
        )),
    }
}

fn parse_key(var: &'static str, text: &str) -> Result<EncryptionKey, ConfigError> {
    use base64::Engine;
    let text = text.trim();
    let text = text.strip_prefix("0x").unwrap_or(text);
    let bytes = if text.len() == 64 && text.bytes().all(|b| b.is_ascii_hexdigit()) {
        alloy::hex::decode(text).ok()
    } else {
        let engines = [
            &base64::engine::general_purpose::STANDARD,
            &base64::engine::general_purpose::URL_SAFE,
            &base64::engine::general_purpose::STANDARD_NO_PAD,
            &base64::engine::general_purpose::URL_SAFE_NO_PAD,
        ];
        engines.iter().find_map(|e| e.decode(text).ok())
    };
    let mut bytes = bytes
        .filter(|b| b.len() == 32)
        .ok_or_else(|| invalid(var, "must be 32 bytes as 64 hex characters or base64"))?;
    let mut key = [0u8; 32];
    key.copy_from_slice(&bytes);
    zeroize::Zeroize::zeroize(&mut bytes);
    Ok(SecretBox::new(Box::new(key)))
}

/// Where the token is: `PKCS11_MODULE`, `PKCS11_TOKEN_LABEL`, and the user PIN (`PKCS11_PIN` or `PKCS11_PIN_FILE`).
pub struct Pkcs11Config {
    pub module: PathBuf,
    pub token_label: String,
    pub pin: SecretString,
}

impl std::fmt::Debug for Pkcs11Config {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pkcs11Config")
            .field("module", &self.module)
            .field("token_label", &self.token_label)
            .finish_non_exhaustive()
    }
}
