//! Cleaning: automated (after provide or tear down), manual (the `clean` verb, with steps), and
//! either resumed from `clean wait` once its agent has called back or finished a step
//! (`Cleaning`); the wait in `clean wait` for the node's agent, which a heartbeat or a poller
//! ends (`continue_cleaning`, through `agent_wait.rs`) and a timeout fails
//! (`fail_timed_out_cleaning`); and the ramdisk's shut-down after an abort
//! (`AbortCleaning`). The steps themselves run in `step_runner.rs`.

use std::time::Duration;

use serde_json::Value;
use tokio::time::Instant;

use super::{
    HOLD_STEP,
    agent_wait::{self, AgentWait},
    ports_for_agent, power_off_or_reboot, start, step_id,
    step_runner::{StepRun, run_steps, step_names},
};
use crate::{
    conductor::{
        Ctx,
        task::Task,
        worker::{Failure, Flow, hw},
    },
    db,
    drivers::{Driver, StepContext, StepPoll},
    error::{Error, Result},
    node::{self, Json, JsonObject, Node, NodeChanges, without_agent_boot},
    states::{Event, ProvisionState},
};

/// Manual cleaning with `clean_steps`, each checked against the steps the node's interfaces
/// offer (`Driver::clean_steps`: the deploy interface's disk erasures, which do nothing on fake
/// hardware, and the BIOS interface's), with Ironic's `_validate_user_step` rules for their
/// arguments; a step another interface (or a `no-*` one) does not offer is refused.
pub async fn do_node_clean(
    ctx: &Ctx,
    node: Node,
    clean_steps: Vec<Value>,
    disable_ramdisk: bool,
    deadline: Option<Instant>,
) -> Result<()> {
    // Whether the ramdisk is booted is kept with the node while it cleans, as Ironic keeps it.
    start(
        ctx,
        node,
        deadline,
        "clean",
        Event::Clean,
        |node, driver| {
            let info = CleanSteps.accept(node, driver, &clean_steps, disable_ramdisk)?;
            Ok(NodeChanges {
                driver_internal_info: Some(Json(info)),
                ..NodeChanges::default()
            })
        },
    )
    .await
}

/// A cleaning, run by a worker: it starts, or goes on after its agent.
#[derive(Debug, Clone, Copy)]
pub(super) enum Cleaning {
    /// Automated cleaning (after provide or tear down): ends available ([`clean`]).
    Automated,
    /// Cleaning asked for with steps (`clean` verb): ends manageable ([`manual_clean`]).
    Manual,
    /// Either cleaning, resumed from `clean wait` once its agent has called back or finished a
    /// step (in-band cleaning): goes on with the step after the one it waited in
    /// ([`resume_clean`]).
    Resumed,
}

#[async_trait::async_trait]
impl Flow for Cleaning {
    fn name(&self) -> &'static str {
        "Cleaning"
    }

    async fn run(&self, task: &mut Task, driver: &Driver) -> std::result::Result<(), String> {
        match self {
            Cleaning::Automated => clean(task, driver).await,
            Cleaning::Manual => manual_clean(task, driver).await,
            Cleaning::Resumed => resume_clean(task, driver).await,
        }
    }

    /// The next cleaning decides for itself whether to boot the ramdisk, and reads its steps
    /// again ([`clean_failure`]).
    fn failure(&self, node: &Node, message: &str) -> Failure {
        Failure {
            extra: clean_failure(node, message),
            fail_edge: true,
        }
    }
}

