//! The conductor: consumes RPCs for its host, locks nodes, runs drivers, writes outcomes.
//!
//! A provision request is handled in two halves, as in Ironic: the RPC handler takes the lock,
//! checks the transition in the state table, applies the event and replies (202 for the client);
//! the work then continues in a bounded worker pool, which owns the lock and releases it when the
//! work ends, whether it succeeded, failed, or panicked. No database transaction is held across a
//! driver call: every write is one conditional statement.
//!
//! This file owns what every part shares ([`Context`]), start-up (the lease, recovery of what
//! this host left locked, listening, going online, resuming its allocations) and graceful shutdown. Recovery, the periodic
//! loops, the worker pool and the flows live in the submodules; none of them reaches back here
//! for more than the [`Context`].

pub mod agent;
pub mod allocations;
mod children;
pub mod dispatch;
pub mod flows;
pub mod image_server;
pub mod lease;
pub mod management;
pub mod node_ops;
pub mod periodic;
pub mod ports;
pub mod power;
mod power_announce;
pub mod power_sync;
pub mod provision;
pub mod recovery;
pub mod task;
pub mod vendor;
pub mod volume;
pub mod worker;

use std::sync::Arc;

use anyhow::Context as _;
use tokio::sync::Semaphore;
use tokio_util::{sync::CancellationToken, task::TaskTracker};
use tracing::{error, info, warn};

use crate::{
    config::ConductorConfig,
    db::{self, Db},
    drivers::Registry,
    metrics,
    notifications::Notifier,
    rpc::transport::Transport,
};

/// Which nodes this conductor owns on the hash rings the API routes with, as the conductors
/// alive now make them: the periodic work over many nodes does each node's once, on its owner.
pub(crate) struct Owner {
    rings: crate::rpc::topology::Rings,
    host: String,
}

impl Owner {
    pub(crate) async fn now(ctx: &Ctx) -> crate::error::Result<Owner> {
        let alive = db::conductors::list_alive(&ctx.db, ctx.config.heartbeat_timeout).await?;
        Ok(Owner {
            rings: crate::rpc::topology::Rings::from_conductors(&alive),
            host: ctx.host.clone(),
        })
    }

    pub(crate) fn owns(&self, node: &crate::node::Node) -> bool {
        self.rings.owner(&crate::rpc::Route::of(node)) == Some(self.host.as_str())
    }
}

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
    /// Cancelled when the graceful shutdown period is over, or the lease is lost: workers still
    /// running then stop and record why.
    pub abort_work: CancellationToken,
    /// This process's lease on its host name.
    pub lease: Arc<lease::Lease>,
    /// Versioned notifications of what the conductor does (off unless configured).
    pub notifier: Notifier,
    /// What the power-state sync keeps between its rounds.
    pub power_sync: power_sync::PowerSync,
}

pub type Ctx = Arc<Context>;

