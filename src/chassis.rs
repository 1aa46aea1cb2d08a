//! A chassis (API 1.1): a named group of nodes with a description and `extra`. The API writes
//! chassis itself, as Ironic's does: no driver and no node lock is involved. A node names its
//! chassis by UUID; the database refuses deleting a chassis that still has nodes.

use crate::{
    error::{Error, Result},
    node::{Json, JsonObject},
    resource::{self, Field, sub_links},
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

resource::record_resource!(Chassis, ChassisChanges, "chassis", FIELDS);

/// The fields of the short form of GET /v1/chassis.
pub const SUMMARY: &[&str] = &["uuid", "description", "links"];

pub fn not_found(ident: &str) -> Error {
    Error::NotFound(format!("Chassis {ident} could not be found."))
}

static FIELDS: &[Field<Chassis>] = &[
    resource::uuid_field!(1),
    resource::bounded_text_field!("description", description, 1, 255),
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
    crate::patch::created(Chassis::new_record(), body)
}
