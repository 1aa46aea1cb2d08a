//! The node as the API sees it: one row per field, naming the API version it appeared in, how a
//! response shows it, and how a client writes it (at create, by PATCH, what `remove` resets it
//! to). The API's version gates for create, PATCH and `?fields=`, the rendering of a node, and
//! the typed reading of written values (in `patch.rs`) all read this table.
//!
//! Must not: know HTTP, the database or the conductor. Versions are API minor numbers (1.x).

use serde_json::{Value, json};

use super::{
    InterfaceKind, Json, Node, NodeChanges, mask, network_data, normalize_conductor_group,
    normalize_uuid, validate_length, validate_name, validate_resource_class,
};
use crate::{
    error::{Error, Result},
    states::ProvisionState,
};

use crate::resource::{
    self, boolean, object, object_or_null, opt_string, set_if, string, sub_links, wrong,
};
pub use crate::resource::{Reset, links, opt_timestamp, timestamp};

/// The node's field table and how it is shown.
pub type Field = resource::Field<Node>;
pub type Write = resource::Write<Node>;
pub type View<'a> = resource::View<'a, Node>;

impl resource::Resource for Node {
    type Changes = NodeChanges;
    const COLLECTION: &'static str = "nodes";

    fn fields() -> &'static [Field] {
        FIELDS
    }

    fn uuid(&self) -> &str {
        &self.uuid
    }

    fn apply(&mut self, changes: NodeChanges) {
        changes.set_into(self);
    }

    fn check_changes(&self, changes: &mut NodeChanges) -> Result<()> {
        protection_rules(self, changes)?;
        retirement_rules(self, changes)?;
        instance_name_from_display_name(self, changes);
        Ok(())
    }
}

/// A write of `instance_info` with a `display_name` (what Nova sets) names the instance when the
/// node has no `instance_name` (Ironic's node PATCH, API 1.104, for Nova's sake; at every version,
/// as there).
fn instance_name_from_display_name(node: &Node, changes: &mut NodeChanges) {
    let has_name = match &changes.instance_name {
        Some(name) => name.is_some(),
        None => node.instance_name.is_some(),
    };
    let display_name = changes
        .instance_info
        .as_ref()
        .and_then(|info| info.get("display_name"))
        .and_then(Value::as_str)
        .filter(|name| !name.is_empty());
    if let (false, Some(name)) = (has_name, display_name) {
        changes.instance_name = Some(Some(name.chars().take(255).collect()));
    }
}

/// The field named `name`, if the node has one by that name in any version.
pub fn field(name: &str) -> Option<&'static Field> {
    resource::field::<Node>(name)
}

/// How the field `name` is written, if a client may write it at all.
pub fn writable(name: &str) -> Option<&'static Write> {
    resource::writable::<Node>(name)
}

/// Unprotecting a node forgets why it was protected; a reason needs protection.
fn protection_rules(node: &Node, changes: &mut NodeChanges) -> Result<()> {
    let protected = changes.protected.unwrap_or(node.protected);
    let mut reason = changes
        .protected_reason
        .clone()
        .unwrap_or_else(|| node.protected_reason.clone());
    if !protected && node.protected {
        reason = None;
    }
    if !protected
        && reason != node.protected_reason
        && reason.as_deref().is_some_and(|r| !r.is_empty())
    {
        return Err(Error::InvalidParameterValue(
            "The protected_reason field can only be set when protected is True".to_owned(),
        ));
    }
    changes.protected_reason = (reason != node.protected_reason).then_some(reason);
    Ok(())
}

