//! Splitting a store file into its entries without parsing the tasks, and
//! working on the entries in parallel.
//!
//! [`split`] only finds where each task's JSON starts and ends; it never
//! decides on its own that a file is valid. Every value it returns is parsed
//! by serde_json afterwards (which checks its syntax in full), and anything
//! unusual (a task that is not an object, a duplicate key, odd whitespace)
//! makes it give up so that the caller falls back to parsing the whole file
//! with serde_json, whose verdict and error position are then the answer.

use std::borrow::Cow;

/// One entry of the top-level object: its key (unescaped) and the exact text
/// of its value.
pub(super) type RawEntry<'a> = (Cow<'a, str>, &'a str);

/// The entries of a file, with what was read of each, in runs that together
/// are in file order.
pub(super) type Runs<'a, R> = Vec<Vec<(Cow<'a, str>, &'a str, R)>>;

/// JSON's four whitespace bytes, exactly those serde_json skips.
pub(super) fn is_ws(b: u8) -> bool {
    matches!(b, b' ' | b'\n' | b'\t' | b'\r')
}

pub(super) fn skip_ws(b: &[u8], mut i: usize) -> usize {
    while i < b.len() && is_ws(b[i]) {
        i += 1;
    }
    i
}

/// `b[i]` is the opening quote of a string: the index just after its closing
/// quote. Escapes are skipped, not checked (serde_json checks them later).
pub(super) fn skip_str(b: &[u8], mut i: usize) -> Option<usize> {
    i += 1;
    loop {
        // Eight bytes at a time while none of them can end the string or
        // start an escape (the same trick serde_json uses).
        while let Some(chunk) = b.get(i..i + 8) {
            let word = u64::from_ne_bytes(chunk.try_into().expect("eight bytes"));
            if has_quote_or_backslash(word) {
                break;
            }
            i += 8;
        }
        match *b.get(i)? {
            b'"' => return Some(i + 1),
            b'\\' => i += 2,
            _ => i += 1,
        }
    }
}

const ONES: u64 = 0x0101_0101_0101_0101;

/// Non-zero if any byte of `v` is zero.
fn zero_byte(v: u64) -> u64 {
    v.wrapping_sub(ONES) & !v & (ONES << 7)
}

/// Whether any byte of `word` is `"` or `\`.
fn has_quote_or_backslash(word: u64) -> bool {
    zero_byte(word ^ (ONES * u64::from(b'"'))) | zero_byte(word ^ (ONES * u64::from(b'\\'))) != 0
}

/// Whether any byte of `word` is `"` or a bracket (`{`, `}`, `[`, `]`).
fn has_quote_or_bracket(word: u64) -> bool {
    // Clearing bit 5 maps `{` onto `[` and `}` onto `]`, and no other byte
    // onto either.
    let folded = word & (ONES * 0xdf);
    zero_byte(word ^ (ONES * u64::from(b'"')))
        | zero_byte(folded ^ (ONES * u64::from(b'[')))
        | zero_byte(folded ^ (ONES * u64::from(b']')))
        != 0
}

/// `b[i]` opens an object or array: the index just after the bracket that
/// closes it, counting brackets outside strings.
pub(super) fn skip_container(b: &[u8], mut i: usize) -> Option<usize> {
    let mut depth = 0usize;
    while i < b.len() {
        // Skip eight bytes at a time between the bytes that matter.
        while let Some(chunk) = b.get(i..i + 8) {
            let word = u64::from_ne_bytes(chunk.try_into().expect("eight bytes"));
            if has_quote_or_bracket(word) {
                break;
            }
            i += 8;
        }
        let Some(&c) = b.get(i) else { break };
        match c {
            b'"' => {
                i = skip_str(b, i)?;
                continue;
            }
            b'{' | b'[' => depth += 1,
            b'}' | b']' => {
                depth -= 1;
                if depth == 0 {
                    return Some(i + 1);
                }
            }
            _ => {}
        }
        i += 1;
    }
    None
}

