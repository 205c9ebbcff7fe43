use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;

/// The five statuses of the MCP Tasks vocabulary, with their wire names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    Working,
    InputRequired,
    Completed,
    Failed,
    Cancelled,
}

impl Status {
    /// Every status, in the order the TUI's `1`–`5` keys use.
    pub const ALL: [Status; 5] = [
        Status::InputRequired,
        Status::Working,
        Status::Completed,
        Status::Failed,
        Status::Cancelled,
    ];

    /// Terminal tasks never change again.
    pub fn is_terminal(self) -> bool {
        matches!(self, Status::Completed | Status::Failed | Status::Cancelled)
    }

    /// The name used in the file and on the command line.
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Working => "working",
            Status::InputRequired => "input_required",
            Status::Completed => "completed",
            Status::Failed => "failed",
            Status::Cancelled => "cancelled",
        }
    }
}

impl fmt::Display for Status {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A status name that is not one of the five.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown status {0:?} (expected working, input_required, completed, failed or cancelled)")]
pub struct ParseStatusError(pub String);

impl FromStr for Status {
    type Err = ParseStatusError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Status::ALL
            .into_iter()
            .find(|st| st.as_str() == s)
            .ok_or_else(|| ParseStatusError(s.to_string()))
    }
}
