//! The deploy (`active`, `rebuild`): the steps decided when the deploy is asked for, run in
//! order (`Deploy`); the wait in `wait call-back` for the node's agent, which a heartbeat or a
//! poller ends (`continue_deploy`, through `agent_wait.rs`) and a timeout fails
//! (`fail_timed_out_deploy`); and the power-off after a deploy its agent failed
//! (`DeployFailed`).

use std::time::Duration;

use serde_json::Value;
use tokio::time::Instant;

use super::{
    HOLD_STEP,
    agent_wait::{self, AgentWait},
    ports_for_agent, power_off_or_reboot, refuse_in_maintenance, start,
};
use crate::{
    conductor::{
        Ctx,
        task::Task,
        worker::{Failure, Flow, hw},
    },
    configdrive, db, deploy_template,
    drivers::{Driver, StepContext, StepPoll},
    error::{Error, Result},
    node::{Json, Node, NodeChanges, PowerState, without_agent_boot},
    states::{Event, ProvisionState},
    steps::{DeployStep, DriverStep},
};

pub async fn do_node_deploy(
    ctx: &Ctx,
    node: Node,
    rebuild: bool,
    configdrive: Option<Value>,
    user_steps: Vec<DeployStep>,
    deadline: Option<Instant>,
) -> Result<()> {
    let (verb, event) = if rebuild {
        ("rebuild", Event::Rebuild)
    } else {
        ("active", Event::Deploy)
    };
    // A configdrive given as an object is built into its image here, once, as Ironic's
    // conductor does, and stored as the image.
    let configdrive = match configdrive {
        Some(Value::Object(parts)) => Some(Value::String(configdrive::for_node(&node, &parts))),
        other => other,
    };
    // The deploy templates the instance's traits name: one query, and none without traits.
    let traits = deploy_template::instance_traits(&node.instance_info);
    let templates = if traits.is_empty() {
        Vec::new()
    } else {
        db::deploy_templates::by_names(&ctx.db, &traits).await?
    };
    start(ctx, node, deadline, verb, event, |node, driver| {
        if rebuild && node.protected {
            return Err(Error::NodeProtected {
                node: node.uuid.clone(),
            });
        }
        refuse_in_maintenance(node, "provisioning")?;
        driver
            .power
            .validate(node)
            .and_then(|()| driver.deploy.validate(node))
            .map_err(|e| {
                Error::InvalidParameterValue(format!(
                    "Failed to validate deploy or power info for node {}: {e}",
                    node.uuid
                ))
            })?;
        // The steps are decided when the deploy is asked for: a bad one is the caller's 400.
        let steps = deploy_template::steps_for_deploy(
            &deploy_template::instance_traits(&node.instance_info),
            &templates,
            &user_steps,
            &driver.deploy.deploy_steps(),
        )?;
        // The ramdisk booted for this deploy has a new agent, URL and token.
        let mut info = without_agent_boot(&node.driver_internal_info);
        info.remove(STEP_INDEX);
        info.remove(USER_STEPS);
        info.insert(DEPLOY_STEPS.to_owned(), serde_json::json!(steps));
        if !user_steps.is_empty() {
            info.insert(USER_STEPS.to_owned(), serde_json::json!(user_steps));
        }
        let mut extra = NodeChanges {
            deploy_step: Some(Json(
                steps.first().map(DeployStep::to_object).unwrap_or_default(),
            )),
            driver_internal_info: Some(Json(info)),
            ..NodeChanges::default()
        };
        if let Some(configdrive) = &configdrive {
            let mut instance_info = node.instance_info.0.clone();
            instance_info.insert("configdrive".to_owned(), configdrive.clone());
            extra.instance_info = Some(Json(instance_info));
        }
        Ok(extra)
    })
    .await
}

/// Where a deploy keeps the steps it runs, in order, while it runs (Ironic's
/// `driver_internal_info.deploy_steps`, removed when the deploy ends).
const DEPLOY_STEPS: &str = "deploy_steps";

/// Where a deploy keeps the steps its request asked for (API 1.69, Ironic's
/// `driver_internal_info.user_deploy_steps`), removed when the deploy ends.
const USER_STEPS: &str = "user_deploy_steps";

/// Where a deploy that waits keeps the index (in [`DEPLOY_STEPS`]) of the step it waits in
/// (Ironic's `deploy_step_index`).
const STEP_INDEX: &str = "deploy_step_index";

/// The index of the step a waiting deploy waits in.
fn step_index(node: &Node) -> Option<usize> {
    node.driver_internal_info
        .get(STEP_INDEX)
        .and_then(Value::as_u64)
        .and_then(|i| usize::try_from(i).ok())
}

