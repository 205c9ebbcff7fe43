//! Errors as the TUI's status line shows them: what happened and what to
//! do first, the path last, so that at 80 columns a cut takes the path,
//! never the reason (`cancel failed: No space left on device; free some
//! space, then retry (while trying to rename …) — /srv/tasks.json`).

use rudder_model::text::sanitize;
use rudder_store::StoreError;

/// `e` for the status line, sanitized: the header already names the store.
pub fn error_line(e: &StoreError) -> String {
    let text = match e {
        StoreError::Io {
            file,
            action,
            source,
            ..
        } => format!(
            "{}{} (while trying to {action}) — {}",
            without_os_error(&source.to_string()),
            what_to_do(source.kind()),
            file.display()
        ),
        _ => {
            let text = e.to_string();
            let moved = e.location().and_then(|loc| {
                let loc = loc.to_string();
                let rest = text.strip_prefix(&format!("{loc}: "))?;
                Some(format!("{rest} — {loc}"))
            });
            moved.unwrap_or(text)
        }
    };
    sanitize(&text).into_owned()
}

/// `No space left on device (os error 28)` without its number, which only
/// takes room.
fn without_os_error(text: &str) -> &str {
    match text.rfind(" (os error ") {
        Some(at) if text.ends_with(')') => &text[..at],
        _ => text,
    }
}

/// What a person can do about a failed file-system call of this kind.
fn what_to_do(kind: std::io::ErrorKind) -> &'static str {
    use std::io::ErrorKind::*;
    match kind {
        StorageFull | QuotaExceeded => "; free some space, then retry",
        PermissionDenied => "; check who may write there, then retry",
        ReadOnlyFilesystem => "; the file system is mounted read-only",
        _ => "",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rudder_store::Location;

    #[test]
    fn the_reason_and_what_to_do_come_before_the_path() {
        let e = StoreError::io(
            Location::file("/tmp/a/very/long/path/to/the/store/tasks.json"),
            "/tmp/a/very/long/path/to/the/store/tasks.json",
            "rename the temporary file over the store",
            std::io::Error::from_raw_os_error(libc::ENOSPC),
        );
        let line = error_line(&e);
        assert!(
            line.starts_with("No space left on device; free some space, then retry (while"),
            "{line}"
        );
        assert!(line.contains("free some space"), "{line}");
        assert!(
            line.ends_with("— /tmp/a/very/long/path/to/the/store/tasks.json"),
            "{line}"
        );
    }
}
