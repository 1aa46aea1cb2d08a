//! The node lock, and the one way a conductor starts changing a node.
//!
//! [`change_node`] decides on the node as last read (often the API's own read, passed along in the
//! RPC) and writes the decision in one statement that is conditional on nobody holding the lock
//! and on the row being unchanged since that read (`nodes.version`). When the work goes on after
//! the reply, the same statement takes the lock and a [`Task`] carries it to the worker. So a PATCH
//! costs one write, and a deploy two (accept, finish), with no window in which another writer could
//! slip in: the exclusion Ironic's lock gives, without its extra round trips.
//!
//! Every write of a held task is conditional on still holding the lock *and* on the provision state
//! it last saw (`db::nodes::update_held`), so the lock is enforced, not advisory (Ironic §12 #2).
//! Provision states change only through a [`Move`], which only the state table makes: computed
//! once where a flow decides on the node, and written by [`change_node`]'s decision or by
//! [`Task::process_event`]. A held task is released by its last write, or explicitly; [`Drop`] is only a
//! backstop for a panic that unwinds through one.

use std::time::Duration;

use tokio::time::Instant;
use tracing::{info, warn};

use super::Ctx;
use crate::{
    db::{
        self,
        children::{ChildWrite, Children},
    },
    error::{Error, Result},
    node::{Node, NodeChanges, history::HistoryEntry},
    notifications::node as notify_node,
    states::{self, Event, ProvisionState},
};

tokio::task_local! {
    /// The request being handled, as `<request id>/<digest of what it asks>` (the request id
    /// is the caller's `X-OpenStack-Request-Id` or the API's own), set by the dispatcher around
    /// each request; workers run outside it. [`change_node`] records it on the node it changes
    /// and answers a repeat of the same request as already applied.
    pub static REQUEST_ID: String;
}

/// Whether a change keeps the node locked for work that continues after the reply.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Hold {
    Release,
    Keep,
}

/// What [`change_node`] does with a node once it has decided.
#[derive(Debug)]
#[expect(
    clippy::large_enum_variant,
    reason = "made once per request and consumed at once; boxing would only add an allocation"
)]
pub enum Decision {
    /// Write these changes; with `Hold::Keep`, take the lock in the same statement.
    Write(NodeChanges, Hold),
    /// Delete the node.
    Delete,
    /// Write nothing: the node stays as read (a heartbeat in a state that records none, a
    /// token that exists already).
    Nothing,
}

/// The first and largest wait before a held node's write is tried again while the database is away.
const WRITE_RETRY_MIN: Duration = Duration::from_millis(100);
const WRITE_RETRY_MAX: Duration = Duration::from_secs(1);

/// How often a write may find the row changed under it (without a lock holder) before giving up:
/// only a storm of concurrent writers to one node gets there.
const MAX_RACES: u32 = 8;

/// Decides on `hint` (the node as its caller read it) or a fresh read, and writes the decision
/// conditionally (see the module doc). `decide` returns the changes and whether to keep the lock;
/// it may run again on a fresher read, and its error (a validation failure) is returned with
/// nothing written. A node locked by someone else is waited for `lock_retry_attempts` times,
/// `lock_retry_interval` apart, never past `deadline`; then NodeLocked names the holder. Nothing
/// is written once `deadline` (when the caller stops waiting) has passed, also by a write that
/// waited on a row lock meanwhile: then DeadlineExceeded says that nothing was changed.
pub async fn change_node(
    ctx: &Ctx,
    uuid: &str,
    hint: Option<Node>,
    deadline: Option<Instant>,
    decide: impl FnMut(&Node) -> Result<Decision>,
) -> Result<(Node, Option<Task>)> {
    change_node_waiting(ctx, uuid, hint, LockWaits::new(ctx, deadline), decide).await
}

/// [`change_node`] without waiting for a lock held by someone else: NodeLocked at once (Ironic
/// upgrading to the exclusive lock without retrying). The write still lands only before
/// `deadline`.
pub async fn change_node_now(
    ctx: &Ctx,
    uuid: &str,
    hint: Option<Node>,
    deadline: Option<Instant>,
    decide: impl FnMut(&Node) -> Result<Decision>,
) -> Result<(Node, Option<Task>)> {
    change_node_waiting(ctx, uuid, hint, LockWaits::none(deadline), decide).await
}

