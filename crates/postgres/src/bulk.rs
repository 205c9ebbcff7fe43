//! `copy` into a PostgreSQL store: a batch of tasks in one write
//! transaction through PostgreSQL's bulk path.
//!
//! The general [`Transaction`](rudder_core::Transaction) path asks the
//! server for every task (is it there? then an `INSERT`), two round trips
//! per task: about 1,100 tasks a second. Here a batch goes to the server
//! in one `COPY ... FROM STDIN (FORMAT binary)` into a temporary table,
//! then moves with a few statements over the whole batch: the tasks TO
//! already holds are read (and locked) in one query and compared here, as
//! the SQLite copy does (a newer revision refuses the whole batch, the
//! same text or the same task is left alone, an older one is replaced),
//! the others are inserted in FROM's order in one `INSERT ... SELECT`.
//! The changes and counts are recorded at the end as every write records
//! them (in commit order, under the changes lock; see `txn.rs`), so the
//! feed sees a copy like any other write.
//!
//! The trigram index of the text filter (`schema::TEXT_INDEX`, GIN) is
//! most of a copy's cost when it is kept up row by row: a GIN index puts
//! new entries in a pending list and merges it into the index whenever it
//! passes `gin_pending_list_limit` (4 MB, about 1,500 tasks of the seed's
//! layout), and every merge rewrites the posting lists of nearly every
//! trigram. So a batch
//! raises the limit for its own transaction (`SET LOCAL`), letting the
//! whole batch's entries gather in the list, and merges them once at the
//! end with `gin_clean_pending_list` (one sorted pass), inside the same
//! transaction: the index is there and merged at every commit, and no
//! reader finds a store without its index. A failed batch rolls back, but
//! (as any rolled-back insert leaves its index entries, pointing at dead
//! rows) its entries stay in the pending list until the next merge: the
//! next write of any session (over the default limit) or a vacuum.
//!
//! A copy into a store that holds no task ([`PostgresBackend::load_into_empty`])
//! takes another road, because there nothing has to be compared and no
//! one can be using the tasks: the whole copy is one transaction, which
//! locks the table (`ACCESS EXCLUSIVE`: readers and writers wait for the
//! commit) and, for the table's owner, empties it (`TRUNCATE`, so that
//! `COPY ... FREEZE` writes the rows frozen) and sets the secondary indexes
//! and the task id's unique constraint aside (undone by a rollback, as all
//! of PostgreSQL's DDL), sends every task straight into `rudder_tasks`
//! with `COPY`, builds each index again from its own definition
//! (`pg_get_indexdef`: one sort, instead of a million insertions into ten
//! trees) and records every change at the end with one `INSERT ...
//! SELECT`. A million tasks of the seed's layout
//! take about a minute instead of ten; a failure anywhere leaves the store
//! as it was, empty and with every index.

use std::collections::BTreeMap;

use postgres::binary_copy::BinaryCopyInWriter;
use postgres::types::{ToSql, Type};

use super::PostgresBackend;
use super::schema::TEXT_INDEX;
use super::txn::{Columns, PgTxn};
use rudder_core::StoreError;
use rudder_core::query::time_text;
use rudder_core::{CopyCounts, NewerInStore};
use rudder_model::task::{Status, Task};
use rudder_sql::pending;

/// The staging table: one per session, emptied by every commit or
/// rollback (and gone with a rollback of the transaction that made it).
const STAGE: &str = "CREATE TEMP TABLE IF NOT EXISTS rudder_copy_in (\
     ord int4 NOT NULL, task_id text COLLATE \"C\" NOT NULL, status text NOT NULL, \
     idempotency_key text COLLATE \"C\", title text COLLATE \"C\", \
     created_at text COLLATE \"C\", updated_at text COLLATE \"C\", \
     claimed_by text COLLATE \"C\", lease_expires_at text COLLATE \"C\", \
     ttl_ms int8, revision int8 NOT NULL, doc text NOT NULL, \
     kind text COLLATE \"C\", status_message text COLLATE \"C\") ON COMMIT DELETE ROWS";

