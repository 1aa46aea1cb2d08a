//! The lease on a conductor's host name: one process at a time serves a host name, and the
//! others can tell a conductor that is gone from one that is only busy, draining or cut off
//! from the broker.
//!
//! The lease is the conductor's row: `instance` (this process's token), renewed (`updated_at`)
//! every heartbeat interval while the process lives, whatever it is doing, and released
//! (`instance` NULL) by a clean stop once it holds no node. `online` is separate: whether the
//! conductor can take requests (its consumer is attached and it is not draining), which is what
//! the hash rings use. Only a host whose lease ran out (not renewed for `heartbeat_timeout`) is
//! gone, and only its locks are taken over.
//!
//! Fencing: the lease is taken with one compare-and-set ([`db::conductors::claim`]), so two
//! processes starting under one name at once cannot both win; every renewal is conditional on
//! the instance token, so a process whose name was claimed after its lease ran out learns it at
//! its next renewal; and one that cannot renew stops its work before its lease can run out in
//! the others' eyes (`heartbeat_timeout - heartbeat_interval` after its last renewal), then exits
//! so that its restart recovers what it held; a request it receives past that moment (it was
//! paused, and wakes with requests in its socket) is refused ([`Lease::is_held`], checked by the
//! dispatcher) whatever runs first on waking. The all-in-one on its embedded file has no peer
//! to fence against: it never stops for renewals that fail, and renews once it can again.
//! Node writes are fenced on top by the node lock:
//! every write of a held node is conditional on `reservation` and `version`, and a take-over
//! changes both.

use std::{
    sync::{Arc, Mutex, PoisonError},
    time::Duration,
};

use anyhow::{Context as _, bail};
use tokio::{
    sync::{Notify, watch},
    time::Instant,
};
use tokio_util::sync::CancellationToken;
use tracing::{error, info, warn};

use super::Ctx;
use crate::{
    config::ConductorConfig,
    db::{self, conductors::Claim, models::Conductor},
};

/// This process's hold on its host name, shared by everything the conductor runs.
pub struct Lease {
    /// The token that tells this process's renewals from a namesake's.
    pub instance: String,
    /// Cancelled once the lease is lost: not renewed in time, or claimed by another process.
    lost: CancellationToken,
    /// Whether the conductor wants to be in the hash rings (false from the start of a
    /// graceful shutdown on).
    serving: watch::Sender<bool>,
    /// Whether the RPC consumer is attached to its queue (the listener's own watch, once it
    /// listens).
    attached: Mutex<watch::Receiver<bool>>,
    /// Since when every renewal has reached the database; None while it cannot.
    db_ok_since: Mutex<Option<Instant>>,
    /// Until when this process may act as its host: the start of its last renewal that
    /// landed, plus [`work_limit`]. The keeper fences the work at that moment, but a process
    /// paused past it (SIGSTOP, a frozen VM) resumes with requests already in its socket, and
    /// they may be handled before the keeper runs: [`Lease::is_held`] refuses them.
    held_until: Mutex<Option<Instant>>,
    /// Whether no other process can serve this host's nodes (the all-in-one's embedded file is
    /// locked to it): then the lease never runs out for lack of renewals.
    peerless: std::sync::atomic::AtomicBool,
    /// Wakes the keeper to write `online` at once.
    wake: Notify,
    /// Held across a renewal, from reading `online` to the database's answer: renewals are
    /// written one at a time, so one that read `online` before it changed cannot land after one
    /// that read it after (at start, the keeper's first `offline` landing after the conductor
    /// went online made it look offline until the next renewal).
    pub(super) renewing: tokio::sync::Mutex<()>,
}

impl Lease {
    pub fn new() -> Lease {
        Lease {
            instance: uuid::Uuid::new_v4().to_string(),
            lost: CancellationToken::new(),
            serving: watch::Sender::new(false),
            attached: Mutex::new(watch::channel(false).1),
            db_ok_since: Mutex::new(None),
            held_until: Mutex::new(None),
            peerless: std::sync::atomic::AtomicBool::new(false),
            wake: Notify::new(),
            renewing: tokio::sync::Mutex::new(()),
        }
    }

