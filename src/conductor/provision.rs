//! Provisioning flows: deploy, rebuild, tear down, clean, manage, provide, inspect, adopt,
//! rescue, unrescue, service, abort.
//!
//! Each RPC handler takes the lock, checks the event against the state table, validates, applies
//! the event (clearing `last_error`) and returns; the flow then continues as a [`Work`] value on a
//! worker (`worker.rs`) that owns the lock. The flow always ends the node somewhere the table
//! allows: its success state, or (recorded by the worker) its `fail` edge with `last_error` set,
//! including when the driver panics or the conductor shuts down. The lock is released in the same
//! statement as that last write.

use std::time::Duration;

use serde_json::Value;
use tokio::time::Instant;

use super::{
    Ctx,
    task::{self, Decision, Hold, Move, Task, change_node, log_change},
    worker::{Failure, Flow, Worker, hw},
};
use crate::{
    configdrive, db,
    deploy_template::{self, DeployStep},
    drivers::{Driver, DriverStep, StepContext, StepPoll, require_interface},
    error::{Error, Result},
    node::{
        self, InterfaceKind, Json, JsonObject, Node, NodeChanges, PowerState, Verb,
        without_agent_boot,
    },
    states::{Event, ProvisionState},
};

/// The long half of a provisioning operation, run by a worker after the RPC has been answered.
#[derive(Debug, Clone, Copy)]
pub enum Work {
    Deploy,
    TearDown,
    /// Automated cleaning (after provide or tear down): ends available.
    Clean,
    /// Cleaning asked for with steps (`clean` verb): ends manageable.
    ManualClean,
    /// Either cleaning, resumed from `clean wait` once its agent has called back or finished a
    /// step (in-band cleaning): goes on with the step after the one it waited in.
    ResumeClean,
    /// Servicing a deployed node with steps (`service` verb, API 1.87): ends active. It also
    /// continues a servicing sent back to `service wait` by `unhold`.
    Service,
    Verify,
    Inspect,
    Adopt,
    Rescue,
    Unrescue,
    /// A cleaning aborted from `clean wait` or `clean hold`, now `clean failed`: its ramdisk is
    /// shut down (Ironic's `do_node_clean_abort` -> `tear_down_cleaning`).
    AbortClean,
    /// A deploy its agent failed, or that timed out waiting for its agent, now `deploy
    /// failed`: the node is powered off (Ironic's `deploy_utils.set_failed_state`).
    DeployFailed,
}