/// The entries of a store file whose tasks are all objects, in file order;
/// `None` when the file is not (obviously) such an object. Neither the
/// values nor the uniqueness of the keys are checked here.
pub(super) fn split(text: &str) -> Option<Vec<RawEntry<'_>>> {
    let mut entries = Vec::with_capacity(text.len() / 800 + 1);
    if let Some(first) = first_key(text)? {
        entries_from(text, first, None, &mut entries, |_, rest| {
            Some(((), skip_container(rest.as_bytes(), 0)?))
        })?;
    }
    Some(entries.into_iter().map(|(k, v, ())| (k, v)).collect())
}

/// Where the first key of the top-level object starts (at its quote), or
/// `Some(None)` for an empty object.
fn first_key(text: &str) -> Option<Option<usize>> {
    let b = text.as_bytes();
    let i = skip_ws(b, 0);
    if b.get(i) != Some(&b'{') {
        return None;
    }
    let i = skip_ws(b, i + 1);
    if b.get(i) == Some(&b'}') {
        return (skip_ws(b, i + 1) == b.len()).then_some(None);
    }
    Some(Some(i))
}

/// The entries from `i`, where a key of the top-level object starts, until
/// the entry followed by `stop` (where the next key starts), or with `stop`
/// `None` until the end of the object and of the text, pushed onto `out`.
/// `f` reads each value: given the key and the text from the value on, it
/// gives its result and the length of the value. `None` if the text is not
/// such a run of entries.
fn entries_from<'a, R>(
    text: &'a str,
    mut i: usize,
    stop: Option<usize>,
    out: &mut Vec<(Cow<'a, str>, &'a str, R)>,
    f: impl Fn(&str, &'a str) -> Option<(R, usize)>,
) -> Option<()> {
    let b = text.as_bytes();
    loop {
        if b.get(i) != Some(&b'"') {
            return None;
        }
        let end = skip_str(b, i)?;
        let key = key(&text[i..end])?;
        i = skip_ws(b, end);
        if b.get(i) != Some(&b':') {
            return None;
        }
        i = skip_ws(b, i + 1);
        // A task is an object; anything else is for serde_json to judge.
        if b.get(i) != Some(&b'{') {
            return None;
        }
        let (r, len) = f(&key, &text[i..])?;
        let end = i + len;
        let json = text.get(i..end)?;
        out.push((key, json, r));
        i = skip_ws(b, end);
        match b.get(i) {
            Some(b',') => {
                i = skip_ws(b, i + 1);
                if let Some(stop) = stop {
                    if i == stop {
                        return Some(());
                    }
                    if i > stop {
                        return None;
                    }
                }
            }
            Some(b'}') if stop.is_none() => {
                return (skip_ws(b, i + 1) == b.len()).then_some(());
            }
            _ => return None,
        }
    }
}

/// One JSON value of type `T` at the start of `text`, and its length.
pub(super) fn parse_one<'a, T: serde::Deserialize<'a>>(text: &'a str) -> Option<(T, usize)> {
    let mut values = serde_json::Deserializer::from_str(text).into_iter::<T>();
    let value = values.next()?.ok()?;
    Some((value, values.byte_offset()))
}

/// [`parse_one`] of bytes (which serde_json checks are UTF-8 as it goes).
pub(super) fn parse_one_bytes<'a, T: serde::Deserialize<'a>>(
    bytes: &'a [u8],
) -> Option<(T, usize)> {
    let mut values = serde_json::Deserializer::from_slice(bytes).into_iter::<T>();
    let value = values.next()?.ok()?;
    Some((value, values.byte_offset()))
}

