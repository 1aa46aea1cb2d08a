//! Boot interfaces (Ironic's `BootInterface`): how a node's next boot is made its agent's ramdisk
//! for a deploy or a cleaning, how that is undone, and how the node is then made to boot its
//! written image from its own disk (local boot, Ironic's only mode now).
//!
//! - `fake`: nothing to prepare (fake hardware and the sandboxed agent).
//! - `redfish-virtual-media` (`drivers::redfish`'s `boot.rs`): the deploy ISO in the BMC's virtual CD.
//! - `pxe` and `ipxe` ([`pxe`]): the deploy kernel and ramdisk fetched once into a shared cache
//!   ([`image_cache`]) and published per node with a boot configuration per MAC, over TFTP
//!   (`tftp_root`) or HTTP (`http_root`), and the node's MACs allowed DHCP with the boot file
//!   options while the ramdisk runs ([`dhcp`], Ironic's `dnsmasq` provider).
//!
//! A boot interface never writes the database: what it must remember (the MACs it allowed) it
//! returns as `driver_internal_info` keys, as the other interfaces do.

pub mod dhcp;
pub mod image_cache;
pub mod pxe;
pub mod vmedia_iso;

use std::{
    path::{Path, PathBuf},
    sync::Arc,
};

use async_trait::async_trait;
use serde_json::Value;

use self::{dhcp::Dhcp, image_cache::ImageCache};
use super::{BootDevice, Driver, DriverError, Properties, StepContext};
use crate::{
    config::ConductorConfig,
    node::{JsonObject, Node, management::BootMode},
};

#[async_trait]
pub trait BootInterface: Send + Sync + 'static {
    fn name(&self) -> &'static str;
    /// What it reads from `driver_info`.
    fn properties(&self) -> Properties {
        &[]
    }
    /// Checks what it needs of the node to boot its ramdisk, without touching hardware.
    fn validate(&self, _node: &Node) -> Result<(), DriverError> {
        Ok(())
    }
    /// Whether it can set up the node's boot for an in-band inspection (Ironic's
    /// `validate_inspection`): an error fails the inspection; `Unmanageable` lets it be
    /// inspected unmanaged where the conductor allows that (`inspector_require_managed_boot`).
    /// Virtual media has no such fallback (nor in Ironic).
    fn validate_inspection(
        &self,
        node: &Node,
        _ports: &[Value],
    ) -> Result<InspectionBoot, DriverError> {
        self.validate(node).map(|()| InspectionBoot::Managed)
    }
    /// Makes the node's next boot its agent's ramdisk (Ironic's `prepare_ramdisk`); what it
    /// returns are `driver_internal_info` keys for the conductor to record.
    async fn prepare_ramdisk(
        &self,
        node: &Node,
        ctx: &StepContext<'_>,
    ) -> Result<JsonObject, DriverError>;
    /// Undoes [`prepare_ramdisk`](BootInterface::prepare_ramdisk) (Ironic's `clean_up_ramdisk`):
    /// safe to run twice, or with nothing prepared.
    async fn clean_up_ramdisk(&self, node: &Node, driver: &Driver) -> Result<(), DriverError>;
    /// Makes the node boot its written image from its own disk from now on (Ironic's
    /// `prepare_instance` for local boot): the ramdisk's boot undone, then the disk the boot
    /// device, persistent. What it returns are `driver_internal_info` keys to record.
    async fn prepare_instance(
        &self,
        node: &Node,
        driver: &Driver,
    ) -> Result<JsonObject, DriverError> {
        self.clean_up_ramdisk(node, driver).await?;
        driver
            .management
            .set_boot_device(node, BootDevice::Disk, true)
            .await
    }
}

/// Whether a boot interface can boot a node for its in-band inspection.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum InspectionBoot {
    /// It sets the node's boot up (Ironic's managed inspection).
    Managed,
    /// It cannot, for the reason given, in Ironic's words (Ironic's UnsupportedDriverExtension
    /// from `validate_inspection`): the inspection may be unmanaged.
    Unmanageable(String),
}

