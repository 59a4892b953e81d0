//! Why a adsim operation failed: the variant says who can fix it.

/// Why a adsim operation failed: the variant says who can fix it.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A flag, file, field or value the user gave is wrong.
    #[error("{0}")]
    Input(String),
    /// The host, a device, a socket or a peer failed or lacks a feature.
    #[error("{0}")]
    Host(String),
}

/// A adsim result.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Callers that still carry messages as `String` keep using `?`.
impl From<Error> for String {
    fn from(e: Error) -> Self {
        e.to_string()
    }
}

impl Error {
    /// The same kind of error, its message prefixed with `what` (what
    /// failed, e.g. the kernel).
    pub fn context(self, what: impl std::fmt::Display) -> Self {
        match self {
            Error::Input(m) => Error::Input(format!("{what}: {m}")),
            Error::Host(m) => Error::Host(format!("{what}: {m}")),
        }
    }
}
