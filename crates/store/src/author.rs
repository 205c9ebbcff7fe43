//! Who this process is when nobody said: `USER@HOST`, the author a CLI,
//! TUI or Python program records when no name was given.

use crate::task::{Author, Face};

/// The variable that names the actor when the program was not told one.
pub const ACTOR_VAR: &str = "RUDDER_ACTOR";

/// `$RUDDER_ACTOR`, unless unset or empty (not checked: the caller says
/// where a bad name came from).
pub fn env_actor() -> Option<String> {
    std::env::var_os(ACTOR_VAR)
        .filter(|v| !v.is_empty())
        .map(|v| v.to_string_lossy().into_owned())
}

/// `USER@HOST` of this process (`unknown` for what cannot be told).
pub fn local_user() -> String {
    let user = ["USER", "LOGNAME"]
        .iter()
        .find_map(|v| std::env::var(v).ok().filter(|u| !u.is_empty()))
        .unwrap_or_else(|| "unknown".into());
    format!("{user}@{}", host_name())
}

/// [`local_user`] writing through `face` (control characters, which a
/// host or user name could hold, shown as `?`).
pub fn local_author(face: Face) -> Author {
    Author::lossy(&local_user(), face)
}

/// This machine's host name.
#[allow(unsafe_code)] // one libc call, its SAFETY below
fn host_name() -> String {
    let mut buf = [0u8; 256];
    // SAFETY: the buffer is valid for writes of its whole length, which is
    // the length passed; gethostname writes at most that many bytes.
    let rc = unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) };
    if rc != 0 {
        return "unknown".into();
    }
    let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    match String::from_utf8_lossy(&buf[..end]).into_owned() {
        h if h.is_empty() => "unknown".into(),
        h => h,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_local_user_is_user_at_a_host() {
        let me = local_user();
        let (user, host) = me.split_once('@').expect("USER@HOST");
        assert!(!user.is_empty() && !host.is_empty(), "{me}");
        assert_eq!(local_author(Face::Python).face(), &Face::Python);
    }
}
