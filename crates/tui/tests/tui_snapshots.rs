//! What the screen looks like, drawn on ratatui's `TestBackend` at a fixed
//! clock with fixed ids, compared with `insta` snapshots.

use crossterm::event::KeyCode;
use ratatui::Terminal;
use ratatui::backend::TestBackend;
use ratatui::style::Color;
use rudder_model::task::Status;
use rudder_store::{ReclaimReport, Reclaimed, Skipped};
use rudder_testkit::tui::*;
use rudder_tui::app::{App, Popup};
use rudder_tui::view::{self, Theme};

const COLOR: Theme = Theme::DEFAULT;

fn render_with(app: &mut App, width: u16, height: u16, theme: Theme) -> Terminal<TestBackend> {
    let mut terminal = Terminal::new(TestBackend::new(width, height)).expect("test terminal");
    terminal.draw(|f| view::draw(f, app, &theme)).expect("draw");
    terminal
}

/// The screen as text, one line per row, trailing spaces trimmed.
fn screen(terminal: &Terminal<TestBackend>) -> String {
    screen_text(terminal)
}

fn render(app: &mut App) -> String {
    screen(&render_with(app, 120, 35, COLOR))
}

#[test]
fn list() {
    each_store(|| {
        insta::allow_duplicates! {
            let fx = Fixture::new(fixture());
            let mut app = fx.app();
            // A second snapshot with a transition fills the log and flashes a row.
            let mut tasks = fixture();
            tasks.get_mut(&id(5)).expect("fixture").status = Status::Cancelled;
            let t = tasks.get_mut(&id(2)).expect("fixture");
            t.status_message = Some("checking lag on replica 3".into());
            app.on_feed(fx.set(tasks.clone()));
            let mut later = tasks.clone();
            later.get_mut(&id(6)).expect("fixture").status = Status::Failed;
            app.on_feed(fx.set(later));
            insta::assert_snapshot!(render(&mut app));
        }
    });
}

#[test]
fn detail_of_a_finished_task() {
    each_store(|| {
        insta::allow_duplicates! {
            let mut app = app_with(fixture());
            app.handle_key(ch('/'));
            type_text(&mut app, "cache");
            app.handle_key(key(KeyCode::Enter));
            insta::assert_snapshot!(render(&mut app));
        }
    });
}

#[test]
fn detail_of_a_working_task_with_a_lease() {
    each_store(|| {
        insta::allow_duplicates! {
            let mut app = app_with(fixture());
            app.handle_key(ch('j'));
            app.handle_key(ch('j'));
            insta::assert_snapshot!(render(&mut app));
        }
    });
}

#[test]
fn form_with_inline_errors() {
    each_store(|| {
        insta::allow_duplicates! {
            let mut app = app_with(fixture());
            app.handle_key(ch('i'));
            app.handle_key(key(KeyCode::Tab));
            type_text(&mut app, "x");
            app.handle_key(key(KeyCode::Tab));
            app.handle_key(key(KeyCode::Right));
            app.handle_key(key(KeyCode::Tab));
            app.handle_key(ch(' '));
            app.handle_key(key(KeyCode::Tab));
            type_text(&mut app, "[1, \"a\"]");
            assert!(app.handle_key(ctrl('s')).is_empty());
            insta::assert_snapshot!(render(&mut app));
        }
    });
}

#[test]
fn cancel_confirmation() {
    each_store(|| {
        insta::allow_duplicates! {
            let mut app = app_with(fixture());
            app.handle_key(ch('c'));
            insta::assert_snapshot!(render(&mut app));
        }
    });
}

fn report(dry_run: bool) -> ReclaimReport {
    ReclaimReport {
        dry_run,
        older_than_ms: 15 * 60_000,
        at: now(),
        reclaimed: vec![
            Reclaimed {
                task_id: id(2),
                title: Some("INC-1043 db replication lag".into()),
                status_before: Status::Working,
                idle_ms: 17 * 60_000 + 5_000,
                last_update: ago(17),
                claimed_by: Some("worker-7".into()),
                revision: 5,
            },
            Reclaimed {
                task_id: id(1),
                title: Some("INC-1042 \u{1b}[2Jcheckout latency".into()),
                status_before: Status::InputRequired,
                idle_ms: 3 * 3_600_000,
                last_update: ago(180),
                claimed_by: None,
                revision: 3,
            },
        ],
        skipped: vec![Skipped {
            task_id: id(6),
            status: Status::Working,
            reason: "lease held by worker-2 for another 6s".into(),
        }],
        active: 2,
    }
}

