//! The power-state sync (Ironic's `_sync_power_states` and `do_sync_power_state`) and the
//! recovery from power failures (Ironic's `_power_failure_recovery`): two periodic loops of each
//! conductor over the nodes it owns on the hash ring, every `sync_power_state_interval` and every
//! `power_failure_recovery_interval`.
//!
//! A round reads the nodes in pages by id (its cost per node stays the same at any number of
//! nodes), leaves the locked ones to the next round, and asks each node's hardware for its power
//! state: at most `sync_power_state_workers` nodes at once, and at most
//! `sync_power_state_workers_per_bmc` of them on one BMC (Ferrum's own bound, so that a BMC
//! serving many systems, or a chassis manager, is not flooded). Nothing is locked or written
//! while a BMC is asked. Only a node whose record must change is locked, without waiting (a node
//! locked meanwhile is left to the next round), then checked again as it is now, corrected and
//! released, as Ironic's sync upgrades its lock.
//!
//! As in Ironic: a node with no recorded power state gets the hardware's; a mismatch puts the
//! hardware back into the recorded state (`force_power_state_during_sync`, unless the node has
//! `disable_power_off`) or records the hardware's; a node that fails more than
//! `power_state_sync_max_retries` rounds in a row (its BMC unreachable, or a mismatch that comes
//! back) gets the hardware's state (none when unreachable), maintenance, Ironic's
//! `maintenance_reason` and the fault `power failure`, unless it was in maintenance already;
//! the recovery takes a node with that fault out of maintenance once its BMC answers again.
//! `baremetal.node.power_state_corrected.success` announces each change of the recorded state.
//! The count of failed rounds is kept in memory, per conductor, as Ironic keeps it.
//!
//! Where Ferrum differs, on purpose: the sync never clears `last_error` (Ironic's clears it
//! whenever the power state matches, whatever the provision state: spec §12 #1), and never
//! replaces the `last_error` of a node in a failure state (its own failure is recorded in the
//! node's history and `maintenance_reason`); every correction and recovery is an `INFO` entry of
//! the node's history (event type `monitoring`), a failure an `ERROR` one.

use std::{
    collections::HashMap,
    sync::{
        Arc, Mutex,
        atomic::{AtomicU64, AtomicUsize, Ordering},
    },
    time::Duration,
};

use tokio::{sync::Semaphore, task::JoinSet, time::Instant};
use tokio_util::sync::CancellationToken;
use tracing::{debug, error, info, warn};

use super::{
    Ctx,
    task::{self, Task},
    worker::hw,
};
use crate::{
    db::{
        self,
        nodes::{POWER_FAILURE, PowerScan},
    },
    drivers::Driver,
    error::Error,
    node::{
        Node, NodeChanges, PowerState,
        history::{HistoryEntry, MONITORING},
        truncate_error,
    },
    notifications::{Status, node as notify_node},
};

/// Nodes read from the database at a time.
const PAGE: i64 = 500;
/// Nodes read and waiting for a worker at most: enough look-ahead that the nodes of one BMC,
/// waiting for its bound, do not keep the others' workers idle, and a flat memory cost.
const WINDOW: usize = 2000;

/// What the sync keeps between rounds: the failed rounds in a row of each failing node (Ironic's
/// `power_state_sync_count`), and the figures of the last round.
#[derive(Default)]
pub struct PowerSync {
    failures: Mutex<HashMap<String, Failures>>,
    rounds: AtomicU64,
    last: Mutex<Option<RoundStats>>,
}

#[derive(Debug, Clone, Copy)]
struct Failures {
    count: u32,
    /// The last round that read the node: a node no round reads any more (deleted, in
    /// maintenance, owned by another conductor) is forgotten.
    seen: u64,
}

impl PowerSync {
    /// The figures of the last sync round of this conductor, None before the first.
    pub fn last_round(&self) -> Option<RoundStats> {
        self.last.lock().ok().and_then(|last| last.clone())
    }

