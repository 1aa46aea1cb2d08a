//! The `ipmitool` management interface: the boot device (Ironic's forms: `chassis bootdev` in
//! BIOS mode, the raw Set System Boot Options command with the EFI bit in UEFI mode, the raw
//! command that keeps the BMC from dropping the setting after 60 s), read back from `chassis
//! bootparam get 5`, and NMIs (`power diag`). Ironic's ipmitool offers no indicators, boot mode
//! or virtual media: those are refused as its base interface refuses them.

use std::sync::Arc;

use async_trait::async_trait;
use serde_json::Value;

use super::{
    driver_info::{IpmiInfo, PROPERTIES, parse_driver_info},
    ipmitool::Ipmitool,
};
use crate::{
    drivers::{
        BootDevice, BootDeviceSetting, BootMode, DriverError, IndicatorState, Indicators,
        ManagementInterface, Properties, boot::boot_mode_of, unsupported,
    },
    node::{JsonObject, Node},
};

/// The boot devices and their Boot Device Selector values (Ironic's `BOOT_DEVICE_HEXA_MAP`,
/// IPMI 2.0 Set System Boot Options, parameter 5, data byte 2).
const BOOT_DEVICES: [(BootDevice, &str); 5] = [
    (BootDevice::Pxe, "0x04"),
    (BootDevice::Disk, "0x08"),
    (BootDevice::Cdrom, "0x14"),
    (BootDevice::Bios, "0x18"),
    (BootDevice::Safe, "0x0c"),
];

/// The `driver_internal_info` keys of `ipmi_force_boot_device` (Ironic's).
const PERSISTENT_DEVICE_KEY: &str = "persistent_boot_device";
const NEXT_BOOT_PERSISTENT_KEY: &str = "is_next_boot_persistent";

/// What the boot device setting needs of the conductor's settings.
#[derive(Debug, Clone, Copy)]
pub(super) struct BootSettings {
    /// `ipmi_disable_boot_timeout`, for nodes that do not say.
    pub(super) disable_boot_timeout: bool,
}

pub struct IpmiManagement {
    pub(super) tool: Arc<Ipmitool>,
    pub(super) boot: BootSettings,
}

/// Sets the boot device as Ironic's `IPMIManagement.set_boot_device`, returning the
/// `driver_internal_info` keys `ipmi_force_boot_device` keeps.
async fn set_boot_device(
    tool: &Ipmitool,
    boot: &BootSettings,
    info: &IpmiInfo,
    node: &Node,
    device: BootDevice,
    mut persistent: bool,
) -> Result<JsonObject, DriverError> {
    let Some(selector) = BOOT_DEVICES
        .iter()
        .find(|(d, _)| *d == device)
        .map(|(_, s)| *s)
    else {
        return Err(DriverError::InvalidParameterValue(format!(
            "Invalid boot device {} specified.",
            device.api_name()
        )));
    };
    if info
        .disable_boot_timeout
        .unwrap_or(boot.disable_boot_timeout)
    {
        // Without it, the BMC drops the setting 60 s after it is made (IPMI's boot flag
        // timeout), which a slow reboot outlives.
        tool.run(info, &node.uuid, &["raw", "0x00", "0x08", "0x03", "0x08"])
            .await?;
    } else {
        tracing::info!(node.uuid = %node.uuid,
            "For node {}, driver_info['ipmi_disable_boot_timeout'] is set to False, so not sending ipmi boot-timeout-disable", node.uuid);
    }
    let mut record = JsonObject::new();
    if info.force_boot_device {
        // Kept by Ferrum and set again, one time, before every power on.
        if persistent {
            record.insert(NEXT_BOOT_PERSISTENT_KEY.to_owned(), Value::Null);
            record.insert(
                PERSISTENT_DEVICE_KEY.to_owned(),
                Value::from(device.api_name()),
            );
        } else {
            record.insert(NEXT_BOOT_PERSISTENT_KEY.to_owned(), Value::Bool(false));
        }
        persistent = false;
    }
    if boot_mode_of(node) == BootMode::Uefi {
        // UEFI came after IPMI 2.0's last revision; `chassis bootdev ... options=efiboot` is
        // not understood everywhere, the raw form is: valid, EFI, and persistent or not.
        let flags = if persistent { "0xe0" } else { "0xa0" };
        let supermicro = node
            .properties
            .get("vendor")
            .and_then(Value::as_str)
            .is_some_and(|v| v.eq_ignore_ascii_case("supermicro"));
        // Supermicro's UEFI hard disk (Ironic's vendor-aware map).
        let selector = if supermicro && device == BootDevice::Disk {
            "0x24"
        } else {
            selector
        };
        tool.run(
            info,
            &node.uuid,
            &[
                "raw", "0x00", "0x08", "0x05", flags, selector, "0x00", "0x00", "0x00",
            ],
        )
        .await?;
        return Ok(record);
    }
    let mut command = vec!["chassis", "bootdev", device.api_name()];
    if persistent {
        command.push("options=persistent");
    }
    let out = tool.run(info, &node.uuid, &command).await?;
    if !out.stdout.contains("Set Boot Device to") {
        return Err(DriverError::Failed(format!(
            "IPMI call failed: {}. Error: the BMC did not confirm it: {:?}",
            command.join(" "),
            out.stdout.trim()
        )));
    }
    Ok(record)
}

