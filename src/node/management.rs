//! The words of a node's management, as Ironic names them: boot devices and modes, indicators
//! and their states. The API reads them from clients and the drivers act on them.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::{error::Error, node::Node};

/// Ironic's refusal to change the boot mode or secure boot of a node in an unstable state
/// (`NodeStatesController.boot_mode`), judged again under the lock.
pub fn refuse_unstable(node: &Node) -> Result<(), Error> {
    if node.provision_state.is_unstable() {
        return Err(Error::Conflict(format!(
            "Node is in {} state. Since node is transitioning, the boot mode will not be set as this may interfere with ongoing changes and result in erroneous modification. Try again later.",
            node.provision_state
        )));
    }
    Ok(())
}

/// A boot setting a client changes through the API (1.76, `/states/boot_mode` and
/// `/states/secure_boot`): the boot mode or whether UEFI secure boot is on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum BootSetting {
    Mode(BootMode),
    SecureBoot(bool),
}

impl BootSetting {
    /// Its name in a log line.
    pub fn what(self) -> &'static str {
        match self {
            BootSetting::Mode(_) => "boot mode",
            BootSetting::SecureBoot(_) => "secure boot state",
        }
    }

    /// Ironic's conductor method that changes it (`change_node_boot_mode`, `..._secure_boot`).
    pub fn rpc_method(self) -> &'static str {
        match self {
            BootSetting::Mode(_) => "change_node_boot_mode",
            BootSetting::SecureBoot(_) => "change_node_secure_boot",
        }
    }

    /// Ironic's `last_error` for a change the machine refused.
    pub fn failure(self, e: &dyn std::fmt::Display) -> String {
        match self {
            BootSetting::Mode(mode) => {
                format!("Failed to change boot mode to '{}: {e}", mode.api_name())
            }
            BootSetting::SecureBoot(on) => {
                let shown = if on { "True" } else { "False" };
                format!("Failed to change secure_boot state to '{shown}': {e}")
            }
        }
    }
}

/// A boot mode, as Ironic names them (`ironic/common/boot_modes.py`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum BootMode {
    Uefi,
    Bios,
}

impl BootMode {
    pub const ALL: [BootMode; 2] = [BootMode::Bios, BootMode::Uefi];

    pub fn api_name(self) -> &'static str {
        match self {
            BootMode::Uefi => "uefi",
            BootMode::Bios => "bios",
        }
    }

    /// The mode a client named (`PUT .../states/boot_mode`); another is its 400.
    pub fn parse(name: &str) -> Result<BootMode, Error> {
        BootMode::ALL
            .into_iter()
            .find(|m| m.api_name() == name)
            .ok_or_else(|| {
                Error::InvalidParameterValue(format!(
                    "Invalid boot mode {name} requested for node. Allowed boot modes are: bios, uefi"
                ))
            })
    }
}

/// The boot devices that make sense as virtual media (Ironic's `boot_devices.VMEDIA_DEVICES`).
pub const VMEDIA_DEVICES: [BootDevice; 3] =
    [BootDevice::Disk, BootDevice::Cdrom, BootDevice::Floppy];

/// One indicator as the hardware describes it: whether it can be set, and the states it takes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct IndicatorInfo {
    pub readonly: bool,
    pub states: Vec<IndicatorState>,
}

/// Indicators by component name (`ironic/common/components.py`), then by indicator name.
pub type Indicators = BTreeMap<String, BTreeMap<String, IndicatorInfo>>;

/// An indicator's state, as Ironic names them (`ironic/common/indicator_states.py`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum IndicatorState {
    Off,
    On,
    Blinking,
    Unknown,
}

impl IndicatorState {
    pub const ALL: [IndicatorState; 4] = [
        IndicatorState::Off,
        IndicatorState::On,
        IndicatorState::Blinking,
        IndicatorState::Unknown,
    ];

    pub fn api_name(self) -> &'static str {
        match self {
            IndicatorState::Off => "off",
            IndicatorState::On => "on",
            IndicatorState::Blinking => "blinking",
            IndicatorState::Unknown => "unknown",
        }
    }

    /// A state by its API name; anything else is the client's 400.
    pub fn parse(name: &str) -> Result<IndicatorState, Error> {
        IndicatorState::ALL
            .into_iter()
            .find(|s| s.api_name() == name)
            .ok_or_else(|| {
                Error::InvalidParameterValue(format!("Invalid indicator state {name} specified."))
            })
    }
}

/// A boot device, as Ironic names them (`ironic/common/boot_devices.py`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum BootDevice {
    Pxe,
    Disk,
    Cdrom,
    Bios,
    Safe,
    Wanboot,
    Iscsiboot,
    Floppy,
    Uefihttp,
}

impl BootDevice {
    pub const ALL: [BootDevice; 9] = [
        BootDevice::Pxe,
        BootDevice::Disk,
        BootDevice::Cdrom,
        BootDevice::Bios,
        BootDevice::Safe,
        BootDevice::Wanboot,
        BootDevice::Iscsiboot,
        BootDevice::Floppy,
        BootDevice::Uefihttp,
    ];

    pub fn api_name(self) -> &'static str {
        match self {
            BootDevice::Pxe => "pxe",
            BootDevice::Disk => "disk",
            BootDevice::Cdrom => "cdrom",
            BootDevice::Bios => "bios",
            BootDevice::Safe => "safe",
            BootDevice::Wanboot => "wanboot",
            BootDevice::Iscsiboot => "iscsiboot",
            BootDevice::Floppy => "floppy",
            BootDevice::Uefihttp => "uefihttp",
        }
    }

    /// The device a client named; one Ironic does not know is its 400.
    pub fn parse(name: &str) -> Result<BootDevice, Error> {
        BootDevice::ALL
            .into_iter()
            .find(|d| d.api_name() == name)
            .ok_or_else(|| {
                Error::InvalidParameterValue(format!("Invalid boot device {name} specified."))
            })
    }
}

/// The boot device a node is set to, as `GET .../management/boot_device` shows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct BootDeviceSetting {
    pub boot_device: Option<BootDevice>,
    pub persistent: Option<bool>,
}