    fn failures(&self, uuid: &str) -> u32 {
        self.failures
            .lock()
            .ok()
            .and_then(|f| f.get(uuid).map(|f| f.count))
            .unwrap_or(0)
    }

    fn set_failures(&self, uuid: &str, count: u32, round: u64) {
        let Ok(mut failures) = self.failures.lock() else {
            return;
        };
        if count == 0 {
            failures.remove(uuid);
        } else {
            failures.insert(uuid.to_owned(), Failures { count, seen: round });
        }
    }

    /// Keeps the count of a node that `round` read but left alone (locked).
    fn seen(&self, uuid: &str, round: u64) {
        if let Ok(mut failures) = self.failures.lock()
            && let Some(f) = failures.get_mut(uuid)
        {
            f.seen = round;
        }
    }

    fn forget_unseen(&self, round: u64) {
        if let Ok(mut failures) = self.failures.lock() {
            failures.retain(|_, f| f.seen >= round);
        }
    }
}

/// What one round did: what the conductor logs, and tests and the benchmark read.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RoundStats {
    /// Nodes this conductor owns whose hardware the round asked.
    pub nodes: usize,
    /// Nodes this conductor owns that were locked, left to the next round.
    pub locked: usize,
    /// Nodes whose record (or hardware) was corrected, or that recovered.
    pub corrected: usize,
    /// Nodes whose hardware could not be read or corrected.
    pub failed: usize,
    /// The most nodes synced at once, all BMCs together, and on one BMC.
    pub max_in_flight: usize,
    pub max_in_flight_per_bmc: usize,
    pub took: Duration,
}

/// Syncs the power state of this conductor's nodes every `sync_power_state_interval` (never
/// when it is 0), until `shutdown`.
pub(super) async fn sync_loop(ctx: Ctx, shutdown: CancellationToken) {
    let interval = ctx.config.sync_power_state_interval;
    run_every(ctx, shutdown, interval, PowerScan::Sync).await;
}

/// Asks the nodes in maintenance for a `power failure` again every
/// `power_failure_recovery_interval` (never when it is 0), until `shutdown`.
pub(super) async fn recovery_loop(ctx: Ctx, shutdown: CancellationToken) {
    let interval = ctx.config.power_failure_recovery_interval;
    run_every(ctx, shutdown, interval, PowerScan::Recovery).await;
}

async fn run_every(ctx: Ctx, shutdown: CancellationToken, interval: Duration, scan: PowerScan) {
    if interval.is_zero() {
        return;
    }
    let what = match scan {
        PowerScan::Sync => "sync",
        PowerScan::Recovery => "failure recovery",
    };
    let mut tick = tokio::time::interval(interval);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    // The first round one interval after the start, as Ironic's periodic tasks run.
    tick.tick().await;
    loop {
        tokio::select! {
            biased;
            _ = shutdown.cancelled() => return,
            _ = tick.tick() => {}
        }
        if !ctx.lease.is_serving() {
            continue;
        }
        let stats = match round(&ctx, scan, &shutdown).await {
            Ok(stats) => stats,
            Err(e) => {
                warn!(error = %e, "Power state {what} round failed: {e}");
                continue;
            }
        };
        if stats.nodes + stats.locked > 0 {
            // The figures in the message itself, where tests and operators read them.
            info!(
                "Power state {what} round: nodes={} locked={} corrected={} failed={} \
                 max_in_flight={} max_in_flight_per_bmc={} took_ms={}",
                stats.nodes,
                stats.locked,
                stats.corrected,
                stats.failed,
                stats.max_in_flight,
                stats.max_in_flight_per_bmc,
                stats.took.as_millis()
            );
        }
        if stats.took > interval {
            warn!(
                "The power state {what} round took {:.1} s, longer than its interval ({} s); \
                 more sync_power_state_workers, or more conductors, would shorten it",
                stats.took.as_secs_f64(),
                interval.as_secs_f64()
            );
        }
        if scan == PowerScan::Sync
            && let Ok(mut last) = ctx.power_sync.last.lock()
        {
            *last = Some(stats);
        }
    }
}

