//! The fake management interface: what Ironic's fake offers, and more, each setting (boot
//! device, indicators, virtual media) remembered in the node's `driver_internal_info` and the
//! boot mode and secure boot read from the node itself, so that the API's paths are real.

use async_trait::async_trait;
use serde_json::Value;
use tracing::info;

use crate::{
    drivers::{
        BootDevice, BootDeviceSetting, BootMode, DriverError, IndicatorInfo, IndicatorState,
        Indicators, ManagementInterface, VMEDIA_DEVICES, unsupported,
    },
    node::{JsonObject, Node},
};

pub struct FakeManagement;

/// Where the fake management interface keeps the boot device it was set to: in
/// `driver_internal_info`, as Ironic's own drivers keep what the hardware cannot tell them.
const BOOT_DEVICE_KEY: &str = "fake_boot_device";
const BOOT_PERSISTENT_KEY: &str = "fake_boot_device_persistent";

/// The devices the fake machine offers. Ironic's fake offers only `pxe` and always reads back
/// `pxe`, not persistent; this one offers what a typical BMC does and reads back what it was
/// last set to (`pxe`, not persistent, before that), so that a client's set-then-show is
/// tested for real. Its record lives on the node, like the fake power state, so it survives a
/// conductor restart or a take-over.
const FAKE_BOOT_DEVICES: [BootDevice; 5] = [
    BootDevice::Pxe,
    BootDevice::Disk,
    BootDevice::Cdrom,
    BootDevice::Bios,
    BootDevice::Safe,
];

#[async_trait]
impl ManagementInterface for FakeManagement {
    fn name(&self) -> &'static str {
        "fake"
    }

    async fn supported_boot_devices(&self, _node: &Node) -> Result<Vec<BootDevice>, DriverError> {
        Ok(FAKE_BOOT_DEVICES.to_vec())
    }

    async fn set_boot_device(
        &self,
        _node: &Node,
        device: BootDevice,
        persistent: bool,
    ) -> Result<JsonObject, DriverError> {
        if !FAKE_BOOT_DEVICES.contains(&device) {
            return Err(DriverError::InvalidParameterValue(format!(
                "Invalid boot device {} specified.",
                device.api_name()
            )));
        }
        let mut record = JsonObject::new();
        record.insert(BOOT_DEVICE_KEY.into(), device.api_name().into());
        record.insert(BOOT_PERSISTENT_KEY.into(), persistent.into());
        Ok(record)
    }

    async fn get_boot_device(&self, node: &Node) -> Result<BootDeviceSetting, DriverError> {
        let info = &node.driver_internal_info;
        let boot_device = match info.get(BOOT_DEVICE_KEY).and_then(Value::as_str) {
            Some(name) => BootDevice::parse(name).ok(),
            None => Some(BootDevice::Pxe),
        };
        let persistent = info
            .get(BOOT_PERSISTENT_KEY)
            .map_or(Some(false), Value::as_bool);
        Ok(BootDeviceSetting {
            boot_device,
            persistent,
        })
    }

    /// Ironic's fake has no boot mode (its base class refuses with UnsupportedDriverExtension);
    /// the fake machine has one, kept on the node itself (`boot_mode`, which the conductor
    /// writes after a change), so that the path of a change is real. Unknown until first set.
    async fn get_boot_mode(&self, node: &Node) -> Result<Option<BootMode>, DriverError> {
        Ok(node
            .boot_mode
            .as_deref()
            .and_then(|m| BootMode::parse(m).ok()))
    }

    async fn set_boot_mode(&self, node: &Node, mode: BootMode) -> Result<(), DriverError> {
        if mode == BootMode::Bios && node.secure_boot == Some(true) {
            return Err(DriverError::InvalidParameterValue(
                "Secure boot is on: the legacy BIOS boot mode cannot be set while it is".to_owned(),
            ));
        }
        Ok(())
    }

    /// Secure boot, kept on the node like the boot mode (off until first set). It is a UEFI
    /// feature: in the legacy BIOS boot mode the fake machine does not offer it.
    async fn get_secure_boot_state(&self, node: &Node) -> Result<bool, DriverError> {
        Ok(node.secure_boot.unwrap_or(false))
    }

    async fn set_secure_boot_state(&self, node: &Node, _on: bool) -> Result<(), DriverError> {
        if node.boot_mode.as_deref() == Some(BootMode::Bios.api_name()) {
            return Err(unsupported(node, "set_secure_boot_state"));
        }
        Ok(())
    }

    /// Ironic's fake has no NMI (its base class refuses with UnsupportedDriverExtension); the
    /// fake machine takes one, so that the call's path (lock, RPC, 204) is real.
    async fn inject_nmi(&self, node: &Node) -> Result<(), DriverError> {
        let uuid = &node.uuid;
        info!(node.uuid = %uuid, "fake NMI injected into node {uuid}");
        Ok(())
    }

    async fn supported_indicators(&self, _node: &Node) -> Result<Indicators, DriverError> {
        Ok(fake_indicators())
    }

    /// Ironic's fake always reads `on`; this one reads back what the indicator was last set
    /// to (`on` before that), kept on the node like the boot device.
    async fn get_indicator_state(
        &self,
        node: &Node,
        component: &str,
        indicator: &str,
    ) -> Result<IndicatorState, DriverError> {
        fake_indicator(component, indicator)?;
        let state = node
            .driver_internal_info
            .get(INDICATORS_KEY)
            .and_then(|set| set.get(format!("{indicator}@{component}")))
            .and_then(|v| serde_json::from_value(v.clone()).ok())
            .unwrap_or(IndicatorState::On);
        Ok(state)
    }

    async fn set_indicator_state(
        &self,
        node: &Node,
        component: &str,
        indicator: &str,
        state: IndicatorState,
    ) -> Result<JsonObject, DriverError> {
        let info = fake_indicator(component, indicator)?;
        if info.readonly {
            return Err(DriverError::InvalidParameterValue(format!(
                "Indicator {indicator} on component {component} is read-only."
            )));
        }
        if !info.states.contains(&state) {
            return Err(DriverError::InvalidParameterValue(format!(
                "Invalid state {} for indicator {indicator} on component {component}.",
                state.api_name()
            )));
        }
        let mut set = node
            .driver_internal_info
            .get(INDICATORS_KEY)
            .and_then(Value::as_object)
            .cloned()
            .unwrap_or_default();
        set.insert(format!("{indicator}@{component}"), state.api_name().into());
        let mut record = JsonObject::new();
        record.insert(INDICATORS_KEY.into(), Value::Object(set));
        Ok(record)
    }

    async fn attach_virtual_media(
        &self,
        node: &Node,
        device: BootDevice,
        image_url: &str,
    ) -> Result<JsonObject, DriverError> {
        let mut attached = fake_vmedia(node);
        attached.insert(device.api_name().into(), image_url.into());
        Ok(JsonObject::from_iter([(
            VMEDIA_KEY.to_owned(),
            Value::Object(attached),
        )]))
    }

    async fn detach_virtual_media(
        &self,
        node: &Node,
        devices: Option<&[BootDevice]>,
    ) -> Result<JsonObject, DriverError> {
        let mut attached = fake_vmedia(node);
        match devices {
            Some(devices) => {
                for device in devices {
                    attached.remove(device.api_name());
                }
            }
            None => attached.clear(),
        }
        Ok(JsonObject::from_iter([(
            VMEDIA_KEY.to_owned(),
            Value::Object(attached),
        )]))
    }

    async fn get_virtual_media(&self, node: &Node) -> Result<Vec<Value>, DriverError> {
        let attached = fake_vmedia(node);
        Ok(VMEDIA_DEVICES
            .iter()
            .map(|device| {
                let image = attached.get(device.api_name());
                serde_json::json!({
                    "media_types": [device.api_name()],
                    "inserted": image.is_some(),
                    "image": image.cloned().unwrap_or_else(|| Value::String(String::new())),
                })
            })
            .collect())
    }
}