async fn change_node_waiting(
    ctx: &Ctx,
    uuid: &str,
    hint: Option<Node>,
    mut waits: LockWaits,
    mut decide: impl FnMut(&Node) -> Result<Decision>,
) -> Result<(Node, Option<Task>)> {
    let mut node = match hint {
        // A lock seen by the caller may be gone by now: look again before waiting on it.
        Some(node) if node.reservation.is_none() => node,
        _ => db::nodes::get_by_uuid(&ctx.db, uuid).await?,
    };
    let deadline = waits.deadline;
    let mut races = 0;
    let request_id = REQUEST_ID.try_with(Clone::clone).ok();
    loop {
        still_held(ctx, uuid)?;
        // A retry of the request that made the node what it is (its first attempt's answer
        // was lost with a conductor): applied once already, so answered as applied.
        if request_id.is_some() && node.last_request_id == request_id {
            info!(node.uuid = %node.uuid, request_id = ?request_id,
                "Request already applied to node {uuid}; answering it as applied");
            return Ok((node, None));
        }
        if let Some(holder) = &node.reservation {
            waits.wait(&node.uuid, holder).await?;
            node = db::nodes::get_by_uuid(&ctx.db, uuid).await?;
            continue;
        }
        let (changes, hold) = match decide(&node)? {
            Decision::Write(changes, hold) => (changes, hold),
            Decision::Nothing => return Ok((node, None)),
            Decision::Delete => {
                if db::nodes::delete_unlocked(&ctx.db, node.id, node.version, deadline).await? {
                    return Ok((node, None));
                }
                node = read_after_race(ctx, uuid, deadline, &mut races, "it was being deleted")
                    .await?;
                continue;
            }
        };
        let mut changes = changes.touch();
        if let Some(id) = &request_id {
            changes.last_request_id = Some(Some(id.clone()));
        }
        if hold == Hold::Keep {
            changes.reservation = Some(Some(ctx.host.clone()));
        }
        let writer = (ctx.host.as_str(), node.provision_state);
        let write = changes.clone();
        let written =
            db::nodes::update_unlocked(&ctx.db, node.id, node.version, writer, write, deadline)
                .await;
        let landed = match written {
            Ok(true) => {
                changes.mirror_into(&mut node);
                Some(node)
            }
            Ok(false) => None,
            // The database's answer was lost (its connection, its node): the write may have
            // landed, taking the lock, with no flow left to release it and every retry of the
            // request answered as applied. Read back whether the request's id is on the node.
            Err(e @ Error::DatabaseUnavailable(_)) => Some(
                written_by(ctx, uuid, request_id.as_deref(), hold)
                    .await
                    .ok_or(e)?,
            ),
            Err(e) => return Err(e),
        };
        if let Some(node) = landed {
            let task = (hold == Hold::Keep).then(|| Task {
                ctx: ctx.clone(),
                node: node.clone(),
                held: true,
            });
            return Ok((node, task));
        }
        node = read_after_race(ctx, uuid, deadline, &mut races, "this request was applied").await?;
    }
}

/// Node `uuid` as read back after a write whose answer was lost, if that write landed: the
/// node carries the request's id (which it did not before the write) and, for a write that
/// took the lock, this conductor's lock. None when it did not land, when there is no request
/// id to tell, or when the node cannot be read either.
async fn written_by(ctx: &Ctx, uuid: &str, request_id: Option<&str>, hold: Hold) -> Option<Node> {
    let request_id = request_id?;
    let now = db::nodes::get_by_uuid(&ctx.db, uuid).await.ok()?;
    let locked_by_us = now.reservation.as_deref() == Some(ctx.host.as_str());
    let landed =
        now.last_request_id.as_deref() == Some(request_id) && (hold != Hold::Keep || locked_by_us);
    if landed {
        warn!(node.uuid = %uuid, "The database's answer to a change of node {uuid} was lost; it had been applied, and the work goes on");
    }
    landed.then_some(now)
}

/// Refuses to decide on a read of node `uuid` (or of its children) once this conductor's lease
/// is not held: its nodes may have been taken over meanwhile and the request sent again to their
/// next owner, so a decision on what it reads now (a read answered once a cut-off database link
/// came back) could undo what was done since. A write decided earlier is fenced by the node's
/// version.
fn still_held(ctx: &Ctx, uuid: &str) -> Result<()> {
    if ctx.lease.is_held() {
        return Ok(());
    }
    Err(Error::TemporaryFailure(format!(
        "Conductor {} lost its lease on its host name and did not change node {uuid}; please \
         retry.",
        ctx.host
    )))
}