/// `driver_internal_info` without what a running deploy keeps there.
pub(crate) fn without_deploy_steps(node: &Node) -> serde_json::Map<String, Value> {
    let mut info = node.driver_internal_info.0.clone();
    info.remove(DEPLOY_STEPS);
    info.remove(STEP_INDEX);
    info.remove(USER_STEPS);
    info
}

/// The steps the deploy decided on when it was asked for.
fn decided_steps(node: &Node) -> Vec<DeployStep> {
    node.driver_internal_info
        .get(DEPLOY_STEPS)
        .and_then(|v| serde_json::from_value(v.clone()).ok())
        .unwrap_or_else(|| vec![core_step()])
}

fn core_step() -> DeployStep {
    DeployStep {
        interface: DriverStep::CORE.interface.to_owned(),
        step: DriverStep::CORE.step.to_owned(),
        args: Default::default(),
        priority: DriverStep::CORE.priority,
    }
}

/// The deploy's steps, run by a worker ([`deploy`]).
pub(super) struct Deploy;

#[async_trait::async_trait]
impl Flow for Deploy {
    fn name(&self) -> &'static str {
        "Deploy"
    }

    async fn run(&self, task: &mut Task, driver: &Driver) -> std::result::Result<(), String> {
        deploy(task, driver).await
    }

    fn failure(&self, node: &Node, _: &str) -> Failure {
        Failure {
            extra: deploy_failure(node),
            fail_edge: true,
        }
    }
}

/// What a failed deploy writes besides `last_error`: it has no current step, nor steps left to
/// run.
fn deploy_failure(node: &Node) -> NodeChanges {
    NodeChanges {
        deploy_step: Some(Json::default()),
        driver_internal_info: Some(Json(without_deploy_steps(node))),
        ..NodeChanges::default()
    }
}

/// The node at step `index` of its deploy: the step it shows, the index a resumed deploy goes on
/// from, and the power state the steps so far left, if they changed it.
fn at_step(node: &Node, step: &DeployStep, index: usize, power: Option<PowerState>) -> NodeChanges {
    let mut info = node.driver_internal_info.0.clone();
    info.insert(STEP_INDEX.to_owned(), Value::from(index));
    let changes = NodeChanges {
        deploy_step: Some(Json(step.to_object())),
        driver_internal_info: Some(Json(info)),
        ..NodeChanges::default()
    };
    match power {
        Some(state) => changes.power(Some(state), None),
        None => changes,
    }
}

/// The deploy's steps, in the order decided when it was asked for, from the first (after
/// `prepare`) or, when it resumes from `wait call-back`, from the one after the step it waited
/// in. A step that waits (for the agent to boot, or for one of its commands) moves the node to
/// `wait call-back` and releases the lock: the agent's next heartbeat, or the conductor polling
/// the agent, resumes it ([`continue_deploy`]). After the last step the node is active.
async fn deploy(task: &mut Task, driver: &Driver) -> std::result::Result<(), String> {
    let steps = decided_steps(&task.node);
    let resumed = step_index(&task.node);
    let first = match resumed {
        Some(index) => index + 1,
        None => {
            hw(task, driver.deploy.prepare(&task.node))
                .await?
                .map_err(|e| format!("Failed to prepare to deploy: {e}"))?;
            // Every step disabled (the core one included): Ironic fails such a deploy
            // (`deployments.do_node_deploy`).
            if steps.is_empty() {
                return Err("No deploy steps returned by the driver".to_owned());
            }
            0
        }
    };
    // The agent is shown the node's ports, and a ramdisk booted over the network needs their
    // MACs: only a deploy that has an agent (in band, as its cleaning) reads them; a fake one
    // does not, so the hot path has no statement more.
    let ports = if resumed.is_some() || driver.deploy.cleans_in_band() {
        ports_for_agent(task)
            .await
            .map_err(|e| format!("Failed to read the ports of node {}: {e}", task.node.uuid))?
    } else {
        Vec::new()
    };
    let mut power = None;
    for (index, step) in steps.iter().enumerate().skip(first) {
        let name = format!("{}.{}", step.interface, step.step);
        // The step the node shows while it runs (the first one was written with the deploy).
        if index > 0 {
            task.write(at_step(&task.node, step, index, power.take()))
                .await
                .map_err(|e| format!("Failed to record deploy step {name}: {e}"))?;
        }
        if step.step == HOLD_STEP {
            let changes = at_step(&task.node, step, index, power);
            tracing::info!(node.uuid = %task.node.uuid, "Deploy of node {} holds at step {index}", task.node.uuid);
            return task
                .process_event(Event::Hold, false, changes.release())
                .await
                .map_err(|e| format!("Failed to record that the deploy holds: {e}"));
        }
        tracing::info!(node.uuid = %task.node.uuid, step = %name, "Executing deploy step {name} on node {}", task.node.uuid);
        let context = StepContext {
            driver,
            ports: &ports,
            config: &task.ctx().config,
            inspection: false,
        };
        let done = match hw(task, driver.deploy.execute_step(&task.node, step, &context)).await? {
            Ok(done) => done,
            Err(e) => {
                // Best effort, as in Ironic: the deploy failure is what the operator needs to see.
                let _ = hw(task, driver.deploy.clean_up(&task.node)).await;
                return Err(format!("Deploy step {name} failed: {e}."));
            }
        };
        task.node.driver_internal_info.extend(done.remember);
        power = done.power.or(power);
        if done.waits {
            let changes = at_step(&task.node, step, index, power);
            task.process_event(Event::Wait, false, changes.release())
                .await
                .map_err(|e| format!("Failed to record that deploy step {name} waits: {e}"))?;
            tracing::info!(node.uuid = %task.node.uuid, step = %name,
                "Deploy step {name} on node {} waits for the agent", task.node.uuid);
            if !step_is_core(step) {
                agent_wait::spawn_poller(
                    task.ctx().clone(),
                    task.node.clone(),
                    DeployCallback,
                    index,
                );
            }
            return Ok(());
        }
    }
    // A deploy whose steps do not boot the instance themselves (the fake one, whose core step
    // is all of it) is powered on here.
    if !steps
        .iter()
        .any(|s| s.interface == "deploy" && s.step == "boot_instance")
    {
        hw(
            task,
            driver
                .power
                .set_power_state(&task.node, PowerState::On, Duration::from_secs(60)),
        )
        .await?
        .map_err(|e| format!("Deploy step deploy.boot_instance failed: {e}."))?;
        power = Some(PowerState::On);
    }
    let mut changes = NodeChanges::default();
    if let Some(state) = power {
        changes = changes.power(Some(state), None);
    }
    changes.deploy_step = Some(Json::default());
    if task.node.driver_internal_info.contains_key(DEPLOY_STEPS)
        || task.node.driver_internal_info.contains_key(USER_STEPS)
    {
        changes.driver_internal_info = Some(Json(without_deploy_steps(&task.node)));
    }
    task.process_event(Event::Done, false, changes.release())
        .await
        .map_err(|e| format!("Failed to record the end of the deploy: {e}"))
}

