//! Task kinds: the short names (`diagnose`, `backup`) workers claim by.

/// The longest kind, in characters.
pub const MAX_KIND_CHARS: usize = 64;

/// Why a kind is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KindError {
    #[error("it is empty")]
    Empty,
    #[error("it is {0} characters long, more than the {MAX_KIND_CHARS} a kind may have")]
    TooLong(usize),
    /// Whitespace or a control character, which would make the kind hard
    /// to type, to show in one table cell, or to pass as one shell word.
    #[error("it holds {0:?}; a kind is one word without whitespace or control characters")]
    Forbidden(char),
}

/// Check that `kind` may be a task's kind: not empty, at most
/// [`MAX_KIND_CHARS`] characters, none of them whitespace or control
/// characters.
pub fn check_kind(kind: &str) -> Result<(), KindError> {
    if kind.is_empty() {
        return Err(KindError::Empty);
    }
    if let Some(c) = kind.chars().find(|c| c.is_whitespace() || c.is_control()) {
        return Err(KindError::Forbidden(c));
    }
    let n = kind.chars().count();
    if n > MAX_KIND_CHARS {
        return Err(KindError::TooLong(n));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_words_are_kinds_and_the_rest_is_refused_with_why() {
        for ok in ["diagnose", "backup", "db.vacuum", "mcp/tool-1", "支付", "x"] {
            assert_eq!(check_kind(ok), Ok(()), "{ok}");
        }
        assert_eq!(check_kind(""), Err(KindError::Empty));
        assert_eq!(check_kind("a b"), Err(KindError::Forbidden(' ')));
        assert_eq!(check_kind("a\u{7}"), Err(KindError::Forbidden('\u{7}')));
        assert_eq!(check_kind("a\nb"), Err(KindError::Forbidden('\n')));
        assert_eq!(check_kind("\u{a0}"), Err(KindError::Forbidden('\u{a0}')));
        assert_eq!(check_kind(&"k".repeat(MAX_KIND_CHARS)), Ok(()));
        assert_eq!(
            check_kind(&"é".repeat(MAX_KIND_CHARS + 1)),
            Err(KindError::TooLong(MAX_KIND_CHARS + 1))
        );
    }
}