#[test]
fn reclaim_age_prompt() {
    each_store(|| {
        insta::allow_duplicates! {
            let mut app = app_with(fixture());
            app.handle_key(ch('R'));
            insta::assert_snapshot!(render(&mut app));
        }
    });
}

#[test]
fn reclaim_preview_confirmation() {
    each_store(|| {
        insta::allow_duplicates! {
            let mut app = app_with(fixture());
            app.popup = Popup::ReclaimPreview {
                older_than: std::time::Duration::from_secs(900),
                age: "15m".into(),
                report: report(true),
                tasks: vec![(id(2), 2), (id(1), 2)],
                reason: None,
            };
            insta::assert_snapshot!(render(&mut app));
        }
    });
}

#[test]
fn reclaim_report() {
    each_store(|| {
        insta::allow_duplicates! {
            let mut app = app_with(fixture());
            // After the y: one previewed task changed meanwhile and was left alone.
            let mut done = report(false);
            let changed = done.reclaimed.remove(1);
            done.skipped = vec![Skipped {
                task_id: changed.task_id,
                status: Status::InputRequired,
                reason: "changed since the preview (revision 5, now 7)".into(),
            }];
            app.popup = Popup::ReclaimDone { report: done };
            let text = render(&mut app);
            assert!(
                text.contains("1 previewed task(s) not reclaimed:"),
                "{text}"
            );
            assert!(
                text.contains("changed since the preview (revision 5, now 7)"),
                "{text}"
            );
            insta::assert_snapshot!(text);
        }
    });
}

#[test]
fn help() {
    each_store(|| {
        insta::allow_duplicates! {
            let mut app = app_with(fixture());
            app.handle_key(ch('?'));
            insta::assert_snapshot!(render(&mut app));
        }
    });
}

#[test]
fn help_in_demo_mode_lists_the_worker_keys() {
    each_store(|| {
        insta::allow_duplicates! {
            let mut app = app_with(fixture());
            app.worker = Some(rudder_tui::WorkerState::Killed { pid: 4242 });
            app.handle_key(ch('?'));
            insta::assert_snapshot!(render(&mut app));
        }
    });
}

/// Under `rudder demo --gateway` the demo's K and W kill and restart the
/// MCP server behind the gateway: the help says so, not "worker".
#[test]
fn help_under_the_gateway_names_the_upstream_keys() {
    let mut app = app_with(fixture());
    app.worker = Some(rudder_tui::WorkerState::Killed { pid: 4242 });
    app.worker_role = "upstream";
    app.handle_key(ch('?'));
    let screen = render(&mut app);
    assert!(
        screen.contains("kill the upstream with SIGKILL"),
        "{screen}"
    );
    assert!(screen.contains("start the upstream again"), "{screen}");
    assert!(!screen.contains("kill the worker"), "{screen}");
}

#[test]
fn missing_store_banner() {
    each_store(|| {
        insta::allow_duplicates! {
            let fx = Fixture::new(fixture());
            let mut app = fx.app();
            app.on_feed(fx.remove());
            insta::assert_snapshot!(render(&mut app));
        }
    });
}

#[test]
fn unreadable_store_banner() {
    each_store(|| {
        insta::allow_duplicates! {
            let mut app = app_with(fixture());
            app.on_feed(unreadable(
                "/srv/rudder/tasks.json: store file is corrupt at line 3 column 7: expected `,` or `}`; it was left untouched",
            ));
            insta::assert_snapshot!(render(&mut app));
        }
    });
}

