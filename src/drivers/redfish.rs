//! `redfish`: the hardware type of servers whose BMC speaks DMTF Redfish, with Ironic's `redfish`
//! power and management interfaces, `redfish-virtual-media` beside `ipxe` and `pxe` as boot
//! interfaces (names; the `direct` deploy inserts the deploy ISO when a node's is
//! `redfish-virtual-media`, `drivers::direct`), and the `direct` deploy.
//!
//! The node's `driver_info` is read as Ironic's `redfish_utils.parse_driver_info` reads it, with
//! its messages ([`parse_driver_info`]); `redfish_password` is masked wherever a node is shown,
//! as every key naming a password (`node::mask`). The HTTP client is `client.rs`.
//!
//! Power ([`RedfishPower`]): the system's `PowerState`, and `ComputerSystem.Reset` with the
//! reset types of Ironic's map (on `On`, off `ForceOff`, soft off `GracefulShutdown`, soft
//! reboot `GracefulRestart`); a reboot is Ironic's: `ForceOff` and, once off, `On` (or
//! `ForceRestart` with `disable_power_off`). Every change is followed by reading the state
//! until it is the one asked for, every half second, within the timeout the conductor gives
//! (`power_state_change_timeout`, `soft_power_off_timeout`, or the request's own).
//!
//! Management ([`RedfishManagement`]): the boot device through `Boot.BootSourceOverride*`,
//! sending `BootSourceOverrideEnabled` only when it differs from what the BMC reports, and
//! Ironic's fallback when a BMC refuses a persistent setting: a one-time setting, with the device
//! kept in `driver_internal_info.redfish_boot_device` and set again before every power on or
//! reboot. A BMC that ignores `Once` (sushy-tools always reports `Continuous`) is reported as it
//! reports itself, as Ironic does. Boot mode through `BootSourceOverrideMode`, NMIs through the
//! reset type `Nmi`, the system's indicator LED, and virtual media through the system's (else
//! its managers') `VirtualMedia` members.

pub mod client;

use std::{sync::Arc, time::Duration};

use async_trait::async_trait;
use serde_json::{Value, json};
use tokio::time::Instant;

use self::client::{Bmc, ClientSettings, Connections, RedfishError};
use super::{
    BootDevice, BootDeviceSetting, BootMode, DriverError, HardwareType, IndicatorInfo,
    IndicatorState, Indicators, ManagementInterface, NoSteps, NoVendor, PowerInterface, Properties,
    direct::DirectDeploy, local_image::LocalImages,
};
use crate::{
    config::ConductorConfig,
    node::{InterfaceKind, JsonObject, Node, PowerState, PowerTarget},
};

/// The boot interfaces a `redfish` node may name (Ironic's `RedfishHardware` offers these and
/// more); the first is the default, as Ironic's default `enabled_boot_interfaces` puts `ipxe`
/// first. Names only: stored and validated.
pub const BOOT_INTERFACES: &[&str] = &["ipxe", "pxe", "redfish-virtual-media"];

/// `redfish`, its clients made as `config` says.
pub fn hardware_type(config: &ConductorConfig) -> HardwareType {
    let connections = Arc::new(Connections::new(ClientSettings {
        connection_attempts: config.redfish_connection_attempts,
        connection_retry_interval: config.redfish_connection_retry_interval,
        ..ClientSettings::default()
    }));
    HardwareType {
        name: "redfish",
        passive: vec![
            (InterfaceKind::Boot, BOOT_INTERFACES.to_vec()),
            // Ironic's generic consoles follow its Redfish and IPMI ones (not built here).
            (InterfaceKind::Console, vec!["no-console", "fake-graphical"]),
            (InterfaceKind::Inspect, vec!["no-inspect", "agent"]),
            // Ironic's generic order: `flat` first (`generic.GenericHardware`).
            (InterfaceKind::Network, vec!["flat", "noop"]),
            (InterfaceKind::Raid, vec!["no-raid"]),
            (InterfaceKind::Storage, vec!["noop"]),
            (InterfaceKind::Rescue, vec!["no-rescue"]),
        ],
        power: vec![Arc::new(RedfishPower {
            connections: connections.clone(),
        })],
        management: vec![Arc::new(RedfishManagement { connections })],
        deploy: vec![Arc::new(DirectDeploy {
            images: LocalImages::new(config),
        })],
        vendor: vec![Arc::new(NoVendor)],
        bios: vec![Arc::new(NoSteps("no-bios"))],
        firmware: vec![Arc::new(NoSteps("no-firmware"))],
    }
}

/// The `driver_info` properties both interfaces read (in Ferrum's words).
const PROPERTIES: Properties = &[
    (
        "redfish_address",
        "The BMC's Redfish URL: scheme (http or https; https when left out) and authority, and optionally the path of the service root (default /redfish/v1/). Required.",
    ),
    (
        "redfish_system_id",
        "The path of the ComputerSystem to manage, e.g. /redfish/v1/Systems/1; needed only when the BMC manages more than one system. Optional.",
    ),
    (
        "redfish_username",
        "The BMC user (HTTP basic authentication). Optional.",
    ),
    ("redfish_password", "The BMC user's password. Optional."),
    (
        "redfish_verify_ca",
        "true (verify the BMC's certificate against the system's CAs, the default), false (do not verify), or the path of a CA bundle file or a directory of CA certificates. Optional.",
    ),
    (
        "redfish_auth_type",
        "How to authenticate: \"basic\", \"session\" or \"auto\" (the default; basic authentication in Ferrum). Optional.",
    ),
];