/// The bounds and gauges of one round.
struct Round {
    /// The round's number, which stamps the failure counts it reads.
    number: u64,
    workers: Semaphore,
    per_bmc: usize,
    in_flight: AtomicUsize,
    max_in_flight: AtomicUsize,
    max_in_flight_per_bmc: AtomicUsize,
}

/// One BMC's bound within a round, shared by the nodes it serves.
struct Bmc {
    permits: Semaphore,
    in_flight: AtomicUsize,
}

/// A node being synced: counted while it lives.
struct InFlight<'a> {
    round: &'a Round,
    bmc: Option<&'a Bmc>,
}

impl Round {
    fn enter<'a>(&'a self, bmc: Option<&'a Bmc>) -> InFlight<'a> {
        let now = self.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
        self.max_in_flight.fetch_max(now, Ordering::SeqCst);
        if let Some(bmc) = bmc {
            let now = bmc.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
            self.max_in_flight_per_bmc.fetch_max(now, Ordering::SeqCst);
        }
        InFlight { round: self, bmc }
    }
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.round.in_flight.fetch_sub(1, Ordering::SeqCst);
        if let Some(bmc) = self.bmc {
            bmc.in_flight.fetch_sub(1, Ordering::SeqCst);
        }
    }
}

/// What became of one node.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Outcome {
    /// Nothing to do (in sync, or no longer a node to sync).
    Unchanged,
    Corrected,
    Failed,
    /// Locked by someone else when it had to be written: the next round tries again.
    Locked,
}

/// One round over the nodes `scan` reads that this conductor owns, until done or `stop`.
pub async fn round(
    ctx: &Ctx,
    scan: PowerScan,
    stop: &CancellationToken,
) -> crate::error::Result<RoundStats> {
    let started = Instant::now();
    let owner = super::Owner::now(ctx).await?;
    let round = Arc::new(Round {
        number: ctx.power_sync.rounds.fetch_add(1, Ordering::SeqCst) + 1,
        workers: Semaphore::new(ctx.config.sync_power_state_workers),
        per_bmc: ctx.config.sync_power_state_workers_per_bmc,
        in_flight: AtomicUsize::new(0),
        max_in_flight: AtomicUsize::new(0),
        max_in_flight_per_bmc: AtomicUsize::new(0),
    });
    let mut stats = RoundStats::default();
    let mut running: JoinSet<Outcome> = JoinSet::new();
    let mut bmcs: HashMap<String, Arc<Bmc>> = HashMap::new();
    let mut after = 0;
    let scanned: crate::error::Result<()> = async {
        loop {
            let page = db::nodes::power_scan_page(&ctx.db, scan, &ctx.group, after, PAGE).await?;
            let full = i64::try_from(page.len()).is_ok_and(|n| n == PAGE);
            // The BMCs no waiting node names any more.
            bmcs.retain(|_, bmc| Arc::strong_count(bmc) > 1);
            for node in page {
                after = node.id;
                if stop.is_cancelled() {
                    return Ok(());
                }
                if !owner.owns(&node) {
                    continue;
                }
                if node.reservation.is_some() {
                    stats.locked += 1;
                    ctx.power_sync.seen(&node.uuid, round.number);
                    continue;
                }
                let driver = match ctx.drivers.for_node(&node) {
                    Ok(driver) => driver,
                    Err(e) => {
                        debug!(node.uuid = %node.uuid, error = %e, "Power state sync skips node {}: {e}", node.uuid);
                        continue;
                    }
                };
                let bmc = driver.power.bmc(&node).map(|address| {
                    bmcs.entry(address)
                        .or_insert_with(|| {
                            Arc::new(Bmc {
                                permits: Semaphore::new(round.per_bmc),
                                in_flight: AtomicUsize::new(0),
                            })
                        })
                        .clone()
                });
                while running.len() >= WINDOW {
                    if let Some(done) = running.join_next().await {
                        tally(&mut stats, done);
                    }
                }
                stats.nodes += 1;
                // Tracked, so that a graceful shutdown waits for a correction in progress.
                running.spawn(ctx.tracker.track_future(visit(
                    ctx.clone(),
                    round.clone(),
                    node,
                    driver,
                    bmc,
                    scan,
                )));
            }
            if !full {
                return Ok(());
            }
        }
    }
    .await;
    while let Some(done) = running.join_next().await {
        tally(&mut stats, done);
    }
    scanned?;
    if scan == PowerScan::Sync && !stop.is_cancelled() {
        ctx.power_sync.forget_unseen(round.number);
    }
    stats.max_in_flight = round.max_in_flight.load(Ordering::SeqCst);
    stats.max_in_flight_per_bmc = round.max_in_flight_per_bmc.load(Ordering::SeqCst);
    stats.took = started.elapsed();
    Ok(stats)
}