fn step_is_core(step: &DeployStep) -> bool {
    step.interface == DriverStep::CORE.interface && step.step == DriverStep::CORE.step
}

/// A deploy its agent failed, or that timed out waiting for its agent, now `deploy failed`:
/// the node is powered off (Ironic's `deploy_utils.set_failed_state`, [`deploy_failed`]).
pub(super) struct DeployFailed;

#[async_trait::async_trait]
impl Flow for DeployFailed {
    fn name(&self) -> &'static str {
        "Powering off after a failed deploy"
    }

    async fn run(&self, task: &mut Task, driver: &Driver) -> std::result::Result<(), String> {
        deploy_failed(task, driver).await;
        Ok(())
    }

    /// Only a panic gets here: the deploy's error stays the one the operator sees.
    fn failure(&self, _: &Node, _: &str) -> Failure {
        Failure::default()
    }
}

/// After a deploy failed in its agent or timed out (Ironic's `deploy_utils.set_failed_state`,
/// and `cleanup_after_timeout`'s clean-up): the conductor's copy of the image goes, the node is
/// powered off unless `power_off_after_deploy_failure` is off or the node may not be powered
/// off (API 1.95), so that a failed node does not stay up in its ramdisk, and the ramdisk's
/// boot is undone (a virtual-media ISO ejected). Nothing here fails the work: what fails is
/// logged (as in Ironic), and the deploy's error stays the one the node shows.
async fn deploy_failed(task: &mut Task, driver: &Driver) {
    let uuid = task.node.uuid.clone();
    if let Ok(Err(e)) = hw(task, driver.deploy.clean_up(&task.node)).await {
        tracing::warn!(node.uuid = %uuid, error = %e, "Failed to clean up after the failed deploy of node {uuid}");
    }
    let mut changes = NodeChanges::default();
    if !task.ctx().config.power_off_after_deploy_failure {
        tracing::info!(node.uuid = %uuid, "Node {uuid} stays powered as it is after its failed deploy (power_off_after_deploy_failure is off)");
    } else if task.node.disable_power_off {
        tracing::info!(node.uuid = %uuid, "Node {uuid} may not be powered off; it stays on after its failed deploy");
    } else {
        // The node may be powered off here: this is a plain power-off.
        match power_off_or_reboot(task, driver).await {
            Ok(power) => changes = changes.power(Some(power), None),
            Err(e) => tracing::error!(node.uuid = %uuid, error = %e,
                "Node {uuid} failed to power off while handling its deploy failure; it should be put in maintenance until the problem is resolved"),
        }
    }
    if let Ok(Err(e)) = hw(task, driver.deploy.clean_up_boot(&task.node, driver)).await {
        tracing::warn!(node.uuid = %uuid, error = %e, "Failed to undo the ramdisk's boot after the failed deploy of node {uuid}");
    }
    if let Err(e) = task.write(changes.release()).await {
        tracing::warn!(node.uuid = %uuid, error = %e, "Failed to record the power-off after the failed deploy of node {uuid}");
    }
}

