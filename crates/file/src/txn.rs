//! The JSON file's transaction: [`FileTxn`] keeps every task it was not
//! asked for as the exact text it had in the file and writes that text back
//! unchanged.

use std::borrow::Cow;
use std::cell::{Cell, OnceCell, RefCell};
use std::collections::{HashMap, HashSet};
use std::path::Path;

use indexmap::IndexMap;

use crate::index::TaskIndex;
use std::time::Duration;

use chrono::{DateTime, Utc};
use rudder_core::Summary;
use rudder_core::query::{Stale, StatusCounts, SummaryBuf};
use rudder_core::trail::{TrailEntry, TrailQuery};
use rudder_core::{StoreError, Transaction, limits};
use rudder_model::task::{Task, TaskMap};

use crate::{codec, compact, scan};

/// Where one task of the file stands (byte offsets into the file).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Span {
    /// Where the text before the key starts: the end of the previous value,
    /// or 0 for the first task.
    lead: usize,
    /// The value: `start..end`.
    start: usize,
    end: usize,
}

/// A task of the file as it was read.
struct Orig {
    span: Span,
    /// The text from `lead` to `start` is what the encoder writes before
    /// this task at its place (`{\n  "id": ` first, `,\n  "id": ` after).
    canonical: bool,
    /// The value holds no line that starts like a top-level key (`\n  "`).
    plain: bool,
}

/// Every task of the file, in file order.
struct Originals<'a> {
    entries: IndexMap<Cow<'a, str>, Orig>,
    /// The text after the last value is `\n}\n`.
    canonical_tail: bool,
}

impl Originals<'_> {
    /// Every task in the layout the encoder writes, and no line inside a
    /// task that starts like a top-level key.
    fn as_written(&self) -> bool {
        let entries = self.entries.values().all(|o| o.canonical && o.plain);
        entries && (self.canonical_tail || self.entries.is_empty())
    }
}

/// A line that starts a top-level key in the layout the encoder writes.
const KEY_LINE: &[u8] = b"\n  \"";

/// Where each task's key line starts (its `\n`) in a trusted file, in file
/// order. On a file whose writer vouched for every task's text
/// (`canonical`: each is exactly what the encoder writes), by walking from
/// task to task: a task's value closes on the one line of its text that is
/// `  }` (its own fields are indented four spaces, nested values further,
/// and a string never holds a raw line break), and the next key line or
/// the file's closing `\n}\n` follows at once; searching for that closing
/// line looks at a task's closing brace, where searching for the key lines
/// themselves stops at every line break. Any other trusted file may hold a
/// task's text copied as another program wrote it (one that holds no key
/// line, but may close on any line): there every key line is searched for.
/// `None`: a vouched file that is not in the encoder's layout (or is
/// `{}\n`).
pub(crate) fn key_lines(bytes: &[u8], canonical: bool) -> Option<Vec<usize>> {
    if !canonical {
        return Some(memchr::memmem::find_iter(bytes, KEY_LINE).collect());
    }
    let closing = json_finder(b"\n  }");
    let mut lines = Vec::new();
    let mut line = bytes.starts_with(b"{\n  \"").then_some(1)?;
    loop {
        lines.push(line);
        let close = line + 1 + closing.find(&bytes[line + 1..])?;
        let after = &bytes[close + 4..];
        if after.starts_with(b",\n  \"") {
            line = close + 5;
        } else if after == b"\n}\n" {
            return Some(lines);
        } else {
            return None;
        }
    }
}

/// The tasks of a store file, parsed only as far as an operation needs.
///
/// Checked (from [`FileTxn::parse`]): every task was checked and indexed
/// when the file was read. Trusted (from [`FileTxn::trusted`]): the file is
/// known to be one that a rudder writer checked and wrote in its own layout,
/// so a task is found by searching for its key's line, and the file is
/// split and indexed only when an operation asks for every task. A trusted
/// file that turns out not to be what it should (it cannot be, short of a
/// file-system bug) poisons the transaction: the backend then runs it again
/// on the checked path, whose verdict stands.
pub(super) struct FileTxn<'a> {
    path: &'a Path,
    bytes: &'a [u8],
    trusted: bool,
    /// Trusted, and every task's text is what the encoder writes for the
    /// task it reads back as (the writer's record vouches for it:
    /// [`codec::ENCODER_VERSION`]).
    canonical: bool,
    /// Every task of the file, in file order: from the start when checked,
    /// on first need when trusted (`None`: the file does not split).
    all: OnceCell<Option<Originals<'a>>>,
    /// What the scans need of each of `all`, in the same order.
    index: OnceCell<Option<Vec<TaskIndex<'a>>>>,
    /// Tasks found by their key's line, before `all` (trusted only).
    found: RefCell<Vec<(String, Option<Span>)>>,
    poisoned: Cell<bool>,
    /// Tasks of the file read for a change: written anew at their place.
    changed: HashMap<String, Box<Task>>,
    /// Tasks of the file removed.
    removed: HashSet<String>,
    /// Whether every task of the file was removed at once.
    cleared: bool,
    /// New tasks (and tasks of the file removed and added again), in the
    /// order they were added: written after the others.
    added: IndexMap<String, Box<Task>>,
}

/// One part of a file being written: a range of the file that was read,
/// or of the new text.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Part {
    Read(std::ops::Range<usize>),
    New(std::ops::Range<usize>),
}

/// A file's new content, as parts of the file read and of new text.
pub(super) struct Encoded<'a> {
    read: &'a [u8],
    new: Vec<u8>,
    parts: Vec<Part>,
    /// Every line of the content that starts like a top-level key (`\n  "`)
    /// starts one (see [`FileTxn::trusted`]).
    pub plain: bool,
    /// Every task's text of the content is what the encoder writes for the
    /// task it reads back as: each task written anew reads back as itself,
    /// and each one copied from the file read was vouched for
    /// ([`FileTxn::with_canonical`]). What the writer's record then says.
    pub canonical: bool,
}

impl Encoded<'_> {
    /// The parts in order, for one vectored write.
    pub fn slices(&self) -> Vec<&[u8]> {
        self.parts
            .iter()
            .map(|p| match p {
                Part::Read(r) => &self.read[r.clone()],
                Part::New(r) => &self.new[r.clone()],
            })
            .collect()
    }

    /// The whole content in one buffer.
    pub fn to_vec(&self) -> Vec<u8> {
        self.slices().concat()
    }

    fn push_read(&mut self, range: std::ops::Range<usize>) {
        if range.is_empty() {
            return;
        }
        if let Some(Part::Read(last)) = self.parts.last_mut()
            && last.end == range.start
        {
            last.end = range.end;
            return;
        }
        self.parts.push(Part::Read(range));
    }

    fn push_new(&mut self, write: impl FnOnce(&mut Vec<u8>)) {
        let start = self.new.len();
        write(&mut self.new);
        let range = start..self.new.len();
        if let Some(Part::New(last)) = self.parts.last_mut()
            && last.end == range.start
        {
            last.end = range.end;
            return;
        }
        self.parts.push(Part::New(range));
    }
}

impl<'a> FileTxn<'a> {
    /// An empty store (no file yet).
    pub fn empty(path: &'a Path) -> Self {
        let all = OnceCell::from(Some(Originals {
            entries: IndexMap::new(),
            canonical_tail: false,
        }));
        FileTxn::new(path, &[], false, all, OnceCell::from(Some(Vec::new())))
    }