fn tally(stats: &mut RoundStats, done: Result<Outcome, tokio::task::JoinError>) {
    match done {
        Ok(Outcome::Unchanged) => {}
        Ok(Outcome::Corrected) => stats.corrected += 1,
        Ok(Outcome::Failed) => stats.failed += 1,
        Ok(Outcome::Locked) => stats.locked += 1,
        Err(e) => {
            // A panic in a driver: the task's drop released a lock it held.
            error!(error = %e, "Power state sync of a node panicked: {e}");
            stats.failed += 1;
        }
    }
}

/// Syncs (or recovers) one node once a worker and its BMC allow.
async fn visit(
    ctx: Ctx,
    round: Arc<Round>,
    node: Node,
    driver: Driver,
    bmc: Option<Arc<Bmc>>,
    scan: PowerScan,
) -> Outcome {
    // The BMC's bound first: a node waiting for its BMC holds no worker another BMC could use.
    let _bmc_permit = match &bmc {
        Some(bmc) => bmc.permits.acquire().await.ok(),
        None => None,
    };
    let _worker = round.workers.acquire().await.ok();
    if ctx.abort_work.is_cancelled() {
        return Outcome::Unchanged;
    }
    let _in_flight = round.enter(bmc.as_deref());
    match scan {
        PowerScan::Sync => {
            let previous = ctx.power_sync.failures(&node.uuid);
            let (count, outcome) = sync_node(&ctx, &node, &driver, previous).await;
            ctx.power_sync.set_failures(&node.uuid, count, round.number);
            outcome
        }
        PowerScan::Recovery => recover_node(&ctx, &node, &driver).await,
    }
}

/// The node's power state as its hardware reports it; None when the conductor's shutdown cut
/// the call short.
async fn read_power(ctx: &Ctx, driver: &Driver, node: &Node) -> Option<Result<PowerState, String>> {
    tokio::select! {
        read = driver.power.get_power_state(node) => Some(read.map_err(|e| e.to_string())),
        () = ctx.abort_work.cancelled() => None,
    }
}

/// Locks `uuid` without waiting for another holder.
async fn lock_now(ctx: &Ctx, uuid: &str) -> Result<Task, Outcome> {
    match task::lock_now(ctx, uuid).await {
        Ok(task) => Ok(task),
        Err(Error::NodeLocked { host, .. }) => {
            info!(node.uuid = %uuid, "During sync_power_state, node {uuid} was already locked by {host}; the next round syncs it");
            Err(Outcome::Locked)
        }
        Err(Error::NodeNotFound { .. }) => Err(Outcome::Unchanged),
        Err(e) => {
            warn!(node.uuid = %uuid, error = %e, "During sync_power_state, node {uuid} could not be locked: {e}");
            Err(Outcome::Failed)
        }
    }
}

