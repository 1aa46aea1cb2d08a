//! RAID configuration as Ironic defines it (`ironic/drivers/raid_config_schema.json`, checked by
//! `ironic/common/raid.py`): the properties a logical disk may have, and the check of a target
//! RAID configuration against them. Every RAID interface of Ironic, `no-raid` included, describes
//! the same logical-disk properties (`RAIDInterface.get_logical_disk_properties`); a `no-raid`
//! one refuses any configuration but the empty one (the conductor checks that, not this module).

use serde_json::{Map, Value};

use crate::error::Error;

/// Each property a logical disk may have, and what it means.
pub const LOGICAL_DISK_PROPERTIES: &[(&str, &str)] = &[
    (
        "raid_level",
        "The RAID level of the logical disk: one of 'JBOD', '0', '1', '2', '5', '6', '1+0', '5+0', '6+0'. Required.",
    ),
    (
        "size_gb",
        "The size of the logical disk in GiB (an integer), or 'MAX' for the space that is left. Required.",
    ),
    (
        "volume_name",
        "The name of the volume to create; generated when not given. Optional.",
    ),
    (
        "is_root_volume",
        "Whether the logical disk is the root volume (at most one is). Default false. Optional.",
    ),
    (
        "share_physical_disks",
        "Whether other logical disks may use the physical disks of this one. Default false. Optional.",
    ),
    (
        "disk_type",
        "The kind of physical disk wanted: 'hdd' or 'ssd'; any kind when not given. Optional.",
    ),
    (
        "interface_type",
        "The interface of the physical disks wanted: 'sata', 'scsi' or 'sas'; any when not given. Optional.",
    ),
    (
        "number_of_physical_disks",
        "How many physical disks to use (at least 1); the least the RAID level needs when not given. Optional.",
    ),
    (
        "controller",
        "The RAID controller to use; the driver picks one when not given. Optional.",
    ),
    (
        "physical_disks",
        "The physical disks to use (names, or at least two objects describing them; needs 'controller'); the driver picks them when not given. Optional.",
    ),
];

const RAID_LEVELS: &[&str] = &["JBOD", "0", "1", "2", "5", "6", "1+0", "5+0", "6+0"];

/// Checks a target RAID configuration (a non-empty one: the empty one clears it) as Ironic's
/// schema does: `logical_disks` and nothing else, at least one disk, each with a valid
/// `raid_level` and `size_gb` and only known properties of the right types, and at most one
/// root volume. The error is InvalidParameterValue naming what is wrong.
pub fn validate(config: &Map<String, Value>) -> Result<(), Error> {
    let invalid =
        |why: String| Error::InvalidParameterValue(format!("RAID config validation error: {why}"));
    if let Some(other) = config.keys().find(|k| *k != "logical_disks") {
        return Err(invalid(format!(
            "'{other}' is not allowed at the top level, only 'logical_disks' is"
        )));
    }
    let disks = match config.get("logical_disks") {
        None => return Err(invalid("'logical_disks' is a required property".to_owned())),
        Some(Value::Array(disks)) if disks.is_empty() => {
            return Err(invalid(
                "'logical_disks' must hold at least one logical disk".to_owned(),
            ));
        }
        Some(Value::Array(disks)) => disks,
        Some(other) => {
            return Err(invalid(format!(
                "'logical_disks' must be a list, not {other}"
            )));
        }
    };
    for (i, disk) in disks.iter().enumerate() {
        let Value::Object(disk) = disk else {
            return Err(invalid(format!(
                "logical disk {i} must be an object, not {disk}"
            )));
        };
        logical_disk(disk).map_err(|why| invalid(format!("logical disk {i}: {why}")))?;
    }
    let roots = disks
        .iter()
        .filter(|d| d.get("is_root_volume") == Some(&Value::Bool(true)))
        .count();
    if roots > 1 {
        return Err(Error::InvalidParameterValue(format!(
            "A RAID config may have at most one root volume; {roots} were given."
        )));
    }
    Ok(())
}

/// The checks of one logical disk; the error says what is wrong with it.
fn logical_disk(disk: &Map<String, Value>) -> Result<(), String> {
    for required in ["raid_level", "size_gb"] {
        if !disk.contains_key(required) {
            return Err(format!("'{required}' is a required property"));
        }
    }
    for (name, value) in disk {
        let ok = match name.as_str() {
            "raid_level" => one_of(value, RAID_LEVELS),
            "size_gb" => value.as_str() == Some("MAX") || value.as_u64().is_some(),
            "volume_name" | "controller" => value.is_string(),
            "is_root_volume" | "share_physical_disks" => value.is_boolean(),
            "disk_type" => one_of(value, &["hdd", "ssd"]),
            "interface_type" => one_of(value, &["sata", "scsi", "sas"]),
            "number_of_physical_disks" => value.as_u64().is_some_and(|n| n > 0),
            "physical_disks" => physical_disks(value),
            other => return Err(format!("'{other}' is not a logical disk property")),
        };
        if !ok {
            let wanted = LOGICAL_DISK_PROPERTIES
                .iter()
                .find(|(n, _)| n == name)
                .map_or("", |(_, d)| d);
            return Err(format!("{value} is not a valid {name}. {wanted}"));
        }
    }
    if disk.contains_key("physical_disks") && !disk.contains_key("controller") {
        return Err("'physical_disks' needs 'controller'".to_owned());
    }
    Ok(())
}