    fn new(
        path: &'a Path,
        bytes: &'a [u8],
        trusted: bool,
        all: OnceCell<Option<Originals<'a>>>,
        index: OnceCell<Option<Vec<TaskIndex<'a>>>>,
    ) -> Self {
        FileTxn {
            path,
            bytes,
            trusted,
            canonical: false,
            all,
            index,
            found: RefCell::default(),
            poisoned: Cell::new(false),
            changed: HashMap::new(),
            removed: HashSet::new(),
            cleared: false,
            added: IndexMap::new(),
        }
    }

    /// Split and check a store file. `None` unless the file is a valid store
    /// (then every task is known to deserialize); `None` may also mean the
    /// file is valid but unusual (say, a repeated key): the caller then reads
    /// it with [`codec::decode`], whose verdict and error positions are final.
    pub fn parse(path: &'a Path, bytes: &'a [u8]) -> Option<Self> {
        let (all, index) = split_and_index(bytes)?;
        let txn = FileTxn::new(
            path,
            bytes,
            false,
            OnceCell::from(Some(all)),
            OnceCell::from(Some(index)),
        );
        Some(txn)
    }

    /// A store file that a rudder writer checked and wrote, as [`FileTxn::encode`]
    /// writes, with every line that starts like a top-level key (`\n  "`)
    /// starting one (the writer recorded this with the file's identity,
    /// which matches). Nothing is checked beyond the file's first and last
    /// bytes here; `None` when even those are not what they must be.
    pub fn trusted(path: &'a Path, bytes: &'a [u8]) -> Option<Self> {
        let shaped =
            bytes == b"{}\n" || (bytes.starts_with(b"{\n  \"") && bytes.ends_with(b"\n}\n"));
        shaped.then(|| FileTxn::new(path, bytes, true, OnceCell::new(), OnceCell::new()))
    }

    /// The trusted file, with the writer's word (`canonical`) that every
    /// task's text is what the encoder writes for the task it reads back
    /// as; ignored on a file that is not trusted.
    pub fn with_canonical(mut self, canonical: bool) -> Self {
        self.canonical = canonical && self.trusted;
        self
    }

    /// Whether the file is in the layout the encoder writes, with every line
    /// that starts like a top-level key starting one: what the trusted path
    /// relies on ([`FileTxn::trusted`]).
    pub fn as_written(&self) -> bool {
        let Some(Some(all)) = self.all.get() else {
            return false;
        };
        all.as_written() && (!all.entries.is_empty() || self.bytes == b"{}\n")
    }

    /// Whether something the trusted path relies on did not hold: the
    /// transaction must then run again on the checked path.
    pub fn poisoned(&self) -> bool {
        self.poisoned.get()
    }

    fn poison(&self) {
        debug_assert!(self.trusted, "only a trusted file can turn out wrong");
        self.poisoned.set(true);
    }

    /// Every task of the file (split on first need when trusted).
    fn all(&self) -> Option<&Originals<'a>> {
        // Only a trusted file is split here (a checked one was at once).
        let all = self
            .all
            .get_or_init(|| split_trusted(self.bytes, self.canonical));
        if all.is_none() {
            self.poison();
        }
        all.as_ref()
    }

    /// The summaries of every task of the file, in file order.
    fn index(&self) -> Option<&[TaskIndex<'a>]> {
        let index = self.index.get_or_init(|| {
            if self.all.get().is_none() {
                // Split and index in one pass, as the checked path does.
                let (all, index) = split_and_index(self.bytes).unzip();
                let all = all.filter(Originals::as_written);
                let ok = all.is_some();
                let _ = self.all.set(all);
                return index.filter(|_| ok);
            }
            let all = self.all()?;
            let spans: Vec<(&str, Span)> = all
                .entries
                .iter()
                .map(|(k, o)| (k.as_ref(), o.span))
                .collect();
            let bytes = self.bytes;
            scan::par_map(
                &spans,
                |(_, span)| span.end - span.start,
                |&(key, span)| {
                    let json = std::str::from_utf8(&bytes[span.start..span.end]).ok()?;
                    let (index, len) = scan::parse_one::<TaskIndex>(json)?;
                    (len == json.len() && index.task_id == key).then_some(index)
                },
            )
        });
        if index.is_none() {
            self.poison();
        }
        index.as_deref()
    }

    /// Where the task `id` of the file stands, if it is one.
    fn span(&self, id: &str) -> Option<Span> {
        if let Some((_, span)) = self.found.borrow().iter().find(|(k, _)| k == id) {
            return *span;
        }
        if let Some(all) = self.all.get() {
            return all.as_ref()?.entries.get(id).map(|o| o.span);
        }
        let span = self.find(id);
        self.found.borrow_mut().push((id.to_string(), span));
        span
    }

    /// Find the task `id` in a trusted file by its key's line: in the
    /// layout the encoder writes, with no other line starting like a key,
    /// the one place where `\n  "<id>": ` stands is where that task's key is,
    /// and a file without it holds no such task.
    fn find(&self, id: &str) -> Option<Span> {
        let b = self.bytes;
        let quoted = serde_json::to_string(id).expect("a string serializes");
        let mut needle = KEY_LINE[..3].to_vec();
        needle.extend_from_slice(quoted.as_bytes());
        needle.extend_from_slice(b": ");
        let at = memchr::memmem::find(b, &needle)?;
        let start = at + needle.len();
        let lead = at - 1;
        let end = match (b[lead], b.get(start)) {
            (b'{', Some(b'{')) if lead == 0 => scan::skip_container(b, start),
            (b',', Some(b'{')) => scan::skip_container(b, start),
            _ => None,
        };
        let followed = |end: usize| b[end..].starts_with(b",\n  \"") || &b[end..] == b"\n}\n";
        match end.filter(|&end| followed(end)) {
            Some(end) => Some(Span { lead, start, end }),
            None => {
                self.poison();
                None
            }
        }
    }

    /// The first task of a trusted file (not split yet) whose idempotency
    /// key is `key`, without reading the others: in the layout the encoder
    /// writes, every line that starts like a top-level key starts a task,
    /// so the tasks are cut at those lines; a task can hold the key only if
    /// its text holds it between quotes as it is, or holds an escape (a
    /// string without one is its own text), and only those are read (as
    /// the index reads them). `None`: not a trusted file not yet split, or
    /// one that turned out not to be as written (poisoned).
    fn find_key_trusted(&self, key: &str) -> Option<Option<String>> {
        if !self.trusted || self.all.get().is_some() || self.poisoned() {
            return None;
        }
        let b = self.bytes;
        if b == b"{}\n" {
            return Some(None);
        }
        // Where each task's key line starts (its `\n`), in file order.
        let Some(lines) = key_lines(b, self.canonical) else {
            self.poison();
            return None;
        };
        let plain_key = key.bytes().all(|c| c >= 0x20 && c != b'"' && c != b'\\');
        let quoted = format!("\"{key}\"");
        let mut hits = plain_key
            .then(|| memchr::memmem::find_iter(b, quoted.as_bytes()))
            .into_iter()
            .flatten()
            .peekable();
        let mut escapes = memchr::memchr_iter(b'\\', b).peekable();
        for (i, &line) in lines.iter().enumerate() {
            // The task's text ends before the `,` of the next key line, or
            // before the file's closing `\n}\n`.
            let end = match lines.get(i + 1) {
                Some(&next) => next - 1,
                None => b.len() - 3,
            };
            /// Whether the next of the ascending positions `at` from
            /// `start` on is before `end`.
            fn any_in<I: Iterator<Item = usize>>(
                at: &mut std::iter::Peekable<I>,
                start: usize,
                end: usize,
            ) -> bool {
                while at.next_if(|&p| p < start).is_some() {}
                at.peek().is_some_and(|&p| p < end)
            }
            let hit = any_in(&mut hits, line, end);
            if !hit && !any_in(&mut escapes, line, end) {
                continue;
            }
            let text = std::str::from_utf8(&b[line + KEY_LINE.len() - 1..end]).ok();
            let found = text.and_then(|text| {
                // `"<id>": {...}` with a key that needs no escape (every
                // key of a trusted file: see `canonical_lead`).
                let (id, value) = text.strip_prefix('"')?.split_once("\": ")?;
                let (index, len) = scan::parse_one::<TaskIndex>(value)?;
                (len == value.len() && index.task_id == id).then(|| {
                    (index.idempotency_key.as_deref() == Some(key)).then(|| id.to_string())
                })
            });
            match found {
                Some(Some(id)) => return Some(Some(id)),
                Some(None) => {}
                None => {
                    self.poison();
                    return None;
                }
            }
        }
        Some(None)
    }

    /// Whether `id` is a task of the file that is still there.
    fn live_in_file(&self, id: &str) -> bool {
        !self.cleared && !self.removed.contains(id) && self.span(id).is_some()
    }

    /// The task at `span` of the file, in full.
    fn full(&self, key: &str, span: Span) -> Result<Task, StoreError> {
        let task = read_task(self.path, self.bytes, key, span);
        if task.is_err() && self.trusted {
            self.poison();
        }
        task
    }

    /// The file's new content: untouched tasks as they were (with the text
    /// between them when it is what the encoder writes), the others
    /// serialized as [`codec::encode`] does.
    pub fn encode(&self) -> Vec<u8> {
        self.encoded().to_vec()
    }

    /// Refuse the commit if a task read for a change, or new, holds a value
    /// that the store cannot hold (the untouched ones were read from the
    /// file, so a reader takes them as they are).
    pub fn check_changed(&self) -> Result<(), StoreError> {
        for task in self.changed.values().chain(self.added.values()) {
            limits::check_task(task)?;
        }
        Ok(())
    }

    /// [`FileTxn::encode`] as parts of the file read and of new text.
    pub fn encoded(&self) -> Encoded<'a> {
        let mut out = Encoded {
            read: self.bytes,
            new: Vec::new(),
            parts: Vec::new(),
            plain: true,
            canonical: true,
        };
        // A task written anew: its text, checked to read back as the task.
        let fresh = |out: &mut Encoded, task: &Task| {
            let start = out.new.len();
            out.push_new(|b| codec::write_task(b, task));
            out.canonical = out.canonical && codec::reads_back_as(&out.new[start..], task);
        };
        let mut first = true;
        match (self.cleared, self.all.get()) {
            (true, _) => {}
            (false, Some(Some(all))) => {
                let mut last_live = None;
                for (i, (key, orig)) in all.entries.iter().enumerate() {
                    if self.removed.contains(key.as_ref()) {
                        continue;
                    }
                    let span = orig.span;
                    if orig.canonical && (i == 0) == first {
                        out.push_read(span.lead..span.start);
                    } else {
                        out.push_new(|b| codec::write_lead(b, key, first));
                    }
                    first = false;
                    match self.changed.get(key.as_ref()) {
                        Some(task) => fresh(&mut out, task),
                        None => {
                            out.plain &= orig.plain;
                            out.canonical &= self.canonical;
                            out.push_read(span.start..span.end);
                        }
                    }
                    last_live = Some(i);
                }
                let ends_file = last_live.is_some_and(|i| i + 1 == all.entries.len());
                if ends_file && all.canonical_tail && self.added.is_empty() {
                    out.push_read(self.bytes.len() - 3..self.bytes.len());
                    return out;
                }
            }
            // Trusted and not split: only tasks changed in place.
            (false, _) => {
                let mut spans: Vec<(Span, &Task)> = self
                    .changed
                    .iter()
                    .map(|(id, task)| (self.span(id).expect("a changed task was found"), &**task))
                    .collect();
                spans.sort_by_key(|(span, _)| span.start);
                let mut at = 0;
                for (span, task) in spans {
                    out.push_read(at..span.start);
                    fresh(&mut out, task);
                    at = span.end;
                }
                if self.bytes != b"{}\n" {
                    // The untouched tasks, copied.
                    out.canonical &= self.canonical;
                    first = false;
                    if self.added.is_empty() {
                        out.push_read(at..self.bytes.len());
                        return out;
                    }
                    out.push_read(at..self.bytes.len() - 3);
                }
            }
        }
        for (key, task) in &self.added {
            out.push_new(|b| codec::write_lead(b, key, first));
            fresh(&mut out, task);
            first = false;
        }
        out.push_new(|b| b.extend_from_slice(if first { b"{}\n" } else { b"\n}\n" }));
        out
    }
}

