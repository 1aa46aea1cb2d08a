//! The node lock as a task: acquired with Ironic's bounded retry, released on every path.
//!
//! Every write a task makes is conditional on still holding the lock and on the provision state it
//! last saw (`db::nodes::update_held`), so the lock is enforced, not advisory (Ironic §12 #2).
//! Provision states change only through [`Task::process_event`], which reads the state table.
//!
//! Normal paths release explicitly and await it, so a caller that gets an answer sees the node
//! unlocked. [`Drop`] is only a backstop for a panic that unwinds through a held task.

use std::time::Duration;

use tokio::time::Instant;
use tracing::{info, warn};

use super::Ctx;
use crate::{
    db::{
        self,
        models::{Node, NodeChanges},
    },
    error::{Error, Result},
    states::{self, Event, ProvisionState},
};

pub struct Task {
    ctx: Ctx,
    pub node: Node,
    held: bool,
}

impl Task {
    /// Takes the lock on the node with `uuid`: up to `lock_retry_attempts` tries, `lock_retry_interval`
    /// apart, and never past `deadline` (the caller has stopped waiting by then). NodeLocked names
    /// the holder.
    pub async fn acquire(ctx: &Ctx, uuid: &str, deadline: Option<Instant>) -> Result<Task> {
        let attempts = ctx.config.lock_retry_attempts.max(1);
        let interval = ctx.config.lock_retry_interval;
        for attempt in 1..=attempts {
            if db::nodes::reserve(&ctx.db, uuid, &ctx.host).await? {
                return match db::nodes::get_by_uuid(&ctx.db, uuid).await {
                    Ok(node) => Ok(Task {
                        ctx: ctx.clone(),
                        node,
                        held: true,
                    }),
                    Err(e) => {
                        // Cannot happen short of a database fault; do not leave the lock behind.
                        let _ = db::nodes::release_uuid(&ctx.db, uuid, &ctx.host).await;
                        Err(e)
                    }
                };
            }
            let node = db::nodes::get_by_uuid(&ctx.db, uuid).await?;
            let Some(holder) = node.reservation else {
                // Released between our two statements: try again at once (bounded by attempts).
                continue;
            };
            let out_of_time = deadline.is_some_and(|d| Instant::now() + interval >= d);
            if attempt == attempts || out_of_time {
                return Err(Error::NodeLocked {
                    node: node.uuid,
                    host: holder,
                });
            }
            tokio::time::sleep(interval).await;
        }
        let node = db::nodes::get_by_uuid(&ctx.db, uuid).await?;
        Err(Error::NodeLocked {
            node: node.uuid,
            host: node.reservation.unwrap_or_else(|| "unknown".to_owned()),
        })
    }

    pub fn ctx(&self) -> &Ctx {
        &self.ctx
    }

    /// The state `event` leads to from the node's state, or InvalidStateRequested naming `verb`
    /// (the word the client used) and the state.
    pub fn next_state(&self, event: Event, verb: &str) -> Result<ProvisionState> {
        states::transition(self.node.provision_state, event).map_err(|_| {
            Error::InvalidStateRequested {
                action: verb.to_owned(),
                node: self.node.uuid.clone(),
                state: self.node.provision_state.api_name().to_owned(),
            }
        })
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
        let from = self.node.provision_state;
        let to = self.next_state(event, event.name())?;
        let target = states::target_after(to, worker_follows);
        let changes = extra.provision(to, target);
        self.write(changes).await?;
        info!(
            node.uuid = %self.node.uuid,
            from = %from,
            to = %to,
            event = %event,
            "Node {} moved from {from} to {to} on {event}",
            self.node.uuid
        );
        Ok(())
    }

    /// Writes `changes` (conditional on the lock and the current state) and mirrors them into
    /// `self.node`. A change that releases the lock ends the task.
    pub async fn write(&mut self, changes: NodeChanges) -> Result<()> {
        if !self.held {
            return Err(Error::internal(format!(
                "write to node {} after its lock was released",
                self.node.uuid
            )));
        }
        let expected = self.node.provision_state;
        db::nodes::update_held(
            &self.ctx.db,
            self.node.id,
            &self.ctx.host,
            expected,
            changes.clone(),
        )
        .await?;
        if changes.reservation == Some(None) {
            self.held = false;
        }
        changes.mirror_into(&mut self.node)?;
        Ok(())
    }

    /// Releases the lock if still held. Errors are logged: the lock then stays until this
    /// conductor restarts (which clears its reservations) or is declared dead.
    pub async fn release(mut self) {
        self.release_now().await;
    }

    async fn release_now(&mut self) {
        if !self.held {
            return;
        }
        match db::nodes::release(&self.ctx.db, self.node.id, &self.ctx.host).await {
            Ok(true) => {}
            Ok(false) => warn!(node.uuid = %self.node.uuid, "lock was already gone at release"),
            Err(e) => warn!(node.uuid = %self.node.uuid, error = %e, "failed to release lock"),
        }
        self.held = false;
    }

    /// Ends a failed piece of work: with `fail_edge`, the flow's `fail` edge if the state has one
    /// (deploying → deploy failed, deleting → error, ...); `last_error` set, `extra` written, lock
    /// released, all in one statement. Never leaves a node in a transient state when the table says
    /// where a failure goes (Ironic §12 #6).
    pub async fn fail(mut self, message: String, extra: NodeChanges, fail_edge: bool) {
        let changes = extra.last_error(Some(message.clone())).release();
        let written = if fail_edge && states::is_actionable(self.node.provision_state, Event::Fail)
        {
            self.process_event(Event::Fail, false, changes).await
        } else {
            self.write(changes).await
        };
        match written {
            Ok(()) => warn!(node.uuid = %self.node.uuid, "{message}"),
            Err(e) => {
                warn!(node.uuid = %self.node.uuid, error = %e, "could not record failure: {message}");
                self.release_now().await;
            }
        }
    }

    /// Deletes the node (and with it the lock). On failure the lock is released as usual.
    pub async fn delete(mut self) -> Result<()> {
        let deleted = db::nodes::delete_held(&self.ctx.db, self.node.id, &self.ctx.host).await;
        if deleted.is_ok() {
            self.held = false;
        } else {
            self.release_now().await;
        }
        deleted
    }

    pub fn is_held(&self) -> bool {
        self.held
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
        let (id, host) = (self.node.id, self.ctx.host.clone());
        if let Ok(rt) = tokio::runtime::Handle::try_current() {
            rt.spawn(async move {
                let _ = db::nodes::release(&db, id, &host).await;
            });
        }
    }
}

/// How long until `deadline_ms` (unix ms), as an Instant; None for no deadline.
pub fn deadline_from_unix_ms(deadline_ms: u64) -> Option<Instant> {
    if deadline_ms == 0 {
        return None;
    }
    let left = deadline_ms.saturating_sub(crate::rpc::unix_ms());
    Some(Instant::now() + Duration::from_millis(left))
}
