//! The provisioning state machine of a node, kept as two tables.
//!
//! This module owns the provision states, the events that move a node between
//! them, the [`TRANSITIONS`] table (one row per edge of Ironic's machine) and
//! the [`STATES`] table of per-state facts that other layers ask about (one row
//! per state): the API string, whether a state is stable, which target it
//! carries, whether a node in it may be updated, deleted, protected, have its
//! interfaces or power changed, or be failed on recovery, and what an `abort`
//! there stops.
//!
//! It must not know about the database, RPC or HTTP. It answers "may this event
//! happen here, and where does it lead"; writing the new state, holding the node
//! lock, choosing status codes and rendering states for old API versions belong
//! to the callers.
//!
//! The per-state accessors read only [`STATES`]. One exhaustive `match`
//! (`ProvisionState::row`) gives each state its row, and wildcard arms are
//! denied, so adding a state fails to compile until it has a row; every row
//! decides every fact, and a compile-time check keeps row `i` the state whose
//! row is `i`.

#![deny(clippy::wildcard_enum_match_arm)]

use std::fmt;
use std::str::FromStr;

use self::Event as E;
use self::ProvisionState as S;

/// A provision state of a node, as stored in `nodes.provision_state`.
///
/// Only real states of the machine are listed. API words such as `deleted`,
/// `rebuild`, `deploy`, `undeploy` and `service` are verbs that are never
/// stored, so they are [`Event`]s (see `node::Verb::event`), not states.
#[derive(
    Debug,
    Clone,
    Copy,
    Default,
    PartialEq,
    Eq,
    Hash,
    diesel::expression::AsExpression,
    diesel::deserialize::FromSqlRow,
)]
#[diesel(sql_type = diesel::sql_types::Text)]
pub enum ProvisionState {
    /// `enroll`: the initial state; the node is known but not yet verified.
    #[default]
    Enroll,
    /// `verifying`: the power interface is being checked after `manage`.
    Verifying,
    /// `manageable`: verified and under operator control.
    Manageable,
    /// `available`: cleaned and ready to be deployed.
    Available,
    /// `active`: deployed with an instance.
    Active,
    /// `wait call-back`: deploying, waiting for the ramdisk agent.
    DeployWait,
    /// `deploying`: a deploy is running on the conductor.
    Deploying,
    /// `deploy failed`: the deploy failed; the node can be redeployed or torn down.
    DeployFail,
    /// `deploy hold`: a deploy step asked to pause until `unhold`.
    DeployHold,
    /// `deleting`: the instance is being torn down.
    Deleting,
    /// `cleaning`: a clean is running on the conductor.
    Cleaning,
    /// `clean wait`: cleaning, waiting for the ramdisk agent.
    CleanWait,
    /// `clean failed`: cleaning failed.
    CleanFail,
    /// `clean hold`: a clean step asked to pause until `unhold`.
    CleanHold,
    /// `error`: the tear-down failed.
    Error,
    /// `inspecting`: hardware inspection is running on the conductor.
    Inspecting,
    /// `inspect failed`: inspection failed.
    InspectFail,
    /// `inspect wait`: inspecting, waiting for an out-of-band or agent result.
    InspectWait,
    /// `adopting`: an already running instance is being taken over.
    Adopting,
    /// `adopt failed`: adoption failed.
    AdoptFail,
    /// `rescue`: booted into the rescue ramdisk.
    Rescue,
    /// `rescue failed`: rescue failed.
    RescueFail,
    /// `rescue wait`: rescuing, waiting for the rescue ramdisk.
    RescueWait,
    /// `rescuing`: a rescue is running on the conductor.
    Rescuing,
    /// `unrescue failed`: leaving rescue failed.
    UnrescueFail,
    /// `unrescuing`: leaving rescue, back to the instance.
    Unrescuing,
    /// `servicing`: service steps run on a deployed node.
    Servicing,
    /// `service wait`: servicing, waiting for the ramdisk agent.
    ServiceWait,
    /// `service failed`: servicing failed.
    ServiceFail,
    /// `service hold`: a service step asked to pause until `unhold`.
    ServiceHold,
}

/// An event fed to the machine.
///
/// Most events are requested through the API (see `node::Verb::event`).
/// `done`, `fail`, `wait`, `resume` and `hold` are only raised by the conductor
/// itself, as are `clean` from `deleting` and `manage` from `cleaning`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Event {
    /// `manage`: verify an enrolled node, or take a node back under operator control.
    Manage,
    /// `provide`: make a manageable node available (runs automated cleaning).
    Provide,
    /// `clean`: manual cleaning, or the cleaning that follows a tear-down.
    Clean,
    /// `inspect`: inspect the hardware.
    Inspect,
    /// `adopt`: take over a node that already runs an instance.
    Adopt,
    /// `deploy`: deploy an instance (API verbs `active` and `deploy`).
    Deploy,
    /// `rebuild`: redeploy the instance.
    Rebuild,
    /// `delete`: tear the instance down (API verbs `deleted` and `undeploy`).
    Delete,
    /// `done`: the running operation finished.
    Done,
    /// `fail`: the running operation failed.
    Fail,
    /// `wait`: the operation now waits for the ramdisk or another callback.
    Wait,
    /// `resume`: the awaited callback arrived; continue on the conductor.
    Resume,
    /// `hold`: a step asked to pause.
    Hold,
    /// `unhold`: continue after a hold.
    Unhold,
    /// `abort`: stop a waiting or held operation.
    Abort,
    /// `rescue`: boot the rescue ramdisk.
    Rescue,
    /// `unrescue`: leave rescue and boot the instance again.
    Unrescue,
    /// `service`: run service steps on a deployed node.
    Service,
}

