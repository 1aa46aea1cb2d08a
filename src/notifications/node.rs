//! The node's notification payloads, field for field Ironic's (`ironic/objects/node.py`:
//! `NodePayload` 1.17 and the payloads built on it), from the node alone: no query.
//!
//! Secrets are masked as the API masks them (`node::mask`): `driver_info` and
//! `driver_internal_info` by key, `instance_info` by key and its `configdrive` and `image_url`
//! (Ironic's `notification.mask_secrets` masks by key and `image_url`; the config drive, which
//! may carry user data, is masked here as the API masks it).

use serde_json::{Map, Value, json};

use super::{Payload, Status, object_time};
use crate::{
    node::{Node, PowerState, PowerTarget, mask},
    states::{Event, ProvisionState},
};

/// `NodePayload`'s version: the payload of `maintenance_set` (and `console_set`).
pub const NODE_PAYLOAD_VERSION: &str = "1.17";
/// `NodeCRUDPayload`'s version: `create`, `update`, `delete`.
pub const CRUD_PAYLOAD_VERSION: &str = "1.15";
/// `NodeSetPowerStatePayload`'s version: `power_set`.
pub const POWER_SET_PAYLOAD_VERSION: &str = "1.17";
/// `NodeCorrectedPowerStatePayload`'s version: `power_state_corrected`.
pub const POWER_CORRECTED_PAYLOAD_VERSION: &str = "1.17";
/// `NodeSetProvisionStatePayload`'s version: `provision_set`.
pub const PROVISION_SET_PAYLOAD_VERSION: &str = "1.18";

/// The fields of Ironic's `NodePayload.SCHEMA`, plus `traits` (names).
fn base(node: &Node) -> Map<String, Value> {
    let time = |t: &Option<chrono::NaiveDateTime>| t.as_ref().map(object_time);
    let i = &node.interfaces;
    let mut m = Map::with_capacity(64);
    let mut put = |k: &str, v: Value| {
        m.insert(k.to_owned(), v);
    };
    // Ferrum keeps no current clean step; the API shows `{}` too.
    put("clean_step", json!({}));
    put("conductor_group", json!(node.conductor_group));
    put("console_enabled", json!(node.console_enabled));
    put("created_at", json!(object_time(&node.created_at)));
    put("deploy_step", Value::Object(node.deploy_step.0.clone()));
    put("description", json!(node.description));
    put("disable_power_off", json!(node.disable_power_off));
    put("driver", json!(node.driver));
    put("extra", Value::Object(node.extra.0.clone()));
    put("boot_mode", json!(node.boot_mode));
    put("secure_boot", json!(node.secure_boot));
    put(
        "inspection_finished_at",
        json!(time(&node.inspection_finished_at)),
    );
    put(
        "inspection_started_at",
        json!(time(&node.inspection_started_at)),
    );
    put("instance_uuid", json!(node.instance_uuid));
    put("last_error", json!(node.last_error));
    put("maintenance", json!(node.maintenance));
    put("maintenance_reason", json!(node.maintenance_reason));
    put("fault", json!(node.fault));
    put("name", json!(node.name));
    put("bios_interface", json!(i.bios));
    put("boot_interface", json!(i.boot));
    put("console_interface", json!(i.console));
    put("deploy_interface", json!(i.deploy));
    put("inspect_interface", json!(i.inspect));
    put("management_interface", json!(i.management));
    put("network_interface", json!(i.network));
    put("power_interface", json!(i.power));
    put("raid_interface", json!(i.raid));
    put("rescue_interface", json!(i.rescue));
    put("storage_interface", json!(i.storage));
    put("vendor_interface", json!(i.vendor));
    put("owner", json!(node.owner));
    put("lessee", json!(node.lessee));
    put(
        "power_state",
        json!(node.power_state.map(PowerState::api_name)),
    );
    put("properties", Value::Object(node.properties.0.clone()));
    put("protected", json!(node.protected));
    put("protected_reason", json!(node.protected_reason));
    put("provision_state", json!(node.provision_state.api_name()));
    put(
        "provision_updated_at",
        json!(time(&node.provision_updated_at)),
    );
    put("resource_class", json!(node.resource_class));
    put("retired", json!(node.retired));
    put("retired_reason", json!(node.retired_reason));
    put(
        "target_power_state",
        json!(node.target_power_state.map(PowerState::api_name)),
    );
    put(
        "target_provision_state",
        json!(node.target_provision_state.map(ProvisionState::api_name)),
    );
    put("traits", json!(node.traits.0));
    put("updated_at", json!(time(&node.updated_at)));
    put("uuid", json!(node.uuid));
    m
}

/// `NodePayload`: `maintenance_set`.
pub fn node(node: &Node) -> Payload {
    Payload {
        name: "NodePayload",
        version: NODE_PAYLOAD_VERSION,
        data: base(node),
    }
}

