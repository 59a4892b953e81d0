//! resctl's error type: the variant says who can fix a failure.

/// Why a resctl operation failed: the variant says who can fix it.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// A flag, spec, file, field or value the user gave is wrong.
    #[error("{0}")]
    Input(String),
    /// The host, a device, a cgroup, a child process or a tool (fio)
    /// failed or lacks a feature.
    #[error("{0}")]
    Host(String),
}

/// resctl's result: [`Error`] unless told otherwise.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Callers that still carry messages as `String` keep using `?`.
impl From<Error> for String {
    fn from(e: Error) -> Self {
        e.to_string()
    }
}
