//! MySQL's conversions between a statement's values and the sysbench table's columns, in
//! strict mode (the default of MySQL 8.0 and MariaDB 10.11): what an INTEGER column stores
//! for a value, which stored integers a value compares equal to, and the text a value reads
//! as. Every statement goes through these, so a literal written any way MySQL accepts
//! (`1e3`, `5.0`, `'7'`, `0x41`, a bound DOUBLE) means what it means there.

use std::cmp::Ordering;

use crate::sql::Lit;

/// Why a value cannot go into a column.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ValueError {
    /// Outside the column's range (MySQL 1264).
    OutOfRange,
    /// Text that is not a number, for an INTEGER column (MySQL 1366).
    NotANumber(String),
    /// Text that starts with a number and goes on (`'5x'`, MySQL 1265).
    Truncated(String),
    /// A value this server cannot read as MySQL would (1235).
    NotSupported(String),
}

/// A number read from a value: an integer, an exact decimal, or an approximate (double).
#[derive(Debug, Clone, Copy, PartialEq)]
enum Number {
    Int(i128),
    /// An exact decimal ±(`mag` + a fraction in (0, 1)), kept as the integer part and how
    /// the fraction compares with one half: enough to round, floor and ceil exactly.
    Decimal {
        neg: bool,
        mag: i128,
        frac: Frac,
    },
    Double(f64),
}

/// The nonzero fractional part of an exact decimal, as far as rounding needs it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Frac {
    BelowHalf,
    Half,
    AboveHalf,
}

/// Reads an exact decimal as written (`-12.50`, `7`, `.5`); `None` if it is not one.
fn parse_decimal(s: &str) -> Option<Number> {
    let (neg, digits) = match s.as_bytes().first()? {
        b'-' => (true, &s[1..]),
        b'+' => (false, &s[1..]),
        _ => (false, s),
    };
    let (int, frac) = digits.split_once('.').unwrap_or((digits, ""));
    if int.is_empty() && frac.is_empty()
        || !int.bytes().all(|c| c.is_ascii_digit())
        || !frac.bytes().all(|c| c.is_ascii_digit())
    {
        return None;
    }
    // More digits than an i128 holds is beyond every column here: saturate, the range
    // checks refuse it.
    let mut mag: i128 = 0;
    for c in int.bytes() {
        mag = mag.saturating_mul(10).saturating_add(i128::from(c - b'0'));
    }
    let f = frac.trim_end_matches('0');
    let frac = match f.as_bytes().first() {
        None => return Some(Number::Int(if neg { -mag } else { mag })),
        Some(b'0'..=b'4') => Frac::BelowHalf,
        Some(b'5') if f.len() == 1 => Frac::Half,
        Some(_) => Frac::AboveHalf,
    };
    Some(Number::Decimal { neg, mag, frac })
}

/// How much of a string reads as a number.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Read {
    /// No number at its start (`'abc'`, `''`).
    Nothing,
    /// A number, then more (`'5x'`).
    Prefix,
    /// All of it, spaces aside.
    Whole,
}

/// The longest prefix of `s` that reads as a number, as MySQL converts a string in a numeric
/// context (`' 12abc'` is 12, `'abc'` is 0), and how much of the string it is.
fn string_prefix_number(s: &[u8]) -> (f64, Read) {
    let text = String::from_utf8_lossy(s);
    let t = text.trim_start_matches([' ', '\t', '\n', '\r']);
    let b = t.as_bytes();
    let mut i = 0;
    if matches!(b.first(), Some(b'-' | b'+')) {
        i += 1;
    }
    let int_digits = b[i..].iter().take_while(|c| c.is_ascii_digit()).count();
    i += int_digits;
    let mut frac_digits = 0;
    if b.get(i) == Some(&b'.') {
        frac_digits = b[i + 1..].iter().take_while(|c| c.is_ascii_digit()).count();
        i += 1 + frac_digits;
    }
    if int_digits + frac_digits == 0 {
        return (0.0, Read::Nothing);
    }
    if matches!(b.get(i), Some(b'e' | b'E')) {
        let mut j = i + 1;
        if matches!(b.get(j), Some(b'-' | b'+')) {
            j += 1;
        }
        let exp_digits = b[j..].iter().take_while(|c| c.is_ascii_digit()).count();
        if exp_digits > 0 {
            i = j + exp_digits;
        }
    }
    let v = t[..i].trim_end_matches('.').parse::<f64>().unwrap_or(0.0);
    let read = if t[i..].trim().is_empty() {
        Read::Whole
    } else {
        Read::Prefix
    };
    (v, read)
}

