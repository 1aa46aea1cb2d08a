//! The conductor: consumes RPCs for its host, locks nodes, runs drivers, writes outcomes.
//!
//! A provision request is handled in two halves, as in Ironic: the RPC handler takes the lock,
//! checks the transition in the state table, applies the event and replies (202 for the client);
//! the work then continues in a bounded worker pool, which owns the lock and releases it when the
//! work ends, whether it succeeded, failed, or panicked. No database transaction is held across a
//! driver call: every write is one conditional statement.

pub mod dispatch;
pub mod node_ops;
pub mod power;
pub mod provision;
pub mod task;

use std::{sync::Arc, time::Duration};

use anyhow::Context as _;
use tokio::sync::Semaphore;
use tokio_util::{sync::CancellationToken, task::TaskTracker};
use tracing::{error, info, warn};

use crate::{
    config::ConductorConfig,
    db::{self, Db, models::NodeChanges},
    drivers::Registry,
    rpc::transport::Transport,
    states::Event,
};

/// What every request and worker of one conductor shares.
pub struct Context {
    pub db: Db,
    pub host: String,
    /// The conductor group, lower-cased as nodes store theirs.
    pub group: String,
    pub drivers: Registry,
    pub config: ConductorConfig,
    /// One permit per running piece of provisioning work.
    pub workers: Arc<Semaphore>,
    /// The running workers, so that shutdown can wait for them.
    pub tracker: TaskTracker,
    /// Cancelled when the graceful shutdown period is over: workers still running then stop and
    /// record that the conductor shut down.
    pub abort_work: CancellationToken,
}

pub type Ctx = Arc<Context>;

impl Context {
    pub fn new(db: Db, config: ConductorConfig) -> Ctx {
        Arc::new(Context {
            db,
            host: config.host.clone(),
            group: config.conductor_group.to_ascii_lowercase(),
            drivers: Registry::builtin(),
            workers: Arc::new(Semaphore::new(config.workers)),
            tracker: TaskTracker::new(),
            abort_work: CancellationToken::new(),
            config,
        })
    }
}

/// Runs a conductor until `shutdown` is cancelled, then stops gracefully (see [`Serving::run`]).
pub async fn run(
    ctx: Ctx,
    transport: Arc<dyn Transport>,
    shutdown: CancellationToken,
) -> anyhow::Result<()> {
    start(ctx, transport, shutdown).await?.run().await
}

/// A conductor that recovered its nodes, listens on its queue and is registered: requests to it
/// are served from the moment this returns.
pub struct Serving {
    ctx: Ctx,
    shutdown: CancellationToken,
    stop_consuming: CancellationToken,
    serving: tokio::task::JoinHandle<Result<(), crate::rpc::transport::TransportError>>,
    heartbeat: tokio::task::JoinHandle<()>,
}

/// Refuses to start while another process serves, or is still finishing its work, under this
/// host name: start-up recovery would fail that one's running work, and both would consume one
/// queue. Its row's heartbeat then moves (a stopping conductor keeps stamping it while it holds
/// nodes); a row left by a crash (this host restarting) stops moving, which one heartbeat
/// interval and a bit shows. A cleanly stopped conductor (offline, holding no node) is not
/// waited for. An embedded database is guarded by its file lock instead.
async fn ensure_host_name_is_free(ctx: &Ctx) -> anyhow::Result<()> {
    if ctx.db.backend() == db::Backend::Sqlite {
        return Ok(());
    }
    let host = &ctx.host;
    let fresh = |c: &crate::db::models::Conductor| {
        let timeout = chrono::Duration::from_std(ctx.config.heartbeat_timeout)
            .unwrap_or(chrono::Duration::MAX);
        c.updated_at >= db::now() - timeout
    };
    let before = match db::conductors::get(&ctx.db, host).await {
        Ok(c) if fresh(&c) => c,
        Ok(_) | Err(crate::error::Error::ConductorNotFound(_)) => return Ok(()),
        Err(e) => return Err(e).context("reading the conductor's row"),
    };
    if !before.online
        && db::nodes::held_by(&ctx.db, host)
            .await
            .context("reading the nodes this host holds")?
            .is_empty()
    {
        return Ok(());
    }
    info!(
        conductor.host = %host,
        "The row of {host} looks alive; checking that no other process heartbeats for it"
    );
    tokio::time::sleep(ctx.config.heartbeat_interval * 2 + Duration::from_millis(500)).await;
    let after = db::conductors::get(&ctx.db, host)
        .await
        .context("reading the conductor's row")?;
    if fresh(&after) && after.updated_at > before.updated_at {
        anyhow::bail!(
            "another conductor is serving as host {host}, or still finishing its work \
             (its heartbeat is still moving); wait for it to stop, or give this one a host \
             name of its own (--conductor-host)"
        );
    }
    Ok(())
}

