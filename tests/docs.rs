//! The documentation says what the code does (issue 30 items 14, 16 and
//! 17, issue 31 item 8): docs/architecture.md draws every crate of the
//! workspace with its real dependencies, every list of the stores (the
//! README, `rudder --help`, `--store`'s help, the manual page) names all
//! three, the PostgreSQL schema version docs/stores.md states is the one
//! `rudder migrate` reports, and its local PostgreSQL recipe works.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use common::pg;

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

fn read(rel: &str) -> String {
    std::fs::read_to_string(Path::new(ROOT).join(rel)).unwrap_or_else(|e| panic!("{rel}: {e}"))
}

/// A workspace crate as Cargo sees it: its folder (relative to the root,
/// `.` for the root) and the workspace crates it depends on (normal and
/// optional dependencies; not dev or build ones).
#[derive(Debug, PartialEq)]
struct Crate {
    folder: String,
    depends_on: BTreeSet<String>,
}

/// The workspace's crates, from `cargo metadata --no-deps`.
fn workspace() -> BTreeMap<String, Crate> {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let out = std::process::Command::new(cargo)
        .args(["metadata", "--no-deps", "--format-version", "1"])
        .current_dir(ROOT)
        .output()
        .expect("run cargo metadata");
    assert!(
        out.status.success(),
        "cargo metadata: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let meta: serde_json::Value = serde_json::from_slice(&out.stdout).expect("metadata is JSON");
    let packages = meta["packages"].as_array().expect("packages");
    let names: BTreeSet<String> = packages
        .iter()
        .map(|p| p["name"].as_str().expect("a name").to_string())
        .collect();
    let root = std::fs::canonicalize(ROOT).expect("the root");
    packages
        .iter()
        .map(|p| {
            let manifest = PathBuf::from(p["manifest_path"].as_str().expect("a manifest"));
            let dir = manifest.parent().expect("a folder");
            let rel = dir
                .strip_prefix(&root)
                .expect("a crate inside the workspace");
            let folder = match rel.to_str().expect("a UTF-8 path") {
                "" => ".".to_string(),
                f => f.to_string(),
            };
            let depends_on = p["dependencies"]
                .as_array()
                .expect("dependencies")
                .iter()
                .filter(|d| d["kind"].is_null())
                .filter_map(|d| d["name"].as_str())
                .filter(|n| names.contains(*n))
                .map(str::to_string)
                .collect();
            let name = p["name"].as_str().expect("a name").to_string();
            (name, Crate { folder, depends_on })
        })
        .collect()
}

/// The names in backquotes in a table cell: "`a`, `b`" → {a, b}.
fn quoted(cell: &str) -> BTreeSet<String> {
    cell.split('`')
        .skip(1)
        .step_by(2)
        .map(str::to_string)
        .collect()
}

/// docs/architecture.md's "Crates" section: the diagram (its first code
/// block) and the table `| crate | folder | depends on | holds |`.
fn architecture() -> (String, BTreeMap<String, Crate>) {
    let page = read("docs/architecture.md");
    let start = page.find("## Crates\n").expect("a Crates section");
    let section = &page[start..];
    let section = &section[..section[3..].find("\n## ").map_or(section.len(), |e| e + 3)];
    let fence = section.find("```").expect("a diagram");
    let diagram = &section[fence + 3..];
    let diagram = diagram[..diagram.find("```").expect("the diagram's end")].to_string();
    let header = "| crate | folder | depends on | holds |";
    let table = &section[section.find(header).expect("the crates table")..];
    let rows = table
        .lines()
        .skip(2)
        .take_while(|l| l.starts_with('|'))
        .map(|l| {
            let cells: Vec<&str> = l.split('|').map(str::trim).collect();
            let name = cells[1].trim_matches('`').to_string();
            let folder = cells[2].trim_matches('`').to_string();
            let depends_on = quoted(cells[3]);
            (name, Crate { folder, depends_on })
        })
        .collect();
    (diagram, rows)
}

#[test]
fn the_architecture_page_draws_every_workspace_crate_as_it_is() {
    let crates = workspace();
    assert!(
        crates.len() >= 2 && crates.contains_key("rudder"),
        "cargo metadata found the workspace: {crates:?}"
    );
    let (diagram, table) = architecture();
    for (name, krate) in &crates {
        assert!(
            diagram.contains(name.as_str()),
            "docs/architecture.md's diagram does not draw the crate {name}"
        );
        let row = table
            .get(name)
            .unwrap_or_else(|| panic!("docs/architecture.md's crates table has no row for {name}"));
        assert_eq!(
            row, krate,
            "docs/architecture.md's row for {name} (folder, depends on) differs from Cargo's"
        );
    }
    for name in table.keys() {
        assert!(
            crates.contains_key(name),
            "docs/architecture.md's crates table names {name}, which is not in the workspace"
        );
    }
}

/// Each store by the name a reader knows it by, as any list of the stores
/// must spell it.
const STORES: [&str; 3] = ["JSON file", "SQLite", "PostgreSQL"];

fn names_all_three(what: &str, text: &str) {
    for store in STORES {
        assert!(
            text.contains(store),
            "{what} lists the stores without {store}:\n{text}"
        );
    }
}

#[test]
fn every_list_of_the_stores_names_all_three() {
    let help = common::run_plain(&["--help"]);
    assert_eq!(help.code, 0, "{help:?}");
    let about = help.stdout.lines().next().expect("the about line");
    names_all_three("`rudder --help`'s first line", about);
    let store_line = help
        .stdout
        .lines()
        .find(|l| l.trim_start().starts_with("--store"))
        .expect("--store in --help");
    names_all_three("`rudder --help`'s --store", store_line);
    assert!(
        store_line.contains("postgres://"),
        "--store's help shows the PostgreSQL URL: {store_line}"
    );

    let man = common::run_plain(&["man"]);
    assert_eq!(man.code, 0, "{man:?}");
    // roff escapes hyphens; the store names have none.
    names_all_three("`rudder man`", &man.stdout);

    // The README's first screen says what rudder is: all three stores,
    // the MCP face and Python (issue 31).
    let readme = read("README.md");
    let first: String = readme.lines().take(40).collect::<Vec<_>>().join("\n");
    names_all_three("the README's first 40 lines", &first);
    for word in ["TUI", "CLI", "MCP", "Python", "shell", "demo-screen.svg"] {
        assert!(
            first.contains(word),
            "the README's first 40 lines lack {word}"
        );
    }
    for command in ["cargo run --release -- demo", "cargo test"] {
        assert!(
            first.lines().any(|l| l.starts_with(command)),
            "the README's first screen has `{command}`"
        );
    }
    assert!(
        readme.lines().count() <= 300,
        "the README is at most 300 lines"
    );
}

/// The sentence of docs/stores.md that states the PostgreSQL schema's
/// version.
fn documented_postgres_schema_version() -> i64 {
    let page = read("docs/stores.md");
    let lead = "This rudder's PostgreSQL\nschema is version ";
    let at = page
        .find(lead)
        .expect("docs/stores.md states the PostgreSQL schema's version")
        + lead.len();
    let digits: String = page[at..]
        .chars()
        .take_while(char::is_ascii_digit)
        .collect();
    digits.parse().expect("a version number")
}

#[test]
fn the_documented_postgres_schema_version_is_the_one_migrate_reports() {
    let documented = documented_postgres_schema_version();
    assert_eq!(
        documented,
        i64::from(rudder::store::postgres::SCHEMA_VERSION),
        "docs/stores.md's PostgreSQL schema version"
    );
    if !pg::available() {
        return;
    }
    let cluster = pg::shared();
    let db = cluster.create_database();
    let r = common::run(Path::new(&cluster.url(&db)), &["migrate", "--json"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert_eq!(
        r.json()["schema_version"].as_i64(),
        Some(documented),
        "`rudder migrate --json` on a new store: {r:?}"
    );
}

const PG_LOCAL: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/scripts/pg-local.sh");

/// Stops and removes a cluster of `scripts/pg-local.sh up` however the
/// test ends.
struct Down(PathBuf);

impl Drop for Down {
    fn drop(&mut self) {
        if self.0.exists() {
            let _ = std::process::Command::new(PG_LOCAL)
                .arg("down")
                .arg(&self.0)
                .status();
        }
    }
}

/// docs/stores.md's local recipe, as root (through the `postgres` user) or
/// as anyone else: `scripts/pg-local.sh up` starts a cluster and prints
/// the `export`s a shell evals, the store it names works, and `down`
/// stops it and removes its directory.
#[test]
fn the_local_postgres_recipe_starts_a_store_and_down_removes_it() {
    if !pg::available() {
        return;
    }
    let tmp = tempfile::tempdir().expect("a temp dir");
    // As root the server runs as `postgres`, which must reach DIR.
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(tmp.path(), std::fs::Permissions::from_mode(0o755)).expect("chmod");
    let dir = tmp.path().join("pg");
    let down = Down(dir.clone());
    let up = std::process::Command::new(PG_LOCAL)
        .arg("up")
        .arg(&dir)
        .output()
        .expect("run scripts/pg-local.sh up");
    let stdout = String::from_utf8_lossy(&up.stdout);
    assert!(
        up.status.success(),
        "up: {stdout}{}",
        String::from_utf8_lossy(&up.stderr)
    );
    let exports: BTreeMap<&str, &str> = stdout
        .lines()
        .map(|l| {
            let (name, value) = l
                .strip_prefix("export ")
                .and_then(|l| l.split_once('='))
                .unwrap_or_else(|| panic!("not an export: {l}"));
            (name, value.trim_matches('\''))
        })
        .collect();
    assert_eq!(
        exports.get("PG_LOCAL_DIR").map(PathBuf::from),
        Some(dir.clone()),
        "{stdout}"
    );
    let store = exports.get("RUDDER_STORE").expect("RUDDER_STORE");
    let created = common::rudder()
        .env("RUDDER_STORE", store)
        .args(["create", "--title", "tried on one machine", "--json"])
        .output()
        .expect("run rudder");
    assert!(created.status.success(), "{created:?}");
    let listed: common::Run = common::rudder()
        .env("RUDDER_STORE", store)
        .args(["list", "--json"])
        .output()
        .expect("run rudder")
        .into();
    assert_eq!(listed.code, 0, "{listed:?}");
    assert_eq!(
        listed.json()[0]["title"],
        "tried on one machine",
        "{listed:?}"
    );
    let stopped = std::process::Command::new(PG_LOCAL)
        .arg("down")
        .arg(&dir)
        .status()
        .expect("run scripts/pg-local.sh down");
    assert!(stopped.success());
    assert!(!dir.exists(), "down removes {}", dir.display());
    drop(down);
}
