//! The PostgreSQL schema and its migrations.
//!
//! Every table is prefixed `rudder_` and lives in the connection's first
//! schema (`search_path`, `public` by default), so that a database shared
//! with other applications is fine. The version is the one row of
//! `rudder_schema`; migration `i` of [`MIGRATIONS`] takes the schema from
//! version `i` to `i + 1`. Migrations run inside a write transaction under
//! a transaction-level advisory lock ([`MIGRATE_LOCK`]), so that of many
//! processes meeting a new database at once exactly one creates the tables,
//! and the tables appear with the first write, never half-made (DDL is
//! transactional in PostgreSQL). A database whose version is newer than
//! [`VERSION`] is refused, never altered.

use postgres::error::SqlState;
use postgres::{SimpleQueryMessage, Transaction};

/// The advisory lock key under which migrations run ("rudder" + 1).
pub const MIGRATE_LOCK: i64 = 0x7275_6464_6572_0001;
/// The advisory lock key that serializes the recording of changes (see
/// `txn.rs`, "commit order").
pub const CHANGES_LOCK: i64 = 0x7275_6464_6572_0002;
/// The channel every writing transaction notifies.
pub const CHANNEL: &str = "rudder_changes";

/// The schema, one migration per version.
///
/// - `rudder_tasks`: one row per task. `doc` is the whole task as JSON
///   *text*, not `jsonb`: `jsonb` would reorder keys, drop duplicate ones
///   and normalize numbers, where the other backends give back the very
///   text they were given (unknown fields, key order and number spelling
///   round-trip byte for byte, so that `copy` between backends is exact).
///   Beside it, the columns the queries need, with their indexes. Text
///   columns that are compared or ordered use the `C` collation: byte
///   order, as the policy and the other backends order ids, titles and
///   times (RFC 3339 UTC with nine fraction digits, whose byte order is
///   time order). `seq` is the store order.
/// - The idempotency key's index is unique: without SQLite's single
///   writer, two machines creating with one key at the same moment would
///   both find it free; the unique index makes the second insert fail, and
///   the write is run again, finding the first task (one task per key, as
///   the design asks). The price: a hand-written JSON file that repeats a key
///   (which the file and SQLite backends accept, first task winning)
///   cannot be copied into PostgreSQL; `copy` says which key.
/// - `rudder_counts`: tasks per status, kept in the same transaction.
/// - `rudder_changes`: one row per change of a task, in commit order, for
///   the change feed, with the task's `updated_at` as written (`at`; none
///   for a removal).
///
/// Version 2: the working tasks by lease, so that the TUI's count of
/// stalled tasks (`lease_expires_at <= now`, asked once a second) is a
/// range of an index, not a walk over every working task.
///
/// Version 3 is for the TUI's pages and text filter: the indexes of the
/// orders are remade `NULLS FIRST`, the order `query::compare` uses (a
/// default index, `NULLS LAST`, serves neither that order nor its reverse,
/// so a page walking backwards read the whole table), and `status_message`
/// becomes a column, generated from the document (so no writer has to
/// know it), for the text filter; [`ensure_text_index`] adds a trigram
/// index over the filter's columns when `pg_trgm` can be had.
///
/// [`KINDS`] gives tasks their `kind`: a column generated from the
/// document (so no writer has to know it, and the migration fills it for
/// every task already there), indexed by (status, kind, seq), so that a
/// worker claiming tasks of one kind reads the working tasks of that kind
/// in store order and never those of other kinds.
///
/// [`WRITTEN`] makes `status_message` and `kind` columns the writers fill
/// instead of generated ones: PostgreSQL's `->>` decodes every string of
/// the document on the way, and refuses a `\u0000` anywhere in it (a
/// JSON value may hold one, and the other backends keep it), so a task
/// whose request held a NUL character could not be written.
///
/// [`DELIVERIES`] adds `rudder_deliveries`, the record of what each
/// `rudder notify` delivered (docs/notify.md): one row per notifier name
/// and event (task, event, round), with the claim's holder and lease.
/// Beside the tasks, not in them: a delivery moves no task's revision.
///
/// [`TRAIL`] adds `rudder_trail`, the store's trail (`rudder log`): one
/// row per history entry of every task (its place, time, actor and
/// status, and the entry as JSON text: `json`, never `jsonb`, keeps a
/// `\u0000` in a note as written), indexed by time and by actor. A
/// trigger keeps it from the documents, so every way a task is written
/// (a policy write, a copy's batch or bulk load) keeps it alike: an
/// insert adds the task's entries, a removal drops them, and an update
/// that may have added entries (a change of status, or a revision that
/// moved by more than one, as a copy's replacement does) writes them
/// again. A write that changes no status (a heartbeat, a claim) adds no
/// entry and skips the trigger. The trigger runs with its owner's rights
/// (`SECURITY DEFINER`, its search path the migration's), so an
/// application role granted only the tasks table's rights still writes;
/// reading the trail needs `SELECT` on it. The migration fills it from
/// the tasks already there.
pub const MIGRATIONS: &[&str] = &[V1, V2, V3, KINDS, WRITTEN, DELIVERIES, TRAIL];

