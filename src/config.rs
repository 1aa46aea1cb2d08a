//! Typed configuration, loaded once at start: defaults, then a TOML file, then `FERRUM_*`
//! environment variables, then command-line flags (clap reads both of the last two, flags winning).
//! A bad value stops start-up with a message naming it. Tests build a `Config` in code.

use std::{
    net::SocketAddr,
    path::{Path, PathBuf},
    time::Duration,
};

use serde::Deserialize;

use crate::node::InterfaceKind;

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Config {
    pub database: DatabaseConfig,
    pub transport: TransportConfig,
    pub api: ApiConfig,
    pub conductor: ConductorConfig,
    pub notifications: NotificationsConfig,
    pub watch: WatchConfig,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct DatabaseConfig {
    /// `sqlite://<file>` (embedded, all-in-one) or `mysql://user:pass@host/db` (multi-host).
    pub url: String,
    /// Connections per process.
    pub pool_size: usize,
    /// Whether a write to the embedded SQLite file is on disk before it is acknowledged (group
    /// commit, `db/durable.rs`). Off, a crash of the host loses the writes since the last
    /// checkpoint. No effect on MySQL.
    pub sqlite_durable: bool,
    /// Start on a new, empty SQLite file although traces of a former one (its lock file or WAL)
    /// show that the file was there and is gone.
    pub recreate: bool,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct TransportConfig {
    /// `local` (in-process, all-in-one) or `amqp://user:pass@host:5672/%2f` (multi-host).
    pub url: String,
    /// Prefix of every queue name, so that several deployments (or tests) share one broker.
    pub prefix: String,
    /// How long the API waits for a conductor's answer.
    #[serde(with = "seconds")]
    pub rpc_timeout: Duration,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ApiConfig {
    /// `host:port`; a host name (`localhost`) is resolved at start ([`parse_bind`]).
    #[serde(deserialize_with = "bind_address")]
    pub bind: SocketAddr,
    /// How long the API trusts its view of the online conductors before reading it again.
    #[serde(with = "seconds")]
    pub hash_ring_reset_interval: Duration,
    /// How long a client may take to send a request's head (line and headers) before its
    /// connection is closed; also how long an idle keep-alive connection stays open.
    #[serde(with = "seconds")]
    pub header_read_timeout: Duration,
    /// Lookup finds only nodes in states where an agent is expected (Ironic's
    /// `[api]restrict_lookup`).
    pub restrict_lookup: bool,
    /// How often the agent is told to heartbeat at the latest (`[api]ramdisk_heartbeat_timeout`).
    #[serde(with = "seconds")]
    pub ramdisk_heartbeat_timeout: Duration,
    /// Who may use the API (Ironic's `[DEFAULT]auth_strategy`; Ironic's default, `keystone`,
    /// is not built).
    pub auth_strategy: AuthStrategy,
    /// The Apache htpasswd file of `http_basic`: `user:<bcrypt hash>` lines (Ironic's
    /// `[DEFAULT]http_basic_auth_user_file`), read once at start.
    pub http_basic_auth_user_file: PathBuf,
    /// Serve HTTPS with `cert_file` and `key_file` (PEM) instead of HTTP (Ironic's
    /// `[api]enable_ssl_api`, `cert_file`, `key_file`).
    pub enable_ssl_api: bool,
    pub cert_file: Option<PathBuf>,
    pub key_file: Option<PathBuf>,
    /// The lowest TLS version served (Ironic's `[api]tls_minimum_version`): `1.2` or `1.3`.
    pub tls_minimum_version: TlsVersion,
    /// The noVNC page a graphical console's `console_info` links to (Ironic's
    /// `[vnc]public_url`; unset, the link starts with `None`, as Ironic's).
    pub vnc_public_url: Option<String>,
}

/// Who may use the API ([`ApiConfig::auth_strategy`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "snake_case")]
pub enum AuthStrategy {
    /// Anyone who reaches the port.
    Noauth,
    /// HTTP Basic against the bcrypt entries of `http_basic_auth_user_file`.
    #[value(name = "http_basic")]
    HttpBasic,
}

/// The lowest TLS version the API accepts ([`ApiConfig::tls_minimum_version`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, clap::ValueEnum)]
pub enum TlsVersion {
    #[serde(rename = "1.2")]
    #[value(name = "1.2")]
    V1_2,
    #[serde(rename = "1.3")]
    #[value(name = "1.3")]
    V1_3,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ConductorConfig {
    /// The name this conductor registers, routes by and writes into `nodes.reservation`.
    pub host: String,
    /// The conductor group this conductor serves: it gets only nodes of the same
    /// `conductor_group` (API 1.46). Stored lower-cased; `""` is the default group.
    pub conductor_group: String,
    /// Clean nodes on provide and tear-down unless a node's `automated_clean` says otherwise.
    pub automated_clean: bool,
    /// Power a node off when its agent fails its deploy or the deploy times out waiting for
    /// the agent, so that a failed node does not stay up in its ramdisk (Ironic's
    /// `[deploy]power_off_after_deploy_failure`).
    pub power_off_after_deploy_failure: bool,
    /// Provisioning work running at once; beyond it requests get NoFreeConductorWorker (503).
    pub workers: usize,
    /// RPC requests handled at once (they are short: lock, check, write, reply).
    pub rpc_in_flight: usize,
    pub lock_retry_attempts: u32,
    #[serde(with = "seconds")]
    pub lock_retry_interval: Duration,
    #[serde(with = "seconds")]
    pub heartbeat_interval: Duration,
    /// A conductor not heard from for this long is offline: out of the hash ring.
    #[serde(with = "seconds")]
    pub heartbeat_timeout: Duration,
    /// On shutdown, how long in-flight work may run before it is failed.
    #[serde(with = "seconds")]
    pub graceful_shutdown_timeout: Duration,
    /// How long each method of the fake vendor interface takes (Ironic's `[fake]vendor_delay`):
    /// an asynchronous one holds the node's lock for this long, so that it can be seen.
    #[serde(with = "seconds")]
    pub fake_vendor_delay: Duration,
    /// How long a deploy may wait for its agent in `wait call-back` (one wait: the agent's
    /// first heartbeat, or one command) before it fails (Ironic's
    /// `[conductor]deploy_callback_timeout`).
    #[serde(with = "seconds")]
    pub deploy_callback_timeout: Duration,
    /// How long a cleaning may wait for its agent in `clean wait` (one wait: the agent's first
    /// heartbeat, or one clean step) before it fails (Ironic's
    /// `[conductor]clean_callback_timeout`).
    #[serde(with = "seconds")]
    pub clean_callback_timeout: Duration,
    /// The priority automated cleaning gives the agent's `erase_devices` and
    /// `erase_devices_metadata` steps instead of the agent's own (10 and 99); 0 leaves a step
    /// out (Ironic's `[deploy]erase_devices_priority`, `erase_devices_metadata_priority`).
    pub erase_devices_priority: Option<u32>,
    pub erase_devices_metadata_priority: Option<u32>,
    /// How long an inspection may wait in `inspect wait` for the agent's data before it fails
    /// (Ironic's `[conductor]inspect_wait_timeout`).
    #[serde(with = "seconds")]
    pub inspect_wait_timeout: Duration,
    /// The hooks run over an agent inspection's data, in order (Ironic's `[inspector]hooks`;
    /// those Ferrum has are `conductor::inspection::HOOKS`).
    pub inspection_hooks: Vec<String>,
    /// How often nodes waiting for their agent are checked against the callback timeout
    /// (Ironic's `[conductor]check_provision_state_interval`).
    #[serde(with = "seconds")]
    pub check_provision_state_interval: Duration,
    /// Whether the agent writes a raw image while it downloads it (Ironic's
    /// `[agent]stream_raw_images`).
    pub stream_raw_images: bool,
    /// After asking the agent to power the node off, how often its power state is read before
    /// it is forced off (Ironic's `[agent]post_deploy_get_power_state_retries`), and how far
    /// apart (`..._retry_interval`).
    pub agent_power_off_retries: u32,
    #[serde(with = "seconds")]
    pub agent_power_off_retry_interval: Duration,
    /// How many history entries (API 1.78) a node keeps, the oldest removed as a new one is
    /// recorded; 0 records none (Ironic's `[conductor]node_history_max_entries`).
    pub node_history_max_entries: u32,
    /// Where the agent downloads an instance image from: `http`, the image's own URL, or
    /// `local`, a raw copy the conductor downloads, checks, converts and publishes under
    /// `http_root` at `http_url` (Ironic's `[agent]image_download_source`, always with
    /// `[DEFAULT]force_raw_images`); a node's `instance_info` or `driver_info`
    /// `image_download_source` overrides it (`drivers::local_image`).
    pub image_download_source: ImageDownloadSource,
    /// The directory the conductor publishes local images in (Ironic's `[deploy]http_root`).
    pub http_root: std::path::PathBuf,
    /// The URL of `http_root` as the deploy ramdisk reaches it (Ironic's `[deploy]http_url`);
    /// needed for `local` images.
    pub http_url: Option<String>,
    /// Where the conductor serves `http_root` itself (GET of files only); unset, another web
    /// server must serve it at `http_url`. A host name is resolved as `api.bind`'s.
    #[serde(deserialize_with = "optional_bind_address")]
    pub http_bind: Option<SocketAddr>,
    /// Where a `ferrum conductor` process serves its Prometheus metrics (`GET /metrics`);
    /// unset, none. All-in-one ignores it: the API's `/metrics` covers its conductor. A host
    /// name is resolved as `api.bind`'s.
    #[serde(deserialize_with = "optional_bind_address")]
    pub metrics_bind: Option<SocketAddr>,
    /// The hardware types this conductor offers (Ironic's `[DEFAULT]enabled_hardware_types`;
    /// Ferrum builds `fake-hardware` and `redfish`).
    pub enabled_hardware_types: Vec<String>,
    /// How long a power change may take before it fails, unless the request gives its own
    /// timeout (Ironic's `[conductor]power_state_change_timeout`), and a soft one
    /// (`[conductor]soft_power_off_timeout`).
    #[serde(with = "seconds")]
    pub power_state_change_timeout: Duration,
    #[serde(with = "seconds")]
    pub soft_power_off_timeout: Duration,
    /// Attempts of a Redfish GET that cannot connect or is answered 503, and the pause between
    /// them (Ironic's `[redfish]connection_attempts`, `connection_retry_interval`).
    pub redfish_connection_attempts: u32,
    #[serde(with = "seconds")]
    pub redfish_connection_retry_interval: Duration,
    /// How often the power state of the nodes this conductor owns is read from their hardware
    /// and compared with the recorded one; 0 turns the sync off (Ironic's
    /// `[conductor]sync_power_state_interval`).
    #[serde(with = "seconds")]
    pub sync_power_state_interval: Duration,
    /// On a mismatch, put the hardware back into the recorded state (true) or record the
    /// hardware's state (false) (Ironic's `[conductor]force_power_state_during_sync`).
    pub force_power_state_during_sync: bool,
    /// Rounds in a row a node may fail its sync (its BMC unreachable, or a mismatch that does
    /// not go away) before it is put into maintenance with the fault `power failure` (Ironic's
    /// `[conductor]power_state_sync_max_retries`).
    pub power_state_sync_max_retries: u32,
    /// Nodes synced at once by this conductor, all BMCs together (Ironic's
    /// `[conductor]sync_power_state_workers`).
    pub sync_power_state_workers: usize,
    /// Nodes synced at once by this conductor on one BMC (its scheme, host and port), so that a
    /// BMC serving many systems, or a chassis manager, is not flooded (Ferrum's own).
    pub sync_power_state_workers_per_bmc: usize,
    /// How often the nodes put into maintenance for a `power failure` are asked for their power
    /// state again, and taken out of maintenance when they answer; 0 turns it off (Ironic's
    /// `[conductor]power_failure_recovery_interval`).
    #[serde(with = "seconds")]
    pub power_failure_recovery_interval: Duration,
    /// The interfaces of each kind this conductor enables, by name (Ironic's
    /// `[DEFAULT]enabled_<kind>_interfaces`): a node may name only these, and a hardware type
    /// offers those of them it supports. Unset (or empty): every interface Ferrum builds for
    /// the enabled hardware types (Ironic's defaults name interfaces Ferrum does not build).
    pub enabled_bios_interfaces: Option<Vec<String>>,
    pub enabled_boot_interfaces: Option<Vec<String>>,
    pub enabled_console_interfaces: Option<Vec<String>>,
    pub enabled_deploy_interfaces: Option<Vec<String>>,
    pub enabled_firmware_interfaces: Option<Vec<String>>,
    pub enabled_inspect_interfaces: Option<Vec<String>>,
    pub enabled_management_interfaces: Option<Vec<String>>,
    pub enabled_network_interfaces: Option<Vec<String>>,
    pub enabled_power_interfaces: Option<Vec<String>>,
    pub enabled_raid_interfaces: Option<Vec<String>>,
    pub enabled_rescue_interfaces: Option<Vec<String>>,
    pub enabled_storage_interfaces: Option<Vec<String>>,
    pub enabled_vendor_interfaces: Option<Vec<String>>,
    /// The interface of each kind a node gets when it names none (Ironic's
    /// `[DEFAULT]default_<kind>_interface`); it must be enabled and supported by every enabled
    /// hardware type. Unset: each hardware type's first enabled one.
    pub default_bios_interface: Option<String>,
    pub default_boot_interface: Option<String>,
    pub default_console_interface: Option<String>,
    pub default_deploy_interface: Option<String>,
    pub default_firmware_interface: Option<String>,
    pub default_inspect_interface: Option<String>,
    pub default_management_interface: Option<String>,
    pub default_network_interface: Option<String>,
    pub default_power_interface: Option<String>,
    pub default_raid_interface: Option<String>,
    pub default_rescue_interface: Option<String>,
    pub default_storage_interface: Option<String>,
    pub default_vendor_interface: Option<String>,
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

/// Where the agent downloads an instance image from ([`ConductorConfig::image_download_source`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ImageDownloadSource {
    Http,
    Local,
}

impl ImageDownloadSource {
    pub fn parse(name: &str) -> Option<ImageDownloadSource> {
        match name {
            "http" => Some(ImageDownloadSource::Http),
            "local" => Some(ImageDownloadSource::Local),
            _ => None,
        }
    }
}

impl std::str::FromStr for ImageDownloadSource {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        ImageDownloadSource::parse(s).ok_or_else(|| format!("expected http or local, not {s:?}"))
    }
}

/// Versioned notifications (`[notifications]`), Ironic's `[DEFAULT]notification_level`,
/// `[oslo_messaging_notifications]transport_url`, `control_exchange` and
/// `versioned_notifications_topics`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct NotificationsConfig {
    /// The lowest level sent (`debug`, `info`, `warning`, `error`, `critical`); unset, the
    /// default as in Ironic, sends none.
    pub level: Option<crate::notifications::Level>,
    /// The broker notifications go to; unset, the RPC transport's when it is AMQP.
    pub transport_url: Option<String>,
    /// The topic exchange (Ironic's `control_exchange`).
    pub exchange: String,
    /// The routing key's first part; messages go to `<topic>.<priority>`.
    pub topic: String,
    /// Notifications waiting for the publisher; beyond it (the broker is away or slow) new ones
    /// are dropped, counted and logged, and the operation that emitted them goes on.
    pub queue_size: usize,
    /// Without a broker (all-in-one on the in-process transport, no `transport_url`):
    /// `log` writes them to the log at their level, `off` drops them.
    pub without_broker: WithoutBroker,
    /// At a graceful stop, how long the publisher may take to send what is still queued
    /// (notifications and watch events); what is left then is lost, and logged.
    #[serde(with = "seconds")]
    pub flush_timeout: Duration,
}

/// The node event stream of `GET /ferrum/v1/watch` (`[watch]`; beyond Ironic).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct WatchConfig {
    /// Off, the endpoint answers 404 and conductors publish no watch events. Unset: on in
    /// all-in-one (an in-process hub, nearly free), off for `ferrum api` and `ferrum conductor`,
    /// where every conductor publishes every node event to RabbitMQ whether anyone watches or
    /// not (about a sixth of the deploy rate of the 2-core benchmark machine).
    pub enabled: Option<bool>,
    /// Events buffered for one client; a client that falls this far behind loses the oldest
    /// and is told how many (a `lagged` event). Nothing ever waits for a client.
    pub client_buffer: usize,
    /// How often an idle stream gets a keep-alive comment.
    #[serde(with = "seconds")]
    pub keepalive: Duration,
}

impl WatchConfig {
    /// Whether the watch is on in a process of this kind (see `enabled`).
    pub fn is_on(&self, all_in_one: bool) -> bool {
        self.enabled.unwrap_or(all_in_one)
    }
}

impl Default for WatchConfig {
    fn default() -> Self {
        WatchConfig {
            enabled: None,
            client_buffer: 1024,
            keepalive: Duration::from_secs(15),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum WithoutBroker {
    Log,
    Off,
}

impl Default for NotificationsConfig {
    fn default() -> Self {
        NotificationsConfig {
            level: None,
            transport_url: None,
            exchange: "ironic".to_owned(),
            topic: "ironic_versioned_notifications".to_owned(),
            queue_size: 10_000,
            without_broker: WithoutBroker::Log,
            flush_timeout: Duration::from_secs(5),
        }
    }
}

impl Default for DatabaseConfig {
    fn default() -> Self {
        DatabaseConfig {
            url: "sqlite://ferrum.sqlite".to_owned(),
            pool_size: 16,
            sqlite_durable: true,
            recreate: false,
        }
    }
}

impl Default for TransportConfig {
    fn default() -> Self {
        TransportConfig {
            url: "local".to_owned(),
            prefix: "ferrum".to_owned(),
            rpc_timeout: Duration::from_secs(60),
        }
    }
}

impl TransportConfig {
    /// The in-process transport: API and conductor in one process.
    pub fn is_local(&self) -> bool {
        self.url == "local"
    }
}

impl Default for ApiConfig {
    fn default() -> Self {
        ApiConfig {
            bind: SocketAddr::from(([127, 0, 0, 1], 6385)),
            hash_ring_reset_interval: Duration::from_secs(15),
            // A client dripping its headers holds a connection for 10 s at most; it is also how
            // long an idle keep-alive connection stays open.
            header_read_timeout: Duration::from_secs(10),
            restrict_lookup: true,
            ramdisk_heartbeat_timeout: Duration::from_secs(300),
            // Ironic's default is keystone, which Ferrum does not have; the banner says what
            // noauth means.
            auth_strategy: AuthStrategy::Noauth,
            http_basic_auth_user_file: PathBuf::from("/etc/ironic/htpasswd"),
            enable_ssl_api: false,
            cert_file: None,
            key_file: None,
            tls_minimum_version: TlsVersion::V1_3,
            vnc_public_url: None,
        }
    }
}

impl Default for ConductorConfig {
    fn default() -> Self {
        ConductorConfig {
            host: default_host_name(),
            conductor_group: String::new(),
            automated_clean: true,
            power_off_after_deploy_failure: true,
            workers: 300,
            rpc_in_flight: 64,
            lock_retry_attempts: 3,
            lock_retry_interval: Duration::from_secs(1),
            heartbeat_interval: Duration::from_secs(10),
            heartbeat_timeout: Duration::from_secs(60),
            graceful_shutdown_timeout: Duration::from_secs(60),
            fake_vendor_delay: Duration::ZERO,
            deploy_callback_timeout: Duration::from_secs(1800),
            clean_callback_timeout: Duration::from_secs(1800),
            erase_devices_priority: None,
            erase_devices_metadata_priority: None,
            inspect_wait_timeout: Duration::from_secs(1800),
            inspection_hooks: crate::conductor::inspection::HOOKS
                .iter()
                .map(|h| (*h).to_owned())
                .collect(),
            check_provision_state_interval: Duration::from_secs(60),
            stream_raw_images: true,
            agent_power_off_retries: 6,
            agent_power_off_retry_interval: Duration::from_secs(5),
            node_history_max_entries: crate::db::DEFAULT_HISTORY_MAX_ENTRIES,
            image_download_source: ImageDownloadSource::Http,
            http_root: std::path::PathBuf::from("ferrum-httpboot"),
            http_url: None,
            http_bind: None,
            metrics_bind: None,
            enabled_hardware_types: vec!["fake-hardware".to_owned(), "redfish".to_owned()],
            power_state_change_timeout: Duration::from_secs(60),
            soft_power_off_timeout: Duration::from_secs(600),
            redfish_connection_attempts: 5,
            redfish_connection_retry_interval: Duration::from_secs(4),
            sync_power_state_interval: Duration::from_secs(120),
            force_power_state_during_sync: true,
            power_state_sync_max_retries: 3,
            sync_power_state_workers: 8,
            sync_power_state_workers_per_bmc: 2,
            power_failure_recovery_interval: Duration::from_secs(300),
            enabled_bios_interfaces: None,
            enabled_boot_interfaces: None,
            enabled_console_interfaces: None,
            enabled_deploy_interfaces: None,
            enabled_firmware_interfaces: None,
            enabled_inspect_interfaces: None,
            enabled_management_interfaces: None,
            enabled_network_interfaces: None,
            enabled_power_interfaces: None,
            enabled_raid_interfaces: None,
            enabled_rescue_interfaces: None,
            enabled_storage_interfaces: None,
            enabled_vendor_interfaces: None,
            default_bios_interface: None,
            default_boot_interface: None,
            default_console_interface: None,
            default_deploy_interface: None,
            default_firmware_interface: None,
            default_inspect_interface: None,
            default_management_interface: None,
            default_network_interface: None,
            default_power_interface: None,
            default_raid_interface: None,
            default_rescue_interface: None,
            default_storage_interface: None,
            default_vendor_interface: None,
        }
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

/// Command-line flags, each also readable from its `FERRUM_*` variable. Every one is optional:
/// a value given here overrides the file.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct ConfigArgs {
    /// TOML configuration file.
    #[arg(long, env = "FERRUM_CONFIG")]
    pub config: Option<std::path::PathBuf>,
    #[arg(long, env = "FERRUM_DATABASE_URL")]
    pub database_url: Option<String>,
    #[arg(long, env = "FERRUM_DATABASE_POOL_SIZE")]
    pub database_pool_size: Option<usize>,
    /// Acknowledge a write to the embedded file only once it is on disk (`true`/`false`).
    #[arg(long, env = "FERRUM_DATABASE_SQLITE_DURABLE")]
    pub database_sqlite_durable: Option<bool>,
    /// Start on a new, empty database file although a former one is gone (`true`/`false`).
    #[arg(long, env = "FERRUM_DATABASE_RECREATE")]
    pub database_recreate: Option<bool>,
    #[arg(long, env = "FERRUM_TRANSPORT_URL")]
    pub transport_url: Option<String>,
    #[arg(long, env = "FERRUM_TRANSPORT_PREFIX")]
    pub transport_prefix: Option<String>,
    /// Seconds.
    #[arg(long, env = "FERRUM_RPC_TIMEOUT", value_parser = parse_seconds)]
    pub rpc_timeout: Option<Duration>,
    /// `host:port`; a host name is resolved.
    #[arg(long, env = "FERRUM_API_BIND", value_parser = parse_bind)]
    pub api_bind: Option<SocketAddr>,
    /// Seconds.
    #[arg(long, env = "FERRUM_API_HEADER_TIMEOUT", value_parser = parse_seconds)]
    pub api_header_timeout: Option<Duration>,
    #[arg(long, env = "FERRUM_AUTH_STRATEGY", value_enum)]
    pub auth_strategy: Option<AuthStrategy>,
    #[arg(long, env = "FERRUM_HTTP_BASIC_AUTH_USER_FILE")]
    pub http_basic_auth_user_file: Option<PathBuf>,
    /// `true` or `false`.
    #[arg(long, env = "FERRUM_ENABLE_SSL_API")]
    pub enable_ssl_api: Option<bool>,
    #[arg(long, env = "FERRUM_API_CERT_FILE")]
    pub api_cert_file: Option<PathBuf>,
    #[arg(long, env = "FERRUM_API_KEY_FILE")]
    pub api_key_file: Option<PathBuf>,
    #[arg(long, env = "FERRUM_API_TLS_MINIMUM_VERSION", value_enum)]
    pub api_tls_minimum_version: Option<TlsVersion>,
    #[arg(long, env = "FERRUM_CONDUCTOR_HOST")]
    pub conductor_host: Option<String>,
    #[arg(long, env = "FERRUM_CONDUCTOR_GROUP")]
    pub conductor_group: Option<String>,
    #[arg(long, env = "FERRUM_CONDUCTOR_WORKERS", value_parser = clap::value_parser!(u32).range(1..))]
    pub conductor_workers: Option<u32>,
    #[arg(long, env = "FERRUM_LOCK_RETRY_ATTEMPTS", value_parser = clap::value_parser!(u32).range(1..))]
    pub lock_retry_attempts: Option<u32>,
    /// Seconds.
    #[arg(long, env = "FERRUM_LOCK_RETRY_INTERVAL", value_parser = parse_seconds)]
    pub lock_retry_interval: Option<Duration>,
    /// Seconds.
    #[arg(long, env = "FERRUM_HEARTBEAT_INTERVAL", value_parser = parse_seconds)]
    pub heartbeat_interval: Option<Duration>,
    /// Seconds.
    #[arg(long, env = "FERRUM_HEARTBEAT_TIMEOUT", value_parser = parse_seconds)]
    pub heartbeat_timeout: Option<Duration>,
    /// Seconds.
    #[arg(long, env = "FERRUM_GRACEFUL_SHUTDOWN_TIMEOUT", value_parser = parse_seconds)]
    pub graceful_shutdown_timeout: Option<Duration>,
    /// Seconds.
    #[arg(long, env = "FERRUM_FAKE_VENDOR_DELAY", value_parser = parse_seconds)]
    pub fake_vendor_delay: Option<Duration>,
    /// Seconds.
    #[arg(long, env = "FERRUM_DEPLOY_CALLBACK_TIMEOUT", value_parser = parse_seconds)]
    pub deploy_callback_timeout: Option<Duration>,
    /// Seconds.
    #[arg(long, env = "FERRUM_CLEAN_CALLBACK_TIMEOUT", value_parser = parse_seconds)]
    pub clean_callback_timeout: Option<Duration>,
    /// Clean nodes on provide and tear-down (`true`/`false`) unless a node says otherwise.
    #[arg(long, env = "FERRUM_AUTOMATED_CLEAN")]
    pub automated_clean: Option<bool>,
    /// Power a node off after its agent deploy failed (`true`/`false`).
    #[arg(long, env = "FERRUM_POWER_OFF_AFTER_DEPLOY_FAILURE")]
    pub power_off_after_deploy_failure: Option<bool>,
    #[arg(long, env = "FERRUM_ERASE_DEVICES_PRIORITY")]
    pub erase_devices_priority: Option<u32>,
    #[arg(long, env = "FERRUM_ERASE_DEVICES_METADATA_PRIORITY")]
    pub erase_devices_metadata_priority: Option<u32>,
    /// Seconds.
    #[arg(long, env = "FERRUM_INSPECT_WAIT_TIMEOUT", value_parser = parse_seconds)]
    pub inspect_wait_timeout: Option<Duration>,
    /// Comma-separated hook names.
    #[arg(long, env = "FERRUM_INSPECTION_HOOKS", value_delimiter = ',')]
    pub inspection_hooks: Option<Vec<String>>,
    /// Seconds.
    #[arg(long, env = "FERRUM_CHECK_PROVISION_STATE_INTERVAL", value_parser = parse_seconds)]
    pub check_provision_state_interval: Option<Duration>,
    #[arg(long, env = "FERRUM_AGENT_POWER_OFF_RETRIES")]
    pub agent_power_off_retries: Option<u32>,
    /// Seconds.
    #[arg(long, env = "FERRUM_AGENT_POWER_OFF_RETRY_INTERVAL", value_parser = parse_seconds)]
    pub agent_power_off_retry_interval: Option<Duration>,
    #[arg(long, env = "FERRUM_NODE_HISTORY_MAX_ENTRIES")]
    pub node_history_max_entries: Option<u32>,
    /// `http` or `local`.
    #[arg(long, env = "FERRUM_IMAGE_DOWNLOAD_SOURCE")]
    pub image_download_source: Option<ImageDownloadSource>,
    #[arg(long, env = "FERRUM_HTTP_ROOT")]
    pub http_root: Option<std::path::PathBuf>,
    #[arg(long, env = "FERRUM_HTTP_URL")]
    pub http_url: Option<String>,
    #[arg(long, env = "FERRUM_HTTP_BIND", value_parser = parse_bind)]
    pub http_bind: Option<SocketAddr>,
    #[arg(long, env = "FERRUM_CONDUCTOR_METRICS_BIND", value_parser = parse_bind)]
    pub conductor_metrics_bind: Option<SocketAddr>,
    /// Comma-separated hardware type names.
    #[arg(long, env = "FERRUM_ENABLED_HARDWARE_TYPES", value_delimiter = ',')]
    pub enabled_hardware_types: Option<Vec<String>>,
    /// Seconds.
    #[arg(long, env = "FERRUM_POWER_STATE_CHANGE_TIMEOUT", value_parser = parse_seconds)]
    pub power_state_change_timeout: Option<Duration>,
    /// Seconds.
    #[arg(long, env = "FERRUM_SOFT_POWER_OFF_TIMEOUT", value_parser = parse_seconds)]
    pub soft_power_off_timeout: Option<Duration>,
    #[arg(long, env = "FERRUM_REDFISH_CONNECTION_ATTEMPTS", value_parser = clap::value_parser!(u32).range(1..))]
    pub redfish_connection_attempts: Option<u32>,
    /// Seconds.
    #[arg(long, env = "FERRUM_REDFISH_CONNECTION_RETRY_INTERVAL", value_parser = parse_seconds)]
    pub redfish_connection_retry_interval: Option<Duration>,
    /// Seconds; 0 turns the power-state sync off.
    #[arg(long, env = "FERRUM_SYNC_POWER_STATE_INTERVAL", value_parser = parse_seconds)]
    pub sync_power_state_interval: Option<Duration>,
    /// `true` or `false`.
    #[arg(long, env = "FERRUM_FORCE_POWER_STATE_DURING_SYNC")]
    pub force_power_state_during_sync: Option<bool>,
    #[arg(long, env = "FERRUM_POWER_STATE_SYNC_MAX_RETRIES")]
    pub power_state_sync_max_retries: Option<u32>,
    #[arg(long, env = "FERRUM_SYNC_POWER_STATE_WORKERS", value_parser = clap::value_parser!(u32).range(1..))]
    pub sync_power_state_workers: Option<u32>,
    #[arg(long, env = "FERRUM_SYNC_POWER_STATE_WORKERS_PER_BMC", value_parser = clap::value_parser!(u32).range(1..))]
    pub sync_power_state_workers_per_bmc: Option<u32>,
    /// Seconds; 0 turns the recovery off.
    #[arg(long, env = "FERRUM_POWER_FAILURE_RECOVERY_INTERVAL", value_parser = parse_seconds)]
    pub power_failure_recovery_interval: Option<Duration>,
    /// Comma-separated bios interface names.
    #[arg(long, env = "FERRUM_ENABLED_BIOS_INTERFACES", value_delimiter = ',')]
    pub enabled_bios_interfaces: Option<Vec<String>>,
    #[arg(long, env = "FERRUM_DEFAULT_BIOS_INTERFACE")]
    pub default_bios_interface: Option<String>,
    /// Comma-separated boot interface names.
    #[arg(long, env = "FERRUM_ENABLED_BOOT_INTERFACES", value_delimiter = ',')]
    pub enabled_boot_interfaces: Option<Vec<String>>,
    #[arg(long, env = "FERRUM_DEFAULT_BOOT_INTERFACE")]
    pub default_boot_interface: Option<String>,
    /// Comma-separated console interface names.
    #[arg(long, env = "FERRUM_ENABLED_CONSOLE_INTERFACES", value_delimiter = ',')]
    pub enabled_console_interfaces: Option<Vec<String>>,
    #[arg(long, env = "FERRUM_DEFAULT_CONSOLE_INTERFACE")]
    pub default_console_interface: Option<String>,
    /// Comma-separated deploy interface names.
    #[arg(long, env = "FERRUM_ENABLED_DEPLOY_INTERFACES", value_delimiter = ',')]
    pub enabled_deploy_interfaces: Option<Vec<String>>,
    #[arg(long, env = "FERRUM_DEFAULT_DEPLOY_INTERFACE")]
    pub default_deploy_interface: Option<String>,
    /// Comma-separated firmware interface names.
    #[arg(
        long,
        env = "FERRUM_ENABLED_FIRMWARE_INTERFACES",
        value_delimiter = ','
    )]
    pub enabled_firmware_interfaces: Option<Vec<String>>,
    #[arg(long, env = "FERRUM_DEFAULT_FIRMWARE_INTERFACE")]
    pub default_firmware_interface: Option<String>,
    /// Comma-separated inspect interface names.
    #[arg(long, env = "FERRUM_ENABLED_INSPECT_INTERFACES", value_delimiter = ',')]
    pub enabled_inspect_interfaces: Option<Vec<String>>,
    #[arg(long, env = "FERRUM_DEFAULT_INSPECT_INTERFACE")]
    pub default_inspect_interface: Option<String>,
    /// Comma-separated management interface names.
    #[arg(
        long,
        env = "FERRUM_ENABLED_MANAGEMENT_INTERFACES",
        value_delimiter = ','
    )]
    pub enabled_management_interfaces: Option<Vec<String>>,
    #[arg(long, env = "FERRUM_DEFAULT_MANAGEMENT_INTERFACE")]
    pub default_management_interface: Option<String>,
    /// Comma-separated network interface names.
    #[arg(long, env = "FERRUM_ENABLED_NETWORK_INTERFACES", value_delimiter = ',')]
    pub enabled_network_interfaces: Option<Vec<String>>,
    #[arg(long, env = "FERRUM_DEFAULT_NETWORK_INTERFACE")]
    pub default_network_interface: Option<String>,
    /// Comma-separated power interface names.
    #[arg(long, env = "FERRUM_ENABLED_POWER_INTERFACES", value_delimiter = ',')]
    pub enabled_power_interfaces: Option<Vec<String>>,
    #[arg(long, env = "FERRUM_DEFAULT_POWER_INTERFACE")]
    pub default_power_interface: Option<String>,
    /// Comma-separated raid interface names.
    #[arg(long, env = "FERRUM_ENABLED_RAID_INTERFACES", value_delimiter = ',')]
    pub enabled_raid_interfaces: Option<Vec<String>>,
    #[arg(long, env = "FERRUM_DEFAULT_RAID_INTERFACE")]
    pub default_raid_interface: Option<String>,
    /// Comma-separated rescue interface names.
    #[arg(long, env = "FERRUM_ENABLED_RESCUE_INTERFACES", value_delimiter = ',')]
    pub enabled_rescue_interfaces: Option<Vec<String>>,
    #[arg(long, env = "FERRUM_DEFAULT_RESCUE_INTERFACE")]
    pub default_rescue_interface: Option<String>,
    /// Comma-separated storage interface names.
    #[arg(long, env = "FERRUM_ENABLED_STORAGE_INTERFACES", value_delimiter = ',')]
    pub enabled_storage_interfaces: Option<Vec<String>>,
    #[arg(long, env = "FERRUM_DEFAULT_STORAGE_INTERFACE")]
    pub default_storage_interface: Option<String>,
    /// Comma-separated vendor interface names.
    #[arg(long, env = "FERRUM_ENABLED_VENDOR_INTERFACES", value_delimiter = ',')]
    pub enabled_vendor_interfaces: Option<Vec<String>>,
    #[arg(long, env = "FERRUM_DEFAULT_VENDOR_INTERFACE")]
    pub default_vendor_interface: Option<String>,
    /// debug, info, warning, error or critical; unset sends no notifications.
    #[arg(long, env = "FERRUM_NOTIFICATION_LEVEL", value_parser = parse_level)]
    pub notification_level: Option<crate::notifications::Level>,
    #[arg(long, env = "FERRUM_NOTIFICATION_TRANSPORT_URL")]
    pub notification_transport_url: Option<String>,
    #[arg(long, env = "FERRUM_NOTIFICATION_EXCHANGE")]
    pub notification_exchange: Option<String>,
    #[arg(long, env = "FERRUM_NOTIFICATION_TOPIC")]
    pub notification_topic: Option<String>,
    #[arg(long, env = "FERRUM_NOTIFICATION_QUEUE_SIZE")]
    pub notification_queue_size: Option<usize>,
    #[arg(long, env = "FERRUM_NOTIFICATION_WITHOUT_BROKER", value_enum)]
    pub notification_without_broker: Option<WithoutBroker>,
    /// Seconds.
    #[arg(long, env = "FERRUM_NOTIFICATION_FLUSH_TIMEOUT", value_parser = parse_seconds)]
    pub notification_flush_timeout: Option<Duration>,
    /// true or false.
    #[arg(long, env = "FERRUM_WATCH_ENABLED", action = clap::ArgAction::Set,
          value_parser = clap::builder::BoolishValueParser::new())]
    pub watch_enabled: Option<bool>,
    #[arg(long, env = "FERRUM_WATCH_CLIENT_BUFFER")]
    pub watch_client_buffer: Option<usize>,
    /// Seconds.
    #[arg(long, env = "FERRUM_WATCH_KEEPALIVE", value_parser = parse_seconds)]
    pub watch_keepalive: Option<Duration>,
}