/// The tasks of a trusted file, cut at its key lines: in the layout the
/// encoder writes, with no other line that starts like a top-level key
/// (what the writer's record says), each `\n  "` starts a key, and the
/// task's value runs from after its `": ` to the `,` before the next key
/// line (the last one to the file's `\n}\n`). One `memmem` over the file,
/// where walking every value's brackets and strings read every byte. The
/// values are not looked into: whoever reads a task parses its span, which
/// must be exactly one task (serde_json refuses anything after it), and a
/// file that does not cut this way is `None` (the transaction is then run
/// on the checked path).
fn split_trusted(bytes: &[u8], canonical: bool) -> Option<Originals<'_>> {
    if bytes == b"{}\n" {
        return Some(Originals {
            entries: IndexMap::new(),
            canonical_tail: false,
        });
    }
    let lines = key_lines(bytes, canonical)?;
    let mut entries = IndexMap::with_capacity(lines.len());
    let mut lead = 0;
    // Built once: a search made anew for each task costs more than it finds.
    let key_end = memchr::memmem::Finder::new(b"\": ");
    for (i, &line) in lines.iter().enumerate() {
        let key_start = line + KEY_LINE.len();
        let end = match lines.get(i + 1) {
            Some(&next) => next.checked_sub(1)?,
            None => bytes.len().checked_sub(3)?,
        };
        let rest = bytes.get(key_start..end)?;
        let close = key_end.find(rest)?;
        let key = std::str::from_utf8(&rest[..close]).ok()?;
        let start = key_start + close + 3;
        let span = Span { lead, start, end };
        let object = start < end && bytes[start] == b'{' && bytes[end - 1] == b'}';
        if !object || !canonical_lead(bytes, key, span, i == 0) {
            return None;
        }
        let orig = Orig {
            span,
            canonical: true,
            plain: true,
        };
        if entries.insert(Cow::Borrowed(key), orig).is_some() {
            return None;
        }
        lead = end;
    }
    let canonical_tail = bytes.get(lead..) == Some(b"\n}\n");
    (canonical_tail && !entries.is_empty()).then_some(Originals {
        entries,
        canonical_tail,
    })
}

/// What [`Transaction::page_listed`] reads of a task's text as the encoder
/// wrote it, from the lines of the task's own fields: at its indent (four
/// spaces inside the file's object) a line can only start one of them,
/// since a string never holds a raw line break and a nested value's lines
/// are indented further.
struct TaskLines {
    status: FieldLine,
    kind: FieldLine,
    no_schema: FieldLine,
    no_value: FieldLine,
    /// The task's earlier answers (`Task::answered`, written only when
    /// there are some).
    earlier: FieldLine,
}

/// A search for `needle` in the file's pretty JSON: its candidates are
/// picked by the needle's bytes that are rarest in such text ([`JsonRank`]),
/// not in text at large, where a quote or a line break is rare.
fn json_finder(needle: &[u8]) -> memchr::memmem::Finder<'_> {
    memchr::memmem::FinderBuilder::new().build_forward_with_ranker(JsonRank, needle)
}

/// How common a byte is in a store file (higher: more common): blanks,
/// quotes and the punctuation between keys and values on every line, then
/// lower-case letters as in English, digits, and the rest.
struct JsonRank;