/// `NodeCRUDPayload`: `create`, `update`, `delete`; with `chassis_uuid`, `driver_info` and
/// `instance_info`, masked.
pub fn crud(node: &Node) -> Payload {
    let mut data = base(node);
    data.insert("chassis_uuid".to_owned(), json!(node.chassis_uuid));
    data.insert(
        "driver_info".to_owned(),
        Value::Object(mask::mask_secrets(&node.driver_info)),
    );
    data.insert(
        "instance_info".to_owned(),
        Value::Object(mask::masked_instance_info(&node.instance_info)),
    );
    Payload {
        name: "NodeCRUDPayload",
        version: CRUD_PAYLOAD_VERSION,
        data,
    }
}

/// `NodeCRUDPayload` of a node not created yet (`create.start`, `create.error`): the interfaces
/// the request does not name are not chosen yet (null, as in Ironic's payload of the API's
/// unsaved node), and it has no creation time.
pub fn crud_unsaved(node: &Node) -> Payload {
    let mut payload = crud(node);
    for (key, value) in payload.data.iter_mut() {
        if key.ends_with("_interface") && value.as_str() == Some("") {
            *value = Value::Null;
        }
    }
    payload.data.insert("created_at".to_owned(), Value::Null);
    payload
}

/// `NodeSetPowerStatePayload`: `power_set`, with what is asked of the power (`to_power`: the
/// API's word, `rebooting` for a reboot, as Ironic's `new_state`).
pub fn power_set(node: &Node, to_power: PowerTarget) -> Payload {
    let mut data = base(node);
    data.insert("to_power".to_owned(), json!(to_power.api_name()));
    Payload {
        name: "NodeSetPowerStatePayload",
        version: POWER_SET_PAYLOAD_VERSION,
        data,
    }
}

/// `NodeCorrectedPowerStatePayload`: `power_state_corrected`, sent once the recorded power
/// state was changed to what the hardware says, with the state recorded before (`from_power`,
/// null when none was).
pub fn power_state_corrected(node: &Node, from_power: Option<PowerState>) -> Payload {
    let mut data = base(node);
    data.insert(
        "from_power".to_owned(),
        json!(from_power.map(PowerState::api_name)),
    );
    Payload {
        name: "NodeCorrectedPowerStatePayload",
        version: POWER_CORRECTED_PAYLOAD_VERSION,
        data,
    }
}

/// `NodeSetProvisionStatePayload`: `provision_set`, with the state and target before the move,
/// the event that made it, and `instance_info` and `driver_internal_info`, masked.
pub fn provision_set(
    node: &Node,
    previous: ProvisionState,
    previous_target: Option<ProvisionState>,
    event: Event,
) -> Payload {
    let mut data = base(node);
    data.insert(
        "instance_info".to_owned(),
        Value::Object(mask::masked_instance_info(&node.instance_info)),
    );
    data.insert(
        "driver_internal_info".to_owned(),
        Value::Object(mask::mask_secrets(&node.driver_internal_info)),
    );
    data.insert("event".to_owned(), json!(event.name()));
    data.insert(
        "previous_provision_state".to_owned(),
        json!(previous.api_name()),
    );
    data.insert(
        "previous_target_provision_state".to_owned(),
        json!(previous_target.map(ProvisionState::api_name)),
    );
    Payload {
        name: "NodeSetProvisionStatePayload",
        version: PROVISION_SET_PAYLOAD_VERSION,
        data,
    }
}

