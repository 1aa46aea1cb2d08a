//! The `ferrum` binary: parses the command line and runs one of the process kinds.

use clap::{Parser, Subcommand};
use ferrum::{
    config::{Config, ConfigArgs},
    service, telemetry,
};

#[derive(Parser)]
#[command(
    name = "ferrum",
    version,
    about = "Bare-metal provisioning with Ironic's API"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Serve the REST API (multi-host form: needs MySQL and RabbitMQ).
    Api(ConfigArgs),
    /// Run a conductor worker (multi-host form: needs MySQL and RabbitMQ).
    Conductor(ConfigArgs),
    /// Apply database migrations.
    DbSync(ConfigArgs),
}

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    telemetry::init();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async {
        match cli.command {
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
    })
}