/// The boot settings of a conductor, shared by its boot interfaces (one image cache per root).
#[derive(Debug)]
pub struct BootSettings {
    tftp_root: PathBuf,
    tftp_server: Option<String>,
    http_root: PathBuf,
    http_url: Option<String>,
    api_url: Option<String>,
    kernel_append_params: String,
    pxe_bootfile: [String; 2],
    ipxe_bootfile: [String; 2],
    tftp_cache: ImageCache,
    http_cache: ImageCache,
    ipxe_fallback_script: Option<String>,
    dhcp: Dhcp,
    bootloader: Option<String>,
    grub_config_path: String,
    isolinux_bin: PathBuf,
    ldlinux_c32: Option<PathBuf>,
    vmedia_kernel_append_params: String,
}

impl BootSettings {
    pub fn new(config: &ConductorConfig) -> Arc<BootSettings> {
        let cache = |root: &Path| {
            ImageCache::new(root, config.image_cache_size.into(), config.image_cache_ttl)
        };
        let url = |u: &Option<String>| u.as_ref().map(|u| u.trim_end_matches('/').to_owned());
        Arc::new(BootSettings {
            tftp_root: config.tftp_root.clone(),
            tftp_server: config.tftp_server.clone(),
            http_root: config.http_root.clone(),
            http_url: url(&config.http_url),
            api_url: url(&config.api_url),
            kernel_append_params: config.kernel_append_params.clone(),
            pxe_bootfile: [
                config.pxe_bootfile_name.clone(),
                config.uefi_pxe_bootfile_name.clone(),
            ],
            ipxe_bootfile: [
                config.ipxe_bootfile_name.clone(),
                config.uefi_ipxe_bootfile_name.clone(),
            ],
            tftp_cache: cache(&config.tftp_root),
            http_cache: cache(&config.http_root),
            ipxe_fallback_script: config.ipxe_fallback_script.clone(),
            dhcp: Dhcp::of(config),
            bootloader: config.bootloader.clone(),
            grub_config_path: config.grub_config_path.clone(),
            isolinux_bin: config.isolinux_bin.clone(),
            ldlinux_c32: config.ldlinux_c32.clone(),
            vmedia_kernel_append_params: config.redfish_kernel_append_params.clone(),
        })
    }

    /// The deploy ramdisk's kernel parameters: the node's `driver_info.kernel_append_params`
    /// or `default_append`, `ipa-api-url`, and in an inspection its callback. `what` boots.
    fn ramdisk_params(
        &self,
        node: &Node,
        default_append: &str,
        what: &str,
        inspection: bool,
    ) -> Result<String, DriverError> {
        let api_url = self.api_url.as_deref().ok_or_else(|| {
            DriverError::InvalidParameterValue(format!(
                "{what} needs the conductor's api_url (the Ironic API URL the deploy ramdisk calls back): it is not set."
            ))
        })?;
        let append = node
            .driver_info
            .get("kernel_append_params")
            .and_then(Value::as_str)
            .unwrap_or(default_append);
        let mut params = format!("{append} ipa-api-url={api_url}");
        if inspection {
            params.push_str(&format!(
                " ipa-inspection-callback-url={api_url}/v1/continue_inspection"
            ));
        }
        Ok(params.trim().to_owned())
    }
}

/// `ipxe` and `pxe`, in Ironic's order of `enabled_boot_interfaces`.
pub fn network_boot(settings: &Arc<BootSettings>) -> Vec<Arc<dyn BootInterface>> {
    vec![
        Arc::new(pxe::NetworkBoot {
            ipxe: true,
            settings: settings.clone(),
        }),
        Arc::new(pxe::NetworkBoot {
            ipxe: false,
            settings: settings.clone(),
        }),
    ]
}