/// Whether to verify the BMC's TLS certificate (`redfish_verify_ca`).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum VerifyCa {
    Bool(bool),
    /// A CA bundle file or a directory of certificates.
    Path(String),
}

/// `redfish_auth_type`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AuthType {
    Basic,
    Session,
    Auto,
}

/// A node's Redfish settings, read from its `driver_info`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RedfishInfo {
    /// `scheme://authority`, no path.
    pub address: String,
    /// The service root's path, ending in `/`.
    pub root_prefix: String,
    pub system_id: Option<String>,
    pub username: Option<String>,
    pub password: Option<String>,
    pub verify_ca: VerifyCa,
    pub auth_type: AuthType,
}

/// Reads `driver_info` as Ironic's `parse_driver_info`, with its messages.
pub fn parse_driver_info(node: &Node) -> Result<RedfishInfo, DriverError> {
    let info = &node.driver_info;
    let uuid = &node.uuid;
    let address = match info.get("redfish_address") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) if s.is_empty() => None,
        Some(v) => Some(v),
    };
    let Some(address) = address else {
        return Err(DriverError::MissingParameterValue(format!(
            "Missing the following Redfish properties in node {uuid} driver_info: ['redfish_address']"
        )));
    };
    let invalid_address = |shown: &str| {
        DriverError::InvalidParameterValue(format!(
            "Invalid Redfish address {shown} set in driver_info/redfish_address on node {uuid}"
        ))
    };
    let Value::String(address) = address else {
        return Err(invalid_address(&address.to_string()));
    };
    let (address, root_prefix) = parse_address(address).ok_or_else(|| invalid_address(address))?;

    let system_id = match info.get("redfish_system_id") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) => Some(s.clone()),
        Some(other) => {
            return Err(DriverError::InvalidParameterValue(format!(
                "Invalid value \"{other}\" set in driver_info/redfish_system_id on node {uuid}. The value should be a path (string) to the resource that the driver will interact with. For example: /redfish/v1/Systems/1"
            )));
        }
    };

    let bad_verify = |v: &dyn std::fmt::Display| {
        DriverError::InvalidParameterValue(format!(
            "Invalid value type set in driver_info/redfish_verify_ca on node {uuid}. The value should be a Boolean or the path to a file/directory, not \"{v}\""
        ))
    };
    let verify_ca = match info.get("redfish_verify_ca") {
        None | Some(Value::Null) => VerifyCa::Bool(true),
        Some(Value::Bool(b)) => VerifyCa::Bool(*b),
        Some(Value::String(s)) => {
            let path = std::path::Path::new(s);
            if path.is_dir() || path.is_file() {
                VerifyCa::Path(s.clone())
            } else {
                VerifyCa::Bool(strict_bool(s).ok_or_else(|| bad_verify(s))?)
            }
        }
        Some(other) => return Err(bad_verify(other)),
    };

    let auth_type = match info.get("redfish_auth_type") {
        None | Some(Value::Null) => AuthType::Auto,
        Some(Value::String(s)) if s == "basic" => AuthType::Basic,
        Some(Value::String(s)) if s == "session" => AuthType::Session,
        Some(Value::String(s)) if s == "auto" => AuthType::Auto,
        Some(other) => {
            let shown = other
                .as_str()
                .map_or_else(|| other.to_string(), str::to_owned);
            return Err(DriverError::InvalidParameterValue(format!(
                "Invalid value \"{shown}\" set in driver_info/redfish_auth_type on node {uuid}. The value should be one of \"basic\", \"session\" or \"auto\"."
            )));
        }
    };
    let text = |key: &str| match info.get(key) {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) => Some(s.clone()),
        Some(other) => Some(other.to_string()),
    };
    Ok(RedfishInfo {
        address,
        root_prefix,
        system_id,
        username: text("redfish_username").filter(|u| !u.is_empty()),
        password: text("redfish_password"),
        verify_ca,
        auth_type,
    })
}

/// `scheme://authority` and the root path of a `redfish_address`: https when it names no
/// scheme (Ironic's rule), a bare IPv6 address bracketed; only http and https are spoken.
fn parse_address(address: &str) -> Option<(String, String)> {
    let address = address.trim();
    let text = if address.parse::<std::net::Ipv6Addr>().is_ok() {
        format!("https://[{address}]")
    } else if address.contains("://") {
        address.to_owned()
    } else {
        format!("https://{address}")
    };
    let url = reqwest::Url::parse(&text).ok()?;
    if !matches!(url.scheme(), "http" | "https") || url.host_str().is_none_or(str::is_empty) {
        return None;
    }
    if url.query().is_some() || url.fragment().is_some() {
        return None;
    }
    let host = url.host_str()?;
    let authority = match url.port() {
        Some(port) => format!("{host}:{port}"),
        None => host.to_owned(),
    };
    let path = url.path();
    let root = if path.is_empty() || path == "/" {
        "/redfish/v1/".to_owned()
    } else if path.ends_with('/') {
        path.to_owned()
    } else {
        format!("{path}/")
    };
    Some((format!("{}://{authority}", url.scheme()), root))
}

