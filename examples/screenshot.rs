//! Renders the demo screen to `assets/demo-screen.svg` for the README.
//!
//! Reproducible: the demo's own incidents are seeded into a temporary store
//! and moved through the real store API with a fixed clock to a moment in the
//! middle of the story (one diagnosis waiting for a service, two running,
//! one concluded, one failed), then drawn by the TUI's own view code on
//! ratatui's `TestBackend` and converted cell by cell to SVG.
//!
//! ```sh
//! cargo run --example screenshot            # writes assets/demo-screen.svg
//! cargo run --example screenshot -- out.svg
//! ```

use rudder::store::Open as _;
use std::fmt::Write as _;
use std::sync::{Arc, RwLock};
use std::time::Duration;

use anyhow::{Context, Result};
use chrono::{DateTime, TimeDelta, Utc};
use ratatui::Terminal;
use ratatui::backend::TestBackend;
use ratatui::buffer::Buffer;
use ratatui::style::{Color, Modifier};
use rudder::demo::{diagnosis, scenarios, seed};
use rudder::store::{Backend, Store};
use rudder::task::{Actor, Progress, Task};
use rudder::tui::WorkerState;
use rudder::tui::app::{App, StoreUpdate};
use rudder::tui::view::{self, theme::Theme};
use rudder::tui::window::RowSource;
use rudder::watch::{FeedEvent, ResetReason, TaskChange};

const WIDTH: u16 = 132;
const HEIGHT: u16 = 38;

/// Where the README's screenshot lives.
const DEFAULT_OUT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/assets/demo-screen.svg");

fn main() -> Result<()> {
    let out = std::env::args()
        .nth(1)
        .unwrap_or_else(|| DEFAULT_OUT.into());
    std::fs::write(&out, render()?)?;
    println!("wrote {out}");
    Ok(())
}