fn parse_level(s: &str) -> Result<crate::notifications::Level, String> {
    s.parse()
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
    #[error("bad configuration value {name}: {reason}")]
    Invalid { name: &'static str, reason: String },
}

impl Config {
    /// Defaults, then the file named by `--config`/`FERRUM_CONFIG`, then env and flags.
    pub fn load(args: &ConfigArgs) -> Result<Config, ConfigError> {
        let mut config = match &args.config {
            Some(path) => Config::from_file(path)?,
            None => Config::default(),
        };
        config.apply(args);
        config.validate()?;
        Ok(config)
    }

    pub fn from_file(path: &Path) -> Result<Config, ConfigError> {
        let shown = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            path: shown.clone(),
            source,
        })?;
        toml::from_str(&text).map_err(|source| ConfigError::Parse {
            path: shown,
            source: Box::new(source),
        })
    }

    fn apply(&mut self, a: &ConfigArgs) {
        fn set<T: Clone>(slot: &mut T, value: &Option<T>) {
            if let Some(v) = value {
                *slot = v.clone();
            }
        }
        set(&mut self.database.url, &a.database_url);
        set(&mut self.database.pool_size, &a.database_pool_size);
        set(
            &mut self.database.sqlite_durable,
            &a.database_sqlite_durable,
        );
        set(&mut self.database.recreate, &a.database_recreate);
        set(&mut self.transport.url, &a.transport_url);
        set(&mut self.transport.prefix, &a.transport_prefix);
        set(&mut self.transport.rpc_timeout, &a.rpc_timeout);
        set(&mut self.api.bind, &a.api_bind);
        set(&mut self.api.header_read_timeout, &a.api_header_timeout);
        set(&mut self.api.auth_strategy, &a.auth_strategy);
        set(
            &mut self.api.http_basic_auth_user_file,
            &a.http_basic_auth_user_file,
        );
        set(&mut self.api.enable_ssl_api, &a.enable_ssl_api);
        if a.api_cert_file.is_some() {
            self.api.cert_file = a.api_cert_file.clone();
        }
        if a.api_key_file.is_some() {
            self.api.key_file = a.api_key_file.clone();
        }
        set(
            &mut self.api.tls_minimum_version,
            &a.api_tls_minimum_version,
        );
        set(&mut self.conductor.host, &a.conductor_host);
        set(&mut self.conductor.conductor_group, &a.conductor_group);
        set(
            &mut self.conductor.workers,
            &a.conductor_workers.map(|w| w as usize),
        );
        set(
            &mut self.conductor.lock_retry_attempts,
            &a.lock_retry_attempts,
        );
        set(
            &mut self.conductor.lock_retry_interval,
            &a.lock_retry_interval,
        );
        set(
            &mut self.conductor.heartbeat_interval,
            &a.heartbeat_interval,
        );
        set(&mut self.conductor.heartbeat_timeout, &a.heartbeat_timeout);
        set(
            &mut self.conductor.graceful_shutdown_timeout,
            &a.graceful_shutdown_timeout,
        );
        set(&mut self.conductor.fake_vendor_delay, &a.fake_vendor_delay);
        set(
            &mut self.conductor.deploy_callback_timeout,
            &a.deploy_callback_timeout,
        );
        set(
            &mut self.conductor.clean_callback_timeout,
            &a.clean_callback_timeout,
        );
        set(&mut self.conductor.automated_clean, &a.automated_clean);
        set(
            &mut self.conductor.power_off_after_deploy_failure,
            &a.power_off_after_deploy_failure,
        );
        if a.erase_devices_priority.is_some() {
            self.conductor.erase_devices_priority = a.erase_devices_priority;
        }
        if a.erase_devices_metadata_priority.is_some() {
            self.conductor.erase_devices_metadata_priority = a.erase_devices_metadata_priority;
        }
        set(
            &mut self.conductor.inspect_wait_timeout,
            &a.inspect_wait_timeout,
        );
        set(&mut self.conductor.inspection_hooks, &a.inspection_hooks);
        set(
            &mut self.conductor.check_provision_state_interval,
            &a.check_provision_state_interval,
        );
        set(
            &mut self.conductor.agent_power_off_retries,
            &a.agent_power_off_retries,
        );
        set(
            &mut self.conductor.agent_power_off_retry_interval,
            &a.agent_power_off_retry_interval,
        );
        set(
            &mut self.conductor.node_history_max_entries,
            &a.node_history_max_entries,
        );
        set(
            &mut self.conductor.image_download_source,
            &a.image_download_source,
        );
        set(&mut self.conductor.http_root, &a.http_root);
        if a.http_url.is_some() {
            self.conductor.http_url = a.http_url.clone();
        }
        if a.http_bind.is_some() {
            self.conductor.http_bind = a.http_bind;
        }
        if a.conductor_metrics_bind.is_some() {
            self.conductor.metrics_bind = a.conductor_metrics_bind;
        }
        if let Some(types) = &a.enabled_hardware_types {
            self.conductor.enabled_hardware_types =
                types.iter().map(|t| t.trim().to_owned()).collect();
        }
        set(
            &mut self.conductor.power_state_change_timeout,
            &a.power_state_change_timeout,
        );
        set(
            &mut self.conductor.soft_power_off_timeout,
            &a.soft_power_off_timeout,
        );
        set(
            &mut self.conductor.redfish_connection_attempts,
            &a.redfish_connection_attempts,
        );
        set(
            &mut self.conductor.redfish_connection_retry_interval,
            &a.redfish_connection_retry_interval,
        );
        set(
            &mut self.conductor.sync_power_state_interval,
            &a.sync_power_state_interval,
        );
        set(
            &mut self.conductor.force_power_state_during_sync,
            &a.force_power_state_during_sync,
        );
        set(
            &mut self.conductor.power_state_sync_max_retries,
            &a.power_state_sync_max_retries,
        );
        set(
            &mut self.conductor.sync_power_state_workers,
            &a.sync_power_state_workers.map(|w| w as usize),
        );
        set(
            &mut self.conductor.sync_power_state_workers_per_bmc,
            &a.sync_power_state_workers_per_bmc.map(|w| w as usize),
        );
        set(
            &mut self.conductor.power_failure_recovery_interval,
            &a.power_failure_recovery_interval,
        );
        if let Some(names) = &a.enabled_bios_interfaces {
            self.conductor.enabled_bios_interfaces = Some(names.clone());
        }
        if a.default_bios_interface.is_some() {
            self.conductor.default_bios_interface = a.default_bios_interface.clone();
        }
        if let Some(names) = &a.enabled_boot_interfaces {
            self.conductor.enabled_boot_interfaces = Some(names.clone());
        }
        if a.default_boot_interface.is_some() {
            self.conductor.default_boot_interface = a.default_boot_interface.clone();
        }
        if let Some(names) = &a.enabled_console_interfaces {
            self.conductor.enabled_console_interfaces = Some(names.clone());
        }
        if a.default_console_interface.is_some() {
            self.conductor.default_console_interface = a.default_console_interface.clone();
        }
        if let Some(names) = &a.enabled_deploy_interfaces {
            self.conductor.enabled_deploy_interfaces = Some(names.clone());
        }
        if a.default_deploy_interface.is_some() {
            self.conductor.default_deploy_interface = a.default_deploy_interface.clone();
        }
        if let Some(names) = &a.enabled_firmware_interfaces {
            self.conductor.enabled_firmware_interfaces = Some(names.clone());
        }
        if a.default_firmware_interface.is_some() {
            self.conductor.default_firmware_interface = a.default_firmware_interface.clone();
        }
        if let Some(names) = &a.enabled_inspect_interfaces {
            self.conductor.enabled_inspect_interfaces = Some(names.clone());
        }
        if a.default_inspect_interface.is_some() {
            self.conductor.default_inspect_interface = a.default_inspect_interface.clone();
        }
        if let Some(names) = &a.enabled_management_interfaces {
            self.conductor.enabled_management_interfaces = Some(names.clone());
        }
        if a.default_management_interface.is_some() {
            self.conductor.default_management_interface = a.default_management_interface.clone();
        }
        if let Some(names) = &a.enabled_network_interfaces {
            self.conductor.enabled_network_interfaces = Some(names.clone());
        }
        if a.default_network_interface.is_some() {
            self.conductor.default_network_interface = a.default_network_interface.clone();
        }
        if let Some(names) = &a.enabled_power_interfaces {
            self.conductor.enabled_power_interfaces = Some(names.clone());
        }
        if a.default_power_interface.is_some() {
            self.conductor.default_power_interface = a.default_power_interface.clone();
        }
        if let Some(names) = &a.enabled_raid_interfaces {
            self.conductor.enabled_raid_interfaces = Some(names.clone());
        }
        if a.default_raid_interface.is_some() {
            self.conductor.default_raid_interface = a.default_raid_interface.clone();
        }
        if let Some(names) = &a.enabled_rescue_interfaces {
            self.conductor.enabled_rescue_interfaces = Some(names.clone());
        }
        if a.default_rescue_interface.is_some() {
            self.conductor.default_rescue_interface = a.default_rescue_interface.clone();
        }
        if let Some(names) = &a.enabled_storage_interfaces {
            self.conductor.enabled_storage_interfaces = Some(names.clone());
        }
        if a.default_storage_interface.is_some() {
            self.conductor.default_storage_interface = a.default_storage_interface.clone();
        }
        if let Some(names) = &a.enabled_vendor_interfaces {
            self.conductor.enabled_vendor_interfaces = Some(names.clone());
        }
        if a.default_vendor_interface.is_some() {
            self.conductor.default_vendor_interface = a.default_vendor_interface.clone();
        }
        let n = &mut self.notifications;
        if a.notification_level.is_some() {
            n.level = a.notification_level;
        }
        if a.notification_transport_url.is_some() {
            n.transport_url = a.notification_transport_url.clone();
        }
        set(&mut n.exchange, &a.notification_exchange);
        set(&mut n.topic, &a.notification_topic);
        set(&mut n.queue_size, &a.notification_queue_size);
        set(&mut n.without_broker, &a.notification_without_broker);
        set(&mut n.flush_timeout, &a.notification_flush_timeout);
        let w = &mut self.watch;
        if a.watch_enabled.is_some() {
            w.enabled = a.watch_enabled;
        }
        set(&mut w.client_buffer, &a.watch_client_buffer);
        set(&mut w.keepalive, &a.watch_keepalive);
    }

    pub fn validate(&self) -> Result<(), ConfigError> {
        let invalid = |name, reason: &str| {
            Err(ConfigError::Invalid {
                name,
                reason: reason.to_owned(),
            })
        };
        if crate::db::Backend::of_url(&self.database.url).is_none() {
            return invalid(
                "database.url",
                "expected sqlite://<file> or mysql://user@host/database",
            );
        }
        if self.database.pool_size == 0 {
            return invalid("database.pool_size", "must be at least 1");
        }
        if !(self.transport.is_local()
            || self.transport.url.starts_with("amqp://")
            || self.transport.url.starts_with("amqps://"))
        {
            return invalid("transport.url", "expected `local` or an amqp:// URL");
        }
        if self.transport.prefix.is_empty() || self.transport.prefix.contains(char::is_whitespace) {
            return invalid("transport.prefix", "must be non-empty, without spaces");
        }
        if self.transport.rpc_timeout.is_zero() {
            return invalid("transport.rpc_timeout", "must be above 0");
        }
        if self.api.header_read_timeout.is_zero() {
            return invalid("api.header_read_timeout", "must be above 0");
        }
        // As Ironic's wsgi_service: TLS needs both files (they are read at start).
        if self.api.enable_ssl_api && (self.api.cert_file.is_none() || self.api.key_file.is_none())
        {
            return invalid(
                "api.enable_ssl_api",
                "serving HTTPS needs api.cert_file and api.key_file",
            );
        }
        let host = &self.conductor.host;
        if host.is_empty() || host.len() > 255 || host.contains(char::is_whitespace) {
            return invalid("conductor.host", "must be 1-255 characters without spaces");
        }
        if crate::node::normalize_conductor_group(&self.conductor.conductor_group).is_err() {
            return invalid(
                "conductor.conductor_group",
                "may contain only letters, digits, '_', '-' and '.', at most 255 characters",
            );
        }
        if self.conductor.workers == 0 {
            return invalid("conductor.workers", "must be at least 1");
        }
        if self.conductor.rpc_in_flight == 0 {
            return invalid("conductor.rpc_in_flight", "must be at least 1");
        }
        if self.conductor.lock_retry_attempts == 0 {
            return invalid("conductor.lock_retry_attempts", "must be at least 1");
        }
        if self.conductor.heartbeat_interval.is_zero() {
            return invalid("conductor.heartbeat_interval", "must be above 0");
        }
        if self.conductor.heartbeat_timeout <= self.conductor.heartbeat_interval {
            return invalid(
                "conductor.heartbeat_timeout",
                "must be longer than conductor.heartbeat_interval",
            );
        }
        if self.conductor.clean_callback_timeout.is_zero() {
            return invalid("conductor.clean_callback_timeout", "must be above 0");
        }
        if self.conductor.deploy_callback_timeout.is_zero() {
            return invalid("conductor.deploy_callback_timeout", "must be above 0");
        }
        if self.conductor.inspect_wait_timeout.is_zero() {
            return invalid("conductor.inspect_wait_timeout", "must be above 0");
        }
        if let Some(unknown) = self.conductor.inspection_hooks.iter().find(|h| {
            !h.trim().is_empty() && !crate::conductor::inspection::HOOKS.contains(&h.trim())
        }) {
            return Err(ConfigError::Invalid {
                name: "conductor.inspection_hooks",
                reason: format!(
                    "unknown hook {unknown:?}; the hooks are {}",
                    crate::conductor::inspection::HOOKS.join(", ")
                ),
            });
        }
        let built = crate::drivers::Registry::BUILT;
        if let Some(unknown) = self
            .conductor
            .enabled_hardware_types
            .iter()
            .find(|t| !built.contains(&t.as_str()))
        {
            return Err(ConfigError::Invalid {
                name: "conductor.enabled_hardware_types",
                reason: format!(
                    "unknown hardware type {unknown:?}; Ferrum has {}",
                    built.join(", ")
                ),
            });
        }
        if self.conductor.enabled_hardware_types.is_empty() {
            return invalid(
                "conductor.enabled_hardware_types",
                "must name at least one hardware type",
            );
        }
        if let Err((key, reason)) = crate::drivers::Registry::check_config(&self.conductor) {
            return Err(ConfigError::Invalid {
                name: "conductor.enabled_*_interfaces",
                reason: format!("{key}: {reason}"),
            });
        }
        if self.conductor.power_state_change_timeout.is_zero()
            || self.conductor.soft_power_off_timeout.is_zero()
        {
            return invalid(
                "conductor.power_state_change_timeout",
                "power_state_change_timeout and soft_power_off_timeout must be above 0",
            );
        }
        if self.conductor.redfish_connection_attempts == 0 {
            return invalid(
                "conductor.redfish_connection_attempts",
                "must be at least 1",
            );
        }
        if self.conductor.sync_power_state_workers == 0 {
            return invalid("conductor.sync_power_state_workers", "must be at least 1");
        }
        if self.conductor.sync_power_state_workers_per_bmc == 0 {
            return invalid(
                "conductor.sync_power_state_workers_per_bmc",
                "must be at least 1",
            );
        }
        if self.conductor.check_provision_state_interval.is_zero() {
            return invalid(
                "conductor.check_provision_state_interval",
                "must be above 0",
            );
        }
        if let Some(url) = &self.conductor.http_url
            && !(url.starts_with("http://") || url.starts_with("https://"))
        {
            return invalid("conductor.http_url", "expected an http:// or https:// URL");
        }
        if self.conductor.image_download_source == ImageDownloadSource::Local
            && self.conductor.http_url.is_none()
        {
            return invalid(
                "conductor.image_download_source",
                "local needs conductor.http_url, where the deploy ramdisk downloads the images",
            );
        }
        let n = &self.notifications;
        if let Some(url) = &n.transport_url
            && !(url.starts_with("amqp://") || url.starts_with("amqps://"))
        {
            return invalid("notifications.transport_url", "expected an amqp:// URL");
        }
        if n.exchange.is_empty() || n.exchange.len() > 255 {
            return invalid("notifications.exchange", "must be 1-255 characters");
        }
        // The routing key and queue name `<topic>.critical` must fit AMQP's 255.
        if n.topic.is_empty() || n.topic.len() > 240 {
            return invalid("notifications.topic", "must be 1-240 characters");
        }
        if n.queue_size == 0 {
            return invalid("notifications.queue_size", "must be at least 1");
        }
        if self.watch.client_buffer == 0 {
            return invalid("watch.client_buffer", "must be at least 1");
        }
        if self.watch.keepalive.is_zero() {
            return invalid("watch.keepalive", "must be more than 0");
        }
        Ok(())
    }
}