/// A database server gone (a restart under a deploy): the header and the
/// banner say unreachable, not unreadable, and the last rows stay.
#[test]
fn unreachable_server_banner() {
    each_store(|| {
        insta::allow_duplicates! {
            let mut app = app_with(fixture());
            app.on_feed(unreachable_server(
                "postgresql://rudder@db.internal:5432/rudder: cannot connect: connection refused (host db.internal port 5432, database \"rudder\")",
            ));
            let text = render(&mut app);
            assert!(text.contains("✖ unreachable"), "{text}");
            insta::assert_snapshot!(text);
        }
    });
}

/// A read that takes long (a database that hangs): the header says the
/// TUI waits for the store and for how long; the last rows stay.
#[test]
fn waiting_for_a_slow_store() {
    each_store(|| {
        insta::allow_duplicates! {
            let mut app = app_with(fixture());
            app.slow_read = Some(std::time::Duration::from_millis(3_400));
            let text = render(&mut app);
            assert!(text.contains("◌ waiting for the store (3 s)"), "{text}");
            assert!(!text.contains("● live"), "{text}");
            insta::assert_snapshot!(text);
        }
    });
}

#[test]
fn paused_with_changes_pending() {
    each_store(|| {
        insta::allow_duplicates! {
            let fx = Fixture::new(fixture());
            let mut app = fx.app();
            app.handle_key(ch('p'));
            app.on_feed(fx.set(task_2_completed()));
            insta::assert_snapshot!(render(&mut app));
        }
    });
}

#[test]
fn too_small_terminal() {
    each_store(|| {
        insta::allow_duplicates! {
            let mut app = app_with(fixture());
            let t = render_with(&mut app, 20, 5, COLOR);
            insta::assert_snapshot!(screen(&t));
            // Every size down to nothing draws without panicking.
            for (w, h) in [(0, 0), (1, 1), (59, 40), (60, 12), (61, 13), (200, 12)] {
                render_with(&mut app, w, h, COLOR);
            }
            app.handle_key(ch('i'));
            for (w, h) in [(60, 12), (70, 14)] {
                render_with(&mut app, w, h, COLOR);
            }
        }
    });
}

#[test]
fn hostile_task_text_is_drawn_inert() {
    each_store(|| {
        insta::allow_duplicates! {
            let mut app = app_with(fixture());
            app.handle_key(ch('j'));
            let t = render_with(&mut app, 120, 35, COLOR);
            let text = screen(&t);
            for bad in ['\u{1b}', '\u{7}', '\u{202E}', '\r', '\u{9b}'] {
                assert!(!text.contains(bad), "{bad:?} reached the screen");
            }
            assert!(text.contains("msgcleared?reversed end next"), "{text}");
            insta::assert_snapshot!(text);
        }
    });
}

#[test]
fn no_color_draws_no_colours_but_keeps_the_symbols() {
    each_store(|| {
        let mut app = app_with(fixture());
        let t = render_with(&mut app, 120, 35, Theme::MONO);
        let buf = t.backend().buffer();
        for cell in buf.content() {
            assert_eq!(
                cell.fg,
                Color::Reset,
                "a foreground colour at {:?}",
                cell.symbol()
            );
            assert_eq!(
                cell.bg,
                Color::Reset,
                "a background colour at {:?}",
                cell.symbol()
            );
        }
        let text = screen(&t);
        for sym in ["◆", "▶", "✔", "✖", "⊘"] {
            assert!(text.contains(sym), "{sym} missing");
        }
        // With colour, waiting tasks stand out in the header.
        let t = render_with(&mut app, 120, 35, COLOR);
        let buf = t.backend().buffer();
        let x = (0..120u16)
            .find(|&x| buf[(x, 1)].symbol() == "◆")
            .expect("the input_required count");
        assert_eq!(buf[(x, 1)].bg, Color::Yellow);
    });
}