fn number(l: &Lit) -> Result<Option<Number>, ValueError> {
    Ok(Some(match l {
        Lit::Null => return Ok(None),
        Lit::Int(i) => Number::Int(i128::from(*i)),
        Lit::Num(s) => match parse_decimal(s) {
            Some(n) => n,
            None => Number::Double(
                s.parse::<f64>()
                    .map_err(|_| ValueError::NotSupported(format!("the number {s}")))?,
            ),
        },
        Lit::Double(d) => Number::Double(*d),
        // A hexadecimal or bit literal is an unsigned 64-bit integer in a numeric context.
        Lit::Bits(b) => {
            let significant = &b[b.iter().position(|&x| x != 0).unwrap_or(b.len())..];
            if significant.len() > 8 {
                return Err(ValueError::OutOfRange);
            }
            Number::Int(
                significant
                    .iter()
                    .fold(0i128, |v, &x| v << 8 | i128::from(x)),
            )
        }
        Lit::Str(s) => Number::Double(string_prefix_number(s).0),
    }))
}

/// The integer an INTEGER column in `lo..=hi` stores for `l` (`None` for NULL): decimals round
/// half away from zero and doubles half to even (MySQL's `rint`), text must be a whole number.
pub fn int_store(l: &Lit, col: &str, lo: i64, hi: i64) -> Result<Option<i64>, ValueError> {
    if let Lit::Str(s) = l {
        match string_prefix_number(s).1 {
            Read::Nothing => {
                return Err(ValueError::NotANumber(format!(
                    "Incorrect integer value: '{}' for column '{col}' at row 1",
                    String::from_utf8_lossy(s)
                )))
            }
            Read::Prefix => {
                return Err(ValueError::Truncated(format!(
                    "Data truncated for column '{col}' at row 1"
                )))
            }
            Read::Whole => {}
        }
        // Whole decimal text rounds as a decimal literal would.
        let text = String::from_utf8_lossy(s);
        let t = text.trim();
        if let Some(n) = parse_decimal(t) {
            return in_range(round(n), lo, hi).map(Some);
        }
    }
    let Some(n) = number(l)? else {
        return Ok(None);
    };
    in_range(round(n), lo, hi).map(Some)
}

fn in_range(v: Option<i128>, lo: i64, hi: i64) -> Result<i64, ValueError> {
    match v {
        Some(v) if v >= i128::from(lo) && v <= i128::from(hi) => Ok(v as i64),
        _ => Err(ValueError::OutOfRange),
    }
}

/// `n` rounded to an integer as MySQL stores it in an INTEGER column; `None` if not finite.
fn round(n: Number) -> Option<i128> {
    match n {
        Number::Int(i) => Some(i),
        Number::Decimal { neg, mag, frac } => {
            let m = if frac == Frac::BelowHalf {
                mag
            } else {
                mag + 1
            };
            Some(if neg { -m } else { m })
        }
        Number::Double(d) if d.is_finite() && d.abs() < 1e30 => Some(d.round_ties_even() as i128),
        Number::Double(_) => None,
    }
}

