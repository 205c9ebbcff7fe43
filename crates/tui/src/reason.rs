//! The reason a cancel or a reclaim may give: `r` in its y/n dialog opens a
//! line for it, Enter confirms with it, and it is recorded on each task's
//! history (the trail, `rudder log`) with who gave it.

use crossterm::event::{KeyCode, KeyEvent};
use tui_input::Input;

use crate::keys::text_request;

/// The longest reason taken, in characters (a reason is a line, not a
/// report: the rest of a paste is dropped).
pub const MAX_REASON_CHARS: usize = 500;

/// What a key did to a y/n dialog that takes a reason.
#[derive(Debug, PartialEq)]
pub(crate) enum Answer {
    /// Go ahead, with the reason typed (none when none was).
    Yes(Option<String>),
    /// Do nothing and close the dialog.
    No,
    /// Keep the dialog open (the reason may have changed).
    Stay,
}

/// Handle `key` in a dialog whose reason line is `reason` (`None`: not
/// opened). `y` goes ahead without a reason and `r` opens the line, when
/// `can_go` (a dialog with nothing to do only closes); `n`, `q` and Esc
/// close it, and so does Enter when `enter_closes`. On the open line, keys
/// edit it, Enter goes ahead with it and Esc closes the line, not the
/// dialog.
pub(crate) fn key(
    reason: &mut Option<Input>,
    key: KeyEvent,
    can_go: bool,
    enter_closes: bool,
) -> Answer {
    if let Some(input) = reason {
        return match key.code {
            KeyCode::Enter => Answer::Yes(given(input)),
            KeyCode::Esc => {
                *reason = None;
                Answer::Stay
            }
            _ => {
                if let Some(req) = text_request(key)
                    && (input.value().chars().count() < MAX_REASON_CHARS
                        || !matches!(key.code, KeyCode::Char(_)))
                {
                    input.handle(req);
                }
                Answer::Stay
            }
        };
    }
    match key.code {
        KeyCode::Char('y' | 'Y') if can_go => Answer::Yes(None),
        KeyCode::Char('r' | 'R') if can_go => {
            *reason = Some(Input::default());
            Answer::Stay
        }
        KeyCode::Char('n' | 'N' | 'q') | KeyCode::Esc => Answer::No,
        KeyCode::Enter if enter_closes => Answer::No,
        _ => Answer::Stay,
    }
}

/// The reason typed, trimmed; none for an empty line.
fn given(input: &Input) -> Option<String> {
    Some(input.value().trim().to_string()).filter(|r| !r.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crossterm::event::KeyModifiers;

    fn k(code: KeyCode) -> KeyEvent {
        KeyEvent::new(code, KeyModifiers::NONE)
    }

    fn typed(reason: &mut Option<Input>, text: &str) {
        for c in text.chars() {
            assert_eq!(key(reason, k(KeyCode::Char(c)), true, false), Answer::Stay);
        }
    }

    #[test]
    fn y_goes_without_a_reason_and_r_then_enter_with_one() {
        let mut r = None;
        assert_eq!(
            key(&mut r, k(KeyCode::Char('y')), true, false),
            Answer::Yes(None)
        );
        assert_eq!(
            key(&mut r, k(KeyCode::Char('r')), true, false),
            Answer::Stay
        );
        // On the line, y and n are text, not answers.
        typed(&mut r, "  dup of INC-4411 yn ");
        assert_eq!(
            key(&mut r, k(KeyCode::Enter), true, false),
            Answer::Yes(Some("dup of INC-4411 yn".into()))
        );
    }

    #[test]
    fn esc_on_the_line_closes_the_line_and_an_empty_line_is_no_reason() {
        let mut r = None;
        key(&mut r, k(KeyCode::Char('r')), true, false);
        typed(&mut r, "oops");
        assert_eq!(key(&mut r, k(KeyCode::Esc), true, false), Answer::Stay);
        assert!(r.is_none());
        assert_eq!(key(&mut r, k(KeyCode::Esc), true, false), Answer::No);
        key(&mut r, k(KeyCode::Char('r')), true, false);
        typed(&mut r, "   ");
        assert_eq!(
            key(&mut r, k(KeyCode::Enter), true, false),
            Answer::Yes(None)
        );
    }

    #[test]
    fn a_dialog_with_nothing_to_do_only_closes_and_the_reason_is_bounded() {
        let mut r = None;
        assert_eq!(
            key(&mut r, k(KeyCode::Char('y')), false, true),
            Answer::Stay
        );
        assert_eq!(
            key(&mut r, k(KeyCode::Char('r')), false, true),
            Answer::Stay
        );
        assert!(r.is_none());
        assert_eq!(key(&mut r, k(KeyCode::Enter), false, true), Answer::No);
        key(&mut r, k(KeyCode::Char('r')), true, false);
        typed(&mut r, &"x".repeat(MAX_REASON_CHARS + 20));
        let Some(input) = &r else {
            panic!("the line is open")
        };
        assert_eq!(input.value().chars().count(), MAX_REASON_CHARS);
        // Control characters (a terminal escape in a paste) are not taken.
        let mut r = Some(Input::default());
        key(&mut r, k(KeyCode::Char('\u{1b}')), true, false);
        assert_eq!(r.map(|i| i.value().to_string()), Some(String::new()));
    }
}
