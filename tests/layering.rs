//! No module of any crate imports one that imports it back (issue 31): in
//! each crate's `src`, a module's references to `crate::m` and `super::m`
//! (outside comments and its `#[cfg(test)]` part) are its imports, and the
//! graph they make has no cycle. A reader can then read a crate from the
//! bottom up (the TUI's state at the bottom, drawing and keys above it).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The `.rs` files under `dir`, with their module paths (`view::theme`;
/// `lib.rs`/`main.rs` are the root, `""`).
fn modules(dir: &Path) -> Vec<(String, PathBuf)> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).expect("read a source dir").flatten() {
            let path = entry.path();
            if path.is_dir() {
                stack.push(path);
                continue;
            }
            if path.extension().is_none_or(|e| e != "rs") {
                continue;
            }
            let rel = path
                .strip_prefix(dir)
                .expect("under dir")
                .with_extension("");
            let mut parts: Vec<String> = rel
                .components()
                .map(|c| c.as_os_str().to_string_lossy().into_owned())
                .collect();
            if parts.last().is_some_and(|p| p == "mod") {
                parts.pop();
            }
            let name = match parts.as_slice() {
                [one] if one == "lib" || one == "main" => String::new(),
                _ => parts.join("::"),
            };
            out.push((name, path));
        }
    }
    out
}

/// The module paths `text` names after `crate::` or `super::` (one or two
/// segments of lower-case names), resolved against `this` for `super`.
fn references(this: &str, text: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    // Only the code a build of the library compiles, without comments.
    let code = text.split("#[cfg(test)]").next().unwrap_or("");
    for line in code.lines() {
        let line = line.trim_start();
        if line.starts_with("//") {
            continue;
        }
        for (prefix, base) in [("crate::", String::new()), ("super::", parent(this))] {
            let mut rest = line;
            while let Some(at) = rest.find(prefix) {
                // `rudder_core::crate::` never occurs; `foo_super::` might.
                let before = rest[..at].chars().last();
                rest = &rest[at + prefix.len()..];
                if before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
                    continue;
                }
                let segs: Vec<&str> = rest
                    .split("::")
                    .take(2)
                    .map(|s| {
                        let end = s
                            .find(|c: char| {
                                !(c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
                            })
                            .unwrap_or(s.len());
                        &s[..end]
                    })
                    .collect();
                let mut path = base.clone();
                for s in segs {
                    if s.is_empty() {
                        break;
                    }
                    if !path.is_empty() {
                        path.push_str("::");
                    }
                    path.push_str(s);
                    out.insert(path.clone());
                }
            }
        }
    }
    out
}

fn parent(module: &str) -> String {
    module
        .rsplit_once("::")
        .map(|(p, _)| p.to_string())
        .unwrap_or_default()
}

/// The cycles (strongly connected components of more than one module) of
/// the crate whose sources are in `src`.
fn cycles(src: &Path) -> Vec<Vec<String>> {
    let mods = modules(src);
    let names: BTreeSet<String> = mods.iter().map(|(n, _)| n.clone()).collect();
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (name, path) in &mods {
        let text = std::fs::read_to_string(path).expect("read a source file");
        let deps = references(name, &text)
            .into_iter()
            // The longest path that is a module (`crate::view::theme`, not
            // `crate::view` when both are named).
            .filter(|r| names.contains(r) && !r.is_empty() && r != name)
            .filter(|r| !name.starts_with(&format!("{r}::")))
            .collect();
        graph.insert(name.clone(), deps);
    }
    // Tarjan's algorithm.
    struct Walk<'a> {
        graph: &'a BTreeMap<String, BTreeSet<String>>,
        index: BTreeMap<&'a str, usize>,
        low: BTreeMap<&'a str, usize>,
        stack: Vec<&'a str>,
        on: BTreeSet<&'a str>,
        found: Vec<Vec<String>>,
    }
    fn visit<'a>(w: &mut Walk<'a>, v: &'a str) {
        let i = w.index.len();
        w.index.insert(v, i);
        w.low.insert(v, i);
        w.stack.push(v);
        w.on.insert(v);
        for n in w.graph.get(v).into_iter().flatten() {
            let n = n.as_str();
            if !w.index.contains_key(n) {
                visit(w, n);
                let l = w.low[n].min(w.low[v]);
                w.low.insert(v, l);
            } else if w.on.contains(n) {
                let l = w.index[n].min(w.low[v]);
                w.low.insert(v, l);
            }
        }
        if w.low[v] == w.index[v] {
            let mut comp = Vec::new();
            while let Some(x) = w.stack.pop() {
                w.on.remove(x);
                comp.push(x.to_string());
                if x == v {
                    break;
                }
            }
            if comp.len() > 1 {
                comp.sort();
                w.found.push(comp);
            }
        }
    }
    let mut w = Walk {
        graph: &graph,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on: BTreeSet::new(),
        found: Vec::new(),
    };
    for v in graph.keys() {
        if !w.index.contains_key(v.as_str()) {
            visit(&mut w, v);
        }
    }
    w.found
}

#[test]
fn no_module_imports_one_that_imports_it_back() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut srcs = vec![root.join("src"), root.join("python/src")];
    for entry in std::fs::read_dir(root.join("crates"))
        .expect("crates")
        .flatten()
    {
        srcs.push(entry.path().join("src"));
    }
    let mut found = Vec::new();
    for src in srcs.iter().filter(|s| s.is_dir()) {
        for c in cycles(src) {
            found.push(format!("{}: {}", src.display(), c.join(" ⇄ ")));
        }
    }
    assert!(found.is_empty(), "import cycles:\n{}", found.join("\n"));
}

/// The check itself finds a cycle, and only a real one.
#[test]
fn a_cycle_is_found_and_a_comment_is_not_an_import() {
    let dir = tempfile::tempdir().expect("a temp dir");
    let src = dir.path();
    std::fs::write(src.join("lib.rs"), "mod a; mod b; mod c;\n").expect("write");
    std::fs::write(
        src.join("a.rs"),
        "use crate::b::B;\n// crate::c is only named\n",
    )
    .expect("write");
    std::fs::write(
        src.join("b.rs"),
        "pub struct B;\nfn f() { super::a::g() }\n",
    )
    .expect("write");
    std::fs::write(
        src.join("c.rs"),
        "use crate::a;\n#[cfg(test)]\nmod tests { use crate::c; use crate::b; }\n",
    )
    .expect("write");
    assert_eq!(cycles(src), vec![vec!["a".to_string(), "b".to_string()]]);
    std::fs::write(src.join("b.rs"), "pub struct B;\n").expect("write");
    assert!(cycles(src).is_empty());
}
