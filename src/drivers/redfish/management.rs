//! The `redfish` management interface: the boot device (with Ironic's one-time fallback for a
//! BMC that refuses a persistent setting), the boot mode, NMIs, the system's indicator LED, and
//! virtual media through the system's (else its managers') `VirtualMedia` members.

use std::sync::Arc;

use async_trait::async_trait;
use serde_json::{Value, json};

use super::{
    client::{Connections, RedfishError},
    driver_info::{PROPERTIES, parse_driver_info},
    system::System,
};
use crate::{
    drivers::{
        BootDevice, BootDeviceSetting, BootMode, DriverError, IndicatorInfo, IndicatorState,
        Indicators, ManagementInterface, Properties,
    },
    node::{JsonObject, Node},
};

/// Where the device a BMC would not keep persistently is remembered (Ironic's key).
pub(super) const ONE_TIME_DEVICE_KEY: &str = "redfish_boot_device";

/// Ironic's map of boot devices to `BootSourceOverrideTarget` values.
const BOOT_TARGETS: [(BootDevice, &str); 5] = [
    (BootDevice::Pxe, "Pxe"),
    (BootDevice::Disk, "Hdd"),
    (BootDevice::Cdrom, "Cd"),
    (BootDevice::Bios, "BiosSetup"),
    (BootDevice::Uefihttp, "UefiHttp"),
];

pub(super) fn redfish_target(device: BootDevice) -> Option<&'static str> {
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
    pub(super) connections: Arc<Connections>,
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
