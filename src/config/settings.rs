//! Every setting, declared once: its section and key in the TOML file, its `FERRUM_*` variable
//! and flag (none: file only), its type and default, which processes read it (their `--help`
//! lists it), its check, and its help (the field's doc, `--help`'s text). The config structs,
//! their defaults and [`SETTINGS`] (what the file, variable and flag readers, `--help` and the
//! docs' tests walk) all come from this table.
//!
//! A row: `/// help` lines, then
//! `key: Type = default, [env "FERRUM_<NAME>" flag "<name>",] for PROCESSES [, check <fn(&Type)>];`.

// A check takes a reference to the field's type, `&String` and `&Vec<String>` included.
#![allow(clippy::ptr_arg)]

use std::{net::SocketAddr, path::PathBuf, time::Duration};

use super::{
    AuthStrategy, DhcpProvider, HARDWARE_TYPES, INSPECTION_HOOKS, ImageDownloadSource, Process,
    Processes, Setting, TlsVersion, WithoutBroker, default_host_name, value::Value,
};
use crate::notifications::Level;

macro_rules! settings {
    ($(
        $(#[doc = $section_doc:literal])*
        [$section:ident] $Struct:ident {
            $(
                $(#[doc = $doc:literal])*
                $key:ident: $ty:ty = $default:expr,
                    $(env $env:literal flag $flag:literal,)?
                    for $used_by:ident
                    $(, check $check:expr)?;
            )*
        }
    )*) => {
        /// The whole configuration, one struct per section of the file.
        #[derive(Debug, Clone, Default)]
        pub struct Config {
            $(pub $section: $Struct,)*
        }

        $(
            $(#[doc = $section_doc])*
            #[derive(Debug, Clone)]
            pub struct $Struct {
                $($(#[doc = $doc])* pub $key: $ty,)*
            }

            impl Default for $Struct {
                fn default() -> Self {
                    $Struct { $($key: $default,)* }
                }
            }
        )*

        /// Every setting, in the order of the file's sections.
        pub static SETTINGS: &[Setting] = &[$($(
            Setting {
                name: concat!(stringify!($section), ".", stringify!($key)),
                section: stringify!($section),
                key: stringify!($key),
                env: settings!(@some $($env)?),
                flag: settings!(@some $($flag)?),
                help: concat!($($doc, "\n",)*),
                used_by: $used_by,
                default: || <$ty as Value>::show(&$default),
                check_text: |text| {
                    let check: fn(&$ty) -> Result<(), String> = settings!(@check $($check)?);
                    check(&<$ty as Value>::parse(text)?)
                },
                set_text: |config, text| {
                    config.$section.$key = <$ty as Value>::parse(text)?;
                    Ok(())
                },
                set_toml: |config, value| {
                    config.$section.$key = <$ty as Value>::from_toml(value)?;
                    Ok(())
                },
                check: |config| {
                    let check: fn(&$ty) -> Result<(), String> = settings!(@check $($check)?);
                    check(&config.$section.$key)
                },
            },
        )*)*];
    };
    (@some) => { None };
    (@some $x:literal) => { Some($x) };
    (@check) => { |_| Ok(()) };
    (@check $check:expr) => { $check };
}

/// Who reads a setting.
const EVERY: Processes = Processes::of(&[
    Process::AllInOne,
    Process::Api,
    Process::Conductor,
    Process::DbSync,
]);
const SERVERS: Processes = Processes::of(&[Process::AllInOne, Process::Api, Process::Conductor]);
const API: Processes = Processes::of(&[Process::AllInOne, Process::Api]);
const CONDUCTOR: Processes = Processes::of(&[Process::AllInOne, Process::Conductor]);
const CONDUCTOR_PROCESS: Processes = Processes::of(&[Process::Conductor]);
const ALL_IN_ONE: Processes = Processes::of(&[Process::AllInOne]);

fn at_least_1<T: PartialEq + Default>(value: &T) -> Result<(), String> {
    if *value == T::default() {
        return Err("must be at least 1".to_owned());
    }
    Ok(())
}

fn above_0(value: &Duration) -> Result<(), String> {
    if value.is_zero() {
        return Err("must be above 0".to_owned());
    }
    Ok(())
}

fn database_url(url: &String) -> Result<(), String> {
    crate::db::check_url(url)
}

fn transport_url(url: &String) -> Result<(), String> {
    if url == "local" {
        return Ok(());
    }
    crate::broker::Brokers::parse(url)
        .map(drop)
        .map_err(|e| format!("expected `local` or an amqp:// URL: {e}"))
}

fn host(host: &String) -> Result<(), String> {
    if host.is_empty() || host.len() > 255 || host.contains(char::is_whitespace) {
        return Err("must be 1-255 characters without spaces".to_owned());
    }
    Ok(())
}

fn conductor_group(group: &String) -> Result<(), String> {
    if crate::node::normalize_conductor_group(group).is_err() {
        return Err(
            "may contain only letters, digits, '_', '-' and '.', at most 255 characters".to_owned(),
        );
    }
    Ok(())
}

fn inspection_hooks(hooks: &Vec<String>) -> Result<(), String> {
    match hooks
        .iter()
        .find(|h| !h.trim().is_empty() && !INSPECTION_HOOKS.contains(&h.trim()))
    {
        Some(unknown) => Err(format!(
            "unknown hook {unknown:?}; the hooks are {}",
            INSPECTION_HOOKS.join(", ")
        )),
        None => Ok(()),
    }
}

fn hardware_types(types: &Vec<String>) -> Result<(), String> {
    if let Some(unknown) = types.iter().find(|t| !HARDWARE_TYPES.contains(&t.as_str())) {
        return Err(format!(
            "unknown hardware type {unknown:?}; Ferrum has {}",
            HARDWARE_TYPES.join(", ")
        ));
    }
    if types.is_empty() {
        return Err("must name at least one hardware type".to_owned());
    }
    Ok(())
}

fn http_url(url: &Option<String>) -> Result<(), String> {
    match url {
        Some(url) if !(url.starts_with("http://") || url.starts_with("https://")) => {
            Err("expected an http:// or https:// URL".to_owned())
        }
        _ => Ok(()),
    }
}

settings! {
    [database] DatabaseConfig {
        /// `sqlite://<file>` (embedded, all-in-one) or `mysql://user:pass@host/db` (multi-host; a
        /// Galera cluster's nodes: `mysql://user:pass@h1,h2,h3/db`).
        url: String = "sqlite://ferrum.sqlite".to_owned(),
            env "FERRUM_DATABASE_URL" flag "database-url", for EVERY, check database_url;
        /// Connections per process.
        pool_size: usize = 16,
            env "FERRUM_DATABASE_POOL_SIZE" flag "database-pool-size", for EVERY, check at_least_1;
        /// How often a process tries again, at its start, to reach a MySQL server that does not
        /// answer (a server restarting, a Galera cluster re-forming), before it gives up
        /// (oslo.db's `max_retries`; 0: it gives up at once).
        max_retries: u32 = 10,
            env "FERRUM_DATABASE_MAX_RETRIES" flag "database-max-retries", for EVERY;
        /// The longest wait between those tries (seconds; they start 0.5 s apart and double;
        /// oslo.db's `retry_interval`).
        retry_interval: Duration = Duration::from_secs(10),
            env "FERRUM_DATABASE_RETRY_INTERVAL" flag "database-retry-interval", for EVERY,
            check above_0;
        /// Whether a write to the embedded SQLite file is on disk before it is acknowledged (group
        /// commit, `db/durable.rs`). Off, a crash of the host loses the writes since the last
        /// checkpoint. No effect on MySQL.
        sqlite_durable: bool = true,
            env "FERRUM_DATABASE_SQLITE_DURABLE" flag "database-sqlite-durable", for EVERY;
        /// Start on a new, empty SQLite file although traces of a former one (its lock file or
        /// WAL) show that the file was there and is gone.
        recreate: bool = false,
            env "FERRUM_DATABASE_RECREATE" flag "database-recreate", for ALL_IN_ONE;
    }

    [transport] TransportConfig {
        /// `local` (in-process, all-in-one) or `amqp://user:pass@host:5672/%2f` (multi-host);
        /// the nodes of a RabbitMQ cluster as `amqp://u:p@h1:5672,u:p@h2:5672/%2f`, tried in
        /// turn (`rabbit://` is read as `amqp://`).
        url: String = "local".to_owned(),
            env "FERRUM_TRANSPORT_URL" flag "transport-url", for SERVERS, check transport_url;
        /// Prefix of every queue name, so that several deployments (or tests) share one broker.
        prefix: String = "ferrum".to_owned(),
            env "FERRUM_TRANSPORT_PREFIX" flag "transport-prefix", for SERVERS,
            check |prefix| {
                if prefix.is_empty() || prefix.contains(char::is_whitespace) {
                    return Err("must be non-empty, without spaces".to_owned());
                }
                Ok(())
            };
        /// How long the API waits for a conductor's answer (seconds).
        rpc_timeout: Duration = Duration::from_secs(60),
            env "FERRUM_RPC_TIMEOUT" flag "rpc-timeout", for SERVERS, check above_0;
        /// Conductor queues as RabbitMQ quorum queues, replicated over a cluster's nodes so
        /// that they outlive any one (Ironic's `[oslo_messaging_rabbit]rabbit_quorum_queue`);
        /// off: classic auto-delete queues. Every process of a deployment must agree: a queue's
        /// type is fixed when it is declared.
        quorum_queues: bool = false,
            env "FERRUM_TRANSPORT_QUORUM_QUEUES" flag "transport-quorum-queues", for SERVERS;
    }

    [api] ApiConfig {
        /// `host:port`; a host name (`localhost`) is resolved at start ([`super::parse_bind`]).
        bind: SocketAddr = SocketAddr::from(([127, 0, 0, 1], 6385)),
            env "FERRUM_API_BIND" flag "api-bind", for API;
        /// How long the API trusts its view of the online conductors before reading it again
        /// (seconds).
        hash_ring_reset_interval: Duration = Duration::from_secs(15), for API;
        /// How long a client may take to send a request's head (line and headers) before its
        /// connection is closed; also how long an idle keep-alive connection stays open
        /// (seconds). Also the conductor's metrics listener's.
        header_read_timeout: Duration = Duration::from_secs(10),
            env "FERRUM_API_HEADER_TIMEOUT" flag "api-header-timeout", for SERVERS, check above_0;
        /// Lookup finds only nodes in states where an agent is expected (Ironic's
        /// `[api]restrict_lookup`).
        restrict_lookup: bool = true, for API;
        /// How often the agent is told to heartbeat at the latest, seconds
        /// (`[api]ramdisk_heartbeat_timeout`).
        ramdisk_heartbeat_timeout: Duration = Duration::from_secs(300), for API;
        /// Who may use the API: `noauth`, `http_basic` or `keystone` (Ironic's
        /// `[DEFAULT]auth_strategy`; `keystone` takes its settings from `[keystone_authtoken]`).
        auth_strategy: AuthStrategy = AuthStrategy::Noauth,
            env "FERRUM_AUTH_STRATEGY" flag "auth-strategy", for API;
        /// The Apache htpasswd file of `http_basic`: `user:<bcrypt hash>` lines (Ironic's
        /// `[DEFAULT]http_basic_auth_user_file`), read once at start.
        http_basic_auth_user_file: PathBuf = PathBuf::from("/etc/ironic/htpasswd"),
            env "FERRUM_HTTP_BASIC_AUTH_USER_FILE" flag "http-basic-auth-user-file", for API;
        /// Serve HTTPS with `cert_file` and `key_file` (PEM) instead of HTTP (Ironic's
        /// `[api]enable_ssl_api`, `cert_file`, `key_file`).
        enable_ssl_api: bool = false,
            env "FERRUM_ENABLE_SSL_API" flag "enable-ssl-api", for API;
        /// The PEM certificate chain HTTPS serves.
        cert_file: Option<PathBuf> = None,
            env "FERRUM_API_CERT_FILE" flag "api-cert-file", for API;
        /// The PEM private key of `cert_file`.
        key_file: Option<PathBuf> = None,
            env "FERRUM_API_KEY_FILE" flag "api-key-file", for API;
        /// The lowest TLS version served (Ironic's `[api]tls_minimum_version`): `1.2` or `1.3`.
        tls_minimum_version: TlsVersion = TlsVersion::V1_3,
            env "FERRUM_API_TLS_MINIMUM_VERSION" flag "api-tls-minimum-version", for API;
        /// The noVNC page a graphical console's `console_info` links to (Ironic's
        /// `[vnc]public_url`; unset, the link starts with `None`, as Ironic's).
        vnc_public_url: Option<String> = None, for API;
    }

    [conductor] ConductorConfig {
        /// The name this conductor registers, routes by and writes into `nodes.reservation`;
        /// the machine's host name by default.
        host: String = default_host_name(),
            env "FERRUM_CONDUCTOR_HOST" flag "conductor-host", for SERVERS, check host;
        /// The conductor group this conductor serves: it gets only nodes of the same
        /// `conductor_group` (API 1.46). Stored lower-cased; `""` is the default group.
        conductor_group: String = String::new(),
            env "FERRUM_CONDUCTOR_GROUP" flag "conductor-group", for CONDUCTOR,
            check conductor_group;
        /// Clean nodes on provide and tear-down unless a node's `automated_clean` says otherwise.
        automated_clean: bool = true,
            env "FERRUM_AUTOMATED_CLEAN" flag "automated-clean", for CONDUCTOR;
        /// Power a node off when its agent fails its deploy or the deploy times out waiting for
        /// the agent, so that a failed node does not stay up in its ramdisk (Ironic's
        /// `[deploy]power_off_after_deploy_failure`).
        power_off_after_deploy_failure: bool = true,
            env "FERRUM_POWER_OFF_AFTER_DEPLOY_FAILURE" flag "power-off-after-deploy-failure",
            for CONDUCTOR;
        /// Provisioning work running at once; beyond it requests get NoFreeConductorWorker (503).
        workers: usize = 300,
            env "FERRUM_CONDUCTOR_WORKERS" flag "conductor-workers", for CONDUCTOR,
            check at_least_1;
        /// RPC requests handled at once (they are short: lock, check, write, reply).
        rpc_in_flight: usize = 64, for CONDUCTOR, check at_least_1;
        /// How often a busy node's lock is tried.
        lock_retry_attempts: u32 = 3,
            env "FERRUM_LOCK_RETRY_ATTEMPTS" flag "lock-retry-attempts", for CONDUCTOR,
            check at_least_1;
        /// How far apart a busy node's lock is tried (seconds).
        lock_retry_interval: Duration = Duration::from_secs(1),
            env "FERRUM_LOCK_RETRY_INTERVAL" flag "lock-retry-interval", for CONDUCTOR;
        /// How often a conductor renews its lease (seconds).
        heartbeat_interval: Duration = Duration::from_secs(10),
            env "FERRUM_HEARTBEAT_INTERVAL" flag "heartbeat-interval", for CONDUCTOR,
            check above_0;
        /// A conductor not heard from for this long (seconds) is offline: out of the hash ring.
        heartbeat_timeout: Duration = Duration::from_secs(60),
            env "FERRUM_HEARTBEAT_TIMEOUT" flag "heartbeat-timeout", for SERVERS;
        /// On shutdown, how long in-flight work may run before it is failed (seconds).
        graceful_shutdown_timeout: Duration = Duration::from_secs(60),
            env "FERRUM_GRACEFUL_SHUTDOWN_TIMEOUT" flag "graceful-shutdown-timeout", for CONDUCTOR;
        /// How long each method of the fake vendor interface takes, seconds (Ironic's
        /// `[fake]vendor_delay`): an asynchronous one holds the node's lock for this long, so
        /// that it can be seen.
        fake_vendor_delay: Duration = Duration::ZERO,
            env "FERRUM_FAKE_VENDOR_DELAY" flag "fake-vendor-delay", for CONDUCTOR;
        /// How long a deploy may wait for its agent in `wait call-back` (one wait: the agent's
        /// first heartbeat, or one command) before it fails, seconds (Ironic's
        /// `[conductor]deploy_callback_timeout`).
        deploy_callback_timeout: Duration = Duration::from_secs(1800),
            env "FERRUM_DEPLOY_CALLBACK_TIMEOUT" flag "deploy-callback-timeout", for CONDUCTOR,
            check above_0;
        /// How long a cleaning may wait for its agent in `clean wait` (one wait: the agent's first
        /// heartbeat, or one clean step) before it fails, seconds (Ironic's
        /// `[conductor]clean_callback_timeout`).
        clean_callback_timeout: Duration = Duration::from_secs(1800),
            env "FERRUM_CLEAN_CALLBACK_TIMEOUT" flag "clean-callback-timeout", for CONDUCTOR,
            check above_0;
        /// The priority automated cleaning gives the agent's `erase_devices` step instead of the
        /// agent's own (10); 0 leaves the step out (Ironic's `[deploy]erase_devices_priority`).
        erase_devices_priority: Option<u32> = None,
            env "FERRUM_ERASE_DEVICES_PRIORITY" flag "erase-devices-priority", for CONDUCTOR;
        /// The priority automated cleaning gives the agent's `erase_devices_metadata` step
        /// instead of the agent's own (99); 0 leaves the step out (Ironic's
        /// `[deploy]erase_devices_metadata_priority`).
        erase_devices_metadata_priority: Option<u32> = None,
            env "FERRUM_ERASE_DEVICES_METADATA_PRIORITY" flag "erase-devices-metadata-priority",
            for CONDUCTOR;
        /// How long an inspection may wait in `inspect wait` for the agent's data before it
        /// fails, seconds (Ironic's `[conductor]inspect_wait_timeout`).
        inspect_wait_timeout: Duration = Duration::from_secs(1800),
            env "FERRUM_INSPECT_WAIT_TIMEOUT" flag "inspect-wait-timeout", for CONDUCTOR,
            check above_0;
        /// The hooks run over an agent inspection's data, in order (Ironic's `[inspector]hooks`;
        /// those Ferrum has are `config::INSPECTION_HOOKS`); comma-separated in a variable.
        inspection_hooks: Vec<String> = INSPECTION_HOOKS.iter().map(|h| (*h).to_owned()).collect(),
            env "FERRUM_INSPECTION_HOOKS" flag "inspection-hooks", for CONDUCTOR,
            check inspection_hooks;
        /// Inspect in band only nodes whose boot the conductor sets up itself (ports to boot
        /// from, or virtual media); false inspects the others unmanaged: booted from the network
        /// once, the operator's DHCP and boot configuration answering, unknown MACs allowed
        /// DHCP by `dnsmasq` while any node is being inspected (Ironic's
        /// `[inspector]require_managed_boot`, and its PXE filter).
        inspector_require_managed_boot: bool = true,
            env "FERRUM_INSPECTOR_REQUIRE_MANAGED_BOOT" flag "inspector-require-managed-boot",
            for CONDUCTOR;
        /// How often nodes waiting for their agent are checked against the callback timeouts,
        /// seconds (Ironic's `[conductor]check_provision_state_interval`).
        check_provision_state_interval: Duration = Duration::from_secs(60),
            env "FERRUM_CHECK_PROVISION_STATE_INTERVAL" flag "check-provision-state-interval",
            for CONDUCTOR, check above_0;
        /// Whether the agent writes a raw image while it downloads it (Ironic's
        /// `[agent]stream_raw_images`).
        stream_raw_images: bool = true, for CONDUCTOR;
        /// After asking the agent to power the node off, how often its power state is read before
        /// it is forced off (Ironic's `[agent]post_deploy_get_power_state_retries`).
        agent_power_off_retries: u32 = 6,
            env "FERRUM_AGENT_POWER_OFF_RETRIES" flag "agent-power-off-retries", for CONDUCTOR;
        /// How far apart those reads are (seconds).
        agent_power_off_retry_interval: Duration = Duration::from_secs(5),
            env "FERRUM_AGENT_POWER_OFF_RETRY_INTERVAL" flag "agent-power-off-retry-interval",
            for CONDUCTOR;
        /// How many history entries (API 1.78) a node keeps, the oldest removed as a new one is
        /// recorded; 0 records none (Ironic's `[conductor]node_history_max_entries`).
        node_history_max_entries: u32 = crate::db::DEFAULT_HISTORY_MAX_ENTRIES,
            env "FERRUM_NODE_HISTORY_MAX_ENTRIES" flag "node-history-max-entries", for SERVERS;
        /// Where the agent downloads an instance image from: `http`, the image's own URL, or
        /// `local`, a raw copy the conductor downloads, checks, converts and publishes under
        /// `http_root` at `http_url` (Ironic's `[agent]image_download_source`, always with
        /// `[DEFAULT]force_raw_images`); a node's `instance_info` or `driver_info`
        /// `image_download_source` overrides it (`drivers::local_image`).
        image_download_source: ImageDownloadSource = ImageDownloadSource::Http,
            env "FERRUM_IMAGE_DOWNLOAD_SOURCE" flag "image-download-source", for CONDUCTOR;
        /// The directory the conductor publishes local images in (Ironic's `[deploy]http_root`).
        http_root: PathBuf = PathBuf::from("ferrum-httpboot"),
            env "FERRUM_HTTP_ROOT" flag "http-root", for CONDUCTOR;
        /// The URL of `http_root` as the deploy ramdisk reaches it (Ironic's
        /// `[deploy]http_url`); needed for `local` images.
        http_url: Option<String> = None,
            env "FERRUM_HTTP_URL" flag "http-url", for CONDUCTOR, check http_url;
        /// Where the conductor serves `http_root` itself (GET of files only); unset, another web
        /// server must serve it at `http_url`. A host name is resolved as `api.bind`'s.
        http_bind: Option<SocketAddr> = None,
            env "FERRUM_HTTP_BIND" flag "http-bind", for CONDUCTOR;
        /// The URL of the API as the deploy ramdisk reaches it, passed to it on its kernel
        /// command line as `ipa-api-url` by the network boot interfaces (Ironic's
        /// `[service_catalog]` endpoint); `pxe` and `ipxe` refuse to boot a node without it.
        api_url: Option<String> = None,
            env "FERRUM_API_URL" flag "api-url", for CONDUCTOR, check http_url;
        /// The directory the `pxe` boot interface publishes boot files in, which a TFTP server
        /// serves (Ironic's `[pxe]tftp_root`).
        tftp_root: PathBuf = PathBuf::from("ferrum-tftpboot"),
            env "FERRUM_TFTP_ROOT" flag "tftp-root", for CONDUCTOR;
        /// The TFTP server's address handed out by DHCP (options 66, 150 and dnsmasq's
        /// `server-ip-address`); unset, DHCP names none (Ironic's `[pxe]tftp_server`).
        tftp_server: Option<String> = None,
            env "FERRUM_TFTP_SERVER" flag "tftp-server", for CONDUCTOR;
        /// Kernel parameters of the deploy ramdisk booted by `pxe` or `ipxe`; a node's
        /// `driver_info.kernel_append_params` replaces them (Ironic's
        /// `[pxe]kernel_append_params`).
        kernel_append_params: String = "nofb vga=normal".to_owned(),
            env "FERRUM_KERNEL_APPEND_PARAMS" flag "kernel-append-params", for CONDUCTOR;
        /// The boot file DHCP names for `pxe`, BIOS (Ironic's `[pxe]pxe_bootfile_name`).
        pxe_bootfile_name: String = "pxelinux.0".to_owned(), for CONDUCTOR;
        /// The boot file DHCP names for `pxe`, UEFI (`[pxe]uefi_pxe_bootfile_name`).
        uefi_pxe_bootfile_name: String = "bootx64.efi".to_owned(), for CONDUCTOR;
        /// The iPXE image DHCP names for `ipxe` to firmware that is not iPXE, BIOS
        /// (`[pxe]ipxe_bootfile_name`).
        ipxe_bootfile_name: String = "undionly.kpxe".to_owned(), for CONDUCTOR;
        /// The same, UEFI (`[pxe]uefi_ipxe_bootfile_name`).
        uefi_ipxe_bootfile_name: String = "snponly.efi".to_owned(), for CONDUCTOR;
        /// The iPXE script (a file under `http_url`, e.g. `inspector.ipxe`) that `boot.ipxe`
        /// chains for a machine none of whose network devices has a boot configuration of
        /// Ferrum's: the operator's boot of unknown machines, for unmanaged inspection (Ironic's
        /// `[pxe]ipxe_fallback_script`); unset, such a machine reboots.
        ipxe_fallback_script: Option<String> = None,
            env "FERRUM_IPXE_FALLBACK_SCRIPT" flag "ipxe-fallback-script", for CONDUCTOR;
        /// The EFI system partition image (a FAT file system holding an EFI boot loader such as
        /// GRUB, `EFI/BOOT/BOOTX64.EFI`) that `redfish-virtual-media` puts in the ISOs it builds
        /// for UEFI nodes: a URL (http://, https:// or file://); a node's
        /// `driver_info.bootloader` replaces it (Ironic's `[conductor]bootloader`).
        bootloader: Option<String> = None,
            env "FERRUM_BOOTLOADER" flag "bootloader", for CONDUCTOR;
        /// Where a UEFI boot ISO holds its GRUB configuration, as the boot loader of
        /// `bootloader` looks for it (Ironic's `[DEFAULT]grub_config_path`).
        grub_config_path: String = "EFI/BOOT/grub.cfg".to_owned(),
            env "FERRUM_GRUB_CONFIG_PATH" flag "grub-config-path", for CONDUCTOR;
        /// ISOLINUX's boot loader, which BIOS boot ISOs start (Ironic's `[DEFAULT]isolinux_bin`;
        /// this default is Debian's package `isolinux`).
        isolinux_bin: PathBuf = PathBuf::from("/usr/lib/ISOLINUX/isolinux.bin"),
            env "FERRUM_ISOLINUX_BIN" flag "isolinux-bin", for CONDUCTOR;
        /// ISOLINUX's `ldlinux.c32`; unset, it is looked for in
        /// `/usr/lib/syslinux/modules/bios` and `/usr/share/syslinux` (Ironic's
        /// `[DEFAULT]ldlinux_c32`).
        ldlinux_c32: Option<PathBuf> = None,
            env "FERRUM_LDLINUX_C32" flag "ldlinux-c32", for CONDUCTOR;
        /// Kernel parameters of the deploy ramdisk booted from a virtual media ISO that Ferrum
        /// builds; a node's `driver_info.kernel_append_params` replaces them (Ironic's
        /// `[redfish]kernel_append_params`).
        redfish_kernel_append_params: String = "nofb vga=normal".to_owned(),
            env "FERRUM_REDFISH_KERNEL_APPEND_PARAMS" flag "redfish-kernel-append-params",
            for CONDUCTOR;
        /// How much the cache of deploy kernels and ramdisks may hold, MiB; 0 is unbounded
        /// (Ironic's `[pxe]image_cache_size`).
        image_cache_size: u32 = 20480,
            env "FERRUM_IMAGE_CACHE_SIZE" flag "image-cache-size", for CONDUCTOR;
        /// How long a cached deploy kernel or ramdisk is used before it is fetched again,
        /// seconds (Ironic's `[pxe]image_cache_ttl`, a week).
        image_cache_ttl: Duration = Duration::from_secs(7 * 24 * 3600),
            env "FERRUM_IMAGE_CACHE_TTL" flag "image-cache-ttl", for CONDUCTOR;
        /// Who hands out DHCP for network boot: `none` (the operator's DHCP server) or
        /// `dnsmasq`, through the files of `dnsmasq_dhcp_hostsdir` and `dnsmasq_dhcp_optsdir`
        /// (Ironic's `[dhcp]dhcp_provider`).
        dhcp_provider: DhcpProvider = DhcpProvider::None,
            env "FERRUM_DHCP_PROVIDER" flag "dhcp-provider", for CONDUCTOR;
        /// The directory of dnsmasq's `--dhcp-hostsdir` (Ironic's `[dnsmasq]dhcp_hostsdir`).
        dnsmasq_dhcp_hostsdir: PathBuf = PathBuf::from("ferrum-dnsmasq/hosts"),
            env "FERRUM_DNSMASQ_DHCP_HOSTSDIR" flag "dnsmasq-dhcp-hostsdir", for CONDUCTOR;
        /// The directory of dnsmasq's `--dhcp-optsdir` (Ironic's `[dnsmasq]dhcp_optsdir`).
        dnsmasq_dhcp_optsdir: PathBuf = PathBuf::from("ferrum-dnsmasq/opts"),
            env "FERRUM_DNSMASQ_DHCP_OPTSDIR" flag "dnsmasq-dhcp-optsdir", for CONDUCTOR;
        /// Where a `ferrum conductor` process serves its Prometheus metrics (`GET /metrics`);
        /// unset, none. All-in-one ignores it: the API's `/metrics` covers its conductor. A host
        /// name is resolved as `api.bind`'s.
        metrics_bind: Option<SocketAddr> = None,
            env "FERRUM_CONDUCTOR_METRICS_BIND" flag "conductor-metrics-bind",
            for CONDUCTOR_PROCESS;
        /// The hardware types this conductor offers (Ironic's `[DEFAULT]enabled_hardware_types`;
        /// Ferrum builds `fake-hardware`, `ipmi` and `redfish`); comma-separated in a variable.
        enabled_hardware_types: Vec<String> = HARDWARE_TYPES.map(str::to_owned).to_vec(),
            env "FERRUM_ENABLED_HARDWARE_TYPES" flag "enabled-hardware-types", for CONDUCTOR,
            check hardware_types;
        /// How long a power change may take before it fails, unless the request gives its own
        /// timeout, seconds (Ironic's `[conductor]power_state_change_timeout`).
        power_state_change_timeout: Duration = Duration::from_secs(60),
            env "FERRUM_POWER_STATE_CHANGE_TIMEOUT" flag "power-state-change-timeout",
            for CONDUCTOR, check above_0;
        /// How long a soft power off may take, seconds (`[conductor]soft_power_off_timeout`).
        soft_power_off_timeout: Duration = Duration::from_secs(600),
            env "FERRUM_SOFT_POWER_OFF_TIMEOUT" flag "soft-power-off-timeout", for CONDUCTOR,
            check above_0;
        /// Attempts of a Redfish GET that cannot connect or is answered 503 (Ironic's
        /// `[redfish]connection_attempts`).
        redfish_connection_attempts: u32 = 5,
            env "FERRUM_REDFISH_CONNECTION_ATTEMPTS" flag "redfish-connection-attempts",
            for CONDUCTOR, check at_least_1;
        /// The pause between those attempts, seconds (`[redfish]connection_retry_interval`).
        redfish_connection_retry_interval: Duration = Duration::from_secs(4),
            env "FERRUM_REDFISH_CONNECTION_RETRY_INTERVAL" flag "redfish-connection-retry-interval",
            for CONDUCTOR;
        /// How long an IPMI command is tried again after it fails, and how long one `ipmitool` may
        /// run before it is killed, seconds (Ironic's `[ipmi]command_retry_timeout`).
        ipmi_command_retry_timeout: Duration = Duration::from_secs(60),
            env "FERRUM_IPMI_COMMAND_RETRY_TIMEOUT" flag "ipmi-command-retry-timeout",
            for CONDUCTOR, check above_0;
        /// The least time between two IPMI commands to one BMC, seconds; commands to one BMC
        /// also never overlap (Ironic's `[ipmi]min_command_interval`; some BMCs crash when
        /// asked faster).
        ipmi_min_command_interval: Duration = Duration::from_secs(5),
            env "FERRUM_IPMI_MIN_COMMAND_INTERVAL" flag "ipmi-min-command-interval",
            for CONDUCTOR;
        /// The address the `ipmitool-socat` console listens on, and gives in its URL (Ironic's
        /// `[console]socat_address`, which defaults to the host's address: Ferrum's to loopback,
        /// so that a console is reachable from elsewhere only when this says so).
        console_socat_address: String = "127.0.0.1".to_owned(),
            env "FERRUM_CONSOLE_SOCAT_ADDRESS" flag "console-socat-address", for CONDUCTOR;
        /// How long a console connection may stay idle before it is closed, seconds; 0 never
        /// (Ironic's `[console]terminal_timeout`).
        console_terminal_timeout: Duration = Duration::from_secs(600),
            env "FERRUM_CONSOLE_TERMINAL_TIMEOUT" flag "console-terminal-timeout",
            for CONDUCTOR;
        /// Send the raw IPMI command that turns off the BMC's 60 s expiry of a boot device
        /// setting before each setting, unless a node's `ipmi_disable_boot_timeout` says
        /// otherwise (Ironic's `[ipmi]disable_boot_timeout`).
        ipmi_disable_boot_timeout: bool = true,
            env "FERRUM_IPMI_DISABLE_BOOT_TIMEOUT" flag "ipmi-disable-boot-timeout",
            for CONDUCTOR;
        /// How often the power state of the nodes this conductor owns is read from their hardware
        /// and compared with the recorded one, seconds; 0 turns the sync off (Ironic's
        /// `[conductor]sync_power_state_interval`).
        sync_power_state_interval: Duration = Duration::from_secs(120),
            env "FERRUM_SYNC_POWER_STATE_INTERVAL" flag "sync-power-state-interval", for CONDUCTOR;
        /// On a mismatch, put the hardware back into the recorded state (true) or record the
        /// hardware's state (false) (Ironic's `[conductor]force_power_state_during_sync`).
        force_power_state_during_sync: bool = true,
            env "FERRUM_FORCE_POWER_STATE_DURING_SYNC" flag "force-power-state-during-sync",
            for CONDUCTOR;
        /// Rounds in a row a node may fail its sync (its BMC unreachable, or a mismatch that does
        /// not go away) before it is put into maintenance with the fault `power failure` (Ironic's
        /// `[conductor]power_state_sync_max_retries`).
        power_state_sync_max_retries: u32 = 3,
            env "FERRUM_POWER_STATE_SYNC_MAX_RETRIES" flag "power-state-sync-max-retries",
            for CONDUCTOR;
        /// Nodes synced at once by this conductor, all BMCs together (Ironic's
        /// `[conductor]sync_power_state_workers`).
        sync_power_state_workers: usize = 8,
            env "FERRUM_SYNC_POWER_STATE_WORKERS" flag "sync-power-state-workers", for CONDUCTOR,
            check at_least_1;
        /// Nodes synced at once by this conductor on one BMC (its scheme, host and port), so that a
        /// BMC serving many systems, or a chassis manager, is not flooded (Ferrum's own).
        sync_power_state_workers_per_bmc: usize = 2,
            env "FERRUM_SYNC_POWER_STATE_WORKERS_PER_BMC" flag "sync-power-state-workers-per-bmc",
            for CONDUCTOR, check at_least_1;
        /// How often the nodes put into maintenance for a `power failure` are asked for their power
        /// state again, and taken out of maintenance when they answer, seconds; 0 turns it off
        /// (Ironic's `[conductor]power_failure_recovery_interval`).
        power_failure_recovery_interval: Duration = Duration::from_secs(300),
            env "FERRUM_POWER_FAILURE_RECOVERY_INTERVAL" flag "power-failure-recovery-interval",
            for CONDUCTOR;
        // The interfaces of each kind this conductor enables, by name (Ironic's
        // `[DEFAULT]enabled_<kind>_interfaces`): a node may name only these, and a hardware type
        // offers those of them it supports. Unset (or empty): every interface Ferrum builds for
        // the enabled hardware types. The drivers check them at start (`Registry::check_config`).
        /// The bios interfaces enabled (comma-separated in a variable); unset, all built.
        enabled_bios_interfaces: Option<Vec<String>> = None,
            env "FERRUM_ENABLED_BIOS_INTERFACES" flag "enabled-bios-interfaces", for CONDUCTOR;
        /// The boot interfaces enabled (comma-separated in a variable); unset, all built.
        enabled_boot_interfaces: Option<Vec<String>> = None,
            env "FERRUM_ENABLED_BOOT_INTERFACES" flag "enabled-boot-interfaces", for CONDUCTOR;
        /// The console interfaces enabled (comma-separated in a variable); unset, all built.
        enabled_console_interfaces: Option<Vec<String>> = None,
            env "FERRUM_ENABLED_CONSOLE_INTERFACES" flag "enabled-console-interfaces",
            for CONDUCTOR;
        /// The deploy interfaces enabled (comma-separated in a variable); unset, all built.
        enabled_deploy_interfaces: Option<Vec<String>> = None,
            env "FERRUM_ENABLED_DEPLOY_INTERFACES" flag "enabled-deploy-interfaces", for CONDUCTOR;
        /// The firmware interfaces enabled (comma-separated in a variable); unset, all built.
        enabled_firmware_interfaces: Option<Vec<String>> = None,
            env "FERRUM_ENABLED_FIRMWARE_INTERFACES" flag "enabled-firmware-interfaces",
            for CONDUCTOR;
        /// The inspect interfaces enabled (comma-separated in a variable); unset, all built.
        enabled_inspect_interfaces: Option<Vec<String>> = None,
            env "FERRUM_ENABLED_INSPECT_INTERFACES" flag "enabled-inspect-interfaces",
            for CONDUCTOR;
        /// The management interfaces enabled (comma-separated in a variable); unset, all built.
        enabled_management_interfaces: Option<Vec<String>> = None,
            env "FERRUM_ENABLED_MANAGEMENT_INTERFACES" flag "enabled-management-interfaces",
            for CONDUCTOR;
        /// The network interfaces enabled (comma-separated in a variable); unset, all built.
        enabled_network_interfaces: Option<Vec<String>> = None,
            env "FERRUM_ENABLED_NETWORK_INTERFACES" flag "enabled-network-interfaces",
            for CONDUCTOR;
        /// The power interfaces enabled (comma-separated in a variable); unset, all built.
        enabled_power_interfaces: Option<Vec<String>> = None,
            env "FERRUM_ENABLED_POWER_INTERFACES" flag "enabled-power-interfaces", for CONDUCTOR;
        /// The raid interfaces enabled (comma-separated in a variable); unset, all built.
        enabled_raid_interfaces: Option<Vec<String>> = None,
            env "FERRUM_ENABLED_RAID_INTERFACES" flag "enabled-raid-interfaces", for CONDUCTOR;
        /// The rescue interfaces enabled (comma-separated in a variable); unset, all built.
        enabled_rescue_interfaces: Option<Vec<String>> = None,
            env "FERRUM_ENABLED_RESCUE_INTERFACES" flag "enabled-rescue-interfaces", for CONDUCTOR;
        /// The storage interfaces enabled (comma-separated in a variable); unset, all built.
        enabled_storage_interfaces: Option<Vec<String>> = None,
            env "FERRUM_ENABLED_STORAGE_INTERFACES" flag "enabled-storage-interfaces",
            for CONDUCTOR;
        /// The vendor interfaces enabled (comma-separated in a variable); unset, all built.
        enabled_vendor_interfaces: Option<Vec<String>> = None,
            env "FERRUM_ENABLED_VENDOR_INTERFACES" flag "enabled-vendor-interfaces", for CONDUCTOR;
        // The interface of each kind a node gets when it names none (Ironic's
        // `[DEFAULT]default_<kind>_interface`); it must be enabled and supported by every enabled
        // hardware type. Unset: each hardware type's first enabled one.
        /// The bios interface of a node that names none; unset, its hardware type's first.
        default_bios_interface: Option<String> = None,
            env "FERRUM_DEFAULT_BIOS_INTERFACE" flag "default-bios-interface", for CONDUCTOR;
        /// The boot interface of a node that names none; unset, its hardware type's first.
        default_boot_interface: Option<String> = None,
            env "FERRUM_DEFAULT_BOOT_INTERFACE" flag "default-boot-interface", for CONDUCTOR;
        /// The console interface of a node that names none; unset, its hardware type's first.
        default_console_interface: Option<String> = None,
            env "FERRUM_DEFAULT_CONSOLE_INTERFACE" flag "default-console-interface", for CONDUCTOR;
        /// The deploy interface of a node that names none; unset, its hardware type's first.
        default_deploy_interface: Option<String> = None,
            env "FERRUM_DEFAULT_DEPLOY_INTERFACE" flag "default-deploy-interface", for CONDUCTOR;
        /// The firmware interface of a node that names none; unset, its hardware type's first.
        default_firmware_interface: Option<String> = None,
            env "FERRUM_DEFAULT_FIRMWARE_INTERFACE" flag "default-firmware-interface",
            for CONDUCTOR;
        /// The inspect interface of a node that names none; unset, its hardware type's first.
        default_inspect_interface: Option<String> = None,
            env "FERRUM_DEFAULT_INSPECT_INTERFACE" flag "default-inspect-interface", for CONDUCTOR;
        /// The management interface of a node that names none; unset, its hardware type's first.
        default_management_interface: Option<String> = None,
            env "FERRUM_DEFAULT_MANAGEMENT_INTERFACE" flag "default-management-interface",
            for CONDUCTOR;
        /// The network interface of a node that names none; unset, its hardware type's first.
        default_network_interface: Option<String> = None,
            env "FERRUM_DEFAULT_NETWORK_INTERFACE" flag "default-network-interface", for CONDUCTOR;
        /// The power interface of a node that names none; unset, its hardware type's first.
        default_power_interface: Option<String> = None,
            env "FERRUM_DEFAULT_POWER_INTERFACE" flag "default-power-interface", for CONDUCTOR;
        /// The raid interface of a node that names none; unset, its hardware type's first.
        default_raid_interface: Option<String> = None,
            env "FERRUM_DEFAULT_RAID_INTERFACE" flag "default-raid-interface", for CONDUCTOR;
        /// The rescue interface of a node that names none; unset, its hardware type's first.
        default_rescue_interface: Option<String> = None,
            env "FERRUM_DEFAULT_RESCUE_INTERFACE" flag "default-rescue-interface", for CONDUCTOR;
        /// The storage interface of a node that names none; unset, its hardware type's first.
        default_storage_interface: Option<String> = None,
            env "FERRUM_DEFAULT_STORAGE_INTERFACE" flag "default-storage-interface", for CONDUCTOR;
        /// The vendor interface of a node that names none; unset, its hardware type's first.
        default_vendor_interface: Option<String> = None,
            env "FERRUM_DEFAULT_VENDOR_INTERFACE" flag "default-vendor-interface", for CONDUCTOR;
    }

    /// Versioned notifications (`[notifications]`), Ironic's `[DEFAULT]notification_level`,
    /// `[oslo_messaging_notifications]transport_url`, `control_exchange` and
    /// `versioned_notifications_topics`.
    [notifications] NotificationsConfig {
        /// The lowest level sent (`debug`, `info`, `warning`, `error`, `critical`); unset, the
        /// default as in Ironic, sends none.
        level: Option<Level> = None,
            env "FERRUM_NOTIFICATION_LEVEL" flag "notification-level", for SERVERS;
        /// The broker notifications go to; unset, the RPC transport's when it is AMQP.
        transport_url: Option<String> = None,
            env "FERRUM_NOTIFICATION_TRANSPORT_URL" flag "notification-transport-url", for SERVERS,
            check |url| match url {
                Some(url) => crate::broker::Brokers::parse(url).map(drop),
                None => Ok(()),
            };
        /// The topic exchange (Ironic's `control_exchange`).
        exchange: String = "ironic".to_owned(),
            env "FERRUM_NOTIFICATION_EXCHANGE" flag "notification-exchange", for SERVERS,
            check |exchange| {
                if exchange.is_empty() || exchange.len() > 255 {
                    return Err("must be 1-255 characters".to_owned());
                }
                Ok(())
            };
        /// The routing key's first part; messages go to `<topic>.<priority>`.
        topic: String = "ironic_versioned_notifications".to_owned(),
            env "FERRUM_NOTIFICATION_TOPIC" flag "notification-topic", for SERVERS,
            check |topic| {
                // The routing key and queue name `<topic>.critical` must fit AMQP's 255.
                if topic.is_empty() || topic.len() > 240 {
                    return Err("must be 1-240 characters".to_owned());
                }
                Ok(())
            };
        /// Notifications waiting for the publisher; beyond it (the broker is away or slow) new
        /// ones are dropped, counted and logged, and the operation that emitted them goes on.
        queue_size: usize = 10_000,
            env "FERRUM_NOTIFICATION_QUEUE_SIZE" flag "notification-queue-size", for SERVERS,
            check at_least_1;
        /// Without a broker (all-in-one on the in-process transport, no `transport_url`):
        /// `log` writes them to the log at their level, `off` drops them.
        without_broker: WithoutBroker = WithoutBroker::Log,
            env "FERRUM_NOTIFICATION_WITHOUT_BROKER" flag "notification-without-broker",
            for SERVERS;
        /// At a graceful stop, how long the publisher may take to send what is still queued
        /// (notifications and watch events), seconds; what is left then is lost, and logged.
        flush_timeout: Duration = Duration::from_secs(5),
            env "FERRUM_NOTIFICATION_FLUSH_TIMEOUT" flag "notification-flush-timeout", for SERVERS;
    }

    /// How `auth_strategy = keystone` validates tokens: keystonemiddleware's `[keystone_authtoken]`
    /// options of the same names, with the `password` auth type (Ferrum's own service user).
    [keystone_authtoken] KeystoneConfig {
        /// Keystone's URL for Ferrum's own calls (`http://keystone:5000`, with or without `/v3`).
        auth_url: Option<String> = None,
            env "FERRUM_KEYSTONE_AUTH_URL" flag "keystone-auth-url", for API;
        /// The URL a client is sent to for a token, in a 401's `WWW-Authenticate: Keystone
        /// uri="..."`; unset, `auth_url`.
        www_authenticate_uri: Option<String> = None, for API;
        /// Ferrum's service user, which validates the tokens users send.
        username: String = "ironic".to_owned(),
            env "FERRUM_KEYSTONE_USERNAME" flag "keystone-username", for API;
        /// Its password.
        password: Option<String> = None,
            env "FERRUM_KEYSTONE_PASSWORD" flag "keystone-password", for API;
        /// The project its token is scoped to.
        project_name: String = "service".to_owned(), for API;
        /// The domain of `username`, by name.
        user_domain_name: String = "Default".to_owned(), for API;
        /// The domain of `project_name`, by name.
        project_domain_name: String = "Default".to_owned(), for API;
        /// How long a validated token is trusted without asking Keystone again (seconds;
        /// keystonemiddleware's default): a token revoked meanwhile works until then, and while
        /// Keystone is away a token validated before still works until then.
        token_cache_time: Duration = Duration::from_secs(300), for API;
        /// At most so many validated tokens are remembered; beyond, the oldest go.
        token_cache_size: usize = 10_000, for API, check at_least_1;
        /// A service token (`X-Service-Token`, as Nova sends one beside its user's) counts only
        /// with one of these roles.
        service_token_roles: Vec<String> = vec!["service".to_owned()], for API;
        /// Whether a service token without one of `service_token_roles` is refused (401);
        /// otherwise it is ignored.
        service_token_roles_required: bool = false, for API;
        /// How long a call to Keystone may take (seconds); past it, the request is answered
        /// 503 (a token not validated before).
        http_request_timeout: Duration = Duration::from_secs(10), for API, check above_0;
    }

    /// The node event stream of `GET /ferrum/v1/watch` (`[watch]`; beyond Ironic).
    [watch] WatchConfig {
        /// Off, the endpoint answers 404 and conductors publish no watch events. Unset: on in
        /// all-in-one (an in-process hub, nearly free), off for `ferrum api` and `ferrum
        /// conductor`, where every conductor publishes every node event to RabbitMQ whether
        /// anyone watches or not (about a sixth of the deploy rate of the 2-core benchmark
        /// machine).
        enabled: Option<bool> = None,
            env "FERRUM_WATCH_ENABLED" flag "watch-enabled", for SERVERS;
        /// Events buffered for one client; a client that falls this far behind loses the oldest
        /// and is told how many (a `lagged` event). Nothing ever waits for a client.
        client_buffer: usize = 1024,
            env "FERRUM_WATCH_CLIENT_BUFFER" flag "watch-client-buffer", for API,
            check at_least_1;
        /// How often an idle stream gets a keep-alive comment (seconds).
        keepalive: Duration = Duration::from_secs(15),
            env "FERRUM_WATCH_KEEPALIVE" flag "watch-keepalive", for API,
            check |keepalive| {
                if keepalive.is_zero() {
                    return Err("must be more than 0".to_owned());
                }
                Ok(())
            };
    }
}