const V1: &str = r#"
CREATE TABLE rudder_tasks (
    seq bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    task_id text COLLATE "C" NOT NULL UNIQUE,
    status text NOT NULL,
    idempotency_key text COLLATE "C",
    title text COLLATE "C",
    created_at text COLLATE "C",
    updated_at text COLLATE "C",
    claimed_by text COLLATE "C",
    lease_expires_at text COLLATE "C",
    ttl_ms bigint,
    revision bigint NOT NULL,
    doc text NOT NULL
);
CREATE UNIQUE INDEX rudder_tasks_by_key ON rudder_tasks (idempotency_key)
    WHERE idempotency_key IS NOT NULL;
CREATE INDEX rudder_tasks_by_status ON rudder_tasks (status, seq);
CREATE INDEX rudder_tasks_by_status_updated ON rudder_tasks (status, updated_at, task_id);
CREATE INDEX rudder_tasks_by_updated ON rudder_tasks (updated_at, task_id);
CREATE INDEX rudder_tasks_by_created ON rudder_tasks (created_at, task_id);
CREATE INDEX rudder_tasks_by_title ON rudder_tasks (title, task_id);
CREATE TABLE rudder_counts (
    status text PRIMARY KEY,
    n bigint NOT NULL
);
CREATE TABLE rudder_changes (
    seq bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    task_id text NOT NULL,
    revision bigint NOT NULL,
    status_before text,
    status_after text,
    at text
);
"#;

const V2: &str = r#"
CREATE INDEX rudder_tasks_by_status_lease ON rudder_tasks (status, lease_expires_at);
"#;

const V3: &str = r#"
ALTER TABLE rudder_tasks ADD COLUMN status_message text COLLATE "C"
    GENERATED ALWAYS AS (doc::json ->> 'status_message') STORED;
DROP INDEX rudder_tasks_by_status_updated, rudder_tasks_by_updated,
    rudder_tasks_by_created, rudder_tasks_by_title;
CREATE INDEX rudder_tasks_by_status_updated
    ON rudder_tasks (status, updated_at NULLS FIRST, task_id);
CREATE INDEX rudder_tasks_by_updated ON rudder_tasks (updated_at NULLS FIRST, task_id);
CREATE INDEX rudder_tasks_by_created ON rudder_tasks (created_at NULLS FIRST, task_id);
CREATE INDEX rudder_tasks_by_title ON rudder_tasks (title NULLS FIRST, task_id);
"#;

const KINDS: &str = r#"
ALTER TABLE rudder_tasks ADD COLUMN kind text COLLATE "C"
    GENERATED ALWAYS AS (doc::json ->> 'kind') STORED;
CREATE INDEX rudder_tasks_by_status_kind ON rudder_tasks (status, kind, seq);
"#;

const WRITTEN: &str = r#"
ALTER TABLE rudder_tasks ALTER COLUMN status_message DROP EXPRESSION IF EXISTS;
ALTER TABLE rudder_tasks ALTER COLUMN kind DROP EXPRESSION IF EXISTS;
"#;

const DELIVERIES: &str = r#"
CREATE TABLE IF NOT EXISTS rudder_deliveries (
    notifier text COLLATE "C" NOT NULL,
    task_id text COLLATE "C" NOT NULL,
    event text COLLATE "C" NOT NULL,
    round bigint NOT NULL,
    holder text COLLATE "C",
    lease_expires_at text COLLATE "C",
    delivered_at text COLLATE "C",
    attempts bigint NOT NULL DEFAULT 0,
    PRIMARY KEY (notifier, task_id, event, round)
);
"#;

