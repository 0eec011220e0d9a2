//! The binary log's on-disk format: a sequence of records, each a one-line header and a body,
//! readable with `cat`:
//!
//! ```text
//! xid 42 len 37 crc 1c291ca3
//! insert sbtest1 10001 4711
//! delete sbtest1 7
//! ```
//!
//! The header gives the transaction's XID, the body's length in bytes and a CRC-32 (IEEE) of
//! the header up to the checksum (`xid 42 len 37 `) followed by the body, so a record torn by
//! a crash (a short header, a short body, a checksum that does not match) is detected, and so
//! is a damaged XID or length (which would otherwise commit another transaction on recovery):
//! [`parse`] stops at the first such record and reports where the valid prefix ends, and
//! recovery truncates the file to it. Records of the older format, whose checksum covers the
//! body alone, are still read. Body lines are `insert <table> <id> <k>`,
//! `update <table> <id> <k>` and `delete <table> <id>`: the row ids and the indexed column, not
//! full row images (the full rows of a transaction being committed are in the table store's
//! prepared record, which recovery redoes).

use std::fmt::Write as _;

/// What one change of a transaction did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Op {
    /// A new row.
    Insert,
    /// A changed row.
    Update,
    /// A removed row.
    Delete,
}

impl Op {
    /// The word in the binlog.
    pub fn name(self) -> &'static str {
        match self {
            Op::Insert => "insert",
            Op::Update => "update",
            Op::Delete => "delete",
        }
    }
}

/// One change in a binlog record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BinlogChange {
    /// Insert, update or delete.
    pub op: Op,
    /// The table.
    pub table: String,
    /// The row's primary key.
    pub id: u32,
    /// The row's `k` after the change (0 for a delete).
    pub k: u32,
}

/// One committed transaction in the binlog.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BinlogRecord {
    /// The transaction's XID (unique across restarts).
    pub xid: u64,
    /// Its changes, in primary-key order per table.
    pub changes: Vec<BinlogChange>,
}

/// CRC-32 (IEEE 802.3, reflected, as zlib's `crc32`), bitwise: records are small and a table
/// would be a dependency or 1 KiB of constants for no measurable gain next to an fsync.
pub fn crc32(data: &[u8]) -> u32 {
    let mut crc = !0u32;
    for &b in data {
        crc ^= b as u32;
        for _ in 0..8 {
            crc = if crc & 1 != 0 {
                (crc >> 1) ^ 0xEDB8_8320
            } else {
                crc >> 1
            };
        }
    }
    !crc
}

/// Appends the encoded record for `xid` and `changes` to `out`.
pub fn encode(out: &mut Vec<u8>, xid: u64, changes: &[BinlogChange]) {
    let mut body = String::new();
    for c in changes {
        match c.op {
            Op::Delete => {
                let _ = writeln!(body, "delete {} {}", c.table, c.id);
            }
            op => {
                let _ = writeln!(body, "{} {} {} {}", op.name(), c.table, c.id, c.k);
            }
        }
    }
    let covered = format!("xid {xid} len {} ", body.len());
    let crc = crc32(&[covered.as_bytes(), body.as_bytes()].concat());
    out.extend_from_slice(format!("{covered}crc {crc:08x}\n").as_bytes());
    out.extend_from_slice(body.as_bytes());
}

/// The records of a binlog file's bytes, and the length of the valid prefix: a torn or corrupt
/// record and everything after it are not returned (the caller truncates to the length).
pub fn parse(data: &[u8]) -> (Vec<BinlogRecord>, usize) {
    let mut records = Vec::new();
    let mut at = 0usize;
    while at < data.len() {
        match parse_one(&data[at..]) {
            Some((r, used)) => {
                records.push(r);
                at += used;
            }
            None => break,
        }
    }
    (records, at)
}

