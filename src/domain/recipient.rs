//! Who receives an outflow: never the zero address (the funds would be burnt) nor the sending wallet itself (only
//! the fee would be spent), §15. Built once on the send path, where the sending wallet is known.

use alloy::primitives::Address;

/// Why an address cannot receive.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum RecipientError {
    #[error("the zero address cannot be the recipient")]
    ZeroAddress,
    #[error("the agent's own wallet cannot be the recipient")]
    OwnWallet,
}

impl RecipientError {
    /// What cannot be the recipient, as the refusal names it.
    pub fn what(self) -> &'static str {
        match self {
            RecipientError::ZeroAddress => "the zero address",
            RecipientError::OwnWallet => "the agent's own wallet",
        }
    }
}

/// A recipient checked against the sending wallet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Recipient {
    to: Address,
    from: Address,
}

impl Recipient {
    pub fn new(to: Address, from: Address) -> Result<Recipient, RecipientError> {
        if to == Address::ZERO {
            return Err(RecipientError::ZeroAddress);
        }
        if to == from {
            return Err(RecipientError::OwnWallet);
        }
        Ok(Recipient { to, from })
    }

    /// Who receives.
    pub fn to(&self) -> Address {
        self.to
    }

    /// The sending wallet it was checked against.
    pub fn from(&self) -> Address {
        self.from
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_zero_address_and_the_sending_wallet_cannot_receive() {
        let from = Address::repeat_byte(1);
        let to = Address::repeat_byte(2);
        let recipient = Recipient::new(to, from).unwrap();
        assert_eq!((recipient.to(), recipient.from()), (to, from));
        assert_eq!(Recipient::new(Address::ZERO, from), Err(RecipientError::ZeroAddress));
        assert_eq!(Recipient::new(from, from), Err(RecipientError::OwnWallet));
        assert_eq!(RecipientError::OwnWallet.what(), "the agent's own wallet");
    }
}
