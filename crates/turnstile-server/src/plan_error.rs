//! Why a statement is refused before it runs, and how a refusal quotes the statement's text;
//! shared by the planner (`sql`) and the checks before parsing (`precheck`).

/// Why a statement is refused before it runs.
#[derive(Debug, Clone, PartialEq)]
pub enum PlanError {
    /// Not one of the supported statements (MySQL error 1235).
    NotSupported(String),
    /// Not SQL the parser accepts (MySQL error 1064).
    Syntax(String),
    /// An INSERT row (numbered from 1) with more or fewer values than columns (MySQL 1136).
    ValueCount(usize),
    /// Refused as MySQL refuses it: its error code and message.
    Mysql(u16, String),
}

/// The start of a statement's text, as a refusal quotes it.
pub(crate) fn excerpt(sql: &str) -> String {
    let s: String = sql.chars().take(80).collect();
    if s.len() < sql.len() {
        format!("{s}…")
    } else {
        s
    }
}

/// A statement this server does not support (1235): `what` it holds, and its text.
pub(crate) fn not_supported(what: &str, sql: &str) -> PlanError {
    PlanError::NotSupported(format!(
        "turnstile serve does not support {what}: '{}' (see docs/SERVER.md)",
        excerpt(sql)
    ))
}