impl memchr::arch::all::packedpair::HeuristicFrequencyRank for JsonRank {
    fn rank(&self, byte: u8) -> u8 {
        const LETTERS: &[u8] = b"etaoinsrhldcumfpgwybvkxjqz";
        match byte {
            b' ' | b'"' | b'\n' | b':' | b',' => 255,
            b'0'..=b'9' | b'-' => 200,
            b'a'..=b'z' => {
                let at = LETTERS.iter().position(|&c| c == byte).unwrap_or(0);
                // 'e' 190 down to 'z' 40.
                190 - 6 * at as u8
            }
            _ => 100,
        }
    }
}

/// A line of a task's own field (`\n    "name": ...`), searched for by its
/// text after the line break and indent (a search for those would stop at
/// every line) and kept only where they stand before it.
struct FieldLine {
    line: &'static [u8],
    after_indent: memchr::memmem::Finder<'static>,
}

impl FieldLine {
    /// The line break and indent of a task's own field.
    const INDENT: &'static [u8] = b"\n    ";

    fn new(line: &'static [u8]) -> Self {
        FieldLine {
            line,
            after_indent: json_finder(&line[Self::INDENT.len()..]),
        }
    }

    /// The whole line's text, from its line break.
    fn needle(&self) -> &[u8] {
        self.line
    }

    /// Where the first such line of `text` starts (its line break).
    fn find(&self, text: &[u8]) -> Option<usize> {
        self.after_indent.find_iter(text).find_map(|at| {
            let start = at.checked_sub(Self::INDENT.len())?;
            (text[start..at] == *Self::INDENT).then_some(start)
        })
    }
}

/// A task's fields that [`TaskLines`] reads.
struct ListedFields {
    status: rudder_model::task::Status,
    /// `None` also when the kind was not asked for.
    kind: Option<String>,
    /// Both an input schema and an input value, or earlier answers (the only tasks that
    /// masking changes: [`rudder_model::schema::mask_task`]).
    answered: bool,
}

impl TaskLines {
    fn new() -> Self {
        TaskLines {
            status: FieldLine::new(b"\n    \"status\": \""),
            kind: FieldLine::new(b"\n    \"kind\": "),
            no_schema: FieldLine::new(b"\n    \"input_schema\": null,\n"),
            no_value: FieldLine::new(b"\n    \"input_value\": null,\n"),
            earlier: FieldLine::new(b"\n    \"answered\": "),
        }
    }

    /// The fields of `text` (with its kind only if `with_kind`); `None`
    /// when they do not read as the encoder writes them.
    fn read(&self, text: &[u8], with_kind: bool) -> Option<ListedFields> {
        // The status is the second field, the input schema the third: on
        // the lines after the first and second line breaks (searched
        // for only if not there).
        let mut breaks = memchr::memchr_iter(b'\n', text);
        let (second, third) = (breaks.nth(1)?, breaks.next());
        let status_line = self.status.needle();
        let at = match text[second..].starts_with(status_line) {
            true => second + status_line.len(),
            false => self.status.find(text)? + status_line.len(),
        };
        let len = memchr::memchr(b'"', &text[at..])?;
        let status = std::str::from_utf8(&text[at..at + len])
            .ok()?
            .parse()
            .ok()?;
        let no_schema = match third {
            Some(third) if text[third..].starts_with(self.no_schema.needle()) => true,
            _ => self.no_schema.find(text).is_some(),
        };
        let kind = match (with_kind, self.kind.find(text)) {
            (true, Some(at)) => {
                let at = at + self.kind.needle().len();
                let end = memchr::memchr(b'\n', &text[at..]).map_or(text.len(), |p| at + p);
                let value = text[at..end].strip_suffix(b",").unwrap_or(&text[at..end]);
                Some(serde_json::from_slice::<String>(value).ok()?)
            }
            _ => None,
        };
        // A field of the task itself is indented four spaces (a nested
        // one deeper; a string's line breaks are escaped), so a match is
        // the task's own `answered`; a false one only costs a full read.
        let answered =
            (!no_schema && self.no_value.find(text).is_none()) || self.earlier.find(text).is_some();
        Some(ListedFields {
            status,
            kind,
            answered,
        })
    }
}

/// A task a read picked: in the file, or this transaction's.
enum Pick<'t> {
    Raw(&'t str, Span),
    Ready(&'t Task),
}

impl FileTxn<'_> {
    /// The `chosen` tasks in full, in order, read on all cores.
    fn read_picks(&self, chosen: &[Pick]) -> Result<Vec<Task>, StoreError> {
        let weight = |p: &Pick| match p {
            Pick::Raw(_, span) => span.end - span.start,
            Pick::Ready(_) => 1,
        };
        let (path, bytes) = (self.path, self.bytes);
        let read = |p: &Pick| {
            Some(match p {
                Pick::Raw(key, span) => read_task(path, bytes, key, *span),
                Pick::Ready(task) => Ok(Task::clone(task)),
            })
        };
        let tasks = scan::par_map(chosen, weight, read).expect("every pick reads");
        let tasks: Result<Vec<Task>, StoreError> = tasks.into_iter().collect();
        if tasks.is_err() && self.trusted {
            self.poison();
        }
        tasks
    }
}

/// The task at `span` of the file, in full; an error names the file's line
/// and column.
fn read_task(path: &Path, bytes: &[u8], key: &str, span: Span) -> Result<Task, StoreError> {
    serde_json::from_slice(&bytes[span.start..span.end]).map_err(|e| {
        let (line, column) = file_position(bytes, span.start, e.line(), e.column());
        let message = e.to_string();
        let suffix = format!(" at line {} column {}", e.line(), e.column());
        let message = message.strip_suffix(&suffix).unwrap_or(&message);
        StoreError::Corrupt {
            location: rudder_core::Location::file(path),
            line: Some(line),
            column: Some(column),
            message: format!("the task {key:?} does not read back: {message}"),
        }
    })
}

/// Every task of a store file, checked and indexed, in one pass on all
/// cores; `None` unless every task deserializes (see [`FileTxn::parse`]).
fn split_and_index(bytes: &[u8]) -> Option<(Originals<'_>, Vec<TaskIndex<'_>>)> {
    let text = std::str::from_utf8(bytes).ok()?;
    let runs = scan::split_map(text, |_, rest| {
        let (index, len) = scan::parse_one::<TaskIndex>(rest)?;
        let plain = memchr::memmem::find(&rest.as_bytes()[..len], KEY_LINE).is_none();
        Some(((index, plain), len))
    })?;
    let count = runs.iter().map(Vec::len).sum();
    let mut entries = IndexMap::with_capacity(count);
    let mut index = Vec::with_capacity(count);
    let mut lead = 0;
    for (key, json, (task, plain)) in runs.into_iter().flatten() {
        // A repeated key (serde_json keeps the last value at the first
        // position) is left to the whole-file parse.
        if task.task_id != key {
            return None;
        }
        let start = json.as_ptr() as usize - bytes.as_ptr() as usize;
        let span = Span {
            lead,
            start,
            end: start + json.len(),
        };
        let canonical = canonical_lead(bytes, &key, span, entries.is_empty());
        let orig = Orig {
            span,
            canonical,
            plain,
        };
        if entries.insert(key, orig).is_some() {
            return None;
        }
        index.push(task);
        lead = span.end;
    }
    let all = Originals {
        entries,
        canonical_tail: bytes.get(lead..) == Some(b"\n}\n"),
    };
    Some((all, index))
}

