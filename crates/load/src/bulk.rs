//! The binary body of the control protocol's bulk frame: per-message `u64` arrays (msgs'
//! receive stamps) that would cost ~15 bytes and a float-free but slow JSON number each.
//!
//! Sans-IO: [`encode`] appends a body to a buffer and [`decode`] checks and parses one; the
//! framing (the 4-byte length in front) is [`crate::proto`]'s.
//!
//! ```text
//! body = MAGIC ("TLB1", 4 bytes) · count (u64 little-endian) · count varints
//! varint k = LEB128 of zigzag(values[k] - values[k-1])   (values[-1] = 0, wrapping)
//! ```
//!
//! Receive stamps never decrease and many messages share one read's stamp, so the deltas are
//! small: 100,000 stamps of a 1-byte msgs run take ~1-2 bytes each instead of 15 as JSON, and
//! encoding or decoding them is a tight loop of well under a millisecond. Zigzag keeps any
//! `u64` sequence exact (a stamp that goes backwards costs bytes, not correctness).

use crate::error::{LoadError, Result};

/// First bytes of every bulk body; the digit is the encoding's version. A JSON frame starts
/// with `{`, so the two can never be confused.
pub const MAGIC: [u8; 4] = *b"TLB1";
/// Largest array accepted (msgs' largest run).
const MAX_VALUES: u64 = tcplab_results::msgs::MAX_COUNT;
/// A u64 needs at most 10 LEB128 bytes.
const MAX_VARINT: usize = 10;

/// Appends the bulk body of `values` to `out`.
pub fn encode(values: &[u64], out: &mut Vec<u8>) {
    out.reserve(MAGIC.len() + 8 + values.len() * 2 + values.len() / 8);
    out.extend_from_slice(&MAGIC);
    out.extend_from_slice(&(values.len() as u64).to_le_bytes());
    let mut prev = 0u64;
    for &v in values {
        put_varint(out, zigzag(v.wrapping_sub(prev) as i64));
        prev = v;
    }
}

/// Parses a bulk body; anything but exactly one well-formed array is a protocol error that
/// says what was wrong.
pub fn decode(body: &[u8]) -> Result<Vec<u64>> {
    let rest = body.strip_prefix(&MAGIC).ok_or_else(|| {
        bad(format!(
            "expected a binary stamps frame (magic {:?}), got one starting {:?}",
            String::from_utf8_lossy(&MAGIC),
            String::from_utf8_lossy(&body[..body.len().min(8)]),
        ))
    })?;
    let (count, mut rest) = rest
        .split_first_chunk::<8>()
        .map(|(c, r)| (u64::from_le_bytes(*c), r))
        .ok_or_else(|| bad("stamps frame shorter than its 12-byte header".into()))?;
    // Each value takes at least one byte, so the body bounds the allocation.
    if count > MAX_VALUES || count > rest.len() as u64 {
        return Err(bad(format!(
            "stamps frame claims {count} values in {} bytes (at most {MAX_VALUES})",
            rest.len()
        )));
    }
    let mut values = Vec::with_capacity(count as usize);
    let mut prev = 0u64;
    for k in 0..count {
        let (z, used) = get_varint(rest).ok_or_else(|| {
            bad(format!(
                "stamps frame: value {k} of {count} is truncated or longer than 10 bytes"
            ))
        })?;
        rest = &rest[used..];
        prev = prev.wrapping_add(unzigzag(z) as u64);
        values.push(prev);
    }
    if !rest.is_empty() {
        return Err(bad(format!(
            "stamps frame has {} bytes after its {count} values",
            rest.len()
        )));
    }
    Ok(values)
}

/// A malformed stamps frame: what was wrong, and what to check.
fn bad(msg: String) -> LoadError {
    LoadError::Protocol(format!(
        "{msg}; check that the peer is a tcplab of protocol version {}",
        crate::proto::VERSION
    ))
}

/// Maps small magnitudes of either sign to small unsigned numbers (0, -1, 1, -2 → 0, 1, 2, 3).
fn zigzag(d: i64) -> u64 {
    ((d << 1) ^ (d >> 63)) as u64
}

fn unzigzag(z: u64) -> i64 {
    ((z >> 1) as i64) ^ -((z & 1) as i64)
}

