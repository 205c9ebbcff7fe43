//! Colours and symbols. Every status has a symbol as well as a colour, so the
//! screen still reads without colour (`NO_COLOR`).

use ratatui::style::{Color, Modifier, Style};

use crate::app::Tone;
use rudder_model::task::Status;

/// A named set of colours (the config file's `theme`). Every palette uses
/// only the terminal's 16 ANSI colours, so it follows the user's own
/// colour scheme.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Palette {
    /// For dark and most backgrounds.
    #[default]
    Default,
    /// No colour at all: bold, reverse and underline only (as `NO_COLOR`).
    Mono,
    /// For light backgrounds (no yellow or cyan text).
    Light,
}

impl Palette {
    /// The names the config file takes.
    pub const NAMES: &'static [&'static str] = &["default", "mono", "light"];

    /// The palette called `name`.
    pub fn named(name: &str) -> Option<Palette> {
        match name {
            "default" => Some(Palette::Default),
            "mono" => Some(Palette::Mono),
            "light" => Some(Palette::Light),
            _ => None,
        }
    }
}

/// The styles the panes use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Theme {
    /// Whether colours are used (off when `NO_COLOR` is set, or in `mono`).
    pub color: bool,
    /// Which colours.
    pub palette: Palette,
}

impl Theme {
    /// The default palette, in colour.
    pub const DEFAULT: Theme = Theme {
        color: true,
        palette: Palette::Default,
    };
    /// No colour.
    pub const MONO: Theme = Theme {
        color: false,
        palette: Palette::Mono,
    };

    /// `palette`, without colours when `no_color`.
    pub fn new(palette: Palette, no_color: bool) -> Theme {
        Theme {
            color: !no_color && palette != Palette::Mono,
            palette,
        }
    }

    /// The theme for this environment: `palette`, but no colour when
    /// `NO_COLOR` is set and not empty (<https://no-color.org>), whatever
    /// the config file says.
    pub fn from_env_with(palette: Palette) -> Theme {
        let no_color = std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty());
        Theme::new(palette, no_color)
    }

    /// [`Theme::from_env_with`] the default palette.
    pub fn from_env() -> Theme {
        Theme::from_env_with(Palette::Default)
    }

    fn light(&self) -> bool {
        self.palette == Palette::Light
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
        crate::shown::symbol(status)
    }

    /// The style of a status.
    pub fn status(&self, status: Status) -> Style {
        match status {
            Status::InputRequired if self.light() => {
                self.fg(Color::Magenta).add_modifier(Modifier::BOLD)
            }
            Status::InputRequired => self.fg(Color::Yellow).add_modifier(Modifier::BOLD),
            Status::Working if self.light() => self.fg(Color::Blue),
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
                .fg(if self.light() {
                    Color::White
                } else {
                    Color::Black
                })
                .bg(if self.light() {
                    Color::Magenta
                } else {
                    Color::Yellow
                })
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
        if self.color && !self.light() {
            Style::new().bg(Color::DarkGray)
        } else {
            Style::new().add_modifier(Modifier::BOLD)
        }
    }

    /// A working task whose lease lapsed: nobody is working on it.
    pub fn stalled(&self) -> Style {
        self.fg(Color::Red).add_modifier(Modifier::BOLD)
    }

    /// The mark of a marked row, and the header's count of marks.
    pub fn marked(&self) -> Style {
        self.fg(Color::Magenta).add_modifier(Modifier::BOLD)
    }

    /// A search match in the task view.
    pub fn matched(&self) -> Style {
        if self.color {
            Style::new().fg(Color::Black).bg(Color::Yellow)
        } else {
            Style::new().add_modifier(Modifier::REVERSED)
        }
    }

    /// The current search match.
    pub fn current_match(&self) -> Style {
        self.matched()
            .add_modifier(Modifier::BOLD | Modifier::UNDERLINED)
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