/// Ironic's rules for retiring (`ConductorManager._check_update_retired`): a node is not retired
/// in `available` (it would be handed out; 409), un-retiring it forgets why it was retired, and
/// a reason needs retirement.
fn retirement_rules(node: &Node, changes: &mut NodeChanges) -> Result<()> {
    match changes.retired {
        Some(true) if node.provision_state == ProvisionState::Available => {
            return Err(Error::InvalidState(format!(
                "Node {} can not have 'retired' set in provision state 'available'.",
                node.uuid
            )));
        }
        Some(false) => {
            changes.retired_reason = node.retired_reason.is_some().then_some(None);
            return Ok(());
        }
        _ => {}
    }
    let retired = changes.retired.unwrap_or(node.retired);
    if let Some(Some(reason)) = &changes.retired_reason
        && !reason.is_empty()
        && !retired
    {
        return Err(Error::InvalidParameterValue(
            "The retired_reason field can only be set when retired is True".to_owned(),
        ));
    }
    Ok(())
}

/// A provision state as the version shows it: `available` is null before 1.2, `inspect wait`
/// is `inspecting` before 1.39.
pub fn state_value(state: Option<ProvisionState>, minor: u32) -> Value {
    match state {
        Some(ProvisionState::Available) if minor < 2 => Value::Null,
        Some(ProvisionState::InspectWait) if minor < 39 => {
            Value::String(ProvisionState::Inspecting.api_name().to_owned())
        }
        Some(s) => Value::String(s.api_name().to_owned()),
        None => Value::Null,
    }
}

fn kind_of(field: &str) -> Result<InterfaceKind> {
    InterfaceKind::from_field(field)
        .ok_or_else(|| Error::internal(format!("{field} is not an interface field")))
}

fn get_interface(field: &str, node: &Node) -> Value {
    match InterfaceKind::from_field(field) {
        Some(kind) => json!(node.interfaces.get(kind)),
        None => Value::Null,
    }
}

/// Null (as after `remove`) leaves the interface to the conductor, which resets it to the
/// driver's default (`patch::resets_interface`).
fn set_interface(field: &str, node: &Node, v: Value, c: &mut NodeChanges) -> Result<()> {
    let kind = kind_of(field)?;
    if v.is_null() {
        return Ok(());
    }
    let name = string(field, v)?;
    if name != node.interfaces.get(kind) {
        c.interfaces.set(kind, name);
    }
    Ok(())
}

/// A writable JSON-object field: `$field` of the node.
macro_rules! document {
    ($field:ident) => {
        Write {
            create: true,
            patch: true,
            reset: Reset::EmptyObject,
            get: |_, n| Value::Object(n.$field.0.clone()),
            set: |f, n, v, c| {
                let new = object(f, v)?;
                if new != n.$field.0 {
                    c.$field = Some(Json(new));
                }
                Ok(())
            },
        }
    };
}

/// An optional text field of at most `$max` characters, written at create and by PATCH, reset
/// to null by `remove`.
macro_rules! bounded_text {
    ($field:ident, $max:literal) => {
        Write {
            create: true,
            patch: true,
            reset: Reset::Null,
            get: |_, n| json!(n.$field),
            set: |f, n, v, c| {
                let new = opt_string(f, v)?;
                if let Some(text) = &new {
                    validate_length(f, text, $max)?;
                }
                set_if(&mut c.$field, new, &n.$field);
                Ok(())
            },
        }
    };
}

/// A boolean field that null (as after `remove`) sets to false, as in Ironic; written at create
/// when `$create`.
macro_rules! flag {
    ($field:ident, create: $create:literal) => {
        Write {
            create: $create,
            patch: true,
            reset: Reset::False,
            get: |_, n| json!(n.$field),
            set: |f, n, v, c| {
                let new = boolean(f, v)?.unwrap_or(false);
                set_if(&mut c.$field, new, &n.$field);
                Ok(())
            },
        }
    };
}

/// An interface field (`$kind` of the node's interfaces), shown and written from 1.`$since`.
macro_rules! interface {
    ($name:literal, $kind:ident, $since:literal) => {
        Field {
            name: $name,
            since: $since,
            show: |v| json!(v.item.interfaces.$kind),
            write: Some(Write {
                create: true,
                patch: true,
                reset: Reset::DriverDefault,
                get: get_interface,
                set: set_interface,
            }),
        }
    };
}

