//! The simulated cross-system root-cause diagnosis: its steps, what each step
//! finds in the scenario data, and the conclusion with citations.
//!
//! Everything here is a pure function of the task (its `request`, its
//! `input_value`) and the embedded scenario data, so any worker can pick a
//! task up at the step recorded in its `progress` and reach the same
//! conclusion as the worker that started it.

use std::time::Duration;

use chrono::{DateTime, Utc};
use serde_json::{Value, json};

use super::scenarios::{Deploy, Incident, Scenarios, ServiceData, Trace};
use crate::task::Task;

/// One step of a diagnosis.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Step {
    /// What the step does, as shown in `status_message`.
    pub doing: &'static str,
    /// How long it takes at speed 1.
    pub seconds: f64,
}

/// The steps, in order. A task's `progress.current` is the number of steps
/// done, so it is also the index of the step to run next.
pub const STEPS: [Step; 4] = [
    Step {
        doing: "querying the incident store",
        seconds: 8.0,
    },
    Step {
        doing: "following call traces",
        seconds: 20.0,
    },
    Step {
        doing: "reading deployment records",
        seconds: 15.0,
    },
    Step {
        doing: "writing the conclusion",
        seconds: 12.0,
    },
];

/// The number of steps, as `progress.total`.
pub const TOTAL_STEPS: u64 = STEPS.len() as u64;

/// The step that needs to know the service (following its call traces).
const TRACES: usize = 1;
/// The step after which the deploy is known.
const DEPLOYS: usize = 2;

/// The longest deploy window a request may ask for: a week.
pub const MAX_WINDOW_MINUTES: u64 = 7 * 24 * 60;

/// How long `step` takes at `speed`.
pub fn step_duration(step: usize, speed: f64) -> Duration {
    Duration::from_secs_f64(STEPS[step].seconds / speed)
}

/// What a diagnosis works from, read from the task.
#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    /// `request.incident`.
    pub incident: Option<String>,
    /// `input_value.service` (a person's latest answer), else `request.service`.
    pub service: Option<String>,
    /// `input_value.window_minutes`, else `request.window_minutes`, else the default.
    pub window_minutes: u64,
}

impl Plan {
    /// Read the plan from the task as stored.
    pub fn of(task: &Task) -> Plan {
        let field = |v: &Option<Value>, name: &str| v.as_ref().and_then(|v| v.get(name)).cloned();
        // A person's latest answer, else the request.
        let given =
            |name: &str| field(&task.input_value, name).or_else(|| field(&task.request, name));
        let window_minutes = given("window_minutes")
            .and_then(|v| v.as_u64())
            .unwrap_or(Scenarios::get().default_window_minutes)
            // A request is not validated by any schema: keep whatever it says
            // within a week, where date arithmetic cannot overflow.
            .clamp(1, MAX_WINDOW_MINUTES);
        Plan {
            incident: field(&task.request, "incident").and_then(|v| v.as_str().map(str::to_string)),
            service: given("service").and_then(|v| v.as_str().map(str::to_string)),
            window_minutes,
        }
    }

    /// A label for messages: the incident id, else "the task".
    pub fn label(&self) -> &str {
        self.incident.as_deref().unwrap_or("this task")
    }
}

/// Why a diagnosis cannot go on by itself.
#[derive(Debug, Clone, PartialEq)]
pub enum Stop {
    /// Ask a person for the service (input_required with [`super::scenarios::service_schema`]).
    AskForService(String),
    /// End the task `failed` with this message.
    Fail(String),
}

/// Checks before `step` starts: following traces needs a known service.
pub fn before_step(step: usize, plan: &Plan) -> Result<(), Stop> {
    if step < TRACES {
        return Ok(());
    }
    let scenarios = Scenarios::get();
    match &plan.service {
        None => {
            let what = match plan
                .incident
                .as_deref()
                .and_then(|id| scenarios.incident(id))
            {
                Some(i) => format!("{} ({})", i.id, i.title),
                None => plan.label().to_string(),
            };
            // The question first: the table shows the message beside the
            // title, and at 80 columns only its beginning fits.
            Err(Stop::AskForService(format!(
                "Which service should the diagnosis follow? {what} names none."
            )))
        }
        Some(s) if !scenarios.services.contains_key(s) => Err(Stop::AskForService(format!(
            "Which service should the diagnosis follow? The trace store knows no service {s:?}."
        ))),
        Some(_) => Ok(()),
    }
}

