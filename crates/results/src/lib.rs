//! Stored results and what is shown of them: the typed workload records
//! ([`record`]), the results store ([`store`], SQLite or PostgreSQL),
//! comparisons with confidence ([`compare`], [`stats`]), scores
//! ([`score`]), the answer of a run in a line ([`answer`], [`marks`]) and
//! the report page ([`html`], [`page_summary`], [`page_chart`]). Below
//! the harness, which runs jobs and re-exports these modules; what it
//! needs of the workloads comes through [`shown::Shown`].

pub mod answer;
pub mod compare;
pub mod error;
pub mod html;
pub mod marks;
pub mod page_chart;
pub mod page_summary;
pub mod record;
pub mod score;
pub mod shown;
pub mod stats;
pub mod store;
pub mod tls;

pub use error::Error;
pub use record::Record;
pub use shown::Shown;
