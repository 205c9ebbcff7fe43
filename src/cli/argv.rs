//! The command line as given, before clap reads it: `--json` may stand
//! before the subcommand, as `--store` and `--read-only` may (clap takes a
//! flag of a subcommand only after it), and tips for common slips.

use std::ffi::OsString;

/// The global flags that may come before the subcommand; the `bool` says
/// whether it takes a value as the next word.
const GLOBALS: [(&str, bool); 2] = [("--store", true), ("--read-only", false)];

/// `args` (program name first) with each `--json` before the subcommand
/// moved just after it: `rudder --json list` is `rudder list --json`.
/// Without a subcommand, or after `--`, nothing moves.
pub fn json_after_subcommand(args: Vec<OsString>) -> Vec<OsString> {
    let mut out = Vec::with_capacity(args.len());
    let mut moved = 0;
    let mut words = args.into_iter();
    out.extend(words.next());
    while let Some(word) = words.next() {
        let text = word.to_string_lossy();
        if text == "--json" {
            moved += 1;
            continue;
        }
        let takes_value = GLOBALS.iter().any(|(name, v)| *v && text == *name);
        let global = GLOBALS
            .iter()
            .any(|(name, _)| text == *name || text.starts_with(&format!("{name}=")));
        if text.starts_with('-') && !global || !text.starts_with('-') {
            // The subcommand (or something clap will refuse as it is).
            let is_subcommand = !text.starts_with('-');
            out.push(word);
            if is_subcommand {
                out.extend(std::iter::repeat_n(OsString::from("--json"), moved));
                moved = 0;
            }
            break;
        }
        out.push(word);
        if takes_value {
            out.extend(words.next());
        }
    }
    out.extend(std::iter::repeat_n(OsString::from("--json"), moved));
    out.extend(words);
    out
}

/// For `rudder input ID FIELD=VALUE` (no `--set`): the words that look
/// like a field meant for `--set`.
pub fn set_without_flag(args: &[OsString]) -> Vec<String> {
    let words: Vec<String> = args
        .iter()
        .skip(1)
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    let Some(at) = words.iter().position(|w| w == "input") else {
        return Vec::new();
    };
    let mut found = Vec::new();
    let mut positional = 0;
    let mut i = at + 1;
    while i < words.len() {
        let w = &words[i];
        if w == "--" {
            break;
        }
        if w.starts_with('-') {
            // Flags taking a value skip it.
            if ["--set", "--value", "--revision", "--store"].contains(&w.as_str()) {
                i += 1;
            }
        } else {
            positional += 1;
            if positional > 1 && w.contains('=') {
                found.push(w.clone());
            }
        }
        i += 1;
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    fn moved(args: &[&str]) -> Vec<String> {
        json_after_subcommand(args.iter().map(OsString::from).collect())
            .into_iter()
            .map(|a| a.into_string().unwrap())
            .collect()
    }

    #[test]
    fn json_before_the_subcommand_moves_after_it() {
        assert_eq!(moved(&["r", "--json", "list"]), ["r", "list", "--json"]);
        assert_eq!(
            moved(&["r", "--store", "--json", "--json", "get", "x"]),
            ["r", "--store", "--json", "get", "--json", "x"],
            "a --store value is not a flag"
        );
        assert_eq!(
            moved(&["r", "--read-only", "--json", "--store=a", "list", "--json"]),
            ["r", "--read-only", "--store=a", "list", "--json", "--json"]
        );
        assert_eq!(moved(&["r", "list", "--json"]), ["r", "list", "--json"]);
        assert_eq!(moved(&["r", "--json"]), ["r", "--json"]);
        assert_eq!(
            moved(&["r", "--bogus", "--json"]),
            ["r", "--bogus", "--json"]
        );
    }

    #[test]
    fn a_field_without_set_is_found() {
        let args = |a: &[&str]| a.iter().map(OsString::from).collect::<Vec<_>>();
        assert_eq!(
            set_without_flag(&args(&["r", "input", "abc", "service=x"])),
            ["service=x"]
        );
        assert!(set_without_flag(&args(&["r", "input", "abc", "--set", "a=b"])).is_empty());
        assert!(set_without_flag(&args(&["r", "get", "a=b"])).is_empty());
    }
}