/// Whether the file's text before the value at `span` is what the encoder
/// writes there: `{\n  "key": ` for the first task, `,\n  "key": ` after.
fn canonical_lead(bytes: &[u8], key: &str, span: Span, first: bool) -> bool {
    let lead = &bytes[span.lead..span.start];
    let Some(rest) = lead.strip_prefix(if first { b"{\n  " } else { b",\n  " }) else {
        return false;
    };
    let Some(rest) = rest.strip_suffix(b": ") else {
        return false;
    };
    // A key with nothing to escape stands as it is; any other is written
    // anew (its text may be escaped in another way).
    let plain = key.bytes().all(|c| c >= 0x20 && c != b'"' && c != b'\\');
    plain && rest.len() == key.len() + 2 && rest[1..rest.len() - 1] == *key.as_bytes()
}

/// The file's line and column (1-based, in bytes, as serde_json counts)
/// of `line` and `column` in the text that starts at `offset` of `bytes`.
pub(super) fn file_position(
    bytes: &[u8],
    offset: usize,
    line: usize,
    column: usize,
) -> (usize, usize) {
    let before = &bytes[..offset];
    let lines_before = memchr::memchr_iter(b'\n', before).count();
    if line <= 1 {
        let line_start = memchr::memrchr(b'\n', before).map_or(0, |i| i + 1);
        (lines_before + 1, offset - line_start + column)
    } else {
        (lines_before + line, column)
    }
}

impl Transaction for FileTxn<'_> {
    fn len(&self) -> Result<usize, StoreError> {
        let in_file = match (self.cleared, self.all()) {
            (true, _) | (false, None) => 0,
            (false, Some(all)) => all.entries.len() - self.removed.len(),
        };
        Ok(in_file + self.added.len())
    }

    fn ids(&self) -> Result<Box<dyn Iterator<Item = &str> + '_>, StoreError> {
        let in_file = match (self.cleared, self.all()) {
            (false, Some(all)) => Some(
                all.entries
                    .keys()
                    .map(Cow::as_ref)
                    .filter(|k| !self.removed.contains(*k)),
            ),
            _ => None,
        };
        Ok(Box::new(
            in_file
                .into_iter()
                .flatten()
                .chain(self.added.keys().map(String::as_str)),
        ))
    }

    fn contains(&self, id: &str) -> Result<bool, StoreError> {
        Ok(self.added.contains_key(id) || self.live_in_file(id))
    }

    /// On a trusted file, only the tasks that may hold the key are read
    /// ([`FileTxn::find_key_trusted`]); else every task's summary.
    fn find_key(&self, key: &str) -> Result<Option<String>, StoreError> {
        if self.changed.is_empty()
            && self.removed.is_empty()
            && !self.cleared
            && let Some(in_file) = self.find_key_trusted(key)
        {
            return Ok(in_file.or_else(|| {
                self.added
                    .values()
                    .find(|t| t.idempotency_key.as_deref() == Some(key))
                    .map(|t| t.task_id.clone())
            }));
        }
        Ok(self
            .summaries()?
            .find(|t| t.idempotency_key == Some(key))
            .map(|t| t.task_id.to_string()))
    }

    fn summaries(&self) -> Result<Box<dyn Iterator<Item = Summary<'_>> + '_>, StoreError> {
        let in_file = match (self.cleared, self.all(), self.index()) {
            (false, Some(all), Some(index)) => {
                Some(all.entries.keys().zip(index).filter_map(|(key, index)| {
                    if self.removed.contains(key.as_ref()) {
                        return None;
                    }
                    Some(match self.changed.get(key.as_ref()) {
                        Some(task) => Summary::of(task),
                        None => index.summary(),
                    })
                }))
            }
            _ => None,
        };
        Ok(Box::new(
            in_file
                .into_iter()
                .flatten()
                .chain(self.added.values().map(|t| Summary::of(t))),
        ))
    }

    fn summary(&self, id: &str) -> Result<Option<Summary<'_>>, StoreError> {
        if let Some(task) = self.added.get(id) {
            return Ok(Some(Summary::of(task)));
        }
        if !self.live_in_file(id) {
            return Ok(None);
        }
        if let Some(task) = self.changed.get(id) {
            return Ok(Some(Summary::of(task)));
        }
        // A trusted file that does not split as written has no summary
        // here: the file backend poisons the transaction and reads again
        // on the checked path.
        let in_index = || {
            let i = self.all()?.entries.get_index_of(id)?;
            Some(self.index()?[i].summary())
        };
        Ok(in_index())
    }

    fn get(&self, id: &str) -> Result<Option<Task>, StoreError> {
        if let Some(task) = self.added.get(id).or_else(|| self.changed.get(id)) {
            return Ok(Some(Task::clone(task)));
        }
        if !self.live_in_file(id) {
            return Ok(None);
        }
        let span = self.span(id).expect("a task of the file");
        self.full(id, span).map(Some)
    }

    /// The tasks are read on all cores.
    fn get_where(&self, keep: &dyn Fn(&Summary) -> bool) -> Result<Vec<Task>, StoreError> {
        let mut chosen: Vec<Pick> = Vec::new();
        if let (false, Some(all), Some(index)) = (self.cleared, self.all(), self.index()) {
            for ((key, orig), index) in all.entries.iter().zip(index) {
                if self.removed.contains(key.as_ref()) {
                    continue;
                }
                match self.changed.get(key.as_ref()) {
                    Some(task) if keep(&Summary::of(task)) => chosen.push(Pick::Ready(task)),
                    Some(_) => {}
                    None if keep(&index.summary()) => chosen.push(Pick::Raw(key, orig.span)),
                    None => {}
                }
            }
        }
        chosen.extend(
            self.added
                .values()
                .filter(|t| keep(&Summary::of(t)))
                .map(|t| Pick::Ready(t)),
        );
        self.read_picks(&chosen)
    }

    /// A page of every task in store order (a plain `list`) is read without
    /// the summaries, which nothing here asks for: on a trusted file, only
    /// the split and the tasks themselves (at most the page's, on all
    /// cores). Any other page filters and sorts the tasks in full.
    fn page(&self, q: &rudder_core::query::PageQuery) -> Result<Vec<Task>, StoreError> {
        let everything = q.statuses.is_empty()
            && q.kinds.is_empty()
            && q.text.is_none()
            && q.after.is_none()
            && q.sort == rudder_core::query::SortKey::Store
            && !q.descending;
        if !everything {
            return rudder_core::scan::page(self, q);
        }
        let mut chosen: Vec<Pick> = Vec::new();
        if let (false, Some(all)) = (self.cleared, self.all()) {
            for (key, orig) in &all.entries {
                if self.removed.contains(key.as_ref()) {
                    continue;
                }
                chosen.push(match self.changed.get(key.as_ref()) {
                    Some(task) => Pick::Ready(task),
                    None => Pick::Raw(key, orig.span),
                });
            }
        }
        chosen.extend(self.added.values().map(|t| Pick::Ready(t)));
        chosen.truncate(q.limit.unwrap_or(usize::MAX));
        self.read_picks(&chosen)
    }

    // What the file answers by scanning its summaries (a database answers
    // from its indexes).
    fn ids_with_prefix(&self, prefix: &str, limit: usize) -> Result<Vec<String>, StoreError> {
        rudder_core::scan::ids_with_prefix(self, prefix, limit)
    }
    fn next_claimable(
        &self,
        now: DateTime<Utc>,
        kinds: &[String],
        wanted: &dyn Fn(&Summary) -> bool,
    ) -> Result<Option<String>, StoreError> {
        rudder_core::scan::next_claimable(self, now, kinds, wanted)
    }
    fn stale(&self, now: DateTime<Utc>, older_than: Duration) -> Result<Stale, StoreError> {
        rudder_core::scan::stale(self, now, older_than)
    }
    fn prunable(
        &self,
        now: DateTime<Utc>,
        older_than: Duration,
    ) -> Result<Vec<SummaryBuf>, StoreError> {
        rudder_core::scan::prunable(self, now, older_than)
    }
    fn counts(&self) -> Result<StatusCounts, StoreError> {
        rudder_core::scan::counts(self)
    }
    fn trail(&self, q: &TrailQuery) -> Result<Vec<TrailEntry>, StoreError> {
        rudder_core::scan::trail(self, q)
    }
    fn stalled(&self, now: DateTime<Utc>) -> Result<usize, StoreError> {
        rudder_core::scan::stalled(self, now)
    }

    /// On a trusted file whose writer vouched for every task's text
    /// ([`FileTxn::with_canonical`]), a page in store order (filtered by
    /// status and kind, cut at its limit) is handed as each task's own text
    /// made compact ([`compact::compact_pretty`]), no task built: the file is
    /// cut at its key lines as `get` cuts it, and a task's status and kind
    /// are read from their lines. Only a task with an input answer (which
    /// the caller masks) is read in full. Any other page, file or
    /// transaction: `Ok(false)`.
    fn page_listed(
        &self,
        q: &rudder_core::query::PageQuery,
        each: &mut dyn FnMut(rudder_core::Listed<'_>) -> bool,
    ) -> Result<bool, StoreError> {
        use rudder_core::Listed;
        let in_order = q.text.is_none()
            && q.after.is_none()
            && q.sort == rudder_core::query::SortKey::Store
            && !q.descending;
        let as_read = self.changed.is_empty()
            && self.removed.is_empty()
            && !self.cleared
            && self.added.is_empty();
        if !(self.canonical && in_order && as_read) || self.poisoned() {
            return Ok(false);
        }
        // A file that does not cut as written is poisoned here, before
        // anything is handed: the backend reads it again on the checked path.
        let Some(all) = self.all() else {
            return Ok(true);
        };
        let lines = TaskLines::new();
        let mut left = q.limit.unwrap_or(usize::MAX);
        // Tasks made compact wait here, joined by commas, and are handed
        // in runs of about `RUN` bytes: a writer then takes each run in one
        // write, no copy.
        // (Short in tests, so that their pages are handed in several runs.)
        const RUN: usize = if cfg!(test) { 300 } else { 64 * 1024 };
        let mut run = Vec::with_capacity(RUN + 4096);
        let mut count = 0;
        let mut stopped = false;
        let mut hand = |listed: Listed<'_>| {
            stopped = stopped || !each(listed);
            !stopped
        };
        for (key, orig) in &all.entries {
            if left == 0 {
                break;
            }
            let span = orig.span;
            let text = &self.bytes[span.start..span.end];
            // Read in full (not poisoned: tasks may have been handed
            // already, and its error is the answer).
            let full = || read_task(self.path, self.bytes, key, span);
            let task = match lines.read(text, !q.kinds.is_empty()) {
                Some(fields) => {
                    let kept = (q.statuses.is_empty() || q.statuses.contains(&fields.status))
                        && q.wants_kind(fields.kind.as_deref());
                    if !kept {
                        continue;
                    }
                    let mark = run.len();
                    if count > 0 {
                        run.push(b',');
                    }
                    if !fields.answered && compact::compact_pretty(text, &mut run) {
                        count += 1;
                        None
                    } else {
                        run.truncate(mark);
                        Some(full()?)
                    }
                }
                None => {
                    let task = full()?;
                    let kept = (q.statuses.is_empty() || q.statuses.contains(&task.status))
                        && q.wants_kind(task.kind.as_deref());
                    if !kept {
                        continue;
                    }
                    Some(task)
                }
            };
            left -= 1;
            // The run so far goes before a task handed whole, in order.
            if (task.is_some() || run.len() >= RUN) && count > 0 {
                if !hand(Listed::Json { text: &run, count }) {
                    return Ok(true);
                }
                run.clear();
                count = 0;
            }
            if let Some(task) = task
                && !hand(Listed::Task(Box::new(task)))
            {
                return Ok(true);
            }
        }
        if count > 0 {
            hand(Listed::Json { text: &run, count });
        }
        Ok(true)
    }

    fn get_mut(&mut self, id: &str) -> Result<Option<&mut Task>, StoreError> {
        if self.added.contains_key(id) {
            return Ok(self.added.get_mut(id).map(|t| &mut **t));
        }
        if !self.changed.contains_key(id) {
            if !self.live_in_file(id) {
                return Ok(None);
            }
            let span = self.span(id).expect("a task of the file");
            let task = self.full(id, span)?;
            self.changed.insert(id.to_string(), Box::new(task));
        }
        Ok(self.changed.get_mut(id).map(|t| &mut **t))
    }

    fn insert(&mut self, task: Task) -> Result<(), StoreError> {
        let id = task.task_id.as_str();
        if let Some(slot) = self.added.get_mut(id) {
            **slot = task;
        } else if self.live_in_file(id) {
            self.changed.insert(task.task_id.clone(), Box::new(task));
        } else {
            // A removed id comes back at the end, as in a map.
            self.added.insert(task.task_id.clone(), Box::new(task));
        }
        Ok(())
    }

    fn remove(&mut self, id: &str) -> Result<bool, StoreError> {
        if self.added.shift_remove(id).is_some() {
            return Ok(true);
        }
        // Removing needs the tasks around it: split the file first.
        if !self.live_in_file(id) || self.all().is_none() {
            return Ok(false);
        }
        self.changed.remove(id);
        self.removed.insert(id.to_string());
        Ok(true)
    }

    fn clear(&mut self) -> Result<(), StoreError> {
        self.cleared = true;
        self.changed.clear();
        self.removed.clear();
        self.added.clear();
        Ok(())
    }
}

