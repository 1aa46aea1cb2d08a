//! Provisioning flows: deploy, rebuild, tear down, clean, manage, provide, inspect, adopt,
//! rescue, unrescue, service, abort.
//!
//! Each RPC handler takes the lock, checks the event against the state table, validates, applies
//! the event (clearing `last_error`) and returns (`start`); the flow the new state names
//! (`after`) then continues on a worker (`worker.rs`) that owns the lock. The flow always ends
//! the node somewhere the table allows: its success state, or (recorded by the worker) its `fail`
//! edge with `last_error` set, including when the driver panics or the conductor shuts down. The
//! lock is released in the same statement as that last write.
//!
//! One file per flow, each a type the worker runs (a `Flow`) beside the RPC entry point that
//! starts it; `step_runner.rs` runs the steps a cleaning or a servicing names, and
//! `agent_wait.rs` is the wait of a deploy or a cleaning for its agent (the poller, settling what
//! the agent said, the timeout). This file owns starting a flow and what several flows share.

pub mod adopt;
mod agent_wait;
pub mod clean;
pub mod deploy;
pub mod inspect;
pub mod rescue;
pub mod service;
pub mod step_runner;
pub mod tear_down;
pub mod verify;

use std::time::Duration;

use serde_json::Value;
use tokio::time::Instant;

use self::{
    adopt::Adopt,
    clean::{AbortCleaning, Cleaning},
    deploy::{Deploy, DeployFailed},
    inspect::{Inspect, InspectFailed},
    rescue::{Rescue, Unrescue},
    service::Service,
    tear_down::TearDown,
    verify::Verify,
};
use super::{
    Ctx,
    task::{self, Decision, Hold, Move, Task, change_node, log_change},
    worker::{Flow, Worker, hw},
};
use crate::{
    db,
    drivers::{Driver, DriverError},
    error::{Error, Result},
    node::{Node, NodeChanges, PowerState},
    states::{Event, ProvisionState},
};

/// The flow a move hands the node to, and how the move is written with it.
pub(super) struct Next {
    flow: Box<dyn Flow>,
    /// Whether the move is written without the flow when no worker is free, rather than
    /// refused: a failed deploy is recorded even when nobody can power the node off.
    optional: bool,
    /// The target the flow sets instead of the state's registered one: manual cleaning goes
    /// back to manageable, not on to available.
    target: Option<ProvisionState>,
}

impl Next {
    fn of(flow: impl Flow) -> Next {
        Next {
            flow: Box::new(flow),
            optional: false,
            target: None,
        }
    }
}

/// The flow that must follow a move into `to`, None when the move completes the operation.
/// Which flow Ferrum runs in a state is the conductor's own fact, decided for every state.
#[deny(clippy::wildcard_enum_match_arm)]
fn after(to: ProvisionState, event: Event) -> Result<Option<Next>> {
    use ProvisionState as S;
    match to {
        S::Deploying => Ok(Some(Next::of(Deploy))),
        S::Deleting => Ok(Some(Next::of(TearDown))),
        S::Cleaning if event == Event::Clean => Ok(Some(Next {
            target: Some(S::Manageable),
            ..Next::of(Cleaning::Manual)
        })),
        S::Cleaning if event == Event::Resume => Ok(Some(Next::of(Cleaning::Resumed))),
        S::Cleaning => Ok(Some(Next::of(Cleaning::Automated))),
        S::Verifying => Ok(Some(Next::of(Verify))),
        S::Inspecting => Ok(Some(Next::of(Inspect))),
        S::Adopting => Ok(Some(Next::of(Adopt))),
        S::Rescuing => Ok(Some(Next::of(Rescue))),
        S::Unrescuing => Ok(Some(Next::of(Unrescue))),
        S::Servicing => Ok(Some(Next::of(Service))),
        // Unholding a deploy or a cleaning only lets the next heartbeat pick the node up
        // again (Ironic's `do_provisioning_action`): no worker follows. Unholding servicing
        // continues it at once, from the step after the hold (Ironic spawns
        // `continue_node_service`).
        S::DeployWait | S::CleanWait if event == Event::Unhold => Ok(None),
        S::CleanFail if event == Event::Abort => Ok(Some(Next::of(AbortCleaning))),
        // Only a deploy waiting for its agent fails through a move; a deploy that fails in
        // its worker powers nothing off, as in Ironic (`deploying_error_handler`).
        S::DeployFail if event == Event::Fail => Ok(Some(Next {
            optional: true,
            ..Next::of(DeployFailed)
        })),
        // An inspection failed while its agent was awaited: the ramdisk goes, the node off.
        S::InspectFail if matches!(event, Event::Fail | Event::Abort) => Ok(Some(Next {
            optional: true,
            ..Next::of(InspectFailed)
        })),
        S::ServiceWait if event == Event::Unhold => Ok(Some(Next::of(Service))),
        // Unstable states whose work Ferrum does not run yet.
        S::DeployWait | S::CleanWait | S::InspectWait | S::RescueWait | S::ServiceWait => {
            Err(Error::InvalidParameterValue(format!(
                "Moving a node to \"{to}\" is not supported by Ferrum yet."
            )))
        }
        // Stable, failure and hold states: the move completes the operation.
        S::Enroll
        | S::Manageable
        | S::Available
        | S::Active
        | S::Error
        | S::Rescue
        | S::DeployFail
        | S::CleanFail
        | S::InspectFail
        | S::AdoptFail
        | S::RescueFail
        | S::UnrescueFail
        | S::ServiceFail
        | S::DeployHold
        | S::CleanHold
        | S::ServiceHold => Ok(None),
    }
}

