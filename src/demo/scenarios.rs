//! The demo's scenario data: a small fictional incident store, call traces and
//! deployment records, embedded from `assets/` so that the binary works from
//! any directory.

use std::sync::OnceLock;

use chrono::{DateTime, Utc};
use indexmap::IndexMap;
use serde::Deserialize;
use serde_json::Value;

const SCENARIOS_JSON: &str = include_str!("../../assets/scenarios.json");
const SERVICE_SCHEMA_JSON: &str = include_str!("../../assets/schemas/service.json");

/// Everything the simulated diagnosis can look up.
#[derive(Debug, Clone, Deserialize)]
pub struct Scenarios {
    /// The deploy window when neither the request nor the input gives one.
    pub default_window_minutes: u64,
    /// Call traces and deployment records per service, by service name.
    pub services: IndexMap<String, ServiceData>,
    /// The incident store; every incident is seeded by `rudder demo`.
    pub incidents: Vec<Incident>,
}

/// What the trace store and the deployment records hold about one service.
#[derive(Debug, Clone, Deserialize)]
pub struct ServiceData {
    /// The call traces the diagnosis can follow; empty for a service without tracing.
    pub traces: Vec<Trace>,
    /// Why there are no traces, for the error when `traces` is empty.
    #[serde(default)]
    pub no_traces_reason: Option<String>,
    /// Its deployment records, in any order.
    pub deploys: Vec<Deploy>,
}

/// One call trace, as cited in a conclusion.
#[derive(Debug, Clone, Deserialize)]
pub struct Trace {
    /// The trace id, cited in the conclusion.
    pub id: String,
    /// The slow or failing span, `caller -> callee`.
    pub span: String,
    /// The span's p99 latency during the incident.
    pub p99_ms: u64,
    /// What the trace shows, as a clause of the root cause.
    pub finding: String,
    /// The finding in a few words, for the summary.
    pub summary: String,
}

/// One deployment record, as cited in a conclusion.
#[derive(Debug, Clone, Deserialize)]
pub struct Deploy {
    /// The deploy id, cited in the conclusion.
    pub id: String,
    /// The service and version deployed, `checkout 2.14.0`.
    pub version: String,
    /// When it was deployed.
    pub at: DateTime<Utc>,
    /// What it changed, as a clause of the root cause.
    pub change: String,
    /// The change in a few words, for the summary.
    pub summary: String,
}

/// One incident of the incident store.
#[derive(Debug, Clone, Deserialize)]
pub struct Incident {
    /// `INC-1042`: what a task's `request.incident` names.
    pub id: String,
    /// A short title, used in the task's title.
    pub title: String,
    /// When the incident was opened; deploys are searched in the window before.
    pub opened_at: DateTime<Utc>,
    /// What was observed, cited in the conclusion.
    pub symptom: String,
    /// The service the reporter named; `None` makes the diagnosis ask a person.
    #[serde(default)]
    pub reported_service: Option<String>,
}

impl Scenarios {
    /// The embedded scenario data, parsed once.
    pub fn get() -> &'static Scenarios {
        static SCENARIOS: OnceLock<Scenarios> = OnceLock::new();
        SCENARIOS.get_or_init(|| {
            // The asset is compiled in and checked by the unit tests below, so
            // a parse failure is a build defect, not an input error.
            serde_json::from_str(SCENARIOS_JSON).expect("assets/scenarios.json is valid")
        })
    }

    /// The incident with this id, if the incident store has it.
    pub fn incident(&self, id: &str) -> Option<&Incident> {
        self.incidents.iter().find(|i| i.id == id)
    }

    /// The names of all services, in file order.
    pub fn service_names(&self) -> Vec<&str> {
        self.services.keys().map(String::as_str).collect()
    }
}

/// The JSON Schema the worker asks a person to fill in when a request names
/// no service: `service` (one of the demo's services) and an optional integer
/// `window_minutes`.
pub fn service_schema() -> Value {
    static SCHEMA: OnceLock<Value> = OnceLock::new();
    SCHEMA
        .get_or_init(|| {
            serde_json::from_str(SERVICE_SCHEMA_JSON).expect("assets/schemas/service.json is valid")
        })
        .clone()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_assets_parse_and_are_consistent() {
        let s = Scenarios::get();
        assert!(s.incidents.len() >= 4);
        for incident in &s.incidents {
            if let Some(service) = &incident.reported_service {
                assert!(s.services.contains_key(service), "{service}");
            }
        }
        for (name, data) in &s.services {
            assert!(
                !data.traces.is_empty() || data.no_traces_reason.is_some(),
                "{name} needs traces or a reason why it has none"
            );
        }
    }

    #[test]
    fn the_schema_lists_exactly_the_scenario_services() {
        let schema = service_schema();
        crate::schema::check_schema(&schema).expect("a valid JSON Schema");
        let listed: Vec<&str> = schema["properties"]["service"]["enum"]
            .as_array()
            .expect("an enum")
            .iter()
            .filter_map(Value::as_str)
            .collect();
        let mut services = Scenarios::get().service_names();
        services.sort_unstable();
        assert_eq!(listed, services);
        assert_eq!(schema["properties"]["window_minutes"]["type"], "integer");
        assert_eq!(schema["required"], serde_json::json!(["service"]));
    }
}