const TRAIL: &str = r#"
CREATE TABLE IF NOT EXISTS rudder_trail (
    task_id text COLLATE "C" NOT NULL,
    idx bigint NOT NULL,
    at text COLLATE "C" NOT NULL,
    actor text COLLATE "C",
    status text NOT NULL,
    entry text NOT NULL,
    PRIMARY KEY (task_id, idx)
);
CREATE INDEX IF NOT EXISTS rudder_trail_by_at ON rudder_trail (at, task_id, idx);
CREATE INDEX IF NOT EXISTS rudder_trail_by_actor ON rudder_trail (actor, at, task_id, idx);
CREATE OR REPLACE FUNCTION rudder_trail_rows(task text, doc text)
    RETURNS TABLE (task_id text, idx bigint, at text, actor text, status text, entry text)
    LANGUAGE sql IMMUTABLE AS $$
    -- json's -> and ->> cannot read a document holding a \u0000 anywhere
    -- (they unescape every string), so the document is read with each
    -- \u0000 spelled \ufffe, an escape serde_json never writes (it writes
    -- that character raw), and each entry's text is spelled back.
    SELECT task, h.i - 1, COALESCE(h.e ->> 'at', ''), h.e ->> 'actor',
           COALESCE(h.e ->> 'status', ''), replace(h.e::text, E'\\ufffe', E'\\u0000')
    FROM json_array_elements(replace(doc, E'\\u0000', E'\\ufffe')::json -> 'history')
         WITH ORDINALITY AS h(e, i)
$$;
CREATE OR REPLACE FUNCTION rudder_trail_of() RETURNS trigger LANGUAGE plpgsql
    SECURITY DEFINER SET search_path FROM CURRENT AS $$
BEGIN
    IF TG_OP <> 'INSERT' THEN
        DELETE FROM rudder_trail WHERE rudder_trail.task_id = OLD.task_id;
    END IF;
    IF TG_OP <> 'DELETE' THEN
        INSERT INTO rudder_trail (task_id, idx, at, actor, status, entry)
            SELECT * FROM rudder_trail_rows(NEW.task_id, NEW.doc::text);
    END IF;
    RETURN NULL;
END
$$;
DROP TRIGGER IF EXISTS rudder_trail_of_new ON rudder_tasks;
CREATE TRIGGER rudder_trail_of_new AFTER INSERT OR DELETE ON rudder_tasks
    FOR EACH ROW EXECUTE FUNCTION rudder_trail_of();
DROP TRIGGER IF EXISTS rudder_trail_of_changed ON rudder_tasks;
CREATE TRIGGER rudder_trail_of_changed AFTER UPDATE ON rudder_tasks
    FOR EACH ROW WHEN (NOT (NEW.revision = OLD.revision + 1 AND NEW.status = OLD.status))
    EXECUTE FUNCTION rudder_trail_of();
DELETE FROM rudder_trail;
INSERT INTO rudder_trail (task_id, idx, at, actor, status, entry)
    SELECT r.* FROM rudder_tasks t, rudder_trail_rows(t.task_id, t.doc::text) AS r;
"#;

/// The version that gave the store its trail (a reader of older tables
/// reads the trail from the tasks).
pub const TRAIL_VERSION: i32 = version_of(TRAIL);

/// The version that gave tasks their `kind` column: the one [`KINDS`]
/// migrates to, wherever it stands in [`MIGRATIONS`] (a reader of older
/// tables finds no kinds in the columns).
pub const KIND_VERSION: i32 = version_of(KINDS);

/// The version migration `sql` of [`MIGRATIONS`] takes the schema to.
const fn version_of(sql: &str) -> i32 {
    let mut i = 0;
    while i < MIGRATIONS.len() {
        if same(MIGRATIONS[i].as_bytes(), sql.as_bytes()) {
            return i as i32 + 1;
        }
        i += 1;
    }
    panic!("the migration is not in MIGRATIONS")
}

const fn same(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    let mut i = 0;
    while i < a.len() {
        if a[i] != b[i] {
            return false;
        }
        i += 1;
    }
    true
}

/// The version that gave the text filter its column and index.
pub const TEXT_VERSION: i32 = 3;

/// The trigram index of the text filter (see [`ensure_text_index`]).
pub const TEXT_INDEX: &str = "rudder_tasks_by_text";

