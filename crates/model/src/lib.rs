//! The task model of rudder: the task record, its state machine, input
//! validation by JSON Schema, and the small text and number formats people
//! give (durations, JSON). No I/O. See `docs/architecture.md`.

pub mod duration;
pub mod json;
pub mod limits;
pub mod schema;
pub mod task;
pub mod text;