/// Where a whole, valid record begins after `from`, if one does: bytes that do not parse
/// with a valid record after them are corruption inside the file, not a torn tail (a tail is
/// torn only at the end of an append-only file). Looked for at every byte, not only at line
/// starts: a record appended after a partial one that lacks its newline starts mid-line.
pub fn valid_record_after(data: &[u8], from: usize) -> Option<usize> {
    const HEADER: &[u8] = b"xid ";
    (from + 1..data.len().saturating_sub(HEADER.len() - 1))
        .filter(|&at| data[at..].starts_with(HEADER))
        // A header is at most MAX_HEADER bytes: a candidate without its newline within them
        // is not one, and is not scanned to the end of the data (that made a corrupt file
        // without newlines quadratic to open).
        .filter(|&at| {
            let end = data.len().min(at + MAX_HEADER);
            data[at..end].contains(&b'\n')
        })
        .find(|&at| parse_one(&data[at..]).is_some())
}

/// The longest header `encode` writes: `xid ` and `len ` with 20 digits each (`u64::MAX`),
/// `crc ` with 8 hex digits, three spaces and the newline.
const MAX_HEADER: usize = 4 + 20 + 1 + 4 + 20 + 1 + 4 + 8 + 1;

fn parse_one(data: &[u8]) -> Option<(BinlogRecord, usize)> {
    let nl = data.iter().position(|&b| b == b'\n')?;
    let header = std::str::from_utf8(&data[..nl]).ok()?;
    let f: Vec<&str> = header.split(' ').collect();
    if f.len() != 6 || f[0] != "xid" || f[2] != "len" || f[4] != "crc" {
        return None;
    }
    let xid: u64 = f[1].parse().ok()?;
    let len: usize = f[3].parse().ok()?;
    let crc = u32::from_str_radix(f[5], 16).ok()?;
    let body = data.get(nl + 1..(nl + 1).checked_add(len)?)?;
    // The header up to the checksum, then the body; or (the older format) the body alone. A
    // record written with the first cannot pass as the second but by a 2^-32 chance.
    let covered = &header.as_bytes()[..header.len() - f[5].len() - "crc ".len()];
    if crc32(&[covered, body].concat()) != crc && crc32(body) != crc {
        return None;
    }
    let mut changes = Vec::new();
    for line in std::str::from_utf8(body).ok()?.lines() {
        let w: Vec<&str> = line.split(' ').collect();
        let op = match w.first().copied()? {
            "insert" => Op::Insert,
            "update" => Op::Update,
            "delete" => Op::Delete,
            _ => return None,
        };
        let want = if op == Op::Delete { 3 } else { 4 };
        if w.len() != want {
            return None;
        }
        changes.push(BinlogChange {
            op,
            table: w[1].to_string(),
            id: w[2].parse().ok()?,
            k: if op == Op::Delete {
                0
            } else {
                w[3].parse().ok()?
            },
        });
    }
    Some((BinlogRecord { xid, changes }, nl + 1 + len))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Vec<BinlogChange> {
        vec![
            BinlogChange {
                op: Op::Insert,
                table: "t".into(),
                id: 11,
                k: 5,
            },
            BinlogChange {
                op: Op::Delete,
                table: "t".into(),
                id: 3,
                k: 0,
            },
        ]
    }

    #[test]
    fn crc32_matches_the_ieee_check_value() {
        assert_eq!(crc32(b"123456789"), 0xCBF4_3926);
    }

    #[test]
    fn records_round_trip_and_a_torn_tail_is_cut_at_the_last_whole_record() {
        let mut buf = Vec::new();
        encode(&mut buf, 1, &sample());
        let one = buf.len();
        encode(&mut buf, 2, &sample()[..1]);
        let (rs, end) = parse(&buf);
        assert_eq!(end, buf.len());
        assert_eq!(rs.len(), 2);
        assert_eq!(rs[0].changes, sample());
        assert_eq!(rs[1].xid, 2);
        assert!(String::from_utf8_lossy(&buf).contains("insert t 11 5\ndelete t 3\n"));
        for cut in one..buf.len() {
            let (rs, end) = parse(&buf[..cut]);
            assert_eq!((rs.len(), end), (1, one), "cut at {cut}");
        }
        let mut bad = buf.clone();
        let last = bad.len() - 2;
        bad[last] ^= 1;
        assert_eq!(parse(&bad).1, one, "a flipped byte fails the checksum");
    }

    #[test]
    fn corruption_with_valid_records_after_it_is_told_apart_from_a_torn_tail() {
        let mut buf = Vec::new();
        encode(&mut buf, 1, &sample());
        let one = buf.len();
        encode(&mut buf, 2, &sample());
        let two = buf.len();
        encode(&mut buf, 3, &sample()[..1]);
        // Every torn tail: no valid record after the cut.
        for cut in one..buf.len() {
            let (_, end) = parse(&buf[..cut]);
            assert_eq!(valid_record_after(&buf[..cut], end), None, "cut at {cut}");
        }
        // A byte flipped in the second record's body: the third, whole, comes after it.
        let mut bad = buf.clone();
        bad[two - 3] ^= 1;
        let (rs, end) = parse(&bad);
        assert_eq!((rs.len(), end), (1, one));
        assert_eq!(valid_record_after(&bad, end), Some(two));
    }

    #[test]
    fn a_whole_record_appended_after_a_partial_one_is_found_mid_line() {
        let mut buf = Vec::new();
        encode(&mut buf, 1, &sample());
        let one = buf.len();
        let mut torn = Vec::new();
        encode(&mut torn, 2, &sample());
        // Half of record 2 (cut inside its body, no newline at the cut), then record 3.
        buf.extend_from_slice(&torn[..torn.len() / 2 + 3]);
        let three = buf.len();
        encode(&mut buf, 3, &sample());
        let (rs, end) = parse(&buf);
        assert_eq!((rs.len(), end), (1, one));
        assert_eq!(valid_record_after(&buf, end), Some(three));
    }

    #[test]
    fn a_damaged_xid_or_length_fails_the_checksum_and_a_body_only_checksum_still_reads() {
        let mut buf = Vec::new();
        encode(&mut buf, 42, &sample());
        assert_eq!(parse(&buf).0.len(), 1);
        // xid 42 -> 43: the same body, another transaction.
        let mut bad = buf.clone();
        bad[5] = b'3';
        assert!(bad.starts_with(b"xid 43 "));
        assert_eq!(parse(&bad), (Vec::new(), 0));
        // A record as written before the header was covered: its body's CRC alone.
        let nl = buf.iter().position(|&b| b == b'\n').unwrap();
        let body = &buf[nl + 1..];
        let mut old = format!("xid 42 len {} crc {:08x}\n", body.len(), crc32(body)).into_bytes();
        old.extend_from_slice(body);
        let (rs, end) = parse(&old);
        assert_eq!((rs.len(), rs[0].xid, end), (1, 42, old.len()));
    }

    #[test]
    fn the_longest_header_fits_and_a_corrupt_tail_without_newlines_is_scanned_in_linear_time() {
        let mut buf = Vec::new();
        encode(&mut buf, u64::MAX, &[]);
        assert_eq!(
            buf.len(),
            "xid 18446744073709551615 len 0 crc 00000000\n".len()
        );
        assert!(buf.len() <= MAX_HEADER);
        assert_eq!(parse(&buf).0.len(), 1);
        // 2 MB of header-like bytes without a newline: each candidate looks MAX_HEADER
        // bytes ahead at most. (Not timed: quadratic, this took minutes.)
        let junk = b"xid 1 len 5 crc 0 ".repeat(110_000);
        assert_eq!(valid_record_after(&junk, 0), None);
    }

    #[test]
    fn a_header_with_an_absurd_length_is_not_a_record_and_does_not_overflow() {
        let data = format!("xid 1 len {} crc 0\nbody", usize::MAX).into_bytes();
        assert_eq!(parse(&data), (Vec::new(), 0));
    }
}
