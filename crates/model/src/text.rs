//! Making untrusted text from the store safe to put on a terminal.
//!
//! A task's title or message is written by any process that can write the
//! store. Drawn as is, an escape sequence in it could move the cursor, clear
//! the screen, retitle the terminal or hide text behind bidi overrides. Every
//! string from the store goes through [`sanitize`] before it is drawn or printed.

use std::borrow::Cow;
use std::cell::Cell;

use unicode_width::{UnicodeWidthChar, UnicodeWidthStr};

fn is_bidi_control(c: char) -> bool {
    matches!(c, '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}' | '\u{200E}' | '\u{200F}' | '\u{061C}')
}

fn is_unsafe(c: char) -> bool {
    c.is_control() || is_bidi_control(c)
}

thread_local! {
    static SANITIZED: Cell<u64> = const { Cell::new(0) };
}

/// How many bytes the current thread has passed through [`sanitize`] so far:
/// lets tests and benchmarks check that text is sanitized once per change,
/// not once per frame.
pub fn sanitized_bytes() -> u64 {
    SANITIZED.with(Cell::get)
}

/// Remove escape sequences, control characters (C0, DEL, C1) and bidi
/// controls; line breaks and tabs become spaces so the text stays on one line.
pub fn sanitize(text: &str) -> Cow<'_, str> {
    SANITIZED.with(|n| n.set(n.get().saturating_add(text.len() as u64)));
    if !text.chars().any(is_unsafe) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\u{1b}' => skip_escape(&mut chars),
            // C1 CSI, OSC, DCS and friends introduce sequences just like ESC.
            '\u{9b}' => skip_until_final(&mut chars),
            '\u{9d}' | '\u{90}' | '\u{9e}' | '\u{9f}' | '\u{98}' => skip_string(&mut chars),
            '\n' | '\r' | '\t' => {
                if !out.ends_with(' ') {
                    out.push(' ');
                }
            }
            c if is_unsafe(c) => {}
            c => out.push(c),
        }
    }
    Cow::Owned(out)
}

type Chars<'a> = std::iter::Peekable<std::str::Chars<'a>>;

fn skip_escape(chars: &mut Chars<'_>) {
    match chars.next() {
        Some('[') => skip_until_final(chars),
        Some(']' | 'P' | '^' | '_' | 'X') => skip_string(chars),
        // Two-character sequences (ESC c, ESC 7, ...) and charset selections (ESC ( B).
        Some('(' | ')' | '*' | '+' | '#' | '%') => {
            chars.next();
        }
        _ => {}
    }
}

/// CSI: parameters and intermediates until a final byte in `@`..=`~`.
fn skip_until_final(chars: &mut Chars<'_>) {
    for c in chars.by_ref() {
        if ('@'..='~').contains(&c) {
            break;
        }
    }
}

/// OSC/DCS/APC/PM: until BEL, ST (ESC \) or C1 ST.
fn skip_string(chars: &mut Chars<'_>) {
    while let Some(c) = chars.next() {
        match c {
            '\u{7}' | '\u{9c}' => break,
            '\u{1b}' => {
                if chars.peek() == Some(&'\\') {
                    chars.next();
                }
                break;
            }
            _ => {}
        }
    }
}

/// Cut `text` to at most `width` terminal columns, ending in `…` when cut.
pub fn truncate(text: &str, width: usize) -> Cow<'_, str> {
    let mut used = 0;
    for (i, c) in text.char_indices() {
        let w = c.width().unwrap_or(0);
        if used + w > width {
            if width == 0 {
                return Cow::Borrowed("");
            }
            // Make room for the ellipsis.
            let mut cut = String::with_capacity(i + 3);
            let mut room = width - 1;
            for c in text.chars() {
                let w = c.width().unwrap_or(0);
                if w > room {
                    break;
                }
                room -= w;
                cut.push(c);
            }
            cut.push('…');
            return Cow::Owned(cut);
        }
        used += w;
    }
    Cow::Borrowed(text)
}