/// A node's `driver_info` `deploy_kernel` and `deploy_ramdisk`, or which are missing, after
/// `what` (Ironic's words differ per interface).
pub(crate) fn deploy_kernel_and_ramdisk<'a>(
    node: &'a Node,
    what: &str,
) -> Result<[&'a str; 2], DriverError> {
    let get = |key: &str| {
        node.driver_info
            .get(key)
            .and_then(Value::as_str)
            .filter(|v| !v.is_empty())
    };
    if let (Some(kernel), Some(ramdisk)) = (get("deploy_kernel"), get("deploy_ramdisk")) {
        return Ok([kernel, ramdisk]);
    }
    let missing: Vec<String> = ["deploy_kernel", "deploy_ramdisk"]
        .into_iter()
        .filter(|key| get(key).is_none())
        .map(|key| format!("'{key}'"))
        .collect();
    Err(DriverError::MissingParameterValue(format!(
        "{what}. Some parameters were missing in node's driver_info and configuration. Missing are: [{}]",
        missing.join(", ")
    )))
}

/// `fake`: the ramdisk needs no preparing (fake hardware, and the sandboxed agent of the tests,
/// which runs without a boot).
pub struct FakeBoot;

#[async_trait]
impl BootInterface for FakeBoot {
    fn name(&self) -> &'static str {
        "fake"
    }

    async fn prepare_ramdisk(
        &self,
        _node: &Node,
        _ctx: &StepContext<'_>,
    ) -> Result<JsonObject, DriverError> {
        Ok(JsonObject::new())
    }

    async fn clean_up_ramdisk(&self, _node: &Node, _driver: &Driver) -> Result<(), DriverError> {
        Ok(())
    }
}

/// Puts a new file at `path`: `make` makes it beside (at the temporary path it is given), then
/// it is renamed into place, so a reader (dnsmasq, a TFTP or HTTP server, a booting node) sees
/// the old file or the new one, never half of one. The directory is made if missing.
///
/// The boot files' operations (small files, links and renames in the conductor's own
/// directories) run on the calling thread, as the embedded database's statements do
/// (`db::Inline`): each takes microseconds, while a hand-off to tokio's blocking pool and back
/// costs two wake-ups of other threads, most of a network boot's CPU time in the lab. Only
/// the bulk work (copying and hashing images) goes to the blocking pool.
pub(crate) async fn replace_file(
    path: &Path,
    make: impl AsyncFnOnce(&Path) -> std::io::Result<()>,
) -> Result<(), DriverError> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(|e| io_failed("create", dir, &e))?;
    }
    // Unique per write: two writers of one file in this process must not share a staged one.
    static WRITES: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let write = WRITES.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let staged = path.with_extension(format!("new-{}-{write}", std::process::id()));
    let _ = std::fs::remove_file(&staged);
    make(&staged)
        .await
        .map_err(|e| io_failed("write", &staged, &e))?;
    std::fs::rename(&staged, path).map_err(|e| io_failed("rename into", path, &e))
}

/// A file operation on `path` that failed, in words.
pub(crate) fn io_failed(what: &str, path: &Path, e: &std::io::Error) -> DriverError {
    DriverError::Failed(format!("Cannot {what} {}: {e}", path.display()))
}

/// Writes `text` at `path` through [`replace_file`].
pub(crate) async fn write_whole(path: &Path, text: &str) -> Result<(), DriverError> {
    replace_file(path, async |staged| std::fs::write(staged, text)).await
}