/// The quick paths agree with the whole-file parse on `bytes`: the split
/// read and the writers' check, each with several threads whatever the size,
/// accept exactly what the whole-file parse accepts (they may leave an
/// unusual file to it) and give the same tasks; a file rudder writes back is
/// read the same way on the trusted path, and the same changes made on the
/// trusted and on the checked path write the same bytes. Panics otherwise.
/// (The fuzz targets and their proptest versions call it.)
pub fn check_quick_paths(path: &Path, bytes: &[u8]) {
    let whole = codec::decode_whole(path, bytes);
    let show = || String::from_utf8_lossy(bytes).into_owned();
    for threads in [1, 2, 3, 8] {
        scan::with_threads(threads, || {
            match (&whole, codec::decode(path, bytes)) {
                (Ok(a), Ok(b)) => assert_eq!(a, &b, "{threads} threads: {:?}", show()),
                (Err(a), Err(b)) => assert_eq!(a.to_string(), b.to_string()),
                (a, b) => panic!("{threads} threads: {a:?} vs {b:?} for {:?}", show()),
            }
            if let Some(txn) = FileTxn::parse(path, bytes) {
                let tasks = whole.as_ref().unwrap_or_else(|e| {
                    panic!("{threads} threads: {:?} passed the check: {e}", show())
                });
                same_tasks(&txn, tasks);
                let again =
                    codec::decode_whole(path, &txn.encode()).expect("written back, it reads");
                assert_eq!(&again, tasks);
            }
        });
    }
    let Ok(tasks) = &whole else {
        // Not a store: the trusted path never sees such a file (no writer
        // records it), but must not panic on it either.
        if let Some(mut txn) = FileTxn::trusted(path, bytes) {
            let _ = txn.get_mut("a");
            let _ = txn.summaries().map(Iterator::count);
            let _ = txn.encode();
        }
        return;
    };
    // Written anew by a writer, which vouches for the tasks' text exactly
    // when each reads back as itself: `list --json` then prints each
    // task's own text, the bytes that the task read in full prints.
    let mut fresh = FileTxn::empty(path);
    for task in tasks.values() {
        fresh
            .insert(task.clone())
            .expect("a file transaction inserts");
    }
    let encoded = fresh.encoded();
    let anew = encoded.to_vec();
    if let Some(listed) = FileTxn::trusted(path, &anew) {
        let listed = listed.with_canonical(encoded.canonical);
        let shown = |mut task: Task| {
            rudder_model::schema::mask_task(&mut task);
            serde_json::to_string(&task).expect("a task serializes")
        };
        let mut out = Vec::new();
        let q = rudder_core::query::PageQuery::default();
        let taken = listed
            .page_listed(&q, &mut |l| {
                out.push(match l {
                    rudder_core::Listed::Json { text, .. } => {
                        String::from_utf8(text.to_vec()).expect("UTF-8")
                    }
                    rudder_core::Listed::Task(task) => shown(*task),
                });
                true
            })
            .expect("a page");
        assert_eq!(taken, encoded.canonical);
        if taken && !listed.poisoned() {
            let slow: Vec<String> = tasks.values().cloned().map(shown).collect();
            assert_eq!(out.join(","), slow.join(","), "{:?}", show());
        }
        // A vouched file is cut by walking from task to task: every scan
        // and key lookup sees what the tasks hold.
        if encoded.canonical {
            let vouched = || {
                FileTxn::trusted(path, &anew)
                    .expect("a written store has the shape")
                    .with_canonical(true)
            };
            let txn = vouched();
            let summaries: Vec<Summary> = txn.summaries().expect("summaries").collect();
            let from_tasks: Vec<Summary> = tasks.values().map(Summary::of).collect();
            assert_eq!(summaries, from_tasks, "{:?}", show());
            for task in tasks.values() {
                let Some(key) = task.idempotency_key.as_deref() else {
                    continue;
                };
                let first = tasks
                    .values()
                    .find(|t| t.idempotency_key.as_deref() == Some(key))
                    .map(|t| t.task_id.clone());
                let txn = vouched();
                assert_eq!(txn.find_key(key).expect("a trusted find"), first, "{key:?}");
                assert!(!txn.poisoned(), "{key:?}");
            }
        }
    }
    // What the writers write back, and the next writer's view of it.
    let written = match FileTxn::parse(path, bytes) {
        Some(txn) => {
            let encoded = txn.encoded();
            let plain = encoded.plain;
            (encoded.to_vec(), plain)
        }
        None => (codec::encode(tasks, 0), true),
    };
    let (written, plain) = written;
    let checked = FileTxn::parse(path, &written).expect("a written store passes the check");
    same_tasks(&checked, tasks);
    assert!(
        !plain || checked.as_written(),
        "{:?}",
        String::from_utf8_lossy(&written)
    );
    if !checked.as_written() {
        return;
    }
    let trusted = FileTxn::trusted(path, &written).expect("a written store has the shape");
    for id in tasks.keys() {
        assert!(matches!(trusted.contains(id), Ok(true)));
        assert_eq!(trusted.get(id).unwrap().as_ref(), tasks.get(id));
    }
    assert!(matches!(trusted.contains("no such task"), Ok(false)) && !trusted.poisoned());
    // The same changes on both paths write the same bytes.
    let change = |txn: &mut FileTxn| {
        let ids: Vec<String> = tasks.keys().cloned().collect();
        for id in ids.iter().step_by(2) {
            let task = txn.get_mut(id).unwrap().expect("a task of the file");
            task.status_message = Some("changed \"here\"\n".into());
            task.revision += 1;
        }
        txn.insert(Task::new("added-task", rudder_model::task::Status::Working))
            .expect("a file transaction inserts");
        txn.encode()
    };
    let mut trusted = trusted;
    let mut checked = checked;
    let from_trusted = change(&mut trusted);
    assert!(!trusted.poisoned());
    assert_eq!(from_trusted, change(&mut checked));
    let mut expected = tasks.clone();
    for task in expected.values_mut().step_by(2) {
        task.status_message = Some("changed \"here\"\n".into());
        task.revision += 1;
    }
    expected.insert(
        "added-task".into(),
        Task::new("added-task", rudder_model::task::Status::Working),
    );
    assert_eq!(codec::decode_whole(path, &from_trusted).unwrap(), expected);
    // Scans on the trusted path see what the checked path sees.
    let trusted = FileTxn::trusted(path, &written).expect("shape");
    let summaries: Vec<Summary> = trusted.summaries().expect("summaries").collect();
    let from_tasks: Vec<Summary> = tasks.values().map(Summary::of).collect();
    assert_eq!(summaries, from_tasks);
    assert_eq!(trusted.len().ok(), Some(tasks.len()));
    // A key is found on the trusted path without the split, as the
    // checked path finds it (the first task that holds it).
    let keys = tasks
        .values()
        .filter_map(|t| t.idempotency_key.as_deref())
        .chain(["no such key", "", "\"", "\\"]);
    for key in keys {
        let trusted = FileTxn::trusted(path, &written).expect("shape");
        let found = trusted.find_key(key).expect("a trusted find");
        assert!(!trusted.poisoned(), "{key:?}");
        let checked = FileTxn::parse(path, &written).expect("checked above");
        assert_eq!(
            found,
            checked.find_key(key).expect("a checked find"),
            "{key:?}"
        );
    }
}

