//! The variables a configuration is read from, and the typed reads every section shares.

use std::collections::HashMap;
use std::num::NonZeroU32;

use secrecy::SecretString;

use super::{ConfigError, invalid};

/// The variables as given; a blank value counts as unset, except where a blank secret must be refused.
pub(super) struct Vars(pub(super) HashMap<String, String>);

impl Vars {
    pub(super) fn get(&self, name: &str) -> Option<String> {
        self.0.get(name).map(|v| v.trim().to_string()).filter(|v| !v.is_empty())
    }

    /// Like `get`, but a variable set to nothing (or to `none`) is `Some("")`: for settings whose default is
    /// something, so that an operator can turn it off.
    pub(super) fn get_or_off(&self, name: &str) -> Option<String> {
        let value = self.0.get(name)?.trim();
        Some(if value.eq_ignore_ascii_case("none") { "" } else { value }.to_string())
    }

    /// A secret from `NAME`, or from the file named by `NAME_FILE`.
    pub(super) fn secret(&self, name: &'static str) -> Result<Option<SecretString>, ConfigError> {
        if let Some(v) = self.get(name) {
            return Ok(Some(SecretString::from(v)));
        }
        match self.get(&format!("{name}_FILE")) {
            Some(path) => std::fs::read_to_string(path.trim())
                .map(|v| Some(SecretString::from(v.trim().to_string())))
                .map_err(|source| ConfigError::File { var: name, source }),
            None => Ok(None),
        }
    }

    pub(super) fn positive(&self, name: &'static str, default: u32) -> Result<NonZeroU32, ConfigError> {
        let n = self.number(name, default)?;
        NonZeroU32::new(n).ok_or_else(|| invalid(name, "must be a positive integer"))
    }

    pub(super) fn flag(&self, name: &'static str, default: bool) -> Result<bool, ConfigError> {
        match self.get(name).map(|v| v.to_ascii_lowercase()).as_deref() {
            None => Ok(default),
            Some("true" | "1" | "yes" | "on") => Ok(true),
            Some("false" | "0" | "no" | "off") => Ok(false),
            Some(_) => Err(invalid(name, "must be true or false")),
        }
    }

    pub(super) fn number<T: std::str::FromStr + Copy>(&self, name: &'static str, default: T) -> Result<T, ConfigError> {
        match self.get(name) {
            None => Ok(default),
            Some(v) => v.parse().map_err(|_| invalid(name, "must be a non-negative integer")),
        }
    }
}
