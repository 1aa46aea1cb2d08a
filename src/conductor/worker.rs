//! The worker pool: runs the long half of an operation (a [`Flow`]: deploy, tear down, clean, a
//! power change, ...) after the RPC has been answered, on a worker that owns the node's lock until
//! the flow ends.
//!
//! It owns the permits (one per running flow, taken before the event is applied, so that a busy
//! conductor refuses with the node untouched), spawning on the conductor's tracker (which shutdown
//! waits for), the panic guard, cutting driver calls short when the graceful-shutdown period ends
//! ([`hw`]), and recording a failure: the flow's `fail` edge (when it has one) with `last_error`,
//! the lock released in the same statement.
//!
//! It must not know what any flow does: a flow is handed over as a value, and this module imports
//! no flow's module (`flows`, `power`, `vendor`).

use std::panic::AssertUnwindSafe;

use futures::FutureExt;
use tokio::sync::OwnedSemaphorePermit;
use tracing::{Instrument, info_span};

use super::{Ctx, task::Task};
use crate::{
    drivers::{Driver, DriverError},
    error::{Error, Result, panic_message},
    node::{Node, NodeChanges},
};

/// The long half of an operation, run by a worker that owns the node's lock.
#[async_trait::async_trait]
pub trait Flow: Send + Sync + 'static {
    /// What the flow is called where a failure that escaped it (a panic, a shutdown) is
    /// described ("Deploy failed with an unexpected error ..."), and in its span.
    fn name(&self) -> &'static str;

    /// Drives the hardware and records the outcome; the flow's last write releases the lock. An
    /// error is the `last_error` the worker records (see [`Flow::failure`]).
    async fn run(&self, task: &mut Task, driver: &Driver) -> std::result::Result<(), String>;

    /// What a failure of the flow writes besides `last_error`, for the node as the flow left it.
    fn failure(&self, node: &Node, message: &str) -> Failure;

    /// Called once a failure of the flow is written, with the node as written (its
    /// notification, say). Nothing by default.
    fn failed(&self, _ctx: &Ctx, _node: &Node) {}

    /// Whether the flow sends its own `power_set` notifications. By default the power
    /// interface the flow is given announces every change it makes (deploys, tear-downs,
    /// cleaning and inspection power the node too, and Ironic's `node_power_action` notifies
    /// for each); a flow that announces its own gets the bare interface.
    fn announces_power(&self) -> bool {
        false
    }
}

/// A flow chosen at run time: the one the state a move leads to names (`flows::after`).
#[async_trait::async_trait]
impl Flow for Box<dyn Flow> {
    fn name(&self) -> &'static str {
        (**self).name()
    }

    async fn run(&self, task: &mut Task, driver: &Driver) -> std::result::Result<(), String> {
        (**self).run(task, driver).await
    }

    fn failure(&self, node: &Node, message: &str) -> Failure {
        (**self).failure(node, message)
    }

    fn failed(&self, ctx: &Ctx, node: &Node) {
        (**self).failed(ctx, node);
    }

    fn announces_power(&self) -> bool {
        (**self).announces_power()
    }
}

/// How a failed flow is recorded.
#[derive(Debug, Default)]
pub struct Failure {
    /// Changes written with `last_error`.
    pub extra: NodeChanges,
    /// Whether the node moves along the table's `fail` edge (a power change never changes the
    /// provision state).
    pub fail_edge: bool,
}

impl Failure {
    /// The node moves along its `fail` edge, and nothing is written but `last_error`.
    pub fn fail_edge() -> Failure {
        Failure {
            extra: NodeChanges::default(),
            fail_edge: true,
        }
    }
}

/// A free worker, taken before the event is applied and then handed the flow.
pub struct Worker {
    permit: Permit,
}

/// A worker's permit, counted busy in the metrics (`ferrum_conductor_workers_busy`) from its
/// taking until it is given back.
struct Permit {
    _permit: OwnedSemaphorePermit,
}

impl Permit {
    fn new(permit: OwnedSemaphorePermit) -> Permit {
        crate::metrics::get().worker_busy(true);
        Permit { _permit: permit }
    }
}

impl Drop for Permit {
    fn drop(&mut self) {
        crate::metrics::get().worker_busy(false);
    }
}

