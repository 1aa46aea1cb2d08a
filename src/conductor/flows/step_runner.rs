//! The step runner: the steps a client named for a manual cleaning or a servicing, or that an
//! in-band cleaning read from its agent, run in order (`run_steps`), the reserved `hold` step
//! included. What a step does is its interface's, and how a run records it its flow's (the
//! [`StepRun`] trait, which `clean.rs` and `service.rs` implement): the fake hardware's steps do
//! nothing, an agent's clean step runs in the agent and is waited for (`agent_wait.rs`), a BIOS
//! step's settings are stored.

use serde_json::Value;

use super::{HOLD_STEP, ports_for_agent, power_off_or_reboot};
use crate::{
    conductor::{task::Task, worker::hw},
    drivers::Driver,
    error::{Error, Result},
    node::{Json, JsonObject, Node, NodeChanges, without_agent_boot},
    states::Event,
};

/// A run of the steps a client named: manual cleaning (`clean`, API 1.15) or servicing
/// (`service`, 1.87). Ironic runs both alike (`cleaning.py`, `servicing.py`): the steps are
/// checked against what the driver offers before the request is accepted, kept in
/// `driver_internal_info` with the index of the one reached, run in order, and the reserved
/// `hold` step pauses the run in its hold state with the lock released. What differs is the
/// flow's: each implements this trait (`clean::CleanSteps`, `service::ServiceSteps`), and the
/// runner calls it without naming either.
#[async_trait::async_trait]
pub(crate) trait StepRun: Copy + Send + Sync + 'static {
    /// What the run is called in messages (`clean`, `service`).
    fn name(self) -> &'static str;

    /// Where the run keeps its steps and the index of the one reached (Ironic's
    /// `clean_steps`/`clean_step_index`, `service_steps`/`service_step_index`).
    fn keys(self) -> (&'static str, &'static str);

    /// Where the run keeps, while it runs, whether it was asked to run without booting the
    /// ramdisk (API 1.70 for cleaning, 1.108 for servicing; Ironic's keys).
    fn disable_ramdisk_key(self) -> &'static str;

    /// Refuses a step `node`'s driver does not offer (Ironic's `_validate_user_steps`: "node
    /// does not support this ... step"); the reserved `hold` step is the conductor's own.
    fn check_step(self, node: &Node, driver: &Driver, step: &Value) -> Result<()>;

    /// `changes` with the node's `clean_step` or `service_step` set to `step` (`{}`: none).
    fn showing(self, changes: NodeChanges, step: JsonObject) -> NodeChanges;

    /// The event that ends the run on `node`.
    fn end_event(self, node: &Node) -> Event;

    /// Whether the run goes on in the node's ramdisk: its agent is shown the node's ports, and
    /// the ramdisk is shut down when the run ends.
    fn in_band(self, node: &Node, driver: &Driver) -> bool;

    /// Whether step `interface.name` leaves the run waiting before it starts.
    fn waits_before(self, node: &Node, interface: &str, name: &str) -> bool;

    /// Runs step number `index`, recorded as begun; true when it goes on in the node's agent,
    /// and the run, its wait recorded, stops here until the agent has finished it.
    async fn execute(
        self,
        task: &mut Task,
        driver: &Driver,
        index: usize,
        step: &Value,
        ports: &[Value],
    ) -> std::result::Result<bool, String>;

    /// The `driver_internal_info` a run of `steps` starts from: the steps to run from the first,
    /// whether the ramdisk is to be left out, and nothing left of a run before. A run without
    /// steps, or with a step `node`'s driver does not offer ([`StepRun::check_step`]), is
    /// refused before the request is accepted.
    fn accept(
        self,
        node: &Node,
        driver: &Driver,
        steps: &[Value],
        disable_ramdisk: bool,
    ) -> Result<serde_json::Map<String, Value>> {
        if steps.is_empty() {
            return Err(Error::InvalidParameterValue(format!(
                "{}_steps must hold at least one step.",
                self.name()
            )));
        }
        for step in steps {
            self.check_step(node, driver, step)?;
        }
        let mut info = self.without_info(node);
        info.insert(self.keys().0.to_owned(), Value::Array(steps.to_vec()));
        info.insert(
            self.disable_ramdisk_key().to_owned(),
            Value::Bool(disable_ramdisk),
        );
        Ok(info)
    }

    /// `driver_internal_info` without what the run keeps there.
    fn without_info(self, node: &Node) -> serde_json::Map<String, Value> {
        let mut info = node.driver_internal_info.0.clone();
        let (steps, index) = self.keys();
        info.remove(steps);
        info.remove(index);
        info.remove(self.disable_ramdisk_key());
        info
    }

    /// The index of the step the run stopped at (held or waiting).
    fn reached(self, node: &Node) -> Option<usize> {
        node.driver_internal_info
            .get(self.keys().1)
            .and_then(Value::as_u64)
            .and_then(|i| usize::try_from(i).ok())
    }
}

/// A step's interface and name (empty where it has none: the run's check refused such steps).
pub(super) fn step_names(step: &Value) -> (&str, &str) {
    let text = |key| step.get(key).and_then(Value::as_str).unwrap_or_default();
    (text("interface"), text("step"))
}

/// The changes showing that `run` is at `step`, number `index`: the index, and the node's
/// `clean_step` or `service_step`.
fn at_step(run: impl StepRun, node: &Node, index: usize, step: &Value) -> NodeChanges {
    let mut info = node.driver_internal_info.0.clone();
    info.insert(run.keys().1.to_owned(), Value::from(index));
    let changes = NodeChanges {
        driver_internal_info: Some(Json(info)),
        ..NodeChanges::default()
    };
    run.showing(changes, step.as_object().cloned().unwrap_or_default())
}

/// The changes that end `run`, and the event they go with (its flow's: manual cleaning goes
/// back to manageable, automated cleaning on to available, servicing is done).
fn end(run: impl StepRun, node: &Node) -> (Event, NodeChanges) {
    let changes = run.showing(
        NodeChanges {
            driver_internal_info: Some(Json(run.without_info(node))),
            ..NodeChanges::default()
        },
        JsonObject::new(),
    );
    (run.end_event(node), changes)
}

/// Runs the steps `run` keeps on the task's node from the one at `first`: a step of the fake
/// hardware does nothing, or leaves the node waiting (`wait`, the lock released); the reserved
/// `hold` step stops the run in its hold state with the lock released; after the last step the
/// run ends. Servicing shows each step in `service_step` as it starts.
pub(super) async fn run_steps(
    task: &mut Task,
    driver: &Driver,
    run: impl StepRun,
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
    let in_band = run.in_band(&task.node, driver);
    let ports = if in_band {
        ports_for_agent(task)
            .await
            .map_err(|e| format!("Failed to read the ports of node {}: {e}", task.node.uuid))?
    } else {
        Vec::new()
    };
    for (index, step) in steps.iter().enumerate().skip(first) {
        let (interface, name) = step_names(step);
        let changes = at_step(run, &task.node, index, step);
        if name == HOLD_STEP {
            tracing::info!(node.uuid = %task.node.uuid, "The {what} of node {} holds at step {index}", task.node.uuid);
            return task
                .process_event(Event::Hold, false, changes.release())
                .await
                .map_err(|e| format!("Failed to record that the {what} holds: {e}"));
        }
        if run.waits_before(&task.node, interface, name) {
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
        if run.execute(task, driver, index, step, &ports).await? {
            return Ok(());
        }
    }
    let (event, mut changes) = end(run, &task.node);
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
