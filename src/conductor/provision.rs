//! Provisioning flows: deploy, rebuild, tear down, manage, provide, abort, and the worker that
//! runs their long half.
//!
//! Each RPC handler takes the lock, checks the event against the state table, validates, applies
//! the event (clearing `last_error`) and returns; the flow then continues in a worker that owns the
//! lock. The worker always ends the node somewhere the table allows: the flow's success state, or
//! its `fail` edge with `last_error` set, including when the driver panics or the conductor shuts
//! down. The lock is released in the same statement as that last write.

use std::{panic::AssertUnwindSafe, time::Duration};

use futures::FutureExt;
use serde_json::Value;
use tokio::{sync::OwnedSemaphorePermit, time::Instant};
use tracing::{Instrument, info_span};

use super::{Ctx, dispatch::panic_message, power, task::Task};
use crate::{
    db::models::{NodeChanges, json_text},
    drivers::{DeployOutcome, Driver, PowerState},
    error::{Error, Result},
    states::{Event, ProvisionState},
};

/// The long half of an operation, run by a worker after the RPC has been answered.
#[derive(Debug, Clone, Copy)]
pub enum Work {
    Deploy,
    TearDown,
    Clean,
    Verify,
    Power {
        target: PowerState,
        reboot: bool,
        requested: &'static str,
        timeout: Duration,
    },
}

impl Work {
    /// The work that must follow a move into `to`, None when the move completes the operation.
    fn after(to: ProvisionState) -> Result<Option<Work>> {
        match to {
            ProvisionState::Deploying => Ok(Some(Work::Deploy)),
            ProvisionState::Deleting => Ok(Some(Work::TearDown)),
            ProvisionState::Cleaning => Ok(Some(Work::Clean)),
            ProvisionState::Verifying => Ok(Some(Work::Verify)),
            s if s.is_unstable() => Err(Error::InvalidParameterValue(format!(
                "Moving a node to \"{s}\" is not supported by Ferrum yet."
            ))),
            _ => Ok(None),
        }
    }

    async fn run(self, task: &mut Task, driver: &Driver) -> std::result::Result<(), String> {
        match self {
            Work::Deploy => deploy(task, driver).await,
            Work::TearDown => tear_down(task, driver).await,
            Work::Clean => clean(task).await,
            Work::Verify => verify(task, driver).await,
            Work::Power {
                target,
                reboot,
                requested,
                timeout,
            } => power::set_power(task, driver, target, reboot, requested, timeout).await,
        }
    }

    /// How a failure that escaped the flow (a panic, a shutdown) is described.
    fn name(self) -> &'static str {
        match self {
            Work::Deploy => "Deploy",
            Work::TearDown => "Tear down",
            Work::Clean => "Cleaning",
            Work::Verify => "Verification",
            Work::Power { .. } => "Power change",
        }
    }

    /// Whether a failure moves the node along the table's `fail` edge (a power change never
    /// changes the provision state).
    fn fails_provision(self) -> bool {
        !matches!(self, Work::Power { .. })
    }
}

/// Locks the node, checks `event` (named `verb` to the client) in the table, runs `check`, and
/// either completes the move at once (a stable destination) or applies the event and hands the
/// lock to a worker. No free worker: NoFreeConductorWorker, with the node untouched.
pub(super) async fn start(
    ctx: &Ctx,
    uuid: &str,
    deadline: Option<Instant>,
    verb: &str,
    event: Event,
    check: impl FnOnce(&Task, &Driver) -> Result<NodeChanges>,
) -> Result<()> {
    let mut task = Task::acquire(ctx, uuid, deadline).await?;
    let prepared = (|| {
        let to = task.next_state(event, verb)?;
        let driver = ctx.drivers.for_node(&task.node)?;
        let extra = check(&task, &driver)?;
        let work = Work::after(to)?;
        Ok((driver, extra, work))
    })();
    let (driver, extra, work) = match prepared {
        Ok(p) => p,
        Err(e) => {
            task.release().await;
            return Err(e);
        }
    };
    let Some(work) = work else {
        let done = task.process_event(event, false, extra.release()).await;
        task.release().await;
        return done;
    };
    let Ok(permit) = ctx.workers.clone().try_acquire_owned() else {
        task.release().await;
        return Err(Error::NoFreeConductorWorker);
    };
    if let Err(e) = task
        .process_event(event, true, extra.last_error(None))
        .await
    {
        task.release().await;
        return Err(e);
    }
    spawn_worker(task, driver, work, permit);
    Ok(())
}

/// Runs `work` on a worker that owns `task`'s lock until it ends.
pub(super) fn spawn_worker(task: Task, driver: Driver, work: Work, permit: OwnedSemaphorePermit) {
    let ctx = task.ctx().clone();
    let span = info_span!("work", node.uuid = %task.node.uuid, work = work.name());
    ctx.tracker
        .clone()
        .spawn(run_worker(ctx, task, driver, work, permit).instrument(span));
}

async fn run_worker(
    ctx: Ctx,
    mut task: Task,
    driver: Driver,
    work: Work,
    _permit: OwnedSemaphorePermit,
) {
    let outcome = tokio::select! {
        outcome = AssertUnwindSafe(work.run(&mut task, &driver)).catch_unwind() => outcome,
        () = ctx.abort_work.cancelled() => Ok(Err(format!(
            "{} was aborted: the conductor {} shut down before it finished.",
            work.name(),
            ctx.host
        ))),
    };
    let message = match outcome {
        Ok(Ok(())) => {
            // The flow's last write released the lock; this only acts if it did not.
            task.release().await;
            return;
        }
        Ok(Err(message)) => message,
        Err(panic) => format!(
            "{} failed with an unexpected error in the driver: {}",
            work.name(),
            panic_message(&*panic)
        ),
    };
    let mut extra = NodeChanges::default();
    if !work.fails_provision() {
        extra.target_power_state = Some(None);
    }
    task.fail(message, extra, work.fails_provision()).await;
}