/// Cut `text` to at most `width` columns like [`truncate`], but at the end
/// of a word (before a space) when one ends in the second half of the
/// room, so that a cut never leaves half a word before the `…`.
pub fn truncate_words(text: &str, width: usize) -> String {
    let cut = truncate(text, width);
    let Cow::Owned(cut) = cut else {
        // Borrowed: the whole text fits, or (no room at all) none of it.
        return cut.into_owned();
    };
    let body = cut.strip_suffix('…').unwrap_or(&cut);
    // Already at a word's end: the next character of `text` is a space.
    if text[body.len()..].starts_with(' ') {
        return format!("{}…", body.trim_end());
    }
    match body.rfind(' ') {
        Some(at) if body[..at].width() * 2 >= width => format!("{}…", body[..at].trim_end()),
        _ => cut,
    }
}

/// Cut `text` to at most `width` columns at the end of a word only, with
/// `…`: empty when not even its first word fits (for labels that may be
/// left out, such as a title in the transition log).
pub fn truncate_at_word(text: &str, width: usize) -> String {
    let cut = truncate(text, width);
    let Cow::Owned(cut) = cut else {
        // Borrowed: the whole text fits, or (no room at all) none of it.
        return cut.into_owned();
    };
    let body = cut.strip_suffix('…').unwrap_or(&cut);
    if text[body.len()..].starts_with(' ') {
        return format!("{}…", body.trim_end());
    }
    match body.rfind(' ') {
        Some(at) if !body[..at].trim_end().is_empty() => format!("{}…", body[..at].trim_end()),
        _ => String::new(),
    }
}

/// [`sanitize`] then [`truncate`].
pub fn clean(text: &str, width: usize) -> String {
    truncate(&sanitize(text), width).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_are_not_cut_in_half() {
        assert_eq!(
            truncate_words("INC-1042 checkout latency", 20),
            "INC-1042 checkout…"
        );
        assert_eq!(
            truncate_words("INC-1042 checkout latency", 40),
            "INC-1042 checkout latency"
        );
        assert_eq!(
            truncate_words("INC-1042 checkout latency", 18),
            "INC-1042 checkout…"
        );
        assert_eq!(truncate_at_word("INC-1042 checkout latency", 7), "");
        assert_eq!(
            truncate_at_word("INC-1042 checkout latency", 0),
            "",
            "no room: nothing"
        );
        assert_eq!(truncate_at_word("", 0), "");
        assert_eq!(
            truncate_at_word("INC-1042 checkout latency", 12),
            "INC-1042…"
        );
        assert_eq!(
            truncate_at_word("INC-1042 checkout latency", 17),
            "INC-1042…"
        );
        assert_eq!(
            truncate_at_word("INC-1042 checkout latency", 18),
            "INC-1042 checkout…"
        );
        // A long first word is cut where it must be.
        assert_eq!(truncate_words("supercalifragilistic yes", 8), "superca…");
        assert_eq!(truncate_words("a bcdefghijkl", 8), "a bcdef…");
        assert_eq!(truncate_words("", 0), "");
    }

    #[test]
    fn escape_sequences_and_controls_are_removed() {
        assert_eq!(sanitize("plain"), "plain");
        assert_eq!(sanitize("a\u{1b}[2Jb\u{1b}[1;1Hc"), "abc");
        assert_eq!(sanitize("x\u{1b}]0;pwned\u{7}y"), "xy");
        assert_eq!(sanitize("x\u{1b}]52;c;Zm9v\u{1b}\\y"), "xy");
        assert_eq!(sanitize("in\u{202E}verse"), "inverse");
        assert_eq!(sanitize("a\u{9b}31mb"), "ab");
        assert_eq!(sanitize("line1\nline2\r\n"), "line1 line2 ");
        assert_eq!(sanitize("bell\u{7}\u{0}\u{7f}"), "bell");
        assert_eq!(sanitize("日本語 ok"), "日本語 ok");
    }

    #[test]
    fn truncation_counts_columns_and_adds_an_ellipsis() {
        assert_eq!(truncate("hello", 5), "hello");
        assert_eq!(truncate("hello world", 5), "hell…");
        assert_eq!(truncate("日本語", 4), "日…");
        assert_eq!(truncate("abc", 0), "");
    }
}
