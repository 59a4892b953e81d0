//! Why reading the host failed.

/// Why reading the host failed: only the host can fix it (a /proc file
/// that cannot be read or parsed).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum Error {
    /// The host lacks a file or feature, or a file of it does not parse.
    #[error("{0}")]
    Host(String),
}