/// After a write of node `uuid` that did not land: DeadlineExceeded if `deadline` has passed
/// (the write may have been refused for it, and its caller has stopped waiting anyway).
/// The node read again after a conditional write found it changed since it was read (`doing`
/// says what was being written), unless the deadline has passed or it has changed
/// [`MAX_RACES`] times: then the caller is told to retry.
async fn read_after_race(
    ctx: &Ctx,
    uuid: &str,
    deadline: Option<Instant>,
    races: &mut u32,
    doing: &str,
) -> Result<Node> {
    not_past(deadline, uuid)?;
    *races += 1;
    if *races > MAX_RACES {
        return Err(Error::Conflict(format!(
            "Node {uuid} kept changing while {doing}; please retry."
        )));
    }
    db::nodes::get_by_uuid(&ctx.db, uuid).await
}

fn not_past(deadline: Option<Instant>, uuid: &str) -> Result<()> {
    if db::deadline::passed(deadline) {
        return Err(Error::DeadlineExceeded {
            node: uuid.to_owned(),
        });
    }
    Ok(())
}

/// Waiting for a lock held by someone else: `lock_retry_attempts` looks in all,
/// `lock_retry_interval` apart, never past the caller's deadline.
struct LockWaits {
    attempts: u32,
    interval: Duration,
    deadline: Option<Instant>,
    looked: u32,
}

impl LockWaits {
    fn new(ctx: &Ctx, deadline: Option<Instant>) -> Self {
        LockWaits {
            attempts: ctx.config.lock_retry_attempts.max(1),
            interval: ctx.config.lock_retry_interval,
            deadline,
            looked: 1,
        }
    }

    /// No wait at all: the first look is the only one.
    fn none(deadline: Option<Instant>) -> Self {
        LockWaits {
            attempts: 1,
            interval: Duration::ZERO,
            deadline,
            looked: 1,
        }
    }

    /// Sleeps before the next look at a node `holder` has locked, or NodeLocked naming the
    /// holder when there is no look left.
    async fn wait(&mut self, uuid: &str, holder: &str) -> Result<()> {
        let out_of_time = self
            .deadline
            .is_some_and(|d| Instant::now() + self.interval >= d);
        if self.looked >= self.attempts || out_of_time {
            crate::metrics::get().lock_conflict();
            return Err(Error::NodeLocked {
                node: uuid.to_owned(),
                host: holder.to_owned(),
            });
        }
        self.looked += 1;
        crate::metrics::get().lock_wait();
        tokio::time::sleep(self.interval).await;
        Ok(())
    }
}

/// Takes the bare lock on `uuid` (Ironic's exclusive `task_manager.acquire`) for a driver call
/// the caller makes while its client waits (setting a boot device, an NMI, a vendor method),
/// or hands to a worker. Nothing else is written, so the node's version stays; a lock held by
/// someone else is waited for as [`change_node`] waits, and the lock is not taken once
/// `deadline` has passed. The caller ends the task with a write that releases it, or
/// [`Task::release`].
pub async fn lock(ctx: &Ctx, uuid: &str, deadline: Option<Instant>) -> Result<Task> {
    lock_waiting(ctx, uuid, LockWaits::new(ctx, deadline)).await
}

/// [`lock`] without waiting for another holder: NodeLocked at once.
pub async fn lock_now(ctx: &Ctx, uuid: &str) -> Result<Task> {
    lock_waiting(ctx, uuid, LockWaits::none(None)).await
}

