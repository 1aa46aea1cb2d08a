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
    let command = Cli::try_parse_from(with_subcommand(std::env::args_os().collect()))
        .unwrap_or_else(|e| name_the_variable(e).exit())
        .command;
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

/// clap reports a bad value under its flag (`--api-bind <API_BIND>`) even when the value came
/// from the flag's environment variable; then the error is said again under the variable's
/// name, which is what the operator set.
fn name_the_variable(e: clap::Error) -> clap::Error {
    use clap::error::{ContextKind, ContextValue, ErrorKind};
    if !matches!(
        e.kind(),
        ErrorKind::ValueValidation | ErrorKind::InvalidValue
    ) {
        return e;
    }
    let Some(ContextValue::String(arg)) = e.get(ContextKind::InvalidArg) else {
        return e;
    };
    let Some(long) = arg
        .split_whitespace()
        .next()
        .and_then(|flag| flag.strip_prefix("--"))
    else {
        return e;
    };
    let on_command_line = std::env::args_os().any(|a| {
        let a = a.to_string_lossy();
        a == format!("--{long}") || a.starts_with(&format!("--{long}="))
    });
    if on_command_line {
        return e;
    }
    use clap::Args as _;
    let flags = ConfigArgs::augment_args(clap::Command::new("ferrum"));
    let Some(variable) = flags
        .get_arguments()
        .find(|a| a.get_long() == Some(long))
        .and_then(|a| a.get_env())
        .map(|v| v.to_string_lossy().into_owned())
    else {
        return e;
    };
    let value = match e.get(ContextKind::InvalidValue) {
        Some(ContextValue::String(v)) => v.clone(),
        _ => String::new(),
    };
    // The reason: clap's own text after "for '<arg>'" (`: <why>`, or the valid values).
    let rendered = e.to_string();
    let reason = rendered
        .split_once(arg.as_str())
        .map(|(_, rest)| rest.trim_start_matches('\'').trim())
        .unwrap_or_default()
        .lines()
        .filter(|l| !l.trim().is_empty() && !l.contains("--help"))
        .collect::<Vec<_>>()
        .join(" ");
    let reason = reason.trim_start_matches(':').trim();
    clap::Error::raw(
        ErrorKind::ValueValidation,
        format!("invalid value '{value}' for the environment variable {variable}: {reason}\n"),
    )
}