/// Every node field of the API, in no particular order (responses are JSON objects).
pub static FIELDS: &[Field] = &[
    Field {
        name: "uuid",
        since: 1,
        show: |v| json!(v.item.uuid),
        write: Some(Write {
            create: true,
            patch: false,
            reset: Reset::Mandatory,
            get: |_, n| json!(n.uuid),
            set: |f, n, v, _| {
                let uuid = normalize_uuid(f, &string(f, v)?)?;
                if uuid != n.uuid {
                    return Err(Error::InvalidParameterValue(format!("Cannot change {f}.")));
                }
                Ok(())
            },
        }),
    },
    Field {
        name: "created_at",
        since: 1,
        show: |v| json!(timestamp(&v.item.created_at)),
        write: None,
    },
    Field {
        name: "updated_at",
        since: 1,
        show: |v| opt_timestamp(&v.item.updated_at),
        write: None,
    },
    Field {
        name: "chassis_uuid",
        since: 1,
        show: |v| json!(v.item.chassis_uuid),
        // The API checks that the chassis exists (a 400 otherwise, as in Ironic); the foreign
        // key keeps it so.
        write: Some(Write {
            create: true,
            patch: true,
            reset: Reset::Null,
            get: |_, n| json!(n.chassis_uuid),
            set: |f, n, v, c| {
                let chassis = opt_string(f, v)?
                    .map(|u| normalize_uuid(f, &u))
                    .transpose()?;
                set_if(&mut c.chassis_uuid, chassis, &n.chassis_uuid);
                Ok(())
            },
        }),
    },
    Field {
        name: "console_enabled",
        since: 1,
        show: |v| json!(v.item.console_enabled),
        write: None,
    },
    Field {
        name: "driver",
        since: 1,
        show: |v| json!(v.item.driver),
        write: Some(Write {
            create: true,
            patch: true,
            reset: Reset::Mandatory,
            get: |_, n| json!(n.driver),
            set: |f, n, v, c| {
                set_if(&mut c.driver, string(f, v)?, &n.driver);
                Ok(())
            },
        }),
    },
    Field {
        name: "driver_info",
        since: 1,
        show: |v| Value::Object(mask::mask_secrets(&v.item.driver_info)),
        write: Some(document!(driver_info)),
    },
    Field {
        name: "extra",
        since: 1,
        show: |v| Value::Object(v.item.extra.0.clone()),
        write: Some(document!(extra)),
    },
    Field {
        name: "instance_info",
        since: 1,
        show: |v| Value::Object(mask::masked_instance_info(&v.item.instance_info)),
        write: Some(document!(instance_info)),
    },
    Field {
        name: "properties",
        since: 1,
        show: |v| Value::Object(v.item.properties.0.clone()),
        write: Some(document!(properties)),
    },
    Field {
        name: "instance_uuid",
        since: 1,
        show: |v| json!(v.item.instance_uuid),
        write: Some(Write {
            create: true,
            patch: true,
            reset: Reset::Null,
            get: |_, n| json!(n.instance_uuid),
            set: |f, n, v, c| {
                // Stored in one spelling, so that uniqueness and the filter see one value.
                let new = opt_string(f, v)?
                    .map(|u| normalize_uuid(f, &u))
                    .transpose()?;
                set_if(&mut c.instance_uuid, new, &n.instance_uuid);
                Ok(())
            },
        }),
    },
    Field {
        name: "last_error",
        since: 1,
        show: |v| json!(v.item.last_error),
        write: None,
    },
    Field {
        name: "maintenance",
        since: 1,
        show: |v| json!(v.item.maintenance),
        write: Some(Write {
            create: false,
            patch: true,
            reset: Reset::False,
            get: |_, n| json!(n.maintenance),
            set: |f, n, v, c| {
                let Some(m) = boolean(f, v)? else {
                    return Err(wrong(f, "a boolean", &Value::Null));
                };
                if m != n.maintenance {
                    c.maintenance = Some(m);
                    if !m {
                        // Leaving maintenance forgets why, and the fault that put it there.
                        c.maintenance_reason = Some(None);
                        c.fault = Some(None);
                    }
                }
                Ok(())
            },
        }),
    },
    Field {
        name: "maintenance_reason",
        since: 1,
        show: |v| json!(v.item.maintenance_reason),
        write: None,
    },
    Field {
        name: "power_state",
        since: 1,
        show: |v| json!(v.item.power_state),
        write: None,
    },
    Field {
        name: "target_power_state",
        since: 1,
        show: |v| json!(v.item.target_power_state),
        write: None,
    },
    Field {
        name: "provision_state",
        since: 1,
        show: |v| state_value(Some(v.item.provision_state), v.minor),
        write: None,
    },
    Field {
        name: "target_provision_state",
        since: 1,
        show: |v| state_value(v.item.target_provision_state, v.minor),
        write: None,
    },
    Field {
        name: "provision_updated_at",
        since: 1,
        show: |v| opt_timestamp(&v.item.provision_updated_at),
        write: None,
    },
    Field {
        name: "reservation",
        since: 1,
        show: |v| json!(v.item.reservation),
        write: None,
    },
    Field {
        name: "links",
        since: 1,
        show: |v| links(v.base, "nodes", &v.item.uuid),
        write: None,
    },
    Field {
        name: "ports",
        since: 1,
        show: |v| sub_links(v, "ports"),
        write: None,
    },
    Field {
        name: "driver_internal_info",
        since: 3,
        show: |v| Value::Object(mask::mask_secrets(&v.item.driver_internal_info)),
        write: None,
    },
    Field {
        name: "name",
        since: 5,
        show: |v| json!(v.item.name),
        write: Some(Write {
            create: true,
            patch: true,
            reset: Reset::Null,
            get: |_, n| json!(n.name),
            set: |f, n, v, c| {
                let name = opt_string(f, v)?;
                if let Some(name) = &name {
                    validate_name(name)?;
                }
                set_if(&mut c.name, name, &n.name);
                Ok(())
            },
        }),
    },
    Field {
        name: "inspection_started_at",
        since: 6,
        show: |v| opt_timestamp(&v.item.inspection_started_at),
        write: None,
    },
    Field {
        name: "inspection_finished_at",
        since: 6,
        show: |v| opt_timestamp(&v.item.inspection_finished_at),
        write: None,
    },
    Field {
        name: "clean_step",
        since: 7,
        show: |v| Value::Object(v.item.clean_step.0.clone()),
        write: None,
    },
    // Written by PUT /v1/nodes/{id}/states/raid (the target) and by a RAID interface.
    Field {
        name: "raid_config",
        since: 12,
        show: |v| Value::Object(v.item.raid_config.0.clone()),
        write: None,
    },
    Field {
        name: "target_raid_config",
        since: 12,
        show: |v| Value::Object(v.item.target_raid_config.0.clone()),
        write: None,
    },
    Field {
        name: "states",
        since: 14,
        show: |v| sub_links(v, "states"),
        write: None,
    },
    interface!("network_interface", network, 20),
    Field {
        name: "resource_class",
        since: 21,
        show: |v| json!(v.item.resource_class),
        write: Some(Write {
            create: true,
            patch: true,
            reset: Reset::Null,
            get: |_, n| json!(n.resource_class),
            set: |f, n, v, c| {
                let rc = opt_string(f, v)?;
                if let Some(rc) = &rc {
                    validate_resource_class(rc)?;
                }
                set_if(&mut c.resource_class, rc, &n.resource_class);
                Ok(())
            },
        }),
    },
    Field {
        name: "portgroups",
        since: 24,
        show: |v| sub_links(v, "portgroups"),
        write: None,
    },
    interface!("boot_interface", boot, 31),
    interface!("console_interface", console, 31),
    interface!("deploy_interface", deploy, 31),
    interface!("inspect_interface", inspect, 31),
    interface!("management_interface", management, 31),
    interface!("power_interface", power, 31),
    interface!("raid_interface", raid, 31),
    interface!("vendor_interface", vendor, 31),
    Field {
        name: "volume",
        since: 32,
        show: |v| sub_links(v, "volume"),
        write: None,
    },
    interface!("storage_interface", storage, 33),
    Field {
        name: "traits",
        since: 37,
        show: |v| json!(v.item.traits.0),
        write: None,
    },
    interface!("rescue_interface", rescue, 38),
    interface!("bios_interface", bios, 40),
    interface!("firmware_interface", firmware, 86),
    Field {
        name: "fault",
        since: 42,
        show: |v| json!(v.item.fault),
        write: None,
    },
    Field {
        name: "deploy_step",
        since: 44,
        show: |v| Value::Object(v.item.deploy_step.0.clone()),
        write: None,
    },
    Field {
        name: "conductor_group",
        since: 46,
        show: |v| json!(v.item.conductor_group),
        write: Some(Write {
            create: true,
            patch: true,
            reset: Reset::EmptyString,
            get: |_, n| json!(n.conductor_group),
            set: |f, n, v, c| {
                let group = normalize_conductor_group(&string(f, v)?)?;
                set_if(&mut c.conductor_group, group, &n.conductor_group);
                Ok(())
            },
        }),
    },
    Field {
        name: "automated_clean",
        since: 47,
        show: |v| json!(v.item.automated_clean),
        write: Some(Write {
            create: true,
            patch: true,
            reset: Reset::Null,
            get: |_, n| json!(n.automated_clean),
            set: |f, n, v, c| {
                set_if(&mut c.automated_clean, boolean(f, v)?, &n.automated_clean);
                Ok(())
            },
        }),
    },
    Field {
        name: "protected",
        since: 48,
        show: |v| json!(v.item.protected),
        write: Some(flag!(protected, create: false)),
    },
    Field {
        name: "protected_reason",
        since: 48,
        show: |v| json!(v.item.protected_reason),
        write: Some(Write {
            create: false,
            patch: true,
            reset: Reset::Null,
            get: |_, n| json!(n.protected_reason),
            set: |f, n, v, c| {
                set_if(
                    &mut c.protected_reason,
                    opt_string(f, v)?,
                    &n.protected_reason,
                );
                Ok(())
            },
        }),
    },
    Field {
        name: "conductor",
        since: 49,
        show: |v| json!(v.conductor),
        write: None,
    },
    Field {
        name: "owner",
        since: 50,
        show: |v| json!(v.item.owner),
        write: Some(bounded_text!(owner, 255)),
    },
    Field {
        name: "description",
        since: 51,
        show: |v| json!(v.item.description),
        write: Some(bounded_text!(description, 4096)),
    },
    // Retiring: the conductor's rules are in `retirement_rules`.
    Field {
        name: "retired",
        since: 61,
        show: |v| json!(v.item.retired),
        write: Some(flag!(retired, create: true)),
    },
    Field {
        name: "retired_reason",
        since: 61,
        show: |v| json!(v.item.retired_reason),
        write: Some(Write {
            create: true,
            patch: true,
            reset: Reset::Null,
            get: |_, n| json!(n.retired_reason),
            set: |f, n, v, c| {
                set_if(&mut c.retired_reason, opt_string(f, v)?, &n.retired_reason);
                Ok(())
            },
        }),
    },
    Field {
        name: "lessee",
        since: 65,
        show: |v| json!(v.item.lessee),
        write: Some(bounded_text!(lessee, 255)),
    },
    Field {
        name: "network_data",
        since: 66,
        show: |v| Value::Object(v.item.network_data.0.clone()),
        write: Some(Write {
            create: true,
            patch: true,
            reset: Reset::EmptyObject,
            get: |_, n| Value::Object(n.network_data.0.clone()),
            set: |f, n, v, c| {
                let new = object_or_null(f, v)?;
                network_data::validate(&new)?;
                if new != n.network_data.0 {
                    c.network_data = Some(Json(new));
                }
                Ok(())
            },
        }),
    },
    Field {
        name: "allocation_uuid",
        since: 52,
        show: |v| json!(v.item.allocation_uuid),
        write: None,
    },
    // Set through `/states/boot_mode` and `/states/secure_boot` (1.76), by the conductor.
    Field {
        name: "boot_mode",
        since: 75,
        show: |v| json!(v.item.boot_mode),
        write: None,
    },
    Field {
        name: "secure_boot",
        since: 75,
        show: |v| json!(v.item.secure_boot),
        write: None,
    },
    // Any string or null in Ironic's schema; its column holds 255 characters.
    Field {
        name: "shard",
        since: 82,
        show: |v| json!(v.item.shard),
        write: Some(bounded_text!(shard, 255)),
    },
    // Written as a node's UUID or name: the API resolves it to the UUID (and checks that the
    // node exists, as Ironic's `authorize_node_link`) before the conductor applies it.
    Field {
        name: "parent_node",
        since: 83,
        show: |v| json!(v.item.parent_node),
        write: Some(bounded_text!(parent_node, 36)),
    },
    // Ironic's schema takes a boolean, a boolean's string or null (false).
    Field {
        name: "disable_power_off",
        since: 95,
        show: |v| json!(v.item.disable_power_off),
        write: Some(flag!(disable_power_off, create: true)),
    },
    // Written by the conductor as servicing runs each step, cleared when it ends.
    Field {
        name: "service_step",
        since: 87,
        show: |v| Value::Object(v.item.service_step.0.clone()),
        write: None,
    },
    // 1 to 255 characters or null in Ironic's schema. A write of `instance_info` with a
    // `display_name` fills it when it is empty (`Resource::check_changes`); a tear-down clears it.
    Field {
        name: "instance_name",
        since: 104,
        show: |v| json!(v.item.instance_name),
        write: Some(Write {
            create: true,
            patch: true,
            reset: Reset::Null,
            get: |_, n| json!(n.instance_name),
            set: |f, n, v, c| {
                let new = opt_string(f, v)?;
                if let Some(text) = &new {
                    if text.is_empty() {
                        return Err(Error::InvalidParameterValue(format!(
                            "{f} must be at least 1 character"
                        )));
                    }
                    validate_length(f, text, 255)?;
                }
                set_if(&mut c.instance_name, new, &n.instance_name);
                Ok(())
            },
        }),
    },
    // Read from the management interface by the conductor; the fake hardware reports none.
    Field {
        name: "health",
        since: 109,
        show: |v| json!(v.item.health),
        write: None,
    },
];

