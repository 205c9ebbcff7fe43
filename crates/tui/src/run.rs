//! The event loop: terminal events, the change feed, effect results and a
//! 1 Hz tick, with a redraw only when something changed, at most ~60 frames
//! a second, each inside a synchronized update.

use std::io::{self, Stdout, Write};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::ThreadId;
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
use tokio::sync::{Notify, mpsc};

use super::Options;
use super::app::{App, StoreUpdate, Tone};
use super::reads::Reader;
use super::update::{Effect, EffectResult, execute};
use super::view::{self, Theme};
use super::window::RowSource;
use rudder_store::Store;
use rudder_store::watch::{ChangeFeed, FeedOptions};

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

/// Panics while the TUI owns the terminal, shared with the panic hook.
struct Panics {
    /// The thread that runs the loop and draws.
    ui_thread: ThreadId,
    /// The TUI owns the terminal (raw mode, alternate screen).
    active: AtomicBool,
    /// Panics of other threads, described, to show and to print on exit.
    messages: Mutex<Vec<String>>,
    /// Wakes the loop when a background thread panicked.
    notify: Notify,
}

impl Panics {
    fn new() -> Panics {
        Panics {
            ui_thread: std::thread::current().id(),
            active: AtomicBool::new(false),
            messages: Mutex::new(Vec::new()),
            notify: Notify::new(),
        }
    }

    /// Take in a panic of the current thread. A background thread's panic
    /// while the TUI runs is recorded and the loop woken (returns `true`);
    /// otherwise (the UI thread, or no TUI) returns `false` and the hook
    /// restores the terminal and reports it the usual way.
    fn record(
        &self,
        location: Option<&std::panic::Location<'_>>,
        payload: &(dyn std::any::Any + Send),
    ) -> bool {
        let current = std::thread::current();
        if current.id() == self.ui_thread || !self.active.load(Ordering::SeqCst) {
            return false;
        }
        let at = location
            .map(|l| format!(" at {}:{}", l.file(), l.line()))
            .unwrap_or_default();
        let message = format!(
            "thread '{}' panicked{at}: {}",
            current.name().unwrap_or("<unnamed>"),
            payload_text(payload)
        );
        self.messages().push(message);
        self.notify.notify_one();
        true
    }

    fn messages(&self) -> std::sync::MutexGuard<'_, Vec<String>> {
        // A poisoned lock still holds the messages.
        self.messages.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// The message a panic payload carries, if it is text.
fn payload_text(payload: &(dyn std::any::Any + Send)) -> String {
    payload
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "(no message)".into())
}

/// Install the panic hook (see the module docs of `crate`):
///
/// - on the UI thread, restore the terminal before the panic message is
///   printed (or it lands on the alternate screen and is lost), then let the
///   panic end the TUI as before;
/// - on any other thread (a store call in `spawn_blocking`, the change
///   feed's reader) leave the terminal alone, since the UI thread keeps
///   drawing: printing would garble the screen and restoring would leave the
///   TUI drawing in cooked mode. The panic is recorded instead: the loop
///   shows it in the status line and it is printed when the TUI exits.
fn install_panic_hook() -> Arc<Panics> {
    let panics = Arc::new(Panics::new());
    let shared = Arc::clone(&panics);
    let previous = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        if shared.record(info.location(), info.payload()) {
            return;
        }
        if shared.active.swap(false, Ordering::SeqCst) {
            restore();
        }
        previous(info);
    }));
    panics
}

