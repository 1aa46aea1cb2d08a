//! Process wiring: what `ferrum all-in-one`, `ferrum api`, `ferrum conductor` and `ferrum db-sync`
//! run, given a [`Config`] and a shutdown token. The binary only parses arguments and calls these.

use std::sync::Arc;

use anyhow::{Context as _, bail};
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

use crate::{
    api::{self, ApiState, routing::ConductorRouter},
    api::{Auth, auth::BasicAuth, keystone::Keystone},
    broker::Brokers,
    conductor,
    config::{AuthStrategy, Config},
    db::{self, Db, redact_url},
    drivers::{self, Registry},
    notifications::{self, Notifier, Service, Sink, amqp::Publisher, watch},
    rpc::{
        RpcClient,
        amqp::{AmqpTransport, QueueType},
        local::LocalTransport,
        transport::Transport,
    },
};

/// The database pool, once its server answered; None if `shutdown` came first. A MySQL server
/// that does not answer is tried again (see [`until_it_answers`]) up to `database.max_retries`
/// times; an SQLite file is there or not.
async fn connect_db(config: &Config, shutdown: &CancellationToken) -> anyhow::Result<Option<Db>> {
    let mut db = Db::connect(&config.database.url, config.database.pool_size)?
        .with_history_max_entries(config.conductor.node_history_max_entries);
    if !config.database.sqlite_durable {
        db = db.without_durable_commits();
    }
    let retries = match db.backend() {
        db::Backend::Sqlite => 0,
        db::Backend::Mysql => config.database.max_retries,
    };
    let what = format!("the database at {}", redact_url(&config.database.url));
    let answered = until_it_answers(
        &what,
        Some(retries),
        config.database.retry_interval,
        shutdown,
        || db.ping(),
    )
    .await?;
    Ok(answered.map(|()| db))
}

/// The first try of `connect` between process start and `shutdown`, and the tries after it
/// (0.5 s later, then twice as long each time up to `max_interval`), `retries` of them (None:
/// without end), each failure logged: a server that is away for a while when a process starts
/// (restarting, a cluster re-forming) is waited for, as oslo.db and oslo.messaging do, instead
/// of the process exiting and its supervisor restarting it in a tight loop (systemd gives up on
/// a unit after 5 starts in 10 s). The last failure is the error; None when `shutdown` came
/// first.
async fn until_it_answers<T, E, F, Fut>(
    what: &str,
    retries: Option<u32>,
    max_interval: std::time::Duration,
    shutdown: &CancellationToken,
    mut connect: F,
) -> anyhow::Result<Option<T>>
where
    E: std::error::Error + Send + Sync + 'static,
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, E>>,
{
    let mut interval = std::time::Duration::from_millis(500).min(max_interval);
    let mut tried = 0;
    loop {
        let failure = tokio::select! {
            () = shutdown.cancelled() => return Ok(None),
            answer = connect() => match answer {
                Ok(done) => return Ok(Some(done)),
                Err(e) => e,
            },
        };
        if retries.is_some_and(|retries| tried >= retries) {
            return Err(anyhow::Error::new(failure).context(format!("cannot reach {what}")));
        }
        tried += 1;
        warn!(error = %failure, "Cannot reach {what} yet; trying again in {interval:?}");
        tokio::select! {
            () = shutdown.cancelled() => return Ok(None),
            () = tokio::time::sleep(interval) => {}
        }
        interval = (interval * 2).min(max_interval);
    }
}

/// The longest pause between two tries of a broker that does not answer at start: short
/// enough that a process is serving within seconds of its broker's return.
const BROKER_RETRY_MAX: std::time::Duration = std::time::Duration::from_secs(10);

/// The RPC transport, once its broker answered (tried again without end, as oslo.messaging
/// does, [`BROKER_RETRY_MAX`] apart at most; see [`until_it_answers`]); None if `shutdown`
/// came first.
async fn connect_transport(
    config: &Config,
    shutdown: &CancellationToken,
) -> anyhow::Result<Option<Arc<dyn Transport>>> {
    if config.transport.is_local() {
        return Ok(Some(Arc::new(LocalTransport::new())));
    }
    let queues = if config.transport.quorum_queues {
        QueueType::Quorum
    } else {
        QueueType::Classic
    };
    let what = format!(
        "the message broker at {}",
        redact_url(&config.transport.url)
    );
    let transport = until_it_answers(&what, None, BROKER_RETRY_MAX, shutdown, || {
        AmqpTransport::connect_with(&config.transport.url, &config.transport.prefix, queues)
    })
    .await?;
    Ok(transport.map(|t| Arc::new(t) as Arc<dyn Transport>))
}