pub async fn do_node_deploy(
    ctx: &Ctx,
    uuid: &str,
    rebuild: bool,
    configdrive: Option<Value>,
    deadline: Option<Instant>,
) -> Result<()> {
    let (verb, event) = if rebuild {
        ("rebuild", Event::Rebuild)
    } else {
        ("active", Event::Deploy)
    };
    start(ctx, uuid, deadline, verb, event, |task, driver| {
        let node = &task.node;
        if node.maintenance {
            return Err(Error::NodeInMaintenance {
                op: "provisioning".to_owned(),
                node: node.uuid.clone(),
            });
        }
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
        let mut extra = NodeChanges::default();
        if let Some(configdrive) = configdrive {
            let mut instance_info = node.instance_info.clone();
            instance_info.insert("configdrive".to_owned(), configdrive);
            extra.instance_info = Some(json_text(&instance_info));
        }
        Ok(extra)
    })
    .await
}

pub async fn do_node_tear_down(ctx: &Ctx, uuid: &str, deadline: Option<Instant>) -> Result<()> {
    start(ctx, uuid, deadline, "deleted", Event::Delete, |_, _| {
        Ok(NodeChanges::default())
    })
    .await
}

/// manage, provide and abort.
pub async fn do_provisioning_action(
    ctx: &Ctx,
    uuid: &str,
    action: &str,
    deadline: Option<Instant>,
) -> Result<()> {
    let event = match action {
        "manage" => Event::Manage,
        "provide" => Event::Provide,
        "abort" => Event::Abort,
        other => {
            return Err(Error::InvalidParameterValue(format!(
                "The provisioning action \"{other}\" is not supported."
            )));
        }
    };
    start(ctx, uuid, deadline, action, event, |task, _| {
        let mut extra = NodeChanges::default();
        if event == Event::Abort {
            let what = match task.node.provision_state {
                ProvisionState::DeployWait | ProvisionState::DeployHold => "deploy",
                ProvisionState::CleanWait | ProvisionState::CleanHold => "clean",
                ProvisionState::InspectWait => "inspection",
                ProvisionState::RescueWait => "rescue",
                _ => "service",
            };
            extra = extra.last_error(Some(format!(
                "By request, the {what} operation was aborted"
            )));
        }
        Ok(extra)
    })
    .await
}

/// prepare, deploy, then `done` (active, powered on) or `wait` (wait call-back), releasing the lock.
async fn deploy(task: &mut Task, driver: &Driver) -> std::result::Result<(), String> {
    driver
        .deploy
        .prepare(&task.node)
        .await
        .map_err(|e| format!("Failed to prepare to deploy: {e}"))?;
    let outcome = match driver.deploy.deploy(&task.node).await {
        Ok(outcome) => outcome,
        Err(e) => {
            // Best effort, as in Ironic: the deploy failure is what the operator needs to see.
            let _ = driver.deploy.clean_up(&task.node).await;
            return Err(format!("Deploy step deploy.deploy failed: {e}."));
        }
    };
    let (event, changes) = match outcome {
        DeployOutcome::Done => {
            driver
                .power
                .set_power_state(&task.node, PowerState::On, Duration::from_secs(60))
                .await
                .map_err(|e| format!("Deploy step deploy.boot_instance failed: {e}."))?;
            (
                Event::Done,
                NodeChanges::default().power(Some(PowerState::On.api_name().to_owned()), None),
            )
        }
        DeployOutcome::Wait => (Event::Wait, NodeChanges::default()),
    };
    task.process_event(event, false, changes.release())
        .await
        .map_err(|e| format!("Failed to record the end of the deploy: {e}"))
}

/// Tear down, power off, forget the instance, then automated cleaning.
async fn tear_down(task: &mut Task, driver: &Driver) -> std::result::Result<(), String> {
    driver
        .deploy
        .tear_down(&task.node)
        .await
        .map_err(|e| format!("Failed to tear down: {e}"))?;
    driver
        .power
        .set_power_state(&task.node, PowerState::Off, Duration::from_secs(60))
        .await
        .map_err(|e| format!("Failed to tear down: {e}"))?;
    let mut changes =
        NodeChanges::default().power(Some(PowerState::Off.api_name().to_owned()), None);
    changes.instance_info = Some("{}".to_owned());
    changes.instance_uuid = Some(None);
    task.process_event(Event::Clean, true, changes)
        .await
        .map_err(|e| format!("Failed to tear down: {e}"))?;
    clean(task).await
}

/// Automated cleaning. The fake hardware has no clean steps, so cleaning completes at once.
async fn clean(task: &mut Task) -> std::result::Result<(), String> {
    task.process_event(Event::Done, false, NodeChanges::default().release())
        .await
        .map_err(|e| format!("Failed to finish cleaning: {e}"))
}

/// `manage` from enroll: check the power credentials and read the power state.
async fn verify(task: &mut Task, driver: &Driver) -> std::result::Result<(), String> {
    let uuid = task.node.uuid.clone();
    driver
        .power
        .validate(&task.node)
        .map_err(|e| format!("Failed to validate power driver interface for node {uuid}: {e}"))?;
    let power = driver
        .power
        .get_power_state(&task.node)
        .await
        .map_err(|e| format!("Failed to get power state for node {uuid}: {e}"))?;
    let changes = NodeChanges::default().power(Some(power.api_name().to_owned()), None);
    task.process_event(Event::Done, false, changes.release())
        .await
        .map_err(|e| format!("Failed to finish verification: {e}"))
}
