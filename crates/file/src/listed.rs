//! `rudder list --json` on a file a writer vouched for: each task's own text
//! made compact ([`crate::txn::FileTxn`]'s `page_listed`) must be byte for
//! byte what reading the task and writing it again prints, for every task
//! and every page.

use std::path::Path;

use chrono::{DateTime, Utc};
use proptest::prelude::*;
use serde_json::{Value, json};

use crate::tricky;
use crate::txn::FileTxn;
use crate::{codec, compact};
use rudder_core::query::{PageQuery, page_in_memory};
use rudder_core::{Listed, Transaction};
use rudder_model::schema::mask_task;
use rudder_model::task::{Face, HistoryEntry, Origin, Progress, Status, Task, TaskMap};

/// Numbers as JSON text, kept as written (`arbitrary_precision`): big,
/// tiny, negative zero, exponents, trailing zeros.
fn number() -> impl Strategy<Value = Value> {
    prop_oneof![
        prop::sample::select(vec![
            "0",
            "-0",
            "1.50",
            "-12.5e-7",
            "1e400",
            "1E+2",
            "123456789012345678901234567890",
            "-98765432109876543210.000001",
        ])
        .prop_map(|n| serde_json::from_str::<Value>(n).expect("a number")),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        any::<f64>()
            .prop_filter("finite", |f| f.is_finite())
            .prop_map(Value::from),
    ]
}

/// Any JSON value, its strings and keys tricky.
fn value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        number(),
        tricky::text().prop_map(Value::from),
    ];
    leaf.prop_recursive(3, 16, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::from),
            prop::collection::vec((tricky::text(), inner), 0..4)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

/// A time of years 0 to 9999, to the nanosecond, or on a whole second or
/// millisecond (which chrono writes shorter).
fn time() -> impl Strategy<Value = DateTime<Utc>> {
    (
        -62_167_219_200_i64..253_402_300_800,
        prop_oneof![Just(0u32), Just(123_000_000), 0u32..1_000_000_000],
    )
        .prop_map(|(secs, nanos)| DateTime::from_timestamp(secs, nanos).expect("in range"))
}

fn status() -> impl Strategy<Value = Status> {
    prop::sample::select(Status::ALL.to_vec())
}

fn opt_text() -> impl Strategy<Value = Option<String>> {
    prop::option::of(tricky::text())
}

fn entry() -> impl Strategy<Value = HistoryEntry> {
    (
        status(),
        time(),
        opt_text(),
        opt_text(),
        prop::option::of(prop_oneof![Just(Face::Cli), Just(Face::Mcp)]),
        opt_text(),
        prop::collection::vec(tricky::text(), 0..3),
    )
        .prop_map(|(status, at, note, actor, face, reason, fields)| {
            let mut e = HistoryEntry::new(status, at, note);
            e.actor = actor;
            e.face = face;
            e.reason = reason;
            e.fields = fields;
            e
        })
}

/// An input schema and its answer: none, one without secrets, or one with
/// a `writeOnly` and a `format: password` field (masked when listed).
fn input() -> impl Strategy<Value = (Option<Value>, Option<Value>)> {
    let plain = json!({"type": "object", "properties": {"n": {"type": "string"}}});
    let secret = json!({"type": "object", "properties": {
        "n": {"type": "string"},
        "token": {"type": "string", "writeOnly": true},
        "pin": {"type": "string", "format": "password"}
    }});
    (0..5u8, tricky::text()).prop_map(move |(kind, text)| match kind {
        0 => (None, None),
        1 => (Some(plain.clone()), None),
        2 => (Some(plain.clone()), Some(json!({"n": text}))),
        3 => (Some(secret.clone()), None),
        _ => (
            Some(secret.clone()),
            Some(json!({"n": text, "token": "s3cret-token", "pin": "271828"})),
        ),
    })
}