/// Where this process's notifications go, or None when they are off: the notification broker
/// (`notifications.transport_url`, else the RPC transport's when it is AMQP), else the log or
/// nowhere (`notifications.without_broker`). A broker is connected to in the background: a
/// process starts, and serves, while it is away. The publisher is kept in `publishers`, to flush
/// at a graceful stop.
fn notification_sink(
    config: &Config,
    publishers: &mut Vec<Publisher>,
) -> anyhow::Result<Option<Arc<Sink>>> {
    let n = &config.notifications;
    let Some(level) = n.level else {
        return Ok(None);
    };
    let url = match &n.transport_url {
        Some(url) => Some(url.clone()),
        None if !config.transport.is_local() => Some(config.transport.url.clone()),
        None => None,
    };
    match url {
        Some(url) => {
            info!(
                level = level.name(),
                exchange = %n.exchange,
                topic = %n.topic,
                "Sending notifications of level {} and above to {}",
                level.name(),
                redact_url(&url)
            );
            let target = notifications::amqp::Target {
                brokers: brokers(&url)?,
                exchange: n.exchange.clone(),
                oslo: true,
                connection_name: "ferrum notifications",
            };
            let (sink, publisher) =
                notifications::amqp::start(target, n.topic.clone(), n.queue_size);
            publishers.push(publisher);
            Ok(Some(sink))
        }
        None => Ok(match n.without_broker {
            crate::config::WithoutBroker::Log => {
                info!(
                    level = level.name(),
                    "No notification broker: notifications of level {} and above go to the log",
                    level.name()
                );
                Some(Sink::log())
            }
            crate::config::WithoutBroker::Off => None,
        }),
    }
}

/// The brokers of a transport URL the settings have checked.
fn brokers(url: &str) -> anyhow::Result<Arc<Brokers>> {
    Brokers::parse(url)
        .map(Arc::new)
        .map_err(|e| anyhow::anyhow!("bad transport URL: {e}"))
}

/// Where a multi-host process hands its node events for the watch: a publisher to the RPC
/// broker's `amq.topic` (kept in `publishers`), so every API process gets them; None when the
/// watch is off.
fn watch_feed(
    config: &Config,
    publishers: &mut Vec<Publisher>,
) -> anyhow::Result<Option<watch::Feed>> {
    if !config.watch.is_on(false) {
        return Ok(None);
    }
    let queue = notifications::Queue::new("watch event", config.notifications.queue_size);
    let target = notifications::amqp::Target {
        brokers: brokers(&config.transport.url)?,
        exchange: watch::EXCHANGE.to_owned(),
        oslo: false,
        connection_name: "ferrum watch events",
    };
    let key = watch::routing_key(&config.transport.prefix);
    publishers.push(notifications::amqp::spawn(
        target,
        queue.clone(),
        "watch event",
        move |event: &Arc<watch::WatchEvent>| (key.clone(), event.json.clone().into_bytes()),
    ));
    Ok(Some(watch::Feed::Broker(queue)))
}

/// The hub an API process's watch streams read, ended by `shutdown`; None when the watch is off.
fn watch_hub(
    config: &Config,
    all_in_one: bool,
    shutdown: &CancellationToken,
) -> Option<watch::Hub> {
    config.watch.is_on(all_in_one).then(|| {
        watch::Hub::new(
            config.watch.client_buffer,
            config.watch.keepalive,
            shutdown.clone(),
        )
    })
}

/// Sends what the publishers still hold, all at once, within `notifications.flush_timeout`.
async fn flush(within: std::time::Duration, publishers: Vec<Publisher>) {
    futures::future::join_all(publishers.into_iter().map(|p| p.flush(within))).await;
}