/// Every edge of the machine: `(from, event, to)`.
///
/// This is the only place that says which events are allowed where;
/// [`transition`] reads nothing else. Rows are grouped by source state in the
/// order of Ironic's `state_machine.py`, and [`render_table`] prints them for a
/// snapshot test, so any change here shows up in review.
pub const TRANSITIONS: &[(ProvisionState, Event, ProvisionState)] = &[
    // A new node is verified before it becomes manageable.
    (S::Enroll, E::Manage, S::Verifying),
    // Verification either succeeds or sends the node back to enroll.
    (S::Verifying, E::Done, S::Manageable),
    (S::Verifying, E::Fail, S::Enroll),
    // From manageable the operator cleans, inspects or adopts the node.
    (S::Manageable, E::Provide, S::Cleaning),
    (S::Manageable, E::Clean, S::Cleaning),
    (S::Manageable, E::Inspect, S::Inspecting),
    (S::Manageable, E::Adopt, S::Adopting),
    // An available node is deployed or taken back under operator control.
    (S::Available, E::Deploy, S::Deploying),
    (S::Available, E::Manage, S::Manageable),
    // A running deploy waits for the agent, holds, finishes or fails.
    (S::Deploying, E::Wait, S::DeployWait),
    (S::Deploying, E::Hold, S::DeployHold),
    (S::Deploying, E::Done, S::Active),
    (S::Deploying, E::Fail, S::DeployFail),
    // While waiting for the agent, a deploy may also be aborted or torn down.
    (S::DeployWait, E::Resume, S::Deploying),
    (S::DeployWait, E::Hold, S::DeployHold),
    (S::DeployWait, E::Fail, S::DeployFail),
    (S::DeployWait, E::Abort, S::DeployFail),
    (S::DeployWait, E::Delete, S::Deleting),
    // A held deploy goes back to waiting, or is aborted.
    (S::DeployHold, E::Unhold, S::DeployWait),
    (S::DeployHold, E::Abort, S::DeployFail),
    // A failed deploy can be retried or torn down (Ironic bug 1405420).
    (S::DeployFail, E::Deploy, S::Deploying),
    (S::DeployFail, E::Rebuild, S::Deploying),
    (S::DeployFail, E::Delete, S::Deleting),
    // A deployed node is rebuilt, torn down, rescued or serviced.
    (S::Active, E::Rebuild, S::Deploying),
    (S::Active, E::Delete, S::Deleting),
    (S::Active, E::Rescue, S::Rescuing),
    (S::Active, E::Service, S::Servicing),
    // A tear-down continues into cleaning; if it fails the node is in error.
    (S::Deleting, E::Clean, S::Cleaning),
    (S::Deleting, E::Fail, S::Error),
    // A node whose tear-down failed is rebuilt or torn down again.
    (S::Error, E::Rebuild, S::Deploying),
    (S::Error, E::Delete, S::Deleting),
    // Cleaning ends in available (automated) or manageable (manual).
    (S::Cleaning, E::Done, S::Available),
    (S::Cleaning, E::Manage, S::Manageable),
    (S::Cleaning, E::Wait, S::CleanWait),
    (S::Cleaning, E::Hold, S::CleanHold),
    (S::Cleaning, E::Fail, S::CleanFail),
    // While waiting for the agent, cleaning resumes, holds, fails or is aborted.
    (S::CleanWait, E::Resume, S::Cleaning),
    (S::CleanWait, E::Hold, S::CleanHold),
    (S::CleanWait, E::Fail, S::CleanFail),
    (S::CleanWait, E::Abort, S::CleanFail),
    // Held cleaning goes back to waiting, or is aborted.
    (S::CleanHold, E::Unhold, S::CleanWait),
    (S::CleanHold, E::Abort, S::CleanFail),
    // After failed cleaning the only way out is back to manageable.
    (S::CleanFail, E::Manage, S::Manageable),
    // Inspection finishes, waits for a result, or fails.
    (S::Inspecting, E::Done, S::Manageable),
    (S::Inspecting, E::Wait, S::InspectWait),
    (S::Inspecting, E::Fail, S::InspectFail),
    // A waiting inspection finishes, resumes, fails or is aborted.
    (S::InspectWait, E::Done, S::Manageable),
    (S::InspectWait, E::Resume, S::Inspecting),
    (S::InspectWait, E::Fail, S::InspectFail),
    (S::InspectWait, E::Abort, S::InspectFail),
    // A failed inspection is retried or given up.
    (S::InspectFail, E::Manage, S::Manageable),
    (S::InspectFail, E::Inspect, S::Inspecting),
    // Adoption succeeds into active or fails.
    (S::Adopting, E::Done, S::Active),
    (S::Adopting, E::Fail, S::AdoptFail),
    // A failed adoption is retried or given up.
    (S::AdoptFail, E::Adopt, S::Adopting),
    (S::AdoptFail, E::Manage, S::Manageable),
    // A running rescue finishes, waits for the ramdisk, or fails.
    (S::Rescuing, E::Done, S::Rescue),
    (S::Rescuing, E::Wait, S::RescueWait),
    (S::Rescuing, E::Fail, S::RescueFail),
    // While waiting for the rescue ramdisk, the rescue may also be aborted or torn down.
    (S::RescueWait, E::Resume, S::Rescuing),
    (S::RescueWait, E::Fail, S::RescueFail),
    (S::RescueWait, E::Abort, S::RescueFail),
    (S::RescueWait, E::Delete, S::Deleting),
    // A rescued node is rescued again, unrescued or torn down.
    (S::Rescue, E::Rescue, S::Rescuing),
    (S::Rescue, E::Unrescue, S::Unrescuing),
    (S::Rescue, E::Delete, S::Deleting),
    // A failed rescue allows the same three ways out.
    (S::RescueFail, E::Rescue, S::Rescuing),
    (S::RescueFail, E::Unrescue, S::Unrescuing),
    (S::RescueFail, E::Delete, S::Deleting),
    // Leaving rescue succeeds into active or fails.
    (S::Unrescuing, E::Done, S::Active),
    (S::Unrescuing, E::Fail, S::UnrescueFail),
    // A failed unrescue allows the same three ways out as a failed rescue.
    (S::UnrescueFail, E::Rescue, S::Rescuing),
    (S::UnrescueFail, E::Unrescue, S::Unrescuing),
    (S::UnrescueFail, E::Delete, S::Deleting),
    // Servicing finishes into active, waits, holds or fails.
    (S::Servicing, E::Done, S::Active),
    (S::Servicing, E::Wait, S::ServiceWait),
    (S::Servicing, E::Hold, S::ServiceHold),
    (S::Servicing, E::Fail, S::ServiceFail),
    // While waiting for the agent, servicing may also be aborted or torn down.
    (S::ServiceWait, E::Resume, S::Servicing),
    (S::ServiceWait, E::Hold, S::ServiceHold),
    (S::ServiceWait, E::Fail, S::ServiceFail),
    (S::ServiceWait, E::Abort, S::ServiceFail),
    (S::ServiceWait, E::Delete, S::Deleting),
    // Held servicing restarts, goes back to waiting, fails or is aborted.
    (S::ServiceHold, E::Service, S::Servicing),
    (S::ServiceHold, E::Unhold, S::ServiceWait),
    (S::ServiceHold, E::Fail, S::ServiceFail),
    (S::ServiceHold, E::Abort, S::ServiceFail),
    // Failed servicing is retried, resumed, rescued, torn down, or aborted back to active.
    (S::ServiceFail, E::Service, S::Servicing),
    (S::ServiceFail, E::Wait, S::ServiceWait),
    (S::ServiceFail, E::Hold, S::ServiceHold),
    (S::ServiceFail, E::Rescue, S::Rescuing),
    (S::ServiceFail, E::Abort, S::Active),
    (S::ServiceFail, E::Delete, S::Deleting),
];

/// What kind of rest a state is: Ironic's `STABLE_STATES`, `UNSTABLE_STATES`, `FAILURE_STATES`,
/// and the hold states, which are in none of Ironic's sets. Every state is of exactly one kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// The node rests until someone asks for something; no work is in progress.
    Stable,
    /// An operation is in progress, on a conductor or awaited from the ramdisk.
    Unstable,
    /// An operation failed; nothing runs, and the node keeps its target.
    Failure,
    /// A step asked to pause until `unhold`; nothing runs, and the node keeps its target.
    Hold,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::Stable => "stable",
            Kind::Unstable => "unstable",
            Kind::Failure => "failure",
            Kind::Hold => "hold",
        }
    }
}