/// Recovers the nodes this host left locked, starts consuming, registers, starts the keepalive.
pub async fn start(
    ctx: Ctx,
    transport: Arc<dyn Transport>,
    shutdown: CancellationToken,
) -> anyhow::Result<Serving> {
    let host = ctx.host.clone();
    ensure_host_name_is_free(&ctx).await?;
    recover_held_nodes(
        &ctx,
        &format!("The conductor {host} restarted while this node was locked by it."),
    )
    .await
    .context("start-up recovery")?;

    let stop_consuming = CancellationToken::new();
    let handler = Arc::new(dispatch::Dispatcher::new(ctx.clone()));
    let listener = transport
        .listen(
            &host,
            handler,
            ctx.config.rpc_in_flight,
            stop_consuming.clone(),
        )
        .await
        .context("listening on the conductor queue")?;
    let serving = tokio::spawn(listener.run());

    // Register only once the queue exists, so that the API never routes to a queue that is not there.
    db::conductors::register(&ctx.db, &host, &ctx.drivers.names(), &ctx.group)
        .await
        .context("registering the conductor")?;
    info!(conductor.host = %host, "Conductor {host} is serving");
    let heartbeat = tokio::spawn(heartbeat_loop(ctx.clone(), shutdown.clone()));
    tokio::spawn(takeover_loop(ctx.clone(), shutdown.clone()));
    Ok(Serving {
        ctx,
        shutdown,
        stop_consuming,
        serving,
        heartbeat,
    })
}

impl Serving {
    /// Serves until the shutdown token is cancelled, then stops gracefully: leaves the hash ring,
    /// stops consuming, lets running work finish within `graceful_shutdown_timeout`, fails what is
    /// left with a `last_error` saying why, and releases every lock it holds.
    pub async fn run(self) -> anyhow::Result<()> {
        let Serving {
            ctx,
            shutdown,
            stop_consuming,
            serving,
            heartbeat,
        } = self;
        let host = ctx.host.clone();
        shutdown.cancelled().await;

        info!(conductor.host = %host, "Conductor {host} is shutting down");
        // Stop the keepalive first, so that it cannot mark us online again after we leave the ring.
        heartbeat.abort();
        let _ = heartbeat.await;
        if let Err(e) = db::conductors::unregister(&ctx.db, &host).await {
            warn!(error = %e, "could not mark the conductor offline");
        }
        // Out of the rings, but still working: keep the row's heartbeat moving, so that a
        // namesake starting now waits instead of recovering our nodes under us.
        let draining = tokio::spawn(drain_keepalive(ctx.clone()));
        stop_consuming.cancel();
        match serving.await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => warn!(error = %e, "RPC server ended with an error"),
            Err(e) => error!(error = %e, "RPC server task failed"),
        }
        ctx.tracker.close();
        if tokio::time::timeout(ctx.config.graceful_shutdown_timeout, ctx.tracker.wait())
            .await
            .is_err()
        {
            warn!("graceful shutdown period over; failing the work still running");
            ctx.abort_work.cancel();
            ctx.tracker.wait().await;
        }
        recover_held_nodes(
            &ctx,
            &format!("The conductor {host} shut down while this node was locked by it."),
        )
        .await
        .context("shutdown recovery")?;
        draining.abort();
        info!(conductor.host = %host, "Conductor {host} stopped");
        Ok(())
    }
}

/// Stamps the row every heartbeat interval while a stopping conductor finishes its work.
async fn drain_keepalive(ctx: Ctx) {
    let mut tick = tokio::time::interval(ctx.config.heartbeat_interval);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        if let Err(e) = db::conductors::touch(&ctx.db, &ctx.host).await {
            warn!(error = %e, "heartbeat while stopping failed");
        }
    }
}