/// Where a number lies against the integer `i`.
fn cmp_int(n: Number, i: i128) -> Ordering {
    match n {
        Number::Int(v) => v.cmp(&i),
        // ±(mag + f), 0 < f < 1: above mag (below -mag) and below the next integer.
        Number::Decimal {
            neg: false, mag, ..
        } => {
            if mag >= i {
                Ordering::Greater
            } else {
                Ordering::Less
            }
        }
        Number::Decimal { neg: true, mag, .. } => {
            if -mag <= i {
                Ordering::Less
            } else {
                Ordering::Greater
            }
        }
        Number::Double(d) => d.partial_cmp(&(i as f64)).unwrap_or(Ordering::Less),
    }
}

/// The smallest integer ≥ `n`, and the largest ≤ `n` (saturated to i64).
fn ceil_floor(n: Number) -> (i64, i64) {
    let sat = |v: i128| v.clamp(i128::from(i64::MIN), i128::from(i64::MAX)) as i64;
    match n {
        Number::Int(i) => (sat(i), sat(i)),
        Number::Decimal {
            neg: false, mag, ..
        } => (sat(mag + 1), sat(mag)),
        Number::Decimal { neg: true, mag, .. } => (sat(-mag), sat(-mag - 1)),
        Number::Double(d) if d.is_nan() => (i64::MAX, i64::MIN),
        Number::Double(d) => (d.ceil() as i64, d.floor() as i64),
    }
}

/// The stored integer `l` compares equal to in `col = l`: `None` when none does (NULL, 5.5).
pub fn int_eq(l: &Lit) -> Result<Option<i64>, ValueError> {
    let Some(n) = number(l)? else {
        return Ok(None);
    };
    let (c, f) = ceil_floor(n);
    Ok((c == f && cmp_int(n, i128::from(c)) == Ordering::Equal).then_some(c))
}

/// The stored integers in `col BETWEEN lo AND hi`, as a closed range; `None` when the bounds
/// hold none (or one is NULL).
pub fn int_between(lo: &Lit, hi: &Lit) -> Result<Option<(i64, i64)>, ValueError> {
    let (Some(lo), Some(hi)) = (number(lo)?, number(hi)?) else {
        return Ok(None);
    };
    let (lo, hi) = (ceil_floor(lo).0, ceil_floor(hi).1);
    Ok((lo <= hi).then_some((lo, hi)))
}

/// MySQL's text of a double (`%g` with up to 17 significant digits, as `1000`, `1.5`,
/// `1e20`): integers below 10^15 without a fraction, otherwise the shortest form that reads
/// back the same.
pub fn double_text(d: f64) -> String {
    if d == d.trunc() && d.abs() < 1e15 {
        return format!("{}", d as i64);
    }
    let plain = format!("{d}");
    let exp = d.abs().log10().floor();
    if (-5.0..15.0).contains(&exp) {
        return plain;
    }
    // `1e20`, `1.5e-7`: Rust writes `1e20` and `1.5e-7` already with `{:e}`.
    format!("{d:e}")
}