/// May be PATCHed although it has a target ([`ProvisionState::update_allowed`]).
const UPDATE: u16 = 1;
/// May be deleted without maintenance ([`ProvisionState::delete_allowed`]).
const DELETE: u16 = 1 << 1;
/// Failed along its `fail` edge when found stuck ([`ProvisionState::stuck_fail_event_applies`]).
const STUCK_FAILS: u16 = 1 << 2;
/// Driver and interfaces may change without maintenance
/// ([`ProvisionState::interface_change_allowed`]).
const INTERFACES: u16 = 1 << 3;
/// May be made protected ([`ProvisionState::protect_allowed`]).
const PROTECT: u16 = 1 << 4;
/// Takes a power change requested through the API ([`ProvisionState::power_change_allowed`]).
const POWER: u16 = 1 << 5;
/// Its power state is compared with the hardware's by the power-state sync
/// ([`ProvisionState::power_synced`]).
const SYNC: u16 = 1 << 6;
/// Its agent may look the node up when lookup is restricted ([`ProvisionState::lookup_allowed`]).
const LOOKUP: u16 = 1 << 7;
/// Its agent's heartbeats are recorded ([`ProvisionState::heartbeat_allowed`]).
const HEARTBEAT: u16 = 1 << 8;

/// The names [`render_states`] prints for the allowance bits, in bit order.
const ALLOWANCES: [(u16, &str); 9] = [
    (UPDATE, "update"),
    (DELETE, "delete"),
    (STUCK_FAILS, "stuck-fails"),
    (INTERFACES, "interfaces"),
    (PROTECT, "protect"),
    (POWER, "power"),
    (SYNC, "power-sync"),
    (LOOKUP, "lookup"),
    (HEARTBEAT, "heartbeat"),
];

/// The facts about one provision state: one row of [`STATES`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StateFacts {
    /// The state this row is about.
    pub state: ProvisionState,
    /// See [`ProvisionState::api_name`].
    pub api_name: &'static str,
    /// See [`Kind`].
    pub kind: Kind,
    /// See [`ProvisionState::target`].
    pub target: Option<ProvisionState>,
    /// See [`ProvisionState::aborted_operation`].
    pub aborts: Option<&'static str>,
    /// What a node in this state allows: a set of the allowance bits above, read through the
    /// accessors of [`ProvisionState`].
    allows: u16,
}

const fn row(
    state: ProvisionState,
    api_name: &'static str,
    kind: Kind,
    target: Option<ProvisionState>,
    aborts: Option<&'static str>,
    allows: u16,
) -> StateFacts {
    StateFacts {
        state,
        api_name,
        kind,
        target,
        aborts,
        allows,
    }
}

/// Every per-state fact, one row per state in declaration order (row `i` is the state whose
/// `row()` is `i`, checked when this compiles).
///
/// Columns: the state; its API name; its [`Kind`]; its registered target; the operation an
/// `abort` here stops; and what a node in it allows: `UPDATE` (PATCH despite a target),
/// `DELETE` (without maintenance), `STUCK_FAILS` (failed on recovery), `INTERFACES` (driver
/// and interface changes without maintenance), `PROTECT` (may be made protected), `POWER`
/// (takes a power change), `SYNC` (its power state is synced with the hardware's), `LOOKUP`
/// (its agent may look it up under `restrict_lookup`), `HEARTBEAT` (its agent's heartbeats are
/// recorded).
/// [`render_states`] prints it for a snapshot test.
#[rustfmt::skip]
pub const STATES: &[StateFacts] = {
    use Kind::{Failure, Hold, Stable, Unstable};
    &[
        //  state            API name           kind      target               abort names         allows
        row(S::Enroll,       "enroll",          Stable,   None,                None,               DELETE | INTERFACES | POWER),
        row(S::Verifying,    "verifying",       Unstable, Some(S::Manageable), None,               UPDATE | STUCK_FAILS | POWER | SYNC),
        row(S::Manageable,   "manageable",      Stable,   None,                None,               DELETE | INTERFACES | POWER | SYNC),
        row(S::Available,    "available",       Stable,   None,                None,               INTERFACES | POWER | SYNC),
        row(S::Active,       "active",          Stable,   None,                None,               PROTECT | POWER | SYNC),
        row(S::DeployWait,   "wait call-back",  Unstable, Some(S::Active),     Some("deploy"),     POWER | LOOKUP | HEARTBEAT),
        row(S::Deploying,    "deploying",       Unstable, Some(S::Active),     None,               STUCK_FAILS | POWER | SYNC | LOOKUP | HEARTBEAT),
        row(S::DeployFail,   "deploy failed",   Failure,  Some(S::Active),     None,               UPDATE | POWER | SYNC),
        row(S::DeployHold,   "deploy hold",     Hold,     Some(S::Active),     Some("deploy"),     POWER | SYNC | HEARTBEAT),
        row(S::Deleting,     "deleting",        Unstable, Some(S::Available),  None,               STUCK_FAILS | POWER | SYNC),
        // Cleaning drives the power itself.
        row(S::Cleaning,     "cleaning",        Unstable, Some(S::Available),  None,               STUCK_FAILS | SYNC | LOOKUP | HEARTBEAT),
        row(S::CleanWait,    "clean wait",      Unstable, Some(S::Available),  Some("clean"),      LOOKUP | HEARTBEAT),
        row(S::CleanFail,    "clean failed",    Failure,  Some(S::Available),  None,               UPDATE | POWER | SYNC),
        row(S::CleanHold,    "clean hold",      Hold,     Some(S::Available),  Some("clean"),      POWER | SYNC | HEARTBEAT),
        row(S::Error,        "error",           Stable,   None,                None,               UPDATE | POWER | SYNC),
        row(S::Inspecting,   "inspecting",      Unstable, Some(S::Manageable), None,               UPDATE | STUCK_FAILS | INTERFACES | POWER | SYNC | LOOKUP),
        row(S::InspectFail,  "inspect failed",  Failure,  Some(S::Manageable), None,               UPDATE | POWER | SYNC),
        row(S::InspectWait,  "inspect wait",    Unstable, Some(S::Manageable), Some("inspection"), UPDATE | INTERFACES | POWER | SYNC | LOOKUP),
        row(S::Adopting,     "adopting",        Unstable, Some(S::Active),     None,               STUCK_FAILS | POWER | SYNC),
        row(S::AdoptFail,    "adopt failed",    Failure,  Some(S::Active),     None,               UPDATE | DELETE | POWER),
        row(S::Rescue,       "rescue",          Stable,   None,                None,               PROTECT | POWER | SYNC),
        row(S::RescueFail,   "rescue failed",   Failure,  Some(S::Rescue),     None,               UPDATE | POWER | SYNC),
        row(S::RescueWait,   "rescue wait",     Unstable, Some(S::Rescue),     Some("rescue"),     POWER | SYNC | LOOKUP | HEARTBEAT),
        row(S::Rescuing,     "rescuing",        Unstable, Some(S::Rescue),     None,               STUCK_FAILS | POWER | SYNC | LOOKUP | HEARTBEAT),
        row(S::UnrescueFail, "unrescue failed", Failure,  Some(S::Active),     None,               UPDATE | POWER | SYNC),
        row(S::Unrescuing,   "unrescuing",      Unstable, Some(S::Active),     None,               STUCK_FAILS | POWER | SYNC),
        row(S::Servicing,    "servicing",       Unstable, Some(S::Active),     None,               STUCK_FAILS | POWER | SYNC | HEARTBEAT),
        row(S::ServiceWait,  "service wait",    Unstable, Some(S::Active),     Some("service"),    POWER | SYNC | LOOKUP | HEARTBEAT),
        row(S::ServiceFail,  "service failed",  Failure,  Some(S::Active),     Some("service"),    UPDATE | POWER | SYNC),
        row(S::ServiceHold,  "service hold",    Hold,     Some(S::Active),     Some("service"),    UPDATE | POWER | SYNC | HEARTBEAT),
    ]
};

