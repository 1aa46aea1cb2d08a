//! The `ferrum` binary: parses the command line and runs one of the process kinds.

use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};
use ferrum::{
    config::{self, Config, ConfigArgs, ConfigError, Process},
    drivers::Registry,
    service, telemetry,
};

/// mimalloc rather than glibc malloc: see Cargo.toml.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[derive(Parser)]
#[command(
    name = "ferrum",
    version,
    about = "Bare-metal provisioning with Ironic's API. With no subcommand, runs all-in-one \
             (and takes its flags: `ferrum --config ferrum.toml`)."
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
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
    // Each subcommand's help lists the settings that process reads.
    let mut cli = Cli::command();
    for process in Process::ALL {
        cli = cli.mut_subcommand(process.subcommand(), |sub| {
            config::hide_unused(sub, process)
        });
    }
    let matches = cli
        .try_get_matches_from(with_subcommand(std::env::args_os().collect()))
        .unwrap_or_else(|e| e.exit());
    // Reads the variables of the settings no flag gave, refusing a bad one under its name.
    let command = Cli::from_arg_matches(&matches)
        .unwrap_or_else(|e| e.exit())
        .command;
    telemetry::init();
    let names = std::env::vars_os().map(|(name, _)| name.to_string_lossy().into_owned());
    for warning in config::unknown_variables(names) {
        tracing::warn!("{warning}");
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let result = runtime.block_on(async {
        match command {
            Command::AllInOne(args) => {
                let config = load(&args)?;
                service::run_all_in_one(config, service::shutdown_on_signals()).await
            }
            Command::Api(args) => {
                let config = load(&args)?;
                service::run_api(config, service::shutdown_on_signals()).await
            }
            Command::Conductor(args) => {
                let config = load(&args)?;
                service::run_conductor(config, service::shutdown_on_signals()).await
            }
            Command::DbSync(args) => {
                let config = load(&args)?;
                service::db_sync(&config, service::shutdown_on_signals()).await
            }
        }
    });
    // The service has stopped; a blocking task still running (a DNS lookup, a password hash)
    // must not hold the exit up, as dropping the runtime would wait for it without limit.
    runtime.shutdown_timeout(std::time::Duration::from_secs(1));
    telemetry::finish(result)
}

/// The configuration, checked, and the interfaces it enables checked by the drivers (which
/// `config` does not know).
fn load(args: &ConfigArgs) -> Result<Config, ConfigError> {
    let config = Config::load(args)?;
    Registry::check_config(&config.conductor).map_err(|(key, reason)| ConfigError::Invalid {
        name: "conductor.enabled_*_interfaces",
        reason: format!("{key}: {reason}"),
    })?;
    Ok(config)
}

/// The arguments with `all-in-one` put first when they name no subcommand: bare `ferrum`, as
/// `cargo run` runs it, is `ferrum all-in-one` with the same flags. Help and version stay the
/// top level's.
fn with_subcommand(mut args: Vec<std::ffi::OsString>) -> Vec<std::ffi::OsString> {
    let names_one = args.get(1).is_some_and(|first| {
        let first = first.to_string_lossy();
        !first.starts_with('-') || ["-h", "--help", "-V", "--version"].contains(&first.as_ref())
    });
    if !names_one {
        args.insert(1, "all-in-one".into());
    }
    args
}