#[inline]
fn put_varint(out: &mut Vec<u8>, mut z: u64) {
    if z < 0x4000 {
        // One or two bytes: the common case, without the loop.
        if z < 0x80 {
            out.push(z as u8);
        } else {
            out.extend_from_slice(&[(z as u8) | 0x80, (z >> 7) as u8]);
        }
        return;
    }
    while z >= 0x80 {
        out.push((z as u8) | 0x80);
        z >>= 7;
    }
    out.push(z as u8);
}

/// Reads one LEB128 varint: (value, bytes used), or `None` when truncated or overlong.
#[inline]
fn get_varint(buf: &[u8]) -> Option<(u64, usize)> {
    // Fast paths for the one- and two-byte deltas that make up nearly every stamps frame.
    match *buf {
        [b0, ..] if b0 < 0x80 => return Some((u64::from(b0), 1)),
        [b0, b1, ..] if b1 < 0x80 => {
            return Some((u64::from(b0 & 0x7f) | u64::from(b1) << 7, 2));
        }
        _ => {}
    }
    let mut z = 0u64;
    for (i, &b) in buf.iter().take(MAX_VARINT).enumerate() {
        let bits = u64::from(b & 0x7f);
        // The tenth byte may only carry the top bit of a u64.
        if i == MAX_VARINT - 1 && bits > 1 {
            return None;
        }
        z |= bits << (7 * i);
        if b & 0x80 == 0 {
            return Some((z, i + 1));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};

    fn round_trip(values: &[u64]) -> Vec<u8> {
        let mut body = Vec::new();
        encode(values, &mut body);
        assert_eq!(decode(&body).expect("decode"), values);
        body
    }

    #[test]
    fn stamps_round_trip_and_are_small() {
        // 100,000 stamps 1.5 µs apart, 3 messages per read: ~2 bytes each on the wire.
        let stamps: Vec<u64> = (0..100_000u64)
            .map(|i| 10_512_345_678_901 + (i / 3) * 4_500)
            .collect();
        let body = round_trip(&stamps);
        assert!(body.len() < 2 * stamps.len(), "{} bytes", body.len());
        let json = serde_json::to_vec(&stamps).expect("json");
        assert!(
            json.len() > 7 * body.len(),
            "{} vs {}",
            json.len(),
            body.len()
        );
    }

    #[test]
    fn any_u64_sequence_round_trips() {
        round_trip(&[]);
        round_trip(&[0, u64::MAX, 0, 1, u64::MAX - 1, 1 << 63, 5, 5, 4]);
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(7);
        let v: Vec<u64> = (0..10_000).map(|_| rng.random()).collect();
        round_trip(&v);
        for d in [0i64, -1, 1, i64::MIN, i64::MAX, -64, 64] {
            assert_eq!(unzigzag(zigzag(d)), d);
        }
        assert_eq!([0, -1, 1, -2].map(zigzag), [0, 1, 2, 3]);
    }

    #[test]
    fn malformed_bodies_are_named_errors() {
        let err = |b: &[u8]| decode(b).expect_err("malformed").to_string();
        assert!(err(b"{\"type\":\"report\"}").contains("expected a binary stamps frame"));
        assert!(err(b"TLB1\x01").contains("12-byte header"));
        let mut body = Vec::new();
        encode(&[1, 2, 300], &mut body);
        assert!(err(&body[..body.len() - 1]).contains("truncated"));
        let mut long = body.clone();
        long.push(0);
        assert!(err(&long).contains("1 bytes after its 3 values"));
        // A count larger than the body could hold is refused before allocating.
        let mut huge = MAGIC.to_vec();
        huge.extend_from_slice(&u64::MAX.to_le_bytes());
        assert!(err(&huge).contains("claims"));
        // An 11-byte varint, and a tenth byte carrying more than the top bit.
        let mut over = MAGIC.to_vec();
        over.extend_from_slice(&1u64.to_le_bytes());
        over.extend_from_slice(&[0xff; 10]);
        over.push(0);
        assert!(err(&over).contains("longer than 10 bytes"));
        let mut top = MAGIC.to_vec();
        top.extend_from_slice(&1u64.to_le_bytes());
        top.extend_from_slice(&[0xff; 9]);
        top.push(0x01);
        assert_eq!(
            decode(&top).expect("u64::MAX zigzagged"),
            [unzigzag(u64::MAX) as u64]
        );
    }
}