fn setup(panics: &Panics) -> anyhow::Result<(Term, Guard)> {
    panics.active.store(true, Ordering::SeqCst);
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
    let panics = install_panic_hook();
    let result = runtime.block_on(run_loop(options, &panics));
    // A store call may still be waiting for the lock (up to
    // $RUDDER_LOCK_TIMEOUT, 30 s by default) or writing: quitting must not
    // wait for it, which dropping the runtime would. The call is abandoned
    // on its thread; the process ends soon after, and a write is whole or
    // not at all (the new file is renamed into place in one step), so the
    // store holds either the old state or the new one, never half.
    runtime.shutdown_background();
    // The terminal is restored (the loop's guard is gone): from here on a
    // panic anywhere is reported the usual way.
    panics.active.store(false, Ordering::SeqCst);
    let messages = std::mem::take(&mut *panics.messages());
    if messages.is_empty() {
        return result;
    }
    for m in &messages {
        // One write per line, so that lines of several threads never
        // interleave; stderr that cannot be written has nowhere to go.
        let line = format!("rudder: internal error while the TUI ran: {m}\n");
        let _ = io::Write::write_all(&mut io::stderr().lock(), line.as_bytes());
    }
    result?;
    anyhow::bail!(
        "{} background thread(s) panicked while the TUI ran (see above); this is a bug",
        messages.len()
    )
}

fn draw(terminal: &mut Term, app: &mut App, theme: &Theme) -> io::Result<()> {
    queue!(terminal.backend_mut(), BeginSynchronizedUpdate)?;
    terminal.draw(|f| view::draw(f, app, theme))?;
    queue!(terminal.backend_mut(), EndSynchronizedUpdate)?;
    terminal.backend_mut().flush()
}

/// The events of `feed`, as the app takes them.
fn forward(mut feed: ChangeFeed) -> mpsc::Receiver<StoreUpdate> {
    let (tx, rx) = mpsc::channel(16);
    tokio::spawn(async move {
        while let Some(event) = feed.next().await {
            if tx.send(StoreUpdate::Feed(event)).await.is_err() {
                return;
            }
        }
    });
    rx
}

/// Where a TUI over `store` reads its rows, and the feed events it takes
/// (see [`App::with_source`]): a window around the selection at a time
/// from every backend. A JSON file's rows are kept between changes and read
/// again by its feed, only the tasks whose text changed parsed again
/// ([`rudder_store::FileRows`]); a database is asked directly.
/// Must be called from within a tokio runtime.
pub fn live(store: &Arc<Store>) -> (Arc<dyn RowSource>, mpsc::Receiver<StoreUpdate>) {
    match store.backend().kept_rows() {
        Some((rows, source)) => (
            rows,
            forward(ChangeFeed::with_source(source, FeedOptions::default())),
        ),
        None => (
            Arc::clone(store) as Arc<dyn RowSource>,
            forward(store.feed(FeedOptions::default())),
        ),
    }
}

/// Copy `text` to the clipboard of the terminal (also over ssh) with OSC 52.
fn copy_osc52(out: &mut impl Write, text: &str) -> io::Result<()> {
    let encoded = base64::engine::general_purpose::STANDARD.encode(text);
    write!(out, "\x1b]52;c;{encoded}\x07")?;
    out.flush()
}