/// Checks `event` (named `verb` to the client) against the node's state in the table, runs
/// `check`, and applies the event: at once when it completes the operation (a stable
/// destination), or, taking the lock in the same statement, handing the node to a worker that
/// continues the work. No free worker: NoFreeConductorWorker, with the node untouched.
pub(super) async fn start(
    ctx: &Ctx,
    node: Node,
    deadline: Option<Instant>,
    verb: &str,
    event: Event,
    check: impl Fn(&Node, &Driver) -> Result<NodeChanges>,
) -> Result<()> {
    if let Some((task, flow, worker)) = begin(ctx, node, deadline, verb, event, check).await? {
        worker.run(task, flow)?;
    }
    Ok(())
}

/// [`start`] up to the run: the move checked and written; when work follows it, the task that
/// holds the lock, the flow the new state names and the worker reserved for it.
pub(super) async fn begin(
    ctx: &Ctx,
    node: Node,
    deadline: Option<Instant>,
    verb: &str,
    event: Event,
    check: impl Fn(&Node, &Driver) -> Result<NodeChanges>,
) -> Result<Option<(Task, Box<dyn Flow>, Worker)>> {
    let before = node.provision_state;
    let uuid = node.uuid.clone();
    let mut worker: Option<Worker> = None;
    let mut next: Option<Next> = None;
    // The state and target the written move left (the last decision is the one written).
    let mut moved_from = None;
    let (node, task) = change_node(ctx, &uuid, Some(node), deadline, |node| {
        // The move is computed once, from the node as read, and carried to the write.
        let step = Move::of(node, event, verb)?;
        moved_from = Some((node.provision_state, node.target_provision_state));
        let driver = ctx.drivers.for_node(node)?;
        let extra = check(node, &driver)?;
        next = after(step.to(), event)?;
        let Some(flow) = &next else {
            return Ok(Decision::Write(step.changes(false, extra), Hold::Release));
        };
        let target = flow.target;
        if let Err(e) = Worker::reserve(ctx, &mut worker) {
            if flow.optional {
                tracing::warn!(node.uuid = %node.uuid, "No free worker for \"{}\" on node {}; the move is written without it", flow.flow.name(), node.uuid);
                next = None;
                return Ok(Decision::Write(step.changes(false, extra), Hold::Release));
            }
            return Err(e);
        }
        // A new operation clears the last one's error, unless the move itself writes one (an
        // aborted cleaning says so while its worker shuts the ramdisk down).
        let extra = if extra.last_error.is_some() {
            extra
        } else {
            extra.last_error(None)
        };
        let mut changes = step.changes(true, extra);
        if let Some(target) = target {
            changes.target_provision_state = Some(Some(target));
        }
        Ok(Decision::Write(changes, Hold::Keep))
    })
    .await?;
    log_change(before, &node, event);
    // Not when the request had been applied already (no decision was made this time).
    if let Some((previous, previous_target)) = moved_from {
        task::notify_move(ctx, &node, previous, previous_target, event);
    }
    Ok(match (task, next, worker) {
        (Some(task), Some(next), Some(worker)) => Some((task, next.flow, worker)),
        _ => None,
    })
}

/// NodeInMaintenance for `op` ("provisioning", "rescuing", ...) on a node in maintenance.
fn refuse_in_maintenance(node: &Node, op: &str) -> Result<()> {
    if node.maintenance {
        return Err(Error::NodeInMaintenance {
            op: op.to_owned(),
            node: node.uuid.clone(),
        });
    }
    Ok(())
}

