//! The sysbench table's columns as statements see them: a statement's values checked and
//! converted to what the engine stores (`id`, `k`, `c`, `pad`), and stored values read back,
//! compared and ordered as MySQL returns them.

use opensrv_mysql::ErrorKind;
use turnstile_engine::schema::Row;

use crate::mysql_error::{err, value_err, SqlError};
use crate::sql::Lit;
use crate::value;

/// `CHAR` values are returned without their trailing spaces, as MySQL does (without
/// `PAD_CHAR_TO_FULL_LENGTH`).
pub(crate) fn trim_char(v: &[u8]) -> &[u8] {
    let end = v.iter().rposition(|b| *b != b' ').map_or(0, |i| i + 1);
    &v[..end]
}

/// A `CHAR(N)` value: too long is an error (strict mode), except for trailing spaces, which
/// MySQL removes silently whatever the SQL mode.
fn fixed<const N: usize>(col: &str, v: &[u8]) -> Result<[u8; N], SqlError> {
    let v = if v.len() > N && v[N..].iter().all(|b| *b == b' ') {
        &v[..N]
    } else {
        v
    };
    if v.len() > N {
        // MySQL counts characters; the engine keeps N bytes.
        let chars = std::str::from_utf8(v).map_or(v.len(), |t| t.chars().count());
        if chars <= N {
            return Err(err(
                ErrorKind::ER_NOT_SUPPORTED_YET,
                format!(
                    "turnstile serve does not support more than {N} bytes in '{col}' \
                     (its {chars} characters fit CHAR({N}); the engine stores {N} bytes)"
                ),
            ));
        }
        return Err(err(
            ErrorKind::ER_DATA_TOO_LONG,
            format!("Data too long for column '{col}' at row 1"),
        ));
    }
    let mut out = [b' '; N];
    out[..v.len()].copy_from_slice(v);
    Ok(out)
}

/// The largest id stored: `INTEGER` is signed 32-bit in MySQL, and the engine's keys are
/// unsigned 32-bit, so ids run from 1 to `i32::MAX` (0 and NULL take AUTO_INCREMENT).
const MAX_ID: i64 = i32::MAX as i64;

/// An id to store: `None` takes the next AUTO_INCREMENT value (0 or NULL, as MySQL without
/// `NO_AUTO_VALUE_ON_ZERO`).
pub(crate) fn stored_id(v: &Lit) -> Result<Option<u32>, SqlError> {
    match value::int_store(v, "id", i32::MIN.into(), MAX_ID).map_err(|e| value_err("id", e))? {
        None | Some(0) => Ok(None),
        Some(i) if i < 0 => Err(err(
            ErrorKind::ER_NOT_SUPPORTED_YET,
            "turnstile serve does not support negative ids (the engine's keys are unsigned)",
        )),
        Some(i) => Ok(Some(i as u32)),
    }
}

/// `k` is a signed 32-bit `INTEGER`; the engine keeps its two's-complement bits (its k index
/// orders by those bits, which no statement here reads in order).
pub(crate) fn k_bits(k: i64) -> u32 {
    k as i32 as u32
}

pub(crate) fn k_of(r: &Row) -> i64 {
    i64::from(r.k as i32)
}

pub(crate) fn stored_k(v: &Lit) -> Result<u32, SqlError> {
    value::int_store(v, "k", i32::MIN.into(), i32::MAX.into())
        .map_err(|e| value_err("k", e))?
        .map(k_bits)
        .ok_or_else(|| err(ErrorKind::ER_BAD_NULL_ERROR, "Column 'k' cannot be null"))
}

/// A `CHAR` column's value: the value's text; NULL is refused (the columns are NOT NULL).
pub(crate) fn stored_text<const N: usize>(col: &str, v: &Lit) -> Result<[u8; N], SqlError> {
    let t = value::text(v).ok_or_else(|| {
        err(
            ErrorKind::ER_BAD_NULL_ERROR,
            format!("Column '{col}' cannot be null"),
        )
    })?;
    fixed::<N>(col, &t)
}