/// Checks when `step` has run: an unknown incident or a service without
/// traces ends the diagnosis with a clear error.
pub fn after_step(step: usize, plan: &Plan) -> Result<(), Stop> {
    let found = Findings::of(plan);
    match step {
        0 => found.incident().map(|_| ()),
        TRACES => found.trace().map(|_| ()),
        _ => Ok(()),
    }
}

/// The `status_message` while `step` is `fraction` (0..=1) done.
pub fn step_message(step: usize, plan: &Plan, fraction: f64) -> String {
    let doing = STEPS[step].doing;
    let subject = match step {
        0 => format!(" for {}", plan.label()),
        TRACES | DEPLOYS => match &plan.service {
            Some(s) => format!(" of {s}"),
            None => String::new(),
        },
        _ => format!(" for {}", plan.label()),
    };
    let percent = (fraction.clamp(0.0, 1.0) * 100.0).round();
    format!(
        "step {}/{TOTAL_STEPS}: {doing}{subject} ({percent}%)",
        step + 1
    )
}

/// The `status_message` once `step` is done.
pub fn step_done_message(step: usize, plan: &Plan) -> String {
    let found = Findings::of(plan);
    let text = match step {
        0 => match found.incident() {
            Ok(i) => format!("read {}: {}", i.id, i.symptom),
            Err(_) => format!("read {}", plan.label()),
        },
        TRACES => match found.trace() {
            Ok(t) => format!("followed trace {}: {}", t.id, t.summary),
            Err(_) => "followed call traces".into(),
        },
        DEPLOYS => match found.deploy() {
            Some(d) => format!("found {} ({}) before the incident", d.id, d.version),
            None => format!("no deploy in the {} minutes before", plan.window_minutes),
        },
        _ => "conclusion written".into(),
    };
    format!("step {}/{TOTAL_STEPS} done: {text}", step + 1)
}

/// The conclusion: summary, root cause and citations of the incident, the
/// trace and (if one falls in the window) the deploy. `worker` and
/// `resumed_after_step` say who finished the diagnosis and how many steps
/// were already done when it took the task.
pub fn conclusion(plan: &Plan, worker: &str, resumed_after_step: u64) -> Result<Value, Stop> {
    let found = Findings::of(plan);
    let incident = found.incident()?;
    let trace = found.trace()?;
    let service = found.service_name();
    let deploy = found.deploy();
    let mut citations = vec![
        json!({
            "kind": "incident",
            "id": incident.id,
            "source": "incident store",
            "detail": format!("opened {}: {}", clock(incident.opened_at), incident.symptom),
        }),
        json!({
            "kind": "trace",
            "id": trace.id,
            "source": "call traces",
            "detail": format!("{} (p99 {} ms)", trace.span, trace.p99_ms),
        }),
    ];
    let (summary, root_cause) = match deploy {
        Some(d) => {
            citations.push(json!({
                "kind": "deploy",
                "id": d.id,
                "source": "deployment records",
                "detail": format!("{} at {}: {}", d.version, clock(d.at), d.change),
            }));
            let before = (incident.opened_at - d.at).num_minutes();
            (
                format!(
                    "{} ({}): caused by the {} deploy, {}",
                    incident.id, incident.title, d.version, d.summary
                ),
                format!(
                    "{} ({}), deployed {before} minutes before {} was opened, {}. Trace {} shows {}.",
                    d.version, d.id, incident.id, d.change, trace.id, trace.finding
                ),
            )
        }
        None => (
            format!(
                "{} ({}): {} (no {service} deploy in the {} minutes before)",
                incident.id, incident.title, trace.summary, plan.window_minutes
            ),
            format!(
                "No deploy of {service} in the {} minutes before {} was opened, so the cause is not a release. Trace {} shows {}.",
                plan.window_minutes, incident.id, trace.id, trace.finding
            ),
        ),
    };
    Ok(json!({
        "incident": incident.id,
        "service": service,
        "window_minutes": plan.window_minutes,
        "summary": summary,
        "root_cause": root_cause,
        "citations": citations,
        "worker": { "name": worker, "resumed_after_step": resumed_after_step },
    }))
}