/// The transaction holds exactly these tasks, in this order.
fn same_tasks(txn: &FileTxn, tasks: &TaskMap) {
    let ids: Vec<&str> = txn.ids().expect("ids").collect();
    assert_eq!(ids, tasks.keys().map(String::as_str).collect::<Vec<_>>());
    for (id, task) in tasks {
        assert_eq!(txn.get(id).unwrap().as_ref(), Some(task));
        assert_eq!(txn.summary(id).ok().flatten(), Some(Summary::of(task)));
    }
}

#[cfg(test)]
mod tests {
    use rudder_core::StoreError;
    type Store = rudder_core::Store<crate::FileBackend>;
    use rudder_model::task::{Actor, Status};

    const A: &str = "aaaaaaaa-0000-4000-8000-000000000001";
    const B: &str = "bbbbbbbb-0000-4000-8000-000000000002";

    /// Task A as another tool might write it: compact, its own key order, an
    /// escape rudder would not write, an unknown field, odd spacing.
    fn odd_task_a() -> String {
        format!(
            r#"{{"revision":2,"history":[],"status":"working","title":"caf\u00e9 \"x\"","task_id":"{A}","owner":{{"team":"支付平台","n":1.50}},"request":{{"b":1,"a":[ ]}}}}"#
        )
    }