    pub fn is_lost(&self) -> bool {
        self.lost.is_cancelled()
    }

    pub async fn lost(&self) {
        self.lost.cancelled().await;
    }

    /// Whether the lease is still this process's now: not lost, and renewed recently enough
    /// that no other conductor may count it as run out. A clock read and a lock, no statement.
    pub fn is_held(&self) -> bool {
        let until = *self
            .held_until
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        !self.is_lost() && (self.is_peerless() || until.is_some_and(|until| Instant::now() < until))
    }

    /// Whether no other process can serve this host's nodes (see `peerless`).
    pub fn is_peerless(&self) -> bool {
        self.peerless.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Records a renewal (or the claim) that started at `at` and landed.
    fn renewed(&self, at: Instant, limit: Duration) {
        *self
            .held_until
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = Some(at + limit);
    }

    /// Joins (true) or leaves (false) the hash rings at the next renewal, which this triggers.
    pub fn set_serving(&self, serving: bool) {
        self.serving.send_replace(serving);
        self.wake.notify_one();
    }

    /// Whether the conductor takes new work: false from the start of a graceful shutdown on.
    pub fn is_serving(&self) -> bool {
        *self.serving.borrow() && !self.is_lost()
    }

    /// Follows the listener's consumer: offline while it is not attached.
    pub fn follow_consumer(self: &Arc<Self>, mut attached: watch::Receiver<bool>) {
        *self.attached.lock().unwrap_or_else(PoisonError::into_inner) = attached.clone();
        let lease = Arc::downgrade(self);
        tokio::spawn(async move {
            while attached.changed().await.is_ok() {
                let Some(lease) = lease.upgrade() else { return };
                lease.wake.notify_one();
            }
        });
    }

    fn online(&self) -> bool {
        let attached = *self
            .attached
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .borrow();
        *self.serving.borrow() && attached
    }

    /// Whether the database has taken every renewal for at least `period`. After an outage
    /// every conductor's lease looks stale until its owner renews it: no take-over before all
    /// of them had a whole lease period to do so.
    pub fn db_ok_for(&self, period: Duration) -> bool {
        self.db_ok_since
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .is_some_and(|since| since.elapsed() >= period)
    }

    fn db_answered(&self, ok: bool) {
        let mut since = self
            .db_ok_since
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if !ok {
            *since = None;
        } else if since.is_none() {
            *since = Some(Instant::now());
        }
    }
}

impl Default for Lease {
    fn default() -> Self {
        Lease::new()
    }
}

/// Takes the lease on `ctx.host`, or fails when another process holds it. A row another process
/// renewed within `heartbeat_timeout` is watched for two heartbeat intervals: if its renewal
/// time moves, that process serves and this one refuses to start; if it stands still (a crash:
/// this host restarting), the lease is taken from exactly that row. An embedded database is
/// guarded by its file lock, so a row left there is this host's own, from before a crash.
pub async fn acquire(ctx: &Ctx) -> anyhow::Result<()> {
    let lease = &ctx.lease;
    let host = &ctx.host;
    let drivers = ctx.drivers.names();
    let interfaces = ctx.drivers.describe();
    let timeout =
        chrono::Duration::from_std(ctx.config.heartbeat_timeout).unwrap_or(chrono::Duration::MAX);
    let fresh = |c: &Conductor| c.updated_at >= crate::node::now() - timeout;
    let embedded = ctx.db.backend() == db::Backend::Sqlite;
    lease
        .peerless
        .store(embedded, std::sync::atomic::Ordering::Relaxed);
    let mut watched: Option<Conductor> = None;
    for _ in 0..4 {
        let started = Instant::now();
        let claim = db::conductors::claim(
            &ctx.db,
            host,
            &lease.instance,
            &drivers,
            &interfaces,
            &ctx.group,
            watched.as_ref(),
        )
        .await
        .context("claiming the conductor host name")?;
        let row = match claim {
            Claim::Claimed => {
                lease.db_answered(true);
                lease.renewed(started, work_limit(&ctx.config));
                return Ok(());
            }
            Claim::Held(row) => row,
        };
        if embedded || !fresh(&row) {
            // Nobody renews it: take exactly this row next round.
            watched = Some(row);
            continue;
        }
        info!(
            conductor.host = %host,
            "The host name {host} is leased by another process; waiting for its lease to run \
             out, unless it renews it"
        );
        // Its holder may be alive but cut off from the database: it stops its work only when
        // its lease would run out, so the row is taken only once it stood still that long.
        let after = loop {
            tokio::time::sleep(ctx.config.heartbeat_interval * 2 + Duration::from_millis(500))
                .await;
            let after = db::conductors::get(&ctx.db, host)
                .await
                .context("reading the conductor's row")?;
            if after.instance.is_some()
                && (after.instance != row.instance || after.updated_at != row.updated_at)
            {
                bail!(
                    "another conductor is serving as host {host}, or still finishing its work \
                     (its lease is being renewed); wait for it to stop, or give this one a \
                     host name of its own (--conductor-host)"
                );
            }
            if after.instance.is_none() || !fresh(&after) {
                break after;
            }
        };
        watched = after.instance.is_some().then_some(after);
    }
    bail!("could not claim the host name {host}: its lease kept changing hands")
}

/// Renews the lease every heartbeat interval (and at once when `online` should change) until
/// `stop`. When the lease is lost (claimed by another process, or not renewed for
/// `heartbeat_timeout - heartbeat_interval`), cancels the running work and marks the lease lost.
pub async fn keep(ctx: Ctx, stop: CancellationToken) {
    let lease = &ctx.lease;
    let interval = ctx.config.heartbeat_interval;
    let limit = work_limit(&ctx.config);
    // The embedded file is locked to this process: no other conductor can take its nodes over,
    // so there is nobody to stop for. It keeps serving what the database allows (reads, while
    // its disk refuses writes) and renews again once it can.
    let fenced = !lease.is_peerless();
    let mut renewed_at = Instant::now();
    let mut was_online = None;
    loop {
        // Whatever a renewal is doing (a statement can hang on a half-open socket), the work
        // stops at the deadline.
        let deadline = renewed_at + limit;
        let renewed = tokio::select! {
            biased;
            () = stop.cancelled() => return,
            () = tokio::time::sleep_until(deadline), if fenced => None,
            renewed = async {
                tokio::select! {
                    () = lease.wake.notified() => {}
                    () = tokio::time::sleep(interval) => {}
                }
                let _one_at_a_time = lease.renewing.lock().await;
                let online = lease.online();
                let started = Instant::now();
                let outcome =
                    db::conductors::renew(&ctx.db, &ctx.host, &lease.instance, online).await;
                (started, online, outcome)
            } => Some(renewed),
        };
        let Some((started, online, outcome)) = renewed else {
            error!(
                conductor.host = %ctx.host,
                "The lease on {} could not be renewed for {:?}; stopping all work before \
                 another conductor takes its nodes over", ctx.host, renewed_at.elapsed()
            );
            fence(&ctx);
            return;
        };
        match outcome {
            Ok(true) => {
                renewed_at = started;
                lease.db_answered(true);
                lease.renewed(started, limit);
                if was_online != Some(online) {
                    info!(conductor.host = %ctx.host, online, "Conductor {} is {}", ctx.host,
                        if online { "online" } else { "offline (not taking requests)" });
                    was_online = Some(online);
                }
            }
            Ok(false) => {
                error!(
                    conductor.host = %ctx.host,
                    "Another process claimed the host name {} after this one's lease ran out; \
                     stopping all work", ctx.host
                );
                fence(&ctx);
                return;
            }
            Err(e) => {
                lease.db_answered(false);
                warn!(error = %e, "Renewing the conductor lease failed; retrying");
            }
        }
    }
}

/// How long after the start of its last renewal that landed a conductor may still work: it
/// stops before the others may count its lease as run out, but never before the next renewal
/// (one interval on) has had an interval to answer.
fn work_limit(config: &ConductorConfig) -> Duration {
    let interval = config.heartbeat_interval;
    config
        .heartbeat_timeout
        .saturating_sub(interval)
        .max(interval * 2)
}

fn fence(ctx: &Ctx) {
    ctx.lease.lost.cancel();
    ctx.abort_work.cancel();
}
