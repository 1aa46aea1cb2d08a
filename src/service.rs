//! Process wiring: what `ferrum api`, `ferrum conductor` and `ferrum db-sync` run, given a
//! [`Config`] and a shutdown token. The binary only parses arguments and calls these.

use std::sync::Arc;

use anyhow::Context as _;
use tokio_util::sync::CancellationToken;
use tracing::info;

use crate::{
    api::{self, ApiState, routing::ConductorRouter},
    conductor,
    config::Config,
    db::{Db, redact_url},
    rpc::{RpcClient, amqp::AmqpTransport, transport::Transport},
};

async fn connect_db(config: &Config) -> anyhow::Result<Db> {
    let db = Db::connect(&config.database.url, config.database.pool_size)?;
    db.ping().await.with_context(|| {
        format!(
            "cannot reach the database at {}",
            redact_url(&config.database.url)
        )
    })?;
    Ok(db)
}

async fn connect_transport(config: &Config) -> anyhow::Result<Arc<dyn Transport>> {
    let transport = AmqpTransport::connect(&config.transport.url, &config.transport.prefix)
        .await
        .with_context(|| {
            format!(
                "cannot reach the message broker at {}",
                redact_url(&config.transport.url)
            )
        })?;
    Ok(Arc::new(transport))
}

/// `ferrum db-sync`: applies pending migrations.
pub async fn db_sync(config: &Config) -> anyhow::Result<()> {
    let db = connect_db(config).await?;
    let applied = db.migrate().await?;
    if applied.is_empty() {
        info!("database schema is up to date");
    } else {
        info!(migrations = ?applied, "applied {} migration(s)", applied.len());
    }
    Ok(())
}

/// `ferrum api`: serves the REST API until `shutdown`, then finishes in-flight requests.
pub async fn run_api(config: Config, shutdown: CancellationToken) -> anyhow::Result<()> {
    let db = connect_db(&config).await?;
    let transport = connect_transport(&config).await?;
    let state = ApiState {
        router: Arc::new(ConductorRouter::new(
            db.clone(),
            config.api.hash_ring_reset_interval,
            config.conductor.heartbeat_timeout,
        )),
        rpc: RpcClient::new(transport, config.transport.rpc_timeout),
        db,
    };
    let listener = tokio::net::TcpListener::bind(config.api.bind)
        .await
        .with_context(|| format!("cannot listen on {}", config.api.bind))?;
    info!(
        "Ferrum API listening on http://{} (database {}, transport {})",
        config.api.bind,
        redact_url(&config.database.url),
        redact_url(&config.transport.url)
    );
    axum::serve(listener, api::router(state))
        .with_graceful_shutdown(async move { shutdown.cancelled().await })
        .await
        .context("API server")?;
    Ok(())
}

/// `ferrum conductor`: serves RPCs until `shutdown`, then stops gracefully.
pub async fn run_conductor(config: Config, shutdown: CancellationToken) -> anyhow::Result<()> {
    let db = connect_db(&config).await?;
    let transport = connect_transport(&config).await?;
    let ctx = conductor::Context::new(db, config.conductor.clone());
    conductor::run(ctx, transport, shutdown).await
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