/// A fixed task id for a seeded task: a version-4 UUID made from its
/// incident's name instead of randomness, so that every run draws the same
/// screen.
fn fixed_id(incident: &str) -> String {
    // FNV-1a, twice with different offsets, for 16 bytes.
    let fnv = |offset: u64| {
        incident.bytes().fold(offset, |h, b| {
            (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
        })
    };
    let mut bytes = [0u8; 16];
    bytes[..8].copy_from_slice(&fnv(0xcbf2_9ce4_8422_2325).to_be_bytes());
    bytes[8..].copy_from_slice(&fnv(0x6c62_272e_07bb_0142).to_be_bytes());
    uuid::Builder::from_random_bytes(bytes)
        .into_uuid()
        .to_string()
}

/// The demo screen as SVG: the same bytes on every run.
fn render() -> Result<String> {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("rudder-demo.json");
    let start: DateTime<Utc> = "2026-11-29T09:00:00Z".parse()?;
    let clock = Arc::new(std::sync::Mutex::new(start));
    let at = {
        let clock = clock.clone();
        move |minutes: i64, seconds: i64| {
            *clock.lock().expect("clock") = start + TimeDelta::seconds(minutes * 60 + seconds)
        }
    };
    let store = {
        let clock = clock.clone();
        Store::open(&path).with_clock(Arc::new(move || *clock.lock().expect("clock")))
    };
    seed::seed(&store).context("seed the demo incidents")?;
    // The store made random ids: give each task its fixed one, in place.
    store.backend().transact(&mut |tasks| {
        let renamed: Vec<Task> = std::mem::take(tasks)
            .into_values()
            .map(|mut t| {
                let incident = t
                    .request
                    .as_ref()
                    .and_then(|r| r.get("incident"))
                    .and_then(|v| v.as_str())
                    .unwrap_or(&t.task_id)
                    .to_string();
                t.task_id = fixed_id(&incident);
                t
            })
            .collect();
        for t in renamed {
            tasks.insert(t.task_id.clone(), t);
        }
        Ok(true)
    })?;
    let seeded = store.load()?;
    let by_incident = |name: &str| -> Result<String> {
        seeded
            .values()
            .find(|t| {
                t.request
                    .as_ref()
                    .and_then(|r| r.get("incident"))
                    .and_then(|v| v.as_str())
                    == Some(name)
            })
            .map(|t| t.task_id.clone())
            .with_context(|| format!("{name} is seeded"))
    };
    let worker = "worker-4242";
    let lease = Duration::from_secs(8);
    let actor = Actor::Worker {
        holder: worker,
        lease: Some(lease),
    };
    // Claim an incident's task at minute:second.
    let claim = |name: &str, minutes: i64, seconds: i64| -> Result<String> {
        let id = by_incident(name)?;
        at(minutes, seconds);
        store.claim(&id, worker, lease)?;
        Ok(id)
    };
    let step = |id: &str, done: u64, fraction: f64| -> Result<()> {
        let task = store.get(id)?;
        let plan = diagnosis::Plan::of(&task);
        let message = diagnosis::step_message(done as usize, &plan, fraction);
        store.heartbeat(
            id,
            Some(message),
            Some(Progress {
                current: done,
                total: diagnosis::TOTAL_STEPS,
            }),
            actor,
        )?;
        Ok(())
    };

    // INC-1046 ran first and concluded.
    let done = claim("INC-1046", 0, 5)?;
    for s in 0..4 {
        at(1 + s as i64, 0);
        step(&done, s, 0.5)?;
    }
    at(5, 30);
    let plan = diagnosis::Plan::of(&store.get(&done)?);
    let total = diagnosis::TOTAL_STEPS;
    let finished = Progress {
        current: total,
        total,
    };
    let message = diagnosis::step_done_message(total as usize - 1, &plan);
    store.heartbeat(&done, Some(message), Some(finished), actor)?;
    let result = diagnosis::conclusion(&plan, worker, 0).map_err(|e| anyhow::anyhow!("{e:?}"))?;
    store.complete(&done, result, actor)?;

    // INC-1044 found no traces to follow.
    let failed = claim("INC-1044", 6, 0)?;
    step(&failed, 1, 0.2)?;
    at(7, 10);
    store.fail(
        &failed,
        "notifications has no call traces in the last 30 minutes: nothing to follow",
        actor,
    )?;

    // INC-1043 names no service and waits for a person.
    let waiting = claim("INC-1043", 8, 0)?;
    step(&waiting, 1, 0.0)?;
    at(8, 40);
    store.request_input(
        &waiting,
        scenarios::service_schema(),
        Some("Which service should the diagnosis follow? INC-1043 (card payments declined with 502) names none.".into()),
        actor,
    )?;

    // Two diagnoses mid-way.
    for (name, steps, fraction) in [("INC-1042", 2, 0.6), ("INC-1047", 1, 0.3)] {
        let id = claim(name, 9, 0)?;
        at(11, 50);
        step(&id, steps, fraction)?;
    }
    at(12, 0);

    let tasks = store.load()?;
    let now = *clock.lock().expect("clock");
    // What the TUI saw when it opened, then what changed since, as the
    // change feed tells it: the transition log shows the diagnoses moving.
    let rows = Arc::new(RwLock::new(seeded.clone()));
    let mut app = App::new(std::path::Path::new("rudder-demo.json"), false, now)
        .with_source(Arc::clone(&rows) as Arc<dyn RowSource>);
    app.on_feed(StoreUpdate::Feed(FeedEvent::Reset(ResetReason::Start)));
    let changes = tasks
        .values()
        .filter(|t| seeded.get(&t.task_id) != Some(*t))
        .map(|t| TaskChange {
            task_id: t.task_id.clone(),
            revision: t.revision,
            from: seeded.get(&t.task_id).map(|s| s.status),
            to: Some(t.status),
            at: t.updated_at,
        })
        .collect();
    *rows.write().expect("not poisoned") = tasks;
    app.on_feed(StoreUpdate::Feed(FeedEvent::Changes(changes)));
    app.worker = Some(WorkerState::Running { pid: 4242 });
    app.selected = Some(done);
    app.rebuild();

    let mut terminal = Terminal::new(TestBackend::new(WIDTH, HEIGHT))?;
    terminal.draw(|frame| view::draw(frame, &mut app, &Theme::DEFAULT))?;
    Ok(svg(terminal.backend().buffer()))
}

fn hex(color: Color, default: &str) -> String {
    let named = |c| match c {
        Color::Black => "#1d1f21",
        Color::Red => "#cc6666",
        Color::Green => "#8fbc5a",
        Color::Yellow => "#e6c547",
        Color::Blue => "#6f9fd8",
        Color::Magenta => "#b294bb",
        Color::Cyan => "#70c0b1",
        Color::Gray => "#b4b7b4",
        Color::DarkGray => "#707880",
        Color::LightRed => "#ff7b72",
        Color::LightGreen => "#a8e070",
        Color::LightYellow => "#ffe27a",
        Color::LightBlue => "#8cc4ff",
        Color::LightMagenta => "#d6a8e0",
        Color::LightCyan => "#9ee8dc",
        Color::White => "#eaeaea",
        _ => "",
    };
    match color {
        Color::Reset => default.to_string(),
        Color::Rgb(r, g, b) => format!("#{r:02x}{g:02x}{b:02x}"),
        Color::Indexed(i) => format!("#{0:02x}{0:02x}{0:02x}", 8 + (i as u32 * 10).min(230)),
        c => named(c).to_string(),
    }
}

fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// One `<text>` per run of cells with the same style, over a background.
fn svg(buf: &Buffer) -> String {
    const CW: f64 = 8.4;
    const CH: f64 = 18.0;
    let (w, h) = (buf.area.width, buf.area.height);
    let mut out = String::new();
    let _ = write!(
        out,
        r##"<svg xmlns="http://www.w3.org/2000/svg" width="{}" height="{}" font-family="DejaVu Sans Mono, Menlo, Consolas, monospace" font-size="14"><rect width="100%" height="100%" fill="#1d1f21"/>"##,
        w as f64 * CW + 16.0,
        h as f64 * CH + 16.0
    );
    for y in 0..h {
        let mut x = 0;
        while x < w {
            let cell = &buf[(x, y)];
            let style = (cell.fg, cell.bg, cell.modifier);
            let mut text = String::new();
            let start = x;
            while x < w && (buf[(x, y)].fg, buf[(x, y)].bg, buf[(x, y)].modifier) == style {
                text.push_str(buf[(x, y)].symbol());
                x += 1;
            }
            let (mut fg, mut bg) = (hex(style.0, "#d8dad8"), hex(style.1, ""));
            if style.2.contains(Modifier::REVERSED) {
                (fg, bg) = (if bg.is_empty() { "#1d1f21".into() } else { bg }, fg);
            }
            let (px, py) = (8.0 + start as f64 * CW, 8.0 + y as f64 * CH);
            if !bg.is_empty() {
                let _ = write!(
                    out,
                    r#"<rect x="{px:.1}" y="{py:.1}" width="{:.1}" height="{CH}" fill="{bg}"/>"#,
                    (x - start) as f64 * CW
                );
            }
            if text.trim().is_empty() {
                continue;
            }
            let weight = if style.2.contains(Modifier::BOLD) {
                r#" font-weight="bold""#
            } else {
                ""
            };
            let _ = write!(
                out,
                r#"<text x="{px:.1}" y="{:.1}" fill="{fg}"{weight} xml:space="preserve" textLength="{:.1}" lengthAdjust="spacingAndGlyphs">{}</text>"#,
                py + 13.5,
                (x - start) as f64 * CW,
                escape(&text)
            );
        }
    }
    out.push_str("</svg>\n");
    out
}

// `cargo test` runs these (Cargo.toml: `test = true` for this example).
#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn two_renders_are_the_same_bytes_as_the_committed_screenshot() {
        let first = render().expect("render");
        let second = render().expect("render again");
        assert!(first == second, "two renders differ");
        let committed = std::fs::read_to_string(DEFAULT_OUT).expect("read the screenshot");
        assert!(
            first == committed,
            "assets/demo-screen.svg is stale: regenerate it with `cargo run --example screenshot`"
        );
    }
}