    fn store_with(a: &str, b_status_line: &str) -> (tempfile::TempDir, Store, String) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("tasks.json");
        let text = format!(
            "{{\n  \"{A}\": {a},\n  \"{B}\": {{\n    \"task_id\": \"{B}\",\n    {b_status_line},\n    \"revision\": 1,\n    \"history\": []\n  }}\n}}\n"
        );
        std::fs::write(&path, &text).unwrap();
        (dir, crate::open_store(&path), text)
    }

    /// On a trusted file a key is found by reading only the tasks that may
    /// hold it: one whose text holds the key elsewhere (a title) is read and
    /// passed over, one whose key is escaped is found, a missing key is
    /// missing, and the first of two tasks with one key is the answer. A
    /// plain list (every task, store order) builds no summaries.
    #[test]
    fn a_key_and_a_plain_list_are_read_on_the_trusted_path_without_the_index() {
        use rudder_core::Transaction;
        use rudder_model::task::Task;
        let task = |id: &str, key: &str, title: &str| {
            let mut t = Task::new(id, Status::Working);
            t.idempotency_key = Some(key.into());
            t.title = Some(title.into());
            t
        };
        let tasks: rudder_model::task::TaskMap = [
            task("t1", "k1", "mentions \"k2\" and \"k3\\\"\""),
            task("t2", "k2", "plain"),
            task("t3", "k3\"", "escaped key"),
            task("t4", "k4/\u{e9}", "a path \\ and an accent"),
            task("t5", "k2", "the same key again"),
        ]
        .into_iter()
        .map(|t| (t.task_id.clone(), t))
        .collect();
        let bytes = crate::encode(&tasks, 0);
        let path = std::path::Path::new("t.json");
        for (key, want) in [
            ("k1", Some("t1")),
            ("k2", Some("t2")),
            ("k3\"", Some("t3")),
            ("k4/\u{e9}", Some("t4")),
            ("k3", None),
            ("missing", None),
        ] {
            let txn = super::FileTxn::trusted(path, &bytes).expect("as written");
            assert_eq!(txn.find_key(key).unwrap().as_deref(), want, "{key:?}");
            assert!(!txn.poisoned(), "{key:?}");
            assert!(txn.all.get().is_none(), "{key:?}: the file was split");
        }
        // A plain list reads the tasks without their summaries.
        let txn = super::FileTxn::trusted(path, &bytes).expect("as written");
        let every = rudder_core::query::PageQuery::default();
        let listed = txn.page(&every).unwrap();
        assert_eq!(listed, tasks.values().cloned().collect::<Vec<_>>());
        assert!(txn.index.get().is_none() && !txn.poisoned());
        let two = rudder_core::query::PageQuery {
            limit: Some(2),
            ..every
        };
        let ids: Vec<String> = txn
            .page(&two)
            .unwrap()
            .into_iter()
            .map(|t| t.task_id)
            .collect();
        assert_eq!(ids, ["t1", "t2"]);
    }

    #[test]
    fn a_write_copies_untouched_tasks_byte_for_byte() {
        let a = odd_task_a();
        let (_dir, store, _) = store_with(&a, "\"status\": \"working\"");
        let before = store.get(A).unwrap();
        store
            .heartbeat(B, Some("step 2".into()), None, Actor::Anyone)
            .unwrap();
        let text = std::fs::read_to_string(store.backend().path()).unwrap();
        assert!(text.starts_with(&format!(
            "{{\n  \"{A}\": {a},\n  \"{B}\": {{\n    \"task_id\""
        )));
        assert!(text.ends_with("\n  }\n}\n"));
        assert_eq!(store.get(A).unwrap(), before);
        let b = store.get(B).unwrap();
        assert_eq!(b.status_message.as_deref(), Some("step 2"));
        assert_eq!(b.revision, 2);
        // The changed task is written as `encode` writes it.
        let whole = crate::encode(&store.load().unwrap(), 0);
        let whole = String::from_utf8(whole).unwrap();
        let b_text = &text[text.find(&format!("\"{B}\": ")).unwrap()..];
        assert!(whole.ends_with(b_text), "{whole}\n---\n{b_text}");

        // A create appends; A is still untouched; a prune removes B only.
        store.cancel(B, None).unwrap();
        let created = store.create(rudder_core::NewTask::default()).unwrap();
        let text = std::fs::read_to_string(store.backend().path()).unwrap();
        assert!(text.contains(&a));
        let ids: Vec<String> = store.load().unwrap().into_keys().collect();
        assert_eq!(ids, [A, B, created.task.task_id.as_str()]);
        let pruned = store.prune(std::time::Duration::ZERO).unwrap();
        assert_eq!(pruned.removed.len(), 1);
        assert_eq!(pruned.removed[0].task_id, B);
        let text = std::fs::read_to_string(store.backend().path()).unwrap();
        assert!(text.contains(&a) && !text.contains(B));
        let ids: Vec<String> = store.load().unwrap().into_keys().collect();
        assert_eq!(ids, [A, created.task.task_id.as_str()]);
    }

    /// A task that does not read back on the trusted path is reported at
    /// the file's line and column (where the whole-file parse puts it), and
    /// sends the transaction back to the checked path.
    #[test]
    fn a_task_that_does_not_read_back_names_the_files_line_and_column() {
        let path = std::path::Path::new("t.json");
        let files = [
            // The problem on the task's first line, after the key.
            format!("{{\n  \"{A}\": {{\"task_id\": \"{A}\", \"status\": \"paused\"}}\n}}\n"),
            // On a later line of the task, after another task.
            format!(
                "{{\n  \"{B}\": {{\"task_id\": \"{B}\", \"status\": \"working\"}},\n  \"{A}\": {{\n    \"task_id\": \"{A}\",\n    \"status\": \"working\",\n    \"updated_at\": \"yesterday\"\n  }}\n}}\n"
            ),
        ];
        for text in files {
            let bytes = text.as_bytes();
            let Err(StoreError::Corrupt {
                line: Some(line),
                column: Some(column),
                ..
            }) = crate::codec::decode_whole(path, bytes)
            else {
                panic!("the whole-file parse refuses {text}");
            };
            let txn = super::FileTxn::trusted(path, bytes).expect("shaped as rudder writes");
            match super::Transaction::get(&txn, A) {
                Err(StoreError::Corrupt {
                    line: Some(l),
                    column: Some(c),
                    message,
                    ..
                }) => {
                    assert_eq!((l, c), (line, column), "{message}\n{text}");
                    assert!(!message.contains(" at line "), "{message}");
                }
                other => panic!("{other:?}"),
            }
            assert!(txn.poisoned());
        }
        assert_eq!(super::file_position(b"ab\ncd", 3, 1, 2), (2, 2));
        assert_eq!(super::file_position(b"ab\ncd", 4, 1, 1), (2, 2));
        assert_eq!(super::file_position(b"ab\ncd", 1, 2, 5), (2, 5));
        assert_eq!(super::file_position(b"abc", 2, 1, 1), (1, 3));
    }

    #[test]
    fn writers_refuse_a_semantically_broken_task_elsewhere() {
        let broken_b = [
            (
                "\"status\": \"working\",\n    \"updated_at\": \"yesterday\"",
                6,
            ),
            (
                "\"status\": \"working\",\n    \"progress\": {\"current\": \"1\", \"total\": 2}",
                6,
            ),
            ("\"status\": \"working\",\n    \"ttl_ms\": -5", 6),
            // (`1e999` itself is a number serde_json keeps exactly.)
            (
                "\"status\": \"working\",\n    \"poll_interval_ms\": 1e999",
                6,
            ),
            ("\"status\": \"paused\"", 5),
        ];
        for (line, at) in broken_b {
            let (_dir, store, text) = store_with(&odd_task_a(), line);
            let ops: [&dyn Fn() -> Result<(), StoreError>; 4] = [
                &|| store.heartbeat(A, None, None, Actor::Anyone).map(drop),
                &|| store.create(rudder_core::NewTask::default()).map(drop),
                &|| store.prune(std::time::Duration::ZERO).map(drop),
                &|| {
                    store
                        .claim_next("w", std::time::Duration::from_secs(1), &[])
                        .map(drop)
                },
            ];
            for op in ops {
                match op() {
                    Err(StoreError::Corrupt {
                        line: Some(l),
                        column: Some(_),
                        ..
                    }) => {
                        assert_eq!(l, at, "{line}");
                    }
                    other => panic!("{line}: {other:?}"),
                }
                assert_eq!(
                    std::fs::read_to_string(store.backend().path()).unwrap(),
                    text
                );
            }
            assert!(store.load().is_err());
            assert_eq!(store.get(A).map(|t| t.status).ok(), None::<Status>);
        }
    }
}
