//! A store file read as a stream of tasks, a buffer at a time (`copy`
//! from a JSON file): its tasks are never all in memory, nor (when it is a
//! valid store) the whole file.
//!
//! The file is opened once. Writers replace it by a rename and never change
//! it in place (docs/architecture.md, the writing protocol), so that one descriptor
//! reads one version of the store from the first pass to the last, however
//! long they take, and without the lock. The first pass
//! ([`FileStream::check`]) reads every task as a read of the store does
//! (repeated ids, entries under another id, nesting) and keeps only each
//! id's revision; the second ([`FileStream::for_each_run`]) hands the tasks
//! over. So a file that does not read is found before anything was done
//! with any of its tasks.
//!
//! Each buffer is split into its entries by [`scan`]'s boundary scanner and
//! the entries are parsed on every core, as [`codec::decode`] does with a
//! whole file. Anything the scanner does not expect (in practice, a file
//! that is not a valid store) sends the file through serde_json instead,
//! whose verdict and error position are then the answer: that reads the
//! file's bytes whole (never its tasks), as every other read of the store
//! does, so that `copy` places an error exactly where `list` does.

use std::collections::{HashMap, HashSet};
use std::io::{self, Read, SeekFrom};
use std::ops::Range;
use std::path::{Path, PathBuf};

use super::fs::ReadSeek;
use super::{FileBackend, codec, scan};
use crate::index;
use rudder_core::Location;
use rudder_core::StoreError;
use rudder_model::task::Task;

/// Each task id of a file and its revision.
pub type Revisions = HashMap<Box<str>, u64>;

/// How many bytes are read at a time (a buffer grows for a larger task).
const BUFFER: usize = 8 << 20;

/// How many tasks the serde_json parse hands over at a time.
const SERDE_RUN: usize = 1000;

/// A store file opened for reading its tasks a run at a time.
pub struct FileStream {
    path: PathBuf,
    reader: Box<dyn ReadSeek>,
    /// Whether the boundary scanner read the file (else serde_json did);
    /// `None` before the first pass.
    split: Option<bool>,
    buffer: usize,
}

/// Why the scanner stopped.
enum Stop {
    /// The file is not what it expects: serde_json decides.
    GiveUp,
    Io(io::Error),
    Failed(StoreError),
}

impl From<StoreError> for Stop {
    fn from(e: StoreError) -> Self {
        Stop::Failed(e)
    }
}

impl FileStream {
    /// The store file of `backend`, opened; `None` when it does not exist.
    pub fn open(backend: &FileBackend) -> Result<Option<FileStream>, StoreError> {
        Ok(backend.open_read()?.map(|reader| FileStream {
            path: backend.path().to_path_buf(),
            reader,
            split: None,
            buffer: BUFFER,
        }))
    }

    /// The first pass: every task read and checked (nothing is kept of
    /// them but each id's revision). A file that is not a valid store is
    /// the error a read of the whole file gives.
    pub fn check(&mut self) -> Result<Revisions, StoreError> {
        let mut revisions = Revisions::new();
        let split = self.split_pass(&mut |tasks| {
            for t in tasks {
                // A repeated id is left to serde_json, which says where.
                if revisions.insert(t.task_id.into(), t.revision).is_some() {
                    return Err(Stop::GiveUp);
                }
            }
            Ok(())
        })?;
        if !split {
            revisions.clear();
            self.serde_pass(&mut |t| {
                revisions.insert(t.task_id.into(), t.revision);
                Ok(())
            })?;
        }
        self.split = Some(split);
        Ok(revisions)
    }