/// The notifier of `service`: notifications on `sink`, node events on `watch` (off without
/// either).
fn notifier(
    config: &Config,
    service: Service,
    sink: Option<&Arc<Sink>>,
    watch: Option<watch::Feed>,
) -> Notifier {
    let notify = match (config.notifications.level, sink) {
        (Some(level), Some(sink)) => Some((level, sink.clone())),
        _ => None,
    };
    Notifier::build(service, &config.conductor.host, notify, watch)
}

/// The multi-host process kinds talk across processes: they need MySQL and RabbitMQ.
fn require_multi_host(config: &Config, kind: &str) -> anyhow::Result<()> {
    if config.transport.is_local() {
        bail!(
            "ferrum {kind} needs an amqp:// transport (FERRUM_TRANSPORT_URL); the `local` transport works only inside `ferrum all-in-one`"
        );
    }
    if db::Backend::of_url(&config.database.url) != Some(db::Backend::Mysql) {
        bail!(
            "ferrum {kind} needs a mysql:// database (FERRUM_DATABASE_URL); the embedded SQLite database works only with `ferrum all-in-one`"
        );
    }
    Ok(())
}

/// The multi-host processes never migrate: on a database `ferrum db-sync` has not brought up to
/// date they stop here, saying so, instead of failing every request on a missing table.
async fn require_schema(db: &Db, config: &Config) -> anyhow::Result<()> {
    let pending = db.pending_migrations().await?;
    if let Some(first) = pending.first() {
        bail!(
            "the database {} is not up to date: {} migration(s) not applied (from {first}); run `ferrum db-sync` with the same database URL first",
            redact_url(&config.database.url),
            pending.len(),
        );
    }
    Ok(())
}

/// `ferrum db-sync`: applies pending migrations.
pub async fn db_sync(config: &Config, shutdown: CancellationToken) -> anyhow::Result<()> {
    let Some(db) = connect_db(config, &shutdown).await? else {
        return Ok(());
    };
    let applied = db.migrate().await?;
    if applied.is_empty() {
        info!("database schema is up to date");
    } else {
        info!(migrations = ?applied, "applied {} migration(s)", applied.len());
    }
    Ok(())
}

fn api_state(
    config: &Config,
    db: Db,
    transport: Arc<dyn Transport>,
    notifier: Notifier,
    watch: Option<watch::Hub>,
) -> anyhow::Result<ApiState> {
    let auth = match config.api.auth_strategy {
        AuthStrategy::Noauth => None,
        AuthStrategy::Keystone => Some(Auth::Keystone(Arc::new(Keystone::new(
            &config.keystone_authtoken,
        )?))),
        AuthStrategy::HttpBasic => {
            let users = BasicAuth::from_file(&config.api.http_basic_auth_user_file)?;
            if users.user_count() == 0 {
                warn!(
                    file = %config.api.http_basic_auth_user_file.display(),
                    "the http_basic user file has no users: every request but the public ones is refused"
                );
            }
            Some(Auth::Basic(Arc::new(users)))
        }
    };
    Ok(ApiState {
        router: Arc::new(ConductorRouter::new(
            db.clone(),
            config.api.hash_ring_reset_interval,
            config.conductor.heartbeat_timeout,
        )),
        rpc: RpcClient::new(transport, config.transport.rpc_timeout),
        db,
        config: Arc::new(config.api.clone()),
        notifier,
        auth,
        watch,
        hardware: drivers::catalogue(),
    })
}

/// What the start-up lines say of who may use the API.
fn auth_summary(config: &Config) -> String {
    match config.api.auth_strategy {
        AuthStrategy::Noauth => {
            "noauth: anyone who can reach the port can act on every node".to_owned()
        }
        AuthStrategy::HttpBasic => format!(
            "http_basic: users of {}",
            config.api.http_basic_auth_user_file.display()
        ),
        AuthStrategy::Keystone => format!(
            "keystone: tokens validated by {} (system readers read, system admins write)",
            config.keystone_authtoken.auth_url.as_deref().unwrap_or("?")
        ),
    }
}

/// The API's URL scheme: `https` with `enable_ssl_api`.
fn scheme(config: &Config) -> &'static str {
    if config.api.enable_ssl_api {
        "https"
    } else {
        "http"
    }
}