/// oslo's strict `bool_from_string`.
fn strict_bool(s: &str) -> Option<bool> {
    match s.trim().to_ascii_lowercase().as_str() {
        "1" | "t" | "true" | "on" | "y" | "yes" => Some(true),
        "0" | "f" | "false" | "off" | "n" | "no" => Some(false),
        _ => None,
    }
}

/// The node's BMC and the path of its system.
struct System {
    bmc: Bmc,
    path: String,
}

impl System {
    /// Connects to the node's BMC and finds its system: `redfish_system_id`, else the one
    /// system the BMC manages (sushy's default system).
    async fn of(connections: &Connections, node: &Node) -> Result<System, DriverError> {
        let info = parse_driver_info(node)?;
        let bmc = connections.bmc(&info, &node.uuid)?;
        let path = match &info.system_id {
            Some(id) if id.starts_with('/') => id.clone(),
            Some(id) => format!("{}Systems/{id}", bmc.root()),
            None => {
                let systems = bmc
                    .get(&format!("{}Systems", bmc.root()))
                    .await
                    .map_err(|e| e.into_driver(&node.uuid, ""))?;
                let members: Vec<&str> = systems
                    .get("Members")
                    .and_then(Value::as_array)
                    .map(|m| {
                        m.iter()
                            .filter_map(|m| m.get("@odata.id").and_then(Value::as_str))
                            .collect()
                    })
                    .unwrap_or_default();
                match members.as_slice() {
                    [one] => (*one).to_owned(),
                    [] => {
                        return Err(DriverError::Failed(format!(
                            "Redfish exception occurred. Error: the BMC of node {} manages no system",
                            node.uuid
                        )));
                    }
                    many => {
                        return Err(DriverError::InvalidParameterValue(format!(
                            "The BMC of node {} manages {} systems; set driver_info/redfish_system_id to the path of one of them, e.g. {}",
                            node.uuid,
                            many.len(),
                            many[0]
                        )));
                    }
                }
            }
        };
        Ok(System { bmc, path })
    }

    async fn get(&self) -> Result<Value, DriverError> {
        self.bmc.get(&self.path).await.map_err(|e| self.fail(e, ""))
    }

    fn fail(&self, e: RedfishError, context: &str) -> DriverError {
        if e.status() == Some(reqwest::StatusCode::NOT_FOUND) && context.is_empty() {
            return DriverError::Failed(format!(
                "Redfish exception occurred. Error: the Redfish System \"{}\" was not found for node {}: {e}",
                self.path,
                self.bmc.node()
            ));
        }
        e.into_driver(self.bmc.node(), context)
    }

    async fn power_state(&self) -> Result<PowerState, DriverError> {
        let system = self.get().await?;
        read_power_state(&system).ok_or_else(|| {
            DriverError::Failed(format!(
                "Redfish exception occurred. Error: the BMC of node {} reports the power state {} which is neither on nor off",
                self.bmc.node(),
                system.get("PowerState").unwrap_or(&Value::Null)
            ))
        })
    }

    /// Posts `ComputerSystem.Reset` with `reset_type`, to the target the system names.
    async fn reset(&self, reset_type: &str) -> Result<(), RedfishError> {
        let target = format!("{}/Actions/ComputerSystem.Reset", self.path);
        self.bmc
            .post(&target, &json!({ "ResetType": reset_type }))
            .await
    }

    /// Reads the power state until it is `target`, or fails once `timeout` has passed.
    async fn wait_for(&self, target: PowerState, timeout: Duration) -> Result<(), DriverError> {
        let deadline = Instant::now() + timeout;
        loop {
            if self.power_state().await? == target {
                return Ok(());
            }
            if Instant::now() >= deadline {
                return Err(DriverError::Failed(format!(
                    "Timed out after {} secs waiting for {target} on node {}.",
                    timeout.as_secs(),
                    self.bmc.node()
                )));
            }
            tokio::time::sleep(POWER_POLL_INTERVAL.min(deadline - Instant::now())).await;
        }
    }

    /// Resets with `reset_type` to reach `target`, and waits for it. A BMC refusing the reset
    /// with 400 or 409 when the system is already in the target state is a success (Ironic's
    /// handling of BMCs that refuse a no-op).
    async fn reset_and_wait(
        &self,
        reset_type: &str,
        target: PowerState,
        timeout: Duration,
        what: &str,
    ) -> Result<(), DriverError> {
        if let Err(e) = self.reset(reset_type).await {
            let no_op = matches!(
                e.status(),
                Some(reqwest::StatusCode::BAD_REQUEST | reqwest::StatusCode::CONFLICT)
            ) && self.power_state().await.ok() == Some(target);
            if !no_op {
                return Err(self.fail(
                    e,
                    &format!(
                        "Setting power state to {what} failed for node {}. Error: ",
                        self.bmc.node()
                    ),
                ));
            }
        }
        self.wait_for(target, timeout).await
    }
}