async fn lock_waiting(ctx: &Ctx, uuid: &str, mut waits: LockWaits) -> Result<Task> {
    loop {
        still_held(ctx, uuid)?;
        let won = db::nodes::reserve(&ctx.db, uuid, &ctx.host, waits.deadline).await?;
        if !won {
            not_past(waits.deadline, uuid)?;
        }
        // Held by us from here when won: nobody else writes the row, so this read is the node.
        let read = db::nodes::get_by_uuid(&ctx.db, uuid).await;
        if won {
            return match read {
                Ok(node) => Ok(Task {
                    ctx: ctx.clone(),
                    node,
                    held: true,
                }),
                Err(e) => {
                    if let Err(release) = db::nodes::unreserve(&ctx.db, uuid, &ctx.host).await {
                        warn!(node.uuid = %uuid, error = %release, "failed to release lock");
                    }
                    Err(e)
                }
            };
        }
        // Released between the two statements: look again at once.
        if let Some(holder) = &read?.reservation {
            waits.wait(uuid, holder).await?;
        }
    }
}

/// Runs `work` on the node `uuid` under its lock ([`lock`]), then releases the lock whatever the
/// outcome (a write of `work` may release it first). A panic in `work` unwinds through the task,
/// whose drop releases it.
pub async fn with_lock<T>(
    ctx: &Ctx,
    uuid: &str,
    deadline: Option<Instant>,
    work: impl AsyncFnOnce(&mut Task) -> Result<T>,
) -> Result<T> {
    let mut task = lock(ctx, uuid, deadline).await?;
    let outcome = work(&mut task).await;
    task.release().await;
    outcome
}

/// Changes the node's ports and portgroups with the exclusion [`change_node`] gives: `decide`
/// runs on the node as read and its ports and portgroups as they are, inside the transaction
/// that bumps the node's version conditional on nobody holding its lock and on that read
/// (`db::children::change_children`); a locked node is waited for as there. Returns the writes made.
pub async fn change_children(
    ctx: &Ctx,
    uuid: &str,
    hint: Option<Node>,
    deadline: Option<Instant>,
    mut decide: impl FnMut(&Node, &Children) -> Result<Vec<ChildWrite>> + Send,
) -> Result<Vec<ChildWrite>> {
    let mut node = match hint {
        Some(node) if node.reservation.is_none() => node,
        _ => db::nodes::get_by_uuid(&ctx.db, uuid).await?,
    };
    let mut waits = LockWaits::new(ctx, deadline);
    let mut races = 0;
    loop {
        still_held(ctx, uuid)?;
        if let Some(holder) = &node.reservation {
            waits.wait(&node.uuid, holder).await?;
            node = db::nodes::get_by_uuid(&ctx.db, uuid).await?;
            continue;
        }
        let read = &node;
        let written = db::children::change_children(
            &ctx.db,
            node.id,
            &node.uuid,
            node.version,
            deadline,
            |children| decide(read, children),
        )
        .await?;
        if let Some(writes) = written {
            return Ok(writes);
        }
        node = read_after_race(ctx, uuid, deadline, &mut races, "this request was applied").await?;
    }
}

/// A move of a node along one edge of the state table: computed once, where a flow decides on
/// the node as read, and carried to the write that makes it. Only [`Move::of`] makes one, from
/// the table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Move {
    from: ProvisionState,
    event: Event,
    to: ProvisionState,
    /// The move is within a manual cleaning, whose target stays `manageable` through `clean
    /// wait` and `clean hold` (the table registers automated cleaning's `available`).
    manual_clean: bool,
}

impl Move {
    /// The move `event` makes from `node`'s state, or InvalidStateRequested naming `verb` (the
    /// word the client used) and the state.
    pub fn of(node: &Node, event: Event, verb: &str) -> Result<Move> {
        let from = node.provision_state;
        let to = states::transition(from, event).map_err(|_| Error::InvalidStateRequested {
            action: verb.to_owned(),
            node: node.uuid.clone(),
            state: from.api_name().to_owned(),
        })?;
        let cleaning = |s: ProvisionState| {
            matches!(
                s,
                ProvisionState::Cleaning | ProvisionState::CleanWait | ProvisionState::CleanHold
            )
        };
        // A manual cleaning aims at manageable all the way, also when it fails (Ironic's
        // `cleaning_error_handler` fails it with `target_state=MANAGEABLE`).
        let manual_clean = cleaning(from)
            && (cleaning(to) || to == ProvisionState::CleanFail)
            && node.target_provision_state == Some(ProvisionState::Manageable);
        Ok(Move {
            from,
            event,
            to,
            manual_clean,
        })
    }

    /// The state the move leads to.
    pub fn to(self) -> ProvisionState {
        self.to
    }