fn one_of(value: &Value, allowed: &[&str]) -> bool {
    value.as_str().is_some_and(|s| allowed.contains(&s))
}

/// A list of disk names, or of at least two objects describing disks.
fn physical_disks(value: &Value) -> bool {
    let Value::Array(disks) = value else {
        return false;
    };
    disks.iter().all(Value::is_string) || (disks.len() >= 2 && disks.iter().all(Value::is_object))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn check(config: Value) -> Result<(), String> {
        let Value::Object(config) = config else {
            panic!("not an object")
        };
        validate(&config).map_err(|e| e.to_string())
    }

    #[test]
    fn valid_configurations_pass() {
        for config in [
            json!({"logical_disks": [{"size_gb": 100, "raid_level": "1"}]}),
            json!({"logical_disks": [
                {"size_gb": "MAX", "raid_level": "5", "is_root_volume": true,
                 "volume_name": "root", "disk_type": "ssd", "interface_type": "sas",
                 "number_of_physical_disks": 3, "share_physical_disks": false},
                {"size_gb": 0, "raid_level": "JBOD", "controller": "RAID.Integrated.1-1",
                 "physical_disks": ["Disk.Bay.0", "Disk.Bay.1"]},
                {"size_gb": 10, "raid_level": "1+0", "controller": "c",
                 "physical_disks": [{"size": ">= 100"}, {"size": ">= 100"}]},
            ]}),
        ] {
            assert_eq!(check(config.clone()), Ok(()), "{config}");
        }
    }

    #[test]
    fn invalid_configurations_say_why() {
        for (config, why) in [
            (json!({}), "'logical_disks' is a required property"),
            (json!({"logical_disks": []}), "at least one logical disk"),
            (json!({"logical_disks": {}}), "must be a list"),
            (
                json!({"logical_disks": [{"size_gb": 1, "raid_level": "1"}], "x": 1}),
                "'x' is not allowed",
            ),
            (
                json!({"logical_disks": [{"size_gb": 100}]}),
                "'raid_level' is a required property",
            ),
            (
                json!({"logical_disks": [{"raid_level": "1"}]}),
                "'size_gb' is a required property",
            ),
            (
                json!({"logical_disks": [{"size_gb": 10, "raid_level": "4"}]}),
                "\"4\" is not a valid raid_level",
            ),
            (
                json!({"logical_disks": [{"size_gb": -1, "raid_level": "1"}]}),
                "-1 is not a valid size_gb",
            ),
            (
                json!({"logical_disks": [{"size_gb": 1.5, "raid_level": "1"}]}),
                "1.5 is not a valid size_gb",
            ),
            (
                json!({"logical_disks": [{"size_gb": "min", "raid_level": "1"}]}),
                "not a valid size_gb",
            ),
            (
                json!({"logical_disks": [{"size_gb": 1, "raid_level": "1", "disk_type": "tape"}]}),
                "not a valid disk_type",
            ),
            (
                json!({"logical_disks": [{"size_gb": 1, "raid_level": "1", "number_of_physical_disks": 0}]}),
                "not a valid number_of_physical_disks",
            ),
            (
                json!({"logical_disks": [{"size_gb": 1, "raid_level": "1", "colour": "red"}]}),
                "'colour' is not a logical disk property",
            ),
            (
                json!({"logical_disks": [{"size_gb": 1, "raid_level": "1", "physical_disks": ["a"]}]}),
                "needs 'controller'",
            ),
            (
                json!({"logical_disks": [{"size_gb": 1, "raid_level": "1", "controller": "c", "physical_disks": [{}]}]}),
                "not a valid physical_disks",
            ),
            (
                json!({"logical_disks": ["disk"]}),
                "logical disk 0 must be an object",
            ),
            (
                json!({"logical_disks": [
                    {"size_gb": 1, "raid_level": "1", "is_root_volume": true},
                    {"size_gb": 2, "raid_level": "1", "is_root_volume": true}]}),
                "at most one root volume; 2 were given",
            ),
        ] {
            let err = check(config.clone()).expect_err(&config.to_string());
            assert!(err.contains(why), "{config}: {err}");
        }
    }
}
