//! The command line and the environment: a flag for each setting that has one, its `FERRUM_*`
//! variable read when the flag is not given, and the warning for a `FERRUM_*` variable that is
//! no setting. A bad value is refused here, under the flag's or the variable's name (whichever
//! the operator set), before anything starts.

use std::{ffi::OsString, path::PathBuf};

use clap::{Arg, ArgMatches, error::ErrorKind};

use super::{Config, ConfigError, Process, SETTINGS, Setting};

/// The variable naming the TOML file (`--config`).
const CONFIG_VARIABLE: &str = "FERRUM_CONFIG";

/// `FERRUM_*` variables that are no settings: logging's, and those of the tests, CI and
/// tools, which the processes they start inherit. Not warned about.
pub const OTHER_VARIABLES: &[&str] = &[
    "FERRUM_LOG_JSON",
    "FERRUM_REQUIRE_SERVICES",
    "FERRUM_TEST_MYSQL_URL",
    "FERRUM_TEST_AMQP_URL",
    "FERRUM_TEST_RABBITMQ_SERVER",
    "FERRUM_CLIENTS_VENV",
    "FERRUM_IPA_SANDBOX",
    "FERRUM_REDFISH_EMULATOR_VENV",
    "FERRUM_REDFISH_EMULATOR_SCRIPT",
    "FERRUM_PEERS_CACHE",
    "FERRUM_PEERS_NO_APT",
    "FERRUM_FAULT_MINUTES",
    "FERRUM_FAULT_SEED",
    "FERRUM_LAB_FIRMWARE",
    "FERRUM_LAB_KEEP",
    "FERRUM_LAB_BIN",
    "FERRUM_LAB_CALLGRIND",
    "FERRUM_COMPOSE_API_PORT",
];

/// The configuration file and the settings given by flag or variable. Every setting's flag is
/// accepted by every subcommand (a subcommand's `--help` lists only those it reads, see
/// [`hide_unused`]); a value given here overrides the file.
#[derive(Debug, Clone, Default)]
pub struct ConfigArgs {
    /// The TOML file (`--config`, `FERRUM_CONFIG`).
    pub config: Option<PathBuf>,
    /// The settings given, each with its text, checked.
    pub(super) given: Vec<(&'static str, String)>,
}

impl ConfigArgs {
    /// The flags of `matches`, then the variables `env` has for the settings no flag gave.
    pub fn gather(
        matches: &ArgMatches,
        env: &dyn Fn(&str) -> Option<OsString>,
    ) -> Result<ConfigArgs, clap::Error> {
        let mut given = Vec::new();
        for setting in SETTINGS {
            let (Some(flag), Some(variable)) = (setting.flag, setting.env) else {
                continue;
            };
            // The flag's value was checked as clap read it.
            if let Some(text) = matches.get_one::<String>(flag) {
                given.push((setting.name, text.clone()));
                continue;
            }
            let Some(text) = env(variable) else {
                continue;
            };
            let text = text
                .into_string()
                .map_err(|text| bad_variable(variable, &text.to_string_lossy(), "not UTF-8"))?;
            (setting.check_text)(&text).map_err(|reason| bad_variable(variable, &text, &reason))?;
            given.push((setting.name, text));
        }
        let config = matches
            .get_one::<PathBuf>("config")
            .cloned()
            .or_else(|| env(CONFIG_VARIABLE).map(PathBuf::from));
        Ok(ConfigArgs { config, given })
    }

    /// Puts the settings given into `config`.
    pub(super) fn apply(&self, config: &mut Config) -> Result<(), ConfigError> {
        for (name, text) in &self.given {
            let setting = Setting::named(name).expect("a declared setting");
            (setting.set_text)(config, text).map_err(|reason| ConfigError::Invalid {
                name: setting.name,
                reason,
            })?;
        }
        Ok(())
    }
}

fn bad_variable(variable: &str, text: &str, reason: &str) -> clap::Error {
    bad_value(
        text,
        &format!("the environment variable {variable}"),
        reason,
    )
}

/// A value refused, under the name the operator gave it by. A URL's password is not repeated
/// (`--transport-url`, `FERRUM_DATABASE_URL`, ...): the message goes to logs and terminals.
fn bad_value(text: &str, given_as: &str, reason: &str) -> clap::Error {
    clap::Error::raw(
        ErrorKind::ValueValidation,
        format!(
            "invalid value '{}' for {given_as}: {reason}\n",
            crate::db::redact_url(text)
        ),
    )
}

/// A flag's value parser: the setting's check, and its own error message ([`bad_value`]), since
/// clap's would repeat the value as given.
#[derive(Clone)]
struct CheckedFlag(fn(&str) -> Result<(), String>);

impl clap::builder::TypedValueParser for CheckedFlag {
    type Value = String;