/// Automated cleaning, unless the node's `automated_clean` (else the conductor's setting) turns
/// it off. The fake hardware has no clean steps, so either way cleaning completes at once; an
/// in-band deploy interface (`direct`) boots the ramdisk and waits for its agent, whose clean
/// steps of priority above 0 then run ([`resume_clean`]). A
/// retired node ends in manageable, not available: it is not handed out again (Ironic's
/// `cleaning.do_next_clean_step`; Ironic's path for disabled cleaning, `do_node_clean`, sends a
/// retired node to available, against what `retired` promises; Ferrum does not).
pub(super) async fn clean(task: &mut Task, driver: &Driver) -> std::result::Result<(), String> {
    let enabled = task
        .node
        .automated_clean
        .unwrap_or(task.ctx().config.automated_clean);
    if !enabled {
        tracing::info!(node.uuid = %task.node.uuid, "Automated cleaning is disabled; skipping it");
    } else if driver.deploy.cleans_in_band() && boot_cleaning_ramdisk(task, driver).await? {
        return Ok(());
    }
    let event = if task.node.retired {
        Event::Manage
    } else {
        Event::Done
    };
    task.process_event(event, false, NodeChanges::default().release())
        .await
        .map_err(|e| format!("Failed to finish cleaning: {e}"))
}

/// Manual cleaning: the deploy interface prepares the ramdisk unless the request disabled it
/// (API 1.70; Ironic's `cleaning.do_node_clean`); an in-band one (`direct`) boots it and waits
/// in `clean wait` for its agent ([`resume_clean`] goes on). The steps, checked when the request
/// was accepted, run in order on their interfaces ([`run_steps`]: the fake deploy's erasures do
/// nothing, the agent's run in the agent and are waited for; a BIOS step's settings are
/// stored); then back to manageable. A reserved `hold` step stops there in `clean hold`,
/// remembering its index, with the lock released (Ironic's `cleaning.do_next_clean_step`);
/// after `unhold` the agent's next heartbeat continues it. The fake deploy has no agent, so
/// such a node waits in `clean wait` for `clean_callback_timeout` or an abort, as a
/// fake-hardware node does in Ironic.
async fn manual_clean(task: &mut Task, driver: &Driver) -> std::result::Result<(), String> {
    let disabled = task
        .node
        .driver_internal_info
        .get(DISABLE_RAMDISK)
        .and_then(Value::as_bool)
        .unwrap_or(false);
    if disabled {
        tracing::info!(node.uuid = %task.node.uuid,
            "Skipping preparing for in-band cleaning since out-of-band only cleaning has been requested for node {}", task.node.uuid);
    } else if boot_cleaning_ramdisk(task, driver).await? {
        return Ok(());
    }
    run_steps(task, driver, CleanSteps, 0).await
}

/// Boots the deploy ramdisk for cleaning (the deploy interface's `prepare_cleaning`). An
/// in-band interface leaves the node in `clean wait`, lock released, until its agent calls
/// back ([`continue_cleaning`]): true. Out of band nothing was booted: false, go on.
async fn boot_cleaning_ramdisk(
    task: &mut Task,
    driver: &Driver,
) -> std::result::Result<bool, String> {
    let uuid = task.node.uuid.clone();
    // A ramdisk booted over the network needs the node's MACs; out of band nothing is booted.
    let ports = if driver.deploy.cleans_in_band() {
        ports_for_agent(task)
            .await
            .map_err(|e| format!("Failed to read the ports of node {uuid}: {e}"))?
    } else {
        Vec::new()
    };
    let context = StepContext {
        driver,
        ports: &ports,
        config: &task.ctx().config,
        inspection: false,
    };
    let done = hw(task, driver.deploy.prepare_cleaning(&task.node, &context))
        .await?
        .map_err(|e| format!("Failed to prepare node {uuid} for cleaning: {e}"))?;
    if !done.waits {
        return Ok(false);
    }
    // The ramdisk booted for this cleaning has a new agent, URL and token.
    let mut info = without_agent_boot(&task.node.driver_internal_info);
    info.remove(CleanSteps.keys().1);
    let mut changes = NodeChanges {
        driver_internal_info: Some(Json(info)),
        ..NodeChanges::default()
    };
    if let Some(power) = done.power {
        changes = changes.power(Some(power), None);
    }
    task.process_event(Event::Wait, false, changes.release())
        .await
        .map_err(|e| {
            format!("Failed to record that node {uuid} waits for its cleaning ramdisk: {e}")
        })?;
    tracing::info!(node.uuid = %uuid, "Node {uuid} boots its ramdisk for cleaning and waits for the agent");
    Ok(true)
}

