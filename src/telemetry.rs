//! Tracing set-up: human-readable logs to stderr, filtered by `RUST_LOG` (default `info`), or
//! JSON lines with `FERRUM_LOG_JSON=1`.
//!
//! In JSON mode every line the process writes to stderr is one JSON object: the start-up banner
//! is a log event there ([`json`] tells the banner which), and so is the error a process stops
//! with ([`finish`]). Text mode colours its output only when stderr is a terminal and `NO_COLOR`
//! is unset or empty (<https://no-color.org>), so log files and pipes get no escape codes.

use std::{io::IsTerminal as _, sync::OnceLock};

use tracing_subscriber::{EnvFilter, filter::Directive, fmt};

static JSON: OnceLock<bool> = OnceLock::new();

pub fn init() {
    let mut filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    // lapin logs a returned message whole, body included, and bodies may carry node secrets.
    if let Ok(quiet) = "lapin::returned_messages=error".parse::<Directive>() {
        filter = filter.add_directive(quiet);
    }
    let json = std::env::var("FERRUM_LOG_JSON").is_ok_and(|v| v == "1");
    let _ = JSON.set(json);
    let builder = fmt().with_env_filter(filter).with_writer(std::io::stderr);
    if json {
        builder.json().init();
    } else {
        builder
            .with_ansi(colour(std::env::var_os("NO_COLOR").as_deref()))
            .init();
    }
}

/// Whether text logs are coloured: stderr is a terminal and `NO_COLOR` is unset or empty.
fn colour(no_color: Option<&std::ffi::OsStr>) -> bool {
    std::io::stderr().is_terminal() && no_color.is_none_or(std::ffi::OsStr::is_empty)
}

/// Whether logs are JSON lines (`FERRUM_LOG_JSON=1`), so that nothing else may be written to
/// stderr.
pub fn json() -> bool {
    JSON.get().copied().unwrap_or(false)
}

/// What `main` returns: in JSON mode, an error is logged as a JSON line and the process exits
/// with status 1 (rather than printing `Error: ...` in plain text); otherwise `result` as it is.
pub fn finish(result: anyhow::Result<()>) -> anyhow::Result<()> {
    match result {
        Err(e) if json() => {
            tracing::error!(error = format!("{e:#}"), "ferrum stopped with an error");
            std::process::exit(1);
        }
        result => result,
    }
}
