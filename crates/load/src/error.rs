//! Why a load operation failed, for callers that branch on who can fix
//! it.

/// Why a load operation failed: the variant says who can fix it.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum Error {
    /// A flag, file, field or value the user gave is wrong.
    #[error("{0}")]
    Input(String),
    /// The host, a socket or a peer failed or lacks a feature.
    #[error("{0}")]
    Host(String),
    /// The run was stopped before it ended (Ctrl-C, or the instances a
    /// search waits for were stopped): nobody has anything to fix.
    #[error("{0}")]
    Stopped(String),
}

/// A load result.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Callers that still carry messages as `String` keep using `?`.
impl From<Error> for String {
    fn from(e: Error) -> Self {
        e.to_string()
    }
}