async fn serve_api(
    config: &Config,
    state: ApiState,
    shutdown: CancellationToken,
    banner: impl FnOnce(),
) -> anyhow::Result<()> {
    // Read before listening: a missing or bad certificate stops the start.
    let tls = if config.api.enable_ssl_api {
        Some(crate::http_server::tls_acceptor(&config.api)?)
    } else {
        None
    };
    let listener = tokio::net::TcpListener::bind(config.api.bind)
        .await
        .with_context(|| format!("cannot listen on {}", config.api.bind))?;
    banner();
    crate::http_server::serve(
        listener,
        tls,
        api::router(state),
        config.api.header_read_timeout,
        shutdown,
    )
    .await;
    Ok(())
}

/// `ferrum api`: serves the REST API until `shutdown`, then finishes in-flight requests.
pub async fn run_api(config: Config, shutdown: CancellationToken) -> anyhow::Result<()> {
    require_multi_host(&config, "api")?;
    let Some(db) = connect_db(&config, &shutdown).await? else {
        return Ok(());
    };
    require_schema(&db, &config).await?;
    let Some(transport) = connect_transport(&config, &shutdown).await? else {
        return Ok(());
    };
    let mut publishers = Vec::new();
    let sink = notification_sink(&config, &mut publishers)?;
    let feed = watch_feed(&config, &mut publishers)?;
    let hub = match watch_hub(&config, false, &shutdown) {
        Some(hub) => Some(watch::consume(
            brokers(&config.transport.url)?,
            &config.transport.prefix,
            hub,
        )),
        None => None,
    };
    let state = api_state(
        &config,
        db,
        transport,
        notifier(&config, Service::Api, sink.as_ref(), feed),
        hub,
    )?;
    let served = serve_api(&config, state, shutdown, || {
        info!(
            auth = ?config.api.auth_strategy,
            "Ferrum API listening on {}://{} (database {}, transport {}; {})",
            scheme(&config),
            config.api.bind,
            redact_url(&config.database.url),
            redact_url(&config.transport.url),
            auth_summary(&config)
        );
    })
    .await;
    flush(config.notifications.flush_timeout, publishers).await;
    served
}

/// `ferrum conductor`: serves RPCs until `shutdown`, then stops gracefully.
pub async fn run_conductor(config: Config, shutdown: CancellationToken) -> anyhow::Result<()> {
    require_multi_host(&config, "conductor")?;
    let Some(db) = connect_db(&config, &shutdown).await? else {
        return Ok(());
    };
    require_schema(&db, &config).await?;
    if let Some(bind) = config.conductor.metrics_bind {
        let listener = tokio::net::TcpListener::bind(bind)
            .await
            .with_context(|| format!("cannot listen on {bind} (conductor.metrics_bind)"))?;
        info!("Conductor metrics at http://{bind}/metrics");
        tokio::spawn(crate::http_server::serve(
            listener,
            None,
            api::ops::metrics_router(db.clone()),
            config.api.header_read_timeout,
            shutdown.clone(),
        ));
    }
    let Some(transport) = connect_transport(&config, &shutdown).await? else {
        return Ok(());
    };
    let mut ctx = conductor::Context::new(db, config.conductor.clone());
    let mut publishers = Vec::new();
    let sink = notification_sink(&config, &mut publishers)?;
    let feed = watch_feed(&config, &mut publishers)?;
    Arc::get_mut(&mut ctx)
        .context("a new conductor context is not shared")?
        .notifier = notifier(&config, Service::Conductor, sink.as_ref(), feed);
    exit_soon_after_losing_lease(ctx.lease.clone());
    let stopped = conductor::run(ctx, transport, shutdown).await;
    // After the conductor's graceful stop: its last notifications are queued.
    flush(config.notifications.flush_timeout, publishers).await;
    stopped
}

/// How long a conductor process may take to stop once it lost its lease.
const LOST_LEASE_EXIT_LIMIT: std::time::Duration = std::time::Duration::from_secs(10);

