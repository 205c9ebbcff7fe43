//! Who the person at this command line is: the author recorded on every
//! change they make (`--as`, `$RUDDER_ACTOR`, the config file's `actor`,
//! else `USER@HOST`).
//!
//! On a local store the name is a declaration, not a proof: whoever may
//! write the store's file may write any name. `rudder mcp` with
//! authorization records an authenticated principal instead.

use crate::cli::CliError;
use crate::task::{Author, Face};

pub use crate::store::author::ACTOR_VAR;

/// The author of this process's writes through `face`: `--as NAME`, else
/// `$RUDDER_ACTOR` (unless empty), else the config file's `actor`, else
/// `USER@HOST`. A name that is not a valid author's (empty, over-long,
/// holding control characters) is a usage error naming where it came from.
pub fn resolve(flag: Option<&str>, face: Face) -> Result<Author, CliError> {
    if let Some(name) = flag {
        return Author::new(name, face).map_err(|e| CliError::usage("--as", format!("--as: {e}")));
    }
    if let Some(name) = crate::store::author::env_actor() {
        return Author::new(name, face)
            .map_err(|e| CliError::environment(ACTOR_VAR, format!("{ACTOR_VAR}: {e}")));
    }
    if let Some(name) = rudder_tui::config::load().actor {
        return Ok(Author::lossy(&name, face));
    }
    Ok(crate::store::author::local_author(face))
}
