//! [`Secret`]: a password that never reaches a log, a status line or an
//! error by accident.

use std::fmt;

/// A password. `Debug` and `Display` print `***`; only [`Secret::expose`]
/// gives the text, so a secret cannot reach a log or a status line by
/// accident.
#[derive(Clone, PartialEq, Eq, Default)]
pub struct Secret(String);

impl Secret {
    /// Wraps `text`.
    pub fn new(text: impl Into<String>) -> Self {
        Secret(text.into())
    }

    /// The password text. Call this only where it is handed to a connection.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("***")
    }
}

impl fmt::Display for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("***")
    }
}
