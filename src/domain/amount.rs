//! Exact conversions between whole-unit decimal strings and wei (`U256`). No floating point touches money.

use alloy::primitives::U256;

/// Why a decimal amount was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AmountError {
    #[error("must be a decimal number such as 0.05")]
    Malformed,
    #[error("must not be negative")]
    Negative,
    #[error("has more than {0} decimal places")]
    TooPrecise(u8),
    #[error("is too large")]
    TooLarge,
    #[error("must be greater than zero")]
    Zero,
}

/// An amount to move: base units of its asset, more than zero, parsed once where it enters (the HTTP handler, the
/// tool) and carried as is; the text is kept as the caller wrote it (trimmed), for the audit log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Amount {
    value: U256,
    text: String,
}

impl Amount {
    /// `text` in whole units of an asset with `decimals`: refused when it does not parse (`parse_units`) or is zero.
    pub fn parse(text: &str, decimals: u8) -> Result<Amount, AmountError> {
        let value = parse_units(text, decimals)?;
        if value.is_zero() {
            return Err(AmountError::Zero);
        }
        Ok(Amount {
            value,
            text: text.trim().to_string(),
        })
    }

    /// In base units of the asset; never zero.
    pub fn value(&self) -> U256 {
        self.value
    }

    /// As the caller wrote it.
    pub fn text(&self) -> &str {
        &self.text
    }
}

/// Parses a non-negative decimal string in whole units (`"0.05"`, `"1"`, `"1e-3"`) into base units.
pub fn parse_units(text: &str, decimals: u8) -> Result<U256, AmountError> {
    let text = text.trim();
    if text.starts_with('-') {
        return Err(AmountError::Negative);
    }
    let text = text.strip_prefix('+').unwrap_or(text);
    let (mantissa, exponent) = match text.find(['e', 'E']) {
        Some(i) => {
            let exp: i32 = text[i + 1..].parse().map_err(|_| AmountError::Malformed)?;
            (&text[..i], exp)
        }
        None => (text, 0),
    };
    let (int_part, frac_part) = match mantissa.split_once('.') {
        Some((i, f)) => (i, f),
        None => (mantissa, ""),
    };
    if int_part.is_empty() && frac_part.is_empty() {
        return Err(AmountError::Malformed);
    }
    if !int_part.bytes().all(|b| b.is_ascii_digit()) || !frac_part.bytes().all(|b| b.is_ascii_digit()) {
        return Err(AmountError::Malformed);
    }
    let digits = format!("{int_part}{frac_part}");
    let digits = digits.trim_start_matches('0');
    let digits = if digits.is_empty() { "0" } else { digits };
    // value = digits * 10^(decimals + exponent - frac_len)
    let shift = i64::from(decimals) + i64::from(exponent) - frac_part.len() as i64;
    let base = U256::from_str_radix(digits, 10).map_err(|_| AmountError::TooLarge)?;
    if shift >= 0 {
        let factor = U256::from(10u8)
            .checked_pow(U256::from(shift as u64))
            .ok_or(AmountError::TooLarge)?;
        base.checked_mul(factor).ok_or(AmountError::TooLarge)
    } else {
        let divisor = U256::from(10u8)
            .checked_pow(U256::from((-shift) as u64))
            .ok_or(AmountError::TooPrecise(decimals))?;
        if base % divisor != U256::ZERO {
            return Err(AmountError::TooPrecise(decimals));
        }
        Ok(base / divisor)
    }
}

/// Formats base units as a decimal string in whole units, without trailing zeros (`50000000000000000` -> `"0.05"`).
pub fn format_units(value: U256, decimals: u8) -> String {
    let divisor = U256::from(10u8).pow(U256::from(decimals));
    let whole = value / divisor;
    let frac = value % divisor;
    if frac.is_zero() {
        return whole.to_string();
    }
    let frac = format!("{:0>width$}", frac.to_string(), width = decimals as usize);
    format!("{whole}.{}", frac.trim_end_matches('0'))
}

