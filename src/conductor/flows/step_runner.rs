//! The step runner: the steps a client named for a manual cleaning or a servicing, or that an
//! in-band cleaning read from its agent, run in order (`run_steps`), the reserved `hold` step
//! included. What a step does is its interface's: the fake hardware's do nothing, an agent's
//! clean step runs in the agent and is waited for (`agent_wait.rs`), a BIOS step's settings are
//! stored.

use serde_json::Value;

use super::{
    HOLD_STEP,
    agent_wait::spawn_poller,
    clean::{CleanCallback, DISABLE_RAMDISK, check_clean_step, cleans_in_ramdisk, is_manual_clean},
    ports_for_agent, power_off_or_reboot,
    service::{check_service_step, service_step_waits},
};
use crate::{
    conductor::{task::Task, worker::hw},
    db,
    drivers::{Driver, StepContext},
    error::{Error, Result},
    node::{Json, JsonObject, Node, NodeChanges, without_agent_boot},
    states::Event,
};

/// A run of the steps a client named: manual cleaning (`clean`, API 1.15) or servicing
/// (`service`, 1.87). Ironic runs both alike (`cleaning.py`, `servicing.py`): the steps are
/// checked against what the driver offers before the request is accepted, kept in
/// `driver_internal_info` with the index of the one reached, run in order, and the reserved
/// `hold` step pauses the run in its hold state with the lock released.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum StepRun {
    Clean,
    Service,
}

impl StepRun {
    fn name(self) -> &'static str {
        match self {
            StepRun::Clean => "clean",
            StepRun::Service => "service",
        }
    }

    /// Where the run keeps, while it runs, whether it was asked to run without booting the
    /// ramdisk (API 1.70 for cleaning, 1.108 for servicing; Ironic's keys).
    pub(super) fn disable_ramdisk_key(self) -> &'static str {
        match self {
            StepRun::Clean => DISABLE_RAMDISK,
            StepRun::Service => "service_disable_ramdisk",
        }
    }

    /// Where the run keeps its steps and the index of the one reached (Ironic's
    /// `clean_steps`/`clean_step_index`, `service_steps`/`service_step_index`).
    pub(super) fn keys(self) -> (&'static str, &'static str) {
        match self {
            StepRun::Clean => ("clean_steps", "clean_step_index"),
            StepRun::Service => ("service_steps", "service_step_index"),
        }
    }

    /// Refuses, before the request is accepted, a run without steps or with a step `node`'s
    /// driver does not offer (Ironic's `_validate_user_steps`: "node does not support this
    /// ... step"); the reserved `hold` step is the conductor's own, on any interface. Clean
    /// steps are the driver's, with their arguments ([`check_clean_step`]).
    pub(super) fn check(self, node: &Node, driver: &Driver, steps: &[Value]) -> Result<()> {
        let what = self.name();
        if steps.is_empty() {
            return Err(Error::InvalidParameterValue(format!(
                "{what}_steps must hold at least one step."
            )));
        }
        for step in steps {
            match self {
                StepRun::Clean => check_clean_step(node, driver, step)?,
                StepRun::Service => check_service_step(node, step)?,
            }
        }
        Ok(())
    }

    /// `node`'s `driver_internal_info` with `steps` to run from the first, and nothing left of
    /// a run before.
    pub(super) fn with_steps(self, node: &Node, steps: &[Value]) -> serde_json::Map<String, Value> {
        let mut info = self.without_info(node);
        info.insert(self.keys().0.to_owned(), Value::Array(steps.to_vec()));
        info
    }

    /// `driver_internal_info` without what the run keeps there.
    pub(crate) fn without_info(self, node: &Node) -> serde_json::Map<String, Value> {
        let mut info = node.driver_internal_info.0.clone();
        let (steps, index) = self.keys();
        info.remove(steps);
        info.remove(index);
        info.remove(self.disable_ramdisk_key());
        info
    }

    /// The index of the step the run stopped at (held or waiting).
    pub(super) fn reached(self, node: &Node) -> Option<usize> {
        node.driver_internal_info
            .get(self.keys().1)
            .and_then(Value::as_u64)
            .and_then(|i| usize::try_from(i).ok())
    }

    /// The changes showing that the run is at `step`, number `index`: the index, and the
    /// node's `clean_step` or `service_step`.
    fn at_step(self, node: &Node, index: usize, step: &Value) -> NodeChanges {
        let mut info = node.driver_internal_info.0.clone();
        info.insert(self.keys().1.to_owned(), Value::from(index));
        let changes = NodeChanges {
            driver_internal_info: Some(Json(info)),
            ..NodeChanges::default()
        };
        self.showing(changes, step.as_object().cloned().unwrap_or_default())
    }

    /// `changes` with the node's `clean_step` or `service_step` set to `step` (`{}`: none).
    fn showing(self, mut changes: NodeChanges, step: JsonObject) -> NodeChanges {
        match self {
            StepRun::Clean => changes.clean_step = Some(Json(step)),
            StepRun::Service => changes.service_step = Some(Json(step)),
        }
        changes
    }

    /// The changes that end the run, and the event they go with: manual cleaning goes back to
    /// manageable, automated cleaning on to available (a retired node to manageable: it is not
    /// handed out again), servicing is done.
    fn end(self, node: &Node) -> (Event, NodeChanges) {
        let changes = self.showing(
            NodeChanges {
                driver_internal_info: Some(Json(self.without_info(node))),
                ..NodeChanges::default()
            },
            JsonObject::new(),
        );
        match self {
            StepRun::Clean if is_manual_clean(node) || node.retired => (Event::Manage, changes),
            StepRun::Clean | StepRun::Service => (Event::Done, changes),
        }
    }
}