/// A time as the incident log shows it.
fn clock(at: DateTime<Utc>) -> String {
    at.format("%Y-%m-%d %H:%M UTC").to_string()
}

/// What the scenario data holds for a plan.
struct Findings<'a> {
    plan: &'a Plan,
    scenarios: &'static Scenarios,
}

impl<'a> Findings<'a> {
    fn of(plan: &'a Plan) -> Self {
        Findings {
            plan,
            scenarios: Scenarios::get(),
        }
    }

    fn incident(&self) -> Result<&'static Incident, Stop> {
        let known = || {
            self.scenarios
                .incidents
                .iter()
                .map(|i| i.id.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        };
        let Some(id) = &self.plan.incident else {
            return Err(Stop::Fail(format!(
                "the request names no incident: a diagnosis needs {{\"incident\": \"INC-…\"}} (the incident store has {})",
                known()
            )));
        };
        self.scenarios.incident(id).ok_or_else(|| {
            Stop::Fail(format!(
                "incident {id} is not in the incident store (it has {})",
                known()
            ))
        })
    }

    fn service_name(&self) -> &str {
        self.plan.service.as_deref().unwrap_or("?")
    }

    fn service(&self) -> Result<&'static ServiceData, Stop> {
        before_step(TRACES, self.plan)?;
        self.scenarios
            .services
            .get(self.service_name())
            .ok_or_else(|| Stop::Fail("unknown service".into()))
    }

    /// The trace the diagnosis follows: chosen by the incident id, so the same
    /// incident always cites the same trace.
    fn trace(&self) -> Result<&'static Trace, Stop> {
        let incident = self.incident()?;
        let data = self.service()?;
        if data.traces.is_empty() {
            let start = self.window_start(incident);
            return Err(Stop::Fail(format!(
                "no call traces of service {} between {} and {} for {}: {}",
                self.service_name(),
                clock(start),
                clock(incident.opened_at),
                incident.id,
                data.no_traces_reason
                    .as_deref()
                    .unwrap_or("the trace store holds none, so there is nothing to follow or cite")
            )));
        }
        let index = fnv1a(incident.id.as_bytes()) % data.traces.len() as u64;
        Ok(&data.traces[index as usize])
    }

    /// When the window before the incident opens.
    fn window_start(&self, incident: &Incident) -> DateTime<Utc> {
        incident.opened_at - chrono::Duration::minutes(self.plan.window_minutes as i64)
    }

    /// The latest deploy of the service within the window before the incident.
    fn deploy(&self) -> Option<&'static Deploy> {
        let incident = self.incident().ok()?;
        let data = self.service().ok()?;
        let from = self.window_start(incident);
        data.deploys
            .iter()
            .filter(|d| d.at <= incident.opened_at && d.at >= from)
            .max_by_key(|d| d.at)
    }
}