/// Ironic's `ensure_next_boot_device`, before a power on: with `ipmi_force_boot_device`, the
/// device kept as persistent is set again, one time; unless the last setting was one-time.
/// A failure is only logged: the machine then boots from its configured order.
pub(super) async fn ensure_next_boot_device(
    tool: &Ipmitool,
    boot: &BootSettings,
    info: &IpmiInfo,
    node: &Node,
) {
    if !info.force_boot_device {
        return;
    }
    let internal = &node.driver_internal_info;
    // Ironic also forgets this flag here; a power interface records nothing in Ferrum, so it
    // stays until the next boot device setting.
    if internal.get(NEXT_BOOT_PERSISTENT_KEY) == Some(&Value::Bool(false)) {
        return;
    }
    let Some(device) = internal
        .get(PERSISTENT_DEVICE_KEY)
        .and_then(Value::as_str)
        .and_then(|d| BootDevice::parse(d).ok())
    else {
        return;
    };
    if let Err(e) = set_boot_device(tool, boot, info, node, device, false).await {
        tracing::warn!(node.uuid = %node.uuid,
            "Could not set the boot device {} again before powering on node {}: {e}", device.api_name(), node.uuid);
    }
}

/// What `chassis bootparam get 5` says (Ironic's reading of it).
fn parse_boot_parameter(out: &str) -> BootDeviceSetting {
    let selector = out.lines().find_map(|line| {
        line.split_once("Boot Device Selector :")
            .map(|(_, s)| s.trim())
    });
    let boot_device = selector.and_then(|s| {
        if s.contains("PXE") {
            Some(BootDevice::Pxe)
        } else if s.contains("Hard-Drive") {
            Some(if s.contains("Safe-Mode") {
                BootDevice::Safe
            } else {
                BootDevice::Disk
            })
        } else if s.contains("BIOS") {
            Some(BootDevice::Bios)
        } else if s.contains("CD/DVD") {
            Some(BootDevice::Cdrom)
        } else {
            None
        }
    });
    BootDeviceSetting {
        boot_device,
        persistent: Some(out.contains("Options apply to all future boots")),
    }
}

