//! A volume connector: one way a node reaches remote storage, by `type` (iqn, ip, mac, wwnn,
//! wwpn, port, portset in the baremetal CLI's words) and `connector_id`, unique together across
//! all nodes.

use serde_json::json;

use crate::{
    node::{Json, JsonObject, validate_length},
    resource::{self, Field, Reset, Write, set_if, string},
};

resource::record_type! {
    /// A volume connector as Ferrum stores, sends and shows it.
    VolumeConnector, VolumeConnectorChanges, volume_connectors {
        uuid: String,
        node_uuid: String,
        /// The API's `type`.
        connector_type: String,
        connector_id: String,
        extra: Json<JsonObject>,
        created_at: chrono::NaiveDateTime,
        updated_at: Option<chrono::NaiveDateTime>,
    }
}

resource::record_resource!(VolumeConnector, VolumeConnectorChanges, "volume/connectors", FIELDS, list_key "connectors");

impl VolumeConnector {
    /// A new connector, before a create request's values.
    pub fn template() -> VolumeConnector {
        VolumeConnector {
            uuid: uuid::Uuid::new_v4().to_string(),
            created_at: crate::node::now(),
            ..VolumeConnector::default()
        }
    }
}

/// The fields of the short form of GET /v1/volume/connectors (Ironic's `_DEFAULT_RETURN_FIELDS`).
pub const CONNECTOR_SUMMARY: &[&str] = &["uuid", "node_uuid", "type", "connector_id", "links"];

// Ironic's API takes any string as a connector's type (its schema says only "string"); the
// baremetal CLI offers seven. Ferrum takes any string too, within the column's width.
static FIELDS: &[Field<VolumeConnector>] = &[
    resource::uuid_field!(32),
    resource::node_uuid_field!(32),
    Field {
        name: "type",
        since: 32,
        show: |v| json!(v.item.connector_type),
        write: Some(Write {
            create: true,
            patch: true,
            reset: Reset::Mandatory,
            get: |_, c| json!(c.connector_type),
            set: |f, c, v, ch| {
                let kind = string(f, v)?;
                validate_length(f, &kind, 32)?;
                set_if(&mut ch.connector_type, kind, &c.connector_type);
                Ok(())
            },
        }),
    },
    Field {
        name: "connector_id",
        since: 32,
        show: |v| json!(v.item.connector_id),
        write: Some(Write {
            create: true,
            patch: true,
            reset: Reset::Mandatory,
            get: |_, c| json!(c.connector_id),
            set: |f, c, v, ch| {
                let id = string(f, v)?;
                validate_length(f, &id, 255)?;
                set_if(&mut ch.connector_id, id, &c.connector_id);
                Ok(())
            },
        }),
    },
    resource::document_field!("extra", extra, 32),
    resource::created_at_field!(32),
    resource::updated_at_field!(32),
    resource::links_field!("volume/connectors", 32),
];
