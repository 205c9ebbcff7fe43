//! What rudder's two database backends, SQLite and PostgreSQL, share and
//! the JSON file store does not: the SQL of the indexed reads with its
//! placeholder style ([`builder`]), a task summary read from a row
//! ([`row`]), the changes a transaction holds until it writes them out
//! ([`pending`]), the change log's retention ([`retention`]) and the
//! store's trail ([`trail`]).

pub mod builder;
pub mod pending;
pub mod retention;
pub mod row;
pub mod trail;

pub use row::{SUMMARY_COLUMNS, SUMMARY_COLUMNS_BEFORE_KINDS, SummaryRow, summary_of_row};

// What `transaction_methods!` names through `$crate`.
#[doc(hidden)]
pub use rudder_core::{StoreError, Summary, model};
