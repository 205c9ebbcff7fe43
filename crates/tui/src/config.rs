//! The user's config file, `$XDG_CONFIG_HOME/rudder/config.toml` (else
//! `~/.config/rudder/config.toml`):
//!
//! ```toml
//! theme = "mono"          # default | mono | light
//! notify = "bell"         # bell | desktop | off: a task starts waiting
//! actor = "ana"            # who you are on every change you make
//!
//! [keys]                  # action name (see the README's key table) → key
//! quit = "x"
//! mark = ["Space", "m"]   # or several keys
//! ```
//!
//! A missing file is the defaults. A file that does not parse is reported
//! (file, line, column, what is wrong) and the TUI starts with the default
//! keys and theme; one bad entry (an unknown action or theme, a key that
//! does not parse, a key another action has) is reported the same way and
//! only that entry is left out. Nothing in a config file stops the TUI.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use toml::Spanned;

use crate::keys::KeyMap;
use crate::view::theme::Palette;

/// What the config file set, and what was wrong with it.
#[derive(Debug, Clone)]
pub struct Config {
    /// The keys in force.
    pub keys: KeyMap,
    /// The theme asked for (before `NO_COLOR`, which wins).
    pub palette: Palette,
    /// How a task that starts waiting is told of (`notify`).
    pub notify: crate::alert::NotifyMode,
    /// Who the person is (`actor = "ann"`), recorded on every change they
    /// make unless `--as` or `$RUDDER_ACTOR` says otherwise.
    pub actor: Option<String>,
    /// The file read, if there was one.
    pub path: Option<PathBuf>,
    /// Each problem found, naming the file and line, already sanitized.
    pub problems: Vec<String>,
}