    /// Every task in file order, a run at a time, in one pass through the
    /// boundary scanner and without [`FileStream::check`]: `Ok(false)` when
    /// the file needs the reference read (a run does not split, or an id
    /// comes twice), and then `f` may have had some of its tasks already.
    /// For a caller that can take them back (a copy in one transaction),
    /// and then reads the file as [`FileStream::for_each_run`] does.
    pub fn single_pass(
        &mut self,
        mut f: impl FnMut(Vec<Task>) -> Result<(), StoreError>,
    ) -> Result<bool, StoreError> {
        let mut seen = HashSet::<Box<str>>::new();
        self.split_pass(&mut |tasks| {
            for t in &tasks {
                if !seen.insert(t.task_id.as_str().into()) {
                    return Err(Stop::GiveUp);
                }
            }
            f(tasks).map_err(Stop::Failed)
        })
    }

    /// Every task in file order, handed to `f` a run at a time (as many as
    /// a buffer holds), after [`FileStream::check`] (which this runs first
    /// if it was not).
    pub fn for_each_run(
        &mut self,
        mut f: impl FnMut(Vec<Task>) -> Result<(), StoreError>,
    ) -> Result<(), StoreError> {
        let split = match self.split {
            Some(split) => split,
            None => {
                self.check()?;
                self.split == Some(true)
            }
        };
        if split {
            if self.split_pass(&mut |tasks| f(tasks).map_err(Stop::Failed))? {
                return Ok(());
            }
            // The same bytes split the first time: only a file changed in
            // place (by something that does not follow the protocol) gets
            // here.
            return Err(StoreError::Corrupt {
                location: Location::file(&self.path),
                line: None,
                column: None,
                message: "the file changed while it was read".into(),
            });
        }
        let mut run = Vec::with_capacity(SERDE_RUN);
        self.serde_pass(&mut |t| {
            run.push(t);
            if run.len() == SERDE_RUN {
                f(std::mem::take(&mut run))?;
            }
            Ok(())
        })?;
        if run.is_empty() { Ok(()) } else { f(run) }
    }

    fn rewind(&mut self) -> Result<(), StoreError> {
        self.reader
            .seek(SeekFrom::Start(0))
            .map(|_| ())
            .map_err(|e| self.io(e))
    }

    fn io(&self, e: io::Error) -> StoreError {
        StoreError::io(Location::file(&self.path), &self.path, "read the store", e)
    }

    /// The file through the boundary scanner, each run of tasks to `f`:
    /// whether it read to the end (`false`: it gave up, or `f` did).
    fn split_pass(
        &mut self,
        f: &mut dyn FnMut(Vec<Task>) -> Result<(), Stop>,
    ) -> Result<bool, StoreError> {
        self.rewind()?;
        let mut splitter = Splitter::new(&mut self.reader, self.buffer);
        let mut read = || -> Result<(), Stop> {
            while let Some(entries) = splitter.next_run()? {
                let tasks = parse_run(&splitter.buf, &entries).ok_or(Stop::GiveUp)?;
                f(tasks)?;
            }
            Ok(())
        };
        let result = read();
        drop(splitter);
        match result {
            Ok(()) => Ok(true),
            Err(Stop::GiveUp) => Ok(false),
            Err(Stop::Io(e)) => Err(self.io(e)),
            Err(Stop::Failed(e)) => Err(e),
        }
    }

    /// The file through serde_json, each task to `f`: the reference read,
    /// with the checks of a read of the whole file and its error positions
    /// (for which serde_json must read from memory: the file's bytes are
    /// read whole here, never its tasks).
    fn serde_pass(
        &mut self,
        f: &mut dyn FnMut(Task) -> Result<(), StoreError>,
    ) -> Result<(), StoreError> {
        self.rewind()?;
        let mut bytes = Vec::new();
        if let Err(e) = self.reader.read_to_end(&mut bytes) {
            return Err(self.io(e));
        }
        let path = self.path.as_path();
        if bytes.iter().all(u8::is_ascii_whitespace) {
            return Err(StoreError::Corrupt {
                location: Location::file(path),
                line: None,
                column: None,
                message: "the file is empty".into(),
            });
        }
        let mut de = serde_json::Deserializer::from_slice(&bytes);
        let mut failed = None;
        let visitor = Tasks {
            path,
            f,
            failed: &mut failed,
        };
        let parsed = serde::Deserializer::deserialize_map(&mut de, visitor).and_then(|()| de.end());
        if let Some(e) = failed {
            return Err(e);
        }
        parsed.map_err(|e| codec::corrupt_at(path, &e))
    }
}