/// The task columns, in the staging table's order after `ord`.
const COLUMNS: &str = "task_id, status, idempotency_key, title, created_at, updated_at, \
     claimed_by, lease_expires_at, ttl_ms, revision, doc, kind, status_message";

impl PostgresBackend {
    /// Write `tasks` (in this order, new ones at the end of the store
    /// order) in one transaction, with their changes and the counts, as
    /// `copy` does: a task already there as it is is left alone, an older
    /// revision of it is replaced, and a newer one refuses the whole batch
    /// (`Ok(Err(..))`, nothing written).
    pub fn copy_batch(
        &self,
        tasks: &[Task],
    ) -> Result<Result<CopyCounts, NewerInStore>, StoreError> {
        let mut outcome = Ok(CopyCounts::default());
        super::off_runtime(|| {
            self.write(&mut |txn| {
                outcome = copy_in(txn, tasks)?;
                Ok(matches!(outcome, Ok(c) if c.copied + c.updated > 0))
            })
        })?;
        Ok(outcome)
    }

    /// Copy every task `feed` hands over (in batches, in store order) in
    /// one transaction, when this store holds no task (see the module
    /// comment); `None`, with nothing written, when it holds one: copy in
    /// batches then. `feed` is called again from the start if the
    /// transaction is run again (a connection lost before the commit).
    pub fn load_into_empty(&self, feed: &mut Feed<'_>) -> Result<Option<CopyCounts>, StoreError> {
        let mut outcome = None;
        super::off_runtime(|| {
            self.write(&mut |txn| {
                outcome = load(txn, feed)?;
                Ok(outcome.is_some_and(|c| c.copied > 0))
            })
        })?;
        Ok(outcome)
    }
}

/// What hands a load its tasks: called with the sink for each batch.
pub type Feed<'a> =
    dyn FnMut(&mut dyn FnMut(&[Task]) -> Result<(), StoreError>) -> Result<(), StoreError> + 'a;

/// The secondary indexes to set aside and build again: all but those of
/// a constraint (the primary key, the task id's `UNIQUE`), each as its
/// name and its definition.
const INDEXES_ASIDE: &str = "SELECT quote_ident(n.nspname) || '.' || quote_ident(c.relname), \
     pg_get_indexdef(i.indexrelid) FROM pg_catalog.pg_index i \
     JOIN pg_catalog.pg_class c ON c.oid = i.indexrelid \
     JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace \
     WHERE i.indrelid = 'rudder_tasks'::regclass \
     AND NOT EXISTS (SELECT 1 FROM pg_catalog.pg_constraint k WHERE k.conindid = i.indexrelid) \
     ORDER BY c.relname";

/// The unique constraints (the task id's) to set aside and add again,
/// each as its name and its definition. The primary key (`seq`, in
/// insertion order) stays: it costs little to keep up.
const UNIQUE_ASIDE: &str = "SELECT quote_ident(k.conname), pg_get_constraintdef(k.oid) \
     FROM pg_catalog.pg_constraint k \
     WHERE k.conrelid = 'rudder_tasks'::regclass AND k.contype = 'u' ORDER BY k.conname";

/// Whether the store holds a task.
const ANY_TASK: &str = "SELECT EXISTS (SELECT 1 FROM rudder_tasks)";

/// Where [`send`] sends a batch.
#[derive(Clone, Copy)]
enum Target {
    /// The staging table, each task with its place in the batch.
    Staging,
    /// The tasks table itself; `freeze`: `COPY ... FREEZE` (the table was
    /// emptied in this transaction).
    Tasks { freeze: bool },
}

