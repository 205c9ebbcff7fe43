//! `list` on a terminal: the real binary in a pseudo-terminal, its table
//! fitted to the width the terminal (or `$COLUMNS`) gives.

mod common;

use std::path::Path;

use unicode_width::UnicodeWidthStr;

/// Every line `rudder list` printed on a terminal `cols` wide, with `env`.
fn list_on_a_terminal(store: &Path, cols: u16, env: &[(&str, &str)]) -> Vec<String> {
    let store = store.to_str().expect("a UTF-8 path");
    let (code, lines) = common::on_a_terminal(&["--store", store, "list"], cols, env);
    assert_eq!(code, 0, "rudder list: {lines:?}");
    lines
}

#[test]
fn list_fits_the_terminal_or_columns() {
    let dir = tempfile::tempdir().unwrap();
    let store = common::store_in(dir.path());
    let long = "checkout latency regression after the payments deploy in eu-west-1 and us-east-2";
    for n in 0..3 {
        common::create(
            &store,
            &["--title", &format!("{long} #{n}"), "--message", long],
        );
    }
    let widest = |lines: &[String]| lines.iter().map(|l| l.width()).max().unwrap_or(0);

    let narrow = list_on_a_terminal(&store, 60, &[]);
    assert_eq!(narrow.len(), 4, "a header and three rows: {narrow:#?}");
    assert!(widest(&narrow) <= 60, "{narrow:#?}");

    let wide = list_on_a_terminal(&store, 60, &[("COLUMNS", "100")]);
    assert_eq!(wide.len(), 4, "{wide:#?}");
    let w = widest(&wide);
    assert!(w > 60 && w <= 100, "$COLUMNS=100 wins: {w} {wide:#?}");

    let junk = list_on_a_terminal(&store, 60, &[("COLUMNS", "lots")]);
    assert!(
        widest(&junk) <= 60,
        "a $COLUMNS that is no number is ignored"
    );
}
