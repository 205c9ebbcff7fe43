//! The delivery record of `rudder notify` (docs/notify.md): what a notifier
//! of a given name delivered, kept in the store beside the tasks (never in
//! them: a record in a task would bump its revision), with a claim (holder
//! and lease) so that two notifiers of one name deliver each event once
//! between them.
//!
//! Backends store one [`Delivery`] per (notifier name, [`EventKey`]) and
//! offer one read-modify-write of it under exclusive access
//! ([`crate::Backend::delivery`]); the policy (who may claim, when a claim
//! lapses) is here, once: [`claim`] and [`finish`].

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

/// What a notifier tells about a task: one event per key.
///
/// `round` tells two events of one task and kind apart: for
/// `input_required` and `failed`, the index in the task's history of the
/// entry that entered the status (a task that asks a second question is a
/// new round); for `stalled`, the time its lapsed lease expired, in
/// milliseconds since the epoch (a task that stalls again after its
/// worker came back is a new round).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct EventKey {
    pub task_id: String,
    /// `input_required`, `failed` or `stalled`.
    pub event: String,
    pub round: i64,
}

/// The record of one event for one notifier name.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Delivery {
    /// Who claimed it last (a notifier's holder id).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub holder: Option<String>,
    /// Until when that claim holds; another notifier of the name may take
    /// the event over after it (the holder died mid-delivery).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lease_expires_at: Option<DateTime<Utc>>,
    /// When it was delivered; set, the event is never delivered again.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delivered_at: Option<DateTime<Utc>>,
    /// How many claims were made on it (a delivery taken over counts each).
    #[serde(default)]
    pub attempts: u32,
}

/// What a claim found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Claimed {
    /// The claim is ours until the lease given: deliver, then [`finish`].
    Won { attempts: u32 },
    /// Delivered already (by us before a restart, or by another notifier
    /// of the name): nothing to do.
    Delivered,
    /// Another notifier of the name holds a live claim until `until`: if
    /// it dies, the event is ours to take after that.
    Held {
        holder: String,
        until: DateTime<Utc>,
    },
}

/// Claim the event for `holder` until `until`, given its record as stored:
/// the answer, and the record to store (`None`: store nothing).
pub fn claim(
    record: Option<&Delivery>,
    holder: &str,
    now: DateTime<Utc>,
    until: DateTime<Utc>,
) -> (Claimed, Option<Delivery>) {
    match record {
        Some(d) if d.delivered_at.is_some() => (Claimed::Delivered, None),
        Some(Delivery {
            holder: Some(h),
            lease_expires_at: Some(t),
            ..
        }) if h != holder && *t > now => (
            Claimed::Held {
                holder: h.clone(),
                until: *t,
            },
            None,
        ),
        _ => {
            let attempts = record.map_or(0, |d| d.attempts).saturating_add(1);
            (
                Claimed::Won { attempts },
                Some(Delivery {
                    holder: Some(holder.to_string()),
                    lease_expires_at: Some(until),
                    delivered_at: None,
                    attempts,
                }),
            )
        }
    }
}

/// Record the event delivered by `holder` at `now`: the record to store
/// (`None` when it says so already). A delivery is recorded even when the
/// holder's claim lapsed meanwhile: it happened, and whoever took the
/// event over then delivers it a second time at most (at least once).
pub fn finish(record: Option<&Delivery>, holder: &str, now: DateTime<Utc>) -> Option<Delivery> {
    if record.is_some_and(|d| d.delivered_at.is_some()) {
        return None;
    }
    Some(Delivery {
        holder: Some(holder.to_string()),
        lease_expires_at: None,
        delivered_at: Some(now),
        attempts: record.map_or(1, |d| d.attempts.max(1)),
    })
}

/// Give up a claim (the notifier stops before delivering): the record to
/// store, `None` when `holder` does not hold it.
pub fn release(record: Option<&Delivery>, holder: &str) -> Option<Delivery> {
    match record {
        Some(d) if d.delivered_at.is_none() && d.holder.as_deref() == Some(holder) => {
            Some(Delivery {
                lease_expires_at: None,
                holder: None,
                ..d.clone()
            })
        }
        _ => None,
    }
}

/// What a read-modify-write of one record is handed: the record as stored,
/// and it returns what to store instead (`None`: nothing).
pub type Update<'a> = dyn FnMut(Option<&Delivery>) -> Option<Delivery> + 'a;

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::Duration;

    #[test]
    fn one_holder_at_a_time_until_the_lease_lapses_and_never_after_delivery() {
        let t0 = Utc::now();
        let until = t0 + Duration::seconds(30);
        let (a, rec) = claim(None, "a", t0, until);
        assert_eq!(a, Claimed::Won { attempts: 1 });
        let rec = rec.unwrap();
        // b is refused while a's claim holds ...
        let (b, none) = claim(Some(&rec), "b", t0, until);
        assert!(matches!(b, Claimed::Held { ref holder, .. } if holder == "a"));
        assert!(none.is_none());
        // ... and takes it over once it lapsed (a died mid-delivery).
        let later = until + Duration::seconds(1);
        let (b, rec2) = claim(Some(&rec), "b", later, later + Duration::seconds(30));
        assert_eq!(b, Claimed::Won { attempts: 2 });
        let done = finish(rec2.as_ref(), "b", later).unwrap();
        assert!(done.delivered_at.is_some());
        assert_eq!(claim(Some(&done), "a", later, until).0, Claimed::Delivered);
        assert_eq!(claim(Some(&done), "b", later, until).0, Claimed::Delivered);
        assert!(finish(Some(&done), "a", later).is_none());
        // A release lets the next claim in at once.
        let released = release(Some(&rec), "a").unwrap();
        assert_eq!(
            claim(Some(&released), "b", t0, until).0,
            Claimed::Won { attempts: 2 }
        );
        assert!(release(Some(&rec), "b").is_none());
    }
}