/// The top-level object as serde_json reads it, each task handed to `f`.
struct Tasks<'a, 'f> {
    path: &'a Path,
    f: &'a mut (dyn FnMut(Task) -> Result<(), StoreError> + 'f),
    /// What `f` (or a check) failed with; the parse stops.
    failed: &'a mut Option<StoreError>,
}

impl<'de> serde::de::Visitor<'de> for Tasks<'_, '_> {
    type Value = ();

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a JSON object mapping task ids to tasks")
    }

    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        use serde::de::Error;
        let mut seen = HashSet::<Box<str>>::new();
        while let Some(key) = map.next_key::<String>()? {
            if !seen.insert(key.as_str().into()) {
                return Err(A::Error::custom(codec::repeated_id(&key)));
            }
            let task: Task = map.next_value()?;
            let outcome = if task.task_id == key {
                (self.f)(task)
            } else {
                Err(StoreError::Corrupt {
                    location: Location::file(self.path),
                    line: None,
                    column: None,
                    message: codec::wrong_id(&key, &task.task_id),
                })
            };
            if let Err(e) = outcome {
                *self.failed = Some(e);
                return Err(A::Error::custom("stopped"));
            }
        }
        Ok(())
    }
}

/// The tasks of one run of entries in `buf`, parsed on every core; `None`
/// if any does not read on its own as a task of that id (see
/// [`codec::decode`]'s parallel read).
fn parse_run(buf: &[u8], entries: &[Entry]) -> Option<Vec<Task>> {
    scan::par_map(
        entries,
        |(_, r)| r.len(),
        |(key, r)| {
            let (task, used) = scan::parse_one_bytes::<Task>(&buf[r.clone()])?;
            (used == r.len() && task.task_id == *key && !index::too_deep(&task)).then_some(task)
        },
    )
}

/// One entry of the top-level object: its key, and where its value is in
/// the buffer.
type Entry = (String, Range<usize>);

/// Where the splitter is in the top-level object.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Before its `{`.
    Open,
    /// After its `{`: an entry or its `}`.
    First,
    /// After a `,`: an entry.
    Next,
    /// After its `}`: white space only, to the end.
    Closed,
}

/// What one entry's scan found.
enum Scan {
    /// An entry: its key, its value's bytes, where the next starts, and
    /// whether it was the last.
    Entry(String, Range<usize>, usize, bool),
    /// The `}` of an empty object, and where after it.
    Empty(usize),
    /// The buffer ends first.
    More,
    GiveUp,
}

/// The entry of the top-level object from `i` (after its `{` or a `,`).
fn entry(b: &[u8], i: usize, first: bool) -> Scan {
    let i = scan::skip_ws(b, i);
    match b.get(i) {
        None => return Scan::More,
        Some(b'}') if first => return Scan::Empty(i + 1),
        Some(b'"') => {}
        Some(_) => return Scan::GiveUp,
    }
    let Some(key_end) = scan::skip_str(b, i) else {
        return Scan::More;
    };
    let Some(key) = std::str::from_utf8(&b[i..key_end]).ok().and_then(scan::key) else {
        return Scan::GiveUp;
    };
    let colon = scan::skip_ws(b, key_end);
    match b.get(colon) {
        None => return Scan::More,
        Some(b':') => {}
        Some(_) => return Scan::GiveUp,
    }
    let start = scan::skip_ws(b, colon + 1);
    match b.get(start) {
        None => return Scan::More,
        // A task is an object; anything else is for serde_json to judge.
        Some(b'{') => {}
        Some(_) => return Scan::GiveUp,
    }
    let Some(end) = scan::skip_container(b, start) else {
        return Scan::More;
    };
    let after = scan::skip_ws(b, end);
    match b.get(after) {
        None => Scan::More,
        Some(b',') => Scan::Entry(key.into_owned(), start..end, after + 1, false),
        Some(b'}') => Scan::Entry(key.into_owned(), start..end, after + 1, true),
        Some(_) => Scan::GiveUp,
    }
}