    fn parse_ref(
        &self,
        cmd: &clap::Command,
        arg: Option<&Arg>,
        value: &std::ffi::OsStr,
    ) -> Result<String, clap::Error> {
        let flag = arg.map_or_else(|| "a flag".to_owned(), |arg| format!("'{arg}'"));
        let Some(text) = value.to_str() else {
            return Err(bad_value("(not UTF-8)", &flag, "must be UTF-8").with_cmd(cmd));
        };
        (self.0)(text)
            .map(|()| text.to_owned())
            .map_err(|reason| bad_value(text, &flag, &reason).with_cmd(cmd))
    }
}

/// A setting's flag: its value checked as it is read; its help the setting's, with its default
/// and variable.
fn flag(setting: &'static Setting, flag: &'static str, variable: &'static str) -> Arg {
    let help = setting
        .help
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ");
    let short = match help.split_once(". ") {
        Some((first, _)) => format!("{first}."),
        None => help.clone(),
    };
    let default = match (setting.default)() {
        Some(default) => format!(" [default: {default}]"),
        None => String::new(),
    };
    Arg::new(flag)
        .long(flag)
        .value_name(variable.trim_start_matches("FERRUM_"))
        .value_parser(CheckedFlag(setting.check_text))
        .help(format!("{short}{default} [env: {variable}]"))
        .long_help(format!("{help}{default} [env: {variable}]"))
}

impl clap::Args for ConfigArgs {
    fn augment_args(cmd: clap::Command) -> clap::Command {
        let config = Arg::new("config")
            .long("config")
            .value_name("FILE")
            .value_parser(clap::value_parser!(PathBuf))
            .help(format!("TOML configuration file [env: {CONFIG_VARIABLE}]"));
        SETTINGS.iter().fold(cmd.arg(config), |cmd, setting| {
            match (setting.flag, setting.env) {
                (Some(name), Some(variable)) => cmd.arg(flag(setting, name, variable)),
                _ => cmd,
            }
        })
    }

    fn augment_args_for_update(cmd: clap::Command) -> clap::Command {
        Self::augment_args(cmd)
    }
}

impl clap::FromArgMatches for ConfigArgs {
    fn from_arg_matches(matches: &ArgMatches) -> Result<Self, clap::Error> {
        ConfigArgs::gather(matches, &|name| std::env::var_os(name))
    }

    fn update_from_arg_matches(&mut self, matches: &ArgMatches) -> Result<(), clap::Error> {
        *self = Self::from_arg_matches(matches)?;
        Ok(())
    }
}

/// `cmd` (the subcommand of `process`) with the flags of the settings `process` does not read
/// hidden from its `--help`. They are still accepted, as they always were: one environment or
/// script may serve every process.
pub fn hide_unused(cmd: clap::Command, process: Process) -> clap::Command {
    cmd.mut_args(|arg| {
        let unused = SETTINGS
            .iter()
            .any(|s| s.flag == Some(arg.get_id().as_str()) && !s.used_by.contains(process));
        arg.hide(unused)
    })
}

/// A warning for each `FERRUM_*` variable among `names` that is neither a setting's nor one of
/// [`OTHER_VARIABLES`], naming the nearest setting's variable: a misspelt variable would
/// otherwise be ignored without a word.
pub fn unknown_variables(names: impl IntoIterator<Item = String>) -> Vec<String> {
    let settings = || {
        SETTINGS
            .iter()
            .filter_map(|s| s.env)
            .chain([CONFIG_VARIABLE])
    };
    names
        .into_iter()
        .filter(|name| name.starts_with("FERRUM_"))
        .filter(|name| {
            !settings()
                .chain(OTHER_VARIABLES.iter().copied())
                .any(|v| v == name.as_str())
        })
        .map(|name| match super::nearest(&name, settings()) {
            Some(near) => format!("{name} is not a Ferrum setting; did you mean {near}?"),
            None => format!("{name} is not a Ferrum setting"),
        })
        .collect()
}