    /// `extra` plus this move: the new state, Ironic's target rule, and the stamp of
    /// `provision_updated_at`.
    pub fn changes(self, worker_follows: bool, extra: NodeChanges) -> NodeChanges {
        let target = if self.manual_clean {
            Some(ProvisionState::Manageable)
        } else {
            states::target_after(self.to, worker_follows)
        };
        extra.provision(self.to, target)
    }
}

fn log_move(uuid: &str, from: ProvisionState, to: ProvisionState, event: Event) {
    info!(
        node.uuid = %uuid,
        from = %from,
        to = %to,
        event = %event,
        "Node {uuid} moved from {from} to {to} on {event}"
    );
}

/// Emits `baremetal.node.provision_set.<status>` for a move written to `node` (as it is now)
/// from `previous` (with its target) on `event`, as Ironic's task manager does for every
/// event it processes. Nothing is built when notifications are off. Every move is counted in
/// the metrics here too (`ferrum_provision_state_changes_total`, `ferrum_deploys_total`).
pub fn notify_move(
    ctx: &Ctx,
    node: &Node,
    previous: ProvisionState,
    previous_target: Option<ProvisionState>,
    event: Event,
) {
    crate::metrics::get().provision_move(previous, node.provision_state);
    let status = notify_node::provision_status(previous, node.provision_state, event);
    ctx.notifier.emit("node", "provision_set", status, || {
        notify_node::provision_set(node, previous, previous_target, event)
    });
}

/// Logs a move that `change_node` made (it writes before it knows the outcome is a move).
pub fn log_change(before: ProvisionState, after: &Node, event: Event) {
    if before != after.provision_state {
        log_move(&after.uuid, before, after.provision_state, event);
    }
}

/// A node locked by this conductor, carried by the worker that continues its work.
pub struct Task {
    ctx: Ctx,
    pub node: Node,
    held: bool,
}

impl Task {
    /// Ironic's shared lock, which takes nothing: work on `node` that writes nothing (a vendor
    /// method that does not need the lock) and runs while others may hold it. Its writes are
    /// refused and its failure is only logged.
    pub fn shared(ctx: &Ctx, node: Node) -> Task {
        Task {
            ctx: ctx.clone(),
            node,
            held: false,
        }
    }

    pub fn ctx(&self) -> &Ctx {
        &self.ctx
    }

    /// Applies `event` through the state table and writes the new state, Ironic's target rule,
    /// and `extra` in one conditional statement. With `extra.release()` the lock goes in the same
    /// statement, which ends the task.
    pub async fn process_event(
        &mut self,
        event: Event,
        worker_follows: bool,
        extra: NodeChanges,
    ) -> Result<()> {
        let step = Move::of(&self.node, event, event.name())?;
        self.make_move(step, worker_follows, extra).await
    }

    /// Writes `step` (computed from this task's node as it is) with `extra`, as
    /// [`process_event`](Self::process_event) does.
    async fn make_move(
        &mut self,
        step: Move,
        worker_follows: bool,
        extra: NodeChanges,
    ) -> Result<()> {
        // Both callers make the move from this task's node just before.
        debug_assert_eq!(step.from, self.node.provision_state, "a stale move");
        let previous_target = self.node.target_provision_state;
        self.write(step.changes(worker_follows, extra)).await?;
        log_move(&self.node.uuid, step.from, step.to, step.event);
        notify_move(
            &self.ctx,
            &self.node,
            step.from,
            previous_target,
            step.event,
        );
        Ok(())
    }

    /// Writes `changes` (conditional on the lock and the current state) and mirrors them into
    /// `self.node`. A change that releases the lock ends the task.
    pub async fn write(&mut self, changes: NodeChanges) -> Result<()> {
        self.write_recording(changes, None).await
    }