/// The entries of a store file, a buffer at a time.
struct Splitter<'r> {
    reader: &'r mut dyn Read,
    buf: Vec<u8>,
    /// `buf[pos..end]` is read and not yet split.
    pos: usize,
    end: usize,
    eof: bool,
    state: State,
}

impl<'r> Splitter<'r> {
    fn new(reader: &'r mut dyn Read, buffer: usize) -> Self {
        Splitter {
            reader,
            buf: vec![0; buffer.max(1)],
            pos: 0,
            end: 0,
            eof: false,
            state: State::Open,
        }
    }

    /// The next entries: each one's key and where its value is in
    /// `self.buf` (until the next call); `None` after the last.
    fn next_run(&mut self) -> Result<Option<Vec<Entry>>, Stop> {
        loop {
            let mut entries = Vec::new();
            let b = &self.buf[..self.end];
            let mut i = self.pos;
            loop {
                match self.state {
                    State::Open => {
                        let j = scan::skip_ws(b, i);
                        match b.get(j) {
                            None => break,
                            Some(b'{') => {
                                i = j + 1;
                                self.state = State::First;
                            }
                            Some(_) => return Err(Stop::GiveUp),
                        }
                    }
                    State::First | State::Next => match entry(b, i, self.state == State::First) {
                        Scan::Entry(key, value, next, last) => {
                            entries.push((key, value));
                            i = next;
                            self.state = if last { State::Closed } else { State::Next };
                        }
                        Scan::Empty(next) => {
                            i = next;
                            self.state = State::Closed;
                        }
                        Scan::More => break,
                        Scan::GiveUp => return Err(Stop::GiveUp),
                    },
                    State::Closed => {
                        i = scan::skip_ws(b, i);
                        if i < b.len() {
                            return Err(Stop::GiveUp);
                        }
                        if self.eof {
                            self.pos = i;
                            return Ok((!entries.is_empty()).then_some(entries));
                        }
                        break;
                    }
                }
            }
            self.pos = i;
            if !entries.is_empty() {
                return Ok(Some(entries));
            }
            if self.eof {
                // Cut short.
                return Err(Stop::GiveUp);
            }
            self.fill().map_err(Stop::Io)?;
        }
    }