/// Python's `str()` of a power state, as Ironic's messages show it (`None` when unknown).
fn shown(state: Option<PowerState>) -> &'static str {
    state.map_or("None", PowerState::api_name)
}

/// Ironic's `do_sync_power_state` for a node that `previous` rounds in a row failed: returns
/// the new count (0 once the node is in sync) and what happened.
async fn sync_node(ctx: &Ctx, node: &Node, driver: &Driver, previous: u32) -> (u32, Outcome) {
    let count = previous + 1;
    let max = ctx.config.power_state_sync_max_retries;
    let uuid = &node.uuid;
    // A node whose state was never known and whose driver_info is not usable is not synced.
    if node.power_state.is_none() && driver.power.validate(node).is_err() {
        return (0, Outcome::Unchanged);
    }
    let actual = match read_power(ctx, driver, node).await {
        None => return (previous, Outcome::Unchanged),
        Some(Ok(actual)) => actual,
        Some(Err(e)) if count > max => {
            let task = match lock_now(ctx, uuid).await {
                Ok(task) => task,
                Err(outcome) => return (previous, outcome),
            };
            if !still_synced(&task.node) {
                task.release().await;
                return (0, Outcome::Unchanged);
            }
            retries_exceeded(ctx, task, None, Some(e.as_str())).await;
            return (count, Outcome::Failed);
        }
        Some(Err(e)) => {
            warn!(node.uuid = %uuid, "During sync_power_state, could not get power state for node {uuid}, attempt {count} of {max}. Error: {e}.");
            return (count, Outcome::Failed);
        }
    };
    if node.power_state == Some(actual) {
        return (0, Outcome::Unchanged);
    }
    // The record must change: lock, and decide again on the node as it is now.
    let task = match lock_now(ctx, uuid).await {
        Ok(task) => task,
        Err(outcome) => return (previous, outcome),
    };
    if task.node.power_state == Some(actual) || !still_synced(&task.node) {
        task.release().await;
        return (0, Outcome::Unchanged);
    }
    let Some(recorded) = task.node.power_state else {
        info!(node.uuid = %uuid, "During sync_power_state, node {uuid} has no previous known state. Recording current state '{actual}'.");
        record(ctx, task, None, actual, None).await;
        return (0, Outcome::Corrected);
    };
    if count > max {
        retries_exceeded(ctx, task, Some(actual), None).await;
        return (count, Outcome::Failed);
    }
    if ctx.config.force_power_state_during_sync && !task.node.disable_power_off {
        let outcome = force(ctx, task, driver, recorded, actual, (count, max)).await;
        return (count, outcome);
    }
    let event = format!(
        "During sync_power_state, node {uuid} state '{actual}' does not match expected state \
         '{recorded}'. Updating recorded state to '{actual}'."
    );
    warn!(node.uuid = %uuid, "{event}");
    record(ctx, task, Some(recorded), actual, Some(event)).await;
    (count, Outcome::Corrected)
}

/// Whether the sync still looks at `node` (read under its lock): not in maintenance, in a
/// state it syncs, no power change pending.
fn still_synced(node: &Node) -> bool {
    !node.maintenance && node.provision_state.power_synced() && node.target_power_state.is_none()
}

/// Records the hardware's state `actual` on the locked node, the event (if any) in its history,
/// releases it, and announces the correction from `recorded`.
async fn record(
    ctx: &Ctx,
    mut task: Task,
    recorded: Option<PowerState>,
    actual: PowerState,
    event: Option<String>,
) {
    let node = &task.node;
    let entry = event.map(|event| {
        HistoryEntry::info(node.id, &ctx.host, MONITORING, &event, node.provision_state)
    });
    let changes = NodeChanges {
        power_state: Some(Some(actual)),
        ..NodeChanges::default()
    };
    match task.write_recording(changes.release(), entry).await {
        Ok(()) => notify_corrected(ctx, &task.node, recorded),
        Err(e) => {
            warn!(node.uuid = %task.node.uuid, error = %e, "Could not record the power state of node {}: {e}", task.node.uuid);
            task.release().await;
        }
    }
}