    /// [`write`](Self::write), recording `entry` in the node's history in the same transaction
    /// (else, as every write, the failure a `last_error` written is).
    pub async fn write_recording(
        &mut self,
        changes: NodeChanges,
        entry: Option<HistoryEntry>,
    ) -> Result<()> {
        if !self.held {
            return Err(Error::internal(format!(
                "write to node {} after its lock was released",
                self.node.uuid
            )));
        }
        let changes = changes.touch();
        let mut backoff = WRITE_RETRY_MIN;
        let mut retried = false;
        loop {
            let written = match &entry {
                None => {
                    db::nodes::update_held(
                        &self.ctx.db,
                        self.node.id,
                        &self.ctx.host,
                        self.node.provision_state,
                        self.node.version,
                        changes.clone(),
                    )
                    .await
                }
                Some(entry) => {
                    db::nodes::update_held_recording(
                        &self.ctx.db,
                        self.node.id,
                        &self.ctx.host,
                        self.node.provision_state,
                        self.node.version,
                        changes.clone(),
                        Some(entry.clone()),
                    )
                    .await
                }
            };
            let cause = match written {
                Ok(()) => break,
                Err(e) if e.is_database_away() => e,
                // A lost attempt may have committed after the check below read the row.
                Err(e) if retried => {
                    match db::nodes::get_by_uuid(&self.ctx.db, &self.node.uuid).await {
                        Ok(fresh) if self.landed(&fresh, &changes) => break,
                        _ => return Err(e),
                    }
                }
                Err(e) => return Err(e),
            };
            retried = true;
            // The outcome is kept and written once the database is back, unless the lease is
            // lost meanwhile: then this host's restart or a take-over decides.
            if self.ctx.lease.is_lost() {
                return Err(cause);
            }
            warn!(node.uuid = %self.node.uuid, error = %cause, retry_in = ?backoff,
                "Cannot write the node's outcome yet; keeping it and retrying");
            tokio::time::sleep(backoff).await;
            backoff = (backoff * 2).min(WRITE_RETRY_MAX);
            // The lost write may have landed before its connection broke: only this write can
            // have bumped the version of a node this task holds, to exactly this `updated_at`.
            match db::nodes::get_by_uuid(&self.ctx.db, &self.node.uuid).await {
                Ok(fresh) if fresh.version == self.node.version => {}
                Ok(fresh) if self.landed(&fresh, &changes) => break,
                Ok(fresh) => {
                    return Err(Error::NodeLocked {
                        node: fresh.uuid,
                        host: fresh.reservation.unwrap_or_else(|| "nobody".to_owned()),
                    });
                }
                Err(e) if e.is_database_away() => {}
                Err(e) => return Err(e),
            }
        }
        if changes.reservation == Some(None) {
            self.held = false;
        }
        changes.mirror_into(&mut self.node);
        Ok(())
    }

    /// Whether `fresh` is the row after `changes` (as this task was about to write them)
    /// landed: only this task's write can move a node it holds to the next version, and it
    /// stamps its own `updated_at`.
    fn landed(&self, fresh: &Node, changes: &NodeChanges) -> bool {
        fresh.version == self.node.version + 1 && changes.updated_at == Some(fresh.updated_at)
    }

    /// Releases the lock if still held. Errors are logged: the lock then stays until this
    /// conductor restarts (which clears its reservations).
    pub async fn release(mut self) {
        self.release_now().await;
    }

    async fn release_now(&mut self) {
        if !self.held {
            return;
        }
        let mut backoff = WRITE_RETRY_MIN;
        loop {
            match db::nodes::release(
                &self.ctx.db,
                self.node.id,
                &self.ctx.host,
                self.node.version,
            )
            .await
            {
                Ok(true) => {}
                // Also when an earlier attempt released it before its connection broke.
                Ok(false) => warn!(node.uuid = %self.node.uuid, "lock was already gone at release"),
                Err(cause) if cause.is_database_away() && !self.ctx.lease.is_lost() => {
                    warn!(node.uuid = %self.node.uuid, error = %cause, retry_in = ?backoff,
                        "Cannot release the lock yet; retrying");
                    tokio::time::sleep(backoff).await;
                    backoff = (backoff * 2).min(WRITE_RETRY_MAX);
                    continue;
                }
                Err(e) => warn!(node.uuid = %self.node.uuid, error = %e, "failed to release lock"),
            }
            break;
        }
        self.held = false;
    }

