//! The sysbench table: `sbtest(id INT PRIMARY KEY, k INT, c CHAR(120), pad CHAR(60))` with a
//! secondary index on `k`, stored in redb as
//! * `<name>`: `id → k (4 bytes LE) ‖ c (120 bytes) ‖ pad (60 bytes)`;
//! * `<name>_k`: `(k << 32 | id) → ()`, ordered by `k` then `id`.

/// Length of `c` (`CHAR(120)`).
pub const C_LEN: usize = 120;
/// Length of `pad` (`CHAR(60)`).
pub const PAD_LEN: usize = 60;
/// Encoded row length.
pub const ROW_LEN: usize = 4 + C_LEN + PAD_LEN;

/// One row of a sysbench table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Row {
    /// Primary key.
    pub id: u32,
    /// The indexed column.
    pub k: u32,
    /// `CHAR(120)`.
    pub c: [u8; C_LEN],
    /// `CHAR(60)`.
    pub pad: [u8; PAD_LEN],
}

/// A small deterministic generator (splitmix64), so a table of N rows is the same every time.
fn mix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// sysbench's `###########-###########-…` pattern of random digits.
fn digits<const N: usize>(seed: u64) -> [u8; N] {
    let mut out = [b' '; N];
    let mut x = seed;
    for (i, b) in out.iter_mut().enumerate() {
        if i % 12 == 11 {
            *b = b'-';
        } else {
            x = mix(x);
            *b = b'0' + (x % 10) as u8;
        }
    }
    out
}

impl Row {
    /// The row with primary key `id` of a table of `rows` rows (sysbench gives `k` a random
    /// value in 1..=rows).
    pub fn generate(id: u32, rows: u32) -> Row {
        let r = mix(id as u64);
        Row {
            id,
            k: 1 + (r % rows.max(1) as u64) as u32,
            c: digits::<C_LEN>(r ^ 0xC),
            pad: digits::<PAD_LEN>(r ^ 0xA),
        }
    }

    /// The stored value bytes.
    pub fn encode(&self) -> [u8; ROW_LEN] {
        let mut v = [0u8; ROW_LEN];
        v[..4].copy_from_slice(&self.k.to_le_bytes());
        v[4..4 + C_LEN].copy_from_slice(&self.c);
        v[4 + C_LEN..].copy_from_slice(&self.pad);
        v
    }

    /// Decodes a stored value for primary key `id`.
    pub fn decode(id: u32, v: &[u8]) -> Row {
        let mut c = [0u8; C_LEN];
        let mut pad = [0u8; PAD_LEN];
        c.copy_from_slice(&v[4..4 + C_LEN]);
        pad.copy_from_slice(&v[4 + C_LEN..ROW_LEN]);
        Row {
            id,
            k: u32::from_le_bytes([v[0], v[1], v[2], v[3]]),
            c,
            pad,
        }
    }
}

/// The secondary-index key for `(k, id)`.
pub fn index_key(k: u32, id: u32) -> u64 {
    (k as u64) << 32 | id as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_are_deterministic_and_round_trip() {
        let r = Row::generate(42, 1000);
        assert_eq!(r, Row::generate(42, 1000));
        assert!((1..=1000).contains(&r.k));
        assert_eq!(Row::decode(42, &r.encode()), r);
        assert_eq!(r.c[11], b'-');
        assert!(r.c[0].is_ascii_digit());
    }

    #[test]
    fn index_keys_order_by_k_then_id() {
        assert!(index_key(1, 9) < index_key(2, 0));
        assert!(index_key(2, 1) < index_key(2, 2));
    }
}
