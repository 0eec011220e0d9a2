//! tmp
pub mod sql;
