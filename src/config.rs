//! Typed configuration, loaded once at start: defaults, then a TOML file, then `FERRUM_*`
//! environment variables, then command-line flags (flags winning). Every setting is declared
//! once, in `config/settings.rs`; the structs, the readers of the file, variables and flags,
//! each subcommand's `--help` and the checks come from that table. A bad value stops start-up
//! with a message naming it. Tests build a `Config` in code.
//!
//! Must not: know the conductor or the drivers (they read this). The drivers' check of the
//! enabled interfaces, `drivers::Registry::check_config`, is run by the binary.

mod args;
mod settings;
mod value;

#[cfg(test)]
mod tests;

use std::path::Path;

pub use args::{ConfigArgs, OTHER_VARIABLES, hide_unused, unknown_variables};
pub use settings::{
    ApiConfig, ConductorConfig, Config, DatabaseConfig, KeystoneConfig, NotificationsConfig,
    SETTINGS, TransportConfig, WatchConfig,
};
pub use value::{parse_bind, parse_seconds};

use crate::node::InterfaceKind;

/// One setting, as declared in `config/settings.rs`.
pub struct Setting {
    /// `section.key`, as errors name it.
    pub name: &'static str,
    /// The TOML table and key.
    pub section: &'static str,
    pub key: &'static str,
    /// The `FERRUM_*` variable and the flag (without `--`); None for both: file only.
    pub env: Option<&'static str>,
    pub flag: Option<&'static str>,
    /// The field's doc, which `--help` shows.
    pub help: &'static str,
    /// The processes that read it: their `--help` lists it.
    pub used_by: Processes,
    /// The default in TOML syntax; None when unset.
    pub default: fn() -> Option<String>,
    /// Whether the text of a flag or variable is a good value.
    check_text: fn(&str) -> Result<(), String>,
    set_text: fn(&mut Config, &str) -> Result<(), String>,
    set_toml: fn(&mut Config, &toml::Value) -> Result<(), String>,
    /// The setting's own check of the value it has in a config.
    check: fn(&Config) -> Result<(), String>,
}

impl Setting {
    /// The setting `section.key`.
    pub fn named(name: &str) -> Option<&'static Setting> {
        SETTINGS.iter().find(|s| s.name == name)
    }
}

/// The kinds of process, by subcommand.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Process {
    AllInOne,
    Api,
    Conductor,
    DbSync,
}

impl Process {
    pub const ALL: [Process; 4] = [
        Process::AllInOne,
        Process::Api,
        Process::Conductor,
        Process::DbSync,
    ];

    /// Its subcommand.
    pub fn subcommand(self) -> &'static str {
        match self {
            Process::AllInOne => "all-in-one",
            Process::Api => "api",
            Process::Conductor => "conductor",
            Process::DbSync => "db-sync",
        }
    }
}

/// A set of [`Process`]es.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Processes(u8);

impl Processes {
    pub const fn of(processes: &[Process]) -> Processes {
        let mut bits = 0;
        let mut i = 0;
        while i < processes.len() {
            bits |= 1 << processes[i] as u8;
            i += 1;
        }
        Processes(bits)
    }

    pub fn contains(self, process: Process) -> bool {
        self.0 & (1 << process as u8) != 0
    }
}

/// The hooks Ferrum can run over inspection data (`conductor::flows::inspect` runs them), in the
/// order Ironic's defaults name them (`[inspector]default_hooks`): `ramdisk-error` (the agent's
/// own error fails the inspection), `validate-interfaces` (the inventory's usable NICs: a valid
/// MAC, not loopback, the PXE one where the agent names it), `ports` (a port for each of them,
/// kept if it exists; Ironic's `add_ports = pxe`, `keep_ports = all`) and `architecture`
/// (`properties.cpu_arch`).
pub const INSPECTION_HOOKS: &[&str] = &[
    "ramdisk-error",
    "validate-interfaces",
    "ports",
    "architecture",
];

/// Every hardware type of this build (`drivers::Registry` builds them).
pub const HARDWARE_TYPES: [&str; 3] = ["fake-hardware", "ipmi", "redfish"];

/// Who may use the API ([`ApiConfig::auth_strategy`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AuthStrategy {
    /// Anyone who reaches the port.
    Noauth,
    /// HTTP Basic against the bcrypt entries of `http_basic_auth_user_file`.
    HttpBasic,
    /// Keystone tokens (`X-Auth-Token`), validated against `[keystone_authtoken]`'s Keystone.
    Keystone,
}