fn load(txn: &mut PgTxn<'_>, feed: &mut Feed<'_>) -> Result<Option<CopyCounts>, StoreError> {
    let holds_a_task = |txn: &PgTxn<'_>| -> Result<bool, StoreError> {
        let rows = txn.query(ANY_TASK, &[], "look for tasks")?;
        Ok(rows.first().is_none_or(|r| r.get::<_, bool>(0)))
    };
    // Asked before the lock too: a copy into a store in use (run again to
    // bring changes forward) must not lock its readers out to find that.
    if holds_a_task(txn)? {
        return Ok(None);
    }
    txn.run_once(
        "LOCK TABLE rudder_tasks IN ACCESS EXCLUSIVE MODE",
        "lock the tasks",
    )?;
    if holds_a_task(txn)? {
        return Ok(None);
    }
    // Only the table's owner may empty it and set its indexes aside; any
    // other role loads it with its indexes kept up.
    let owner = txn
        .query(
            "SELECT pg_has_role((SELECT relowner FROM pg_catalog.pg_class \
                 WHERE oid = 'rudder_tasks'::regclass), 'USAGE')",
            &[],
            "look at the indexes",
        )?
        .first()
        .is_some_and(|r| r.get::<_, bool>(0));
    // Emptied in this transaction, the table takes its rows frozen
    // (`COPY ... FREEZE`): the first readers after the copy do not write
    // every page again to set its hint bits, and the visibility map is
    // set. The identity goes on where it was (`CONTINUE IDENTITY`).
    if owner {
        txn.run_once(
            "TRUNCATE rudder_tasks, rudder_trail",
            "empty the tasks table",
        )?;
    }
    let into = Target::Tasks { freeze: owner };
    let aside = |sql: &str| -> Result<Vec<(String, String)>, StoreError> {
        if !owner {
            return Ok(Vec::new());
        }
        Ok(txn
            .query(sql, &[], "look at the indexes")?
            .iter()
            .map(|r| (r.get(0), r.get(1)))
            .collect())
    };
    let (indexes, uniques) = (aside(INDEXES_ASIDE)?, aside(UNIQUE_ASIDE)?);
    if !indexes.is_empty() {
        let names: Vec<&str> = indexes.iter().map(|(n, _)| n.as_str()).collect();
        txn.run_once(
            &format!("DROP INDEX {}", names.join(", ")),
            "set the indexes aside",
        )?;
    }
    for (name, _) in &uniques {
        txn.run_once(
            &format!("ALTER TABLE rudder_tasks DROP CONSTRAINT {name}"),
            "set the indexes aside",
        )?;
    }
    // Bulk statements run for as long as the tasks take (a minute for a
    // million): the session's statement timeout, which bounds a waiting
    // statement, is lifted for this transaction only; lock waits keep
    // theirs. The sorts of the index builds get room.
    txn.run_once(
        "SET LOCAL statement_timeout = 0; SET LOCAL maintenance_work_mem = '256MB'",
        "set up the bulk load",
    )?;
    let mut counts = CopyCounts::default();
    let mut statuses = BTreeMap::<Status, i64>::new();
    feed(&mut |tasks| {
        send(txn, into, tasks, &encode(txn, tasks)?)?;
        counts.copied += tasks.len();
        for t in tasks {
            *statuses.entry(t.status).or_default() += 1;
        }
        Ok(())
    })?;
    // A task id twice (no store holds one) is refused here, naming it.
    for (name, definition) in &uniques {
        txn.run_once(
            &format!("ALTER TABLE rudder_tasks ADD CONSTRAINT {name} {definition}"),
            "build the indexes",
        )
        .inspect_err(|_| txn.final_failure())?;
    }
    for (_, definition) in &indexes {
        // An index that cannot be built (the same idempotency key twice:
        // the unique index says which) cannot be built the next time.
        txn.run_once(definition, "build the indexes")
            .inspect_err(|_| txn.final_failure())?;
    }
    txn.record_loaded(i64::try_from(counts.copied).unwrap_or(i64::MAX), &statuses)?;
    Ok(Some(counts))
}

/// Each task's document, as every write stores it.
fn encode(txn: &PgTxn<'_>, tasks: &[Task]) -> Result<Vec<String>, StoreError> {
    tasks.iter().map(|t| pending::encode(txn, t)).collect()
}

