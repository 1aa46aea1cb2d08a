//! The `ferrum` binary: parses the command line and runs one of the process kinds.

use clap::{Parser, Subcommand};
use ferrum::{
    config::{Config, ConfigArgs},
    service, telemetry,
};

/// mimalloc rather than glibc malloc: see Cargo.toml.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[derive(Parser)]
#[command(
    name = "ferrum",
    version,
    about = "Bare-metal provisioning with Ironic's API. With no subcommand, runs all-in-one."
)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Subcommand)]
enum Command {
    /// API and one conductor in one process; by default on an embedded SQLite file
    /// (ferrum.sqlite) and the in-process transport. What `ferrum` alone runs.
    AllInOne(ConfigArgs),
    /// Serve the REST API (multi-host form: needs MySQL and RabbitMQ).
    Api(ConfigArgs),
    /// Run a conductor worker (multi-host form: needs MySQL and RabbitMQ).
    Conductor(ConfigArgs),
    /// Apply database migrations.
    DbSync(ConfigArgs),
}

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    // With no subcommand the settings still come from the environment (and its FERRUM_CONFIG).
    let command = match cli.command {
        Some(command) => command,
        None => Command::AllInOne(ConfigArgs::from_env()?),
    };
    telemetry::init();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    telemetry::finish(runtime.block_on(async {
        match command {
            Command::AllInOne(args) => {
                let config = Config::load(&args)?;
                service::run_all_in_one(config, service::shutdown_on_signals()).await
            }
            Command::Api(args) => {
                let config = Config::load(&args)?;
                service::run_api(config, service::shutdown_on_signals()).await
            }
            Command::Conductor(args) => {
                let config = Config::load(&args)?;
                service::run_conductor(config, service::shutdown_on_signals()).await
            }
            Command::DbSync(args) => {
                let config = Config::load(&args)?;
                service::db_sync(&config).await
            }
        }
    }))
}