#[async_trait]
impl ManagementInterface for IpmiManagement {
    fn name(&self) -> &'static str {
        "ipmitool"
    }

    fn properties(&self) -> Properties {
        PROPERTIES
    }

    fn validate(&self, node: &Node) -> Result<(), DriverError> {
        parse_driver_info(node).map(|_| ())
    }

    async fn supported_boot_devices(&self, _node: &Node) -> Result<Vec<BootDevice>, DriverError> {
        Ok(BOOT_DEVICES.iter().map(|(d, _)| *d).collect())
    }

    async fn set_boot_device(
        &self,
        node: &Node,
        device: BootDevice,
        persistent: bool,
    ) -> Result<JsonObject, DriverError> {
        let info = parse_driver_info(node)?;
        set_boot_device(&self.tool, &self.boot, &info, node, device, persistent).await
    }

    async fn get_boot_device(&self, node: &Node) -> Result<BootDeviceSetting, DriverError> {
        let info = parse_driver_info(node)?;
        let internal = &node.driver_internal_info;
        if info.force_boot_device
            && internal.get(NEXT_BOOT_PERSISTENT_KEY) != Some(&Value::Bool(false))
            && let Some(device) = internal
                .get(PERSISTENT_DEVICE_KEY)
                .and_then(Value::as_str)
                .and_then(|d| BootDevice::parse(d).ok())
        {
            return Ok(BootDeviceSetting {
                boot_device: Some(device),
                persistent: Some(true),
            });
        }
        let out = self
            .tool
            .run(&info, &node.uuid, &["chassis", "bootparam", "get", "5"])
            .await?;
        Ok(parse_boot_parameter(&out.stdout))
    }

    async fn inject_nmi(&self, node: &Node) -> Result<(), DriverError> {
        let info = parse_driver_info(node)?;
        self.tool
            .run(&info, &node.uuid, &["power", "diag"])
            .await
            .map(|_| ())
    }

    async fn supported_indicators(&self, node: &Node) -> Result<Indicators, DriverError> {
        Err(unsupported(node, "get_supported_indicators"))
    }

    async fn get_indicator_state(
        &self,
        node: &Node,
        _component: &str,
        _indicator: &str,
    ) -> Result<IndicatorState, DriverError> {
        Err(unsupported(node, "get_indicator_state"))
    }

    async fn set_indicator_state(
        &self,
        node: &Node,
        _component: &str,
        _indicator: &str,
        _state: IndicatorState,
    ) -> Result<JsonObject, DriverError> {
        Err(unsupported(node, "set_indicator_state"))
    }

    async fn attach_virtual_media(
        &self,
        node: &Node,
        _device: BootDevice,
        _image_url: &str,
    ) -> Result<JsonObject, DriverError> {
        Err(unsupported(node, "attach_virtual_media"))
    }

    async fn detach_virtual_media(
        &self,
        node: &Node,
        _devices: Option<&[BootDevice]>,
    ) -> Result<JsonObject, DriverError> {
        Err(unsupported(node, "detach_virtual_media"))
    }

    async fn get_virtual_media(&self, node: &Node) -> Result<Vec<Value>, DriverError> {
        Err(unsupported(node, "get_virtual_media"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_boot_parameter_is_read_as_ironic_reads_it() {
        let out = "Boot parameter version: 1\nBoot parameter data: 8008000000\n Boot Flags :\n   - Boot Flag Valid\n   - Options apply to all future boots\n   - BIOS PC Compatible (legacy) boot \n   - Boot Device Selector : Force Boot from default Hard-Drive\n";
        let read = parse_boot_parameter(out);
        assert_eq!(read.boot_device, Some(BootDevice::Disk));
        assert_eq!(read.persistent, Some(true));
        let read = parse_boot_parameter(
            "   - Options apply to only next boot\n   - Boot Device Selector : Force PXE\n",
        );
        assert_eq!(
            (read.boot_device, read.persistent),
            (Some(BootDevice::Pxe), Some(false))
        );
        let read = parse_boot_parameter(
            "   - Boot Device Selector : Force Boot from default Hard-Drive, request Safe-Mode\n",
        );
        assert_eq!(read.boot_device, Some(BootDevice::Safe));
        assert_eq!(
            parse_boot_parameter("   - Boot Device Selector : No override\n").boot_device,
            None
        );
    }

    #[test]
    fn the_boot_mode_follows_ironic_order() {
        let mut node = crate::node::tests_support::node();
        assert_eq!(boot_mode_of(&node), BootMode::Uefi);
        node.properties
            .0
            .insert("capabilities".into(), json!("cpu_vt:true,boot_mode:bios"));
        assert_eq!(boot_mode_of(&node), BootMode::Bios);
        node.instance_info
            .0
            .insert("capabilities".into(), json!({"boot_mode": "uefi"}));
        assert_eq!(boot_mode_of(&node), BootMode::Uefi);
    }
}