/// Converts a JSON number (as given in `spending_cap`) into base units exactly, using its shortest decimal form.
pub fn from_json_number(number: &serde_json::Number, decimals: u8) -> Result<U256, AmountError> {
    parse_units(&number.to_string(), decimals)
}

/// Renders base units as a JSON number in whole units (the API's `spending_cap` is a number).
pub fn to_json_number(value: U256, decimals: u8) -> serde_json::Value {
    let text = format_units(value, decimals);
    match text.parse::<u64>() {
        Ok(n) => serde_json::Value::from(n),
        Err(_) => text
            .parse::<f64>()
            .ok()
            .and_then(serde_json::Number::from_f64)
            .map(serde_json::Value::Number)
            .unwrap_or(serde_json::Value::Null),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_amount_is_parsed_once_into_base_units_and_never_zero() {
        let amount = Amount::parse(" 0.05 ", 18).unwrap();
        assert_eq!(amount.value(), wei("50000000000000000"));
        assert_eq!(amount.text(), "0.05");
        assert_eq!(Amount::parse("1.5", 6).unwrap().value(), U256::from(1_500_000u64));
        assert_eq!(Amount::parse("0", 18), Err(AmountError::Zero));
        assert_eq!(Amount::parse("0.000", 6), Err(AmountError::Zero));
        assert_eq!(Amount::parse("-1", 18), Err(AmountError::Negative));
        assert_eq!(Amount::parse("0.0000001", 6), Err(AmountError::TooPrecise(6)));
        assert_eq!(Amount::parse("ten", 18), Err(AmountError::Malformed));
    }

    fn wei(s: &str) -> U256 {
        U256::from_str_radix(s, 10).unwrap()
    }

    #[test]
    fn parses_plain_and_fractional_amounts() {
        assert_eq!(parse_units("1", 18), Ok(wei("1000000000000000000")));
        assert_eq!(parse_units("0.05", 18), Ok(wei("50000000000000000")));
        assert_eq!(parse_units(".5", 18), Ok(wei("500000000000000000")));
        assert_eq!(parse_units("0", 18), Ok(U256::ZERO));
        assert_eq!(parse_units("1e-3", 18), Ok(wei("1000000000000000")));
        assert_eq!(parse_units("2E2", 0), Ok(wei("200")));
        assert_eq!(parse_units("0.000000000000000001", 18), Ok(U256::from(1u8)));
    }

    #[test]
    fn refuses_bad_amounts() {
        assert_eq!(parse_units("-1", 18), Err(AmountError::Negative));
        assert_eq!(parse_units("abc", 18), Err(AmountError::Malformed));
        assert_eq!(parse_units("", 18), Err(AmountError::Malformed));
        assert_eq!(parse_units(".", 18), Err(AmountError::Malformed));
        assert_eq!(parse_units("1.2.3", 18), Err(AmountError::Malformed));
        assert_eq!(
            parse_units("0.0000000000000000001", 18),
            Err(AmountError::TooPrecise(18))
        );
        assert_eq!(parse_units("1e80", 18), Err(AmountError::TooLarge));
    }

    #[test]
    fn formats_without_trailing_zeros() {
        assert_eq!(format_units(wei("50000000000000000"), 18), "0.05");
        assert_eq!(format_units(wei("1000000000000000000"), 18), "1");
        assert_eq!(format_units(U256::ZERO, 18), "0");
        assert_eq!(format_units(U256::from(1u8), 18), "0.000000000000000001");
        assert_eq!(format_units(wei("12345000000000000000"), 18), "12.345");
    }

    #[test]
    fn json_numbers_round_trip() {
        let n: serde_json::Number = serde_json::from_str("0.1").unwrap();
        let v = from_json_number(&n, 18).unwrap();
        assert_eq!(v, wei("100000000000000000"));
        assert_eq!(to_json_number(v, 18), serde_json::json!(0.1));
        assert_eq!(to_json_number(wei("5000000000000000000"), 18), serde_json::json!(5));
    }
}
