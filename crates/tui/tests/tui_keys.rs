//! Keys as data: the dispatch, the help overlay and the footer all follow
//! the key table and the user's config file (rebindings, theme), and a bad
//! config file is reported, never fatal.

use std::path::Path;

use ratatui::Terminal;
use ratatui::backend::TestBackend;
use rudder_testkit::tui::*;
use rudder_tui::app::{App, Popup, Tone};
use rudder_tui::config;
use rudder_tui::keys::{Action, Key, KeyMap, LIST_HINTS, Scope, TABLE, fit};
use rudder_tui::view::theme::Palette;
use rudder_tui::view::{self, Theme};

fn draw(app: &mut App, w: u16, h: u16) -> String {
    let mut terminal = Terminal::new(TestBackend::new(w, h)).expect("test terminal");
    terminal
        .draw(|f| view::draw(f, app, &Theme::DEFAULT))
        .expect("draw");
    screen_text(&terminal)
}

fn footer(app: &mut App, w: u16, h: u16) -> String {
    draw(app, w, h)
        .lines()
        .nth(usize::from(h) - 1)
        .unwrap_or_default()
        .to_string()
}

#[test]
fn every_row_of_the_table_is_in_the_help_and_does_what_it_says() {
    let mut app = app_with(fixture());
    app.worker = Some(rudder_tui::WorkerState::NotStarted);
    app.handle_key(ch('?'));
    let help = draw(&mut app, 200, 60);
    for scope in [Scope::List, Scope::View, Scope::Form, Scope::Demo] {
        for (keys, what) in app.keys.help_lines(scope, "worker") {
            assert!(help.contains(&keys), "{keys:?} is not in the help:\n{help}");
            assert!(help.contains(&what), "{what:?} is not in the help:\n{help}");
        }
    }
    // Each list key the table names is the one the dispatch takes.
    let map = KeyMap::default();
    for b in TABLE {
        for scope in b.scopes {
            for key in map.keys(b.action) {
                assert_eq!(
                    map.action(*scope, true, *key),
                    Some(b.action),
                    "{key} in {scope:?}"
                );
            }
        }
    }
}

#[test]
fn the_footer_is_made_from_the_table_and_drops_whole_hints() {
    let mut app = app_with(fixture());
    for w in [60u16, 80, 120, 200] {
        let shown = footer(&mut app, w, 24);
        let wanted = fit(&app.keys.hints(LIST_HINTS), usize::from(w));
        assert_eq!(shown.trim_end(), wanted, "at {w} columns");
        // Every hint's key does its action.
        for ((actions, _), hint) in LIST_HINTS.iter().zip(app.keys.hints(LIST_HINTS)) {
            if !wanted.contains(&hint) {
                continue;
            }
            let first = app.keys.keys(actions[0])[0];
            assert_eq!(app.keys.action(Scope::List, false, first), Some(actions[0]));
        }
    }
    assert!(footer(&mut app, 80, 24).starts_with("j/k move  v view  i input  Space mark"));
}

fn write_config(dir: &Path, text: &str) -> std::path::PathBuf {
    let path = dir.join("rudder").join("config.toml");
    std::fs::create_dir_all(path.parent().expect("a parent")).expect("config dir");
    std::fs::write(&path, text).expect("config file");
    path
}