/// Cleaning resumed from `clean wait` ([`continue_cleaning`]). When the ramdisk's agent has
/// just come up, its clean steps are read (Ironic's `_refresh_clean_steps`), and automated
/// cleaning decides its steps from them: those of priority above 0, highest first. Then the
/// steps run from the one after the step it waited in.
async fn resume_clean(task: &mut Task, driver: &Driver) -> std::result::Result<(), String> {
    let reached = CleanSteps.reached(&task.node);
    if reached.is_none() {
        let uuid = task.node.uuid.clone();
        let ports = ports_for_agent(task)
            .await
            .map_err(|e| format!("Failed to read the ports of node {uuid}: {e}"))?;
        let context = StepContext {
            driver,
            ports: &ports,
            config: &task.ctx().config,
            inspection: false,
        };
        let (offered, done) = hw(
            task,
            driver.deploy.refresh_clean_steps(&task.node, &context),
        )
        .await?
        .map_err(|e| format!("Failed to get the clean steps of node {uuid} from its agent: {e}"))?;
        let mut info = task.node.driver_internal_info.0.clone();
        info.extend(done.remember);
        if !is_manual_clean(&task.node) {
            let steps = automated_clean_steps(offered);
            let names: Vec<String> = steps
                .iter()
                .filter_map(|s| s.as_object().and_then(step_id))
                .collect();
            tracing::info!(node.uuid = %uuid, "Automated cleaning of node {uuid} runs {names:?}");
            info.insert(CleanSteps.keys().0.to_owned(), Value::Array(steps));
        }
        task.write(NodeChanges {
            driver_internal_info: Some(Json(info)),
            ..NodeChanges::default()
        })
        .await
        .map_err(|e| format!("Failed to record the clean steps of node {uuid}: {e}"))?;
    }
    run_steps(task, driver, CleanSteps, reached.map_or(0, |i| i + 1)).await
}

/// The steps automated cleaning runs of those offered: priority above 0, highest first (ties
/// in the order offered), as the step objects cleaning keeps.
fn automated_clean_steps(mut offered: Vec<crate::steps::CleanStep>) -> Vec<Value> {
    offered.retain(|s| s.priority > 0);
    offered.sort_by_key(|s| std::cmp::Reverse(s.priority));
    offered
        .into_iter()
        .map(|s| {
            serde_json::json!({"interface": s.interface, "step": s.step, "priority": s.priority, "args": {}})
        })
        .collect()
}

/// A cleaning aborted from `clean wait` or `clean hold`, now `clean failed`: its ramdisk is
/// shut down (Ironic's `do_node_clean_abort` -> `tear_down_cleaning`, [`abort_clean`]).
pub(super) struct AbortCleaning;

#[async_trait::async_trait]
impl Flow for AbortCleaning {
    fn name(&self) -> &'static str {
        "Aborting cleaning"
    }

    async fn run(&self, task: &mut Task, driver: &Driver) -> std::result::Result<(), String> {
        abort_clean(task, driver).await
    }

    /// The node stays `clean failed`, in maintenance: its ramdisk may still run (Ironic's
    /// `cleaning_error_handler` with `set_fail_state=False`).
    fn failure(&self, _: &Node, message: &str) -> Failure {
        Failure {
            extra: NodeChanges {
                maintenance: Some(true),
                fault: Some(Some(CLEAN_FAILURE.to_owned())),
                maintenance_reason: Some(Some(node::truncate_error(message.to_owned()))),
                ..NodeChanges::default()
            },
            fail_edge: false,
        }
    }
}

/// After an aborted cleaning (the node already `clean failed`, its `last_error` saying so):
/// powers the node off (or reboots it, API 1.95) and undoes the ramdisk's boot, so that the
/// ramdisk does not go on running, as Ironic's `tear_down_cleaning` does.
async fn abort_clean(task: &mut Task, driver: &Driver) -> std::result::Result<(), String> {
    let failed =
        |e: String| format!("Failed to tear down cleaning after aborting the operation: {e}");
    let power = power_off_or_reboot(task, driver).await.map_err(failed)?;
    hw(task, driver.deploy.clean_up_boot(&task.node, driver))
        .await?
        .map_err(|e| failed(e.to_string()))?;
    task.write(NodeChanges::default().power(Some(power), None).release())
        .await
        .map_err(|e| failed(e.to_string()))
}