/// How often the power state is read while a change is awaited.
const POWER_POLL_INTERVAL: Duration = Duration::from_millis(500);

/// Ironic's map of a system's `PowerState`.
fn read_power_state(system: &Value) -> Option<PowerState> {
    match system.get("PowerState").and_then(Value::as_str)? {
        "On" | "PoweringOn" => Some(PowerState::On),
        "Off" | "PoweringOff" => Some(PowerState::Off),
        _ => None,
    }
}

pub struct RedfishPower {
    connections: Arc<Connections>,
}

impl RedfishPower {
    /// Sets the boot device the BMC would not keep persistently again, before a power on
    /// (Ironic's `restore_boot_device`, called from its power interface); a failure is only
    /// logged, the machine booting from its configured order.
    async fn restore_boot_device(&self, system: &System, node: &Node) {
        if node.interfaces.management != "redfish" {
            return;
        }
        let Some(device) = node
            .driver_internal_info
            .get(ONE_TIME_DEVICE_KEY)
            .and_then(Value::as_str)
            .and_then(|d| BootDevice::parse(d).ok())
        else {
            return;
        };
        let Some(target) = redfish_target(device) else {
            return;
        };
        tracing::debug!(node.uuid = %node.uuid, "Restoring boot device {device:?} on node {}", node.uuid);
        let body = json!({"Boot": {"BootSourceOverrideTarget": target, "BootSourceOverrideEnabled": "Once"}});
        if let Err(e) = system.bmc.patch(&system.path, &body).await {
            tracing::warn!(node.uuid = %node.uuid,
                "Unable to recover boot device {target} for node {}, relying on the pre-configured boot order. Error: {e}",
                node.uuid);
        }
    }
}

#[async_trait]
impl PowerInterface for RedfishPower {
    fn name(&self) -> &'static str {
        "redfish"
    }

    fn properties(&self) -> Properties {
        PROPERTIES
    }

    fn validate(&self, node: &Node) -> Result<(), DriverError> {
        parse_driver_info(node).map(|_| ())
    }

    /// `scheme://host[:port]` as `parse_driver_info` reads it (the host lower-cased, a port
    /// that is the scheme's default left out), so one BMC has one name however it is written.
    fn bmc(&self, node: &Node) -> Option<String> {
        parse_driver_info(node).ok().map(|info| info.address)
    }

    async fn get_power_state(&self, node: &Node) -> Result<PowerState, DriverError> {
        System::of(&self.connections, node)
            .await?
            .power_state()
            .await
    }

    async fn set_power_state(
        &self,
        node: &Node,
        target: PowerState,
        timeout: Duration,
    ) -> Result<(), DriverError> {
        let target = match target {
            PowerState::On => PowerTarget::On,
            PowerState::Off => PowerTarget::Off,
        };
        self.change_power(node, target, timeout).await
    }

    async fn reboot(&self, node: &Node, timeout: Duration) -> Result<(), DriverError> {
        self.change_power(node, PowerTarget::Reboot, timeout).await
    }

    async fn change_power(
        &self,
        node: &Node,
        target: PowerTarget,
        timeout: Duration,
    ) -> Result<(), DriverError> {
        let system = System::of(&self.connections, node).await?;
        let current = system.power_state().await?;
        let what = target.api_name();
        match target {
            PowerTarget::On | PowerTarget::Off | PowerTarget::SoftOff => {
                let state = target.resulting_state();
                // Ironic's conductor leaves a node alone that is already in the state asked.
                if current == state {
                    return Ok(());
                }
                if state == PowerState::On {
                    self.restore_boot_device(&system, node).await;
                }
                let reset = match target {
                    PowerTarget::On => "On",
                    PowerTarget::Off => "ForceOff",
                    _ => "GracefulShutdown",
                };
                system.reset_and_wait(reset, state, timeout, what).await
            }
            PowerTarget::SoftReboot => {
                self.restore_boot_device(&system, node).await;
                if current == PowerState::Off {
                    return system
                        .reset_and_wait("On", PowerState::On, timeout, what)
                        .await;
                }
                system
                    .reset_and_wait("GracefulRestart", PowerState::On, timeout, what)
                    .await
            }
            PowerTarget::Reboot => {
                let reboot_failed = |e: DriverError, state: &str| {
                    DriverError::Failed(format!(
                        "Reboot failed for node {} when setting power state to {state}. Error: {e}",
                        node.uuid
                    ))
                };
                if current == PowerState::On && node.disable_power_off {
                    self.restore_boot_device(&system, node).await;
                    return system
                        .reset_and_wait("ForceRestart", PowerState::On, timeout, what)
                        .await
                        .map_err(|e| reboot_failed(e, "rebooting"));
                }
                if current == PowerState::On {
                    system
                        .reset_and_wait("ForceOff", PowerState::Off, timeout, "power off")
                        .await
                        .map_err(|e| reboot_failed(e, "power off"))?;
                }
                self.restore_boot_device(&system, node).await;
                system
                    .reset_and_wait("On", PowerState::On, timeout, "power on")
                    .await
                    .map_err(|e| reboot_failed(e, "power on"))
            }
        }
    }
}