/// The boot mode a node deploys in (Ironic's `boot_mode_utils.get_boot_mode`): asked for in
/// `instance_info` (capabilities, or the older `deploy_boot_mode`), else the node's
/// `properties.capabilities`, else what the deploy recorded, else UEFI (Ironic's default
/// `[deploy]default_boot_mode`).
pub fn boot_mode_of(node: &Node) -> BootMode {
    let capability = |value: Option<&Value>, name: &str| -> Option<String> {
        match value? {
            Value::Object(map) => map.get(name).map(|v| match v {
                Value::String(s) => s.clone(),
                other => other.to_string(),
            }),
            Value::String(text) => {
                // A JSON object in a string, or Ironic's "key:value,key:value".
                if let Ok(Value::Object(map)) = serde_json::from_str::<Value>(text) {
                    return map.get(name).and_then(Value::as_str).map(str::to_owned);
                }
                text.split(',').find_map(|pair| {
                    let (k, v) = pair.split_once(':')?;
                    (k.trim() == name).then(|| v.trim().to_owned())
                })
            }
            _ => None,
        }
    };
    let instance_caps = node.instance_info.get("capabilities");
    if capability(instance_caps, "secure_boot").is_some_and(|v| v.eq_ignore_ascii_case("true")) {
        return BootMode::Uefi;
    }
    let wanted = capability(instance_caps, "boot_mode")
        .or_else(|| {
            node.instance_info
                .get("deploy_boot_mode")
                .and_then(Value::as_str)
                .map(str::to_owned)
        })
        .or_else(|| capability(node.properties.get("capabilities"), "boot_mode"))
        .or_else(|| {
            node.driver_internal_info
                .get("deploy_boot_mode")
                .and_then(Value::as_str)
                .map(str::to_owned)
        });
    match wanted.map(|m| m.to_ascii_lowercase()).as_deref() {
        Some("bios") => BootMode::Bios,
        _ => BootMode::Uefi,
    }
}

/// The MAC addresses a node boots from over the network: its ports with `pxe_enabled`, as the
/// agent is shown them (`StepContext::ports`), lower case.
pub fn pxe_macs(ports: &[Value]) -> Vec<String> {
    let mut macs: Vec<String> = ports
        .iter()
        .filter(|p| p.get("pxe_enabled").and_then(Value::as_bool) != Some(false))
        .filter_map(|p| p.get("address").and_then(Value::as_str))
        .map(str::to_ascii_lowercase)
        .collect();
    macs.sort();
    macs.dedup();
    macs
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn node(instance_info: Value, properties: Value, boot_mode: Option<&str>) -> Node {
        let mut node: Node = crate::node::tests_support::node();
        node.instance_info = serde_json::from_value(instance_info).unwrap();
        node.properties = serde_json::from_value(properties).unwrap();
        node.boot_mode = boot_mode.map(str::to_owned);
        node
    }

    #[test]
    fn the_boot_mode_is_the_instances_then_the_capabilitys_then_uefi() {
        let both = node(
            json!({"deploy_boot_mode": "bios"}),
            json!({"capabilities": "boot_mode:uefi"}),
            Some("uefi"),
        );
        assert_eq!(boot_mode_of(&both), BootMode::Bios);
        let capability = node(
            json!({}),
            json!({"capabilities": "x:y, boot_mode:bios"}),
            None,
        );
        assert_eq!(boot_mode_of(&capability), BootMode::Bios);
        let as_object = node(
            json!({}),
            json!({"capabilities": {"boot_mode": "bios"}}),
            None,
        );
        assert_eq!(boot_mode_of(&as_object), BootMode::Bios);
        assert_eq!(
            boot_mode_of(&node(json!({}), json!({}), None)),
            BootMode::Uefi
        );
    }

    #[test]
    fn the_pxe_macs_are_the_pxe_enabled_ports_lower_case_once_each() {
        let ports = [
            json!({"address": "52:54:00:AA:BB:01", "pxe_enabled": true}),
            json!({"address": "52:54:00:aa:bb:02", "pxe_enabled": false}),
            json!({"address": "52:54:00:aa:bb:01", "pxe_enabled": true}),
        ];
        assert_eq!(pxe_macs(&ports), vec!["52:54:00:aa:bb:01".to_owned()]);
    }
}