/// The status of a `provision_set` notification, as Ironic's task manager decides it: `fail` is
/// an error; from a state where nothing runs into one where work runs, a start; back, an end;
/// anything else a success.
pub fn provision_status(previous: ProvisionState, now: ProvisionState, event: Event) -> Status {
    if event == Event::Fail {
        return Status::Error;
    }
    match (previous.is_unstable(), now.is_unstable()) {
        (false, true) => Status::Start,
        (true, false) => Status::End,
        _ => Status::Success,
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::node::Json;

    /// Ironic's `NodePayload.fields` (ironic/objects/node.py), sorted.
    const NODE_PAYLOAD_FIELDS: &[&str] = &[
        "bios_interface",
        "boot_interface",
        "boot_mode",
        "clean_step",
        "conductor_group",
        "console_enabled",
        "console_interface",
        "created_at",
        "deploy_interface",
        "deploy_step",
        "description",
        "disable_power_off",
        "driver",
        "extra",
        "fault",
        "inspect_interface",
        "inspection_finished_at",
        "inspection_started_at",
        "instance_uuid",
        "last_error",
        "lessee",
        "maintenance",
        "maintenance_reason",
        "management_interface",
        "name",
        "network_interface",
        "owner",
        "power_interface",
        "power_state",
        "properties",
        "protected",
        "protected_reason",
        "provision_state",
        "provision_updated_at",
        "raid_interface",
        "rescue_interface",
        "resource_class",
        "retired",
        "retired_reason",
        "secure_boot",
        "storage_interface",
        "target_power_state",
        "target_provision_state",
        "traits",
        "updated_at",
        "uuid",
        "vendor_interface",
    ];

    fn keys(p: &Payload) -> Vec<String> {
        let mut k: Vec<String> = p.data.keys().cloned().collect();
        k.sort();
        k
    }

    fn with(extra: &[&str]) -> Vec<String> {
        let mut k: Vec<String> = NODE_PAYLOAD_FIELDS
            .iter()
            .chain(extra)
            .map(|s| (*s).to_owned())
            .collect();
        k.sort();
        k
    }

    fn secret_node() -> Node {
        let mut node = crate::node::tests_support::node();
        node.driver_info = Json(
            json!({"ipmi_password": "hunter2", "ipmi_address": "10.0.0.1"})
                .as_object()
                .unwrap()
                .clone(),
        );
        node.instance_info = Json(
            json!({"configdrive": "H4sI...", "image_url": "http://u:p@x/i", "root_gb": 10,
                   "image_source": "http://x/i"})
            .as_object()
            .unwrap()
            .clone(),
        );
        node.driver_internal_info = Json(
            json!({"agent_secret_token": "t0k", "agent_url": "http://a"})
                .as_object()
                .unwrap()
                .clone(),
        );
        node.traits = Json(vec!["CUSTOM_A".to_owned()]);
        node
    }

    #[test]
    fn payloads_have_ironics_names_versions_and_fields() {
        let node = secret_node();
        let p = super::node(&node);
        assert_eq!((p.name, p.version), ("NodePayload", "1.17"));
        assert_eq!(keys(&p), with(&[]));

        let p = crud(&node);
        assert_eq!((p.name, p.version), ("NodeCRUDPayload", "1.15"));
        assert_eq!(
            keys(&p),
            with(&["chassis_uuid", "driver_info", "instance_info"])
        );

        let p = power_set(&node, PowerTarget::Off);
        assert_eq!((p.name, p.version), ("NodeSetPowerStatePayload", "1.17"));
        assert_eq!(keys(&p), with(&["to_power"]));
        assert_eq!(p.data["to_power"], "power off");

        let p = power_state_corrected(&node, Some(PowerState::On));
        assert_eq!(
            (p.name, p.version),
            ("NodeCorrectedPowerStatePayload", "1.17")
        );
        assert_eq!(keys(&p), with(&["from_power"]));
        assert_eq!(p.data["from_power"], "power on");
        let p = power_state_corrected(&node, None);
        assert_eq!(p.data["from_power"], serde_json::Value::Null);

        let p = provision_set(
            &node,
            ProvisionState::Available,
            None,
            crate::states::Event::Deploy,
        );
        assert_eq!(
            (p.name, p.version),
            ("NodeSetProvisionStatePayload", "1.18")
        );
        assert_eq!(
            keys(&p),
            with(&[
                "driver_internal_info",
                "event",
                "instance_info",
                "previous_provision_state",
                "previous_target_provision_state",
            ])
        );
        assert_eq!(p.data["event"], "deploy");
        assert_eq!(p.data["previous_provision_state"], "available");
        assert_eq!(p.data["previous_target_provision_state"], Value::Null);
        assert_eq!(p.data["traits"], json!(["CUSTOM_A"]));
    }

    #[test]
    fn secrets_are_masked_as_in_api_output() {
        let node = secret_node();
        let p = crud(&node);
        assert_eq!(p.data["driver_info"]["ipmi_password"], "******");
        assert_eq!(p.data["driver_info"]["ipmi_address"], "10.0.0.1");
        assert_eq!(p.data["instance_info"]["configdrive"], "******");
        assert_eq!(p.data["instance_info"]["image_url"], "******");
        assert_eq!(p.data["instance_info"]["root_gb"], 10);
        let p = provision_set(&node, ProvisionState::Deploying, None, Event::Done);
        assert_eq!(
            p.data["driver_internal_info"]["agent_secret_token"],
            "******"
        );
        assert_eq!(p.data["driver_internal_info"]["agent_url"], "http://a");
        assert_eq!(p.data["instance_info"]["configdrive"], "******");
        let text = serde_json::to_string(&p.primitive()).unwrap();
        assert!(!text.contains("hunter2") && !text.contains("t0k"), "{text}");
    }

    #[test]
    fn provision_status_follows_ironics_task_manager() {
        use ProvisionState as S;
        assert_eq!(
            provision_status(S::Available, S::Deploying, Event::Deploy),
            Status::Start
        );
        assert_eq!(
            provision_status(S::Deploying, S::Active, Event::Done),
            Status::End
        );
        assert_eq!(
            provision_status(S::Deploying, S::DeployFail, Event::Fail),
            Status::Error
        );
        assert_eq!(
            provision_status(S::Deploying, S::DeployWait, Event::Wait),
            Status::Success
        );
        assert_eq!(
            provision_status(S::Enroll, S::Manageable, Event::Manage),
            Status::Success
        );
    }
}