/// Puts the hardware of the locked node back into the `recorded` state (Ironic's
/// `node_power_action` from the sync), as a power change does: the target shown while it
/// runs, `power_set` start and end (or error).
async fn force(
    ctx: &Ctx,
    mut task: Task,
    driver: &Driver,
    recorded: PowerState,
    actual: PowerState,
    (count, max): (u32, u32),
) -> Outcome {
    let uuid = task.node.uuid.clone();
    warn!(node.uuid = %uuid, "During sync_power_state, node {uuid} state '{actual}' does not match expected state. Changing hardware state to '{recorded}'.");
    let pending = NodeChanges {
        target_power_state: Some(Some(recorded)),
        ..NodeChanges::default()
    };
    if let Err(e) = task.write(pending).await {
        warn!(node.uuid = %uuid, error = %e, "Could not start the power change of node {uuid}: {e}");
        task.release().await;
        return Outcome::Failed;
    }
    ctx.notifier.emit("node", "power_set", Status::Start, || {
        notify_node::power_set(&task.node, recorded.into())
    });
    let timeout = ctx.config.power_state_change_timeout;
    let done = match hw(
        &task,
        driver.power.set_power_state(&task.node, recorded, timeout),
    )
    .await
    {
        Ok(Ok(())) => Ok(()),
        Ok(Err(e)) => Err(e.to_string()),
        Err(cut) => Err(cut),
    };
    let node = &task.node;
    let (changes, entry, status) = match &done {
        Ok(()) => {
            let event = format!(
                "During sync_power_state, node {uuid} state '{actual}' did not match expected \
                 state '{recorded}'. Changed hardware state to '{recorded}'."
            );
            let entry =
                HistoryEntry::info(node.id, &ctx.host, MONITORING, &event, node.provision_state);
            let changes = NodeChanges::default().power(Some(recorded), None);
            (changes, entry, Status::End)
        }
        Err(e) => {
            let event =
                format!("Failed to change power state to '{recorded}' by '{recorded}': {e}");
            error!(node.uuid = %uuid, "Failed to change power state of node {uuid} to '{recorded}', attempt {count} of {max}: {e}");
            let entry =
                HistoryEntry::error(node.id, &ctx.host, MONITORING, &event, node.provision_state);
            let mut changes = NodeChanges {
                target_power_state: Some(None),
                ..NodeChanges::default()
            };
            // A failure state's own error stays: this one is in the history.
            if !node.provision_state.is_failure() {
                changes = changes.last_error(Some(event));
            }
            (changes, entry, Status::Error)
        }
    };
    if let Err(e) = task.write_recording(changes.release(), Some(entry)).await {
        warn!(node.uuid = %uuid, error = %e, "Could not record the power change of node {uuid}: {e}");
        task.release().await;
        return Outcome::Failed;
    }
    ctx.notifier.emit("node", "power_set", status, || {
        notify_node::power_set(&task.node, recorded.into())
    });
    if done.is_ok() {
        Outcome::Corrected
    } else {
        Outcome::Failed
    }
}

