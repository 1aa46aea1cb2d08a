//! Power: the states a node's power is in, and the targets a client may ask for.

use diesel::{deserialize::FromSqlRow, expression::AsExpression, sql_types::Text};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::error::{Error, Result};

/// A node's power state (`power_state`, `target_power_state`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, AsExpression, FromSqlRow)]
#[diesel(sql_type = Text)]
pub enum PowerState {
    On,
    Off,
}

impl PowerState {
    pub fn api_name(self) -> &'static str {
        match self {
            PowerState::On => "power on",
            PowerState::Off => "power off",
        }
    }

    pub fn from_api_name(name: &str) -> Option<PowerState> {
        [PowerState::On, PowerState::Off]
            .into_iter()
            .find(|s| s.api_name() == name)
    }
}

impl std::fmt::Display for PowerState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.api_name())
    }
}

/// What `PUT /v1/nodes/{id}/states/power` may ask for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PowerTarget {
    On,
    Off,
    Reboot,
    SoftOff,
    SoftReboot,
}

impl PowerTarget {
    pub const ALL: [PowerTarget; 5] = [
        PowerTarget::On,
        PowerTarget::Off,
        PowerTarget::Reboot,
        PowerTarget::SoftOff,
        PowerTarget::SoftReboot,
    ];

    /// The word the API uses.
    pub fn api_name(self) -> &'static str {
        match self {
            PowerTarget::On => "power on",
            PowerTarget::Off => "power off",
            PowerTarget::Reboot => "rebooting",
            PowerTarget::SoftOff => "soft power off",
            PowerTarget::SoftReboot => "soft rebooting",
        }
    }

    /// The power state the node is in once the target is reached.
    pub fn resulting_state(self) -> PowerState {
        match self {
            PowerTarget::On | PowerTarget::Reboot | PowerTarget::SoftReboot => PowerState::On,
            PowerTarget::Off | PowerTarget::SoftOff => PowerState::Off,
        }
    }

    /// Whether reaching it goes through a reboot.
    pub fn reboots(self) -> bool {
        match self {
            PowerTarget::Reboot | PowerTarget::SoftReboot => true,
            PowerTarget::On | PowerTarget::Off | PowerTarget::SoftOff => false,
        }
    }

    /// Soft targets came with API 1.27.
    pub fn is_soft(self) -> bool {
        match self {
            PowerTarget::SoftOff | PowerTarget::SoftReboot => true,
            PowerTarget::On | PowerTarget::Off | PowerTarget::Reboot => false,
        }
    }

    /// The target the client named, or a 400 listing the valid ones.
    pub fn parse(requested: &str) -> Result<PowerTarget> {
        PowerTarget::ALL
            .into_iter()
            .find(|t| t.api_name() == requested)
            .ok_or_else(|| {
                Error::InvalidParameterValue(format!(
                    "Invalid power state '{requested}'. Valid targets are: {}.",
                    PowerTarget::ALL.map(PowerTarget::api_name).join(", ")
                ))
            })
    }
}

/// The target that puts the power into `state`.
impl From<PowerState> for PowerTarget {
    fn from(state: PowerState) -> PowerTarget {
        match state {
            PowerState::On => PowerTarget::On,
            PowerState::Off => PowerTarget::Off,
        }
    }
}

// Both cross RPC by their API names, the spelling they always had on the wire.
impl Serialize for PowerState {
    fn serialize<S: Serializer>(&self, ser: S) -> std::result::Result<S::Ok, S::Error> {
        ser.serialize_str(self.api_name())
    }
}

impl<'de> Deserialize<'de> for PowerState {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        let name = String::deserialize(d)?;
        PowerState::from_api_name(&name)
            .ok_or_else(|| serde::de::Error::custom(format!("unknown power state {name:?}")))
    }
}

impl Serialize for PowerTarget {
    fn serialize<S: Serializer>(&self, ser: S) -> std::result::Result<S::Ok, S::Error> {
        ser.serialize_str(self.api_name())
    }
}

impl<'de> Deserialize<'de> for PowerTarget {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        let name = String::deserialize(d)?;
        PowerTarget::parse(&name).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn targets_parse_and_say_what_they_do() {
        for t in PowerTarget::ALL {
            assert_eq!(PowerTarget::parse(t.api_name()).unwrap(), t);
        }
        assert_eq!(PowerTarget::Reboot.resulting_state(), PowerState::On);
        assert!(PowerTarget::SoftReboot.reboots() && PowerTarget::SoftReboot.is_soft());
        let err = PowerTarget::parse("on").unwrap_err();
        assert!(
            err.to_string().starts_with(
                "Invalid power state 'on'. Valid targets are: power on, power off, rebooting,"
            ),
            "{err}"
        );
    }
}