/// The node's ports as the agent is shown them (Ironic's `port.as_dict()`).
async fn ports_for_agent(task: &Task) -> Result<Vec<Value>> {
    ports_of(&task.ctx().db, &task.node).await
}

/// `node`'s ports as the agent is shown them.
pub(crate) async fn ports_of(db: &db::Db, node: &Node) -> Result<Vec<Value>> {
    let filter = db::ports::PortFilter {
        node_uuid: Some(node.uuid.clone()),
        ..Default::default()
    };
    let page = db::listing::Page {
        sort: db::ports::SortKey::Id,
        descending: false,
        limit: 1000,
        marker: None,
    };
    let ports = db::ports::list_ports(db, &filter, &page).await?;
    Ok(ports
        .iter()
        .map(|p| {
            serde_json::json!({
                "uuid": p.uuid,
                "address": p.address,
                "node_id": node.id,
                "pxe_enabled": p.pxe_enabled,
                "local_link_connection": p.local_link_connection.0,
                "physical_network": p.physical_network,
                "extra": p.extra.0,
            })
        })
        .collect())
}

/// Powers the node off, or reboots it if it may not be powered off (API 1.95); the power
/// state it is left in.
pub(super) async fn power_off_or_reboot(
    task: &Task,
    driver: &Driver,
) -> std::result::Result<PowerState, String> {
    let timeout = Duration::from_secs(60);
    let (change, power) = if task.node.disable_power_off {
        (driver.power.reboot(&task.node, timeout), PowerState::On)
    } else {
        let off = driver
            .power
            .set_power_state(&task.node, PowerState::Off, timeout);
        (off, PowerState::Off)
    };
    hw(task, change).await?.map_err(|e| e.to_string())?;
    Ok(power)
}

/// The reserved step name that pauses a deploy, a cleaning or a servicing in its hold state
/// until `unhold` (Ironic's `steps.use_reserved_step_handler`); it belongs to no interface's
/// steps.
pub(crate) const HOLD_STEP: &str = "hold";

/// A step's `interface.step` (Ironic's `steps.step_id`), None for no step.
pub(super) fn step_id(step: &serde_json::Map<String, Value>) -> Option<String> {
    let interface = step.get("interface").and_then(Value::as_str)?;
    let name = step.get("step").and_then(Value::as_str)?;
    Some(format!("{interface}.{name}"))
}

/// The end of verification and adoption: the power state read and recorded with the `done` move.
/// `read_failed` and `write_failed` word a failure as the flow reports it.
async fn done_with_power_state(
    task: &mut Task,
    driver: &Driver,
    read_failed: impl FnOnce(DriverError) -> String,
    write_failed: impl FnOnce(Error) -> String,
) -> std::result::Result<(), String> {
    let power = hw(task, driver.power.get_power_state(&task.node))
        .await?
        .map_err(read_failed)?;
    let changes = NodeChanges::default().power(Some(power), None);
    task.process_event(Event::Done, false, changes.release())
        .await
        .map_err(write_failed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_flow_follows_a_move_into_a_state_the_conductor_works_in() {
        for state in ProvisionState::ALL {
            // The states whose work runs on a conductor.
            let runs = state.stuck_fail_event_applies();
            match after(state, Event::Deploy) {
                Ok(Some(_)) => assert!(runs, "{state}"),
                Ok(None) => assert!(!state.is_unstable(), "{state}"),
                Err(_) => assert!(state.is_unstable() && !runs, "{state}"),
            }
        }
        // Manual cleaning goes back to manageable; automated cleaning keeps its target.
        let clean = |event| {
            let next = after(ProvisionState::Cleaning, event)
                .expect("a move into cleaning")
                .expect("a cleaning flow");
            (next.flow.name(), next.target)
        };
        assert_eq!(
            clean(Event::Clean),
            ("Cleaning", Some(ProvisionState::Manageable))
        );
        assert_eq!(clean(Event::Provide), ("Cleaning", None));
        // Unholding servicing continues it; unholding a deploy or a cleaning waits.
        let unhold = |state| {
            after(state, Event::Unhold)
                .ok()
                .flatten()
                .map(|next| next.flow.name())
        };
        assert_eq!(unhold(ProvisionState::ServiceWait), Some("Servicing"));
        assert!(unhold(ProvisionState::CleanWait).is_none());
        assert!(unhold(ProvisionState::DeployWait).is_none());
    }
}