/// A task with anything in any field; rarely one whose request is `null`
/// (which reads back as no request, so no writer vouches for its text).
fn task() -> impl Strategy<Value = Task> {
    // Mostly ids as rudder makes them; a tricky one (a key that needs an
    // escape) sends the file to the checked path.
    let id = prop_oneof![3 => "[a-z0-9-]{0,10}", 1 => tricky::text()];
    let ids = (id, status(), input(), prop::option::of(value()));
    let texts = (opt_text(), opt_text(), opt_text(), opt_text(), opt_text());
    let times = (
        prop::option::of(time()),
        prop::option::of(time()),
        prop::option::of(time()),
    );
    let numbers = (
        prop::option::of((any::<u64>(), any::<u64>())),
        prop::option::of(any::<u64>()),
        prop::option::of(any::<u64>()),
        any::<u64>(),
    );
    let values = (
        prop_oneof![
            15 => prop::option::of(value()),
            1 => Just(Some(Value::Null)),
        ],
        prop::option::of(value()),
        prop::collection::vec(entry(), 0..4),
        prop::collection::vec((tricky::text(), value()), 0..3),
        prop::option::of(prop::sample::select(vec!["diagnose", "b-2", "k"])),
        // An earlier answer (kept when the next question was asked),
        // secret fields and all.
        input(),
    );
    (ids, texts, times, numbers, values).prop_map(
        |(
            (id, status, (schema, answer), result),
            (key, title, message, claimed, owner),
            (created, updated, lease),
            (progress, lease_ms, ttl, revision),
            (request, error, history, extra, kind, earlier),
        )| {
            let mut t = Task::new(id, status);
            if let (Some(input_schema), Some(input_value)) = earlier {
                t.answered.push(rudder_model::task::Answered {
                    message: Some("Which one?".into()),
                    input_schema,
                    input_value,
                });
            }
            t.input_schema = schema;
            t.input_value = answer;
            t.result = result;
            t.idempotency_key = key;
            t.created_at = created;
            t.updated_at = updated;
            t.title = title;
            t.kind = kind.map(str::to_string);
            t.request = request;
            t.status_message = message;
            t.progress = progress.map(|(current, total)| Progress { current, total });
            t.claimed_by = claimed;
            t.lease_expires_at = lease;
            t.lease_ms = lease_ms;
            t.error = error;
            t.ttl_ms = ttl;
            t.revision = revision;
            t.history = history;
            t.origin = owner.clone().map(|tool| Origin { tool, client: None });
            t.owned_by = owner;
            t.extra = extra.into_iter().collect();
            t
        },
    )
}

/// Up to eight tasks, their ids made unique.
fn tasks() -> impl Strategy<Value = TaskMap> {
    prop::collection::vec(task(), 0..8).prop_map(|v| {
        v.into_iter()
            .enumerate()
            .map(|(i, mut t)| {
                t.task_id = format!("{i}{}", t.task_id);
                (t.task_id.clone(), t)
            })
            .collect()
    })
}

/// What `rudder list --json` prints for a task read in full.
fn shown(mut task: Task) -> String {
    mask_task(&mut task);
    serde_json::to_string(&task).expect("a task serializes")
}

/// The page as the listed path hands it, each task as it is printed, with
/// how many came as text; `None` when the path is not taken.
fn listed(txn: &FileTxn, q: &PageQuery) -> Option<(String, usize)> {
    let (mut out, mut texts) = (Vec::new(), 0);
    let taken = txn
        .page_listed(q, &mut |listed| {
            out.push(match listed {
                Listed::Json { text, count } => {
                    texts += count;
                    String::from_utf8(text.to_vec()).expect("UTF-8")
                }
                Listed::Task(task) => shown(*task),
            });
            true
        })
        .expect("a page");
    if txn.poisoned() {
        // A file that does not cut as written (a key that needs an
        // escape): nothing handed, and the backend reads it again on the
        // checked path.
        assert!(out.is_empty());
        return None;
    }
    taken.then_some((out.join(","), texts))
}

