//! Why reading or judging stored results failed, for callers that branch
//! on who can fix it.

/// Why a results operation failed: the variant says who can fix it.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum Error {
    /// A value the user gave is wrong (a date, a filter).
    #[error("{0}")]
    Input(String),
    /// The host, a file or a database server failed.
    #[error("{0}")]
    Host(String),
}