/// Runs the steps `run` keeps on the task's node from the one at `first`: a step of the fake
/// hardware does nothing, or leaves the node waiting (`wait`, the lock released); the reserved
/// `hold` step stops the run in its hold state with the lock released; after the last step the
/// run ends. Servicing shows each step in `service_step` as it starts.
pub(super) async fn run_steps(
    task: &mut Task,
    driver: &Driver,
    run: StepRun,
    first: usize,
) -> std::result::Result<(), String> {
    let what = run.name();
    let steps = task
        .node
        .driver_internal_info
        .get(run.keys().0)
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    // A cleaning in the ramdisk shows the agent the node's ports, as a deploy does.
    let in_band = run == StepRun::Clean && cleans_in_ramdisk(&task.node, driver);
    let ports = if in_band {
        ports_for_agent(task)
            .await
            .map_err(|e| format!("Failed to read the ports of node {}: {e}", task.node.uuid))?
    } else {
        Vec::new()
    };
    for (index, step) in steps.iter().enumerate().skip(first) {
        let interface = step
            .get("interface")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let name = step.get("step").and_then(Value::as_str).unwrap_or_default();
        let changes = run.at_step(&task.node, index, step);
        if name == HOLD_STEP {
            tracing::info!(node.uuid = %task.node.uuid, "The {what} of node {} holds at step {index}", task.node.uuid);
            return task
                .process_event(Event::Hold, false, changes.release())
                .await
                .map_err(|e| format!("Failed to record that the {what} holds: {e}"));
        }
        let waits = run == StepRun::Service && service_step_waits(&task.node, interface, name);
        if waits {
            tracing::info!(node.uuid = %task.node.uuid, "The {what} step {interface}.{name} of node {} waits", task.node.uuid);
            return task
                .process_event(Event::Wait, false, changes.release())
                .await
                .map_err(|e| {
                    format!("Failed to record that {what} step {interface}.{name} waits: {e}")
                });
        }
        tracing::info!(node.uuid = %task.node.uuid, "Executing {what} step {interface}.{name} on node {}", task.node.uuid);
        // The step is recorded before it runs, as Ironic's `do_next_clean_step` saves it: the
        // client sees it, and a failure, also one the agent reports at once, knows that a step
        // had begun (a failed clean step puts the node in maintenance).
        task.write(changes)
            .await
            .map_err(|e| format!("Failed to record {what} step {interface}.{name}: {e}"))?;
        match run {
            StepRun::Service => {}
            StepRun::Clean => {
                let waits = execute_clean_step(task, driver, step, interface, name, &ports).await?;
                if waits {
                    tracing::info!(node.uuid = %task.node.uuid,
                        "Clean step {interface}.{name} of node {} runs in its agent; the cleaning waits for it", task.node.uuid);
                    task.process_event(Event::Wait, false, NodeChanges::default().release())
                        .await
                        .map_err(|e| {
                            format!(
                                "Failed to record that clean step {interface}.{name} waits: {e}"
                            )
                        })?;
                    spawn_poller(task.ctx().clone(), task.node.clone(), CleanCallback, index);
                    return Ok(());
                }
            }
        }
    }
    let (event, mut changes) = run.end(&task.node);
    if in_band {
        // Ironic's `tear_down_cleaning`: the ramdisk's work is done; the node goes off, and
        // the next boot has a new agent.
        let power = power_off_or_reboot(task, driver).await.map_err(|e| {
            format!(
                "Failed to tear down cleaning on node {}: {e}",
                task.node.uuid
            )
        })?;
        hw(task, driver.deploy.clean_up_boot(&task.node, driver))
            .await?
            .map_err(|e| {
                format!(
                    "Failed to tear down cleaning on node {}: {e}",
                    task.node.uuid
                )
            })?;
        changes = changes.power(Some(power), None);
        let info = changes
            .driver_internal_info
            .take()
            .map(|info| info.0)
            .unwrap_or_default();
        changes.driver_internal_info = Some(Json(without_agent_boot(&info)));
    }
    task.process_event(event, false, changes.release())
        .await
        .map_err(|e| format!("Failed to finish the {what}: {e}"))
}

/// Runs one clean step on its interface; what a BIOS step did to the settings is stored under
/// the lock the cleaning holds, as Ironic's BIOS interfaces store it. Whether the step runs on
/// in the node's agent, for the cleaning to wait for.
async fn execute_clean_step(
    task: &Task,
    driver: &Driver,
    step: &Value,
    interface: &str,
    name: &str,
    ports: &[Value],
) -> std::result::Result<bool, String> {
    let args = step_args(step);
    let uuid = task.node.uuid.clone();
    let failed = |e: &dyn std::fmt::Display| format!("Node {uuid} failed step {step}: {e}");
    let context = StepContext {
        driver,
        ports,
        config: &task.ctx().config,
    };
    let done = hw(
        task,
        driver.execute_clean_step(&task.node, interface, name, &args, &context),
    )
    .await?
    .map_err(|e| failed(&e))?;
    if let Some(settings) = done.bios_settings {
        db::bios::sync(&task.ctx().db, task.node.id, &settings)
            .await
            .map_err(|e| failed(&e))?;
    }
    Ok(done.waits)
}

/// A step's `args` (an empty object when it has none).
pub(super) fn step_args(step: &Value) -> serde_json::Map<String, Value> {
    step.get("args")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default()
}
