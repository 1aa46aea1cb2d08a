//! A node's history (API 1.78): the events a conductor records on a node. Every failure that
//! sets a node's `last_error` is one (Ironic's `node_history_record(error=True)` in
//! `ironic/conductor/utils.py`), recorded by the database layer in the same transaction as the
//! node's write, so a failure and its entry land together or not at all.
//!
//! Ironic also records a few informational events (adoption, console and power-sync notes,
//! step-flow milestones when configured); Ferrum records failures, and the power-state sync's
//! corrections and recoveries (`INFO`, event type `monitoring`).

use chrono::NaiveDateTime;
use diesel::prelude::*;
use serde::{Deserialize, Serialize};

use crate::states::ProvisionState;

/// One entry of a node's history, as stored.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Queryable, Selectable, Insertable)]
#[diesel(table_name = crate::schema::node_history)]
pub struct HistoryEntry {
    #[diesel(skip_insertion)]
    pub id: i32,
    pub uuid: String,
    pub node_id: i32,
    /// The conductor that recorded it.
    pub conductor: Option<String>,
    pub event: String,
    /// What was going on: `deploying`, `cleaning`, `takeover`, ... (Ironic's names).
    pub event_type: String,
    /// `ERROR` for a failure, `INFO` otherwise.
    pub severity: String,
    /// The user whose request led to it, when known (Ferrum has no authenticated users yet).
    pub user: Option<String>,
    pub created_at: NaiveDateTime,
    pub updated_at: Option<NaiveDateTime>,
    /// The project whose request led to it (API 1.113), when known: like `user`, none without
    /// authentication.
    pub project: Option<String>,
    /// The node's provision state and target when the event was recorded (API 1.115): for a
    /// failure, the state the failing work ran in, before the node moved to its failure state.
    pub state: Option<String>,
    pub target_provision_state: Option<String>,
    /// How long the node had been in `state` when the event was recorded (API 1.115), from its
    /// `provision_updated_at`; none when that is unknown.
    pub duration_seconds: Option<i32>,
}

impl HistoryEntry {
    /// A failure of node `node_id` that `conductor` records, the `last_error` it writes as its
    /// event, met in provision state `state` (its target the one the state table names). The
    /// duration is the database layer's to fill in ([`HistoryEntry::in_state_since`]), as only
    /// it reads the node in the failure's transaction.
    pub fn error(
        node_id: i32,
        conductor: &str,
        event_type: &str,
        event: &str,
        state: ProvisionState,
    ) -> HistoryEntry {
        HistoryEntry::new(node_id, conductor, event_type, "ERROR", event, state)
    }

    /// An event that is not a failure (a power state the sync corrected), as [`error`](Self::error)
    /// records one.
    pub fn info(
        node_id: i32,
        conductor: &str,
        event_type: &str,
        event: &str,
        state: ProvisionState,
    ) -> HistoryEntry {
        HistoryEntry::new(node_id, conductor, event_type, "INFO", event, state)
    }

    fn new(
        node_id: i32,
        conductor: &str,
        event_type: &str,
        severity: &str,
        event: &str,
        state: ProvisionState,
    ) -> HistoryEntry {
        HistoryEntry {
            id: 0,
            uuid: uuid::Uuid::new_v4().to_string(),
            node_id,
            conductor: Some(conductor.to_owned()),
            event: event.to_owned(),
            event_type: event_type.to_owned(),
            severity: severity.to_owned(),
            user: None,
            created_at: super::now(),
            updated_at: None,
            project: None,
            state: Some(state.api_name().to_owned()),
            target_provision_state: state.target().map(|t| t.api_name().to_owned()),
            duration_seconds: None,
        }
    }

    /// The entry, recording that the node had been in its state since `since` (its
    /// `provision_updated_at`; Ironic's `duration_seconds`).
    pub fn in_state_since(mut self, since: Option<NaiveDateTime>) -> HistoryEntry {
        self.duration_seconds = since
            .and_then(|since| i32::try_from((self.created_at - since).num_seconds().max(0)).ok());
        self
    }
}

/// The event type of a failure met in `state` (the state the failing work ran in), with the
/// names Ironic's error handlers record: `deploying` (`deploying_error_handler`), `cleaning`,
/// `introspection`, `rescue`, `verifying`, `unprovision` (a failed tear-down), `adoption`,
/// `servicing`. Work outside a provisioning operation (a power change, a vendor method) records
/// no event type in Ironic, stored as its `UNKNOWN`.
pub fn event_type(state: ProvisionState) -> &'static str {
    use ProvisionState as S;
    match state {
        S::Deploying | S::DeployWait | S::DeployHold | S::DeployFail => "deploying",
        S::Cleaning | S::CleanWait | S::CleanHold | S::CleanFail => "cleaning",
        S::Inspecting | S::InspectWait | S::InspectFail => "introspection",
        S::Rescuing | S::RescueWait | S::RescueFail | S::Unrescuing | S::UnrescueFail => "rescue",
        S::Verifying => "verifying",
        S::Deleting | S::Error => "unprovision",
        S::Adopting | S::AdoptFail => "adoption",
        S::Servicing | S::ServiceWait | S::ServiceHold | S::ServiceFail => "servicing",
        S::Enroll | S::Manageable | S::Available | S::Active | S::Rescue => "UNKNOWN",
    }
}

/// The event type of a failure recorded when a conductor takes over a dead one's node (Ironic's
/// `states.TAKEOVER`).
pub const TAKEOVER: &str = "takeover";
/// The event type of what the power-state sync records (Ironic's `states.MONITORING`).
pub const MONITORING: &str = "monitoring";
/// The event type of a failure recorded when a conductor starts and fails the nodes it held
/// (Ironic's `states.STARTFAIL`).
pub const STARTFAIL: &str = "startup failure";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failures_are_named_after_the_operation_they_ended() {
        assert_eq!(event_type(ProvisionState::Deploying), "deploying");
        assert_eq!(event_type(ProvisionState::DeployWait), "deploying");
        assert_eq!(event_type(ProvisionState::CleanWait), "cleaning");
        assert_eq!(event_type(ProvisionState::InspectWait), "introspection");
        assert_eq!(event_type(ProvisionState::Available), "UNKNOWN");
        let e = HistoryEntry::error(7, "c1", "deploying", "boom", ProvisionState::Deploying);
        assert_eq!(
            (e.severity.as_str(), e.node_id, e.event.as_str()),
            ("ERROR", 7, "boom")
        );
        assert_eq!(e.uuid.len(), 36);
        assert_eq!(
            (e.state.as_deref(), e.target_provision_state.as_deref()),
            (Some("deploying"), Some("active"))
        );
        let since = e.created_at - chrono::Duration::seconds(90);
        assert_eq!(e.in_state_since(Some(since)).duration_seconds, Some(90));
    }
}