/// A conductor that lost its lease must be gone soon: its nodes may be another's by now, the
/// hash rings count it as gone, and only its restart (which recovers what it held) brings it
/// back. Its stop is bounded by its parts' own limits; should one of them wedge anyway, this
/// ends the process `LOST_LEASE_EXIT_LIMIT` after the loss, from a thread of its own that a
/// wedged runtime cannot hold up. For the processes of the binary only, never a test's.
fn exit_soon_after_losing_lease(lease: Arc<conductor::lease::Lease>) {
    tokio::spawn(async move {
        lease.lost().await;
        let watchdog = std::thread::Builder::new()
            .name("ferrum-exit".to_owned())
            .spawn(|| {
                std::thread::sleep(LOST_LEASE_EXIT_LIMIT);
                tracing::error!(
                    "The conductor lost its lease {LOST_LEASE_EXIT_LIMIT:?} ago and has not \
                     stopped (the log's last 'Stopping:' line tells where it is held up); \
                     exiting now, its restart recovers its nodes"
                );
                std::process::exit(1);
            });
        if let Err(e) = watchdog {
            warn!(error = %e, "could not start the thread that bounds the stop after a lost lease");
        }
    });
}

/// `ferrum all-in-one` (and `ferrum` alone): the API and one conductor in one process, by
/// default on an embedded SQLite file and the in-process transport.
pub async fn run_all_in_one(config: Config, shutdown: CancellationToken) -> anyhow::Result<()> {
    let all = AllInOne::start(
        &config,
        Registry::builtin(&config.conductor),
        shutdown.clone(),
    )
    .await?;
    exit_soon_after_losing_lease(all.conductor().lease.clone());
    let new_database = all.new_database;
    let served = serve_api(&config, all.api_state(), shutdown, || {
        banner(&config, new_database)
    })
    .await;
    // The API stops with the signal (or failed to start: then stop the conductor too).
    let stopped = all.stop().await;
    served.and(stopped)
}

/// The pieces of `ferrum all-in-one` without its listening socket: one conductor serving over
/// the configured transport (the in-process one by default) with the `drivers` given, and the
/// API state in front of it. `run_all_in_one` serves its API on `config.api.bind`; tests send
/// requests to [`api::router`] on it directly.
pub struct AllInOne {
    state: ApiState,
    conductor: conductor::Ctx,
    shutdown: CancellationToken,
    stopped: tokio::task::JoinHandle<anyhow::Result<()>>,
    /// The notification publisher, flushed once the conductor stopped.
    publishers: Vec<Publisher>,
    flush_timeout: std::time::Duration,
    /// One process per SQLite file: held until this is stopped or dropped.
    _file_lock: Option<std::fs::File>,
    /// Whether this start created the SQLite file (the banner says so).
    pub new_database: bool,
}

impl AllInOne {
    /// Locks and migrates an SQLite database file, connects, and starts the conductor, which
    /// serves until `shutdown` is cancelled. A conductor that stops by itself (it lost its
    /// lease) cancels `shutdown`, taking the API with it: the process exits with its error
    /// rather than serve requests nobody can carry out.
    pub async fn start(
        config: &Config,
        drivers: Registry,
        shutdown: CancellationToken,
    ) -> anyhow::Result<AllInOne> {
        let (file_lock, new_file) = match db::sqlite_path(&config.database.url) {
            Some(path) => {
                let new_file = check_database_file(path, config.database.recreate)?;
                (Some(lock_database_file(path)?), new_file)
            }
            None => (None, false),
        };
        let stopped = || anyhow::anyhow!("stopped while waiting for the servers to answer");
        let db = connect_db(config, &shutdown).await?.ok_or_else(stopped)?;
        if db.backend() == db::Backend::Sqlite {
            let applied = db.migrate().await?;
            if !applied.is_empty() {
                info!(migrations = ?applied, "prepared the database file");
            }
        } else {
            require_schema(&db, config).await?;
        }
        let transport = connect_transport(config, &shutdown)
            .await?
            .ok_or_else(stopped)?;
        let mut ctx = conductor::Context::new(db.clone(), config.conductor.clone());
        // One publisher (or log) for both halves of the process, and one watch hub fed in
        // process (whatever the transport: both halves are here).
        let mut publishers = Vec::new();
        let sink = notification_sink(config, &mut publishers)?;
        let hub = watch_hub(config, true, &shutdown);
        let feed = hub.clone().map(watch::Feed::Local);
        // Built before the conductor starts: a bad user file stops the start cleanly.
        let state = api_state(
            config,
            db,
            transport.clone(),
            notifier(config, Service::Api, sink.as_ref(), feed.clone()),
            hub,
        )?;
        // Not shared yet: the context is this function's alone until the conductor starts.
        let own = Arc::get_mut(&mut ctx).context("a new conductor context is not shared")?;
        own.drivers = drivers;
        own.notifier = notifier(config, Service::Conductor, sink.as_ref(), feed.clone());
        // The conductor serves before the API takes its first request.
        let serving = conductor::start(ctx.clone(), transport, shutdown.clone()).await?;
        let stopped = tokio::spawn({
            let shutdown = shutdown.clone();
            async move {
                let stopped = serving.run().await;
                shutdown.cancel();
                stopped
            }
        });
        Ok(AllInOne {
            state,
            conductor: ctx,
            shutdown,
            stopped,
            publishers,
            flush_timeout: config.notifications.flush_timeout,
            _file_lock: file_lock,
            new_database: new_file,
        })
    }