/// The text a value is as a string (a CHAR column's contents, a selected literal); `None` for
/// NULL.
pub fn text(l: &Lit) -> Option<Vec<u8>> {
    match l {
        Lit::Null => None,
        Lit::Int(i) => Some(i.to_string().into_bytes()),
        Lit::Num(n) => Some(match parse_decimal(n) {
            // An exact decimal reads as written (`5.0` stays `5.0`), without a leading `+`
            // and with a zero before a bare point (`.5` is `0.5`).
            Some(_) => {
                let t = n.trim_start_matches('+');
                let (sign, digits) = t.strip_prefix('-').map_or(("", t), |d| ("-", d));
                let zero = if digits.starts_with('.') { "0" } else { "" };
                format!("{sign}{zero}{digits}").into_bytes()
            }
            None => double_text(n.parse::<f64>().unwrap_or(0.0)).into_bytes(),
        }),
        Lit::Double(d) => Some(double_text(*d).into_bytes()),
        Lit::Str(s) | Lit::Bits(s) => Some(s.clone()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn num(s: &str) -> Lit {
        Lit::Num(s.into())
    }

    #[test]
    fn an_integer_column_rounds_decimals_half_away_and_doubles_half_to_even() {
        let st = |l: &Lit| int_store(l, "k", i32::MIN.into(), i32::MAX.into());
        assert_eq!(st(&num("1e3")), Ok(Some(1000)));
        assert_eq!(st(&num("5.0")), Ok(Some(5)));
        assert_eq!(st(&num("2.5")), Ok(Some(3)));
        assert_eq!(st(&num("-2.5")), Ok(Some(-3)));
        assert_eq!(st(&num("-0.5")), Ok(Some(-1)));
        assert_eq!(st(&num("2.4999")), Ok(Some(2)));
        assert_eq!(st(&Lit::Double(2.5)), Ok(Some(2)));
        assert_eq!(st(&num("2.5e0")), Ok(Some(2)));
        assert_eq!(st(&Lit::Str(b" 7 ".to_vec())), Ok(Some(7)));
        assert_eq!(st(&Lit::Str(b"7.5".to_vec())), Ok(Some(8)));
        assert_eq!(st(&Lit::Bits(vec![0x41])), Ok(Some(65)));
        assert_eq!(st(&Lit::Null), Ok(None));
        assert!(matches!(
            st(&Lit::Str(b"7x".to_vec())),
            Err(ValueError::Truncated(_))
        ));
        assert!(matches!(
            st(&Lit::Str(b"x".to_vec())),
            Err(ValueError::NotANumber(_))
        ));
        assert_eq!(st(&Lit::Int(2_147_483_647)), Ok(Some(2_147_483_647)));
        assert_eq!(st(&Lit::Int(2_147_483_648)), Err(ValueError::OutOfRange));
        assert_eq!(st(&Lit::Int(-2_147_483_648)), Ok(Some(-2_147_483_648)));
        assert_eq!(st(&num("1e300")), Err(ValueError::OutOfRange));
    }

    #[test]
    fn a_value_equals_an_integer_only_when_it_is_one() {
        assert_eq!(int_eq(&num("5.0")), Ok(Some(5)));
        assert_eq!(int_eq(&Lit::Double(5.0)), Ok(Some(5)));
        assert_eq!(int_eq(&num("5.5")), Ok(None));
        assert_eq!(int_eq(&num("5e0")), Ok(Some(5)));
        assert_eq!(int_eq(&Lit::Str(b"5".to_vec())), Ok(Some(5)));
        assert_eq!(int_eq(&Lit::Str(b"5abc".to_vec())), Ok(Some(5)));
        assert_eq!(int_eq(&Lit::Str(b"abc".to_vec())), Ok(Some(0)));
        assert_eq!(int_eq(&Lit::Null), Ok(None));
        assert_eq!(int_eq(&Lit::Bits(vec![0x41])), Ok(Some(65)));
    }

    #[test]
    fn between_takes_the_integers_inside_fractional_bounds() {
        assert_eq!(int_between(&num("1.5"), &num("3.5")), Ok(Some((2, 3))));
        assert_eq!(int_between(&num("-1.5"), &num("-0.5")), Ok(Some((-1, -1))));
        assert_eq!(int_between(&Lit::Int(3), &Lit::Int(1)), Ok(None));
        assert_eq!(int_between(&Lit::Null, &Lit::Int(1)), Ok(None));
    }

    #[test]
    fn values_read_as_mysql_prints_them() {
        assert_eq!(text(&num("1e3")).unwrap(), b"1000");
        assert_eq!(text(&num("5.0")).unwrap(), b"5.0");
        assert_eq!(text(&num(".5")).unwrap(), b"0.5");
        assert_eq!(text(&num("-.5")).unwrap(), b"-0.5");
        assert_eq!(text(&num("1.5e0")).unwrap(), b"1.5");
        assert_eq!(text(&num("1e20")).unwrap(), b"1e20");
        assert_eq!(text(&Lit::Bits(b"ABC".to_vec())).unwrap(), b"ABC");
        assert_eq!(text(&Lit::Null), None);
    }
}