/// Where the device a BMC would not keep persistently is remembered (Ironic's key).
const ONE_TIME_DEVICE_KEY: &str = "redfish_boot_device";

/// Ironic's map of boot devices to `BootSourceOverrideTarget` values.
const BOOT_TARGETS: [(BootDevice, &str); 5] = [
    (BootDevice::Pxe, "Pxe"),
    (BootDevice::Disk, "Hdd"),
    (BootDevice::Cdrom, "Cd"),
    (BootDevice::Bios, "BiosSetup"),
    (BootDevice::Uefihttp, "UefiHttp"),
];

fn redfish_target(device: BootDevice) -> Option<&'static str> {
    BOOT_TARGETS
        .iter()
        .find(|(d, _)| *d == device)
        .map(|(_, t)| *t)
}

fn boot_device_of(target: &str) -> Option<BootDevice> {
    BOOT_TARGETS
        .iter()
        .find(|(_, t)| *t == target)
        .map(|(d, _)| *d)
}

/// The Redfish media types of a virtual media device (Ironic's `VMEDIA_DEVICES_MAP`).
fn media_type(device: BootDevice) -> &'static [&'static str] {
    match device {
        BootDevice::Cdrom => &["CD", "DVD"],
        BootDevice::Floppy => &["Floppy"],
        _ => &["USBStick"],
    }
}

pub struct RedfishManagement {
    connections: Arc<Connections>,
}

impl RedfishManagement {
    /// The virtual media members of the system, else of its managers: (path, resource).
    async fn virtual_media(&self, system: &System) -> Result<Vec<(String, Value)>, DriverError> {
        let body = system.get().await?;
        let mut collections: Vec<String> = Vec::new();
        if let Some(p) = body
            .pointer("/VirtualMedia/@odata.id")
            .and_then(Value::as_str)
        {
            collections.push(p.to_owned());
        } else {
            let managers = body
                .pointer("/Links/ManagedBy")
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default();
            for m in managers {
                let Some(path) = m.get("@odata.id").and_then(Value::as_str) else {
                    continue;
                };
                let manager = system.bmc.get(path).await.map_err(|e| system.fail(e, ""))?;
                if let Some(p) = manager
                    .pointer("/VirtualMedia/@odata.id")
                    .and_then(Value::as_str)
                {
                    collections.push(p.to_owned());
                }
            }
        }
        let mut out = Vec::new();
        for collection in collections {
            let list = system
                .bmc
                .get(&collection)
                .await
                .map_err(|e| system.fail(e, ""))?;
            for member in list
                .get("Members")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                let Some(path) = member.get("@odata.id").and_then(Value::as_str) else {
                    continue;
                };
                let resource = system.bmc.get(path).await.map_err(|e| system.fail(e, ""))?;
                out.push((path.to_owned(), resource));
            }
        }
        Ok(out)
    }
}