    /// Read more after what is not yet split (moved to the front; the
    /// buffer doubled when that fills it).
    fn fill(&mut self) -> io::Result<()> {
        if self.pos > 0 {
            self.buf.copy_within(self.pos..self.end, 0);
            self.end -= self.pos;
            self.pos = 0;
        }
        if self.end == self.buf.len() {
            self.buf.resize(self.buf.len() * 2, 0);
        }
        loop {
            match self.reader.read(&mut self.buf[self.end..]) {
                Ok(0) => self.eof = true,
                Ok(n) => self.end += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            }
            return Ok(());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tricky::{layout, task as task_of, tasks};
    use proptest::prelude::*;
    use rudder_model::task::TaskMap;
    use serde_json::json;

    /// A stream over `bytes` reading `buffer` bytes at a time.
    fn stream(bytes: &[u8], buffer: usize) -> FileStream {
        FileStream {
            path: PathBuf::from("tasks.json"),
            reader: Box::new(io::Cursor::new(bytes.to_vec())),
            split: None,
            buffer,
        }
    }

    /// What the two passes give: each id's revision, and the tasks.
    fn read(bytes: &[u8], buffer: usize) -> Result<(Revisions, TaskMap, bool), StoreError> {
        let mut s = stream(bytes, buffer);
        let revisions = s.check()?;
        let mut tasks = TaskMap::new();
        let mut runs = 0;
        s.for_each_run(|run| {
            runs += 1;
            assert!(!run.is_empty(), "a run is never empty");
            for t in run {
                assert!(tasks.insert(t.task_id.clone(), t).is_none());
            }
            Ok(())
        })?;
        Ok((revisions, tasks, s.split == Some(true)))
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(96))]

        /// Whatever the tasks hold, the layout, and wherever a buffer ends,
        /// the scanner finds every task exactly (without giving up), in
        /// order, with its revision: what serde_json reads of the file.
        #[test]
        fn the_scanner_reads_what_serde_json_reads(
            tasks in tasks(),
            kind in 0..3u8,
            buffer in prop_oneof![1..64usize, 64..4096usize],
        ) {
            let bytes = layout(&tasks, kind);
            let whole = codec::decode_whole(Path::new("tasks.json"), &bytes).unwrap();
            prop_assert_eq!(&whole, &tasks);
            let (revisions, read, split) = read(&bytes, buffer).unwrap();
            prop_assert!(split, "the scanner gave up");
            prop_assert_eq!(read.keys().collect::<Vec<_>>(), tasks.keys().collect::<Vec<_>>());
            prop_assert_eq!(&read, &tasks);
            prop_assert_eq!(revisions.len(), tasks.len());
            for t in tasks.values() {
                prop_assert_eq!(revisions.get(t.task_id.as_str()), Some(&t.revision));
            }
        }

        /// A file broken anywhere (a byte changed, inserted or cut) is
        /// read exactly as the whole file's read reads it: the same tasks,
        /// or the same error at the same place; and nothing is handed over
        /// from a file the first pass refused.
        #[test]
        fn a_broken_file_is_refused_as_a_read_of_the_whole_file_refuses_it(
            tasks in tasks(),
            kind in 0..3u8,
            at in any::<prop::sample::Index>(),
            byte in prop_oneof![
                Just(b'"'), Just(b'\\'), Just(b'{'), Just(b'}'), Just(b','),
                Just(b':'), Just(b' '), Just(0xff), any::<u8>()
            ],
            how in 0..3u8,
            buffer in 1..256usize,
        ) {
            let mut bytes = layout(&tasks, kind);
            let i = at.index(bytes.len() + 1);
            match how {
                0 if i < bytes.len() => bytes[i] = byte,
                1 => bytes.insert(i, byte),
                _ => bytes.truncate(i),
            }
            let want = codec::decode_whole(Path::new("tasks.json"), &bytes);
            let mut s = stream(&bytes, buffer);
            match (s.check(), want) {
                (Ok(revisions), Ok(want)) => {
                    prop_assert_eq!(revisions.len(), want.len());
                    let (_, read, _) = read(&bytes, buffer).unwrap();
                    prop_assert_eq!(read, want);
                }
                (Err(got), Err(want)) => prop_assert_eq!(got.to_string(), want.to_string()),
                (got, want) => prop_assert!(false, "{:?} but the whole file: {:?}", got.map(|r| r.len()), want.map(|t| t.len())),
            }
        }
    }

