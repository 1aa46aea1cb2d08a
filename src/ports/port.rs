//! A port: one NIC of a node, by its MAC address (unique), with how it is wired
//! (`local_link_connection`, `physical_network`) and whether it boots by PXE.

use serde_json::{Value, json};

use super::{has_vtep_keys, normalize_local_link, normalize_mac, vtep_keys_allowed};
use crate::{
    node::{Json, JsonObject, normalize_uuid, validate_length},
    resource::{
        self, Field, Reset, Resource, Write, boolean, object_or_null, opt_string, set_if,
        strict_boolean, string,
    },
};

resource::record_type! {
    /// A port as Ferrum stores, sends and shows it.
    Port, PortChanges, ports {
        uuid: String,
        /// The MAC address, lower-cased.
        address: String,
        node_uuid: String,
        portgroup_uuid: Option<String>,
        extra: Json<JsonObject>,
        /// What Ferrum records about the port (the attached VIF); read-only in the API.
        internal_info: Json<JsonObject>,
        local_link_connection: Json<JsonObject>,
        pxe_enabled: bool,
        physical_network: Option<String>,
        is_smartnic: bool,
        created_at: chrono::NaiveDateTime,
        updated_at: Option<chrono::NaiveDateTime>,
        /// Unique when set (API 1.88); a port can be named by it.
        name: Option<String>,
        /// Free text (API 1.97), at most 255 characters.
        description: Option<String>,
        /// The NIC's vendor (API 1.100), at most 32 characters.
        vendor: Option<String>,
        /// The operator's category of the port (API 1.101), at most 80 characters.
        category: Option<String>,
        /// Whether the port may be put in a dynamic portgroup (API 1.111); true by default.
        available_for_dynamic_portgroup: bool,
    }
}

impl Resource for Port {
    type Changes = PortChanges;
    const COLLECTION: &'static str = "ports";

    fn fields() -> &'static [Field<Port>] {
        FIELDS
    }

    fn uuid(&self) -> &str {
        &self.uuid
    }

    fn apply(&mut self, changes: PortChanges) {
        changes.set_into(self);
    }

    /// A Smart NIC port names its host and port (Ironic's `LOCAL_LINK_SMART_NIC_VALIDATOR`).
    fn check_changes(&self, changes: &mut PortChanges) -> crate::error::Result<()> {
        let smartnic = changes.is_smartnic.unwrap_or(self.is_smartnic);
        let link = changes
            .local_link_connection
            .as_ref()
            .unwrap_or(&self.local_link_connection);
        if smartnic && !(link.contains_key("port_id") && link.contains_key("hostname")) {
            return Err(crate::error::Error::InvalidParameterValue(
                "Smart NIC port must have port_id and hostname in local_link_connection".to_owned(),
            ));
        }
        Ok(())
    }
}

impl Port {
    /// A new port with Ironic's defaults (PXE enabled), before a create request's values.
    pub fn template() -> Port {
        Port {
            uuid: uuid::Uuid::new_v4().to_string(),
            pxe_enabled: true,
            available_for_dynamic_portgroup: true,
            created_at: crate::node::now(),
            ..Port::default()
        }
    }
}

/// The fields of the short form of GET /v1/ports.
pub const SUMMARY: &[&str] = &["uuid", "address", "links"];

