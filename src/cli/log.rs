//! `rudder log`: the store's trail (or one task's), oldest first, and with
//! `--follow` as it grows.

use std::collections::HashSet;
use std::time::Duration;

use chrono::{DateTime, SecondsFormat, Utc};

use crate::cli::args::LogArgs;
use crate::cli::output::{self, Stream, sanitize_line};
use crate::cli::{CliError, commands::duration_arg};
use crate::store::watch::{FeedEvent, FeedOptions, Unavailable};
use crate::store::{Backend, Store, TrailEntry, TrailKey, TrailQuery};

/// Entries read per query: a long trail is printed a page at a time.
const PAGE: usize = 1000;

/// How far back a follower looks again at each change: an entry written
/// by a machine whose clock is behind this one's lands before the last
/// entry printed, and is still printed once.
const FOLLOW_SLACK: chrono::TimeDelta = chrono::TimeDelta::seconds(30);

pub fn run(store: &Store, a: LogArgs) -> Result<i32, CliError> {
    let since = a
        .since
        .as_deref()
        .map(|s| duration_arg("--since", s))
        .transpose()?
        .map(|d| ago(store.now(), d));
    let task = match &a.id {
        // A prefix names one task, as everywhere else; a task no longer
        // there is unknown (its trail went with it).
        Some(id) => Some(store.get(id)?.task_id),
        None => None,
    };
    if task.is_none() && !store.backend().exists()? {
        output::note(&format!(
            "rudder: no store at {}: it does not exist (yet), so its trail is empty",
            sanitize_line(&store.location())
        ));
    }
    let q = TrailQuery {
        task,
        since,
        actor: a.actor.clone(),
        ..TrailQuery::default()
    };
    // What was printed lately (within the slack), so that a follower's
    // look back prints nothing twice.
    let mut printed: HashSet<TrailKey> = HashSet::new();
    let mut last = print_from(store, &q, None, a.json, &mut |e| {
        if a.follow {
            printed.insert(e.key());
        }
        true
    })?;
    if !a.follow {
        return Ok(0);
    }
    follow(store, &q, &mut last, &mut printed, a.json)
}

/// `now` less `d` (the earliest time for a `d` too long to subtract).
fn ago(now: DateTime<Utc>, d: Duration) -> DateTime<Utc> {
    chrono::TimeDelta::from_std(d)
        .ok()
        .and_then(|d| now.checked_sub_signed(d))
        .unwrap_or(DateTime::<Utc>::MIN_UTC)
}

/// Print the trail `q` asks for after `after`, page by page, the entries
/// `fresh` accepts; the key of the last entry read.
fn print_from(
    store: &Store,
    q: &TrailQuery,
    mut after: Option<TrailKey>,
    json: bool,
    fresh: &mut dyn FnMut(&TrailEntry) -> bool,
) -> Result<Option<TrailKey>, CliError> {
    loop {
        let page = store.trail(&TrailQuery {
            after: after.clone(),
            limit: Some(PAGE),
            ..q.clone()
        })?;
        let mut out = Stream::default();
        let mut write = || -> Result<(), output::OutputError> {
            for e in page.iter().filter(|e| fresh(e)) {
                if json {
                    out.json(e)?;
                    out.text("\n")?;
                } else {
                    out.text(&line(e))?;
                    out.text("\n")?;
                }
            }
            Ok(())
        };
        write().map_err(|error| CliError::Output { error, done: None })?;
        out.finish()
            .map_err(|error| CliError::Output { error, done: None })?;
        match page.last() {
            Some(e) => after = Some(e.key()),
            None => return Ok(after),
        }
        if page.len() < PAGE {
            return Ok(after);
        }
    }
}

/// Keep printing the entries written after `last` as the change feed
/// reports changes, until the process is stopped.
fn follow(
    store: &Store,
    q: &TrailQuery,
    last: &mut Option<TrailKey>,
    printed: &mut HashSet<TrailKey>,
    json: bool,
) -> Result<i32, CliError> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| CliError::Other(e.into()))?;
    runtime.block_on(async {
        let mut feed = store.feed(FeedOptions {
            task: q.task.clone(),
            ..FeedOptions::default()
        });
        while let Some(event) = feed.next().await {
            match event {
                FeedEvent::Unavailable(u) => {
                    let why = match u {
                        Unavailable::Missing => "the store does not exist (any more)".into(),
                        Unavailable::Unreadable { message }
                        | Unavailable::Unreachable { message } => message,
                    };
                    output::note(&format!("rudder: {}; still following", sanitize_line(&why)));
                    continue;
                }
                FeedEvent::Reset(_) | FeedEvent::Changes(_) => {}
            }
            let from = last.as_ref().map(|k| TrailKey {
                at: k.at - FOLLOW_SLACK,
                task_id: String::new(),
                index: 0,
            });
            // Every entry from the slack on that was not printed: the new
            // ones, and any a machine with a slow clock wrote late.
            let read = print_from(store, q, from, json, &mut |e| printed.insert(e.key()))?;
            if let Some(read) = read
                && last.as_ref().is_none_or(|l| read > *l)
            {
                *last = Some(read);
            }
            if let Some(l) = last.as_ref() {
                let floor = l.at - FOLLOW_SLACK;
                printed.retain(|k| k.at >= floor);
            }
        }
        Ok(0)
    })
}

/// One entry for a person: time, task, transition, actor (face), then
/// the reason, the fields answered and rudder's note.
pub fn line(e: &TrailEntry) -> String {
    let h = &e.entry;
    let transition = match e.before {
        Some(b) if b != h.status => format!("{b} → {}", h.status),
        Some(b) => format!("{b} (again)"),
        None => format!("created {}", h.status),
    };
    let who = match (&h.actor, &h.face) {
        (Some(a), Some(f)) => format!("{} ({f})", sanitize_line(a)),
        (Some(a), None) => sanitize_line(a),
        (None, _) => "unknown actor".into(),
    };
    let mut tail = Vec::new();
    if let Some(r) = &h.reason {
        tail.push(format!("reason: {}", sanitize_line(r)));
    }
    if !h.fields.is_empty() {
        let fields: Vec<String> = h.fields.iter().map(|f| sanitize_line(f)).collect();
        tail.push(format!("answered: {}", fields.join(", ")));
    }
    if let Some(n) = &h.note {
        tail.push(sanitize_line(n));
    }
    format!(
        "{}  {}  {:<32}  {}{}",
        h.at.to_rfc3339_opts(SecondsFormat::Secs, true),
        crate::task::short_id(&e.task_id),
        transition,
        who,
        if tail.is_empty() {
            String::new()
        } else {
            format!("  {}", tail.join("; "))
        }
    )
}