    #[test]
    fn what_the_scanner_leaves_to_serde_json_is_read_or_refused_by_it() {
        let path = Path::new("tasks.json");
        let t = |id: &str| task_of(id.into(), "x".into(), 1);
        let mut one = TaskMap::new();
        one.insert("a".into(), t("a"));
        let good = codec::encode(&one, 0);
        for (bytes, message) in [
            (b"".to_vec(), "the file is empty"),
            (b" \n\t".to_vec(), "the file is empty"),
            (b"[]".to_vec(), "expected a JSON object"),
            (
                [&good[..good.len() - 2], b",\n  \"a\": {}}"].concat(),
                "the task id \"a\" appears twice",
            ),
            (
                String::from_utf8(good.clone())
                    .unwrap()
                    .replacen("\"a\": {", "\"b\": {", 1)
                    .into_bytes(),
                "the entry \"b\" holds a task whose task_id is \"a\"",
            ),
            (b"{\"a\": 1}".to_vec(), "invalid type"),
        ] {
            let want = codec::decode_whole(path, &bytes).expect_err("refused");
            for buffer in [1, 7, BUFFER] {
                let got = stream(&bytes, buffer).check().expect_err("refused");
                assert_eq!(got.to_string(), want.to_string());
                assert!(got.to_string().contains(message), "{got}");
            }
        }
        // An empty store, however spelt.
        for bytes in [&b"{}"[..], b" {\n} \n"] {
            let (revisions, tasks, split) = read(bytes, 1).expect("read");
            assert!(revisions.is_empty() && tasks.is_empty() && split);
        }
        // Nested deeper than a read of the whole file allows: its error.
        let mut deep = t("a");
        let mut v = json!(1);
        for _ in 0..140 {
            v = json!([v]);
        }
        deep.request = Some(v);
        let mut one = TaskMap::new();
        one.insert("a".into(), deep);
        let bytes = serde_json::to_vec(&one).unwrap();
        let want = codec::decode_whole(path, &bytes).expect_err("too deep");
        assert_eq!(
            stream(&bytes, 64)
                .check()
                .expect_err("too deep")
                .to_string(),
            want.to_string()
        );
        // A key spelt with an escape: unescaped, as serde_json reads it.
        let escaped = b"{\"\\u0061\": {\"task_id\": \"a\", \"status\": \"working\"}}";
        let (revisions, tasks, _) = read(escaped, 3).expect("read");
        assert_eq!(revisions.len(), 1);
        assert_eq!(tasks, codec::decode_whole(path, escaped).unwrap());
    }

    /// A failure of the one the tasks are handed to stops the read and is
    /// what it gives.
    #[test]
    fn a_failing_consumer_stops_the_read() {
        let tasks: TaskMap = (0..50)
            .map(|i| (format!("t{i}"), task_of(format!("t{i}"), "x".into(), 1)))
            .collect();
        for bytes in [
            codec::encode(&tasks, 0),
            serde_json::to_vec(&tasks).unwrap(),
        ] {
            let mut s = stream(&bytes, 100);
            s.check().expect("check");
            let mut seen = 0;
            let e = s
                .for_each_run(|run| {
                    seen += run.len();
                    Err(StoreError::CopyRefused {
                        to: "there".into(),
                        reason: "no".into(),
                    })
                })
                .expect_err("stopped");
            assert!(matches!(e, StoreError::CopyRefused { .. }), "{e}");
            assert!(seen < 50);
        }
    }

    /// The stream reads the version of the file it opened, whatever a
    /// writer renames into place meanwhile.
    #[test]
    fn a_file_replaced_while_it_is_read_is_read_as_it_was() {
        use rudder_core::NewTask;
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("tasks.json");
        let store = crate::open_store(&path);
        for _ in 0..3 {
            store.create(NewTask::default()).expect("create");
        }
        let before = store.load().expect("load");
        let mut s = FileStream::open(&FileBackend::new(&path))
            .expect("open")
            .expect("a file");
        let revisions = s.check().expect("check");
        store.create(NewTask::default()).expect("create");
        let first = before.keys().next().unwrap();
        store.cancel(first, None).expect("cancel");
        let mut read = TaskMap::new();
        s.for_each_run(|run| {
            read.extend(run.into_iter().map(|t| (t.task_id.clone(), t)));
            Ok(())
        })
        .expect("read");
        assert_eq!(read, before);
        assert_eq!(revisions.len(), 3);
        assert!(
            FileStream::open(&FileBackend::new(dir.path().join("none.json")))
                .expect("open")
                .is_none()
        );
    }
}
