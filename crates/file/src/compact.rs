//! JSON text made compact: the whitespace between tokens dropped, 64 bytes
//! at a time (`rudder list --json` prints a vouched file's tasks this way,
//! docs/durability.md "The encoder's word").
//!
//! Outside strings, the only blanks `serde_json`'s pretty writer puts
//! between tokens are line breaks, indents and the space after a key's
//! colon, and its compact writer puts none: so dropping every blank outside
//! strings turns one writer's text into the other's. Which bytes are inside
//! a string is read from masks of a 64-byte block (its quotes, backslashes
//! and blanks, one bit a byte): a quote mask's running XOR marks what lies
//! between an opening and a closing quote. A block holding a backslash (an
//! escape, rare in a task's text) is read byte by byte, carrying the state
//! across blocks; the kept bytes are copied as runs.

/// Write `text`, one JSON value, to `out` without the blanks between its
/// tokens: as `serde_json::to_writer` writes the value that
/// `serde_json::to_writer_pretty` wrote as `text` (at any indent, as the
/// file's encoder writes a task). `false` (with `out` holding a part of
/// it) when `text` ends inside a string, so it cannot be one value.
pub(crate) fn compact_pretty(text: &[u8], out: &mut Vec<u8>) -> bool {
    let mut state = State::default();
    let start_len = out.len();
    // Every run is copied as the 64 bytes from its start (one fixed-size
    // copy, cheaper than one sized to the run), so `out` is made room for
    // once (what is kept is never longer than `text`) and cut back to what
    // was kept at the end.
    out.resize(start_len + text.len() + BLOCK, 0);
    let mut pos = start_len;
    let whole = text.len() - text.len() % BLOCK;
    let mut base = 0;
    while base < whole {
        let block: &[u8; BLOCK] = text[base..base + BLOCK]
            .try_into()
            .expect("a block is 64 bytes");
        let masks = Masks::of(block);
        if masks.backslash != 0 || state.escaped {
            pos = state.bytes(block, out, pos);
            base += BLOCK;
            continue;
        }
        let mut inside = running_xor(masks.quote);
        if state.inside {
            inside = !inside;
        }
        state.inside = inside >> 63 == 1;
        let mut keep = !(masks.blank & !inside);
        while keep != 0 {
            let start = keep.trailing_zeros() as usize;
            let len = (!(keep >> start)).trailing_zeros() as usize;
            let end = start + len;
            let from = base + start;
            match text.get(from..from + BLOCK) {
                Some(ahead) => out[pos..pos + BLOCK].copy_from_slice(ahead),
                None => out[pos..pos + len].copy_from_slice(&block[start..end]),
            }
            pos += len;
            keep = if end >= BLOCK { 0 } else { keep & (!0 << end) };
        }
        base += BLOCK;
    }
    pos = state.bytes(&text[whole..], out, pos);
    out.truncate(pos);
    !state.inside
}

const BLOCK: usize = 64;

/// Where the reading stands at the end of what was read.
#[derive(Default)]
struct State {
    /// Inside a string.
    inside: bool,
    /// Just after a backslash inside a string: the next byte is escaped.
    escaped: bool,
}

impl State {
    /// Read `bytes` one at a time, writing what is kept to `out` from
    /// `pos` on (which has room for all of them); where the writing ended.
    fn bytes(&mut self, bytes: &[u8], out: &mut [u8], mut pos: usize) -> usize {
        for &c in bytes {
            if self.inside {
                if self.escaped {
                    self.escaped = false;
                } else if c == b'\\' {
                    self.escaped = true;
                } else if c == b'"' {
                    self.inside = false;
                }
            } else if is_blank(c) {
                continue;
            } else {
                self.inside = c == b'"';
            }
            out[pos] = c;
            pos += 1;
        }
        pos
    }
}

/// JSON's whitespace.
fn is_blank(c: u8) -> bool {
    matches!(c, b' ' | b'\n' | b'\t' | b'\r')
}

/// Bit `i` set where byte `i` of `x`'s block follows an odd number of
/// set bits at or before it: between an opening quote (included) and its
/// closing one (not included).
fn running_xor(mut x: u64) -> u64 {
    x ^= x << 1;
    x ^= x << 2;
    x ^= x << 4;
    x ^= x << 8;
    x ^= x << 16;
    x ^= x << 32;
    x
}

/// One bit a byte of a 64-byte block.
struct Masks {
    quote: u64,
    backslash: u64,
    blank: u64,
}