/// The steps of a cleaning, run by the step runner ([`run_steps`]): checked against the
/// driver's clean steps, shown in `clean_step`, run on their interfaces and, in band, waited for
/// in the agent.
#[derive(Debug, Clone, Copy)]
pub(crate) struct CleanSteps;

#[async_trait::async_trait]
impl StepRun for CleanSteps {
    fn name(self) -> &'static str {
        "clean"
    }

    fn keys(self) -> (&'static str, &'static str) {
        ("clean_steps", "clean_step_index")
    }

    fn disable_ramdisk_key(self) -> &'static str {
        DISABLE_RAMDISK
    }

    fn check_step(self, node: &Node, driver: &Driver, step: &Value) -> Result<()> {
        check_clean_step(node, driver, step)
    }

    fn showing(self, mut changes: NodeChanges, step: JsonObject) -> NodeChanges {
        changes.clean_step = Some(Json(step));
        changes
    }

    /// Manual cleaning goes back to manageable, automated cleaning on to available (a retired
    /// node to manageable: it is not handed out again).
    fn end_event(self, node: &Node) -> Event {
        if is_manual_clean(node) || node.retired {
            Event::Manage
        } else {
            Event::Done
        }
    }

    fn in_band(self, node: &Node, driver: &Driver) -> bool {
        cleans_in_ramdisk(node, driver)
    }

    fn waits_before(self, _: &Node, _: &str, _: &str) -> bool {
        false
    }

    /// A clean step that runs on in the agent leaves the cleaning in `clean wait`, the lock
    /// released, with a poller asking the agent how the step does.
    async fn execute(
        self,
        task: &mut Task,
        driver: &Driver,
        index: usize,
        step: &Value,
        ports: &[Value],
    ) -> std::result::Result<bool, String> {
        let (interface, name) = step_names(step);
        if !execute_clean_step(task, driver, step, interface, name, ports).await? {
            return Ok(false);
        }
        tracing::info!(node.uuid = %task.node.uuid,
            "Clean step {interface}.{name} of node {} runs in its agent; the cleaning waits for it", task.node.uuid);
        task.process_event(Event::Wait, false, NodeChanges::default().release())
            .await
            .map_err(|e| {
                format!("Failed to record that clean step {interface}.{name} waits: {e}")
            })?;
        agent_wait::spawn_poller(task.ctx().clone(), task.node.clone(), CleanCallback, index);
        Ok(true)
    }
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
        inspection: false,
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

/// Checks one step of a manual cleaning against the node's driver (Ironic's
/// `_validate_user_clean_steps`): offered by an interface, no argument it does not take, every
/// required one given, and the arguments as the interface wants them. The reserved `hold` step
/// belongs to the conductor.
fn check_clean_step(node: &Node, driver: &Driver, step: &Value) -> Result<()> {
    let interface = step.get("interface").and_then(Value::as_str);
    let name = step.get("step").and_then(Value::as_str);
    let (Some(interface), Some(name)) = (interface, name) else {
        return Err(Error::InvalidParameterValue(format!(
            "Each clean step needs \"interface\" and \"step\": {step}"
        )));
    };
    if name == HOLD_STEP {
        return Ok(());
    }
    let Some(offered) = driver
        .clean_steps()
        .into_iter()
        .find(|s| s.interface == interface && s.step == name)
    else {
        return Err(Error::InvalidParameterValue(format!(
            "node does not support this clean step: {interface}.{name}"
        )));
    };
    let args = step_args(step);
    let unexpected: Vec<&str> = args
        .keys()
        .map(String::as_str)
        .filter(|a| !offered.args.iter().any(|(known, _)| known == a))
        .collect();
    if !unexpected.is_empty() {
        return Err(Error::InvalidParameterValue(format!(
            "clean step {step} has these unexpected arguments: {}",
            unexpected.join(", ")
        )));
    }
    let missing: Vec<&str> = offered
        .args
        .iter()
        .filter(|(a, required)| *required && !args.contains_key(*a))
        .map(|(a, _)| *a)
        .collect();
    if !missing.is_empty() {
        return Err(Error::InvalidParameterValue(format!(
            "clean step {step} is missing these required arguments: {}",
            missing.join(", ")
        )));
    }
    driver
        .check_clean_step(interface, name, &args)
        .map_err(|e| e.into_error(&node.driver))
}