/// A listening address, `host:port`: an IP address, or a host name (`localhost`) resolved now.
/// A name with both IPv4 and IPv6 addresses binds its first IPv4 one, which is what clients of
/// `localhost` try first on most systems.
pub fn parse_bind(s: &str) -> Result<SocketAddr, String> {
    if let Ok(addr) = s.parse::<SocketAddr>() {
        return Ok(addr);
    }
    if s.rsplit_once(':').is_none_or(|(host, _)| host.is_empty()) {
        return Err(format!("'{s}' is not host:port"));
    }
    let addrs: Vec<SocketAddr> = std::net::ToSocketAddrs::to_socket_addrs(s)
        .map_err(|e| format!("cannot resolve '{s}': {e}"))?
        .collect();
    addrs
        .iter()
        .find(|a| a.is_ipv4())
        .or(addrs.first())
        .copied()
        .ok_or_else(|| format!("'{s}' resolves to no address"))
}

fn bind_address<'de, D: serde::Deserializer<'de>>(d: D) -> Result<SocketAddr, D::Error> {
    let s = String::deserialize(d)?;
    parse_bind(&s).map_err(serde::de::Error::custom)
}

fn optional_bind_address<'de, D: serde::Deserializer<'de>>(
    d: D,
) -> Result<Option<SocketAddr>, D::Error> {
    match Option::<String>::deserialize(d)? {
        Some(s) => parse_bind(&s).map(Some).map_err(serde::de::Error::custom),
        None => Ok(None),
    }
}