/// [`split`], reading every value with `f` (see [`entries_from`]; for
/// example [`parse_one`]), spread over the available cores: the text is cut
/// where a line seems to start a top-level key (`\n  "`, as rudder writes
/// them), each thread reads its own part, and each cut is confirmed by the
/// thread before it, which reads its part in context and must end exactly
/// there. If a cut was not a boundary after all, the text is split again in
/// one piece.
pub(super) fn split_map<'a, R: Send>(
    text: &'a str,
    f: impl Fn(&str, &'a str) -> Option<(R, usize)> + Sync,
) -> Option<Runs<'a, R>> {
    let Some(first) = first_key(text)? else {
        return Some(Vec::new());
    };
    let threads = threads_for(text.len());
    let mut cuts = vec![first];
    for k in 1..threads {
        let mut target = (text.len() * k / threads).max(cuts[cuts.len() - 1] + 1);
        // (Past the end when the first key would start at the end: a file
        // that is only `{` and white space, which splits to nothing.)
        if target > text.len() {
            break;
        }
        while !text.is_char_boundary(target) {
            target += 1;
        }
        let Some(found) = text[target..].find("\n  \"") else {
            break;
        };
        cuts.push(target + found + 3);
    }
    if cuts.len() > 1 {
        let (f, cuts) = (&f, &cuts);
        let parts: Option<Runs<R>> = std::thread::scope(|scope| {
            let run = move |k: usize| {
                let mut out = Vec::with_capacity((text.len() / cuts.len()) / 800 + 1);
                entries_from(text, cuts[k], cuts.get(k + 1).copied(), &mut out, f)?;
                Some(out)
            };
            let spawned: Vec<_> = (1..cuts.len())
                .map(|k| {
                    std::thread::Builder::new()
                        .spawn_scoped(scope, move || run(k))
                        .map_err(|_| k)
                })
                .collect();
            let mut runs = vec![run(0)];
            for handle in spawned {
                runs.push(match handle {
                    Ok(h) => h.join().unwrap_or_else(|p| std::panic::resume_unwind(p)),
                    Err(k) => run(k),
                });
            }
            runs.into_iter().collect()
        });
        if parts.is_some() {
            return parts;
        }
    }
    // One piece (a small file, or the cuts were not boundaries).
    let raw = split(text)?;
    let results = par_map(
        &raw,
        |(_, json)| json.len(),
        |(key, json)| f(key, json).and_then(|(r, len)| (len == json.len()).then_some(r)),
    )?;
    let run = raw.into_iter().zip(results);
    Some(vec![run.map(|((k, v), r)| (k, v, r)).collect()])
}

/// The text of a quoted key, unescaped; `None` if it is not a valid JSON string.
pub(super) fn key(quoted: &str) -> Option<Cow<'_, str>> {
    let inner = &quoted[1..quoted.len() - 1];
    if inner.bytes().all(|c| c >= 0x20 && c != b'\\') {
        Some(Cow::Borrowed(inner))
    } else {
        serde_json::from_str::<String>(quoted).ok().map(Cow::Owned)
    }
}

/// Below this many bytes of input, one thread does all the work.
const PARALLEL_MIN_BYTES: usize = 256 * 1024;
/// More threads than this do not pay for themselves on a file of this size.
const MAX_THREADS: usize = 8;

std::thread_local! {
    /// How many threads [`threads_for`] answers whatever the size, for the
    /// fuzz targets (see [`with_threads`]).
    static FORCED_THREADS: std::cell::Cell<Option<usize>> = const { std::cell::Cell::new(None) };
}

/// Run `f` with every split and parallel map it makes (on this thread)
/// shared between `threads` threads whatever the input's size, so that the
/// fuzz targets reach the cuts and the parallel reads on small inputs.
pub(crate) fn with_threads<T>(threads: usize, f: impl FnOnce() -> T) -> T {
    let before = FORCED_THREADS.with(|t| t.replace(Some(threads.max(1))));
    let out = f();
    FORCED_THREADS.with(|t| t.set(before));
    out
}