/// The lowest TLS version the API accepts ([`ApiConfig::tls_minimum_version`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TlsVersion {
    V1_2,
    V1_3,
}

/// Where the agent downloads an instance image from ([`ConductorConfig::image_download_source`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ImageDownloadSource {
    Http,
    Local,
}

impl ImageDownloadSource {
    pub fn parse(name: &str) -> Option<ImageDownloadSource> {
        <ImageDownloadSource as value::Value>::parse(name).ok()
    }
}

/// Who hands out DHCP for network boot ([`ConductorConfig::dhcp_provider`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DhcpProvider {
    None,
    Dnsmasq,
}

/// What becomes of notifications without a broker ([`NotificationsConfig::without_broker`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WithoutBroker {
    Log,
    Off,
}

impl TransportConfig {
    /// The in-process transport: API and conductor in one process.
    pub fn is_local(&self) -> bool {
        self.url == "local"
    }
}

impl WatchConfig {
    /// Whether the watch is on in a process of this kind (see `enabled`).
    pub fn is_on(&self, all_in_one: bool) -> bool {
        self.enabled.unwrap_or(all_in_one)
    }
}

impl ConductorConfig {
    /// The interfaces of `kind` enabled by name (`enabled_<kind>_interfaces`, names trimmed),
    /// or None when every one Ferrum builds is.
    pub fn enabled_interfaces(&self, kind: InterfaceKind) -> Option<Vec<&str>> {
        let names = match kind {
            InterfaceKind::Bios => &self.enabled_bios_interfaces,
            InterfaceKind::Boot => &self.enabled_boot_interfaces,
            InterfaceKind::Console => &self.enabled_console_interfaces,
            InterfaceKind::Deploy => &self.enabled_deploy_interfaces,
            InterfaceKind::Firmware => &self.enabled_firmware_interfaces,
            InterfaceKind::Inspect => &self.enabled_inspect_interfaces,
            InterfaceKind::Management => &self.enabled_management_interfaces,
            InterfaceKind::Network => &self.enabled_network_interfaces,
            InterfaceKind::Power => &self.enabled_power_interfaces,
            InterfaceKind::Raid => &self.enabled_raid_interfaces,
            InterfaceKind::Rescue => &self.enabled_rescue_interfaces,
            InterfaceKind::Storage => &self.enabled_storage_interfaces,
            InterfaceKind::Vendor => &self.enabled_vendor_interfaces,
        };
        let names: Vec<&str> = names
            .iter()
            .flatten()
            .map(|n| n.trim())
            .filter(|n| !n.is_empty())
            .collect();
        (!names.is_empty()).then_some(names)
    }

    /// The interface of `kind` a node gets when it names none (`default_<kind>_interface`).
    pub fn default_interface(&self, kind: InterfaceKind) -> Option<&str> {
        let name = match kind {
            InterfaceKind::Bios => &self.default_bios_interface,
            InterfaceKind::Boot => &self.default_boot_interface,
            InterfaceKind::Console => &self.default_console_interface,
            InterfaceKind::Deploy => &self.default_deploy_interface,
            InterfaceKind::Firmware => &self.default_firmware_interface,
            InterfaceKind::Inspect => &self.default_inspect_interface,
            InterfaceKind::Management => &self.default_management_interface,
            InterfaceKind::Network => &self.default_network_interface,
            InterfaceKind::Power => &self.default_power_interface,
            InterfaceKind::Raid => &self.default_raid_interface,
            InterfaceKind::Rescue => &self.default_rescue_interface,
            InterfaceKind::Storage => &self.default_storage_interface,
            InterfaceKind::Vendor => &self.default_vendor_interface,
        };
        name.as_deref().map(str::trim).filter(|n| !n.is_empty())
    }
}

/// The machine's host name, as Ironic's `[DEFAULT]host` defaults to.
pub fn default_host_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .map(|s| s.trim().to_owned())
        .filter(|s| !s.is_empty())
        .or_else(|| std::env::var("HOSTNAME").ok())
        .unwrap_or_else(|| "localhost".to_owned())
}

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read config file {path}: {source}")]
    Read {
        path: String,
        source: std::io::Error,
    },
    #[error("bad config file {path}: {source}")]
    Parse {
        path: String,
        source: Box<toml::de::Error>,
    },
    /// A key the file may not have, or a value of the wrong kind.
    #[error("bad config file {path}: {reason}")]
    File { path: String, reason: String },
    #[error("bad configuration value {name}: {reason}")]
    Invalid { name: &'static str, reason: String },
}

