//! hashd (in progress)