/// A non-negative number of seconds, fractions allowed ("0.5").
pub fn parse_seconds(s: &str) -> Result<Duration, String> {
    let v: f64 = s
        .trim()
        .parse()
        .map_err(|_| format!("'{s}' is not a number of seconds"))?;
    Duration::try_from_secs_f64(v).map_err(|_| format!("'{s}' is not a non-negative duration"))
}

mod seconds {
    use std::time::Duration;

    use serde::{Deserialize, Deserializer};

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
        let v = f64::deserialize(d)?;
        Duration::try_from_secs_f64(v).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_then_flags() {
        let dir = std::env::temp_dir().join(format!("ferrum-config-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("ferrum.toml");
        std::fs::write(
            &path,
            "[conductor]\nhost = \"c1\"\nlock_retry_interval = 0.25\n[api]\nbind = \"127.0.0.1:7000\"\n",
        )
        .unwrap();
        let args = ConfigArgs {
            config: Some(path),
            conductor_host: Some("c2".into()),
            ..ConfigArgs::default()
        };
        let c = Config::load(&args).unwrap();
        assert_eq!(c.conductor.host, "c2");
        assert_eq!(c.conductor.lock_retry_interval, Duration::from_millis(250));
        assert_eq!(c.api.bind.port(), 7000);
        assert_eq!(c.conductor.lock_retry_attempts, 3);
        assert_eq!(c.api.header_read_timeout, Duration::from_secs(10));
    }

    #[test]
    fn bad_values_are_named() {
        let args = ConfigArgs {
            database_url: Some("postgres://x".into()),
            ..ConfigArgs::default()
        };
        let err = Config::load(&args).unwrap_err().to_string();
        assert!(err.contains("database.url"), "{err}");
        let err = Config::load(&ConfigArgs {
            api_header_timeout: Some(Duration::ZERO),
            ..ConfigArgs::default()
        })
        .unwrap_err()
        .to_string();
        assert!(err.contains("api.header_read_timeout"), "{err}");

        let dir = std::env::temp_dir().join(format!("ferrum-config-bad-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("ferrum.toml");
        std::fs::write(&path, "[conductor]\nworkerz = 3\n").unwrap();
        let err = Config::load(&ConfigArgs {
            config: Some(path),
            ..ConfigArgs::default()
        })
        .unwrap_err()
        .to_string();
        assert!(err.contains("workerz"), "{err}");
    }

    /// The keys a TOML table of `Config` accepts, as serde names them when refusing an unknown
    /// one (`deny_unknown_fields`): so the list follows the structs without being kept by hand.
    fn accepted_keys(section: Option<&str>) -> Vec<String> {
        let text = match section {
            Some(section) => format!("[{section}]\nno_such_key_ = 1\n"),
            None => "no_such_key_ = 1\n".to_owned(),
        };
        let err = toml::from_str::<Config>(&text).unwrap_err().to_string();
        let expected = err
            .split_once("expected")
            .expect("an unknown field error")
            .1;
        expected
            .split('`')
            .skip(1)
            .step_by(2)
            .map(str::to_owned)
            .collect()
    }

    #[test]
    fn the_sample_file_documents_every_setting_and_loads() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("ferrum.toml");
        let sample = std::fs::read_to_string(&path).unwrap();
        // As shipped (every setting commented out: the defaults).
        let config = Config::from_file(&path).unwrap();
        config.validate().unwrap();

        let sections = accepted_keys(None);
        assert!(sections.len() >= 5, "{sections:?}");
        let setting = regex::Regex::new(r"^# ([a-z_]+) = ").unwrap();
        let mut missing = Vec::new();
        for section in &sections {
            let header = format!("[{section}]\n");
            let body = sample
                .split_once(&header)
                .map(|(_, rest)| rest.split("\n[").next().unwrap_or_default())
                .unwrap_or_else(|| panic!("ferrum.toml has no [{section}]"));
            let documented: Vec<&str> = body
                .lines()
                .filter_map(|l| setting.captures(l))
                .filter_map(|c| c.get(1).map(|m| m.as_str()))
                .collect();
            for key in accepted_keys(Some(section)) {
                if !documented.contains(&key.as_str()) {
                    missing.push(format!("{section}.{key}"));
                }
            }
        }
        assert!(missing.is_empty(), "ferrum.toml lacks {missing:?}");

        // Every sample value is of the right type and valid together.
        let uncommented: String = sample
            .lines()
            .map(|l| if setting.is_match(l) { &l[2..] } else { l })
            .collect::<Vec<_>>()
            .join("\n");
        let config: Config = toml::from_str(&uncommented).unwrap();
        config.validate().unwrap();
        assert_eq!(config.conductor.host, "conductor-1");
        assert_eq!(config.api.tls_minimum_version, TlsVersion::V1_3);
    }

    #[test]
    fn bind_accepts_host_names() {
        let addr = parse_bind("localhost:6385").unwrap();
        assert!(addr.ip().is_loopback(), "{addr}");
        assert_eq!(addr.port(), 6385);
        assert_eq!(
            parse_bind("[::1]:7000").unwrap(),
            "[::1]:7000".parse().unwrap()
        );
        assert!(parse_bind("6385").is_err());
        assert!(parse_bind(":6385").is_err());
        let config: Config = toml::from_str("[api]\nbind = \"localhost:7001\"\n").unwrap();
        assert_eq!(config.api.bind.port(), 7001);
    }

    #[test]
    fn tls_needs_its_files() {
        let err = Config::load(&ConfigArgs {
            enable_ssl_api: Some(true),
            api_cert_file: Some("/x.crt".into()),
            ..ConfigArgs::default()
        })
        .unwrap_err()
        .to_string();
        assert!(err.contains("api.enable_ssl_api"), "{err}");
    }

    #[test]
    fn interfaces_that_cannot_serve_stop_the_start() {
        let check = |args: ConfigArgs| match Config::load(&args) {
            Ok(_) => String::new(),
            Err(e) => e.to_string(),
        };
        let names = |n: &[&str]| Some(n.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>());
        let err = check(ConfigArgs {
            enabled_boot_interfaces: names(&["bogus"]),
            ..ConfigArgs::default()
        });
        assert!(err.contains("conductor.enabled_boot_interfaces: Could not find the following items in the 'ironic.hardware.interfaces.boot' entrypoint: bogus."), "{err}");
        // fake-hardware has no ipxe boot.
        let err = check(ConfigArgs {
            default_boot_interface: Some("ipxe".into()),
            ..ConfigArgs::default()
        });
        assert!(err.contains("For hardware type 'fake-hardware', no default value found for boot interface could be determined. Please ensure the interfaces are enabled."), "{err}");
        let err = check(ConfigArgs {
            enabled_power_interfaces: names(&["fake"]),
            ..ConfigArgs::default()
        });
        assert!(
            err.contains("For hardware type 'redfish', no default value found for power interface"),
            "{err}"
        );
        let err = check(ConfigArgs {
            enabled_deploy_interfaces: names(&["direct"]),
            default_deploy_interface: Some("fake".into()),
            ..ConfigArgs::default()
        });
        assert!(err.contains("conductor.default_deploy_interface: Could not find the following interface in the 'ironic.hardware.interfaces.deploy' entrypoint: fake. Valid interfaces are ['direct']."), "{err}");
        // What a redfish-only conductor may default to.
        let ok = check(ConfigArgs {
            enabled_hardware_types: names(&["redfish"]),
            default_boot_interface: Some("redfish-virtual-media".into()),
            enabled_inspect_interfaces: names(&[" agent ", ""]),
            ..ConfigArgs::default()
        });
        assert_eq!(ok, "");
    }

    #[test]
    fn seconds_parse() {
        assert_eq!(parse_seconds("1.5").unwrap(), Duration::from_millis(1500));
        assert!(parse_seconds("-1").is_err());
        assert!(parse_seconds("soon").is_err());
    }
}