#[cfg(test)]
mod tests {
    use super::*;

    /// The table as text, one field per line: name, version, and how it is written. A change to
    /// the API's node shows up here in review.
    fn render_table() -> String {
        let mut fields: Vec<_> = FIELDS.iter().collect();
        fields.sort_by_key(|f| (f.since, f.name));
        fields
            .iter()
            .map(|f| {
                let write = match &f.write {
                    None => "read-only".to_owned(),
                    Some(w) => format!(
                        "{}{} remove={:?}",
                        if w.create { "create " } else { "" },
                        if w.patch { "patch" } else { "" },
                        w.reset
                    ),
                };
                format!("1.{:<2} {:<24} {write}", f.since, f.name)
            })
            .collect::<Vec<_>>()
            .join("\n")
    }

    const SNAPSHOT: &str = "\
1.1  chassis_uuid             create patch remove=Null
1.1  console_enabled          read-only
1.1  created_at               read-only
1.1  driver                   create patch remove=Mandatory
1.1  driver_info              create patch remove=EmptyObject
1.1  extra                    create patch remove=EmptyObject
1.1  instance_info            create patch remove=EmptyObject
1.1  instance_uuid            create patch remove=Null
1.1  last_error               read-only
1.1  links                    read-only
1.1  maintenance              patch remove=False
1.1  maintenance_reason       read-only
1.1  ports                    read-only
1.1  power_state              read-only
1.1  properties               create patch remove=EmptyObject
1.1  provision_state          read-only
1.1  provision_updated_at     read-only
1.1  reservation              read-only
1.1  target_power_state       read-only
1.1  target_provision_state   read-only
1.1  updated_at               read-only
1.1  uuid                     create  remove=Mandatory
1.3  driver_internal_info     read-only
1.5  name                     create patch remove=Null
1.6  inspection_finished_at   read-only
1.6  inspection_started_at    read-only
1.7  clean_step               read-only
1.12 raid_config              read-only
1.12 target_raid_config       read-only
1.14 states                   read-only
1.20 network_interface        create patch remove=DriverDefault
1.21 resource_class           create patch remove=Null
1.24 portgroups               read-only
1.31 boot_interface           create patch remove=DriverDefault
1.31 console_interface        create patch remove=DriverDefault
1.31 deploy_interface         create patch remove=DriverDefault
1.31 inspect_interface        create patch remove=DriverDefault
1.31 management_interface     create patch remove=DriverDefault
1.31 power_interface          create patch remove=DriverDefault
1.31 raid_interface           create patch remove=DriverDefault
1.31 vendor_interface         create patch remove=DriverDefault
1.32 volume                   read-only
1.33 storage_interface        create patch remove=DriverDefault
1.37 traits                   read-only
1.38 rescue_interface         create patch remove=DriverDefault
1.40 bios_interface           create patch remove=DriverDefault
1.42 fault                    read-only
1.44 deploy_step              read-only
1.46 conductor_group          create patch remove=EmptyString
1.47 automated_clean          create patch remove=Null
1.48 protected                patch remove=False
1.48 protected_reason         patch remove=Null
1.49 conductor                read-only
1.50 owner                    create patch remove=Null
1.51 description              create patch remove=Null
1.52 allocation_uuid          read-only
1.61 retired                  create patch remove=False
1.61 retired_reason           create patch remove=Null
1.65 lessee                   create patch remove=Null
1.66 network_data             create patch remove=EmptyObject
1.75 boot_mode                read-only
1.75 secure_boot              read-only
1.82 shard                    create patch remove=Null
1.83 parent_node              create patch remove=Null
1.86 firmware_interface       create patch remove=DriverDefault
1.87 service_step             read-only
1.95 disable_power_off        create patch remove=False
1.104 instance_name            create patch remove=Null
1.109 health                   read-only";

    #[test]
    fn the_table_matches_the_snapshot() {
        let table = render_table();
        assert_eq!(table, SNAPSHOT, "the node's API fields changed:\n{table}");
    }

    #[test]
    fn names_are_unique_and_every_interface_kind_has_its_field() {
        let mut names: Vec<_> = FIELDS.iter().map(|f| f.name).collect();
        names.sort_unstable();
        let before = names.len();
        names.dedup();
        assert_eq!(names.len(), before, "a field is listed twice");
        for kind in InterfaceKind::ALL {
            assert!(field(kind.field()).is_some(), "{}", kind.field());
        }
    }

    #[test]
    fn every_writable_field_reads_back_what_it_writes() {
        let node = crate::node::tests_support::node();
        for f in FIELDS {
            let Some(w) = &f.write else { continue };
            let mut changes = NodeChanges::default();
            (w.set)(f.name, &node, (w.get)(f.name, &node), &mut changes)
                .unwrap_or_else(|e| panic!("{}: {e}", f.name));
            let mut after = node.clone();
            changes.set_into(&mut after);
            assert_eq!(
                after, node,
                "writing {}'s own value changes nothing",
                f.name
            );
        }
    }
}
