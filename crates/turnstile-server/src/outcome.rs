//! What a statement answers: an OK or a result set of text columns, the column definitions
//! each kind of statement returns, and the status flags an OK carries.

use opensrv_mysql::{Column, ColumnFlags, ColumnType, StatusFlags};

use crate::sql::Kind;

/// What a statement returns.
pub(crate) enum Outcome {
    /// OK with rows affected and the last AUTO_INCREMENT id.
    Ok { affected: u64, insert_id: u64 },
    /// A result set of text columns.
    Rows {
        cols: Vec<Column>,
        rows: Vec<Vec<Cell>>,
    },
}

/// An OK with no rows affected and no id generated.
pub(crate) fn ok() -> Outcome {
    Outcome::Ok {
        affected: 0,
        insert_id: 0,
    }
}

/// One value of a result row.
pub(crate) enum Cell {
    Null,
    Bytes(Vec<u8>),
    Int(i64),
    /// A decimal written as text (`SUM`).
    Decimal(String),
}

fn column(name: &str, coltype: ColumnType, flags: ColumnFlags) -> Column {
    Column {
        table: String::new(),
        column: name.to_string(),
        coltype,
        colflags: flags,
    }
}

pub(crate) fn text_col(name: &str) -> Column {
    column(
        name,
        ColumnType::MYSQL_TYPE_VAR_STRING,
        ColumnFlags::empty(),
    )
}

pub(crate) fn c_col() -> Column {
    column(
        "c",
        ColumnType::MYSQL_TYPE_STRING,
        ColumnFlags::NOT_NULL_FLAG,
    )
}

/// The result columns a statement returns (for a prepared statement's metadata).
pub(crate) fn result_cols(kind: &Kind) -> Vec<Column> {
    match kind {
        Kind::PointSelect | Kind::RangeSelect | Kind::OrderRange { .. } => vec![c_col()],
        Kind::SumRange => vec![column(
            "SUM(k)",
            ColumnType::MYSQL_TYPE_NEWDECIMAL,
            ColumnFlags::empty(),
        )],
        Kind::Count => vec![column(
            "COUNT(*)",
            ColumnType::MYSQL_TYPE_LONGLONG,
            ColumnFlags::NOT_NULL_FLAG,
        )],
        Kind::SelectExprs(items) => items.iter().map(|(n, _)| text_col(n)).collect(),
        Kind::ShowDatabases(None) => vec![text_col("Database")],
        Kind::ShowDatabases(Some(p)) => vec![text_col(&format!("Database ({p})"))],
        Kind::ShowTables(_) => vec![text_col("Tables_in_db")],
        Kind::ShowEngineStatus(_) => vec![text_col("Type"), text_col("Name"), text_col("Status")],
        Kind::ShowStatus(_) | Kind::ShowVariables(_) => {
            vec![text_col("Variable_name"), text_col("Value")]
        }
        Kind::Analyze { .. } => vec![
            text_col("Table"),
            text_col("Op"),
            text_col("Msg_type"),
            text_col("Msg_text"),
        ],
        _ => Vec::new(),
    }
}

/// An OK's status: autocommit is always on; `in_txn` says a transaction is open.
pub(crate) fn status_flags(in_txn: bool) -> StatusFlags {
    let mut f = StatusFlags::SERVER_STATUS_AUTOCOMMIT;
    if in_txn {
        f |= StatusFlags::SERVER_STATUS_IN_TRANS;
    }
    f
}