#[test]
fn a_config_file_rebinds_keys_and_picks_a_theme() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = write_config(
        dir.path(),
        "theme = \"mono\"\n\n[keys]\nquit = \"x\"\nmark = [\"m\", \"Space\"]\ndown = \"k\"\nup = \"j\"\n",
    );
    let config = config::load_file(&path);
    assert!(config.problems.is_empty(), "{:?}", config.problems);
    assert_eq!(config.palette, Palette::Mono);
    assert!(!Theme::new(config.palette, false).color);
    let mut app = app_with(fixture());
    app.configure(config);
    assert!(app.status.is_none(), "no problem to show");
    // The dispatch: q no longer quits, x does; j and k swapped.
    app.handle_key(ch('q'));
    assert!(!app.quit);
    app.handle_key(ch('k'));
    assert_eq!(app.cursor, 1, "k moves down now");
    app.handle_key(ch('m'));
    assert_eq!(app.marks.len(), 1);
    // The footer (shown when the status line is empty) and the help say so.
    app.status = None;
    let foot = footer(&mut app, 120, 30);
    assert!(foot.contains("k/j move"), "{foot}");
    assert!(foot.contains("m mark"), "{foot}");
    assert!(foot.contains("x quit"), "{foot}");
    app.handle_key(ch('?'));
    let help = draw(&mut app, 200, 60);
    assert!(help.contains("│x                     quit"), "{help}");
    assert!(
        help.contains("│m, Space              mark / unmark"),
        "{help}"
    );
    app.handle_key(ch('x'));
    assert!(matches!(app.popup, Popup::None), "any key closes the help");
    assert!(!app.quit, "without quitting");
    app.handle_key(ch('x'));
    assert!(app.quit);
}

#[test]
fn a_broken_config_file_is_reported_with_file_and_line_and_defaults_stand() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = write_config(dir.path(), "theme = \"mono\"\n[keys]\nquit = \"x\n");
    let config = config::load_file(&path);
    assert_eq!(config.keys, KeyMap::default());
    assert_eq!(
        config.palette,
        Palette::Default,
        "nothing of a broken file is taken"
    );
    assert_eq!(config.problems.len(), 1, "{:?}", config.problems);
    let problem = &config.problems[0];
    let file = path.to_string_lossy();
    assert!(
        problem.starts_with(&format!("config {file}, line 3, column")),
        "{problem}"
    );
    assert!(
        problem.contains("using the default keys and theme"),
        "{problem}"
    );
    let mut app = app_with(fixture());
    app.configure(config);
    let status = app.status.clone().expect("the problem is shown");
    assert_eq!(status.tone, Tone::Warning);
    assert!(status.text.contains("line 3"), "{}", status.text);
    app.handle_key(ch('?'));
    assert!(draw(&mut app, 200, 60).contains("line 3, column"));
    app.handle_key(ch('q'));
    app.handle_key(ch('q'));
    assert!(app.quit, "the default q quits");
}

#[test]
fn bad_entries_are_refused_one_by_one_with_why() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = write_config(
        dir.path(),
        "theme = \"neon\"\n[keys]\nquit = \"j\"\nqiut = \"x\"\nsort = \"Hyper-s\"\nform_submit = \"s\"\npause = \"P\"\n",
    );
    let config = config::load_file(&path);
    let all = config.problems.join("\n");
    assert_eq!(config.problems.len(), 5, "{all}");
    for wanted in [
        "line 1, column 9: theme \"neon\" is not one of default, mono, light",
        "line 3, column 1: [keys] quit: j already does \"move down\" (down); quit keeps q",
        "line 4, column 1: [keys] qiut: no action is called \"qiut\"",
        "line 5, column 1: [keys] sort: \"Hyper-s\" is not a key",
        "line 6, column 1: [keys] form_submit: a form key cannot be a plain character",
    ] {
        assert!(all.contains(wanted), "{wanted:?} missing from:\n{all}");
    }
    // What was right is taken.
    let p = Key::parse("P").expect("a key");
    assert_eq!(
        config.keys.action(Scope::List, false, p),
        Some(Action::Pause)
    );
    assert_eq!(
        config
            .keys
            .action(Scope::List, false, Key::parse("q").expect("a key")),
        Some(Action::Quit)
    );
    let mut app = app_with(fixture());
    app.configure(config);
    let status = app.status.clone().expect("shown");
    assert!(
        status.text.contains("(4 more: ? lists them)"),
        "{}",
        status.text
    );
}

