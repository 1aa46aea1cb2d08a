//! A portgroup (API 1.23): a bond of a node's ports, with its own MAC address and name.

use serde_json::{Value, json};

use super::normalize_mac;
use crate::{
    node::{Json, JsonObject, normalize_uuid, validate_name},
    resource::{
        self, Field, Reset, Resource, Write, boolean, links, object_or_null, opt_string,
        opt_timestamp, set_if, string, sub_links, timestamp,
    },
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
    }
}

impl Resource for Portgroup {
    type Changes = PortgroupChanges;
    const COLLECTION: &'static str = "portgroups";

    fn fields() -> &'static [Field<Portgroup>] {
        FIELDS
    }

    fn uuid(&self) -> &str {
        &self.uuid
    }
}

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
    Field {
        name: "uuid",
        since: 23,
        show: |v| json!(v.item.uuid),
        write: Some(Write {
            create: true,
            patch: false,
            reset: Reset::Mandatory,
            get: |_, p| json!(p.uuid),
            set: |f, p, v, c| {
                set_if(&mut c.uuid, normalize_uuid(f, &string(f, v)?)?, &p.uuid);
                Ok(())
            },
        }),
    },
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
    Field {
        name: "node_uuid",
        since: 23,
        show: |v| json!(v.item.node_uuid),
        write: Some(Write {
            create: true,
            patch: true,
            reset: Reset::Mandatory,
            get: |_, p| json!(p.node_uuid),
            set: |f, p, v, c| {
                set_if(
                    &mut c.node_uuid,
                    normalize_uuid(f, &string(f, v)?)?,
                    &p.node_uuid,
                );
                Ok(())
            },
        }),
    },
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
    Field {
        name: "extra",
        since: 23,
        show: |v| Value::Object(v.item.extra.0.clone()),
        write: Some(Write {
            create: true,
            patch: true,
            reset: Reset::EmptyObject,
            get: |_, p| Value::Object(p.extra.0.clone()),
            set: |f, p, v, c| {
                set_if(&mut c.extra, Json(object_or_null(f, v)?), &p.extra);
                Ok(())
            },
        }),
    },
    Field {
        name: "internal_info",
        since: 23,
        show: |v| Value::Object(v.item.internal_info.0.clone()),
        write: None,
    },
    Field {
        name: "created_at",
        since: 23,
        show: |v| json!(timestamp(&v.item.created_at)),
        write: None,
    },
    Field {
        name: "updated_at",
        since: 23,
        show: |v| opt_timestamp(&v.item.updated_at),
        write: None,
    },
    Field {
        name: "links",
        since: 23,
        show: |v| links(v.base, "portgroups", &v.item.uuid),
        write: None,
    },
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
    Field {
        name: "properties",
        since: 26,
        show: |v| Value::Object(v.item.properties.0.clone()),
        write: Some(Write {
            create: true,
            patch: true,
            reset: Reset::EmptyObject,
            get: |_, p| Value::Object(p.properties.0.clone()),
            set: |f, p, v, c| {
                set_if(
                    &mut c.properties,
                    Json(object_or_null(f, v)?),
                    &p.properties,
                );
                Ok(())
            },
        }),
    },
];