    /// What the API's handlers share: serve it with [`api::router`].
    pub fn api_state(&self) -> ApiState {
        self.state.clone()
    }

    /// The conductor's context (its database, drivers, workers).
    pub fn conductor(&self) -> &conductor::Ctx {
        &self.conductor
    }

    /// Cancels the shutdown token (if nobody did yet) and waits for the conductor's graceful
    /// stop; its error is the conductor's (it lost its lease, or could not recover its nodes).
    pub async fn stop(self) -> anyhow::Result<()> {
        self.shutdown.cancel();
        let stopped = self.stopped.await.context("conductor task");
        flush(self.flush_timeout, self.publishers).await;
        stopped?
    }
}

/// Takes an exclusive lock on `<file>.lock`, refusing a second process on the same database
/// file: two conductors of the same name on one file would clear each other's locks.
/// Whether the SQLite file at `path` is new, i.e. this start creates it: announced, since a
/// user whose database vanished would otherwise learn it from an empty node list. Refused when
/// traces of a former file remain (its lock file, which every start leaves, or its WAL), unless
/// `recreate`: the file was there and is gone.
fn check_database_file(path: &str, recreate: bool) -> anyhow::Result<bool> {
    let file = std::path::Path::new(path);
    if file.exists() {
        return Ok(false);
    }
    let shown = std::path::absolute(file).unwrap_or_else(|_| file.to_owned());
    let traces: Vec<String> = [".lock", "-wal", "-shm"]
        .iter()
        .map(|suffix| format!("{path}{suffix}"))
        .filter(|trace| std::path::Path::new(trace).exists())
        .collect();
    if !traces.is_empty() && !recreate {
        bail!(
            "the database file {} is gone, but {} shows that it was there: refusing to start on              a new, empty database. Restore the file, or start with FERRUM_DATABASE_RECREATE=true              (--database-recreate true) to create a new one",
            shown.display(),
            traces.join(" and ")
        );
    }
    tracing::warn!(
        path = %shown.display(),
        "Creating a new, empty database at {}", shown.display()
    );
    Ok(true)
}

fn lock_database_file(path: &str) -> anyhow::Result<std::fs::File> {
    let lock_path = format!("{path}.lock");
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&lock_path)
        .with_context(|| format!("cannot open {lock_path}"))?;
    match file.try_lock() {
        Ok(()) => Ok(file),
        Err(std::fs::TryLockError::WouldBlock) => bail!(
            "another ferrum process is already using the database file {path} (lock {lock_path} is held); stop it first, or choose another file with FERRUM_DATABASE_URL"
        ),
        Err(std::fs::TryLockError::Error(e)) => {
            Err(e).with_context(|| format!("cannot lock {lock_path}"))
        }
    }
}