async fn run_loop(mut options: Options, panics: &Panics) -> anyhow::Result<()> {
    // A bad config file never stops the TUI: what was wrong is shown, and
    // the defaults stand in for what could not be taken.
    let config = super::config::load();
    let theme = Theme::from_env_with(config.palette);
    let url = options.store.backend().url();
    let store = Arc::new(match options.author.clone() {
        Some(author) => options.store.by(author),
        None => options.store,
    });
    let mut app = App::at(&url, options.read_only, Utc::now());
    // A store this user cannot write (a read-only mount, another user's
    // directory) is shown read only, rather than refusing each write.
    if !options.read_only
        && let Some(why) = rudder_store::Backend::cannot_write(store.backend())
    {
        app.read_only_because(why);
    }
    app.configure(config);
    let osc777 = super::alert::prefers_777();
    let mut worker = options.worker.take();
    if let Some(w) = worker.as_mut() {
        app.worker = Some(w.state());
        app.worker_role = w.role();
    }
    let (source, mut feed) = live(&store);
    // Reads run on a thread of their own: a slow or stopped store delays
    // the rows, never the keys or the screen.
    let (ask, mut answers) =
        Reader::spawn(Arc::clone(&source)).context("cannot start the TUI's reader thread")?;
    app = app.with_source(source);
    app.read_with(ask);
    let mut feed_alive = true;
    let (terminal, _guard) = setup(panics)?;
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
            // Whatever brought them (the feed, a resume after a pause).
            let alerts = app.alerts.take();
            super::alert::write(terminal.backend_mut(), app.notify, osc777, &alerts)?;
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
                    // Rows the person asked for are being read: a key
                    // waits for them (taken when they come, below).
                    if app.hold(&event) {
                        dirty = true;
                        continue;
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
            event = feed.recv(), if feed_alive => match event {
                Some(event) => {
                    app.now = Utc::now();
                    app.on_feed(event);
                    dirty = true;
                }
                None => {
                    feed_alive = false;
                    app.say(Tone::Error, "the change feed stopped: the screen is no longer live");
                    dirty = true;
                }
            },
            Some(result) = results.recv() => {
                app.apply_result(result);
                dirty = true;
            }
            Some(answer) = answers.recv() => {
                app.now = Utc::now();
                app.on_read(answer);
                // The keys that waited for these rows, in the order typed.
                while let Some(event) = app.next_held() {
                    for effect in app.handle_event(&event) {
                        run_effect(effect, &mut app, &store, &result_tx, worker.as_deref_mut(), &mut terminal)?;
                    }
                }
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
            _ = panics.notify.notified() => {
                // The answer to a store call that panicked says more (and
                // puts its dialog right); this covers every other thread.
                let last = panics.messages().last().cloned().unwrap_or_default();
                app.say(
                    Tone::Error,
                    format!(
                        "internal error: {} (details are printed on exit)",
                        rudder_model::text::clean(&last, 200)
                    ),
                );
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
            let asked = store_effect.clone();
            let call = {
                let results = results.clone();
                tokio::task::spawn_blocking(move || {
                    if let Some(r) = execute(&store, store_effect) {
                        let _ = results.send(r);
                    }
                })
            };
            // A panic in the call becomes an answer, so the dialog waiting
            // for it is put right and the user is told.
            tokio::spawn(async move {
                if let Err(e) = call.await {
                    let message = if e.is_panic() {
                        payload_text(&*e.into_panic())
                    } else {
                        "the call was cancelled".into()
                    };
                    let _ = results.send(EffectResult::Panicked {
                        effect: asked,
                        message,
                    });
                }
            });
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_id_is_copied_with_an_osc_52_sequence() {
        let mut out = Vec::new();
        copy_osc52(&mut out, "1a2b3c4d-0000").expect("write to a Vec");
        assert_eq!(out, b"\x1b]52;c;MWEyYjNjNGQtMDAwMA==\x07");
    }

    #[test]
    fn only_background_panics_while_the_tui_runs_are_recorded() {
        let panics = Panics::new();
        assert!(
            !panics.record(None, &"boom"),
            "the UI thread's panic ends the TUI"
        );
        std::thread::scope(|s| {
            s.spawn(|| assert!(!panics.record(None, &"boom"), "no TUI running"));
        });
        panics.active.store(true, Ordering::SeqCst);
        assert!(!panics.record(None, &"boom"));
        std::thread::scope(|s| {
            std::thread::Builder::new()
                .name("store-call".into())
                .spawn_scoped(s, || assert!(panics.record(None, &"boom")))
                .expect("spawn");
        });
        assert_eq!(
            *panics.messages(),
            ["thread 'store-call' panicked: boom".to_string()]
        );
        // The loop is woken even though nobody was waiting yet.
        let woken = panics.notify.notified();
        let mut woken = std::pin::pin!(woken);
        let waker = futures::task::noop_waker();
        let mut cx = std::task::Context::from_waker(&waker);
        assert!(woken.as_mut().poll(&mut cx).is_ready());
        assert_eq!(payload_text(&"static"), "static");
        assert_eq!(payload_text(&42_u8), "(no message)");
    }
}
