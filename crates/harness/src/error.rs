//! Why a harness operation failed, for callers that branch on who can
//! fix it.

/// Why a harness operation failed: the variant says who can fix it.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum Error {
    /// A flag, file, field or value the user gave is wrong (a job file,
    /// a hook option, a command-line value).
    #[error("{0}")]
    Input(String),
    /// The host, a device, a socket or a peer failed or lacks a feature
    /// (/proc, cgroups, a database server).
    #[error("{0}")]
    Host(String),
}

/// A harness result.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Callers that still carry messages as `String` keep using `?`.
impl From<Error> for String {
    fn from(e: Error) -> Self {
        e.to_string()
    }
}