/// Text values ordered (and with `distinct`, deduplicated) as MySQL's default collations do:
/// case-insensitively. MySQL 8.0's `utf8mb4_0900_ai_ci` and MariaDB's `utf8mb4_general_ci`
/// agree on letters, digits, `-` and space (space < `-` < digits < letters, case folded) and
/// disagree on other punctuation and on accents, so values with other bytes are refused
/// rather than ordered one server's way.
pub(crate) fn order_by_collation<'a>(
    values: impl Iterator<Item = &'a [u8]>,
    distinct: bool,
) -> Result<Vec<Vec<u8>>, SqlError> {
    let mut v: Vec<Vec<u8>> = values.map(<[u8]>::to_vec).collect();
    if let Some(bad) = v.iter().find(|c| {
        !c.iter()
            .all(|b| b.is_ascii_alphanumeric() || b" -".contains(b))
    }) {
        return Err(err(
            ErrorKind::ER_NOT_SUPPORTED_YET,
            format!(
                "turnstile serve does not support ORDER BY c over text other than letters, \
                 digits, '-' and spaces (its order depends on the collation): '{}'",
                String::from_utf8_lossy(bad)
            ),
        ));
    }
    v.sort_by_key(|c| c.to_ascii_uppercase());
    if distinct {
        v.dedup_by(|a, b| a.eq_ignore_ascii_case(b));
    }
    Ok(v)
}

/// The stored ids in `id BETWEEN lo AND hi`, clamped to the ids a row can have; `None` when
/// it holds none.
pub(crate) fn id_range(lo: &Lit, hi: &Lit) -> Result<Option<(u32, u32)>, SqlError> {
    let Some((lo, hi)) = value::int_between(lo, hi).map_err(|e| value_err("id", e))? else {
        return Ok(None);
    };
    let (lo, hi) = (lo.max(1), hi.min(MAX_ID));
    Ok((lo <= hi).then_some((lo as u32, hi as u32)))
}

/// The id `id = v` looks up; `None` when no stored row can have it.
pub(crate) fn id_point(v: &Lit) -> Result<Option<u32>, SqlError> {
    Ok(value::int_eq(v)
        .map_err(|e| value_err("id", e))?
        .filter(|i| (1..=MAX_ID).contains(i))
        .map(|i| i as u32))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn char_values_lose_trailing_spaces_and_too_long_values_are_refused() {
        assert_eq!(trim_char(b"abc   "), b"abc");
        assert_eq!(trim_char(b"   "), b"");
        assert_eq!(&fixed::<4>("c", b"ab").unwrap(), b"ab  ");
        assert_eq!(
            &fixed::<4>("c", b"abcd   ").unwrap(),
            b"abcd",
            "spaces cut silently"
        );
        let e = fixed::<4>("c", b"abcde").unwrap_err();
        assert_eq!(
            (e.kind as u16, e.msg.as_str()),
            (1406, "Data too long for column 'c' at row 1")
        );
    }

    #[test]
    fn id_ranges_are_clamped_to_stored_ids() {
        let range = |lo: Lit, hi: Lit| id_range(&lo, &hi).ok().flatten();
        assert_eq!(range(Lit::Int(-5), Lit::Int(3)), Some((1, 3)));
        assert_eq!(range(Lit::Int(5), Lit::Int(3)), None);
        assert_eq!(range(Lit::Null, Lit::Int(3)), None);
        assert_eq!(
            range(Lit::Str(b"7".to_vec()), Lit::Int(1 << 40)),
            Some((7, i32::MAX as u32))
        );
        assert_eq!(
            range(Lit::Num("1.5".into()), Lit::Num("3.5".into())),
            Some((2, 3))
        );
        assert_eq!(id_point(&Lit::Int(-1)).ok().flatten(), None);
        assert_eq!(id_point(&Lit::Double(5.0)).ok().flatten(), Some(5));
        assert_eq!(id_point(&Lit::Num("5.5".into())).ok().flatten(), None);
    }
}