fn media_types(resource: &Value) -> Vec<&str> {
    resource
        .get("MediaTypes")
        .and_then(Value::as_array)
        .map(|t| t.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default()
}

fn is_inserted(resource: &Value) -> bool {
    resource
        .get("Inserted")
        .and_then(Value::as_bool)
        .unwrap_or(false)
}

fn action_target(resource: &Value, path: &str, action: &str) -> String {
    resource
        .pointer(&format!("/Actions/#VirtualMedia.{action}/target"))
        .and_then(Value::as_str)
        .map_or_else(
            || format!("{path}/Actions/VirtualMedia.{action}"),
            str::to_owned,
        )
}

#[async_trait]
impl ManagementInterface for RedfishManagement {
    fn name(&self) -> &'static str {
        "redfish"
    }

    fn properties(&self) -> Properties {
        PROPERTIES
    }

    fn validate(&self, node: &Node) -> Result<(), DriverError> {
        parse_driver_info(node).map(|_| ())
    }

    /// The devices of the system's `BootSourceOverrideTarget@Redfish.AllowableValues` that
    /// Ironic knows, else Ironic's list.
    async fn supported_boot_devices(&self, node: &Node) -> Result<Vec<BootDevice>, DriverError> {
        let system = System::of(&self.connections, node).await?;
        let body = system.get().await?;
        let allowed: Option<Vec<BootDevice>> = body
            .pointer("/Boot/BootSourceOverrideTarget@Redfish.AllowableValues")
            .and_then(Value::as_array)
            .map(|v| {
                v.iter()
                    .filter_map(Value::as_str)
                    .filter_map(boot_device_of)
                    .collect()
            });
        Ok(match allowed {
            Some(devices) if !devices.is_empty() => devices,
            _ => BOOT_TARGETS.iter().map(|(d, _)| *d).collect(),
        })
    }

    async fn set_boot_device(
        &self,
        node: &Node,
        device: BootDevice,
        persistent: bool,
    ) -> Result<JsonObject, DriverError> {
        let target = redfish_target(device).ok_or_else(|| {
            DriverError::InvalidParameterValue(format!(
                "Invalid boot device {} specified for node {}; the redfish management interface supports {}.",
                device.api_name(),
                node.uuid,
                BOOT_TARGETS
                    .iter()
                    .map(|(d, _)| d.api_name())
                    .collect::<Vec<_>>()
                    .join(", ")
            ))
        })?;
        let system = System::of(&self.connections, node).await?;
        let body = system.get().await?;
        let desired = if persistent { "Continuous" } else { "Once" };
        let current = body
            .pointer("/Boot/BootSourceOverrideEnabled")
            .and_then(Value::as_str);
        // Some BMCs refuse `BootSourceOverrideEnabled` set to what it already is.
        let mut boot = json!({ "BootSourceOverrideTarget": target });
        if current != Some(desired) {
            boot["BootSourceOverrideEnabled"] = desired.into();
        }
        let mut record = JsonObject::new();
        // Setting a device forgets one kept for an earlier one-time fallback.
        if node.driver_internal_info.contains_key(ONE_TIME_DEVICE_KEY) {
            record.insert(ONE_TIME_DEVICE_KEY.to_owned(), Value::Null);
        }
        let failed = |e: RedfishError| {
            DriverError::Failed(format!(
                "Redfish set boot device failed for node {}. Error: {e}",
                node.uuid
            ))
        };
        match system
            .bmc
            .patch(&system.path, &json!({ "Boot": boot }))
            .await
        {
            Ok(()) => {}
            Err(e) if boot.get("BootSourceOverrideEnabled") == Some(&json!("Continuous")) => {
                // Continuous settings left Redfish; some BMCs refuse them. Ironic's way
                // around: a one-time setting, made again before every power on.
                tracing::debug!(node.uuid = %node.uuid,
                    "Error {e} when trying to set a persistent boot device on node {}, falling back to one-time boot settings", node.uuid);
                let once = json!({"Boot": {"BootSourceOverrideTarget": target, "BootSourceOverrideEnabled": "Once"}});
                system
                    .bmc
                    .patch(&system.path, &once)
                    .await
                    .map_err(failed)?;
                tracing::warn!(node.uuid = %node.uuid,
                    "Could not set persistent boot device to {target} for node {}, using one-time boot device instead", node.uuid);
                record.insert(
                    ONE_TIME_DEVICE_KEY.to_owned(),
                    Value::from(device.api_name()),
                );
            }
            Err(e) => return Err(failed(e)),
        }
        Ok(record)
    }

    async fn get_boot_device(&self, node: &Node) -> Result<BootDeviceSetting, DriverError> {
        let system = System::of(&self.connections, node).await?;
        let body = system.get().await?;
        let boot = body.get("Boot").cloned().unwrap_or(Value::Null);
        Ok(BootDeviceSetting {
            boot_device: boot
                .get("BootSourceOverrideTarget")
                .and_then(Value::as_str)
                .and_then(boot_device_of),
            persistent: match boot
                .get("BootSourceOverrideEnabled")
                .and_then(Value::as_str)
            {
                Some("Continuous") => Some(true),
                Some("Once") => Some(false),
                _ => None,
            },
        })
    }

    async fn inject_nmi(&self, node: &Node) -> Result<(), DriverError> {
        let system = System::of(&self.connections, node).await?;
        system.reset("Nmi").await.map_err(|e| {
            let hint = if e.status() == Some(reqwest::StatusCode::NOT_IMPLEMENTED) {
                " (the BMC does not implement NMIs)"
            } else {
                ""
            };
            DriverError::Failed(format!(
                "Redfish inject NMI failed for node {}. Error: {e}{hint}",
                node.uuid
            ))
        })
    }

    /// The system's indicator LED (`IndicatorLED`).
    async fn supported_indicators(&self, _node: &Node) -> Result<Indicators, DriverError> {
        let mut leds = std::collections::BTreeMap::new();
        leds.insert(
            "led".to_owned(),
            IndicatorInfo {
                readonly: false,
                states: vec![
                    IndicatorState::Off,
                    IndicatorState::On,
                    IndicatorState::Blinking,
                ],
            },
        );
        let mut out = Indicators::new();
        out.insert("system".to_owned(), leds);
        Ok(out)
    }

    async fn get_indicator_state(
        &self,
        node: &Node,
        component: &str,
        indicator: &str,
    ) -> Result<IndicatorState, DriverError> {
        check_indicator(component, indicator)?;
        let system = System::of(&self.connections, node).await?;
        let body = system.get().await?;
        Ok(match body.get("IndicatorLED").and_then(Value::as_str) {
            Some("Lit") => IndicatorState::On,
            Some("Off") => IndicatorState::Off,
            Some("Blinking") => IndicatorState::Blinking,
            _ => IndicatorState::Unknown,
        })
    }

    async fn set_indicator_state(
        &self,
        node: &Node,
        component: &str,
        indicator: &str,
        state: IndicatorState,
    ) -> Result<JsonObject, DriverError> {
        check_indicator(component, indicator)?;
        let value = match state {
            IndicatorState::On => "Lit",
            IndicatorState::Off => "Off",
            IndicatorState::Blinking => "Blinking",
            IndicatorState::Unknown => {
                return Err(DriverError::InvalidParameterValue(
                    "Invalid indicator state unknown specified.".to_owned(),
                ));
            }
        };
        let system = System::of(&self.connections, node).await?;
        system
            .bmc
            .patch(&system.path, &json!({ "IndicatorLED": value }))
            .await
            .map_err(|e| {
                DriverError::Failed(format!(
                    "Redfish set {component} indicator {indicator} state {} failed for node {}. Error: {e}",
                    state.api_name(),
                    node.uuid
                ))
            })?;
        Ok(JsonObject::new())
    }

    async fn get_boot_mode(&self, node: &Node) -> Result<Option<BootMode>, DriverError> {
        let system = System::of(&self.connections, node).await?;
        let body = system.get().await?;
        Ok(
            match body
                .pointer("/Boot/BootSourceOverrideMode")
                .and_then(Value::as_str)
            {
                Some("UEFI") => Some(BootMode::Uefi),
                Some("Legacy") => Some(BootMode::Bios),
                _ => None,
            },
        )
    }

    async fn set_boot_mode(&self, node: &Node, mode: BootMode) -> Result<(), DriverError> {
        let system = System::of(&self.connections, node).await?;
        let body = system.get().await?;
        let value = match mode {
            BootMode::Uefi => "UEFI",
            BootMode::Bios => "Legacy",
        };
        // Sent with the target the BMC has, as sushy sends a whole set of boot options.
        let mut boot = json!({ "BootSourceOverrideMode": value });
        if let Some(target) = body
            .pointer("/Boot/BootSourceOverrideTarget")
            .and_then(Value::as_str)
        {
            boot["BootSourceOverrideTarget"] = target.into();
        }
        system
            .bmc
            .patch(&system.path, &json!({ "Boot": boot }))
            .await
            .map_err(|e| {
                DriverError::Failed(format!(
                    "Setting boot mode to {} failed for node {}. Error: {e}",
                    mode.api_name(),
                    node.uuid
                ))
            })
    }

    async fn attach_virtual_media(
        &self,
        node: &Node,
        device: BootDevice,
        image_url: &str,
    ) -> Result<JsonObject, DriverError> {
        let system = System::of(&self.connections, node).await?;
        let media = self.virtual_media(&system).await?;
        let wanted = media_type(device);
        let Some((path, resource)) = media
            .iter()
            .find(|(_, r)| media_types(r).iter().any(|t| wanted.contains(t)))
        else {
            return Err(DriverError::InvalidParameterValue(format!(
                "No suitable virtual media device found for node {} to mount image {image_url}",
                node.uuid
            )));
        };
        let mount_failed = |e: RedfishError| {
            DriverError::Failed(format!(
                "Virtual media mount failed for node {} with image {image_url}. Error: {e}",
                node.uuid
            ))
        };
        if is_inserted(resource) {
            if resource.get("Image").and_then(Value::as_str) == Some(image_url) {
                return Ok(JsonObject::new());
            }
            let eject = action_target(resource, path, "EjectMedia");
            system
                .bmc
                .post(&eject, &json!({}))
                .await
                .map_err(mount_failed)?;
        }
        let insert = action_target(resource, path, "InsertMedia");
        system
            .bmc
            .post(
                &insert,
                &json!({"Image": image_url, "Inserted": true, "WriteProtected": true}),
            )
            .await
            .map_err(mount_failed)?;
        Ok(JsonObject::new())
    }

    async fn detach_virtual_media(
        &self,
        node: &Node,
        devices: Option<&[BootDevice]>,
    ) -> Result<JsonObject, DriverError> {
        let system = System::of(&self.connections, node).await?;
        let media = self.virtual_media(&system).await?;
        for (path, resource) in &media {
            let types = media_types(resource);
            let selected = match devices {
                None => true,
                Some(devices) => devices
                    .iter()
                    .any(|d| media_type(*d).iter().any(|t| types.contains(t))),
            };
            if !selected || !is_inserted(resource) {
                continue;
            }
            let eject = action_target(resource, path, "EjectMedia");
            system.bmc.post(&eject, &json!({})).await.map_err(|e| {
                DriverError::Failed(format!(
                    "Virtual media eject failed for node {}. Error: {e}",
                    node.uuid
                ))
            })?;
        }
        Ok(JsonObject::new())
    }

    async fn get_virtual_media(&self, node: &Node) -> Result<Vec<Value>, DriverError> {
        let system = System::of(&self.connections, node).await?;
        let media = self.virtual_media(&system).await?;
        if media.is_empty() {
            return Err(DriverError::InvalidParameterValue(
                "No suitable virtual media device found".to_owned(),
            ));
        }
        Ok(media
            .iter()
            .map(|(_, r)| {
                json!({
                    "media_types": media_types(r),
                    "inserted": is_inserted(r),
                    "image": r.get("Image").cloned().unwrap_or(Value::Null),
                })
            })
            .collect())
    }
}