impl Config {
    /// Defaults, then the file named by `--config`/`FERRUM_CONFIG`, then variables and flags.
    pub fn load(args: &ConfigArgs) -> Result<Config, ConfigError> {
        let mut config = match &args.config {
            Some(path) => Config::from_file(path)?,
            None => Config::default(),
        };
        args.apply(&mut config)?;
        config.validate()?;
        Ok(config)
    }

    /// Defaults, then the file; not checked.
    pub fn from_file(path: &Path) -> Result<Config, ConfigError> {
        let shown = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            path: shown.clone(),
            source,
        })?;
        Config::from_toml(&text).map_err(|e| match e {
            ConfigError::Parse { source, .. } => ConfigError::Parse {
                path: shown,
                source,
            },
            ConfigError::File { reason, .. } => ConfigError::File {
                path: shown,
                reason,
            },
            other => other,
        })
    }

    /// Defaults, then the TOML text. An unknown section or key is an error, naming the nearest
    /// known one.
    pub fn from_toml(text: &str) -> Result<Config, ConfigError> {
        let file_error = |reason: String| ConfigError::File {
            path: String::new(),
            reason,
        };
        let table: toml::Table = toml::from_str(text).map_err(|source| ConfigError::Parse {
            path: String::new(),
            source: Box::new(source),
        })?;
        let mut config = Config::default();
        for (section, keys) in &table {
            if !SETTINGS.iter().any(|s| s.section == section.as_str()) {
                return Err(file_error(unknown_section(section)));
            }
            let Some(keys) = keys.as_table() else {
                return Err(file_error(format!("[{section}] must be a table")));
            };
            for (key, value) in keys {
                let name = format!("{section}.{key}");
                let Some(setting) = Setting::named(&name) else {
                    let known = SETTINGS.iter().map(|s| s.name);
                    return Err(file_error(match nearest(&name, known) {
                        Some(near) => format!("unknown setting {name}; did you mean {near}?"),
                        None => format!("unknown setting {name}"),
                    }));
                };
                (setting.set_toml)(&mut config, value)
                    .map_err(|reason| file_error(format!("{name}: {reason}")))?;
            }
        }
        Ok(config)
    }

    /// Each setting's own check, then those of settings that go together.
    pub fn validate(&self) -> Result<(), ConfigError> {
        for setting in SETTINGS {
            (setting.check)(self).map_err(|reason| ConfigError::Invalid {
                name: setting.name,
                reason,
            })?;
        }
        let invalid = |name, reason: &str| {
            Err(ConfigError::Invalid {
                name,
                reason: reason.to_owned(),
            })
        };
        // As Ironic's wsgi_service: TLS needs both files (they are read at start).
        if self.api.enable_ssl_api && (self.api.cert_file.is_none() || self.api.key_file.is_none())
        {
            return invalid(
                "api.enable_ssl_api",
                "serving HTTPS needs api.cert_file and api.key_file",
            );
        }
        if self.conductor.heartbeat_timeout <= self.conductor.heartbeat_interval {
            return invalid(
                "conductor.heartbeat_timeout",
                "must be longer than conductor.heartbeat_interval",
            );
        }
        if self.conductor.image_download_source == ImageDownloadSource::Local
            && self.conductor.http_url.is_none()
        {
            return invalid(
                "conductor.image_download_source",
                "local needs conductor.http_url, where the deploy ramdisk downloads the images",
            );
        }
        Ok(())
    }
}

fn unknown_section(section: &str) -> String {
    let mut sections: Vec<&str> = SETTINGS.iter().map(|s| s.section).collect();
    sections.dedup();
    match nearest(section, sections.iter().copied()) {
        Some(near) => format!("unknown section [{section}]; did you mean [{near}]?"),
        None => format!(
            "unknown section [{section}]; the sections are {}",
            sections.join(", ")
        ),
    }
}

/// The known name nearest to `name` in edits, if it is near enough to be a slip.
fn nearest<'a>(name: &str, known: impl Iterator<Item = &'a str>) -> Option<&'a str> {
    known
        .map(|k| (edit_distance(name, k), k))
        .min_by_key(|(d, _)| *d)
        .filter(|(d, _)| *d <= 3.max(name.len() / 4))
        .map(|(_, k)| k)
}

/// Levenshtein distance, over characters.
fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut diagonal = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let substituted = diagonal + usize::from(ca != *cb);
            diagonal = row[j + 1];
            row[j + 1] = substituted.min(row[j] + 1).min(row[j + 1] + 1);
        }
    }
    row[b.len()]
}
