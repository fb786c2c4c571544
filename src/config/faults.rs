//! The `faults` section: fault injection for crash-safety tests.

use super::vars::Vars;
use super::{AppEnv, ConfigError};

/// Fault injection for crash-safety tests; refused in production.
#[derive(Debug, Default, Clone, Copy)]
pub struct Faults {
    /// Exit right after an outflow is stored, before it leaves: a transfer before its broadcast, a typed-data
    /// signature or an x402 authorization before it is handed out.
    pub exit_before_broadcast: bool,
    /// Every broadcast is sent once more beforehand with its answer dropped, as when a node's reply is lost and the
    /// client tries again.
    pub lost_broadcast_answer: bool,
}

impl Faults {
    pub(super) fn read(vars: &Vars, app_env: AppEnv) -> Result<Self, ConfigError> {
        let faults = Faults {
            exit_before_broadcast: vars.flag("FAULT_EXIT_BEFORE_BROADCAST", false)?,
            lost_broadcast_answer: vars.flag("FAULT_LOST_BROADCAST_ANSWER", false)?,
        };
        if (faults.exit_before_broadcast || faults.lost_broadcast_answer) && app_env == AppEnv::Production {
            return Err(ConfigError::Refused(
                "FAULT_* switches are for tests and are refused in production",
            ));
        }
        Ok(faults)
    }
}
