//! A chassis (API 1.1): a named group of nodes with a description and `extra`. The API writes
//! chassis itself, as Ironic's does: no driver and no node lock is involved. A node names its
//! chassis by UUID; the database refuses deleting a chassis that still has nodes.

use serde_json::{Value, json};

use crate::{
    error::{Error, Result},
    node::{Json, JsonObject, normalize_uuid, validate_length},
    resource::{
        self, Field, Reset, Resource, Write, links, object_or_null, opt_string, opt_timestamp,
        set_if, string, sub_links, timestamp,
    },
};

resource::record_type! {
    /// A chassis as Ferrum stores and shows it.
    Chassis, ChassisChanges, chassis {
        uuid: String,
        description: Option<String>,
        extra: Json<JsonObject>,
        created_at: chrono::NaiveDateTime,
        updated_at: Option<chrono::NaiveDateTime>,
    }
}

impl Resource for Chassis {
    type Changes = ChassisChanges;
    const COLLECTION: &'static str = "chassis";

    fn fields() -> &'static [Field<Chassis>] {
        FIELDS
    }

    fn uuid(&self) -> &str {
        &self.uuid
    }
}

/// The fields of the short form of GET /v1/chassis.
pub const SUMMARY: &[&str] = &["uuid", "description", "links"];

pub fn not_found(ident: &str) -> Error {
    Error::NotFound(format!("Chassis {ident} could not be found."))
}

static FIELDS: &[Field<Chassis>] = &[
    Field {
        name: "uuid",
        since: 1,
        show: |v| json!(v.item.uuid),
        write: Some(Write {
            create: true,
            patch: false,
            reset: Reset::Mandatory,
            get: |_, c| json!(c.uuid),
            set: |f, c, v, changes| {
                set_if(
                    &mut changes.uuid,
                    normalize_uuid(f, &string(f, v)?)?,
                    &c.uuid,
                );
                Ok(())
            },
        }),
    },
    Field {
        name: "description",
        since: 1,
        show: |v| json!(v.item.description),
        write: Some(Write {
            create: true,
            patch: true,
            reset: Reset::Null,
            get: |_, c| json!(c.description),
            set: |f, c, v, changes| {
                let description = opt_string(f, v)?;
                if let Some(d) = &description {
                    validate_length(f, d, 255)?;
                }
                set_if(&mut changes.description, description, &c.description);
                Ok(())
            },
        }),
    },
    Field {
        name: "extra",
        since: 1,
        show: |v| Value::Object(v.item.extra.0.clone()),
        write: Some(Write {
            create: true,
            patch: true,
            reset: Reset::EmptyObject,
            get: |_, c| Value::Object(c.extra.0.clone()),
            set: |f, c, v, changes| {
                set_if(&mut changes.extra, Json(object_or_null(f, v)?), &c.extra);
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
        name: "links",
        since: 1,
        show: |v| links(v.base, "chassis", &v.item.uuid),
        write: None,
    },
    Field {
        name: "nodes",
        since: 1,
        show: |v| sub_links(v, "nodes"),
        write: None,
    },
];

/// A new chassis as a create request's `body` asks for it.
pub fn from_create(body: JsonObject) -> Result<Chassis> {
    let mut chassis = Chassis {
        uuid: uuid::Uuid::new_v4().to_string(),
        created_at: crate::node::now(),
        ..Chassis::default()
    };
    crate::patch::changes_for_create(&chassis, body)?.set_into(&mut chassis);
    Ok(chassis)
}