// Row i of the table is the state whose `row()` is i, and every state has a row (`row()` is an
// exhaustive match onto 0..30, and there are 30 rows): checked when this compiles.
const _: () = {
    assert!(STATES.len() == ProvisionState::ALL.len());
    let mut i = 0;
    while i < STATES.len() {
        assert!(STATES[i].state.row() == i);
        i += 1;
    }
};

impl ProvisionState {
    /// Every state, in declaration order (the order of [`STATES`]).
    pub const ALL: [ProvisionState; 30] = {
        let mut all = [S::Enroll; 30];
        let mut i = 0;
        while i < all.len() {
            all[i] = STATES[i].state;
            i += 1;
        }
        all
    };

    /// The index of this state's row in [`STATES`]. The one exhaustive match over the states:
    /// adding a state fails to compile until it has a row.
    const fn row(self) -> usize {
        match self {
            Self::Enroll => 0,
            Self::Verifying => 1,
            Self::Manageable => 2,
            Self::Available => 3,
            Self::Active => 4,
            Self::DeployWait => 5,
            Self::Deploying => 6,
            Self::DeployFail => 7,
            Self::DeployHold => 8,
            Self::Deleting => 9,
            Self::Cleaning => 10,
            Self::CleanWait => 11,
            Self::CleanFail => 12,
            Self::CleanHold => 13,
            Self::Error => 14,
            Self::Inspecting => 15,
            Self::InspectFail => 16,
            Self::InspectWait => 17,
            Self::Adopting => 18,
            Self::AdoptFail => 19,
            Self::Rescue => 20,
            Self::RescueFail => 21,
            Self::RescueWait => 22,
            Self::Rescuing => 23,
            Self::UnrescueFail => 24,
            Self::Unrescuing => 25,
            Self::Servicing => 26,
            Self::ServiceWait => 27,
            Self::ServiceFail => 28,
            Self::ServiceHold => 29,
        }
    }

    /// This state's row of [`STATES`].
    pub fn facts(self) -> &'static StateFacts {
        &STATES[self.row()]
    }

    fn allows(self, allowance: u16) -> bool {
        self.facts().allows & allowance != 0
    }

    /// The string used in the API and stored in `nodes.provision_state`.
    ///
    /// The column is VARCHAR(15), which the longest name (`unrescue failed`)
    /// fills exactly. Renderings for old API versions (`available` shown as
    /// `null` below 1.2, `inspect wait` as `inspecting` below 1.39) are the
    /// API's business, not this function's.
    pub fn api_name(self) -> &'static str {
        self.facts().api_name
    }

    /// The state whose [`api_name`](Self::api_name) is exactly `s`.
    ///
    /// Matching is case-sensitive and takes no verbs: `deleted` or `rebuild`
    /// give `None`.
    pub fn from_api_name(s: &str) -> Option<Self> {
        STATES
            .iter()
            .find(|facts| facts.api_name == s)
            .map(|facts| facts.state)
    }

    /// Whether the state is registered as stable (Ironic's `STABLE_STATES`).
    ///
    /// A node rests in a stable state until someone asks for something; no
    /// conductor work is in progress.
    pub fn is_stable(self) -> bool {
        self.facts().kind == Kind::Stable
    }

    /// Whether an operation is in progress in this state (Ironic's
    /// `UNSTABLE_STATES`).
    ///
    /// This is not the negation of [`is_stable`](Self::is_stable): failure and
    /// hold states are in neither set, because nothing runs in them but they
    /// still carry a target.
    pub fn is_unstable(self) -> bool {
        self.facts().kind == Kind::Unstable
    }

    /// Whether the state records a failed operation (Ironic's `FAILURE_STATES`).
    ///
    /// `error` is not one of them: it is the stable state a failed tear-down
    /// ends in.
    pub fn is_failure(self) -> bool {
        self.facts().kind == Kind::Failure
    }

    /// The target registered for the state: the stable state the node is
    /// heading for while it is here. `None` for stable states.
    ///
    /// Failure states keep a target too (`deploy failed` → `active`). Ironic
    /// once read "target is set" as "node is busy", which locked failed nodes
    /// out of redeploy, rebuild, delete and PATCH (Ironic bug 1405420). A failed
    /// node is not busy: busy means the node lock is held, and whether an
    /// action is allowed is decided by [`is_actionable`], not by the target.
    ///
    /// Callers may override the registered target: manual cleaning heads for
    /// `manageable`, not `available`, and clean, service and rescue wait
    /// timeouts keep the target the node already had.
    pub fn target(self) -> Option<ProvisionState> {
        self.facts().target
    }

    /// Whether the node may be PATCHed although it has a target (Ironic's
    /// `UPDATE_ALLOWED_STATES`).
    ///
    /// Ironic's list also names `service`, but that is a verb and never a
    /// stored state, so it has no counterpart here.
    pub fn update_allowed(self) -> bool {
        self.allows(UPDATE)
    }

    /// Whether the state is one of Ironic's `DELETE_ALLOWED_STATES`: a node in it may be
    /// deleted without maintenance mode, and its volume connectors and targets deleted while it
    /// is powered on.
    ///
    /// `available` is not one: Ironic's `destroy_node` adds it when
    /// `[conductor]allow_deleting_available_nodes` (true by default) says so, and the conductor
    /// does the same (`node_ops::destroy`); the volume deletions do not.
    pub fn delete_allowed(self) -> bool {
        self.allows(DELETE)
    }

    /// Whether an unlocked node found in this state at conductor start is
    /// moved on with its `fail` edge (Ironic's `STUCK_STATES_TREATED_AS_FAIL`).
    ///
    /// These are the states where the work ran inside a conductor, so it died
    /// with that conductor and cannot be resumed. Wait states are left alone:
    /// their own timeouts handle them.
    pub fn stuck_fail_event_applies(self) -> bool {
        self.allows(STUCK_FAILS)
    }

    /// Whether a node's driver and interfaces may change without maintenance mode (the states
    /// Ironic's `update_node` allows them in).
    pub fn interface_change_allowed(self) -> bool {
        self.allows(INTERFACES)
    }

    /// Whether a node may be made `protected` in this state (Ironic allows it only in
    /// `active` and `rescue`).
    pub fn protect_allowed(self) -> bool {
        self.allows(PROTECT)
    }

    /// Whether a power change requested through the API is taken in this state: not while
    /// cleaning runs or waits, since cleaning drives the power itself.
    pub fn power_change_allowed(self) -> bool {
        self.allows(POWER)
    }

    /// Whether the power-state sync compares a node's recorded power state with its
    /// hardware's in this state: everywhere but Ironic's `SYNC_EXCLUDED_STATES`, the waits for
    /// a ramdisk that drives the power itself (`wait call-back`, `clean wait`), `enroll` (not
    /// verified yet) and `adopt failed`.
    pub fn power_synced(self) -> bool {
        self.allows(SYNC)
    }

    /// Whether the agent of a node in this state may look it up when `restrict_lookup` is on
    /// (Ironic's `LOOKUP_ALLOWED_STATES`).
    pub fn lookup_allowed(self) -> bool {
        self.allows(LOOKUP)
    }

    /// Whether a heartbeat of the node's agent is recorded in this state (Ironic's
    /// `agent_base.HEARTBEAT_ALLOWED`); in others it is logged and dropped. Ferrum has no fast
    /// track, so Ironic's wider fast-track list is not used.
    pub fn heartbeat_allowed(self) -> bool {
        self.allows(HEARTBEAT)
    }

    /// The operation an `abort` in this state stops, as `last_error` names it ("By request, the
    /// deploy operation was aborted"); `None` exactly where the table has no `abort` edge.
    pub fn aborted_operation(self) -> Option<&'static str> {
        self.facts().aborts
    }
}