/// How many threads to share work on `bytes` bytes of input between.
pub(super) fn threads_for(bytes: usize) -> usize {
    if let Some(forced) = FORCED_THREADS.with(std::cell::Cell::get) {
        return forced;
    }
    std::thread::available_parallelism()
        .map_or(1, usize::from)
        .min(MAX_THREADS)
        .min(bytes / (PARALLEL_MIN_BYTES / 2) + 1)
}

/// `f` of every item, in order, spread over the available cores by the items'
/// `weight` (their size in bytes); `None` if `f` gives `None` for any item.
pub(super) fn par_map<T, R>(
    items: &[T],
    weight: impl Fn(&T) -> usize,
    f: impl Fn(&T) -> Option<R> + Sync,
) -> Option<Vec<R>>
where
    T: Sync,
    R: Send,
{
    let total: usize = items.iter().map(&weight).sum();
    let threads = threads_for(total);
    if threads < 2 || items.len() < 2 {
        return items.iter().map(f).collect();
    }
    // Cut the items into `threads` runs of about equal weight.
    let mut chunks = Vec::with_capacity(threads);
    let (mut start, mut acc) = (0, 0);
    for (i, item) in items.iter().enumerate() {
        acc += weight(item);
        if acc * threads >= total * (chunks.len() + 1) && chunks.len() + 1 < threads {
            chunks.push(&items[start..=i]);
            start = i + 1;
        }
    }
    chunks.push(&items[start..]);
    let f = &f;
    let run = move |chunk: &[T]| chunk.iter().map(f).collect::<Option<Vec<R>>>();
    std::thread::scope(|scope| {
        let (first, rest) = chunks.split_first().expect("at least one chunk");
        let spawned: Vec<_> = rest
            .iter()
            .map(|&chunk| {
                std::thread::Builder::new()
                    .spawn_scoped(scope, move || run(chunk))
                    .map_err(|_| chunk)
            })
            .collect();
        let mut out = run(first)?;
        out.reserve(items.len() - out.len());
        for handle in spawned {
            let part = match handle {
                Ok(h) => h.join().unwrap_or_else(|p| std::panic::resume_unwind(p)),
                // No thread to be had: do that part here.
                Err(chunk) => run(chunk),
            };
            out.extend(part?);
        }
        Some(out)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keys(text: &str) -> Option<Vec<(String, String)>> {
        split(text).map(|v| {
            v.into_iter()
                .map(|(k, r)| (k.into_owned(), r.to_string()))
                .collect()
        })
    }

    #[test]
    fn split_finds_each_task_exactly() {
        let text =
            "\n{ \"a\" :{\"x\": \"}\\\"{\", \"y\": [1, {\"z\": []}]} ,\r\n\t\"b\\u0062\": {}}\n ";
        assert_eq!(
            keys(text).unwrap(),
            vec![
                (
                    "a".into(),
                    "{\"x\": \"}\\\"{\", \"y\": [1, {\"z\": []}]}".into()
                ),
                ("bb".into(), "{}".into()),
            ]
        );
        assert_eq!(keys("{}").unwrap(), vec![]);
        assert_eq!(keys(" { } \n").unwrap(), vec![]);
    }

    #[test]
    fn split_gives_up_on_anything_unusual() {
        for text in [
            "",
            "[]",
            "{",
            "{\"a\": {}",
            "{\"a\": {}}x",
            "{\"a\": 1}",
            "{\"a\": []}",
            "{\"a\": {},}",
            "{\"a\" {}}",
            "{\"a\": {\"b\": \"}}",
            "{\"a\u{1}\": {}}",
            "{\"\\x\": {}}",
            "\u{feff}{}",
            "{}\u{a0}",
        ] {
            assert!(keys(text).is_none(), "{text:?}");
        }
    }

    /// A large store whose tasks hold lines that look like top-level keys.
    fn big(n: usize, decoy: bool) -> String {
        let mut text = String::from("{\n");
        for i in 0..n {
            let sep = if i + 1 == n { "" } else { "," };
            let inner = if decoy && i % 7 == 3 {
                "{\n  \"fake\": {\"x\": \"\\\"}\"},\n  \"fake2\": {}\n}"
            } else {
                "[1, \"}\", {\"y\": \"\\n  \\\"\"}]"
            };
            text += &format!(
                "  \"k{i}\": {{\n    \"task_id\": \"k{i}\",\n    \"v\": {inner},\n    \"pad\": \"{}\"\n  }}{sep}\n",
                "p".repeat(i % 300)
            );
        }
        text + "}\n"
    }

    #[test]
    fn split_map_agrees_with_split_wherever_it_cuts() {
        for text in [
            big(3_000, false),
            big(3_000, true),
            big(3, true),
            "{}".into(),
        ] {
            let expected = split(&text).unwrap();
            let got = split_map(&text, |k, rest| {
                let len = skip_container(rest.as_bytes(), 0)?;
                Some(((k.to_string(), len), len))
            })
            .unwrap()
            .concat();
            assert_eq!(got.len(), expected.len());
            for ((k, v, (k2, len)), (ek, ev)) in got.iter().zip(&expected) {
                assert_eq!((k, *v, k2.as_str(), *len), (ek, *ev, ek.as_ref(), ev.len()));
            }
        }
        // Compact tasks: no line starts a key; one piece.
        let compact = big(3_000, false).replace("\n", "");
        let skip = |_: &str, rest: &str| Some(((), skip_container(rest.as_bytes(), 0)?));
        assert_eq!(split_map(&compact, skip).unwrap().concat().len(), 3_000);
        let parsed = split_map(&compact, |_, rest| parse_one::<serde_json::Value>(rest))
            .unwrap()
            .concat();
        assert_eq!(parsed[2_999].2["task_id"], "k2999");
        // Broken after a cut: refused.
        let mut broken = big(3_000, false);
        broken.insert(broken.len() * 3 / 4, '"');
        assert!(split_map(&broken, skip).is_none());
        assert!(split(&broken).is_none());
        let truncated = big(3_000, false);
        assert!(split_map(&truncated[..truncated.len() - 3], skip).is_none());
        // One entry refused by `f`: refused.
        let text = big(3_000, true);
        assert!(split_map(&text, |k, rest| skip(k, rest).filter(|_| k != "k2999")).is_none());
        // A value longer than `f` says: refused.
        assert!(split_map(&text, |_, _| Some(((), 1))).is_none());
    }

    #[test]
    fn an_open_brace_and_white_space_splits_to_nothing_on_any_thread_count() {
        // The first key would start at the end: no cut may be looked for
        // past it (this once looped for ever on files over 128 KiB).
        let skip = |_: &str, rest: &str| Some(((), skip_container(rest.as_bytes(), 0)?));
        for text in [
            "{".to_string(),
            format!("{{{}", " ".repeat(PARALLEL_MIN_BYTES)),
        ] {
            for threads in [1, 2, 8] {
                assert!(with_threads(threads, || split_map(&text, skip)).is_none());
            }
        }
        assert!(split_map(&format!("{{{}", " ".repeat(PARALLEL_MIN_BYTES)), skip).is_none());
    }

    #[test]
    fn par_map_keeps_order_and_fails_as_a_whole() {
        let items: Vec<usize> = (0..10_000).collect();
        let heavy = |_: &usize| PARALLEL_MIN_BYTES;
        let doubled = par_map(&items, heavy, |i| Some(i * 2)).unwrap();
        assert_eq!(doubled, items.iter().map(|i| i * 2).collect::<Vec<_>>());
        assert!(par_map(&items, heavy, |&i| (i != 9_999).then_some(i)).is_none());
        assert!(
            par_map(&items[..0], heavy, |&i| Some(i))
                .unwrap()
                .is_empty()
        );
    }
}