static FIELDS: &[Field<Port>] = &[
    resource::uuid_field!(1),
    Field {
        name: "address",
        since: 1,
        show: |v| json!(v.item.address),
        write: Some(Write {
            create: true,
            patch: true,
            reset: Reset::Mandatory,
            get: |_, p| json!(p.address),
            set: |f, p, v, c| {
                set_if(&mut c.address, normalize_mac(&string(f, v)?)?, &p.address);
                Ok(())
            },
        }),
    },
    resource::node_uuid_field!(1),
    resource::document_field!("extra", extra, 1),
    resource::created_at_field!(1),
    resource::updated_at_field!(1),
    resource::links_field!("ports", 1),
    Field {
        name: "internal_info",
        since: 18,
        show: |v| Value::Object(v.item.internal_info.0.clone()),
        write: None,
    },
    Field {
        name: "local_link_connection",
        since: 19,
        // Outside 1.90-1.104 an OVN VTEP switch's link is shown empty, as Ironic shows it.
        show: |v| {
            let link = &v.item.local_link_connection.0;
            if !vtep_keys_allowed(v.minor) && has_vtep_keys(link) {
                return json!({});
            }
            Value::Object(link.clone())
        },
        write: Some(Write {
            create: true,
            patch: true,
            reset: Reset::EmptyObject,
            get: |_, p| Value::Object(p.local_link_connection.0.clone()),
            set: |f, p, v, c| {
                let link = normalize_local_link(object_or_null(f, v)?)?;
                set_if(
                    &mut c.local_link_connection,
                    Json(link),
                    &p.local_link_connection,
                );
                Ok(())
            },
        }),
    },
    Field {
        name: "pxe_enabled",
        since: 19,
        show: |v| json!(v.item.pxe_enabled),
        write: Some(Write {
            create: true,
            patch: true,
            reset: Reset::True,
            get: |_, p| json!(p.pxe_enabled),
            set: |f, p, v, c| {
                // null is the default, as after `remove`.
                let pxe = boolean(f, v)?.unwrap_or(true);
                set_if(&mut c.pxe_enabled, pxe, &p.pxe_enabled);
                Ok(())
            },
        }),
    },
    Field {
        name: "portgroup_uuid",
        since: 24,
        show: |v| json!(v.item.portgroup_uuid),
        write: Some(Write {
            create: true,
            patch: true,
            reset: Reset::Null,
            get: |_, p| json!(p.portgroup_uuid),
            set: |f, p, v, c| {
                let pg = opt_string(f, v)?
                    .map(|u| normalize_uuid(f, &u))
                    .transpose()?;
                set_if(&mut c.portgroup_uuid, pg, &p.portgroup_uuid);
                Ok(())
            },
        }),
    },
    Field {
        name: "physical_network",
        since: 34,
        show: |v| json!(v.item.physical_network),
        write: Some(Write {
            create: true,
            patch: true,
            reset: Reset::Null,
            get: |_, p| json!(p.physical_network),
            set: |f, p, v, c| {
                let physnet = opt_string(f, v)?;
                match &physnet {
                    Some(n) if n.is_empty() => {
                        return Err(crate::error::Error::InvalidParameterValue(
                            "A non-empty value is required when setting physical_network"
                                .to_owned(),
                        ));
                    }
                    Some(n) => validate_length(f, n, 64)?,
                    None => {}
                }
                set_if(&mut c.physical_network, physnet, &p.physical_network);
                Ok(())
            },
        }),
    },
    Field {
        name: "is_smartnic",
        since: 53,
        show: |v| json!(v.item.is_smartnic),
        write: Some(Write {
            create: true,
            patch: true,
            reset: Reset::False,
            get: |_, p| json!(p.is_smartnic),
            set: |f, p, v, c| {
                let smartnic = boolean(f, v)?.unwrap_or(false);
                set_if(&mut c.is_smartnic, smartnic, &p.is_smartnic);
                Ok(())
            },
        }),
    },
    // Ironic's schema takes any string (or null) as a port's name, up to its column's 255
    // characters; only a name that is a logical name can be looked up by (`get_port`).
    resource::bounded_text_field!("name", name, 88, 255),
    resource::bounded_text_field!("description", description, 97, 255),
    resource::bounded_text_field!("vendor", vendor, 100, 32),
    resource::bounded_text_field!("category", category, 101, 80),
    // Ironic's schema takes a JSON boolean only (not null, not a string); `remove` restores the
    // default.
    Field {
        name: "available_for_dynamic_portgroup",
        since: 111,
        show: |v| json!(v.item.available_for_dynamic_portgroup),
        write: Some(Write {
            create: true,
            patch: true,
            reset: Reset::True,
            get: |_, p| json!(p.available_for_dynamic_portgroup),
            set: |f, p, v, c| {
                set_if(
                    &mut c.available_for_dynamic_portgroup,
                    strict_boolean(f, v)?,
                    &p.available_for_dynamic_portgroup,
                );
                Ok(())
            },
        }),
    },
];
