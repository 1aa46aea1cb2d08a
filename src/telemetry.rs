//! Tracing set-up: human-readable logs to stderr, filtered by `RUST_LOG` (default `info`), or
//! JSON lines with `FERRUM_LOG_JSON=1`.

use tracing_subscriber::{EnvFilter, filter::Directive, fmt};

pub fn init() {
    let mut filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    // lapin logs a returned message whole, body included, and bodies may carry node secrets.
    if let Ok(quiet) = "lapin::returned_messages=error".parse::<Directive>() {
        filter = filter.add_directive(quiet);
    }
    let json = std::env::var("FERRUM_LOG_JSON").is_ok_and(|v| v == "1");
    let builder = fmt().with_env_filter(filter).with_writer(std::io::stderr);
    if json {
        builder.json().init();
    } else {
        builder.init();
    }
}
