//! The names rudder gives the files beside a store: its lock file and the
//! temp files of an atomic write (docs/durability.md).

use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::OsStrExt;

/// The file-system name limit (`NAME_MAX` on Linux and the BSDs).
const NAME_MAX: usize = 255;
/// What a temp name adds to the store's name: `.` before it, and
/// `.rudder-tmp.<pid>.<32 hex>` after it (a pid has at most 10 digits).
const TEMP_OVERHEAD: usize = 1 + ".rudder-tmp.".len() + 10 + 1 + 32;

/// The temp file name for store `name`: `.<name>.rudder-tmp.<pid>.<random>`,
/// a name no user would choose and the only kind the sweep removes. A store
/// name too long to fit is shortened, with a hash of the whole name so that
/// two long names that share a beginning never match each other's temps.
pub fn temp_name(name: &OsStr, pid: u32, random: &str) -> OsString {
    let mut out = OsString::from(".");
    out.push(OsStr::from_bytes(&temp_stem(name)));
    out.push(format!(".rudder-tmp.{pid}.{random}"));
    out
}

/// The lock file's name for store `name`: `<name>.lock`, or, for a name too
/// long to take the suffix, the shortened stem of [`temp_name`] with it.
pub fn lock_name(name: &OsStr) -> OsString {
    let mut out = if name.len() + ".lock".len() <= NAME_MAX {
        name.to_os_string()
    } else {
        OsStr::from_bytes(&temp_stem(name)).to_os_string()
    };
    out.push(".lock");
    out
}

/// The name of the delivery record beside store `name` (`rudder
/// notify`'s, docs/notify.md): `<name>.deliveries`, or, for a name too
/// long to take the suffix, the shortened stem of [`temp_name`] with it.
pub fn deliveries_name(name: &OsStr) -> OsString {
    let mut out = if name.len() + ".deliveries".len() <= NAME_MAX {
        name.to_os_string()
    } else {
        OsStr::from_bytes(&temp_stem(name)).to_os_string()
    };
    out.push(".deliveries");
    out
}

/// The writer's pid when `candidate` is a temp name [`temp_name`] gives
/// for store `name`.
pub fn temp_pid(name: &OsStr, candidate: &OsStr) -> Option<u32> {
    let mut prefix = b".".to_vec();
    prefix.extend_from_slice(&temp_stem(name));
    prefix.extend_from_slice(b".rudder-tmp.");
    let rest = candidate.as_bytes().strip_prefix(prefix.as_slice())?;
    let (pid, random) = std::str::from_utf8(rest).ok()?.split_once('.')?;
    let exact = (1..=10).contains(&pid.len())
        && pid.bytes().all(|b| b.is_ascii_digit())
        && random.len() == 32
        && random
            .bytes()
            .all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'));
    exact.then(|| pid.parse().ok()).flatten()
}

/// The store name as it stands in its temp names.
fn temp_stem(name: &OsStr) -> Vec<u8> {
    let bytes = name.as_bytes();
    let room = NAME_MAX - TEMP_OVERHEAD;
    if bytes.len() <= room {
        return bytes.to_vec();
    }
    // FNV-1a: stable across builds and versions, unlike std's hasher.
    let hash = bytes.iter().fold(0xcbf2_9ce4_8422_2325_u64, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    });
    let mut stem = bytes[..room - 17].to_vec();
    stem.extend_from_slice(format!("~{hash:016x}").as_bytes());
    stem
}

#[cfg(test)]
mod tests {
    use super::*;

    const RANDOM: &str = "0123456789abcdef0123456789abcdef";

    #[test]
    fn temp_names_fit_the_name_limit_and_only_they_match() {
        for len in [1, 8, 198, 199, 200, 250, 255] {
            let name = OsString::from("n".repeat(len));
            let temp = temp_name(&name, u32::MAX, RANDOM);
            assert!(temp.len() <= NAME_MAX, "{len}: {}", temp.len());
            assert_eq!(temp_pid(&name, &temp), Some(u32::MAX), "{len}");
            assert!(lock_name(&name).len() <= NAME_MAX, "{len}");
        }
        let name = OsStr::new("tasks.json");
        assert_eq!(
            temp_name(name, 42, RANDOM),
            OsStr::new(".tasks.json.rudder-tmp.42.0123456789abcdef0123456789abcdef")
        );
        assert_eq!(lock_name(name), OsStr::new("tasks.json.lock"));
        for other in [
            "tasks.json.tmp.backup",
            "tasks.json.tmp.42.0123456789abcdef",
            ".tasks.json.rudder-tmp.42.0123456789abcdef0123456789abcde",
            ".tasks.json.rudder-tmp.42.0123456789ABCDEF0123456789abcdef",
            ".tasks.json.rudder-tmp..0123456789abcdef0123456789abcdef",
            ".tasks.json.rudder-tmp.4x.0123456789abcdef0123456789abcdef",
            ".tasks.json.rudder-tmp.42.0123456789abcdef0123456789abcdef.x",
            ".tasks.jsonx.rudder-tmp.42.0123456789abcdef0123456789abcdef",
        ] {
            assert_eq!(temp_pid(name, OsStr::new(other)), None, "{other}");
        }
    }

    #[test]
    fn long_names_that_share_a_beginning_do_not_share_temps() {
        let a = OsString::from(format!("{}a", "n".repeat(240)));
        let b = OsString::from(format!("{}b", "n".repeat(240)));
        let temp = temp_name(&a, 7, RANDOM);
        assert_eq!(temp_pid(&a, &temp), Some(7));
        assert_eq!(temp_pid(&b, &temp), None);
        assert_ne!(lock_name(&a), lock_name(&b));
    }
}
