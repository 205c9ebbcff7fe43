//! The event loop: terminal events, the change feed, effect results and a
//! 1 Hz tick, with a redraw only when something changed, at most ~60 frames
//! a second, each inside a synchronized update.

use std::io::{self, Stdout, Write};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use base64::Engine;
use chrono::Utc;
use crossterm::event::{DisableMouseCapture, EnableMouseCapture, Event, EventStream};
use crossterm::terminal::{
    BeginSynchronizedUpdate, EndSynchronizedUpdate, EnterAlternateScreen, LeaveAlternateScreen,
    disable_raw_mode, enable_raw_mode,
};
use crossterm::{cursor, execute, queue};
use futures::StreamExt;
use ratatui::Terminal;
use ratatui::backend::CrosstermBackend;
use tokio::sync::mpsc;

use super::Options;
use super::app::App;
use super::update::{Effect, EffectResult, execute};
use super::view::{self, Theme};
use crate::store::Store;
use crate::watch::{ChangeFeed, FeedOptions};

/// The shortest time between two frames (~60 per second).
const FRAME: Duration = Duration::from_millis(16);

type Term = Terminal<CrosstermBackend<Stdout>>;

/// Put the terminal back as it was; safe to call more than once.
fn restore() {
    let _ = disable_raw_mode();
    let _ = execute!(
        io::stdout(),
        EndSynchronizedUpdate,
        DisableMouseCapture,
        LeaveAlternateScreen,
        cursor::Show
    );
}

/// Restores the terminal when the loop ends, however it ends.
struct Guard;

impl Drop for Guard {
    fn drop(&mut self) {
        restore();
    }
}

fn setup() -> anyhow::Result<(Term, Guard)> {
    // Restore the terminal before the panic message is printed, or the
    // message lands on the alternate screen and is lost.
    let previous = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        restore();
        previous(info);
    }));
    enable_raw_mode().context("cannot put the terminal in raw mode")?;
    let guard = Guard;
    execute!(io::stdout(), EnterAlternateScreen, EnableMouseCapture)
        .context("cannot set up the terminal")?;
    let terminal = Terminal::new(CrosstermBackend::new(io::stdout()))?;
    Ok((terminal, guard))
}

/// Run the TUI until the user quits (the blocking entry point).
pub(super) fn run(options: Options) -> anyhow::Result<()> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    runtime.block_on(run_loop(options))
}

fn draw(terminal: &mut Term, app: &mut App, theme: &Theme) -> io::Result<()> {
    queue!(terminal.backend_mut(), BeginSynchronizedUpdate)?;
    terminal.draw(|f| view::draw(f, app, theme))?;
    queue!(terminal.backend_mut(), EndSynchronizedUpdate)?;
    terminal.backend_mut().flush()
}

/// Copy `text` to the clipboard of the terminal (also over ssh) with OSC 52.
fn copy_osc52(out: &mut impl Write, text: &str) -> io::Result<()> {
    let encoded = base64::engine::general_purpose::STANDARD.encode(text);
    write!(out, "\x1b]52;c;{encoded}\x07")?;
    out.flush()
}

async fn run_loop(mut options: Options) -> anyhow::Result<()> {
    let theme = Theme::from_env();
    let store = Arc::new(Store::open(&options.store));
    let mut app = App::new(&options.store, options.read_only, Utc::now());
    let mut worker = options.worker.take();
    if let Some(w) = worker.as_mut() {
        app.worker = Some(w.state());
    }
    let mut feed = ChangeFeed::start(options.store.clone(), FeedOptions::default());
    let mut feed_alive = true;
    let (terminal, _guard) = setup()?;
    let mut terminal = terminal;
    let mut events = EventStream::new();
    let (result_tx, mut results) = mpsc::unbounded_channel::<EffectResult>();
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    use tokio::signal::unix::{SignalKind, signal};
    // In raw mode Ctrl-C arrives as a key; these cover `kill` and a closed
    // terminal, so that the terminal is restored in every case.
    let mut sigterm = signal(SignalKind::terminate()).context("cannot listen for SIGTERM")?;
    let mut sigint = signal(SignalKind::interrupt()).context("cannot listen for SIGINT")?;
    let mut sighup = signal(SignalKind::hangup()).context("cannot listen for SIGHUP")?;

    let mut dirty = true;
    let mut last_draw: Option<Instant> = None;
    loop {
        if app.quit {
            break;
        }
        let wait = match (dirty, last_draw) {
            (false, _) => None,
            (true, None) => Some(Duration::ZERO),
            (true, Some(at)) => Some(FRAME.saturating_sub(at.elapsed())),
        };
        if wait == Some(Duration::ZERO) {
            draw(&mut terminal, &mut app, &theme)?;
            last_draw = Some(Instant::now());
            dirty = false;
            continue;
        }
        let frame_due = async {
            match wait {
                Some(w) => tokio::time::sleep(w).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            event = events.next() => match event {
                Some(Ok(event)) => {
                    if let Event::Resize(..) = event {
                        terminal.autoresize()?;
                    }
                    let effects = app.handle_event(&event);
                    for effect in effects {
                        run_effect(effect, &mut app, &store, &result_tx, worker.as_deref_mut(), &mut terminal)?;
                    }
                    dirty = true;
                }
                Some(Err(e)) => return Err(e).context("cannot read terminal events"),
                None => break,
            },
            event = feed.next(), if feed_alive => match event {
                Some(event) => {
                    app.now = Utc::now();
                    app.on_feed(event);
                    dirty = true;
                }
                None => {
                    feed_alive = false;
                    app.say(super::app::Tone::Error, "the change feed stopped: the screen is no longer live");
                    dirty = true;
                }
            },
            Some(result) = results.recv() => {
                app.apply_result(result);
                dirty = true;
            }
            _ = tick.tick() => {
                app.tick(Utc::now());
                if let Some(w) = worker.as_mut() {
                    app.worker_polled(w.state());
                }
                // Relative times and flashes change with the clock.
                dirty = true;
            }
            _ = sigterm.recv() => break,
            _ = sigint.recv() => break,
            _ = sighup.recv() => break,
            _ = frame_due => {}
        }
    }
    drop(terminal);
    Ok(())
}

fn run_effect(
    effect: Effect,
    app: &mut App,
    store: &Arc<Store>,
    results: &mpsc::UnboundedSender<EffectResult>,
    worker: Option<&mut (dyn super::WorkerControl + 'static)>,
    terminal: &mut Term,
) -> anyhow::Result<()> {
    match effect {
        Effect::Copy(text) => copy_osc52(terminal.backend_mut(), &text)?,
        Effect::KillWorker | Effect::StartWorker => {
            if let Some(w) = worker {
                let kill = effect == Effect::KillWorker;
                let result = if kill { w.kill() } else { w.start() };
                app.worker_result(
                    if kill {
                        "killed with SIGKILL"
                    } else {
                        "started"
                    },
                    result,
                );
                app.worker = Some(w.state());
            }
        }
        store_effect => {
            // Store writes take the lock and fsync: keep them off the loop.
            let store = Arc::clone(store);
            let results = results.clone();
            tokio::task::spawn_blocking(move || {
                if let Some(r) = execute(&store, store_effect) {
                    let _ = results.send(r);
                }
            });
        }
    }
    Ok(())
}
