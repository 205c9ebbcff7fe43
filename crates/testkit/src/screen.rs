//! A ratatui test terminal's screen as text, for the TUI's tests and
//! snapshots.

/// The screen of a `TestBackend` terminal as text, one line per row,
/// trailing spaces trimmed.
pub fn screen_text(terminal: &ratatui::Terminal<ratatui::backend::TestBackend>) -> String {
    let buf = terminal.backend().buffer();
    let mut out = String::new();
    for y in 0..buf.area.height {
        let mut line = String::new();
        for x in 0..buf.area.width {
            line.push_str(buf[(x, y)].symbol());
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}
