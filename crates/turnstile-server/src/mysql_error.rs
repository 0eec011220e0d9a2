//! A statement's failure as the client sees it: a MySQL error code and message, and how the
//! planner's, the engine's and the value conversions' errors map onto them.

use opensrv_mysql::ErrorKind;
use turnstile::GateError;
use turnstile_engine::EngineError;

use crate::sql::PlanError;
use crate::value::ValueError;

/// A statement's failure, as the client sees it.
#[derive(Debug)]
pub(crate) struct SqlError {
    pub(crate) kind: ErrorKind,
    pub(crate) msg: String,
}

/// An error of `kind` saying `msg`.
pub(crate) fn err(kind: ErrorKind, msg: impl Into<String>) -> SqlError {
    SqlError {
        kind,
        msg: msg.into(),
    }
}

/// A statement refused before it runs.
pub(crate) fn plan_err(e: PlanError) -> SqlError {
    match e {
        PlanError::NotSupported(m) => err(ErrorKind::ER_NOT_SUPPORTED_YET, m),
        PlanError::Syntax(m) => err(ErrorKind::ER_PARSE_ERROR, m),
        PlanError::Mysql(code, m) => err(ErrorKind::from(code), m),
        PlanError::ValueCount(row) => err(
            ErrorKind::ER_WRONG_VALUE_COUNT_ON_ROW,
            format!("Column count doesn't match value count at row {row}"),
        ),
    }
}

/// An engine error; `db`, the connection's database, names a missing table as MySQL does.
pub(crate) fn engine_err(db: &str, e: EngineError) -> SqlError {
    match e {
        EngineError::NoSuchTable(t) => err(
            ErrorKind::ER_NO_SUCH_TABLE,
            format!("Table '{db}.{t}' doesn't exist"),
        ),
        EngineError::TableExists(t) => err(
            ErrorKind::ER_TABLE_EXISTS_ERROR,
            format!("Table '{t}' already exists"),
        ),
        EngineError::DuplicateKey { table, id } => err(
            ErrorKind::ER_DUP_ENTRY,
            format!("Duplicate entry '{id}' for key '{table}.PRIMARY'"),
        ),
        EngineError::Deadlock => err(
            ErrorKind::ER_LOCK_DEADLOCK,
            "Deadlock found when trying to get lock; try restarting transaction \
             (the transaction was rolled back)",
        ),
        EngineError::LockWaitTimeout => err(
            ErrorKind::ER_LOCK_WAIT_TIMEOUT,
            "Lock wait timeout exceeded; try restarting transaction \
             (turnstile rolls back the whole transaction)",
        ),
        EngineError::Gate(g @ GateError::Overloaded { .. }) => err(
            ErrorKind::ER_LOCK_WAIT_TIMEOUT,
            format!("turnstile gate: {g}; the statement was refused (an open transaction is kept)"),
        ),
        EngineError::Gate(g @ GateError::TimedOut { .. }) => err(
            ErrorKind::ER_LOCK_WAIT_TIMEOUT,
            format!("turnstile gate: {g}; the statement was refused"),
        ),
        EngineError::Gate(g @ GateError::Cancelled { .. }) => err(
            ErrorKind::ER_QUERY_INTERRUPTED,
            format!("Query execution was interrupted (turnstile gate: {g})"),
        ),
        other => err(ErrorKind::ER_UNKNOWN_ERROR, other.to_string()),
    }
}

/// A value column `col` cannot hold (strict mode).
pub(crate) fn value_err(col: &str, e: ValueError) -> SqlError {
    match e {
        ValueError::OutOfRange => err(
            ErrorKind::ER_WARN_DATA_OUT_OF_RANGE,
            format!("Out of range value for column '{col}' at row 1"),
        ),
        ValueError::NotANumber(m) => err(ErrorKind::ER_TRUNCATED_WRONG_VALUE_FOR_FIELD, m),
        ValueError::Truncated(m) => err(ErrorKind::WARN_DATA_TRUNCATED, m),
        ValueError::NotSupported(what) => err(
            ErrorKind::ER_NOT_SUPPORTED_YET,
            format!("turnstile serve does not support {what} as a value for '{col}'"),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn engine_errors_answer_mysqls_codes() {
        let code = |e: EngineError| engine_err("sbtest", e).kind as u16;
        assert_eq!(code(EngineError::NoSuchTable("t".into())), 1146);
        assert_eq!(code(EngineError::TableExists("t".into())), 1050);
        assert_eq!(
            code(EngineError::DuplicateKey {
                table: "t".into(),
                id: 1
            }),
            1062
        );
        assert_eq!(code(EngineError::Deadlock), 1213);
        assert_eq!(code(EngineError::LockWaitTimeout), 1205);
        assert_eq!(
            code(EngineError::Gate(GateError::Overloaded {
                reason: turnstile::OverloadReason::QueueFull { max_waiting: 8 },
                waited: Duration::ZERO,
            })),
            1205
        );
        assert_eq!(
            code(EngineError::Gate(GateError::TimedOut {
                waited: Duration::ZERO
            })),
            1205
        );
        assert_eq!(
            code(EngineError::Gate(GateError::Cancelled {
                waited: Duration::ZERO
            })),
            1317
        );
        assert_eq!(code(EngineError::BadInput("x".into())), 1105);
        let e = engine_err("sbtest", EngineError::NoSuchTable("t9".into()));
        assert_eq!(e.msg, "Table 'sbtest.t9' doesn't exist");
    }
}