#[test]
fn only_visible_rows_are_drawn_and_selection_scrolls_into_view() {
    each_store(|| {
        let mut tasks = rudder_model::task::TaskMap::new();
        for n in 0..5_000u32 {
            let t = task(
                100 + n,
                Status::Working,
                &format!("task {n:05}"),
                10,
                i64::from(n % 60),
            );
            tasks.insert(t.task_id.clone(), t);
        }
        let mut app = app_with(tasks);
        render_with(&mut app, 120, 35, COLOR);
        app.handle_key(ch('G'));
        let text = screen(&render_with(&mut app, 120, 35, COLOR));
        let last = app
            .row_task(app.rows.len() - 1)
            .expect("a last row")
            .short_id()
            .to_string();
        assert!(text.contains(&last), "the last row is on screen");
        assert!(app.offset > 0 && app.offset + app.page >= app.rows.len());
    });
}

#[test]
fn list_on_an_80x24_terminal() {
    each_store(|| {
        insta::allow_duplicates! {
            let mut app = app_with(fixture());
            insta::assert_snapshot!(screen(&render_with(&mut app, 80, 24, COLOR)));
        }
    });
}

#[test]
fn form_with_hostile_defaults_shows_what_it_submits() {
    each_store(|| {
        insta::allow_duplicates! {
            let mut tasks = fixture();
            let waiting = tasks.get_mut(&id(1)).expect("fixture");
            waiting.input_schema = Some(serde_json::json!({
                "type": "object",
                "properties": {
                    "name": {"type": "string", "default": "x\u{1b}[2Jy\u{202E}z"},
                    "mode": {"enum": ["a\u{1b}[31m", "b"], "default": "a\u{1b}[31m"},
                    "blob": {"type": "object", "default": {"k": "v\u{9b}1m"}}
                }
            }));
            let mut app = app_with(tasks);
            app.handle_key(ch('i'));
            let text = render(&mut app);
            for bad in ['\u{1b}', '\u{202E}', '\u{9b}'] {
                assert!(!text.contains(bad), "{bad:?} reached the screen");
            }
            assert!(text.contains("[ xyz "), "{text}");
            assert!(text.contains(r"◀ a\u001b[31m ▶"), "{text}");
            assert!(text.contains(r#"{"k":"v\u009b1m"}"#), "{text}");
            insta::assert_snapshot!(text);
        }
    });
}

/// A task with huge texts (title, message, result, a history note, a field
/// rudder does not know) costs its sanitizing once per change of the task,
/// not once per frame: an idle screen redraws every second for the
/// relative times, and sanitizing 25 MB each time cost seconds of CPU.
#[test]
fn huge_texts_are_sanitized_once_per_change_not_per_frame() {
    each_store(|| {
        const HUGE: usize = 2 << 20;
        let mut tasks = fixture();
        let big = tasks.get_mut(&id(2)).expect("fixture");
        big.title = Some(format!("HUGE-TITLE {}", "t\u{1b}[31m".repeat(HUGE / 6)));
        big.status_message = Some("m".repeat(HUGE));
        big.result = Some(serde_json::json!({ "log": "r".repeat(HUGE) }));
        big.history[0].note = Some("n".repeat(HUGE));
        big.extra
            .insert("trace".into(), serde_json::json!("x".repeat(HUGE)));
        let fx = Fixture::new(tasks.clone());
        let mut app = fx.app();
        let row = app
            .rows
            .iter()
            .position(|&pos| app.tasks.get_index(pos).is_some_and(|(k, _)| k == &id(2)))
            .expect("the task has a row");
        app.select_row(row);
        let mut terminal = Terminal::new(TestBackend::new(120, 35)).expect("test terminal");
        let mut frame = |app: &mut App| {
            terminal.draw(|f| view::draw(f, app, &COLOR)).expect("draw");
            screen(&terminal)
        };
        let first = frame(&mut app);
        assert!(first.contains("HUGE-TITLE tttt"), "{first}");
        assert!(!first.contains('\u{1b}'), "{first}");

        let before = rudder_model::text::sanitized_bytes();
        for s in 1..=10 {
            app.tick(now() + chrono::TimeDelta::seconds(s));
            frame(&mut app);
        }
        let per_frame = (rudder_model::text::sanitized_bytes() - before) / 10;
        assert!(
            per_frame < 64 << 10,
            "{per_frame} bytes sanitized per idle frame"
        );

        // A change of the task is sanitized (once) and shown.
        let mut changed = tasks.clone();
        let t = changed.get_mut(&id(2)).expect("fixture");
        t.title = Some("RENAMED \u{1b}]0;pwned\u{7}incident".into());
        t.revision += 1;
        app.on_feed(fx.set(changed));
        let before = rudder_model::text::sanitized_bytes();
        let shown = frame(&mut app);
        assert!(shown.contains("RENAMED incident"), "{shown}");
        assert!(
            rudder_model::text::sanitized_bytes() - before >= HUGE as u64,
            "the changed task was not sanitized again"
        );
        let before = rudder_model::text::sanitized_bytes();
        frame(&mut app);
        assert!(rudder_model::text::sanitized_bytes() - before < 64 << 10);
    });
}

/// Snapshots of `app` at 80×24 and 140×42, named `NAME_80x24`, `NAME_140x42`.
fn both_sizes(name: &str, app: &mut App) {
    for (w, h) in [(80, 24), (140, 42)] {
        let text = screen(&render_with(app, w, h, COLOR));
        insta::assert_snapshot!(format!("{name}_{w}x{h}"), text);
    }
}

/// The fixture with a concluded diagnosis as the demo writes it (summary,
/// root cause, citations) and a failed one whose error is long.
fn diagnosed() -> rudder_model::task::TaskMap {
    let mut tasks = fixture();
    let done = tasks.get_mut(&id(3)).expect("fixture");
    done.result = Some(serde_json::json!({
        "incident": "INC-1001",
        "summary": "INC-1001 (cache misses): caused by the v4.18.2 deploy, which set the cache TTL to zero for every product page",
        "root_cause": "v4.18.2 (deploy-8812), deployed 12 minutes before INC-1001 was opened, set cache.ttl_seconds from 300 to 0. Trace tr-5521 shows every request to product-api missing the cache and reading the database.",
        "citations": [
            {"kind": "incident", "id": "INC-1001", "detail": "opened 2026-01-15 10:00 UTC: p99 latency above 2 s"},
            {"kind": "deploy", "id": "deploy-8812", "detail": "v4.18.2 at 2026-01-15 09:48 UTC: cache TTL 300 s → 0 s"}
        ]
    }));
    done.history[0].note = Some(
        "created by the on-call bot after the latency alert fired for the third time in an hour"
            .into(),
    );
    tasks
}

#[test]
fn task_view_shows_every_word_wrapped() {
    each_store(|| {
        insta::allow_duplicates! {
            let mut app = app_with(diagnosed());
            app.handle_key(ch('/'));
            type_text(&mut app, "cache misses");
            app.handle_key(key(KeyCode::Enter));
            app.handle_key(ch('v'));
            assert!(matches!(&app.popup, Popup::View(v) if v.task_id == id(3)));
            let text = screen(&render_with(&mut app, 80, 24, COLOR));
            // The root cause is there in full, over several rows, no word cut.
            assert!(
                text.contains("\"root_cause\": \"v4.18.2 (deploy-8812), deployed 12"),
                "{text}"
            );
            assert!(!text.contains('…'), "{text}");
            both_sizes("task_view", &mut app);
            // Scrolled to the end, the history's long note is whole too.
            render_with(&mut app, 80, 24, COLOR);
            app.handle_key(ch('G'));
            let text = screen(&render_with(&mut app, 80, 24, COLOR));
            assert!(text.contains("third time in an"), "{text}");
            insta::assert_snapshot!("task_view_end_80x24", text);
        }
    });
}

#[test]
fn task_view_search_highlights_and_steps_through_matches() {
    each_store(|| {
        insta::allow_duplicates! {
            let mut app = app_with(diagnosed());
            app.handle_key(ch('/'));
            type_text(&mut app, "cache misses");
            app.handle_key(key(KeyCode::Enter));
            app.handle_key(ch('v'));
            app.handle_key(ch('/'));
            type_text(&mut app, "deploy");
            app.handle_key(key(KeyCode::Enter));
            let t = render_with(&mut app, 80, 24, COLOR);
            let text = screen(&t);
            assert!(text.contains("/deploy: match 1 of 5"), "{text}");
            // The matches are highlighted, the current one differently.
            let buf = t.backend().buffer();
            let highlighted: Vec<(u16, u16)> = (0..24)
                .flat_map(|y| (0..80).map(move |x| (x, y)))
                .filter(|&(x, y)| buf[(x, y)].bg == Color::Yellow)
                .collect();
            assert!(highlighted.len() >= 6 * 2, "{highlighted:?}");
            insta::assert_snapshot!("task_view_search_80x24", text);
            app.handle_key(ch('n'));
            app.handle_key(ch('n'));
            let text = screen(&render_with(&mut app, 80, 24, COLOR));
            assert!(text.contains("match 3 of 5"), "{text}");
            app.handle_key(ch('N'));
            app.handle_key(ch('N'));
            app.handle_key(ch('N'));
            let text = screen(&render_with(&mut app, 80, 24, COLOR));
            assert!(text.contains("match 5 of 5"), "wraps around: {text}");
            // q goes back to the list, keeping the selection.
            app.handle_key(ch('q'));
            assert!(matches!(app.popup, Popup::None));
            assert!(!app.quit);
            assert_eq!(app.selected.as_deref(), Some(id(3).as_str()));
        }
    });
}

#[test]
fn help_at_80x24_and_140x42() {
    each_store(|| {
        let mut app = app_with(fixture());
        app.handle_key(ch('?'));
        both_sizes("help", &mut app);
    });
}

/// Three of the six marked, one of them finished.
fn marked() -> App {
    let mut app = app_with(fixture());
    for n in [1, 2, 3] {
        let row = (0..app.rows.len())
            .find(|&r| app.row_task(r).is_some_and(|t| t.task_id == id(n)))
            .expect("a row");
        app.select_row(row);
        app.handle_key(ch(' '));
    }
    app
}

#[test]
fn marked_table() {
    each_store(|| {
        let mut app = marked();
        let text = screen(&render_with(&mut app, 80, 24, COLOR));
        assert!(text.contains("✓ 3 marked"), "{text}");
        assert_eq!(
            text.matches('✓').count(),
            4,
            "three rows and the header: {text}"
        );
        both_sizes("marked_table", &mut app);
    });
}

#[test]
fn bulk_cancel_confirmation_names_how_many_and_which() {
    each_store(|| {
        let mut app = marked();
        app.handle_key(ch('c'));
        let text = screen(&render_with(&mut app, 80, 24, COLOR));
        assert!(text.contains("Cancel these 2 marked task(s)?"), "{text}");
        assert!(
            text.contains("1 marked task(s) are finished and left alone"),
            "{text}"
        );
        both_sizes("bulk_cancel_confirmation", &mut app);
    });
}

#[test]
fn bulk_cancel_report_shows_each_task() {
    each_store(|| {
        use rudder_model::task::Change;
        use rudder_store::{Outcome, StoreError};
        let mut app = marked();
        app.handle_key(ch('c'));
        let effects = app.handle_key(ch('y'));
        assert_eq!(
            effects,
            [rudder_tui::update::Effect::CancelMany {
                task_ids: vec![id(1), id(2)],
                reason: None,
            }]
        );
        let mut t1 = fixture()[&id(1)].clone();
        t1.status = Status::Cancelled;
        let t2 = fixture()[&id(2)].clone();
        app.apply_result(rudder_tui::update::EffectResult::CancelMany {
            results: vec![
                (
                    id(1),
                    Ok(Outcome {
                        task: t1,
                        change: Change::Applied,
                    }),
                ),
                (
                    id(2),
                    Err(StoreError::Refused {
                        op: rudder_model::task::OpKind::Cancel,
                        task: Box::new(t2),
                        reason: "it changed meanwhile".into(),
                    }),
                ),
            ],
        });
        let text = screen(&render_with(&mut app, 80, 24, COLOR));
        assert!(text.contains("✖ 00000002 refused"), "{text}");
        assert!(text.contains("✔ 00000001 cancelled"), "{text}");
        both_sizes("bulk_cancel_report", &mut app);
    });
}

#[test]
fn stalled_tasks_stand_out() {
    each_store(|| {
        let mut tasks = fixture();
        let t = tasks.get_mut(&id(2)).expect("fixture");
        t.lease_expires_at = Some(ago(4));
        let mut app = app_with(tasks);
        let text = screen(&render_with(&mut app, 80, 24, COLOR));
        assert!(text.contains("⚠ 1 stalled (awaits a worker)"), "{text}");
        app.select_row(2);
        both_sizes("stalled", &mut app);
    });
}

#[test]
fn transition_log_at_80x24_never_cuts_a_status() {
    each_store(|| {
        let fx = Fixture::new(fixture());
        let mut app = fx.app();
        let mut tasks = fixture();
        tasks.get_mut(&id(2)).expect("fixture").status = Status::InputRequired;
        tasks.get_mut(&id(6)).expect("fixture").status = Status::Completed;
        app.on_feed(fx.set(tasks));
        let text = screen(&render_with(&mut app, 80, 24, COLOR));
        assert!(text.contains("▶→◆ input_required"), "{text}");
        assert!(text.contains("▶→✔ completed"), "{text}");
        both_sizes("log", &mut app);
    });
}

#[test]
fn dialogs_at_80x24_and_140x42() {
    each_store(|| {
        let mut app = app_with(fixture());
        app.handle_key(ch('c'));
        both_sizes("cancel_dialog", &mut app);
        // r: the reason's line, where y and n are text.
        app.handle_key(ch('r'));
        for c in "dup of INC-7, yes".chars() {
            app.handle_key(ch(c));
        }
        let text = screen(&render_with(&mut app, 80, 24, COLOR));
        assert!(text.contains("reason: dup of INC-7, yes"), "{text}");
        both_sizes("cancel_dialog_reason", &mut app);
        app.popup = Popup::ReclaimPreview {
            older_than: std::time::Duration::from_secs(900),
            age: "15m".into(),
            report: report(true),
            tasks: vec![(id(2), 2), (id(1), 2)],
            reason: None,
        };
        both_sizes("reclaim_preview_dialog", &mut app);
        app.handle_key(ch('r'));
        for c in "worker host died".chars() {
            app.handle_key(ch(c));
        }
        both_sizes("reclaim_preview_reason", &mut app);
    });
}

/// The header counts the stalled tasks of the whole store, not only of the
/// rows fetched around the selection; a lease that lapses with no write
/// is counted at the next tick.
#[test]
fn the_stalled_count_covers_tasks_outside_the_window() {
    each_store(|| {
        insta::allow_duplicates! {
            let mut tasks = fixture();
            // 150 more working tasks, the oldest last in the table: the
            // ten oldest lapsed, one more lapses in 90 seconds.
            for n in 0..150u32 {
                let mut t = task(100 + n, Status::Working, &format!("INC-2{n:03} batch"), 600 + i64::from(n), 1);
                t.claimed_by = Some("worker-9".into());
                t.lease_expires_at = Some(match n {
                    140.. => ago(2),
                    139 => now() + chrono::TimeDelta::seconds(90),
                    _ => now() + chrono::TimeDelta::minutes(10),
                });
                tasks.insert(t.task_id.clone(), t);
            }
            let fx = Fixture::new(tasks);
            let mut app = fx.app();
            app.window_side = 10;
            app.rebuild();
            let text = screen(&render_with(&mut app, 80, 24, COLOR));
            assert!(
                (140..150).all(|n| !app.tasks.contains_key(&id(100 + n))),
                "the stalled tasks are outside the window"
            );
            assert_eq!(app.stalled, 10);
            insta::assert_snapshot!(text);
            // No write: the leases of task 2 (30 s) and task 239 (90 s)
            // lapse, seen at a tick.
            app.tick(now() + chrono::TimeDelta::seconds(91));
            assert_eq!(app.stalled, 12);
            // Not counted again within the second (the store is not asked
            // at every tick), but at the next one.
            let _ = fx.set(fixture());
            app.tick(now() + chrono::TimeDelta::milliseconds(91_500));
            assert_eq!(app.stalled, 12);
            app.tick(now() + chrono::TimeDelta::seconds(92));
            // Of the fixture, task 2's lease (30 s) lapsed too.
            assert_eq!(app.stalled, 1);
        }
    });
}

/// A demo worker stopped with SIGSTOP (or Ctrl-Z in its own terminal) is
/// alive but does nothing: the header says so rather than "running", and
/// its end is still announced.
#[test]
fn a_stopped_worker_is_not_said_to_be_running() {
    use rudder_tui::WorkerState;
    let mut app = app_with(fixture());
    app.worker_polled(WorkerState::Running { pid: 9 });
    assert!(render(&mut app).contains("worker: pid 9 running (K kills)"));
    app.worker_polled(WorkerState::Stopped { pid: 9 });
    let text = render(&mut app);
    assert!(
        text.contains("worker: pid 9 stopped by a signal (K kills)"),
        "{text}"
    );
    assert!(!text.contains("running"), "{text}");
    app.worker_polled(WorkerState::Exited { pid: 9, code: None });
    let said = app.status.clone().expect("announced").text;
    assert!(said.contains("pid 9 exited by a signal"), "{said}");
}

/// The history in the detail pane and the task view says who made each
/// change, through which face, why, and which fields an answer gave; a
/// name holding a terminal escape is shown inert.
#[test]
fn the_history_shows_who_answered_and_who_cancelled() {
    each_store(|| {
        use rudder_model::task::{Author, Face, HistoryEntry};
        let mut tasks = fixture();
        let mut t = task(7, Status::Cancelled, "INC-1050 queue backlog", 30, 1);
        t.history.truncate(1);
        let mut answered =
            HistoryEntry::new(Status::Working, ago(10), Some("input provided".into()));
        answered.by(&Author::lossy("bo@ops-1", Face::Tui));
        answered.fields = vec!["service".into()];
        let mut cancelled = HistoryEntry::new(Status::Cancelled, ago(1), None);
        cancelled.by(&Author::lossy("ana\u{1b}[31m", Face::Cli));
        cancelled.reason = Some("duplicate of INC-4411".into());
        t.history.push(answered);
        t.history.push(cancelled);
        // It is cancelled while the TUI watches: the transitions log says
        // who and why too.
        let mut before = t.clone();
        before.status = Status::Working;
        before.history.pop();
        before.revision = 1;
        tasks.insert(id(7), before);
        let fx = Fixture::new(tasks.clone());
        let mut app = fx.app();
        tasks.insert(id(7), t);
        app.on_feed(fx.set(tasks));
        assert_eq!(
            app.log.front().map(|e| e.by.as_str()),
            Some("ana?[31m: duplicate of INC-4411")
        );
        select(&mut app, &id(7));
        let text = screen(&render_with(&mut app, 140, 42, COLOR));
        assert!(
            text.contains("bo@ops-1 (tui) · answered service · input provided"),
            "{text}"
        );
        assert!(
            text.contains("ana?[31m (cli) · reason: duplicate of INC-4411"),
            "{text}"
        );
        assert!(!text.contains('\u{1b}'), "{text}");
        both_sizes("history_with_authors", &mut app);
    });
}

/// A worker's holder name has no space to cut at: the transitions log
/// still shows its start rather than nothing.
#[test]
fn the_transitions_log_names_a_worker_without_spaces() {
    each_store(|| {
        use rudder_model::task::{Author, Face, HistoryEntry};
        let mut tasks = fixture();
        let mut t = task(
            8,
            Status::Working,
            "INC-1060 checkout p99 latency after deploy",
            30,
            1,
        );
        t.history.truncate(1);
        tasks.insert(id(8), t.clone());
        let fx = Fixture::new(tasks.clone());
        let mut app = fx.app();
        let mut asked = HistoryEntry::new(Status::InputRequired, ago(1), None);
        asked.by(&Author::lossy("worker-30261#680b5437", Face::Worker));
        t.history.push(asked);
        t.status = Status::InputRequired;
        t.revision += 1;
        tasks.insert(id(8), t);
        app.on_feed(fx.set(tasks));
        let text = screen(&render_with(&mut app, 200, 50, COLOR));
        assert!(
            text.contains("input_required INC-1060… · worker-30261#"),
            "{text}"
        );
    });
}