#[test]
fn unknown_settings_are_reported_not_ignored() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = write_config(dir.path(), "[keys]\nquit = \"x\"\n\n[colours]\nbg = 1\n");
    let config = config::load_file(&path);
    assert_eq!(config.problems.len(), 1, "{:?}", config.problems);
    assert!(
        config.problems[0].contains("line 4"),
        "{}",
        config.problems[0]
    );
    assert!(
        config.problems[0].contains("colours"),
        "{}",
        config.problems[0]
    );
    // A missing file is the defaults, silently.
    let none = config::load_file(&dir.path().join("nothing.toml"));
    assert!(none.problems.is_empty());
    assert_eq!(none.keys, KeyMap::default());
}

#[test]
fn every_theme_uses_only_the_terminals_own_16_colours_and_no_color_wins() {
    use ratatui::style::Color;
    let mut tasks = fixture();
    tasks.get_mut(&id(2)).expect("fixture").lease_expires_at = Some(ago(1));
    for palette in [Palette::Default, Palette::Mono, Palette::Light] {
        for no_color in [false, true] {
            let theme = Theme::new(palette, no_color);
            let mut colours = Vec::new();
            for keys in ["", "?", "v", "v/INC\r", "c"] {
                let mut app = app_with(tasks.clone());
                app.handle_key(ch(' '));
                let mut terminal = Terminal::new(TestBackend::new(120, 35)).expect("terminal");
                for k in keys.chars() {
                    let code = if k == '\r' {
                        crossterm::event::KeyCode::Enter
                    } else {
                        crossterm::event::KeyCode::Char(k)
                    };
                    app.handle_key(key(code));
                    terminal
                        .draw(|f| view::draw(f, &mut app, &theme))
                        .expect("draw");
                }
                terminal
                    .draw(|f| view::draw(f, &mut app, &theme))
                    .expect("draw");
                for cell in terminal.backend().buffer().content() {
                    colours.push(cell.fg);
                    colours.push(cell.bg);
                }
            }
            for c in &colours {
                assert!(
                    !matches!(c, Color::Rgb(..) | Color::Indexed(_)),
                    "{palette:?}: {c:?} is not one of the 16 ANSI colours"
                );
                if no_color || palette == Palette::Mono {
                    assert_eq!(*c, Color::Reset, "{palette:?} with NO_COLOR={no_color}");
                }
            }
            if !no_color && palette != Palette::Mono {
                assert!(
                    colours.iter().any(|c| *c != Color::Reset),
                    "{palette:?} has colour"
                );
            }
            let waiting = theme.status(rudder_model::task::Status::InputRequired).fg;
            if palette == Palette::Light && !no_color {
                assert_eq!(
                    waiting,
                    Some(Color::Magenta),
                    "no yellow text on a light background"
                );
            }
        }
    }
}

#[test]
fn ctrl_c_cannot_be_rebound_and_config_problems_are_read_whole_in_the_help() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = write_config(
        dir.path(),
        "[keys]\nsort = \"ctrl-c\"\ncancel = \"Ctrl-\"\nquit = [\"q\", \"Ctrl-C\"]\n",
    );
    let config = config::load_file(&path);
    let all = config.problems.join("\n");
    assert_eq!(config.problems.len(), 2, "{all}");
    // Bound to sort, Ctrl-C would still quit: the binding would be dead.
    assert!(
        all.contains("line 2, column 1: [keys] sort: Ctrl-C always quits; pick another key"),
        "{all}"
    );
    assert_eq!(
        config
            .keys
            .action(Scope::List, false, Key::parse("s").expect("a key")),
        Some(Action::Sort),
        "sort keeps its default"
    );
    let mut app = app_with(fixture());
    app.configure(config);
    app.handle_key(ch('?'));
    // At 80×24 each problem wraps inside the overlay: its last words are
    // on screen, not cut off with an ellipsis.
    let help = draw(&mut app, 80, 24);
    let flat: String = help
        .lines()
        .map(|l| l.trim_matches(|c: char| c == '│' || c == ' '))
        .collect::<Vec<_>>()
        .join(" ");
    assert!(flat.contains("pick another key"), "{help}");
    assert!(flat.contains("comes one letter (Ctrl-s)"), "{help}");
}