/// The schema version this rudder writes.
pub const VERSION: i32 = MIGRATIONS.len() as i32;

/// The version of the schema, asked outside a transaction in one round
/// trip where it can be (see [`crate::PostgresBackend`]'s probe): `None`
/// when there is no version table in the first schema of the search path.
/// The cheap form first: the version with the schemas the name was looked
/// up in. With one schema on the search path the table found is the one
/// in it; with more, the exact question (is it the first schema's?) is
/// asked, which costs a new backend twice as much (the functions and
/// casts it must look up in the catalog; see docs/performance.md).
pub fn probe(client: &mut postgres::Client) -> Result<Option<i32>, postgres::Error> {
    fn first(messages: &[SimpleQueryMessage]) -> Option<&postgres::SimpleQueryRow> {
        messages.iter().find_map(|m| match m {
            SimpleQueryMessage::Row(row) => Some(row),
            _ => None,
        })
    }
    let version = |row: &postgres::SimpleQueryRow| row.get(0).and_then(|v| v.parse().ok());
    let messages =
        match client.simple_query("SELECT version, current_schemas(false) FROM rudder_schema") {
            Ok(m) => m,
            Err(e) if e.code() == Some(&SqlState::UNDEFINED_TABLE) => return Ok(None),
            Err(e) => return Err(e),
        };
    let Some(row) = first(&messages) else {
        return Ok(None);
    };
    if row.get(1).is_some_and(one_schema) {
        return Ok(version(row));
    }
    let messages = client.simple_query(
        "SELECT version FROM rudder_schema WHERE \
         to_regclass(quote_ident(current_schema()) || '.rudder_schema') = 'rudder_schema'::regclass",
    )?;
    Ok(first(&messages).and_then(version))
}

/// Whether `path`, the text of `current_schemas(false)` (a `name[]`:
/// `{public}`, `{"my schema",public}`), names exactly one schema: then an
/// unqualified table name can only have been found in that schema (rudder
/// makes no temporary tables, and none can be made in `pg_catalog`).
pub fn one_schema(path: &str) -> bool {
    let Some(inner) = path.strip_prefix('{').and_then(|p| p.strip_suffix('}')) else {
        return false;
    };
    if inner.is_empty() {
        return false;
    }
    let Some(quoted) = inner.strip_prefix('"') else {
        // An element with a comma, a quote, a brace or a blank is quoted.
        return !inner.contains(',');
    };
    // A quoted element: `\` escapes the next character; the element is
    // the whole array if its closing quote ends the text.
    let mut chars = quoted.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => {
                chars.next();
            }
            '"' => return chars.as_str().is_empty(),
            _ => {}
        }
    }
    false
}

/// The version of the schema in the database: `None` when rudder's tables
/// were never created (a reader sees an empty store).
pub fn version(tx: &mut Transaction<'_>) -> Result<Option<i32>, postgres::Error> {
    // A scan of the catalog with this statement's snapshot, not the
    // session's catalog cache (`to_regclass`), which taking an advisory
    // lock does not refresh: under the migration lock, a table another
    // process just created must be seen.
    let present: bool = tx
        .query_one(
            "SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_tables              WHERE schemaname = current_schema() AND tablename = 'rudder_schema')",
            &[],
        )?
        .get(0);
    if !present {
        return Ok(None);
    }
    let row = tx.query_opt("SELECT version FROM rudder_schema", &[])?;
    Ok(Some(row.map_or(0, |r| r.get(0))))
}

/// Bring the schema to [`VERSION`] inside the caller's write transaction,
/// under the migration lock (checked again under it: another process may
/// have just done it). Returns the version found under the lock.
pub fn migrate(tx: &mut Transaction<'_>) -> Result<i32, postgres::Error> {
    tx.execute("SELECT pg_advisory_xact_lock($1)", &[&MIGRATE_LOCK])?;
    let found = version(tx)?;
    let from = found.unwrap_or(0);
    if from >= VERSION {
        return Ok(from);
    }
    if found.is_none() {
        tx.batch_execute(
            "CREATE TABLE rudder_schema (\
                 one boolean PRIMARY KEY DEFAULT true CHECK (one), \
                 version integer NOT NULL)",
        )?;
    }
    let text_index_wanted = from < TEXT_VERSION;
    for (i, sql) in MIGRATIONS.iter().enumerate().skip(from.max(0) as usize) {
        tx.batch_execute(sql)?;
        let v = i as i32 + 1;
        tx.execute(
            "INSERT INTO rudder_schema (version) VALUES ($1) \
             ON CONFLICT (one) DO UPDATE SET version = excluded.version",
            &[&v],
        )?;
    }
    if text_index_wanted {
        // Without it the filter is still right, only not indexed.
        ensure_text_index(tx)?;
    }
    Ok(from)
}