/// A deploy waiting in `wait call-back` for its agent: to boot (the core step), or to finish
/// one of its commands.
#[derive(Clone, Copy, Debug)]
pub(super) struct DeployCallback;

#[async_trait::async_trait]
impl AgentWait for DeployCallback {
    fn state(self) -> ProvisionState {
        ProvisionState::DeployWait
    }

    fn noun(self) -> &'static str {
        "deploy"
    }

    fn timeout(self, ctx: &Ctx) -> Duration {
        ctx.config.deploy_callback_timeout
    }

    async fn poll(self, ctx: &Ctx, node: &Node, index: usize) -> Result<StepPoll> {
        let Some(step) = decided_steps(node).get(index).cloned() else {
            return Ok(StepPoll::Running);
        };
        let driver = ctx.drivers.for_node(node)?;
        driver
            .deploy
            .poll_step(node, &step)
            .await
            .map_err(|e| e.into_error(&node.driver))
    }

    async fn settle(self, ctx: &Ctx, node: Node, index: usize, poll: StepPoll) -> Result<()> {
        settle(ctx, node, index, poll).await
    }

    fn failure(self, node: &Node, _: &str) -> NodeChanges {
        deploy_failure(node)
    }
}

/// Continues the deploy of `node` (as just read or written, in `wait call-back`) if the step it
/// waits in has finished, or fails it if the step failed; nothing while the step runs. Called
/// on each heartbeat the node's agent sends (Ironic's `HeartbeatMixin.heartbeat` ->
/// `process_next_step`). An agent that cannot be asked is no error: the next heartbeat, or the
/// callback timeout, decides.
pub async fn continue_deploy(ctx: &Ctx, node: Node) -> Result<()> {
    if node.provision_state != ProvisionState::DeployWait || !ctx.lease.is_serving() {
        return Ok(());
    }
    let Some(index) = step_index(&node) else {
        return Ok(());
    };
    let Some(step) = decided_steps(&node).get(index).cloned() else {
        return Ok(());
    };
    let driver = ctx.drivers.for_node(&node)?;
    match driver.deploy.poll_step(&node, &step).await {
        Ok(StepPoll::Running) => Ok(()),
        Ok(poll) => settle(ctx, node, index, poll).await,
        Err(e) => {
            tracing::info!(node.uuid = %node.uuid, error = %e,
                "Cannot ask the agent of node {} how deploy step {}.{} stands: {e}",
                node.uuid, step.interface, step.step);
            Ok(())
        }
    }
}

/// Resumes (finished) or fails (failed) the deploy of `node` waiting in the step at `index`,
/// provided it still waits there (a heartbeat and the poller may both get here).
async fn settle(ctx: &Ctx, node: Node, index: usize, poll: StepPoll) -> Result<()> {
    let still_waiting = move |node: &Node| {
        if node.provision_state == ProvisionState::DeployWait && step_index(node) == Some(index) {
            Ok(())
        } else {
            Err(Error::Conflict(format!(
                "The deploy of node {} has moved on already.",
                node.uuid
            )))
        }
    };
    agent_wait::settle_wait(DeployCallback, ctx, node, poll, still_waiting).await
}

/// Fails the deploys whose wait in `wait call-back` has outlasted `deploy_callback_timeout`
/// (Ironic's `_check_deploy_timeouts`), saying which step waited for what. Only unlocked nodes
/// not in maintenance are failed, as in Ironic; the caller passes the nodes this conductor owns.
pub async fn fail_timed_out_deploy(ctx: &Ctx, node: Node) -> Result<()> {
    let index = step_index(&node);
    let step = index.and_then(|i| decided_steps(&node).get(i).cloned());
    let what = match &step {
        Some(s) if step_is_core(s) => {
            "deploy step deploy.deploy waited for the agent's first heartbeat".to_owned()
        }
        Some(s) => format!(
            "deploy step {}.{} waited for the agent to finish it",
            s.interface, s.step
        ),
        None => "the deploy waited for the agent".to_owned(),
    };
    let message = format!(
        "Timeout reached while waiting for callback for node {}: {what} for {} s.",
        node.uuid,
        ctx.config.deploy_callback_timeout.as_secs()
    );
    agent_wait::fail_timed_out(DeployCallback, ctx, node, message).await
}
