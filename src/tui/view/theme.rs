//! Colours and symbols. Every status has a symbol as well as a colour, so the
//! screen still reads without colour (`NO_COLOR`).

use ratatui::style::{Color, Modifier, Style};

use crate::task::Status;
use crate::tui::app::Tone;

/// The styles the panes use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Theme {
    /// Whether colours are used (off when `NO_COLOR` is set).
    pub color: bool,
}

impl Theme {
    /// The theme for this environment: no colour when `NO_COLOR` is set and
    /// not empty (<https://no-color.org>).
    pub fn from_env() -> Theme {
        let no_color = std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty());
        Theme { color: !no_color }
    }

    fn fg(&self, c: Color) -> Style {
        if self.color {
            Style::new().fg(c)
        } else {
            Style::new()
        }
    }

    /// The symbol of a status (distinct without colour).
    pub fn symbol(status: Status) -> &'static str {
        match status {
            Status::InputRequired => "◆",
            Status::Working => "▶",
            Status::Completed => "✔",
            Status::Failed => "✖",
            Status::Cancelled => "⊘",
        }
    }

    /// The style of a status.
    pub fn status(&self, status: Status) -> Style {
        match status {
            Status::InputRequired => self.fg(Color::Yellow).add_modifier(Modifier::BOLD),
            Status::Working => self.fg(Color::Cyan),
            Status::Completed => self.fg(Color::Green),
            Status::Failed => self.fg(Color::Red),
            Status::Cancelled => self.fg(Color::DarkGray),
        }
    }

    /// Tasks waiting for a human, in the header: they must stand out.
    pub fn attention(&self) -> Style {
        if self.color {
            Style::new()
                .fg(Color::Black)
                .bg(Color::Yellow)
                .add_modifier(Modifier::BOLD)
        } else {
            Style::new().add_modifier(Modifier::BOLD | Modifier::REVERSED)
        }
    }

    /// The selected row.
    pub fn selected(&self) -> Style {
        if self.color {
            Style::new().bg(Color::Blue).fg(Color::White)
        } else {
            Style::new().add_modifier(Modifier::REVERSED)
        }
    }

    /// A row that just changed.
    pub fn flash(&self) -> Style {
        if self.color {
            Style::new().bg(Color::Rgb(60, 60, 0))
        } else {
            Style::new().add_modifier(Modifier::BOLD)
        }
    }

    /// Titles and labels.
    pub fn title(&self) -> Style {
        Style::new().add_modifier(Modifier::BOLD)
    }

    /// Secondary text.
    pub fn dim(&self) -> Style {
        if self.color {
            Style::new().fg(Color::DarkGray)
        } else {
            Style::new()
        }
    }

    /// A banner about the store (missing, unreadable, paused).
    pub fn banner(&self, error: bool) -> Style {
        match (self.color, error) {
            (true, true) => Style::new()
                .fg(Color::White)
                .bg(Color::Red)
                .add_modifier(Modifier::BOLD),
            (true, false) => Style::new().fg(Color::Black).bg(Color::Yellow),
            (false, _) => Style::new().add_modifier(Modifier::REVERSED),
        }
    }

    /// An error at a form field.
    pub fn error(&self) -> Style {
        self.fg(Color::Red).add_modifier(Modifier::BOLD)
    }

    /// The status line by tone.
    pub fn tone(&self, tone: Tone) -> Style {
        match tone {
            Tone::Info => Style::new(),
            Tone::Success => self.fg(Color::Green),
            Tone::Warning => self.fg(Color::Yellow),
            Tone::Error => self.fg(Color::Red).add_modifier(Modifier::BOLD),
        }
    }

    /// The focused form field.
    pub fn focus(&self) -> Style {
        if self.color {
            self.fg(Color::Cyan).add_modifier(Modifier::BOLD)
        } else {
            Style::new().add_modifier(Modifier::BOLD | Modifier::UNDERLINED)
        }
    }
}
