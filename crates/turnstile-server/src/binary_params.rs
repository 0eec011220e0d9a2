//! A prepared statement's bound parameters (binary protocol) as the literals a plan takes;
//! dates and times become the text MySQL converts them to.

use opensrv_mysql::{ErrorKind, ValueInner};

use crate::mysql_error::{err, SqlError};
use crate::sql::Lit;

/// A bound parameter as a literal; dates and times as the text MySQL converts them to.
pub(crate) fn param_lit(v: ValueInner<'_>) -> Result<Lit, SqlError> {
    Ok(match v {
        ValueInner::NULL => Lit::Null,
        ValueInner::Bytes(b) => Lit::Str(b.to_vec()),
        ValueInner::Int(i) => Lit::Int(i),
        ValueInner::UInt(u) => i64::try_from(u).map_or(Lit::Num(u.to_string()), Lit::Int),
        ValueInner::Double(d) => Lit::Double(d),
        ValueInner::Date(b) => Lit::Str(datetime_text(b, false)?.into_bytes()),
        ValueInner::Datetime(b) => Lit::Str(datetime_text(b, true)?.into_bytes()),
        ValueInner::Time(b) => Lit::Str(time_text(b)?.into_bytes()),
    })
}

fn malformed_param() -> SqlError {
    err(
        ErrorKind::ER_MALFORMED_PACKET,
        "Malformed communication packet (a date or time parameter of an impossible length)",
    )
}

/// A binary-protocol DATE / DATETIME (length 0, 4, 7 or 11: year u16, month, day, hour,
/// minute, second, microseconds u32) as `YYYY-MM-DD[ HH:MM:SS[.ffffff]]`.
fn datetime_text(b: &[u8], with_time: bool) -> Result<String, SqlError> {
    let mut v = [0u8; 11];
    if ![0, 4, 7, 11].contains(&b.len()) {
        return Err(malformed_param());
    }
    v[..b.len()].copy_from_slice(b);
    let year = u16::from_le_bytes([v[0], v[1]]);
    let mut s = format!("{year:04}-{:02}-{:02}", v[2], v[3]);
    if with_time {
        s.push_str(&format!(" {:02}:{:02}:{:02}", v[4], v[5], v[6]));
        let us = u32::from_le_bytes([v[7], v[8], v[9], v[10]]);
        if us != 0 {
            s.push_str(&format!(".{us:06}"));
        }
    }
    Ok(s)
}

/// A binary-protocol TIME (length 0, 8 or 12: negative, days u32, hour, minute, second,
/// microseconds u32) as `[-]HH:MM:SS[.ffffff]`, days folded into the hours.
fn time_text(b: &[u8]) -> Result<String, SqlError> {
    let mut v = [0u8; 12];
    if ![0, 8, 12].contains(&b.len()) {
        return Err(malformed_param());
    }
    v[..b.len()].copy_from_slice(b);
    let days = u64::from(u32::from_le_bytes([v[1], v[2], v[3], v[4]]));
    let hours = days * 24 + u64::from(v[5]);
    let mut s = format!(
        "{}{hours:02}:{:02}:{:02}",
        if v[0] != 0 { "-" } else { "" },
        v[6],
        v[7]
    );
    let us = u32::from_le_bytes([v[8], v[9], v[10], v[11]]);
    if us != 0 {
        s.push_str(&format!(".{us:06}"));
    }
    Ok(s)
}