fn to_i64(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

fn copy_in(
    txn: &mut PgTxn<'_>,
    tasks: &[Task],
) -> Result<Result<CopyCounts, NewerInStore>, StoreError> {
    let docs = encode(txn, tasks)?;
    stage(txn, tasks, &docs)?;
    txn.trim_at_commit();
    let merge = gather_text_entries(txn)?;
    let mut counts = CopyCounts::default();
    // The tasks TO already holds, locked until the commit.
    let rows = txn.query(
        "SELECT s.ord, t.status, t.revision, t.doc FROM rudder_copy_in s \
         JOIN rudder_tasks t ON t.task_id = s.task_id ORDER BY s.ord FOR UPDATE OF t",
        &[],
        "read the tasks already there",
    )?;
    let mut existing = Vec::with_capacity(rows.len());
    let mut unchanged = Vec::new();
    let mut updated = Vec::new();
    for row in &rows {
        let ord: i32 = row.get(0);
        let status: String = row.get(1);
        let revision: i64 = row.get(2);
        let stored: String = row.get(3);
        let Some((task, doc)) = usize::try_from(ord)
            .ok()
            .and_then(|i| Some((tasks.get(i)?, docs.get(i)?)))
        else {
            continue;
        };
        existing.push(ord);
        let revision = u64::try_from(revision).unwrap_or(0);
        if revision > task.revision {
            return Ok(Err(NewerInStore {
                task_id: task.task_id.clone(),
                revision,
            }));
        }
        // The same text is the same task; other text may still be (written
        // by another version of rudder): compare tasks.
        if stored == *doc || serde_json::from_str::<Task>(&stored).is_ok_and(|s| s == *task) {
            unchanged.push(ord);
            continue;
        }
        let before: Status = status.parse().map_err(|e| StoreError::Corrupt {
            location: txn.backend.location(),
            line: None,
            column: None,
            message: format!("the task {:?} has status {status:?}: {e}", task.task_id),
        })?;
        updated.push((ord, task, before));
    }
    if !updated.is_empty() {
        let ords: Vec<i32> = updated.iter().map(|(o, _, _)| *o).collect();
        txn.execute(
            "UPDATE rudder_tasks t SET status = s.status, idempotency_key = s.idempotency_key, \
             title = s.title, created_at = s.created_at, updated_at = s.updated_at, \
             claimed_by = s.claimed_by, lease_expires_at = s.lease_expires_at, \
             ttl_ms = s.ttl_ms, revision = s.revision, doc = s.doc, kind = s.kind, \
             status_message = s.status_message \
             FROM rudder_copy_in s WHERE t.task_id = s.task_id AND s.ord = ANY($1)",
            &[&ords],
            "update a task",
        )?;
    }
    // The rest are new: in FROM's order, so that the store order is kept.
    let new = txn.execute(
        &format!(
            "INSERT INTO rudder_tasks ({COLUMNS}) SELECT {COLUMNS} FROM rudder_copy_in \
             WHERE NOT (ord = ANY($1)) ORDER BY ord"
        ),
        &[&existing],
        "insert a task",
    )?;
    if merge {
        txn.query(
            &format!("SELECT gin_clean_pending_list('{TEXT_INDEX}'::regclass)"),
            &[],
            "merge the text index",
        )?;
    }
    counts.copied = usize::try_from(new).unwrap_or(usize::MAX);
    counts.updated = updated.len();
    counts.unchanged = unchanged.len();
    let existing: std::collections::HashSet<i32> = existing.into_iter().collect();
    let before_of: std::collections::HashMap<i32, Status> =
        updated.iter().map(|(o, _, b)| (*o, *b)).collect();
    for (i, task) in tasks.iter().enumerate() {
        let ord = i32::try_from(i).unwrap_or(i32::MAX);
        let before = match before_of.get(&ord) {
            Some(b) => Some(*b),
            None if existing.contains(&ord) => continue,
            None => None,
        };
        txn.record(
            &task.task_id,
            to_i64(task.revision),
            task.updated_at.map(time_text),
            before,
            Some(task.status),
        );
    }
    Ok(Ok(counts))
}

/// Let this transaction's entries of the text index gather in its pending
/// list (see the module comment), when the index is there and this role
/// may merge the list (`gin_clean_pending_list` is for the index's owner,
/// as `VACUUM` is); returns whether to merge it at the end. Otherwise the
/// index is kept up as by any write.
fn gather_text_entries(txn: &PgTxn<'_>) -> Result<bool, StoreError> {
    let rows = txn.query(
        "SELECT pg_has_role(c.relowner, 'USAGE') FROM pg_catalog.pg_class c \
         WHERE c.oid = to_regclass($1)",
        &[&TEXT_INDEX],
        "look at the text index",
    )?;
    let owner = rows.first().is_some_and(|r| r.get::<_, bool>(0));
    if owner {
        // A batch's entries (about 26 MB for 10,000 tasks of the seed's
        // layout) fit, and the merge sorts them in memory.
        txn.execute(
            "SELECT set_config('gin_pending_list_limit', '1GB', true), \
             set_config('maintenance_work_mem', '256MB', true)",
            &[],
            "look at the text index",
        )?;
    }
    Ok(owner)
}

/// Send the batch to the staging table in one binary `COPY`.
fn stage(txn: &PgTxn<'_>, tasks: &[Task], docs: &[String]) -> Result<(), StoreError> {
    txn.tx
        .borrow_mut()
        .batch_execute(STAGE)
        .map_err(|e| txn.fail("stage the tasks", e))?;
    send(txn, Target::Staging, tasks, docs)
}

/// Send `tasks` (with their `docs`) in one binary `COPY`: the task
/// columns, after each task's place in the batch (`ord`) into the staging
/// table.
fn send(txn: &PgTxn<'_>, into: Target, tasks: &[Task], docs: &[String]) -> Result<(), StoreError> {
    let copy = match into {
        Target::Staging => {
            format!("COPY rudder_copy_in (ord, {COLUMNS}) FROM STDIN (FORMAT binary)")
        }
        Target::Tasks { freeze } => format!(
            "COPY rudder_tasks ({COLUMNS}) FROM STDIN (FORMAT binary{})",
            if freeze { ", FREEZE" } else { "" }
        ),
    };
    let mut tx = txn.tx.borrow_mut();
    let sink = tx
        .copy_in(&copy)
        .map_err(|e| txn.fail("send the tasks", e))?;
    let types = [
        Type::INT4,
        Type::TEXT,
        Type::TEXT,
        Type::TEXT,
        Type::TEXT,
        Type::TEXT,
        Type::TEXT,
        Type::TEXT,
        Type::TEXT,
        Type::INT8,
        Type::INT8,
        Type::TEXT,
        Type::TEXT,
        Type::TEXT,
    ];
    let skip = usize::from(matches!(into, Target::Tasks { .. }));
    let mut writer = BinaryCopyInWriter::new(sink, &types[skip..]);
    for (i, (task, doc)) in tasks.iter().zip(docs).enumerate() {
        let ord = i32::try_from(i).unwrap_or(i32::MAX);
        let time = |t: Option<chrono::DateTime<chrono::Utc>>| t.map(time_text);
        let (created, updated, lease) = (
            time(task.created_at),
            time(task.updated_at),
            time(task.lease_expires_at),
        );
        let ttl = task.ttl_ms.map(to_i64);
        let revision = to_i64(task.revision);
        let columns = Columns::of(txn, task)?;
        let row: [&(dyn ToSql + Sync); 14] = [
            &ord,
            &task.task_id,
            &task.status.as_str(),
            &task.idempotency_key,
            &columns.title,
            &created,
            &updated,
            &task.claimed_by,
            &lease,
            &ttl,
            &revision,
            doc,
            &task.kind,
            &columns.status_message,
        ];
        writer
            .write(&row[skip..])
            .map_err(|e| txn.fail("send the tasks", e))?;
    }
    writer.finish().map_err(|e| txn.fail("send the tasks", e))?;
    Ok(())
}