/// Whether the node's cleaning runs in its deploy ramdisk: the deploy interface cleans in band
/// and the cleaning did not disable the ramdisk (API 1.70).
fn cleans_in_ramdisk(node: &Node, driver: &Driver) -> bool {
    driver.deploy.cleans_in_band()
        && !node
            .driver_internal_info
            .get(DISABLE_RAMDISK)
            .and_then(Value::as_bool)
            .unwrap_or(false)
}

/// Whether the node's cleaning is a manual one (it returns to manageable).
fn is_manual_clean(node: &Node) -> bool {
    node.target_provision_state == Some(ProvisionState::Manageable)
}

/// Where manual cleaning keeps whether it runs without booting the ramdisk (API 1.70, Ironic's
/// `driver_internal_info.cleaning_disable_ramdisk`), removed when cleaning ends.
const DISABLE_RAMDISK: &str = "cleaning_disable_ramdisk";

/// What a failed cleaning writes besides `last_error` (Ironic's `cleaning_error_handler`): the
/// steps forgotten, so that the next cleaning reads them again; and when a clean step had begun,
/// maintenance with the `clean failure` fault and, unless the node has one already, the error
/// as its reason: a disk half erased must not go back into service unseen. Leaving maintenance
/// clears the fault.
fn clean_failure(node: &Node, message: &str) -> NodeChanges {
    let mut changes = NodeChanges {
        driver_internal_info: Some(Json(CleanSteps.without_info(node))),
        clean_step: Some(Json::default()),
        ..NodeChanges::default()
    };
    if CleanSteps.reached(node).is_some() {
        changes.maintenance = Some(true);
        changes.fault = Some(Some(CLEAN_FAILURE.to_owned()));
        if node.maintenance_reason.as_deref().is_none_or(str::is_empty) {
            changes.maintenance_reason = Some(Some(node::truncate_error(message.to_owned())));
        }
    }
    changes
}

/// The fault of a node whose clean step failed (Ironic's `faults.CLEAN_FAILURE`).
const CLEAN_FAILURE: &str = "clean failure";

/// A cleaning waiting in `clean wait` for its agent: to call back after booting, or to finish
/// one of its steps.
#[derive(Clone, Copy, Debug)]
pub(super) struct CleanCallback;

#[async_trait::async_trait]
impl AgentWait for CleanCallback {
    fn state(self) -> ProvisionState {
        ProvisionState::CleanWait
    }

    fn noun(self) -> &'static str {
        "cleaning"
    }

    fn timeout(self, ctx: &Ctx) -> Duration {
        ctx.config.clean_callback_timeout
    }

    /// The cleaning reads the step it waits in from the node.
    async fn poll(self, ctx: &Ctx, node: &Node, _: usize) -> Result<StepPoll> {
        poll_cleaning(ctx, node).await
    }

    async fn settle(self, ctx: &Ctx, node: Node, _: usize, poll: StepPoll) -> Result<()> {
        settle_cleaning(ctx, node, poll).await
    }

    fn failure(self, node: &Node, message: &str) -> NodeChanges {
        clean_failure(node, message)
    }
}

/// The clean step at `index` of the node's cleaning, as `(interface, step)`.
fn clean_step_at(node: &Node, index: usize) -> Option<(String, String)> {
    let step = node
        .driver_internal_info
        .get(CleanSteps.keys().0)?
        .as_array()?
        .get(index)?;
    Some((
        step.get("interface")?.as_str()?.to_owned(),
        step.get("step")?.as_str()?.to_owned(),
    ))
}