fn check_indicator(component: &str, indicator: &str) -> Result<(), DriverError> {
    if component != "system" || indicator != "led" {
        return Err(DriverError::InvalidParameterValue(format!(
            "Invalid component {component} or indicator {indicator} specified."
        )));
    }
    Ok(())
}

/// `redfish-virtual-media`'s check of `driver_info` (Ironic's `_parse_driver_info` of the
/// boot interface): a deploy ISO, or a deploy kernel and ramdisk, and the BMC's settings.
pub fn validate_virtual_media_boot(node: &Node) -> Result<(), DriverError> {
    let info = &node.driver_info;
    let has = |k: &str| {
        info.get(k)
            .is_some_and(|v| !v.is_null() && v.as_str() != Some(""))
    };
    if !has("deploy_iso") {
        let missing: Vec<&str> = ["deploy_kernel", "deploy_ramdisk"]
            .into_iter()
            .filter(|k| !has(k))
            .collect();
        if !missing.is_empty() {
            return Err(DriverError::MissingParameterValue(format!(
                "Error validating Redfish virtual media. Some parameters were missing in node's driver_info. Missing are: [{}]",
                missing
                    .iter()
                    .map(|k| format!("'{k}'"))
                    .collect::<Vec<_>>()
                    .join(", ")
            )));
        }
    }
    parse_driver_info(node).map(|_| ())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(info: Value) -> Node {
        let mut node = crate::node::tests_support::node();
        node.driver = "redfish".into();
        node.driver_info = crate::node::Json(info.as_object().cloned().unwrap_or_default());
        node
    }

    #[test]
    fn addresses_are_read_as_ironic_reads_them() {
        let info =
            parse_driver_info(&node(json!({"redfish_address": "bmc.example:8443"}))).unwrap();
        assert_eq!(info.address, "https://bmc.example:8443");
        assert_eq!(info.root_prefix, "/redfish/v1/");
        let info = parse_driver_info(&node(
            json!({"redfish_address": "http://127.0.0.1:8000/custom/v1"}),
        ))
        .unwrap();
        assert_eq!(info.address, "http://127.0.0.1:8000");
        assert_eq!(info.root_prefix, "/custom/v1/");
        let info = parse_driver_info(&node(json!({"redfish_address": "fd00::1"}))).unwrap();
        assert_eq!(info.address, "https://[fd00::1]");
        assert_eq!(info.auth_type, AuthType::Auto);
        assert_eq!(info.verify_ca, VerifyCa::Bool(true));

        let e = parse_driver_info(&node(json!({}))).unwrap_err();
        assert!(matches!(e, DriverError::MissingParameterValue(_)), "{e}");
        assert!(e.to_string().contains("['redfish_address']"), "{e}");
        for bad in ["ftp://bmc", "http://", "http://bmc/x?y=1", "https://b mc"] {
            let e = parse_driver_info(&node(json!({"redfish_address": bad}))).unwrap_err();
            assert!(
                e.to_string().starts_with("Invalid Redfish address"),
                "{bad}: {e}"
            );
        }
    }

    #[test]
    fn verify_ca_and_auth_type_take_ironic_values() {
        let with = |k: &str, v: Value| {
            let mut info = json!({"redfish_address": "http://bmc"});
            info[k] = v;
            parse_driver_info(&node(info))
        };
        assert_eq!(
            with("redfish_verify_ca", json!("no")).unwrap().verify_ca,
            VerifyCa::Bool(false)
        );
        assert_eq!(
            with("redfish_verify_ca", json!("/")).unwrap().verify_ca,
            VerifyCa::Path("/".into())
        );
        let e = with("redfish_verify_ca", json!("/no/such/ca")).unwrap_err();
        assert!(
            e.to_string().contains("should be a Boolean or the path"),
            "{e}"
        );
        let e = with("redfish_verify_ca", json!(3)).unwrap_err();
        assert!(e.to_string().contains("redfish_verify_ca"), "{e}");
        assert_eq!(
            with("redfish_auth_type", json!("basic")).unwrap().auth_type,
            AuthType::Basic
        );
        let e = with("redfish_auth_type", json!("digest")).unwrap_err();
        assert!(
            e.to_string()
                .contains("should be one of \"basic\", \"session\" or \"auto\""),
            "{e}"
        );
        let e = with("redfish_system_id", json!(5)).unwrap_err();
        assert!(e.to_string().contains("redfish_system_id"), "{e}");
    }

    #[test]
    fn virtual_media_boot_needs_a_deploy_image() {
        let e =
            validate_virtual_media_boot(&node(json!({"redfish_address": "http://b"}))).unwrap_err();
        assert!(
            e.to_string()
                .ends_with("Missing are: ['deploy_kernel', 'deploy_ramdisk']"),
            "{e}"
        );
        validate_virtual_media_boot(&node(
            json!({"redfish_address": "http://b", "deploy_iso": "http://i/x.iso"}),
        ))
        .unwrap();
    }
}
