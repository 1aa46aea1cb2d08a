//! A chassis (API 1.1): a named group of nodes with a description and `extra`. The API writes
//! chassis itself, as Ironic's does: no driver and no node lock is involved. A node names its
//! chassis by UUID; the database refuses deleting a chassis that still has nodes.

use serde_json::json;

use crate::{
    error::{Error, Result},
    node::{Json, JsonObject, validate_length},
    resource::{self, Field, Reset, Resource, Write, opt_string, set_if, sub_links},
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
    resource::uuid_field!(1),
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
    resource::document_field!("extra", extra, 1),
    resource::created_at_field!(1),
    resource::updated_at_field!(1),
    resource::links_field!("chassis", 1),
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