/// Where the in-band cleaning of `node`, in `clean wait`, stands: waiting for its agent's first
/// heartbeat (finished once the agent has called back), held then unheld (finished), or waiting
/// for the agent's step (asked of the agent).
async fn poll_cleaning(ctx: &Ctx, node: &Node) -> Result<StepPoll> {
    let Some(index) = CleanSteps.reached(node) else {
        return Ok(if node.driver_internal_info.contains_key("agent_url") {
            StepPoll::Finished
        } else {
            StepPoll::Running
        });
    };
    let Some((interface, step)) = clean_step_at(node, index) else {
        return Ok(StepPoll::Running);
    };
    if step == HOLD_STEP {
        return Ok(StepPoll::Finished);
    }
    let driver = ctx.drivers.for_node(node)?;
    driver
        .deploy
        .poll_clean_step(node, &interface, &step)
        .await
        .map_err(|e| e.into_error(&node.driver))
}

/// Continues the cleaning of `node` (as just read or written, in `clean wait`) once its agent
/// has called back or finished the step it waits in, or fails it if the step failed; nothing
/// while the step runs. Called on each heartbeat of the node's agent (Ironic's
/// `HeartbeatMixin.heartbeat` -> `continue_cleaning`) and by the poller of a waiting step.
pub async fn continue_cleaning(ctx: &Ctx, node: Node) -> Result<()> {
    if node.provision_state != ProvisionState::CleanWait || !ctx.lease.is_serving() {
        return Ok(());
    }
    match poll_cleaning(ctx, &node).await {
        Ok(StepPoll::Running) => Ok(()),
        Ok(poll) => settle_cleaning(ctx, node, poll).await,
        Err(e) => {
            tracing::info!(node.uuid = %node.uuid, error = %e,
                "Cannot ask the agent of node {} how its cleaning stands: {e}", node.uuid);
            Ok(())
        }
    }
}

/// Resumes (finished) or fails (failed) the cleaning of `node` waiting in `clean wait`,
/// provided it still waits where it did (a heartbeat and the poller may both get here).
async fn settle_cleaning(ctx: &Ctx, node: Node, poll: StepPoll) -> Result<()> {
    let reached = CleanSteps.reached(&node);
    let waited_since = node.provision_updated_at;
    let still_waiting = move |node: &Node| {
        if node.provision_state == ProvisionState::CleanWait
            && CleanSteps.reached(node) == reached
            && node.provision_updated_at == waited_since
        {
            Ok(())
        } else {
            Err(Error::Conflict(format!(
                "The cleaning of node {} has moved on already.",
                node.uuid
            )))
        }
    };
    agent_wait::settle_wait(CleanCallback, ctx, node, poll, still_waiting).await
}

/// Fails the cleanings whose wait in `clean wait` has outlasted `clean_callback_timeout`
/// (Ironic's `_check_cleanwait_timeouts`), saying which step waited for what. As for deploys,
/// only unlocked nodes not in maintenance, of this conductor, are passed.
pub async fn fail_timed_out_cleaning(ctx: &Ctx, node: Node) -> Result<()> {
    let what = match CleanSteps
        .reached(&node)
        .and_then(|i| clean_step_at(&node, i))
    {
        None => "the cleaning waited for the agent's first heartbeat".to_owned(),
        Some((_, step)) if step == HOLD_STEP => {
            "the cleaning, unheld, waited for the agent to call back".to_owned()
        }
        Some((interface, step)) => {
            format!("clean step {interface}.{step} waited for the agent to finish it")
        }
    };
    let message = format!(
        "Timeout reached while cleaning the node {}: {what} for {} s. Please check if the ramdisk responsible for the cleaning is running on the node.",
        node.uuid,
        ctx.config.clean_callback_timeout.as_secs()
    );
    agent_wait::fail_timed_out(CleanCallback, ctx, node, message).await
}
