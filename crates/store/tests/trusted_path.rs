//! The writers' skip path: a writer that checked and wrote the store records
//! its identity in the lock file, and the next writer checks the untouched
//! tasks again only if the file is no longer exactly that file. Every other
//! change of the file (an edit in place, another program's rewrite, a
//! record that does not match, garbage in the lock file) means the whole
//! check, with the position of any problem.
use std::io::{Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use rudder_model::task::{Actor, Status};
use rudder_store::fs::SimFs;
use rudder_store::{FileBackend, NewTask, Store, StoreError};

fn new_store(dir: &Path) -> (Store, PathBuf) {
    let path = dir.join("tasks.json");
    (Store::connect(&path).expect("a store URL"), path)
}

fn lock_path(store: &Path) -> PathBuf {
    store.with_file_name("tasks.json.lock")
}

/// Two tasks written by rudder; the second write ran on the trusted path.
fn two_tasks(store: &Store) -> (String, String) {
    let a = store.create(NewTask::default()).unwrap().task.task_id;
    let b = store
        .create(NewTask {
            title: Some("second".into()),
            ..NewTask::default()
        })
        .unwrap()
        .task
        .task_id;
    assert!(
        store.backend().last_run_trusted(),
        "the second write trusted the first"
    );
    (a, b)
}

fn heartbeat(store: &Store, id: &str) -> Result<(), StoreError> {
    store
        .heartbeat(id, Some("step".into()), None, Actor::Anyone)
        .map(drop)
}

/// Overwrite bytes of the file in place (same inode, same size), as an
/// editor that writes in place or the seed's Python store would.
fn edit_in_place(path: &Path, from: &str, to: &str) {
    assert_eq!(from.len(), to.len());
    let text = std::fs::read_to_string(path).unwrap();
    let at = text.find(from).expect("text to edit");
    let mut f = std::fs::OpenOptions::new().write(true).open(path).unwrap();
    f.seek(SeekFrom::Start(at as u64)).unwrap();
    f.write_all(to.as_bytes()).unwrap();
}

#[test]
fn a_rudder_write_records_the_identity_and_keeps_the_pid() {
    let dir = tempfile::tempdir().unwrap();
    let (store, path) = new_store(dir.path());
    let (a, b) = two_tasks(&store);
    let lock = std::fs::read_to_string(lock_path(&path)).unwrap();
    let lines: Vec<&str> = lock.lines().collect();
    assert_eq!(lines.len(), 3, "{lock}");
    assert_eq!(lines[0], format!("pid {}", std::process::id()));
    assert!(lines[1].starts_with("verified-store "), "{lock}");
    // Every task's text is the encoder's (version 1): the same identity.
    let identity = lines[1].strip_prefix("verified-store ").unwrap();
    assert_eq!(lines[2], format!("canonical-store 1 {identity}"), "{lock}");
    heartbeat(&store, &a).unwrap();
    assert!(store.backend().last_run_trusted());
    // Readers trust the record too, and see what the checked path sees.
    assert_eq!(store.get(&b).unwrap().title.as_deref(), Some("second"));
    assert!(store.backend().last_run_trusted());
    assert_eq!(store.get(&a[..8]).unwrap().task_id, a);
    assert_eq!(store.list(&[Status::Working]).unwrap().len(), 2);
    assert!(store.backend().last_run_trusted());
    // A refused operation writes nothing and keeps the record.
    store.cancel(&a, None).unwrap();
    assert!(heartbeat(&store, &a).is_err());
    heartbeat(&store, &b).unwrap();
    assert!(store.backend().last_run_trusted());
}

#[test]
fn a_file_edited_in_place_after_a_rudder_write_is_checked_whole() {
    let dir = tempfile::tempdir().unwrap();
    let (store, path) = new_store(dir.path());
    let (a, b) = two_tasks(&store);
    // Break the first task without changing the file's size: the writer
    // that touches only the second one must still refuse, with the position.
    edit_in_place(&path, "\"working\"", "\"paused!\"");
    let before = std::fs::read(&path).unwrap();
    let line = String::from_utf8_lossy(&before)
        .lines()
        .position(|l| l.contains("paused!"))
        .unwrap()
        + 1;
    // Readers (which take no lock) check it whole too.
    for read in [
        store.get(&b).map(drop),
        store.list(&[Status::Working]).map(drop),
    ] {
        assert!(
            matches!(read, Err(StoreError::Corrupt { line: Some(_), .. })),
            "{read:?}"
        );
        assert!(!store.backend().last_run_trusted());
    }
    match heartbeat(&store, &b) {
        Err(StoreError::Corrupt {
            line: Some(l),
            column: Some(_),
            ..
        }) => assert_eq!(l, line),
        other => panic!("{other:?}"),
    }
    assert!(!store.backend().last_run_trusted());
    assert_eq!(std::fs::read(&path).unwrap(), before);
    // A valid edit in place is read and kept, not overwritten with a
    // remembered view.
    edit_in_place(&path, "\"paused!\"", "\"working\"");
    edit_in_place(&path, "\"second\"", "\"SECOND\"");
    heartbeat(&store, &a).unwrap();
    assert!(!store.backend().last_run_trusted());
    assert_eq!(store.get(&b).unwrap().title.as_deref(), Some("SECOND"));
    heartbeat(&store, &a).unwrap();
    assert!(store.backend().last_run_trusted());
}

#[test]
fn a_file_replaced_by_another_program_is_checked_whole() {
    let dir = tempfile::tempdir().unwrap();
    let (store, path) = new_store(dir.path());
    let (a, _) = two_tasks(&store);
    // The same bytes, a new file: not the file that was checked.
    let bytes = std::fs::read(&path).unwrap();
    let other = dir.path().join("other.json");
    std::fs::write(&other, &bytes).unwrap();
    std::fs::rename(&other, &path).unwrap();
    heartbeat(&store, &a).unwrap();
    assert!(!store.backend().last_run_trusted());
    heartbeat(&store, &a).unwrap();
    assert!(store.backend().last_run_trusted());
}

#[test]
fn a_record_that_does_not_match_or_garbage_in_the_lock_file_is_ignored() {
    let dir = tempfile::tempdir().unwrap();
    let (store, path) = new_store(dir.path());
    let (a, _) = two_tasks(&store);
    let lock = std::fs::read_to_string(lock_path(&path)).unwrap();
    let record = lock.lines().nth(1).unwrap().to_string();
    let fields: Vec<&str> = record.split(' ').collect();
    let mut variants = Vec::new();
    // Each field off by one.
    for i in 1..fields.len() {
        let mut f: Vec<String> = fields.iter().map(|s| s.to_string()).collect();
        f[i] = (f[i].parse::<i128>().unwrap() + 1).to_string();
        variants.push(format!("pid 1\n{}\n", f.join(" ")));
    }
    variants.extend([
        String::new(),
        "garbage\n".into(),
        "\0\0\0\0\0\0".into(),
        format!("pid 1\n{record} extra\n"),
        format!("pid 1\n{record}\n{record}\n"),
        format!("pid 1\n{}\n", record.replace(' ', "  ")),
        format!("pid 1\n{}\n", &record[..record.len() - 1]),
    ]);
    for variant in variants {
        std::fs::write(lock_path(&path), &variant).unwrap();
        heartbeat(&store, &a).unwrap();
        assert!(!store.backend().last_run_trusted(), "{variant:?}");
    }
    // A correct record, written by hand, is trusted (it is a fact about the
    // file): the record is what decides, nothing else.
    heartbeat(&store, &a).unwrap();
    let record = std::fs::read_to_string(lock_path(&path)).unwrap();
    std::fs::write(lock_path(&path), record.lines().nth(1).unwrap()).unwrap();
    heartbeat(&store, &a).unwrap();
    assert!(store.backend().last_run_trusted());
}

#[test]
fn a_hand_written_store_is_checked_until_rudder_wrote_it_in_its_own_layout() {
    let dir = tempfile::tempdir().unwrap();
    let (store, path) = new_store(dir.path());
    let id = "aaaaaaaa-0000-4000-8000-000000000001";
    // A task whose text holds a line that looks like a top-level key.
    let odd = format!(
        "{{\"{id}\": {{\"task_id\": \"{id}\", \"status\": \"working\", \"request\": {{\n  \"fake\": 1}}}}}}\n"
    );
    std::fs::write(&path, &odd).unwrap();
    heartbeat(&store, id).unwrap();
    assert!(!store.backend().last_run_trusted());
    // Rewritten by rudder (the task was changed, so serialized anew): now
    // in its layout, so trusted.
    heartbeat(&store, id).unwrap();
    assert!(store.backend().last_run_trusted());
    // A task copied untouched keeps its odd text, and the file is checked
    // whole every time while it does.
    let other = "bbbbbbbb-0000-4000-8000-000000000002";
    let odd = format!(
        "{{\n  \"{id}\": {{\"task_id\": \"{id}\", \"status\": \"working\"}},\n  \"{other}\": {{\"task_id\": \"{other}\", \"status\": \"working\", \"request\": {{\n  \"fake\": 1}}}}\n}}\n"
    );
    std::fs::write(&path, &odd).unwrap();
    for _ in 0..2 {
        heartbeat(&store, id).unwrap();
        assert!(!store.backend().last_run_trusted());
    }
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(text.contains("{\n  \"fake\": 1}"), "{text}");
}

#[test]
fn on_the_simulated_file_system_an_edit_in_place_is_caught_too() {
    let fs = SimFs::new();
    let path = PathBuf::from("/sim/tasks.json");
    let store = Store::with_backend(rudder_store::AnyBackend::File(FileBackend::with_fs(
        &path,
        Arc::new(fs.clone()),
    )));
    let (a, b) = two_tasks(&store);
    let text = String::from_utf8(fs.contents(&path).unwrap()).unwrap();
    let broken = text.replacen("\"working\"", "\"paused!\"", 1);
    fs.edit_in_place(&path, broken.as_bytes());
    assert!(matches!(
        heartbeat(&store, &b),
        Err(StoreError::Corrupt { line: Some(_), .. })
    ));
    assert_eq!(fs.contents(&path).unwrap(), broken.as_bytes());
    fs.edit_in_place(&path, text.as_bytes());
    heartbeat(&store, &a).unwrap();
    assert!(!store.backend().last_run_trusted());
    // A garbage note in the lock file is ignored.
    fs.set_lock_note(Path::new("/sim/tasks.json.lock"), "verified-store 1 2 3");
    heartbeat(&store, &a).unwrap();
    assert!(!store.backend().last_run_trusted());
    heartbeat(&store, &a).unwrap();
    assert!(store.backend().last_run_trusted());
}

/// What `rudder list --json` prints for the page: each task's JSON, its
/// secret answers masked; how many came as the file's own text.
fn listed(store: &Store, statuses: &[Status]) -> (String, usize) {
    let (mut out, mut texts) = (Vec::new(), 0);
    let q = rudder_store::PageQuery {
        statuses: statuses.to_vec(),
        ..rudder_store::PageQuery::default()
    };
    store
        .page_listed_each(&q, &mut |listed| {
            out.push(match listed {
                rudder_store::Listed::Json { text, count } => {
                    texts += count;
                    String::from_utf8(text.to_vec()).unwrap()
                }
                rudder_store::Listed::Task(mut task) => {
                    rudder_store::schema::mask_task(&mut task);
                    serde_json::to_string(&task).unwrap()
                }
            });
            true
        })
        .unwrap();
    (out.join(","), texts)
}

/// The same, every task read in full.
fn read_in_full(store: &Store, statuses: &[Status]) -> String {
    let mut out = Vec::new();
    let q = rudder_store::PageQuery {
        statuses: statuses.to_vec(),
        ..rudder_store::PageQuery::default()
    };
    store
        .page_each(&q, &mut |mut task| {
            rudder_store::schema::mask_task(&mut task);
            out.push(serde_json::to_string(&task).unwrap());
            true
        })
        .unwrap();
    out.join(",")
}

/// Issue 30 item 18: on a file whose writer vouched for every task's text,
/// a page is handed as the tasks' own text (the same bytes as the tasks
/// read in full), but a task with a secret answer is read and masked; a
/// task whose text would not read back as itself (a `null` request) takes
/// the writer's word away, and so does another program's rewrite.
#[test]
fn list_json_hands_a_vouched_files_tasks_as_their_own_text() {
    let dir = tempfile::tempdir().unwrap();
    let (store, path) = new_store(dir.path());
    let (a, _b) = two_tasks(&store);
    let schema = serde_json::json!({"type": "object", "properties": {
        "service": {"type": "string"},
        "token": {"type": "string", "writeOnly": true}
    }});
    let asked = store
        .create(NewTask {
            input_schema: Some(schema),
            title: Some("caf\u{e9} \"quoted\"\n".into()),
            ..NewTask::default()
        })
        .unwrap()
        .task
        .task_id;
    let answer = serde_json::json!({"service": "db", "token": "tok-5ecret-9f3a"});
    store.provide_input(&asked, answer, None).unwrap();
    heartbeat(&store, &a).unwrap();
    let (shown, texts) = listed(&store, &[]);
    assert!(store.backend().last_run_trusted());
    assert_eq!(shown, read_in_full(&store, &[]));
    assert_eq!(texts, 2, "the answered task is read");
    let all = shown.clone();
    assert!(
        !all.contains("tok-5ecret-9f3a") && all.contains("••••"),
        "{all}"
    );
    let (working, texts) = listed(&store, &[Status::Working]);
    assert_eq!(working, read_in_full(&store, &[Status::Working]));
    assert_eq!(texts, 2);

    // Rewritten by another program, byte for byte the same: not vouched for.
    let text = std::fs::read(&path).unwrap();
    std::fs::remove_file(&path).unwrap();
    std::fs::write(&path, &text).unwrap();
    let (again, texts) = listed(&store, &[]);
    assert_eq!((again, texts), (shown, 0));

    // A task that does not read back as itself: no word.
    let (store, path) = new_store(&dir.path().join("null"));
    two_tasks(&store);
    let mut odd = rudder_model::task::Task::new("odd", Status::Working);
    odd.request = Some(serde_json::Value::Null);
    rudder_store::Backend::transaction(store.backend(), &mut |txn| {
        txn.insert(odd.clone())?;
        Ok(true)
    })
    .unwrap();
    let lock = std::fs::read_to_string(lock_path(&path)).unwrap();
    assert!(!lock.contains("canonical-store"), "{lock}");
    let (shown, texts) = listed(&store, &[]);
    assert_eq!((shown, texts), (read_in_full(&store, &[]), 0));
}