/// FNV-1a: a stable hash (std's hasher may change between releases, and the
/// choice of trace must not).
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::task::Status;

    fn task(request: Value, input: Option<Value>) -> Task {
        let mut t = Task::new("t", Status::Working);
        t.request = Some(request);
        t.input_value = input;
        t
    }

    #[test]
    fn a_full_diagnosis_cites_incident_trace_and_deploy() {
        let plan = Plan::of(&task(
            json!({"incident": "INC-1042", "service": "checkout"}),
            None,
        ));
        for step in 0..STEPS.len() {
            assert_eq!(before_step(step, &plan), Ok(()));
            assert_eq!(after_step(step, &plan), Ok(()));
        }
        let result = conclusion(&plan, "w1", 0).expect("a conclusion");
        let kinds: Vec<&str> = result["citations"]
            .as_array()
            .expect("citations")
            .iter()
            .filter_map(|c| c["kind"].as_str())
            .collect();
        assert_eq!(kinds, ["incident", "trace", "deploy"]);
        assert_eq!(result["citations"][2]["id"], "deploy-8812");
        assert!(
            result["root_cause"]
                .as_str()
                .is_some_and(|r| r.contains("21 minutes before"))
        );
        // Deterministic: the same plan gives the same conclusion.
        assert_eq!(conclusion(&plan, "w1", 0), Ok(result));
    }

    #[test]
    fn a_missing_service_is_asked_for_after_the_incident_is_read() {
        let plan = Plan::of(&task(json!({"incident": "INC-1043"}), None));
        assert_eq!(before_step(0, &plan), Ok(()));
        assert_eq!(after_step(0, &plan), Ok(()));
        assert!(
            matches!(before_step(1, &plan), Err(Stop::AskForService(m)) if m.contains("INC-1043"))
        );
        let answered = Plan::of(&task(
            json!({"incident": "INC-1043"}),
            Some(json!({"service": "payments", "window_minutes": 10})),
        ));
        assert_eq!(answered.service.as_deref(), Some("payments"));
        assert_eq!(answered.window_minutes, 10);
        // The payments deploy was 18 minutes before: outside a 10-minute window.
        let result = conclusion(&answered, "w", 1).expect("a conclusion");
        assert_eq!(result["citations"].as_array().map(Vec::len), Some(2));
        let default_window = Plan::of(&task(
            json!({"incident": "INC-1043"}),
            Some(json!({"service": "payments"})),
        ));
        let result = conclusion(&default_window, "w", 1).expect("a conclusion");
        assert_eq!(result["citations"][2]["id"], "deploy-8820");
    }

    #[test]
    fn an_unknown_service_is_asked_for_again() {
        let plan = Plan::of(&task(
            json!({"incident": "INC-1042", "service": "nope"}),
            None,
        ));
        assert!(matches!(before_step(1, &plan), Err(Stop::AskForService(m)) if m.contains("nope")));
    }

    #[test]
    fn a_service_without_traces_fails_clearly() {
        let plan = Plan::of(&task(
            json!({"incident": "INC-1044", "service": "notifications"}),
            None,
        ));
        assert_eq!(after_step(0, &plan), Ok(()));
        match after_step(1, &plan) {
            Err(Stop::Fail(m)) => {
                assert!(m.contains("no call traces of service notifications"), "{m}");
                assert!(m.contains("tracing is not enabled"), "{m}");
            }
            other => panic!("expected a failure, got {other:?}"),
        }
    }

    #[test]
    fn unknown_or_missing_incidents_fail_after_the_first_step() {
        let unknown = Plan::of(&task(json!({"incident": "INC-9"}), None));
        assert!(
            matches!(after_step(0, &unknown), Err(Stop::Fail(m)) if m.contains("INC-9 is not in"))
        );
        let none = Plan::of(&task(json!("hello"), None));
        assert!(
            matches!(after_step(0, &none), Err(Stop::Fail(m)) if m.contains("names no incident"))
        );
    }

    #[test]
    fn no_deploy_in_the_window_concludes_without_a_deploy_citation() {
        let plan = Plan::of(&task(
            json!({"incident": "INC-1046", "service": "search"}),
            None,
        ));
        let result = conclusion(&plan, "w", 0).expect("a conclusion");
        assert_eq!(result["citations"].as_array().map(Vec::len), Some(2));
        assert!(
            result["root_cause"]
                .as_str()
                .is_some_and(|r| r.starts_with("No deploy of search"))
        );
    }

    #[test]
    fn an_absurd_window_is_clamped() {
        let plan = Plan::of(&task(
            json!({"incident": "INC-1046", "service": "search", "window_minutes": u64::MAX}),
            None,
        ));
        assert_eq!(plan.window_minutes, MAX_WINDOW_MINUTES);
        // search 4.2.0 was deployed two days before INC-1046: inside a week.
        let result = conclusion(&plan, "w", 0).expect("a conclusion");
        assert_eq!(result["citations"][2]["id"], "deploy-8790");
    }

    #[test]
    fn messages_name_the_step() {
        let plan = Plan::of(&task(
            json!({"incident": "INC-1042", "service": "checkout"}),
            None,
        ));
        assert_eq!(
            step_message(1, &plan, 0.5),
            "step 2/4: following call traces of checkout (50%)"
        );
        assert!(step_done_message(2, &plan).contains("deploy-8812"));
    }
}