/// Some pages: everything, by status, by kind, cut short.
fn queries() -> Vec<PageQuery> {
    vec![
        PageQuery::default(),
        PageQuery {
            statuses: vec![Status::Working, Status::InputRequired],
            ..PageQuery::default()
        },
        PageQuery {
            kinds: vec!["diagnose".into(), "k".into()],
            ..PageQuery::default()
        },
        PageQuery {
            statuses: vec![Status::Completed],
            limit: Some(1),
            ..PageQuery::default()
        },
        PageQuery {
            limit: Some(3),
            ..PageQuery::default()
        },
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    /// Tasks written by a writer, then listed from the file as it stands:
    /// the writer vouches for the file exactly when every task reads back
    /// as itself, and then every page is printed byte for byte as the
    /// tasks read in full print, with every task that has no input answer
    /// handed as its own text (and every answered one read, and masked).
    #[test]
    fn a_vouched_tasks_own_text_is_what_list_json_prints(tasks in tasks()) {
        let path = Path::new("s.json");
        let mut txn = FileTxn::empty(path);
        for task in tasks.values() {
            txn.insert(task.clone()).expect("an insert");
        }
        let encoded = txn.encoded();
        let (bytes, canonical) = (encoded.to_vec(), encoded.canonical);
        let reads_back = |t: &Task| {
            serde_json::from_str::<Task>(&serde_json::to_string(t).expect("serializes")).ok()
                == Some(t.clone())
        };
        prop_assert_eq!(canonical, tasks.values().all(reads_back));
        // Walking from task to task finds every key line a search for
        // them finds, in the layout the encoder writes.
        let searched = crate::txn::key_lines(&bytes, false).expect("searched");
        let walked = crate::txn::key_lines(&bytes, true);
        prop_assert_eq!(walked.as_deref(), (!tasks.is_empty()).then_some(&searched[..]));
        let read = codec::decode_whole(path, &bytes).expect("a written store reads");
        for q in queries() {
            let trusted = FileTxn::trusted(path, &bytes).expect("as written").with_canonical(canonical);
            let page = page_in_memory(read.values().cloned().collect(), &q);
            let answered = page
                .iter()
                .filter(|t| {
                    t.input_schema.is_some() && t.input_value.is_some() || !t.answered.is_empty()
                })
                .count();
            let slow: Vec<String> = page.into_iter().map(shown).collect();
            match listed(&trusted, &q) {
                Some((fast, texts)) => {
                    prop_assert!(canonical);
                    prop_assert_eq!(&fast, &slow.join(","));
                    prop_assert_eq!(texts, slow.len() - answered);
                }
                None => prop_assert!(!canonical || trusted.poisoned()),
            }
            // Nobody's word, nothing handed as text.
            let unvouched = FileTxn::trusted(path, &bytes).expect("as written");
            prop_assert!(listed(&unvouched, &q).is_none());
            let checked = FileTxn::parse(path, &bytes).expect("checks");
            prop_assert!(listed(&checked, &q).is_none());
        }
        // A change on the vouched file keeps the word, and the text.
        if canonical && !tasks.is_empty() {
            let trusted = FileTxn::trusted(path, &bytes).expect("as written").with_canonical(true);
            let mut trusted = trusted;
            let first = tasks.keys().next().expect("a task").clone();
            let task = trusted.get_mut(&first).expect("reads").expect("there");
            task.status_message = Some("changed \"é\"\n".into());
            task.revision += 1;
            let changed = trusted.encoded();
            prop_assert!(changed.canonical);
            let bytes = changed.to_vec();
            let again = FileTxn::trusted(path, &bytes).expect("as written").with_canonical(true);
            let read = codec::decode_whole(path, &bytes).expect("reads");
            let slow: Vec<String> = read.values().cloned().map(shown).collect();
            if let Some((fast, _)) = listed(&again, &PageQuery::default()) {
                prop_assert_eq!(fast, slow.join(","));
            }
        }
    }
}

/// Text a task's value as the pretty writer writes it, made compact, is
/// what the compact writer writes, whatever the strings hold.
#[test]
fn compacting_pretty_text_is_the_compact_writer() {
    proptest!(|(v in value())| {
        let pretty = serde_json::to_vec_pretty(&v).expect("serializes");
        let mut out = Vec::new();
        prop_assert!(compact::compact_pretty(&pretty, &mut out));
        prop_assert_eq!(String::from_utf8(out).expect("UTF-8"), v.to_string());
    });
}
