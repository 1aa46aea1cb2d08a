//! A volume target: a volume (`volume_id`, of `volume_type`, reached as `properties` say) that a
//! node boots from (`boot_index` 0) or attaches, the boot index unique within the node.
//! `properties` may hold connection secrets and are shown masked, as Ironic shows them.

use serde_json::{Value, json};

use crate::{
    error::Error,
    node::{Json, JsonObject, mask, validate_length},
    resource::{self, Field, Reset, Write, set_if, string},
};

resource::record_type! {
    /// A volume target as Ferrum stores, sends and shows it.
    VolumeTarget, VolumeTargetChanges, volume_targets {
        uuid: String,
        node_uuid: String,
        volume_type: String,
        properties: Json<JsonObject>,
        boot_index: i32,
        volume_id: String,
        extra: Json<JsonObject>,
        created_at: chrono::NaiveDateTime,
        updated_at: Option<chrono::NaiveDateTime>,
    }
}

resource::record_resource!(VolumeTarget, VolumeTargetChanges, "volume/targets", FIELDS, list_key "targets");

impl VolumeTarget {
    /// A new target, before a create request's values.
    pub fn template() -> VolumeTarget {
        VolumeTarget {
            uuid: uuid::Uuid::new_v4().to_string(),
            created_at: crate::node::now(),
            ..VolumeTarget::default()
        }
    }
}

/// The fields of the short form of GET /v1/volume/targets (Ironic's `_DEFAULT_RETURN_FIELDS`).
pub const TARGET_SUMMARY: &[&str] = &[
    "uuid",
    "node_uuid",
    "volume_type",
    "boot_index",
    "volume_id",
    "links",
];

/// A boot index: an integer from 0 (Ironic's schema says integer; its column cannot hold more
/// than 32 bits, and the boot order has no use for a negative one).
fn boot_index(field: &str, v: Value) -> crate::error::Result<i32> {
    v.as_i64()
        .filter(|i| *i >= 0)
        .and_then(|i| i32::try_from(i).ok())
        .ok_or_else(|| {
            Error::InvalidParameterValue(format!(
                "Invalid value for {field}: {v} is not an integer from 0 to 2147483647"
            ))
        })
}

static FIELDS: &[Field<VolumeTarget>] = &[
    resource::uuid_field!(32),
    resource::node_uuid_field!(32),
    Field {
        name: "volume_type",
        since: 32,
        show: |v| json!(v.item.volume_type),
        write: Some(Write {
            create: true,
            patch: true,
            reset: Reset::Mandatory,
            get: |_, t| json!(t.volume_type),
            set: |f, t, v, ch| {
                let kind = string(f, v)?;
                validate_length(f, &kind, 64)?;
                set_if(&mut ch.volume_type, kind, &t.volume_type);
                Ok(())
            },
        }),
    },
    Field {
        name: "properties",
        since: 32,
        show: |v| Value::Object(mask::mask_secrets(&v.item.properties)),
        write: Some(Write {
            create: true,
            patch: true,
            reset: Reset::EmptyObject,
            get: |_, t| Value::Object(t.properties.0.clone()),
            set: |f, t, v, ch| {
                let doc = resource::object_or_null(f, v)?;
                set_if(&mut ch.properties, Json(doc), &t.properties);
                Ok(())
            },
        }),
    },
    Field {
        name: "boot_index",
        since: 32,
        show: |v| json!(v.item.boot_index),
        write: Some(Write {
            create: true,
            patch: true,
            reset: Reset::Mandatory,
            get: |_, t| json!(t.boot_index),
            set: |f, t, v, ch| {
                set_if(&mut ch.boot_index, boot_index(f, v)?, &t.boot_index);
                Ok(())
            },
        }),
    },
    Field {
        name: "volume_id",
        since: 32,
        show: |v| json!(v.item.volume_id),
        write: Some(Write {
            create: true,
            patch: true,
            reset: Reset::Mandatory,
            get: |_, t| json!(t.volume_id),
            set: |f, t, v, ch| {
                let id = string(f, v)?;
                validate_length(f, &id, 36)?;
                set_if(&mut ch.volume_id, id, &t.volume_id);
                Ok(())
            },
        }),
    },
    resource::document_field!("extra", extra, 32),
    resource::created_at_field!(32),
    resource::updated_at_field!(32),
    resource::links_field!("volume/targets", 32),
];