impl fmt::Display for ProvisionState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.api_name())
    }
}

/// A string that is not the API name of any provision state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnknownState(pub String);

impl fmt::Display for UnknownState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Unknown provision state '{}'", self.0)
    }
}

impl std::error::Error for UnknownState {}

impl FromStr for ProvisionState {
    type Err = UnknownState;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::from_api_name(s).ok_or_else(|| UnknownState(s.to_owned()))
    }
}

impl Event {
    /// Every event, in declaration order.
    pub const ALL: [Event; 18] = [
        E::Manage,
        E::Provide,
        E::Clean,
        E::Inspect,
        E::Adopt,
        E::Deploy,
        E::Rebuild,
        E::Delete,
        E::Done,
        E::Fail,
        E::Wait,
        E::Resume,
        E::Hold,
        E::Unhold,
        E::Abort,
        E::Rescue,
        E::Unrescue,
        E::Service,
    ];

    /// The event's name as Ironic spells it, used in logs, errors and
    /// notifications.
    pub fn name(self) -> &'static str {
        match self {
            Self::Manage => "manage",
            Self::Provide => "provide",
            Self::Clean => "clean",
            Self::Inspect => "inspect",
            Self::Adopt => "adopt",
            Self::Deploy => "deploy",
            Self::Rebuild => "rebuild",
            Self::Delete => "delete",
            Self::Done => "done",
            Self::Fail => "fail",
            Self::Wait => "wait",
            Self::Resume => "resume",
            Self::Hold => "hold",
            Self::Unhold => "unhold",
            Self::Abort => "abort",
            Self::Rescue => "rescue",
            Self::Unrescue => "unrescue",
            Self::Service => "service",
        }
    }
}

impl fmt::Display for Event {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// An event that has no edge out of the node's current state.
///
/// Ironic raises `InvalidState` here; the API and RPC layers turn it into
/// `InvalidStateRequested` (400).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InvalidTransition {
    /// The state the node was in.
    pub from: ProvisionState,
    /// The event that was refused.
    pub event: Event,
}

impl fmt::Display for InvalidTransition {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "event \"{}\" is not allowed in state \"{}\"",
            self.event, self.from
        )
    }
}

impl std::error::Error for InvalidTransition {}

/// The state reached by applying `event` in state `from`.
///
/// Reads only [`TRANSITIONS`]; a pair without a row is an
/// [`InvalidTransition`].
pub fn transition(from: ProvisionState, event: Event) -> Result<ProvisionState, InvalidTransition> {
    TRANSITIONS
        .iter()
        .find(|&&(row_from, row_event, _)| row_from == from && row_event == event)
        .map(|&(_, _, to)| to)
        .ok_or(InvalidTransition { from, event })
}

/// Whether `event` has an edge out of `from`.
///
/// The API checks this before calling the conductor, and the conductor checks
/// it again under the node lock, because the state may have moved in between.
pub fn is_actionable(from: ProvisionState, event: Event) -> bool {
    transition(from, event).is_ok()
}

/// The `target_provision_state` to store after the machine moved to `to`.
///
/// Ironic clears the target when no follow-up worker was started and the new
/// state is stable: nothing more is going to happen. Otherwise the node keeps
/// heading for the target registered for `to`, which is why failure states keep
/// one (see [`ProvisionState::target`]).
///
/// Stable states have no registered target, so for them the answer is `None`
/// whether or not a worker follows. Explicit overrides (manual cleaning heads
/// for `manageable`; wait timeouts keep the old target) are applied by the
/// caller.
pub fn target_after(to: ProvisionState, worker_follows: bool) -> Option<ProvisionState> {
    if !worker_follows && to.is_stable() {
        None
    } else {
        to.target()
    }
}

/// The table as text, one `from --event--> to` line per row, in table order.
pub fn render_table() -> String {
    TRANSITIONS
        .iter()
        .map(|(from, event, to)| format!("{from} --{event}--> {to}\n"))
        .collect()
}