impl Worker {
    /// Takes a free worker into `slot`, unless it holds one already (a decision may run again on
    /// a fresher read). None free: NoFreeConductorWorker.
    pub fn reserve(ctx: &Ctx, slot: &mut Option<Worker>) -> Result<()> {
        if slot.is_none() {
            *slot = Some(Worker::take(ctx)?);
        }
        Ok(())
    }

    /// Takes a free worker; none free: NoFreeConductorWorker.
    pub fn take(ctx: &Ctx) -> Result<Worker> {
        let permit = ctx
            .workers
            .clone()
            .try_acquire_owned()
            .map_err(|_| Error::NoFreeConductorWorker)?;
        Ok(Worker {
            permit: Permit::new(permit),
        })
    }

    /// Runs `work`, which is about no node (a driver-level vendor method), on this worker;
    /// its failure or panic is logged, and a shutdown cuts it like a driver call of a flow.
    pub fn run_detached(
        self,
        ctx: &Ctx,
        name: &'static str,
        work: impl std::future::Future<Output = std::result::Result<(), String>> + Send + 'static,
    ) {
        let abort = ctx.abort_work.clone();
        let permit = self.permit;
        ctx.tracker.spawn(
            async move {
                let _permit = permit;
                let outcome = tokio::select! {
                    done = AssertUnwindSafe(work).catch_unwind() => done,
                    () = abort.cancelled() => Ok(Err("the conductor shut down first".to_owned())),
                };
                match outcome {
                    Ok(Ok(())) => {}
                    Ok(Err(message)) => tracing::warn!("{name} failed: {message}"),
                    Err(panic) => tracing::warn!(
                        "{name} failed with an unexpected error in the driver: {}",
                        panic_message(&*panic)
                    ),
                }
            }
            .instrument(info_span!("work", work = name)),
        );
    }

    /// Runs `flow` on this worker, which owns `task`'s lock until the flow ends.
    pub fn run(self, task: Task, flow: impl Flow) -> Result<()> {
        let mut driver = task.ctx().drivers.for_node(&task.node)?;
        if !flow.announces_power() {
            driver = super::power_announce::announcing(driver, &task.ctx().notifier);
        }
        let ctx = task.ctx().clone();
        let span = info_span!("work", node.uuid = %task.node.uuid, work = flow.name());
        ctx.tracker
            .clone()
            .spawn(run_flow(task, driver, flow, self.permit).instrument(span));
        Ok(())
    }
}

/// Runs a driver call, unless the conductor's graceful-shutdown period ends first: then the work
/// fails with that reason. Only driver calls are cut short, never a database write, so what the
/// database says and what the task believes cannot part.
pub async fn hw<T>(
    task: &Task,
    call: impl std::future::Future<Output = T>,
) -> std::result::Result<T, String> {
    let ctx = task.ctx();
    tokio::select! {
        done = call => Ok(done),
        () = ctx.abort_work.cancelled() => Err(format!(
            "The work was aborted: the conductor {} shut down before the driver finished.",
            ctx.host
        )),
    }
}

/// [`hw`] for a driver call the client waits for (no worker): the driver's error is the
/// client's, and a call cut short by the conductor's shutdown is a 503 to retry.
pub async fn hw_now<T>(
    task: &Task,
    call: impl std::future::Future<Output = std::result::Result<T, DriverError>>,
) -> Result<T> {
    hw(task, call)
        .await
        .map_err(Error::TemporaryFailure)?
        .map_err(|e| e.into_error(&task.node.driver))
}

async fn run_flow(mut task: Task, driver: Driver, flow: impl Flow, _permit: Permit) {
    let outcome = AssertUnwindSafe(flow.run(&mut task, &driver))
        .catch_unwind()
        .await;
    let message = match outcome {
        Ok(Ok(())) => {
            // The flow's last write released the lock; this only acts if it did not.
            task.release().await;
            return;
        }
        Ok(Err(message)) => message,
        Err(panic) => format!(
            "{} failed with an unexpected error in the driver: {}",
            flow.name(),
            panic_message(&*panic)
        ),
    };
    let Failure { extra, fail_edge } = flow.failure(&task.node, &message);
    let ctx = task.ctx().clone();
    if let Some(node) = task.fail(message, extra, fail_edge).await {
        flow.failed(&ctx, &node);
    }
}
