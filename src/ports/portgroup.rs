//! A portgroup (API 1.23): a bond of a node's ports, with its own MAC address and name.

use serde_json::{Value, json};

use super::normalize_mac;
use crate::{
    node::{Json, JsonObject, validate_name},
    resource::{self, Field, Reset, Write, boolean, opt_string, set_if, sub_links},
};

resource::record_type! {
    /// A portgroup as Ferrum stores, sends and shows it.
    Portgroup, PortgroupChanges, portgroups {
        uuid: String,
        name: Option<String>,
        node_uuid: String,
        /// The MAC address, lower-cased; optional.
        address: Option<String>,
        extra: Json<JsonObject>,
        /// What Ferrum records about the portgroup (the attached VIF); read-only in the API.
        internal_info: Json<JsonObject>,
        standalone_ports_supported: bool,
        mode: Option<String>,
        properties: Json<JsonObject>,
        created_at: chrono::NaiveDateTime,
        updated_at: Option<chrono::NaiveDateTime>,
        /// The physical network of the bond (API 1.102); writing it by PATCH writes it on the
        /// member ports too.
        physical_network: Option<String>,
        /// The operator's category of the portgroup (API 1.103), at most 80 characters.
        category: Option<String>,
        /// Whether Ironic made the portgroup itself (API 1.111): read-only in the API, false.
        dynamic_portgroup: bool,
    }
}

resource::record_resource!(Portgroup, PortgroupChanges, "portgroups", FIELDS);

impl Portgroup {
    /// A new portgroup with Ironic's defaults (standalone ports supported), before a create
    /// request's values.
    pub fn template() -> Portgroup {
        Portgroup {
            uuid: uuid::Uuid::new_v4().to_string(),
            standalone_ports_supported: true,
            // Ironic's `[DEFAULT]default_portgroup_mode`.
            mode: Some("active-backup".to_owned()),
            created_at: crate::node::now(),
            ..Portgroup::default()
        }
    }
}

/// The fields of the short form of GET /v1/portgroups.
pub const SUMMARY: &[&str] = &["uuid", "address", "name", "links"];

static FIELDS: &[Field<Portgroup>] = &[
    resource::uuid_field!(23),
    Field {
        name: "name",
        since: 23,
        show: |v| json!(v.item.name),
        write: Some(Write {
            create: true,
            patch: true,
            reset: Reset::Null,
            get: |_, p| json!(p.name),
            set: |f, p, v, c| {
                let name = opt_string(f, v)?;
                if let Some(name) = &name {
                    validate_name(name)?;
                }
                set_if(&mut c.name, name, &p.name);
                Ok(())
            },
        }),
    },
    Field {
        name: "address",
        since: 23,
        show: |v| json!(v.item.address),
        write: Some(Write {
            create: true,
            patch: true,
            reset: Reset::Null,
            get: |_, p| json!(p.address),
            set: |f, p, v, c| {
                let address = opt_string(f, v)?.map(|a| normalize_mac(&a)).transpose()?;
                set_if(&mut c.address, address, &p.address);
                Ok(())
            },
        }),
    },
    resource::node_uuid_field!(23),
    Field {
        name: "standalone_ports_supported",
        since: 23,
        show: |v| json!(v.item.standalone_ports_supported),
        write: Some(Write {
            create: true,
            patch: true,
            reset: Reset::True,
            get: |_, p| json!(p.standalone_ports_supported),
            set: |f, p, v, c| {
                let standalone = boolean(f, v)?.unwrap_or(true);
                set_if(
                    &mut c.standalone_ports_supported,
                    standalone,
                    &p.standalone_ports_supported,
                );
                Ok(())
            },
        }),
    },
    resource::document_field!("extra", extra, 23),
    Field {
        name: "internal_info",
        since: 23,
        show: |v| Value::Object(v.item.internal_info.0.clone()),
        write: None,
    },
    resource::created_at_field!(23),
    resource::updated_at_field!(23),
    resource::links_field!("portgroups", 23),
    Field {
        name: "ports",
        since: 23,
        show: |v| sub_links(v, "ports"),
        write: None,
    },
    Field {
        name: "mode",
        since: 26,
        show: |v| json!(v.item.mode),
        write: Some(Write {
            create: true,
            patch: true,
            reset: Reset::Null,
            get: |_, p| json!(p.mode),
            set: |f, p, v, c| {
                set_if(&mut c.mode, opt_string(f, v)?, &p.mode);
                Ok(())
            },
        }),
    },
    resource::document_field!("properties", properties, 26),
    // Ironic's portgroup schema takes any physical network up to its column's 64 characters
    // (a port's must not be empty; a portgroup's may).
    resource::bounded_text_field!("physical_network", physical_network, 102, 64),
    resource::bounded_text_field!("category", category, 103, 80),
    Field {
        name: "dynamic_portgroup",
        since: 111,
        show: |v| json!(v.item.dynamic_portgroup),
        write: None,
    },
];