/// The per-state facts as text, one line per row of [`STATES`], in table order.
pub fn render_states() -> String {
    STATES
        .iter()
        .map(|facts| {
            let name = |state: Option<ProvisionState>| state.map_or("-", ProvisionState::api_name);
            let allows: Vec<&str> = ALLOWANCES
                .iter()
                .filter(|&&(bit, _)| facts.allows & bit != 0)
                .map(|&(_, word)| word)
                .collect();
            format!(
                "{}: {}, target {}, abort stops {}, allows {}\n",
                facts.api_name,
                facts.kind.name(),
                name(facts.target),
                facts.aborts.unwrap_or("-"),
                if allows.is_empty() {
                    "nothing".to_owned()
                } else {
                    allows.join(" ")
                },
            )
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use std::collections::{HashSet, VecDeque};

    use super::*;

    /// The table as written in the spec, one line per edge. Update it only
    /// together with a deliberate change to the machine.
    const EXPECTED_TABLE: &str = "\
enroll --manage--> verifying
verifying --done--> manageable
verifying --fail--> enroll
manageable --provide--> cleaning
manageable --clean--> cleaning
manageable --inspect--> inspecting
manageable --adopt--> adopting
available --deploy--> deploying
available --manage--> manageable
deploying --wait--> wait call-back
deploying --hold--> deploy hold
deploying --done--> active
deploying --fail--> deploy failed
wait call-back --resume--> deploying
wait call-back --hold--> deploy hold
wait call-back --fail--> deploy failed
wait call-back --abort--> deploy failed
wait call-back --delete--> deleting
deploy hold --unhold--> wait call-back
deploy hold --abort--> deploy failed
deploy failed --deploy--> deploying
deploy failed --rebuild--> deploying
deploy failed --delete--> deleting
active --rebuild--> deploying
active --delete--> deleting
active --rescue--> rescuing
active --service--> servicing
deleting --clean--> cleaning
deleting --fail--> error
error --rebuild--> deploying
error --delete--> deleting
cleaning --done--> available
cleaning --manage--> manageable
cleaning --wait--> clean wait
cleaning --hold--> clean hold
cleaning --fail--> clean failed
clean wait --resume--> cleaning
clean wait --hold--> clean hold
clean wait --fail--> clean failed
clean wait --abort--> clean failed
clean hold --unhold--> clean wait
clean hold --abort--> clean failed
clean failed --manage--> manageable
inspecting --done--> manageable
inspecting --wait--> inspect wait
inspecting --fail--> inspect failed
inspect wait --done--> manageable
inspect wait --resume--> inspecting
inspect wait --fail--> inspect failed
inspect wait --abort--> inspect failed
inspect failed --manage--> manageable
inspect failed --inspect--> inspecting
adopting --done--> active
adopting --fail--> adopt failed
adopt failed --adopt--> adopting
adopt failed --manage--> manageable
rescuing --done--> rescue
rescuing --wait--> rescue wait
rescuing --fail--> rescue failed
rescue wait --resume--> rescuing
rescue wait --fail--> rescue failed
rescue wait --abort--> rescue failed
rescue wait --delete--> deleting
rescue --rescue--> rescuing
rescue --unrescue--> unrescuing
rescue --delete--> deleting
rescue failed --rescue--> rescuing
rescue failed --unrescue--> unrescuing
rescue failed --delete--> deleting
unrescuing --done--> active
unrescuing --fail--> unrescue failed
unrescue failed --rescue--> rescuing
unrescue failed --unrescue--> unrescuing
unrescue failed --delete--> deleting
servicing --done--> active
servicing --wait--> service wait
servicing --hold--> service hold
servicing --fail--> service failed
service wait --resume--> servicing
service wait --hold--> service hold
service wait --fail--> service failed
service wait --abort--> service failed
service wait --delete--> deleting
service hold --service--> servicing
service hold --unhold--> service wait
service hold --fail--> service failed
service hold --abort--> service failed
service failed --service--> servicing
service failed --wait--> service wait
service failed --hold--> service hold
service failed --rescue--> rescuing
service failed --abort--> active
service failed --delete--> deleting
";

    /// The per-state facts as they stand, one line per state. Update it only together with a
    /// deliberate change to a state's facts.
    const EXPECTED_STATES: &str = "\
enroll: stable, target -, abort stops -, allows delete interfaces power
verifying: unstable, target manageable, abort stops -, allows update stuck-fails power power-sync
manageable: stable, target -, abort stops -, allows delete interfaces power power-sync
available: stable, target -, abort stops -, allows interfaces power power-sync
active: stable, target -, abort stops -, allows protect power power-sync
wait call-back: unstable, target active, abort stops deploy, allows power lookup heartbeat
deploying: unstable, target active, abort stops -, allows stuck-fails power power-sync lookup heartbeat
deploy failed: failure, target active, abort stops -, allows update power power-sync
deploy hold: hold, target active, abort stops deploy, allows power power-sync heartbeat
deleting: unstable, target available, abort stops -, allows stuck-fails power power-sync
cleaning: unstable, target available, abort stops -, allows stuck-fails power-sync lookup heartbeat
clean wait: unstable, target available, abort stops clean, allows lookup heartbeat
clean failed: failure, target available, abort stops -, allows update power power-sync
clean hold: hold, target available, abort stops clean, allows power power-sync heartbeat
error: stable, target -, abort stops -, allows update power power-sync
inspecting: unstable, target manageable, abort stops -, allows update stuck-fails interfaces power power-sync lookup
inspect failed: failure, target manageable, abort stops -, allows update power power-sync
inspect wait: unstable, target manageable, abort stops inspection, allows update interfaces power power-sync lookup
adopting: unstable, target active, abort stops -, allows stuck-fails power power-sync
adopt failed: failure, target active, abort stops -, allows update delete power
rescue: stable, target -, abort stops -, allows protect power power-sync
rescue failed: failure, target rescue, abort stops -, allows update power power-sync
rescue wait: unstable, target rescue, abort stops rescue, allows power power-sync lookup heartbeat
rescuing: unstable, target rescue, abort stops -, allows stuck-fails power power-sync lookup heartbeat
unrescue failed: failure, target active, abort stops -, allows update power power-sync
unrescuing: unstable, target active, abort stops -, allows stuck-fails power power-sync
servicing: unstable, target active, abort stops -, allows stuck-fails power power-sync heartbeat
service wait: unstable, target active, abort stops service, allows power power-sync lookup heartbeat
service failed: failure, target active, abort stops service, allows update power power-sync
service hold: hold, target active, abort stops service, allows update power power-sync heartbeat
";

    /// The API names of the states for which `fact` holds, sorted.
    fn members(fact: fn(ProvisionState) -> bool) -> Vec<&'static str> {
        let mut names: Vec<_> = ProvisionState::ALL
            .into_iter()
            .filter(|&state| fact(state))
            .map(ProvisionState::api_name)
            .collect();
        names.sort_unstable();
        names
    }

    fn sorted(mut names: Vec<&'static str>) -> Vec<&'static str> {
        names.sort_unstable();
        names
    }

    fn named(name: &str) -> ProvisionState {
        match ProvisionState::from_api_name(name) {
            Some(state) => state,
            None => panic!("{name:?} is not a state"),
        }
    }

    fn in_table(from: ProvisionState, event: Event) -> bool {
        TRANSITIONS.iter().any(|&(f, e, _)| f == from && e == event)
    }

    #[test]
    fn every_row_is_what_transition_returns() {
        for &(from, event, to) in TRANSITIONS {
            assert_eq!(transition(from, event), Ok(to), "{from} --{event}-->");
            assert!(is_actionable(from, event));
        }
    }

    #[test]
    fn table_has_93_rows_and_no_duplicate_pair() {
        assert_eq!(TRANSITIONS.len(), 93);
        let pairs: HashSet<_> = TRANSITIONS.iter().map(|&(f, e, _)| (f, e)).collect();
        assert_eq!(pairs.len(), TRANSITIONS.len());
    }

    #[test]
    fn table_uses_only_listed_states_and_events() {
        for &(from, event, to) in TRANSITIONS {
            assert!(ProvisionState::ALL.contains(&from));
            assert!(ProvisionState::ALL.contains(&to));
            assert!(Event::ALL.contains(&event));
        }
        let states: HashSet<_> = ProvisionState::ALL.into_iter().collect();
        assert_eq!(states.len(), ProvisionState::ALL.len());
        let events: HashSet<_> = Event::ALL.into_iter().collect();
        assert_eq!(events.len(), Event::ALL.len());
    }

    #[test]
    fn pairs_outside_the_table_are_rejected() {
        let mut rejected = 0;
        for from in ProvisionState::ALL {
            for event in Event::ALL {
                if in_table(from, event) {
                    continue;
                }
                rejected += 1;
                let err = transition(from, event);
                assert_eq!(err, Err(InvalidTransition { from, event }));
                assert!(!is_actionable(from, event));
                let text = InvalidTransition { from, event }.to_string();
                assert!(text.contains(&format!("\"{}\"", from.api_name())), "{text}");
                assert!(text.contains(&format!("\"{}\"", event.name())), "{text}");
            }
        }
        assert_eq!(rejected, 30 * 18 - 93);
    }

    #[test]
    fn invalid_transition_message() {
        let err = InvalidTransition {
            from: ProvisionState::Active,
            event: Event::Deploy,
        };
        assert_eq!(
            err.to_string(),
            "event \"deploy\" is not allowed in state \"active\""
        );
    }

    #[test]
    fn api_names_round_trip_are_unique_and_fit_the_column() {
        let mut seen = HashSet::new();
        for state in ProvisionState::ALL {
            let name = state.api_name();
            assert!(seen.insert(name), "duplicate api name {name:?}");
            assert!(name.len() <= 15, "{name:?} does not fit VARCHAR(15)");
            assert_eq!(ProvisionState::from_api_name(name), Some(state));
            assert_eq!(name.parse::<ProvisionState>(), Ok(state));
            assert_eq!(state.to_string(), name);
        }
        assert_eq!(ProvisionState::UnrescueFail.api_name().len(), 15);
    }

    #[test]
    fn verbs_and_unknown_strings_are_not_states() {
        for word in [
            "deleted",
            "rebuild",
            "deploy",
            "undeploy",
            "service",
            "deploy complete",
            "null",
            "",
            "Active",
            " active",
        ] {
            assert_eq!(ProvisionState::from_api_name(word), None, "{word:?}");
            assert_eq!(
                word.parse::<ProvisionState>(),
                Err(UnknownState(word.to_owned()))
            );
        }
        assert_eq!(
            UnknownState("bogus".to_owned()).to_string(),
            "Unknown provision state 'bogus'"
        );
    }

    #[test]
    fn event_names_are_unique_and_displayed() {
        let names: HashSet<_> = Event::ALL.into_iter().map(Event::name).collect();
        assert_eq!(names.len(), Event::ALL.len());
        for event in Event::ALL {
            assert_eq!(event.to_string(), event.name());
        }
    }

    #[test]
    fn every_state_is_reachable_from_enroll() {
        let mut seen = HashSet::from([ProvisionState::Enroll]);
        let mut queue = VecDeque::from([ProvisionState::Enroll]);
        while let Some(from) = queue.pop_front() {
            for &(row_from, _, to) in TRANSITIONS {
                if row_from == from && seen.insert(to) {
                    queue.push_back(to);
                }
            }
        }
        for state in ProvisionState::ALL {
            assert!(seen.contains(&state), "{state} is unreachable");
        }
    }

    #[test]
    fn stable_states() {
        assert_eq!(
            members(ProvisionState::is_stable),
            sorted(vec![
                "enroll",
                "manageable",
                "available",
                "active",
                "error",
                "rescue"
            ])
        );
    }

    #[test]
    fn unstable_states() {
        assert_eq!(
            members(ProvisionState::is_unstable),
            sorted(vec![
                "deploying",
                "wait call-back",
                "cleaning",
                "clean wait",
                "verifying",
                "deleting",
                "inspecting",
                "inspect wait",
                "adopting",
                "rescuing",
                "rescue wait",
                "unrescuing",
                "servicing",
                "service wait",
            ])
        );
    }

    #[test]
    fn failure_states() {
        assert_eq!(
            members(ProvisionState::is_failure),
            sorted(vec![
                "deploy failed",
                "clean failed",
                "inspect failed",
                "rescue failed",
                "unrescue failed",
                "adopt failed",
                "service failed",
            ])
        );
    }

    #[test]
    fn stable_unstable_failure_and_hold_partition_the_states() {
        let holds = ["deploy hold", "clean hold", "service hold"];
        for state in ProvisionState::ALL {
            let is_hold = holds.contains(&state.api_name());
            let count = [
                state.is_stable(),
                state.is_unstable(),
                state.is_failure(),
                is_hold,
            ]
            .into_iter()
            .filter(|&b| b)
            .count();
            assert_eq!(count, 1, "{state}");
        }
    }

    #[test]
    fn update_allowed_states() {
        // The spec's list minus "service", which is a verb, not a state.
        assert_eq!(
            members(ProvisionState::update_allowed),
            sorted(vec![
                "deploy failed",
                "inspecting",
                "inspect failed",
                "inspect wait",
                "clean failed",
                "error",
                "verifying",
                "adopt failed",
                "rescue failed",
                "unrescue failed",
                "service hold",
                "service failed",
            ])
        );
    }

    /// The power-state sync leaves exactly Ironic's `SYNC_EXCLUDED_STATES` alone.
    #[test]
    fn power_sync_skips_ironics_excluded_states() {
        assert_eq!(
            members(|s| !s.power_synced()),
            sorted(vec![
                "wait call-back",
                "clean wait",
                "enroll",
                "adopt failed"
            ])
        );
    }

    #[test]
    fn delete_allowed_states() {
        assert_eq!(
            members(ProvisionState::delete_allowed),
            sorted(vec!["manageable", "enroll", "adopt failed"])
        );
    }

    #[test]
    fn stuck_states_have_a_fail_edge() {
        assert_eq!(
            members(ProvisionState::stuck_fail_event_applies),
            sorted(vec![
                "deploying",
                "cleaning",
                "verifying",
                "inspecting",
                "adopting",
                "rescuing",
                "unrescuing",
                "deleting",
                "servicing",
            ])
        );
        for state in ProvisionState::ALL {
            if state.stuck_fail_event_applies() {
                assert!(
                    is_actionable(state, Event::Fail),
                    "{state} has no fail edge"
                );
            }
        }
        assert_eq!(
            transition(ProvisionState::Deploying, Event::Fail),
            Ok(ProvisionState::DeployFail)
        );
        assert_eq!(
            transition(ProvisionState::Deleting, Event::Fail),
            Ok(ProvisionState::Error)
        );
        assert_eq!(
            transition(ProvisionState::Verifying, Event::Fail),
            Ok(ProvisionState::Enroll)
        );
    }

    #[test]
    fn targets_match_the_spec() {
        let expected = [
            ("verifying", "manageable"),
            ("wait call-back", "active"),
            ("deploying", "active"),
            ("deploy failed", "active"),
            ("deploy hold", "active"),
            ("deleting", "available"),
            ("cleaning", "available"),
            ("clean wait", "available"),
            ("clean failed", "available"),
            ("clean hold", "available"),
            ("inspecting", "manageable"),
            ("inspect failed", "manageable"),
            ("inspect wait", "manageable"),
            ("adopting", "active"),
            ("adopt failed", "active"),
            ("rescue failed", "rescue"),
            ("rescue wait", "rescue"),
            ("rescuing", "rescue"),
            ("unrescue failed", "active"),
            ("unrescuing", "active"),
            ("servicing", "active"),
            ("service wait", "active"),
            ("service failed", "active"),
            ("service hold", "active"),
        ];
        for state in ProvisionState::ALL {
            let want = expected
                .iter()
                .find(|(name, _)| *name == state.api_name())
                .map(|&(_, target)| named(target));
            assert_eq!(state.target(), want, "{state}");
            assert_eq!(state.target().is_none(), state.is_stable(), "{state}");
            if let Some(target) = state.target() {
                assert!(target.is_stable(), "{state} aims at unstable {target}");
            }
        }
    }

    #[test]
    fn failure_states_keep_a_target() {
        for state in ProvisionState::ALL {
            if state.is_failure() {
                assert!(state.target().is_some(), "{state}");
                assert!(target_after(state, false).is_some(), "{state}");
            }
        }
        assert_eq!(
            ProvisionState::DeployFail.target(),
            Some(ProvisionState::Active)
        );
    }

    #[test]
    fn target_after_follows_the_rule() {
        use ProvisionState::{Active, DeployFail, Deploying, Manageable};
        assert_eq!(target_after(Active, false), None);
        assert_eq!(target_after(Deploying, true), Some(Active));
        assert_eq!(target_after(Deploying, false), Some(Active));
        assert_eq!(target_after(DeployFail, false), Some(Active));
        assert_eq!(target_after(Manageable, false), None);
        for state in ProvisionState::ALL {
            for worker_follows in [false, true] {
                let want = if !worker_follows && state.is_stable() {
                    None
                } else {
                    state.target()
                };
                assert_eq!(target_after(state, worker_follows), want);
            }
        }
    }

    #[test]
    fn from_verb_covers_the_verb_table() {
        let verbs = [
            ("active", Event::Deploy),
            ("deploy", Event::Deploy),
            ("rebuild", Event::Rebuild),
            ("deleted", Event::Delete),
            ("undeploy", Event::Delete),
            ("manage", Event::Manage),
            ("provide", Event::Provide),
            ("inspect", Event::Inspect),
            ("abort", Event::Abort),
            ("clean", Event::Clean),
            ("adopt", Event::Adopt),
            ("rescue", Event::Rescue),
            ("unrescue", Event::Unrescue),
            ("unhold", Event::Unhold),
            ("service", Event::Service),
        ];
        for (verb, event) in verbs {
            assert_eq!(
                crate::node::Verb::parse(verb).map(crate::node::Verb::event),
                Some(event),
                "{verb}"
            );
        }
        for word in [
            "delete", "done", "fail", "wait", "resume", "hold", "bogus", "", "Active",
        ] {
            assert_eq!(
                crate::node::Verb::parse(word).map(crate::node::Verb::event),
                None,
                "{word:?}"
            );
        }
    }

    #[test]
    fn verb_table_valid_from_matches_the_machine() {
        // "Valid from" per verb in the spec's API table. The machine also has
        // two internal edges on API events: clean from deleting and manage
        // from cleaning; they are not requested through the API.
        let internal = [
            (ProvisionState::Deleting, Event::Clean),
            (ProvisionState::Cleaning, Event::Manage),
        ];
        let valid_from: [(&str, &[&str]); 13] = [
            ("deploy", &["available", "deploy failed"]),
            ("rebuild", &["active", "deploy failed", "error"]),
            (
                "deleted",
                &[
                    "active",
                    "wait call-back",
                    "deploy failed",
                    "error",
                    "rescue",
                    "rescue wait",
                    "rescue failed",
                    "unrescue failed",
                    "service wait",
                    "service failed",
                ],
            ),
            (
                "manage",
                &[
                    "enroll",
                    "available",
                    "clean failed",
                    "inspect failed",
                    "adopt failed",
                ],
            ),
            ("provide", &["manageable"]),
            ("inspect", &["manageable", "inspect failed"]),
            (
                "abort",
                &[
                    "clean wait",
                    "clean hold",
                    "rescue wait",
                    "inspect wait",
                    "wait call-back",
                    "deploy hold",
                    "service wait",
                    "service hold",
                    "service failed",
                ],
            ),
            ("clean", &["manageable"]),
            ("adopt", &["manageable", "adopt failed"]),
            (
                "rescue",
                &[
                    "active",
                    "rescue",
                    "rescue failed",
                    "unrescue failed",
                    "service failed",
                ],
            ),
            ("unrescue", &["rescue", "rescue failed", "unrescue failed"]),
            ("unhold", &["clean hold", "deploy hold", "service hold"]),
            ("service", &["active", "service hold", "service failed"]),
        ];
        for (verb, names) in valid_from {
            let Some(event) = crate::node::Verb::parse(verb).map(crate::node::Verb::event) else {
                panic!("{verb} is not a verb");
            };
            let want: HashSet<_> = names.iter().map(|&name| named(name)).collect();
            let got: HashSet<_> = ProvisionState::ALL
                .into_iter()
                .filter(|&from| is_actionable(from, event))
                .filter(|&from| !internal.contains(&(from, event)))
                .collect();
            assert_eq!(got, want, "{verb}");
        }
    }

    #[test]
    fn rendered_table_matches_the_snapshot() {
        assert_eq!(render_table(), EXPECTED_TABLE);
    }

    #[test]
    fn rendered_states_match_the_snapshot() {
        assert_eq!(render_states(), EXPECTED_STATES);
    }

    #[test]
    fn facts_table_has_one_row_per_state_in_order() {
        assert_eq!(STATES.len(), ProvisionState::ALL.len());
        for (i, facts) in STATES.iter().enumerate() {
            assert_eq!(facts.state, ProvisionState::ALL[i], "row {i}");
            assert_eq!(facts.state.row(), i, "row {i}");
            assert_eq!(facts.state.facts(), facts, "row {i}");
        }
        let states: HashSet<_> = STATES.iter().map(|facts| facts.state).collect();
        assert_eq!(states.len(), STATES.len());
    }

    #[test]
    fn abort_names_an_operation_exactly_where_abort_is_actionable() {
        for state in ProvisionState::ALL {
            assert_eq!(
                state.aborted_operation().is_some(),
                is_actionable(state, Event::Abort),
                "{state}"
            );
        }
        assert_eq!(
            ProvisionState::DeployHold.aborted_operation(),
            Some("deploy")
        );
        assert_eq!(
            ProvisionState::InspectWait.aborted_operation(),
            Some("inspection")
        );
    }

    #[test]
    fn interface_protect_and_power_states() {
        assert_eq!(
            members(ProvisionState::interface_change_allowed),
            sorted(vec![
                "enroll",
                "inspecting",
                "inspect wait",
                "manageable",
                "available"
            ])
        );
        assert_eq!(
            members(ProvisionState::protect_allowed),
            sorted(vec!["active", "rescue"])
        );
        let refused: Vec<_> = ProvisionState::ALL
            .into_iter()
            .filter(|state| !state.power_change_allowed())
            .map(ProvisionState::api_name)
            .collect();
        assert_eq!(refused, vec!["cleaning", "clean wait"]);
    }
}