impl Default for Config {
    fn default() -> Config {
        Config {
            keys: KeyMap::default(),
            palette: Palette::Default,
            notify: crate::alert::NotifyMode::default(),
            actor: None,
            path: None,
            problems: Vec::new(),
        }
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Raw {
    theme: Option<Spanned<String>>,
    notify: Option<Spanned<String>>,
    actor: Option<Spanned<String>>,
    #[serde(default)]
    keys: BTreeMap<Spanned<String>, Spanned<OneOrMany>>,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum OneOrMany {
    One(String),
    Many(Vec<String>),
}

/// Where the config file is looked for, from the environment as
/// `var` reads it: `$XDG_CONFIG_HOME/rudder/config.toml` when that is set
/// to an absolute path (the XDG rule), else `$HOME/.config/rudder/config.toml`.
pub fn path_from(var: impl Fn(&str) -> Option<std::ffi::OsString>) -> Option<PathBuf> {
    let base = var("XDG_CONFIG_HOME")
        .map(PathBuf::from)
        .filter(|p| p.is_absolute())
        .or_else(|| {
            var("HOME")
                .map(PathBuf::from)
                .filter(|p| p.is_absolute())
                .map(|h| h.join(".config"))
        })?;
    Some(base.join("rudder").join("config.toml"))
}

/// Read the config file of this environment ([`path_from`]).
pub fn load() -> Config {
    match path_from(|name| std::env::var_os(name)) {
        Some(path) => load_file(&path),
        None => Config::default(),
    }
}

/// Read the config file at `path` (missing: the defaults).
pub fn load_file(path: &Path) -> Config {
    match std::fs::read_to_string(path) {
        Ok(text) => parse(path, &text),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Config::default(),
        Err(e) => Config {
            path: Some(path.to_path_buf()),
            problems: vec![format!(
                "config {}: cannot be read ({e}); using the default keys and theme",
                shown_path(path)
            )],
            ..Config::default()
        },
    }
}

fn shown_path(path: &Path) -> String {
    rudder_model::text::clean(&path.to_string_lossy(), 200)
}

/// Line and column (from 1) of byte `at` of `text`.
fn line_col(text: &str, at: usize) -> (usize, usize) {
    let mut cut = at.min(text.len());
    // `at` may fall inside a character; count whole ones.
    while !text.is_char_boundary(cut) {
        cut -= 1;
    }
    let before = &text[..cut];
    let line = before.matches('\n').count() + 1;
    let col = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
    (line, col)
}

/// The config in `text`, read from `path` (named in every problem).
pub fn parse(path: &Path, text: &str) -> Config {
    let file = shown_path(path);
    let mut config = Config {
        path: Some(path.to_path_buf()),
        ..Config::default()
    };
    let at = |span: std::ops::Range<usize>| {
        let (line, col) = line_col(text, span.start);
        format!("config {file}, line {line}, column {col}")
    };
    let raw: Raw = match toml::from_str(text) {
        Ok(raw) => raw,
        Err(e) => {
            let place = e
                .span()
                .map(&at)
                .unwrap_or_else(|| format!("config {file}"));
            let message = rudder_model::text::clean(e.message().trim(), 200);
            config.problems.push(format!(
                "{place}: {message}; using the default keys and theme"
            ));
            return config;
        }
    };
    if let Some(theme) = raw.theme {
        match Palette::named(theme.get_ref()) {
            Some(p) => config.palette = p,
            None => config.problems.push(format!(
                "{}: theme \"{}\" is not one of {}; using the default theme",
                at(theme.span()),
                rudder_model::text::clean(theme.get_ref(), 40),
                Palette::NAMES.join(", ")
            )),
        }
    }
    if let Some(notify) = raw.notify {
        match crate::alert::NotifyMode::named(notify.get_ref()) {
            Some(m) => config.notify = m,
            None => config.problems.push(format!(
                "{}: notify \"{}\" is not one of {}; the terminal bell rings",
                at(notify.span()),
                rudder_model::text::clean(notify.get_ref(), 40),
                crate::alert::NotifyMode::NAMES
            )),
        }
    }
    if let Some(actor) = raw.actor {
        match rudder_model::task::check_author(actor.get_ref()) {
            Ok(()) => config.actor = Some(actor.into_inner()),
            Err(e) => config.problems.push(format!(
                "{}: actor \"{}\": {e}; writing as USER@HOST",
                at(actor.span()),
                rudder_model::text::clean(actor.get_ref(), 40),
            )),
        }
    }
    let mut spans = BTreeMap::new();
    let wanted: Vec<(String, Vec<String>)> = raw
        .keys
        .into_iter()
        .map(|(name, keys)| {
            spans.insert(name.get_ref().clone(), name.span());
            let keys = match keys.into_inner() {
                OneOrMany::One(k) => vec![k],
                OneOrMany::Many(ks) => ks,
            };
            (name.into_inner(), keys)
        })
        .collect();
    for refused in config.keys.rebind(&wanted) {
        let place = spans
            .get(&refused.name)
            .map(|s| at(s.clone()))
            .unwrap_or_else(|| format!("config {file}"));
        config.problems.push(format!(
            "{place}: [keys] {}: {}",
            rudder_model::text::clean(&refused.name, 40),
            rudder_model::text::clean(&refused.reason, 200)
        ));
    }
    config
}

impl crate::app::App {
    /// Take the keys of `config`, and show what was wrong with it in the
    /// status line (all of it in the help).
    pub fn configure(&mut self, config: Config) {
        self.keys = config.keys;
        self.notify = config.notify;
        if let Some(first) = config.problems.first() {
            let more = match config.problems.len() {
                1 => String::new(),
                n => format!(
                    " ({} more: {} lists them)",
                    n - 1,
                    self.keys.first(crate::keys::Action::Help)
                ),
            };
            self.say(crate::app::Tone::Warning, format!("{first}{more}"));
        }
        self.config_problems = config.problems;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_xdg_directory_wins_over_home_when_absolute() {
        let env = |xdg: Option<&str>, home: Option<&str>| {
            path_from(move |n| match n {
                "XDG_CONFIG_HOME" => xdg.map(Into::into),
                "HOME" => home.map(Into::into),
                _ => None,
            })
        };
        assert_eq!(
            env(Some("/x"), Some("/h")),
            Some(PathBuf::from("/x/rudder/config.toml"))
        );
        assert_eq!(
            env(Some("rel"), Some("/h")),
            Some(PathBuf::from("/h/.config/rudder/config.toml"))
        );
        assert_eq!(
            env(None, Some("/h")),
            Some(PathBuf::from("/h/.config/rudder/config.toml"))
        );
        assert_eq!(env(None, None), None);
    }

    #[test]
    fn notify_is_read_and_a_bad_value_is_reported_with_the_bell_kept() {
        let p = Path::new("c.toml");
        assert_eq!(
            parse(p, "notify = \"desktop\"\n").notify,
            crate::alert::NotifyMode::Desktop
        );
        assert_eq!(parse(p, "").notify, crate::alert::NotifyMode::Bell);
        let bad = parse(p, "theme = \"mono\"\nnotify = \"loud\"\n");
        assert_eq!(bad.notify, crate::alert::NotifyMode::Bell);
        assert_eq!(bad.palette, Palette::Mono);
        assert!(
            bad.problems[0].contains("line 2") && bad.problems[0].contains("\"loud\""),
            "{:?}",
            bad.problems
        );
    }

    #[test]
    fn actor_is_read_and_a_name_with_an_escape_is_reported_and_left_out() {
        let p = Path::new("c.toml");
        assert_eq!(parse(p, "actor = \"ana\"\n").actor.as_deref(), Some("ana"));
        assert_eq!(parse(p, "").actor, None);
        let bad = parse(p, "theme = \"mono\"\nactor = \"ana\\u001b[2J\"\n");
        assert_eq!(bad.actor, None);
        assert_eq!(bad.palette, Palette::Mono, "the rest of the file is used");
        assert!(
            bad.problems[0].contains("line 2") && bad.problems[0].contains("USER@HOST"),
            "{:?}",
            bad.problems
        );
        assert!(!bad.problems[0].contains('\u{1b}'), "{:?}", bad.problems);
    }

    #[test]
    fn lines_and_columns_count_characters() {
        let text = "a = 1\né = \"x\"\n";
        assert_eq!(line_col(text, 0), (1, 1));
        assert_eq!(line_col(text, 6), (2, 1));
        assert_eq!(line_col(text, 10), (2, 4));
        assert_eq!(line_col(text, 7), (2, 1), "inside é");
    }
}