impl Work {
    /// The work that must follow a move into `to`, None when the move completes the operation.
    /// Which flow Ferrum runs in a state is the conductor's own fact, decided for every state.
    #[deny(clippy::wildcard_enum_match_arm)]
    fn after(to: ProvisionState, event: Event) -> Result<Option<Work>> {
        use ProvisionState as S;
        match to {
            S::Deploying => Ok(Some(Work::Deploy)),
            S::Deleting => Ok(Some(Work::TearDown)),
            S::Cleaning if event == Event::Clean => Ok(Some(Work::ManualClean)),
            S::Cleaning if event == Event::Resume => Ok(Some(Work::ResumeClean)),
            S::Cleaning => Ok(Some(Work::Clean)),
            S::Verifying => Ok(Some(Work::Verify)),
            S::Inspecting => Ok(Some(Work::Inspect)),
            S::Adopting => Ok(Some(Work::Adopt)),
            S::Rescuing => Ok(Some(Work::Rescue)),
            S::Unrescuing => Ok(Some(Work::Unrescue)),
            S::Servicing => Ok(Some(Work::Service)),
            // Unholding a deploy or a cleaning only lets the next heartbeat pick the node up
            // again (Ironic's `do_provisioning_action`): no worker follows. Unholding servicing
            // continues it at once, from the step after the hold (Ironic spawns
            // `continue_node_service`).
            S::DeployWait | S::CleanWait if event == Event::Unhold => Ok(None),
            S::CleanFail if event == Event::Abort => Ok(Some(Work::AbortClean)),
            // Only a deploy waiting for its agent fails through a move; a deploy that fails in
            // its worker powers nothing off, as in Ironic (`deploying_error_handler`).
            S::DeployFail if event == Event::Fail => Ok(Some(Work::DeployFailed)),
            S::ServiceWait if event == Event::Unhold => Ok(Some(Work::Service)),
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

    /// Whether the move is written without this work when no worker is free, rather than
    /// refused: a failed deploy is recorded even when nobody can power the node off.
    fn optional(self) -> bool {
        matches!(self, Work::DeployFailed)
    }

    /// The target a flow sets instead of the state's registered one: manual cleaning goes back to
    /// manageable, not on to available.
    fn target_override(self) -> Option<ProvisionState> {
        matches!(self, Work::ManualClean).then_some(ProvisionState::Manageable)
    }
}

#[async_trait::async_trait]
impl Flow for Work {
    /// How a failure that escaped the flow (a panic, a shutdown) is described.
    fn name(&self) -> &'static str {
        match self {
            Work::Deploy => "Deploy",
            Work::TearDown => "Tear down",
            Work::Clean | Work::ManualClean | Work::ResumeClean => "Cleaning",
            Work::AbortClean => "Aborting cleaning",
            Work::DeployFailed => "Powering off after a failed deploy",
            Work::Service => "Servicing",
            Work::Verify => "Verification",
            Work::Inspect => "Inspection",
            Work::Adopt => "Adoption",
            Work::Rescue => "Rescue",
            Work::Unrescue => "Unrescue",
        }
    }

    async fn run(&self, task: &mut Task, driver: &Driver) -> std::result::Result<(), String> {
        match self {
            Work::Deploy => deploy(task, driver).await,
            Work::TearDown => tear_down(task, driver).await,
            Work::Clean => clean(task, driver).await,
            Work::ManualClean => manual_clean(task, driver).await,
            Work::ResumeClean => resume_clean(task, driver).await,
            Work::Service => service(task, driver).await,
            Work::Verify => verify(task, driver).await,
            Work::Inspect => inspect(task, driver).await,
            Work::Adopt => adopt(task, driver).await,
            Work::Rescue => rescue(task).await,
            Work::Unrescue => unrescue(task).await,
            Work::AbortClean => abort_clean(task, driver).await,
            Work::DeployFailed => {
                deploy_failed(task, driver).await;
                Ok(())
            }
        }
    }

    /// A failure moves the node along its `fail` edge.
    fn failure(&self, node: &Node, message: &str) -> Failure {
        let mut extra = NodeChanges::default();
        match self {
            // A failed deploy has no current step, nor steps left to run.
            Work::Deploy => {
                extra.deploy_step = Some(Json::default());
                extra.driver_internal_info = Some(Json(without_deploy_steps(node)));
            }
            // Nobody may log into a rescue ramdisk that did not come up.
            Work::Rescue => extra.instance_info = Some(Json(without_rescue_password(node))),
            // The next cleaning decides for itself whether to boot the ramdisk, and reads its
            // steps again.
            Work::Clean | Work::ManualClean | Work::ResumeClean => {
                extra = clean_failure(node, message);
            }
            // A failed servicing has no current step, nor steps left (Ironic's
            // `servicing_error_handler`).
            Work::Service => {
                extra.service_step = Some(Json::default());
                extra.driver_internal_info = Some(Json(StepRun::Service.without_info(node)));
            }
            // The node stays `clean failed`, in maintenance: its ramdisk may still run
            // (Ironic's `cleaning_error_handler` with `set_fail_state=False`).
            Work::AbortClean => {
                return Failure {
                    extra: NodeChanges {
                        maintenance: Some(true),
                        fault: Some(Some(CLEAN_FAILURE.to_owned())),
                        maintenance_reason: Some(Some(node::truncate_error(message.to_owned()))),
                        ..NodeChanges::default()
                    },
                    fail_edge: false,
                };
            }
            // Only a panic gets here: the deploy's error stays the one the operator sees.
            Work::DeployFailed => {
                return Failure {
                    extra: NodeChanges::default(),
                    fail_edge: false,
                };
            }
            Work::TearDown | Work::Verify | Work::Inspect | Work::Adopt | Work::Unrescue => {}
        }
        Failure {
            extra,
            fail_edge: true,
        }
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
    if let Some((task, work, worker)) = begin(ctx, node, deadline, verb, event, check).await? {
        worker.run(task, work)?;
    }
    Ok(())
}

/// [`start`] up to the run: the move checked and written; when work follows it, the task that
/// holds the lock, the work the new state names and the worker reserved for it.
pub(super) async fn begin(
    ctx: &Ctx,
    node: Node,
    deadline: Option<Instant>,
    verb: &str,
    event: Event,
    check: impl Fn(&Node, &Driver) -> Result<NodeChanges>,
) -> Result<Option<(Task, Work, Worker)>> {
    let before = node.provision_state;
    let uuid = node.uuid.clone();
    let mut worker: Option<Worker> = None;
    let mut work = None;
    // The state and target the written move left (the last decision is the one written).
    let mut moved_from = None;
    let (node, task) = change_node(ctx, &uuid, Some(node), deadline, |node| {
        // The move is computed once, from the node as read, and carried to the write.
        let step = Move::of(node, event, verb)?;
        moved_from = Some((node.provision_state, node.target_provision_state));
        let driver = ctx.drivers.for_node(node)?;
        let extra = check(node, &driver)?;
        work = Work::after(step.to(), event)?;
        if work.is_none() {
            return Ok(Decision::Write(step.changes(false, extra), Hold::Release));
        }
        if let Err(e) = Worker::reserve(ctx, &mut worker) {
            if let Some(skipped) = work.filter(|w| w.optional()) {
                tracing::warn!(node.uuid = %node.uuid, "No free worker for \"{}\" on node {}; the move is written without it", skipped.name(), node.uuid);
                work = None;
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
        if let Some(target) = work.and_then(Work::target_override) {
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
    Ok(match (task, work, worker) {
        (Some(task), Some(work), Some(worker)) => Some((task, work, worker)),
        _ => None,
    })
}

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
fn without_deploy_steps(node: &Node) -> serde_json::Map<String, Value> {
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

pub async fn do_node_tear_down(ctx: &Ctx, node: Node, deadline: Option<Instant>) -> Result<()> {
    start(ctx, node, deadline, "deleted", Event::Delete, |node, _| {
        if node.protected {
            return Err(Error::NodeProtected {
                node: node.uuid.clone(),
            });
        }
        // A servicing torn down from `service wait` or `service failed` is forgotten.
        let mut info = without_agent_boot(&node.driver_internal_info);
        let (steps, index) = StepRun::Service.keys();
        info.remove(steps);
        info.remove(index);
        Ok(NodeChanges {
            driver_internal_info: Some(Json(info)),
            service_step: Some(Json::default()),
            ..NodeChanges::default()
        })
    })
    .await
}

/// `rescue`: boot the rescue ramdisk with `rescue_password` for the operator's login. The
/// password is kept in `instance_info` (masked in every response) until unrescue.
pub async fn do_node_rescue(
    ctx: &Ctx,
    node: Node,
    rescue_password: String,
    deadline: Option<Instant>,
) -> Result<()> {
    start(ctx, node, deadline, "rescue", Event::Rescue, |node, _| {
        refuse_in_maintenance(node, "rescuing")?;
        require_interface(node, InterfaceKind::Rescue)?;
        let mut instance_info = node.instance_info.0.clone();
        instance_info.insert(
            "rescue_password".to_owned(),
            Value::String(rescue_password.clone()),
        );
        Ok(NodeChanges {
            instance_info: Some(Json(instance_info)),
            ..NodeChanges::default()
        })
    })
    .await
}

/// `unrescue`: boot the instance again.
pub async fn do_node_unrescue(ctx: &Ctx, node: Node, deadline: Option<Instant>) -> Result<()> {
    start(
        ctx,
        node,
        deadline,
        "unrescue",
        Event::Unrescue,
        |node, _| {
            refuse_in_maintenance(node, "unrescuing")?;
            require_interface(node, InterfaceKind::Rescue)?;
            Ok(NodeChanges::default())
        },
    )
    .await
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

/// Ironic's inspect_hardware validates the power and inspect interfaces before it inspects: a
/// `no-inspect` node is UnsupportedDriverExtension, never inspected.
fn require_inspectable(node: &Node, driver: &Driver) -> Result<()> {
    driver
        .power
        .validate(node)
        .map_err(|e| Error::InvalidParameterValue(e.to_string()))?;
    require_interface(node, InterfaceKind::Inspect)
}

pub(super) fn without_rescue_password(node: &Node) -> serde_json::Map<String, Value> {
    let mut instance_info = node.instance_info.0.clone();
    instance_info.remove("rescue_password");
    instance_info.remove("hashed_rescue_password");
    instance_info
}

/// A run of the steps a client named: manual cleaning (`clean`, API 1.15) or servicing
/// (`service`, 1.87). Ironic runs both alike (`cleaning.py`, `servicing.py`): the steps are
/// checked against what the driver offers before the request is accepted, kept in
/// `driver_internal_info` with the index of the one reached, run in order, and the reserved
/// `hold` step pauses the run in its hold state with the lock released.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum StepRun {
    Clean,
    Service,
}

/// A service step the fake hardware offers, on the interface implementation it needs, and
/// whether it leaves the node waiting for its ramdisk (as Ironic's fake vendor
/// `trigger_servicewait`, which nothing in Ferrum continues: the node waits for an abort).
/// Clean steps are the driver's (`Driver::clean_steps`).
struct ServiceStep {
    interface: &'static str,
    implementation: &'static str,
    step: &'static str,
    waits: bool,
}

/// The service steps of Ironic's fake vendor interface (`FakeVendorB`): `log_passthrough`
/// logs, `trigger_servicewait` leaves the node in `service wait`.
const SERVICE_STEPS: &[ServiceStep] = &[
    ServiceStep {
        interface: "vendor",
        implementation: "fake",
        step: "log_passthrough",
        waits: false,
    },
    ServiceStep {
        interface: "vendor",
        implementation: "fake",
        step: "trigger_servicewait",
        waits: true,
    },
];

impl StepRun {
    fn name(self) -> &'static str {
        match self {
            StepRun::Clean => "clean",
            StepRun::Service => "service",
        }
    }

    /// Where the run keeps, while it runs, whether it was asked to run without booting the
    /// ramdisk (API 1.70 for cleaning, 1.108 for servicing; Ironic's keys).
    fn disable_ramdisk_key(self) -> &'static str {
        match self {
            StepRun::Clean => DISABLE_RAMDISK,
            StepRun::Service => "service_disable_ramdisk",
        }
    }

    /// Where the run keeps its steps and the index of the one reached (Ironic's
    /// `clean_steps`/`clean_step_index`, `service_steps`/`service_step_index`).
    fn keys(self) -> (&'static str, &'static str) {
        match self {
            StepRun::Clean => ("clean_steps", "clean_step_index"),
            StepRun::Service => ("service_steps", "service_step_index"),
        }
    }

    /// Refuses, before the request is accepted, a run without steps or with a step `node`'s
    /// driver does not offer (Ironic's `_validate_user_steps`: "node does not support this
    /// ... step"); the reserved `hold` step is the conductor's own, on any interface. Clean
    /// steps are the driver's, with their arguments ([`check_clean_step`]).
    fn check(self, node: &Node, driver: &Driver, steps: &[Value]) -> Result<()> {
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
    fn with_steps(self, node: &Node, steps: &[Value]) -> serde_json::Map<String, Value> {
        let mut info = self.without_info(node);
        info.insert(self.keys().0.to_owned(), Value::Array(steps.to_vec()));
        info
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
async fn run_steps(
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
        let waits = run == StepRun::Service
            && service_steps_offered(&task.node)
                .any(|s| s.interface == interface && s.step == name && s.waits);
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
                    spawn_poller(
                        task.ctx().clone(),
                        task.node.clone(),
                        AgentWait::Clean,
                        index,
                    );
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

/// Boots the deploy ramdisk for cleaning (the deploy interface's `prepare_cleaning`). An
/// in-band interface leaves the node in `clean wait`, lock released, until its agent calls
/// back ([`continue_cleaning`]): true. Out of band nothing was booted: false, go on.
async fn boot_cleaning_ramdisk(
    task: &mut Task,
    driver: &Driver,
) -> std::result::Result<bool, String> {
    let uuid = task.node.uuid.clone();
    let context = StepContext {
        driver,
        ports: &[],
        config: &task.ctx().config,
    };
    let done = hw(task, driver.deploy.prepare_cleaning(&task.node, &context))
        .await?
        .map_err(|e| format!("Failed to prepare node {uuid} for cleaning: {e}"))?;
    if !done.waits {
        return Ok(false);
    }
    // The ramdisk booted for this cleaning has a new agent, URL and token.
    let mut info = without_agent_boot(&task.node.driver_internal_info);
    info.remove(StepRun::Clean.keys().1);
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
    let reached = StepRun::Clean.reached(&task.node);
    if reached.is_none() {
        let uuid = task.node.uuid.clone();
        let ports = ports_for_agent(task)
            .await
            .map_err(|e| format!("Failed to read the ports of node {uuid}: {e}"))?;
        let context = StepContext {
            driver,
            ports: &ports,
            config: &task.ctx().config,
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
            info.insert(StepRun::Clean.keys().0.to_owned(), Value::Array(steps));
        }
        task.write(NodeChanges {
            driver_internal_info: Some(Json(info)),
            ..NodeChanges::default()
        })
        .await
        .map_err(|e| format!("Failed to record the clean steps of node {uuid}: {e}"))?;
    }
    run_steps(task, driver, StepRun::Clean, reached.map_or(0, |i| i + 1)).await
}

/// The steps automated cleaning runs of those offered: priority above 0, highest first (ties
/// in the order offered), as the step objects cleaning keeps.
fn automated_clean_steps(mut offered: Vec<crate::drivers::CleanStep>) -> Vec<Value> {
    offered.retain(|s| s.priority > 0);
    offered.sort_by_key(|s| std::cmp::Reverse(s.priority));
    offered
        .into_iter()
        .map(|s| {
            serde_json::json!({"interface": s.interface, "step": s.step, "priority": s.priority, "args": {}})
        })
        .collect()
}

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
            StepRun::Clean.check(node, driver, &clean_steps)?;
            let mut info = StepRun::Clean.with_steps(node, &clean_steps);
            info.insert(
                StepRun::Clean.disable_ramdisk_key().to_owned(),
                Value::Bool(disable_ramdisk),
            );
            Ok(NodeChanges {
                driver_internal_info: Some(Json(info)),
                ..NodeChanges::default()
            })
        },
    )
    .await
}

/// Servicing a deployed node (API 1.87; Ironic's `do_node_service`) with `service_steps`, from
/// `active`, `service hold` or `service failed`: not in maintenance, the power credentials
/// valid, every step offered by the node's driver (the fake vendor interface's), then the steps
/// run as manual cleaning's do, and the node is active again. No service step Ferrum's drivers
/// offer needs the ramdisk, so none is booted (Ironic's `prepare_service` is called only for a
/// step that needs one); `disable_ramdisk` (API 1.108) is kept with the node while it services,
/// as Ironic keeps it, for a step that would.
pub async fn do_node_service(
    ctx: &Ctx,
    node: Node,
    service_steps: Vec<Value>,
    disable_ramdisk: bool,
    deadline: Option<Instant>,
) -> Result<()> {
    start(
        ctx,
        node,
        deadline,
        "service",
        Event::Service,
        |node, driver| {
            refuse_in_maintenance(node, "service")?;
            driver.power.validate(node).map_err(|e| {
                Error::InvalidParameterValue(format!(
                    "Validation of node {} for servicing failed: {e}",
                    node.uuid
                ))
            })?;
            StepRun::Service.check(node, driver, &service_steps)?;
            let mut info = StepRun::Service.with_steps(node, &service_steps);
            info.insert(
                StepRun::Service.disable_ramdisk_key().to_owned(),
                Value::Bool(disable_ramdisk),
            );
            Ok(NodeChanges {
                service_step: Some(Json::default()),
                driver_internal_info: Some(Json(info)),
                ..NodeChanges::default()
            })
        },
    )
    .await
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

/// The service steps `node`'s interfaces offer.
fn service_steps_offered(node: &Node) -> impl Iterator<Item = &'static ServiceStep> + '_ {
    SERVICE_STEPS.iter().filter(|s| {
        InterfaceKind::from_name(s.interface)
            .is_some_and(|kind| node.interfaces.get(kind) == s.implementation)
    })
}

/// Checks one service step against the ones `node`'s interfaces offer; the reserved `hold`
/// step belongs to the conductor (Ironic's `use_reserved_step_handler`), on any interface.
fn check_service_step(node: &Node, step: &Value) -> Result<()> {
    let interface = step.get("interface").and_then(Value::as_str);
    let name = step.get("step").and_then(Value::as_str);
    let (Some(interface), Some(name)) = (interface, name) else {
        return Err(Error::InvalidParameterValue(format!(
            "Each service step needs \"interface\" and \"step\": {step}"
        )));
    };
    if name == HOLD_STEP
        || service_steps_offered(node).any(|s| s.interface == interface && s.step == name)
    {
        return Ok(());
    }
    let offered: Vec<_> = service_steps_offered(node)
        .map(|s| format!("{}.{}", s.interface, s.step))
        .collect();
    let offered = if offered.is_empty() {
        "none".to_owned()
    } else {
        offered.join(", ")
    };
    Err(Error::InvalidParameterValue(format!(
        "Node {}: the service step {interface}.{name} is not supported by its driver; supported: {offered}.",
        node.uuid
    )))
}

/// A step's `args` (an empty object when it has none).
fn step_args(step: &Value) -> serde_json::Map<String, Value> {
    step.get("args")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default()
}

/// Where manual cleaning keeps whether it runs without booting the ramdisk (API 1.70, Ironic's
/// `driver_internal_info.cleaning_disable_ramdisk`), removed when cleaning ends.
const DISABLE_RAMDISK: &str = "cleaning_disable_ramdisk";

/// The reserved step name that pauses a deploy, a cleaning or a servicing in its hold state
/// until `unhold` (Ironic's `steps.use_reserved_step_handler`); it belongs to no interface's
/// steps.
pub(crate) const HOLD_STEP: &str = "hold";

/// A step's `interface.step` (Ironic's `steps.step_id`), None for no step.
fn step_id(step: &serde_json::Map<String, Value>) -> Option<String> {
    let interface = step.get("interface").and_then(Value::as_str)?;
    let name = step.get("step").and_then(Value::as_str)?;
    Some(format!("{interface}.{name}"))
}

/// manage, provide, inspect, adopt, abort and unhold (API 1.85: clean hold and deploy hold go
/// back to their wait state, where the next heartbeat continues; service hold goes to `service
/// wait` and servicing continues at once). Abort stops a servicing that waits or holds in
/// `service failed`, the table's abort edge, and from there a second abort returns the node to
/// `active`; Ironic takes both edges in one request (and, for a step not marked abortable, only
/// marks it to abort after it), Ferrum takes them one request each, as it aborts a held cleaning.
pub async fn do_provisioning_action(
    ctx: &Ctx,
    node: Node,
    action: Verb,
    deadline: Option<Instant>,
) -> Result<()> {
    let event = match action {
        Verb::Manage | Verb::Provide | Verb::Abort | Verb::Inspect | Verb::Adopt | Verb::Unhold => {
            action.event()
        }
        Verb::Active
        | Verb::Deploy
        | Verb::Rebuild
        | Verb::Deleted
        | Verb::Undeploy
        | Verb::Clean
        | Verb::Rescue
        | Verb::Unrescue
        | Verb::Service => {
            return Err(Error::InvalidParameterValue(format!(
                "The provisioning action \"{action}\" is not supported."
            )));
        }
    };
    let verb = action.api_name();
    start(ctx, node, deadline, verb, event, |node, driver| {
        let mut extra = NodeChanges::default();
        if event == Event::Provide && node.retired {
            return Err(Error::NodeIsRetired {
                op: "providing".to_owned(),
                node: node.uuid.clone(),
            });
        }
        if event == Event::Inspect {
            require_inspectable(node, driver)?;
            extra.inspection_started_at = Some(Some(node::now()));
            extra.inspection_finished_at = Some(None);
        }
        if event == Event::Abort {
            // The table has an abort edge here (checked before `check` runs), so the state
            // names the operation it stops.
            let what = node.provision_state.aborted_operation().ok_or_else(|| {
                Error::internal(format!(
                    "no aborted operation is named for state {}",
                    node.provision_state
                ))
            })?;
            extra = extra.last_error(Some(format!(
                "By request, the {what} operation was aborted"
            )));
            if what == "deploy" {
                // From `wait call-back` (API 1.110) or `deploy hold`: the deploy forgets its
                // steps and the agent's URL, so that no heartbeat or poll resumes it (Ironic's
                // `_do_abort` and `do_node_deploy_abort`). Every deploy step Ferrum runs is
                // abortable (Ironic's default), so none is left to finish first; the deploy
                // interfaces' `clean_up` has nothing to undo (neither holds a resource), so no
                // worker follows.
                if let Some(step) = step_id(&node.deploy_step) {
                    extra = extra.last_error(Some(format!(
                        "By request, the deploy operation was aborted during or after the completion of step \"{step}\""
                    )));
                }
                let mut info = without_deploy_steps(node);
                info.remove("agent_url");
                extra.deploy_step = Some(Json::default());
                extra.driver_internal_info = Some(Json(info));
            }
            // An aborted cleaning or servicing forgets its steps and where it was (Ironic's
            // `do_node_clean_abort`, `do_node_service_abort`, which names the step reached).
            if what == "clean" {
                if let Some(step) = step_id(&node.clean_step) {
                    extra = extra.last_error(Some(format!(
                        "By request, the clean operation was aborted during or after the completion of step \"{step}\""
                    )));
                }
                extra.driver_internal_info = Some(Json(StepRun::Clean.without_info(node)));
                extra.clean_step = Some(Json::default());
            }
            if what == "service" {
                if node.maintenance && node.provision_state == ProvisionState::ServiceFail {
                    return Err(Error::InvalidState(format!(
                        "Can not abort service on node \"{}\" while it is in maintenance mode. Please remove the node from maintenance prior to issuing the request to abort the service operation.",
                        node.uuid
                    )));
                }
                if let Some(step) = step_id(&node.service_step) {
                    extra = extra.last_error(Some(format!(
                        "By request, the service operation was aborted during or after the completion of step \"{step}\""
                    )));
                }
                extra.service_step = Some(Json::default());
                extra.driver_internal_info = Some(Json(StepRun::Service.without_info(node)));
            }
        }
        Ok(extra)
    })
    .await
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
    // The agent is shown the node's ports; only a deploy that has an agent reads them.
    let ports = if resumed.is_some() {
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
            let mut info = task.node.driver_internal_info.0.clone();
            info.insert(STEP_INDEX.to_owned(), Value::from(index));
            let mut changes = NodeChanges {
                deploy_step: Some(Json(step.to_object())),
                driver_internal_info: Some(Json(info)),
                ..NodeChanges::default()
            };
            if let Some(state) = power.take() {
                changes = changes.power(Some(state), None);
            }
            task.write(changes)
                .await
                .map_err(|e| format!("Failed to record deploy step {name}: {e}"))?;
        }
        if step.step == HOLD_STEP {
            let mut info = task.node.driver_internal_info.0.clone();
            info.insert(STEP_INDEX.to_owned(), Value::from(index));
            let mut changes = NodeChanges {
                deploy_step: Some(Json(step.to_object())),
                driver_internal_info: Some(Json(info)),
                ..NodeChanges::default()
            };
            if let Some(state) = power {
                changes = changes.power(Some(state), None);
            }
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
            let mut info = task.node.driver_internal_info.0.clone();
            info.insert(STEP_INDEX.to_owned(), Value::from(index));
            let mut changes = NodeChanges {
                deploy_step: Some(Json(step.to_object())),
                driver_internal_info: Some(Json(info)),
                ..NodeChanges::default()
            };
            if let Some(state) = power {
                changes = changes.power(Some(state), None);
            }
            task.process_event(Event::Wait, false, changes.release())
                .await
                .map_err(|e| format!("Failed to record that deploy step {name} waits: {e}"))?;
            tracing::info!(node.uuid = %task.node.uuid, step = %name,
                "Deploy step {name} on node {} waits for the agent", task.node.uuid);
            if !step_is_core(step) {
                spawn_poller(
                    task.ctx().clone(),
                    task.node.clone(),
                    AgentWait::Deploy,
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

/// The node's ports as the agent is shown them (Ironic's `port.as_dict()`).
async fn ports_for_agent(task: &Task) -> Result<Vec<Value>> {
    let filter = db::ports::PortFilter {
        node_uuid: Some(task.node.uuid.clone()),
        ..Default::default()
    };
    let ports = db::ports::list_ports(
        &task.ctx().db,
        &filter,
        db::ports::SortKey::Id,
        false,
        1000,
        None,
    )
    .await?;
    Ok(ports
        .iter()
        .map(|p| {
            serde_json::json!({
                "uuid": p.uuid,
                "address": p.address,
                "node_id": task.node.id,
                "pxe_enabled": p.pxe_enabled,
                "local_link_connection": p.local_link_connection.0,
                "physical_network": p.physical_network,
                "extra": p.extra.0,
            })
        })
        .collect())
}

/// A wait for the node's agent that a poller asks about and a timeout ends: a deploy in
/// `wait call-back` or a cleaning in `clean wait`.
#[derive(Clone, Copy, Debug)]
enum AgentWait {
    Deploy,
    Clean,
}

impl AgentWait {
    /// The state the node waits in.
    fn state(self) -> ProvisionState {
        match self {
            AgentWait::Deploy => ProvisionState::DeployWait,
            AgentWait::Clean => ProvisionState::CleanWait,
        }
    }

    /// What waits, for messages.
    fn noun(self) -> &'static str {
        match self {
            AgentWait::Deploy => "deploy",
            AgentWait::Clean => "cleaning",
        }
    }

    /// How long the agent may take (`deploy_callback_timeout`, `clean_callback_timeout`).
    fn timeout(self, ctx: &Ctx) -> Duration {
        match self {
            AgentWait::Deploy => ctx.config.deploy_callback_timeout,
            AgentWait::Clean => ctx.config.clean_callback_timeout,
        }
    }

    /// Whether the step at `index` of `node` has finished, as its agent tells.
    async fn poll(self, ctx: &Ctx, node: &Node, index: usize) -> Result<StepPoll> {
        match self {
            AgentWait::Deploy => {
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
            AgentWait::Clean => poll_cleaning(ctx, node).await,
        }
    }

    /// Continues or fails the wait of `node` after `poll`.
    async fn settle(self, ctx: &Ctx, node: Node, index: usize, poll: StepPoll) -> Result<()> {
        match self {
            AgentWait::Deploy => settle(ctx, node, index, poll).await,
            AgentWait::Clean => settle_cleaning(ctx, node, poll).await,
        }
    }
}

/// How often a waiting step's agent is asked whether its command has finished: from
/// `POLL_FIRST`, growing by half up to `POLL_MAX`. The agent heartbeats too when a command ends,
/// but only within 5 s and never more than every 5 s; asking it is faster.
const POLL_FIRST: Duration = Duration::from_millis(250);
const POLL_MAX: Duration = Duration::from_secs(2);

/// Asks the agent of `node`, waiting in the step at `index`, until that step has finished or
/// failed, then continues or fails the deploy or cleaning. It holds no lock and reads no row
/// while it asks: the conditional write of [`AgentWait::settle`] settles a race with a heartbeat
/// doing the same. It ends with the callback timeout, when the conductor stops taking work, or
/// when the wait has moved on; an agent that cannot be reached is asked again (the timeout
/// decides).
fn spawn_poller(ctx: Ctx, node: Node, wait: AgentWait, index: usize) {
    tokio::spawn(async move {
        let give_up = Instant::now() + wait.timeout(&ctx);
        let mut interval = POLL_FIRST;
        while Instant::now() < give_up && ctx.lease.is_serving() {
            tokio::time::sleep(interval).await;
            interval = (interval * 3 / 2).min(POLL_MAX);
            match wait.poll(&ctx, &node, index).await {
                Ok(StepPoll::Running) => continue,
                Ok(poll) => {
                    if let Err(e) = wait.settle(&ctx, node.clone(), index, poll).await {
                        tracing::debug!(node.uuid = %node.uuid, error = %e,
                            "The {} of node {} was not continued from the poll", wait.noun(), node.uuid);
                    }
                    return;
                }
                Err(e) => {
                    tracing::debug!(node.uuid = %node.uuid, error = %e, index,
                        "Cannot ask the agent of node {} about its step yet", node.uuid);
                }
            }
        }
    });
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
    settle_wait(ctx, node, poll, still_waiting, |node, _| NodeChanges {
        deploy_step: Some(Json::default()),
        driver_internal_info: Some(Json(without_deploy_steps(node))),
        ..NodeChanges::default()
    })
    .await
}

/// What a deploy and a cleaning that wait for their agent do with a poll: resume when the step
/// has finished, fail with `failed`'s changes and the message when it failed, provided
/// `still_waiting` holds for the node as the write reads it (a heartbeat and the poller may
/// both get here; the conditional write lets one through).
async fn settle_wait(
    ctx: &Ctx,
    node: Node,
    poll: StepPoll,
    still_waiting: impl Fn(&Node) -> Result<()> + Send + Sync,
    failed: impl Fn(&Node, &str) -> NodeChanges + Send + Sync,
) -> Result<()> {
    match poll {
        StepPoll::Running => Ok(()),
        StepPoll::Finished => {
            start(ctx, node, None, "resume", Event::Resume, |node, _| {
                still_waiting(node)?;
                Ok(NodeChanges::default())
            })
            .await
        }
        StepPoll::Failed(message) => {
            tracing::error!(node.uuid = %node.uuid, "{message}");
            start(ctx, node, None, "fail", Event::Fail, |node, _| {
                still_waiting(node)?;
                Ok(failed(node, &message).last_error(Some(message.clone())))
            })
            .await
        }
    }
}

/// The clean step at `index` of the node's cleaning, as `(interface, step)`.
fn clean_step_at(node: &Node, index: usize) -> Option<(String, String)> {
    let step = node
        .driver_internal_info
        .get(StepRun::Clean.keys().0)?
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
    let Some(index) = StepRun::Clean.reached(node) else {
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
    let reached = StepRun::Clean.reached(&node);
    let waited_since = node.provision_updated_at;
    let still_waiting = move |node: &Node| {
        if node.provision_state == ProvisionState::CleanWait
            && StepRun::Clean.reached(node) == reached
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
    settle_wait(ctx, node, poll, still_waiting, clean_failure).await
}

/// Fails the cleanings whose wait in `clean wait` has outlasted `clean_callback_timeout`
/// (Ironic's `_check_cleanwait_timeouts`), saying which step waited for what. As for deploys,
/// only unlocked nodes not in maintenance, of this conductor, are passed.
pub async fn fail_timed_out_cleaning(ctx: &Ctx, node: Node) -> Result<()> {
    let what = match StepRun::Clean
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
    fail_timed_out(ctx, node, AgentWait::Clean, message, clean_failure).await
}

/// What a failed cleaning writes besides `last_error` (Ironic's `cleaning_error_handler`): the
/// steps forgotten, so that the next cleaning reads them again; and when a clean step had begun,
/// maintenance with the `clean failure` fault and, unless the node has one already, the error
/// as its reason: a disk half erased must not go back into service unseen. Leaving maintenance
/// clears the fault.
fn clean_failure(node: &Node, message: &str) -> NodeChanges {
    let mut changes = NodeChanges {
        driver_internal_info: Some(Json(StepRun::Clean.without_info(node))),
        clean_step: Some(Json::default()),
        ..NodeChanges::default()
    };
    if StepRun::Clean.reached(node).is_some() {
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
    fail_timed_out(ctx, node, AgentWait::Deploy, message, |node, _| {
        NodeChanges {
            deploy_step: Some(Json::default()),
            driver_internal_info: Some(Json(without_deploy_steps(node))),
            ..NodeChanges::default()
        }
    })
    .await
}

/// Fails the `wait` of `node` with `message` as its `last_error`, writing `changes` too, unless
/// the wait has moved on since `node` was read (a heartbeat or a poller won the race).
async fn fail_timed_out(
    ctx: &Ctx,
    node: Node,
    wait: AgentWait,
    message: String,
    changes: impl Fn(&Node, &str) -> NodeChanges,
) -> Result<()> {
    let waited_since = node.provision_updated_at;
    start(ctx, node, None, "fail", Event::Fail, move |node, _| {
        if node.provision_state != wait.state() || node.provision_updated_at != waited_since {
            return Err(Error::Conflict(format!(
                "The {} of node {} has moved on already.",
                wait.noun(),
                node.uuid
            )));
        }
        Ok(changes(node, &message).last_error(Some(message.clone())))
    })
    .await
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

/// Tear down, power off, forget the instance, then automated cleaning.
async fn tear_down(task: &mut Task, driver: &Driver) -> std::result::Result<(), String> {
    hw(task, driver.deploy.tear_down(&task.node))
        .await?
        .map_err(|e| format!("Failed to tear down: {e}"))?;
    // A node that may not be powered off (API 1.95) is rebooted out of its instance instead,
    // as Ironic's `clean_up` does for it.
    let power = power_off_or_reboot(task, driver)
        .await
        .map_err(|e| format!("Failed to tear down: {e}"))?;
    hw(task, driver.deploy.clean_up_boot(&task.node, driver))
        .await?
        .map_err(|e| format!("Failed to tear down: {e}"))?;
    let mut changes = NodeChanges::default().power(Some(power), None);
    changes.instance_info = Some(Json::default());
    changes.instance_uuid = Some(None);
    changes.instance_name = Some(None);
    changes.deploy_step = Some(Json::default());
    // The node's allocation (API 1.52) ends with its instance, as in Ironic's tear-down: only a
    // node that has one pays the one more statement.
    let allocation = task.node.allocation_uuid.clone();
    if allocation.is_some() {
        changes.allocation_uuid = Some(None);
    }
    task.process_event(Event::Clean, true, changes)
        .await
        .map_err(|e| format!("Failed to tear down: {e}"))?;
    if let Some(allocation) = allocation
        && let Err(e) = crate::db::allocations::delete(&task.ctx().db, &allocation).await
    {
        tracing::warn!(node.uuid = %task.node.uuid, "Could not delete allocation {allocation} after tear-down: {e}");
    }
    clean(task, driver).await
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

/// Automated cleaning, unless the node's `automated_clean` (else the conductor's setting) turns
/// it off. The fake hardware has no clean steps, so either way cleaning completes at once; an
/// in-band deploy interface (`direct`) boots the ramdisk and waits for its agent, whose clean
/// steps of priority above 0 then run ([`resume_clean`]). A
/// retired node ends in manageable, not available: it is not handed out again (Ironic's
/// `cleaning.do_next_clean_step`; Ironic's path for disabled cleaning, `do_node_clean`, sends a
/// retired node to available, against what `retired` promises; Ferrum does not).
async fn clean(task: &mut Task, driver: &Driver) -> std::result::Result<(), String> {
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
    run_steps(task, driver, StepRun::Clean, 0).await
}

/// Servicing, from the first step, or, when `unhold` sent it back to `service wait`, from the
/// step after the hold (Ironic's `continue_node_service`, which resumes into `servicing`).
async fn service(task: &mut Task, driver: &Driver) -> std::result::Result<(), String> {
    let first = if task.node.provision_state == ProvisionState::ServiceWait {
        task.process_event(Event::Resume, true, NodeChanges::default())
            .await
            .map_err(|e| format!("Failed to resume servicing: {e}"))?;
        StepRun::Service.reached(&task.node).map_or(0, |i| i + 1)
    } else {
        0
    };
    run_steps(task, driver, StepRun::Service, first).await
}

/// Rescue on the fake rescue interface: the "ramdisk" is up at once.
async fn rescue(task: &mut Task) -> std::result::Result<(), String> {
    task.process_event(Event::Done, false, NodeChanges::default().release())
        .await
        .map_err(|e| format!("Failed to rescue: {e}"))
}

/// Unrescue on the fake rescue interface: back to the instance, forgetting the rescue password.
async fn unrescue(task: &mut Task) -> std::result::Result<(), String> {
    let changes = NodeChanges {
        instance_info: Some(Json(without_rescue_password(&task.node))),
        ..NodeChanges::default()
    };
    task.process_event(Event::Done, false, changes.release())
        .await
        .map_err(|e| format!("Failed to unrescue: {e}"))
}

/// Inspection. The `agent` inspect interface boots the ramdisk and waits for its data
/// (`inspection.rs`); the fake one has nothing to discover, so inspection completes at once.
async fn inspect(task: &mut Task, driver: &Driver) -> std::result::Result<(), String> {
    if task.node.interfaces.get(InterfaceKind::Inspect) == super::inspection::AGENT_INSPECT {
        return super::inspection::start_agent_inspection(task, driver).await;
    }
    let changes = NodeChanges {
        inspection_finished_at: Some(Some(node::now())),
        ..NodeChanges::default()
    };
    task.process_event(Event::Done, false, changes.release())
        .await
        .map_err(|e| format!("Failed to finish inspection: {e}"))
}

/// Adoption: take over a node already running its instance: check the interfaces, read the power
/// state, and call it active without deploying.
async fn adopt(task: &mut Task, driver: &Driver) -> std::result::Result<(), String> {
    let uuid = task.node.uuid.clone();
    driver
        .power
        .validate(&task.node)
        .and_then(|()| driver.deploy.validate(&task.node))
        .map_err(|e| format!("Error while attempting to adopt node {uuid}: {e}."))?;
    let power = hw(task, driver.power.get_power_state(&task.node))
        .await?
        .map_err(|e| format!("Error while attempting to adopt node {uuid}: {e}."))?;
    let changes = NodeChanges::default().power(Some(power), None);
    task.process_event(Event::Done, false, changes.release())
        .await
        .map_err(|e| format!("Error while attempting to adopt node {uuid}: {e}."))
}

/// `manage` from enroll: check the power credentials and read the power state.
async fn verify(task: &mut Task, driver: &Driver) -> std::result::Result<(), String> {
    let uuid = task.node.uuid.clone();
    driver
        .power
        .validate(&task.node)
        .map_err(|e| format!("Failed to validate power driver interface for node {uuid}: {e}"))?;
    let power = hw(task, driver.power.get_power_state(&task.node))
        .await?
        .map_err(|e| format!("Failed to get power state for node {uuid}: {e}"))?;
    let changes = NodeChanges::default().power(Some(power), None);
    task.process_event(Event::Done, false, changes.release())
        .await
        .map_err(|e| format!("Failed to finish verification: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn work_follows_a_move_into_a_state_the_conductor_works_in() {
        for state in ProvisionState::ALL {
            // The states whose work runs on a conductor.
            let runs = state.stuck_fail_event_applies();
            match Work::after(state, Event::Deploy) {
                Ok(Some(_)) => assert!(runs, "{state}"),
                Ok(None) => assert!(!state.is_unstable(), "{state}"),
                Err(_) => assert!(state.is_unstable() && !runs, "{state}"),
            }
        }
        let clean = |event| Work::after(ProvisionState::Cleaning, event).ok().flatten();
        assert!(matches!(clean(Event::Clean), Some(Work::ManualClean)));
        assert!(matches!(clean(Event::Provide), Some(Work::Clean)));
        // Unholding servicing continues it; unholding a deploy or a cleaning waits.
        let unhold = |state| Work::after(state, Event::Unhold).ok().flatten();
        assert!(matches!(
            unhold(ProvisionState::ServiceWait),
            Some(Work::Service)
        ));
        assert!(unhold(ProvisionState::CleanWait).is_none());
        assert!(unhold(ProvisionState::DeployWait).is_none());
    }
}