    /// Ends a failed piece of work: with `fail_edge`, the flow's `fail` edge if the state has one
    /// (deploying → deploy failed, deleting → error, ...); `last_error` set, `extra` written, lock
    /// released, all in one statement. Never leaves a node in a transient state when the table says
    /// where a failure goes (Ironic §12 #6).
    /// Returns the node as written, None when the failure could not be written.
    pub async fn fail(
        mut self,
        message: String,
        extra: NodeChanges,
        fail_edge: bool,
    ) -> Option<Node> {
        // A shared task (or one whose lock went with its last write) has nothing to write with.
        if !self.held {
            warn!(node.uuid = %self.node.uuid, "{message}");
            return None;
        }
        for attempt in 0..2 {
            let changes = extra.clone().last_error(Some(message.clone())).release();
            // The fail edge of the state as last read (a retry reads the node again).
            let fail = if fail_edge {
                Move::of(&self.node, Event::Fail, Event::Fail.name()).ok()
            } else {
                None
            };
            let written = match fail {
                Some(step) => self.make_move(step, false, changes).await,
                None => self.write(changes).await,
            };
            match written {
                Ok(()) => {
                    warn!(node.uuid = %self.node.uuid, "{message}");
                    return Some(self.node.clone());
                }
                Err(e) => {
                    warn!(node.uuid = %self.node.uuid, error = %e, "could not record failure: {message}");
                }
            }
            // The row may have moved under a write whose outcome we did not learn: if it is
            // still ours, record the failure once more from what it is now.
            match db::nodes::get_by_uuid(&self.ctx.db, &self.node.uuid).await {
                Ok(fresh)
                    if attempt == 0 && fresh.reservation.as_deref() == Some(&self.ctx.host) =>
                {
                    self.node = fresh;
                }
                _ => break,
            }
        }
        // Still held but not writable: leave the lock for this conductor's restart recovery,
        // which fails the node out of its transient state, rather than strand it unlocked.
        self.held = false;
        None
    }
}

impl Drop for Task {
    fn drop(&mut self) {
        if !self.held {
            return;
        }
        // Only reached when a panic unwound through a held task: release in the background.
        warn!(node.uuid = %self.node.uuid, "task dropped while holding its lock; releasing");
        let db = self.ctx.db.clone();
        let (id, host, version) = (self.node.id, self.ctx.host.clone(), self.node.version);
        if let Ok(rt) = tokio::runtime::Handle::try_current() {
            rt.spawn(async move {
                let _ = db::nodes::release(&db, id, &host, version).await;
            });
        }
    }
}

/// When the caller stops waiting: `timeout_ms` after it sent the request, of which `waited` has
/// passed (the caller has already taken off the reply's trip back, `rpc::conductor_budget`);
/// None for no limit.
pub fn deadline_after(timeout_ms: u64, waited: Duration) -> Option<Instant> {
    if timeout_ms == 0 {
        return None;
    }
    let left = Duration::from_millis(timeout_ms).saturating_sub(waited);
    Instant::now().checked_add(left)
}

/// How long a request sent at `sent_at_ms` (Unix milliseconds by its sender's clock; 0 for a
/// sender that does not say) waited before it was read `now`. This compares two hosts' clocks,
/// which a cluster keeps in step (NTP, as Ironic's heartbeats need too); a clock behind the
/// sender's reads as no wait, never as more time left than the caller gave.
pub fn queue_wait(sent_at_ms: u64, now: std::time::SystemTime) -> Duration {
    if sent_at_ms == 0 {
        return Duration::ZERO;
    }
    Duration::from_millis(crate::rpc::unix_ms(now).saturating_sub(sent_at_ms))
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, SystemTime, UNIX_EPOCH};

    use super::{deadline_after, queue_wait};

    #[test]
    fn the_time_a_request_waited_comes_off_its_callers_limit() {
        let sent = UNIX_EPOCH + Duration::from_secs(1_800_000_000);
        let sent_ms = crate::rpc::unix_ms(sent);
        assert_eq!(
            queue_wait(sent_ms, sent + Duration::from_millis(1_500)),
            Duration::from_millis(1_500)
        );
        // A clock behind the sender's, and a sender that does not say, count as no wait.
        assert_eq!(
            queue_wait(sent_ms, sent - Duration::from_secs(3)),
            Duration::ZERO
        );
        assert_eq!(queue_wait(0, SystemTime::now()), Duration::ZERO);

        let before = tokio::time::Instant::now();
        let deadline = deadline_after(2_000, Duration::from_millis(1_500)).expect("a limit");
        let after = tokio::time::Instant::now();
        let left = Duration::from_millis(500);
        assert!(before + left <= deadline && deadline <= after + left);
        assert_eq!(deadline_after(0, Duration::from_secs(5)), None);
    }
}