impl Masks {
    /// With SSE2 (every x86-64 has it), 16 bytes a compare.
    #[cfg(target_arch = "x86_64")]
    #[allow(unsafe_code)] // the SAFETY comment says why
    fn of(block: &[u8; BLOCK]) -> Masks {
        use std::arch::x86_64::{
            __m128i, _mm_cmpeq_epi8, _mm_loadu_si128, _mm_movemask_epi8, _mm_or_si128,
            _mm_set1_epi8,
        };
        let mut m = Masks {
            quote: 0,
            backslash: 0,
            blank: 0,
        };
        // SAFETY: SSE2 is part of x86-64 itself, so these instructions
        // exist wherever this compiles; the load reads 16 bytes of a
        // 16-byte array (unaligned loads allowed).
        unsafe {
            let byte = |c: u8| _mm_set1_epi8(c as i8);
            let (quote, backslash) = (byte(b'"'), byte(b'\\'));
            let (space, newline, tab, cr) = (byte(b' '), byte(b'\n'), byte(b'\t'), byte(b'\r'));
            for (i, part) in block.chunks_exact(16).enumerate() {
                let part: &[u8; 16] = part.try_into().expect("16 bytes");
                let v = _mm_loadu_si128(part.as_ptr().cast::<__m128i>());
                let bits = |x: __m128i| u64::from(_mm_movemask_epi8(x) as u16) << (16 * i);
                m.quote |= bits(_mm_cmpeq_epi8(v, quote));
                m.backslash |= bits(_mm_cmpeq_epi8(v, backslash));
                m.blank |= bits(_mm_or_si128(
                    _mm_or_si128(_mm_cmpeq_epi8(v, space), _mm_cmpeq_epi8(v, newline)),
                    _mm_or_si128(_mm_cmpeq_epi8(v, tab), _mm_cmpeq_epi8(v, cr)),
                ));
            }
        }
        m
    }

    /// Elsewhere, a byte at a time.
    #[cfg(not(target_arch = "x86_64"))]
    fn of(block: &[u8; BLOCK]) -> Masks {
        let mut m = Masks {
            quote: 0,
            backslash: 0,
            blank: 0,
        };
        for (i, &c) in block.iter().enumerate() {
            m.quote |= u64::from(c == b'"') << i;
            m.backslash |= u64::from(c == b'\\') << i;
            m.blank |= u64::from(is_blank(c)) << i;
        }
        m
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::Value;

    /// The value the text is, written compact.
    fn compact_of(text: &[u8]) -> Vec<u8> {
        serde_json::to_vec(&serde_json::from_slice::<Value>(text).expect("JSON")).expect("writes")
    }

    /// Long strings of quotes, backslashes, blanks and escapes, so that
    /// strings, escapes and blank runs cross the 64-byte blocks at every
    /// place.
    fn long_text() -> impl Strategy<Value = String> {
        prop::collection::vec(
            prop_oneof![
                Just("\\".to_string()),
                Just("\"".to_string()),
                Just(" ".to_string()),
                Just("\n".to_string()),
                Just("\t".to_string()),
                Just("é".to_string()),
                Just("\u{1}".to_string()),
                "[a-z: ]{1,70}",
            ],
            0..40,
        )
        .prop_map(|parts| parts.concat())
    }

    fn value() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::from),
            any::<i64>().prop_map(Value::from),
            long_text().prop_map(Value::from),
        ];
        leaf.prop_recursive(3, 24, 6, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..6).prop_map(Value::from),
                prop::collection::vec((long_text(), inner), 0..6)
                    .prop_map(|m| Value::Object(m.into_iter().collect())),
            ]
        })
    }

    proptest! {
        /// Pretty text at every alignment against the 64-byte blocks (a
        /// lead of blanks shifts it), and the compact writer's own text,
        /// come out as the compact writer writes the value.
        #[test]
        fn any_layout_at_any_alignment_comes_out_compact(v in value(), lead in 0usize..64) {
            let compact = serde_json::to_vec(&v).expect("writes");
            for text in [serde_json::to_vec_pretty(&v).expect("writes"), compact.clone()] {
                let mut shifted = vec![b' '; lead];
                shifted.extend_from_slice(&text);
                let mut out = b"kept".to_vec();
                prop_assert!(compact_pretty(&shifted, &mut out));
                prop_assert_eq!(&out[..4], b"kept");
                prop_assert_eq!(String::from_utf8_lossy(&out[4..]), String::from_utf8_lossy(&compact));
            }
        }
    }

    #[test]
    fn escapes_at_a_blocks_edge_carry_into_the_next() {
        // The backslash is the last byte of the first block, the escaped
        // quote the first of the next, then blanks that are the string's.
        for at in 60..68 {
            let mut text = vec![b' '; at];
            text.extend_from_slice(b"[\"a\\\"  b\" ,\n  \"\\\\\"  ]");
            let mut out = Vec::new();
            assert!(compact_pretty(&text, &mut out), "at {at}");
            assert_eq!(out, compact_of(&text), "at {at}");
        }
    }

    #[test]
    fn text_ending_inside_a_string_is_refused() {
        for text in [&b"\"abc"[..], b"[\"a\\\"]", &[b'"'; 65]] {
            assert!(!compact_pretty(text, &mut Vec::new()), "{text:?}");
        }
        let mut long = vec![b'"'; 1];
        long.extend_from_slice(&[b'x'; 200]);
        assert!(!compact_pretty(&long, &mut Vec::new()));
        long.push(b'"');
        assert!(compact_pretty(&long, &mut Vec::new()));
    }
}