async fn heartbeat_loop(ctx: Ctx, shutdown: CancellationToken) {
    let mut tick = tokio::time::interval(ctx.config.heartbeat_interval);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            biased;
            _ = shutdown.cancelled() => return,
            _ = tick.tick() => {}
        }
        match db::conductors::heartbeat(&ctx.db, &ctx.host).await {
            Ok(true) => {}
            Ok(false) => {
                warn!("conductor row vanished; registering again");
                if let Err(e) =
                    db::conductors::register(&ctx.db, &ctx.host, &ctx.drivers.names(), &ctx.group)
                        .await
                {
                    warn!(error = %e, "re-registration failed");
                }
            }
            Err(e) => warn!(error = %e, "heartbeat failed"),
        }
    }
}

/// Every node whose lock this host holds (left over from a crash, or from work cut short by
/// shutdown) is moved out of its transient state along the table's `fail` edge with `reason` as
/// its `last_error`, its pending power change dropped, and its lock released.
pub async fn recover_held_nodes(ctx: &Ctx, reason: &str) -> crate::error::Result<()> {
    for node in db::nodes::held_by(&ctx.db, &ctx.host).await? {
        recover_node(ctx, &node, &ctx.host, reason).await;
    }
    db::nodes::clear_reservations(&ctx.db, &ctx.host).await?;
    Ok(())
}

/// Moves `node`, locked by `holder` (this host, or a dead one), out of a transient state along
/// the table's `fail` edge with `reason` as its `last_error`, drops a pending power change, and
/// releases the lock: one statement, conditional on the holder, state and version read.
async fn recover_node(ctx: &Ctx, node: &crate::db::models::Node, holder: &str, reason: &str) {
    let state = node.provision_state;
    let mut changes = NodeChanges::default().last_error(Some(reason.to_owned()));
    if node.target_power_state.is_some() {
        changes.target_power_state = Some(None);
    }
    if !node.deploy_step.is_empty() {
        changes.deploy_step = Some("{}".to_owned());
    }
    if state == crate::states::ProvisionState::Rescuing {
        changes.instance_info = Some(crate::db::models::json_text(
            &provision::without_rescue_password(node),
        ));
    }
    if state.stuck_fail_event_applies() {
        match task::apply_event(node, Event::Fail, false, changes.clone()) {
            Ok(failed) => changes = failed,
            Err(e) => warn!(node.uuid = %node.uuid, error = %e, "no fail edge"),
        }
    } else if node.target_power_state.is_none() {
        // Nothing was in progress: only the lock is left to release.
        changes = NodeChanges::default();
    }
    let written = db::nodes::update_held(
        &ctx.db,
        node.id,
        holder,
        state,
        node.version,
        changes.release(),
    )
    .await;
    match written {
        Ok(()) => warn!(node.uuid = %node.uuid, "recovered node from {state}: {reason}"),
        Err(e) => warn!(node.uuid = %node.uuid, error = %e, "could not recover node"),
    }
}

/// Takes over the nodes that a dead conductor left locked: every `heartbeat_interval`, the locks
/// held by hosts that are not alive, on nodes this conductor now owns on the hash ring, are
/// recovered as that host's own restart would (Ironic's `_check_orphan_nodes`, for every
/// transient state).
async fn takeover_loop(ctx: Ctx, shutdown: CancellationToken) {
    let mut tick = tokio::time::interval(ctx.config.heartbeat_interval);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            biased;
            _ = shutdown.cancelled() => return,
            _ = tick.tick() => {}
        }
        if let Err(e) = take_over_orphans(&ctx).await {
            warn!(error = %e, "take-over check failed");
        }
    }
}

async fn take_over_orphans(ctx: &Ctx) -> crate::error::Result<()> {
    let alive = db::conductors::list_alive(&ctx.db, ctx.config.heartbeat_timeout).await?;
    let alive_hosts: Vec<String> = alive.iter().map(|c| c.hostname.clone()).collect();
    let orphans = db::nodes::locked_by_others(&ctx.db, &alive_hosts).await?;
    if orphans.is_empty() {
        return Ok(());
    }
    for node in orphans {
        let ring = crate::rpc::topology::HashRing::new(
            alive
                .iter()
                .filter(|c| {
                    c.conductor_group == node.conductor_group && c.drivers.contains(&node.driver)
                })
                .map(|c| c.hostname.clone()),
        );
        if ring.owner(&node.uuid) != Some(ctx.host.as_str()) {
            continue;
        }
        let Some(dead) = node.reservation.clone() else {
            continue;
        };
        recover_node(
            ctx,
            &node,
            &dead,
            &format!(
                "Operation was aborted due to conductor take over: {dead} stopped heartbeating."
            ),
        )
        .await;
    }
    Ok(())
}
