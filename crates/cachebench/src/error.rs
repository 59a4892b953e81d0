//! Why a cachebench operation failed, for callers that branch on who can
//! fix it.

/// Why a cachebench operation failed: the variant says who can fix it.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A flag, file, field or value the user gave is wrong (a config key,
    /// a trace line, a size that cannot be built).
    #[error("{0}")]
    Input(String),
    /// The host, a device or a file failed or lacks a feature (I/O errors,
    /// O_DIRECT, memory).
    #[error("{0}")]
    Host(String),
}

impl Error {
    /// The same error with `prefix` before its message (which part of the
    /// cache it came from).
    pub fn prefixed(self, prefix: &str) -> Error {
        match self {
            Error::Input(m) => Error::Input(format!("{prefix}{m}")),
            Error::Host(m) => Error::Host(format!("{prefix}{m}")),
        }
    }
}

/// A cachebench result.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Callers that still carry messages as `String` keep using `?`.
impl From<Error> for String {
    fn from(e: Error) -> Self {
        e.to_string()
    }
}