/// Where the fake management interface keeps its virtual media: `{"<device>": "<image URL>"}`
/// in `driver_internal_info`. Ironic's fake management has no virtual media (the base
/// interface's UnsupportedDriverExtension); Ferrum's remembers what it was given, as it does
/// the boot device, so that the API's attach, list and detach are tested for real.
const VMEDIA_KEY: &str = "fake_vmedia";

fn fake_vmedia(node: &Node) -> JsonObject {
    node.driver_internal_info
        .get(VMEDIA_KEY)
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default()
}

/// Where the fake management interface keeps the indicator states it was set to:
/// `{"<indicator>@<component>": "<state>"}` in `driver_internal_info`.
const INDICATORS_KEY: &str = "fake_indicators";

/// Ironic's fake indicators: a read-only `led-0` on the chassis and a settable `led` on the
/// system.
fn fake_indicators() -> Indicators {
    let one = |name: &str, readonly, states: &[IndicatorState]| {
        let info = IndicatorInfo {
            readonly,
            states: states.to_vec(),
        };
        std::iter::once((name.to_owned(), info)).collect()
    };
    Indicators::from([
        (
            "chassis".to_owned(),
            one("led-0", true, &[IndicatorState::Off, IndicatorState::On]),
        ),
        (
            "system".to_owned(),
            one(
                "led",
                false,
                &[
                    IndicatorState::Blinking,
                    IndicatorState::Off,
                    IndicatorState::On,
                ],
            ),
        ),
    ])
}

/// The fake indicator `indicator` on `component`, or Ironic's messages for a bad name.
fn fake_indicator(component: &str, indicator: &str) -> Result<IndicatorInfo, DriverError> {
    let mut all = fake_indicators();
    let Some(mut on_component) = all.remove(component) else {
        return Err(DriverError::InvalidParameterValue(format!(
            "Invalid component {component} specified."
        )));
    };
    on_component.remove(indicator).ok_or_else(|| {
        DriverError::InvalidParameterValue(format!("Invalid indicator {indicator} specified."))
    })
}