/// Make the trigram index of the text filter if it is not there: a GIN
/// index (`pg_trgm`'s `gin_trgm_ops`) over the id, title, key and status
/// message, which the filter's `ILIKE '%…%'` arms use. `pg_trgm` is a
/// trusted extension (PostgreSQL 13 and later): a role with `CREATE` on
/// the database may install it; otherwise (or where the extension is not
/// installed on the server) the index is left out and the reason returned
/// (`Some`): the filter then reads every row, and an administrator's
/// `CREATE EXTENSION pg_trgm` followed by `rudder migrate` adds the index.
/// Runs under the migration lock, in a savepoint, so that a refusal
/// leaves the caller's transaction as it was.
pub fn ensure_text_index(tx: &mut Transaction<'_>) -> Result<Option<String>, postgres::Error> {
    tx.execute("SELECT pg_advisory_xact_lock($1)", &[&MIGRATE_LOCK])?;
    let present: bool = tx
        .query_one(
            "SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_indexes \
             WHERE schemaname = current_schema() AND indexname = $1)",
            &[&TEXT_INDEX],
        )?
        .get(0);
    if present {
        return Ok(None);
    }
    let mut savepoint = tx.savepoint("rudder_text_index")?;
    match create_text_index(&mut savepoint) {
        Ok(()) => {
            savepoint.commit()?;
            Ok(None)
        }
        Err(e) => {
            savepoint.rollback()?;
            Ok(Some(match e.as_db_error() {
                Some(db) => format!("{} ({})", db.message(), db.code().code()),
                None => e.to_string(),
            }))
        }
    }
}

/// The schema `pg_trgm` is installed into when a store needs it and the
/// database has none: a schema of its own, which no store lives in, so
/// that dropping one store's schema (`DROP SCHEMA ... CASCADE`) cannot
/// drop the extension, and with it every other store's trigram index.
pub const EXTENSION_SCHEMA: &str = "rudder_extensions";

fn create_text_index(tx: &mut Transaction<'_>) -> Result<(), postgres::Error> {
    let installed: bool = tx
        .query_one(
            "SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_extension WHERE extname = 'pg_trgm')",
            &[],
        )?
        .get(0);
    if !installed {
        tx.batch_execute(&format!(
            "CREATE SCHEMA IF NOT EXISTS {EXTENSION_SCHEMA}; \
             CREATE EXTENSION IF NOT EXISTS pg_trgm SCHEMA {EXTENSION_SCHEMA}"
        ))?;
    }
    // The extension lives in one schema of the database (ours, or where
    // an administrator or an older rudder put it), maybe not this store's.
    let schema: String = tx
        .query_one(
            "SELECT n.nspname::text FROM pg_catalog.pg_extension e \
             JOIN pg_catalog.pg_namespace n ON n.oid = e.extnamespace \
             WHERE e.extname = 'pg_trgm'",
            &[],
        )?
        .get(0);
    let ops = format!("\"{}\".gin_trgm_ops", schema.replace('"', "\"\""));
    tx.batch_execute(&format!(
        "CREATE INDEX {TEXT_INDEX} ON rudder_tasks USING gin \
         (task_id {ops}, title {ops}, idempotency_key {ops}, status_message {ops})"
    ))
}

#[cfg(test)]
mod tests {
    use super::one_schema;

    #[test]
    fn one_schema_on_the_path_is_told_from_several() {
        for one in [
            "{public}",
            "{\"my schema\"}",
            "{\"a,b\"}",
            "{\"a\\\"b,c\"}",
            "{\"a}b\"}",
        ] {
            assert!(one_schema(one), "{one}");
        }
        for not_one in [
            "{}",
            "{a,public}",
            "{\"my schema\",public}",
            "{\"a\\\",b\",c}",
            "{\"a\"}x",
            "public",
            "{\"unclosed}",
            "",
        ] {
            assert!(!one_schema(not_one), "{not_one}");
        }
    }
}