impl Context {
    pub fn new(db: Db, config: ConductorConfig) -> Ctx {
        Arc::new(Context {
            db,
            host: config.host.clone(),
            group: config.conductor_group.to_ascii_lowercase(),
            drivers: Registry::builtin(&config),
            workers: Arc::new(Semaphore::new(config.workers)),
            tracker: TaskTracker::new(),
            abort_work: CancellationToken::new(),
            lease: Arc::new(lease::Lease::new()),
            notifier: Notifier::off(),
            power_sync: power_sync::PowerSync::default(),
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
    keeper: tokio::task::JoinHandle<()>,
    stop_keeping: CancellationToken,
}

/// Spawns one of the conductor's background tasks (the lease, a periodic loop), its CPU time
/// counted apart under `name` (`metrics::background`).
fn spawn_background<F>(name: &'static str, task: F) -> tokio::task::JoinHandle<F::Output>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    tokio::spawn(metrics::background(name, task))
}

/// Takes the lease on the host name, recovers the nodes this host left locked, starts consuming
/// and goes online.
pub async fn start(
    ctx: Ctx,
    transport: Arc<dyn Transport>,
    shutdown: CancellationToken,
) -> anyhow::Result<Serving> {
    let host = ctx.host.clone();
    // Before the lease: a port that cannot be had stops the start with nothing taken.
    if let Some(bind) = ctx.config.http_bind {
        image_server::start(bind, ctx.config.http_root.clone(), shutdown.clone())?;
    }
    lease::acquire(&ctx).await?;
    // Renewed from now on, also while recovering: a namesake starting now sees it move.
    let stop_keeping = CancellationToken::new();
    let keeper = spawn_background("lease", lease::keep(ctx.clone(), stop_keeping.clone()));
    recovery::recover_held_nodes(
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
    ctx.lease.follow_consumer(listener.attached());
    let serving = tokio::spawn(listener.run());

    // The iPXE script every network boot starts from, in place before any node is routed here.
    if ctx.config.http_url.is_some()
        && let Err(e) = crate::drivers::boot::pxe::write_boot_script(&ctx.config).await
    {
        warn!(error = %e, "Could not write the iPXE boot script");
    }
    // Online only once the queue exists, so that the API never routes to a queue that is not
    // there; written here rather than by the keeper, so that requests route when this returns.
    ctx.lease.set_serving(true);
    let went_online = {
        let _one_at_a_time = ctx.lease.renewing.lock().await;
        db::conductors::renew(&ctx.db, &host, &ctx.lease.instance, true).await
    };
    if !went_online.context("going online")? {
        anyhow::bail!("the lease on the host name {host} was taken by another process");
    }
    info!(conductor.host = %host, "Conductor {host} is serving");
    metrics::get().set_worker_capacity(ctx.config.workers);
    allocations::resume(&ctx);
    spawn_background(
        "takeover",
        periodic::takeover_loop(ctx.clone(), shutdown.clone()),
    );
    spawn_background(
        "callback_timeouts",
        periodic::callback_timeout_loop(ctx.clone(), shutdown.clone()),
    );
    spawn_background(
        "console_expiry",
        periodic::console_expiry_loop(ctx.clone(), shutdown.clone()),
    );
    if ctx.config.dhcp_provider == crate::config::DhcpProvider::Dnsmasq {
        spawn_background(
            "unknown_hosts",
            periodic::unknown_hosts_loop(ctx.clone(), shutdown.clone()),
        );
    }
    tokio::spawn({
        let ctx = ctx.clone();
        async move {
            if let Err(e) = node_ops::restart_consoles(&ctx).await {
                warn!(error = %e, "Could not start the consoles that were on again");
            }
        }
    });
    spawn_background(
        "power_sync",
        power_sync::sync_loop(ctx.clone(), shutdown.clone()),
    );
    spawn_background(
        "power_recovery",
        power_sync::recovery_loop(ctx.clone(), shutdown.clone()),
    );
    Ok(Serving {
        ctx,
        shutdown,
        stop_consuming,
        serving,
        keeper,
        stop_keeping,
    })
}

impl Serving {
    /// Serves until the shutdown token is cancelled, then stops gracefully: leaves the hash ring,
    /// stops consuming, lets running work finish within `graceful_shutdown_timeout`, fails what is
    /// left with a `last_error` saying why, releases every lock it holds, and then its lease.
    /// The lease is renewed all along, so no other conductor takes over the nodes it is still
    /// working on. If the lease is lost instead, the work is cut at once and this returns an
    /// error: the process must exit, and its restart recovers what it held.
    pub async fn run(self) -> anyhow::Result<()> {
        let Serving {
            ctx,
            shutdown,
            stop_consuming,
            serving,
            keeper,
            stop_keeping,
        } = self;
        let host = ctx.host.clone();
        // A lost lease (see `lease::keep`) has already cut the running work short.
        tokio::select! {
            () = shutdown.cancelled() => {}
            () = ctx.lease.lost() => {}
        }

        info!(conductor.host = %host, "Conductor {host} is shutting down");
        ctx.lease.set_serving(false);
        stop_consuming.cancel();
        // Each stage is logged: a stop that takes long (or, after a lost lease, is cut short
        // by the process's exit) shows where it waited.
        info!(conductor.host = %host, "Stopping: waiting for the requests being handled");
        match serving.await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => warn!(error = %e, "RPC server ended with an error"),
            Err(e) => error!(error = %e, "RPC server task failed"),
        }
        ctx.tracker.close();
        info!(conductor.host = %host, running = ctx.tracker.len(),
            "Stopping: waiting for the running work");
        if tokio::time::timeout(ctx.config.graceful_shutdown_timeout, ctx.tracker.wait())
            .await
            .is_err()
        {
            warn!("graceful shutdown period over; failing the work still running");
            ctx.abort_work.cancel();
            ctx.tracker.wait().await;
        }
        // A console runs in this process; the next conductor of its node starts it again.
        info!(conductor.host = %host, "Stopping: stopping the consoles");
        ctx.drivers.stop_consoles().await;
        if ctx.lease.is_lost() {
            // Lost before or while draining: the name may be another process's by now, and its
            // nodes with it; the next start under this name recovers what is still ours.
            anyhow::bail!(
                "conductor {host} lost its lease on the host name; its work was stopped, and its \
                 next start recovers the nodes it still holds"
            );
        }
        recovery::recover_held_nodes(
            &ctx,
            &format!("The conductor {host} shut down while this node was locked by it."),
        )
        .await
        .context("shutdown recovery")?;
        stop_keeping.cancel();
        let _ = keeper.await;
        if let Err(e) = db::conductors::release(&ctx.db, &host, &ctx.lease.instance).await {
            warn!(error = %e, "could not release the lease on the host name; it runs out by itself");
        }
        info!(conductor.host = %host, "Conductor {host} stopped");
        Ok(())
    }
}