/// Ironic's `handle_sync_power_state_max_retries_exceeded`: the locked node gets the hardware's
/// state (`actual`, None when its BMC did not answer) and, unless an operator put it into
/// maintenance already, maintenance with Ironic's reason and the fault `power failure`.
async fn retries_exceeded(
    ctx: &Ctx,
    mut task: Task,
    actual: Option<PowerState>,
    error: Option<&str>,
) {
    let node = &task.node;
    let uuid = node.uuid.clone();
    let recorded = node.power_state;
    let mut message = format!(
        "During sync_power_state, max retries exceeded for node {uuid}, node state {} does not \
         match expected state '{}'. Updating DB state to '{}' Switching node to maintenance mode.",
        shown(actual),
        shown(recorded),
        shown(actual)
    );
    if let Some(error) = error {
        message.push_str(&format!(" Error: {error}"));
    }
    let message = truncate_error(message);
    let entry = HistoryEntry::error(
        node.id,
        &ctx.host,
        MONITORING,
        &message,
        node.provision_state,
    );
    let mut changes = NodeChanges {
        power_state: Some(actual),
        ..NodeChanges::default()
    };
    // Ironic writes its message into last_error; a failure state keeps its own.
    if !node.provision_state.is_failure() {
        changes = changes.last_error(Some(message.clone()));
    }
    if !node.maintenance {
        changes.maintenance = Some(true);
        changes.maintenance_reason = Some(Some(message.clone()));
        changes.fault = Some(Some(POWER_FAILURE.to_owned()));
    }
    match task.write_recording(changes.release(), Some(entry)).await {
        Ok(()) => {
            error!(node.uuid = %uuid, "{message}");
            if recorded != actual {
                notify_corrected(ctx, &task.node, recorded);
            }
        }
        Err(e) => {
            warn!(node.uuid = %uuid, error = %e, "Could not put node {uuid} into maintenance: {e}");
            task.release().await;
        }
    }
}

/// Ironic's `_power_failure_recovery` for one node: once its BMC answers, the node in
/// maintenance for a `power failure` gets the hardware's state and leaves maintenance.
async fn recover_node(ctx: &Ctx, node: &Node, driver: &Driver) -> Outcome {
    let uuid = &node.uuid;
    // Its driver_info may have been fixed while it was in maintenance.
    if let Err(e) = driver.power.validate(node) {
        debug!(node.uuid = %uuid, "During power_failure_recovery, could not get power state for node {uuid}: {e}");
        return Outcome::Failed;
    }
    let actual = match read_power(ctx, driver, node).await {
        None => return Outcome::Unchanged,
        Some(Ok(actual)) => actual,
        Some(Err(e)) => {
            debug!(node.uuid = %uuid, "During power_failure_recovery, could not get power state for node {uuid}: {e}");
            return Outcome::Failed;
        }
    };
    let mut task = match lock_now(ctx, uuid).await {
        Ok(task) => task,
        Err(outcome) => return outcome,
    };
    let fresh = &task.node;
    if !fresh.maintenance
        || fresh.fault.as_deref() != Some(POWER_FAILURE)
        || fresh.target_power_state.is_some()
        || fresh.provision_state == crate::states::ProvisionState::Enroll
    {
        task.release().await;
        return Outcome::Unchanged;
    }
    let recorded = fresh.power_state;
    let event =
        format!("Node {uuid} is recovered from power failure with actual power state '{actual}'.");
    let entry = HistoryEntry::info(
        fresh.id,
        &ctx.host,
        MONITORING,
        &event,
        fresh.provision_state,
    );
    let changes = NodeChanges {
        power_state: Some(Some(actual)),
        maintenance: Some(false),
        maintenance_reason: Some(None),
        fault: Some(None),
        ..NodeChanges::default()
    };
    match task.write_recording(changes.release(), Some(entry)).await {
        Ok(()) => {
            info!(node.uuid = %uuid, "{event}");
            if recorded != Some(actual) {
                notify_corrected(ctx, &task.node, recorded);
            }
            Outcome::Corrected
        }
        Err(e) => {
            warn!(node.uuid = %uuid, error = %e, "Could not record the recovery of node {uuid}: {e}");
            task.release().await;
            Outcome::Failed
        }
    }
}

/// `baremetal.node.power_state_corrected.success`: the recorded power state of `node` (as
/// written) was changed from `from`.
fn notify_corrected(ctx: &Ctx, node: &Node, from: Option<PowerState>) {
    ctx.notifier
        .emit("node", "power_state_corrected", Status::Success, || {
            notify_node::power_state_corrected(node, from)
        });
}