fn banner(config: &Config, new_database: bool) {
    let url = format!("{}://{}", scheme(config), config.api.bind);
    let database = match db::Backend::of_url(&config.database.url) {
        Some(db::Backend::Sqlite) if new_database => format!(
            "{} (embedded SQLite, NEW and empty: created by this start)",
            config.database.url
        ),
        Some(db::Backend::Sqlite) => format!("{} (embedded SQLite)", config.database.url),
        _ => redact_url(&config.database.url),
    };
    let transport = if config.transport.is_local() {
        "local (in-process)".to_owned()
    } else {
        redact_url(&config.transport.url)
    };
    let conductor = &config.conductor.host;
    let auth = auth_summary(config);
    // In JSON mode only JSON lines may reach stderr: the banner is a log event there.
    if crate::telemetry::json() {
        info!(
            %url, %database, %transport, %conductor, %auth,
            "Ferrum all-in-one is serving the Ironic API v1 at {url}"
        );
        return;
    }
    let credentials = match config.api.auth_strategy {
        AuthStrategy::Noauth => "--os-auth-type none",
        AuthStrategy::HttpBasic => "--os-auth-type http_basic --os-username U --os-password P",
        AuthStrategy::Keystone => "--os-auth-url <keystone> --os-username U --os-password P",
    };
    eprintln!(
        "\nFerrum all-in-one is serving the Ironic API v1 at {url}\n  \
         auth:      {auth}\n  \
         database:  {database}\n  \
         transport: {transport}\n  \
         conductor: {conductor}\n  \
         try:       baremetal {credentials} --os-endpoint {url} node list\n"
    );
}

/// Cancels the returned token on the first SIGINT or SIGTERM; a second one exits at once.
pub fn shutdown_on_signals() -> CancellationToken {
    let token = CancellationToken::new();
    let trigger = token.clone();
    tokio::spawn(async move {
        wait_for_signal().await;
        info!("shutdown requested; a second signal exits at once");
        trigger.cancel();
        wait_for_signal().await;
        std::process::exit(130);
    });
    token
}

async fn wait_for_signal() {
    use tokio::signal::unix::{SignalKind, signal};
    let (Ok(mut term), Ok(mut int)) = (
        signal(SignalKind::terminate()),
        signal(SignalKind::interrupt()),
    ) else {
        // Without signal handlers, Ctrl-C still ends the process the default way.
        std::future::pending::<()>().await;
        return;
    };
    tokio::select! {
        _ = term.recv() => {}
        _ = int.recv() => {}
    }
}

#[cfg(test)]
mod tests {
    use std::{cell::Cell, time::Duration};

    use super::*;

    fn refused() -> std::io::Error {
        std::io::Error::from(std::io::ErrorKind::ConnectionRefused)
    }

    #[tokio::test]
    async fn a_server_that_answers_late_is_waited_for() {
        let tries = Cell::new(0);
        let started = std::time::Instant::now();
        let answer = until_it_answers(
            "the server",
            Some(10),
            Duration::from_millis(20),
            &CancellationToken::new(),
            || {
                tries.set(tries.get() + 1);
                let answers = tries.get() == 5;
                async move { if answers { Ok(7) } else { Err(refused()) } }
            },
        )
        .await
        .expect("answered");
        assert_eq!(answer, Some(7));
        // Four pauses (at most 20 ms each here) before the fifth try.
        assert!(started.elapsed() >= Duration::from_millis(80));
    }

    #[tokio::test]
    async fn the_last_failure_ends_the_wait_once_the_retries_are_spent() {
        let tries = Cell::new(0);
        let error = until_it_answers(
            "the server",
            Some(2),
            Duration::from_millis(1),
            &CancellationToken::new(),
            || {
                tries.set(tries.get() + 1);
                async { Err::<(), _>(refused()) }
            },
        )
        .await
        .expect_err("gave up");
        assert_eq!(tries.get(), 3);
        assert!(
            format!("{error:#}").starts_with("cannot reach the server: "),
            "{error:#}"
        );
    }

    #[tokio::test]
    async fn a_stop_ends_an_endless_wait() {
        let shutdown = CancellationToken::new();
        let stop = shutdown.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(50)).await;
            stop.cancel();
        });
        let answer = until_it_answers(
            "the server",
            None,
            Duration::from_millis(5),
            &shutdown,
            || async { Err::<(), _>(refused()) },
        )
        .await
        .expect("stopped");
        assert_eq!(answer, None);
    }
}
