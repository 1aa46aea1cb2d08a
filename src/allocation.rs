//! An allocation (API 1.52): a request for one available node of a resource class, with traits,
//! among candidate nodes and, from 1.60, of an owner. A conductor processes it
//! (`conductor::allocations`): the allocation ends `active` with its node reserved (the node's
//! `instance_uuid` and `allocation_uuid` set to the allocation's UUID) or `error` with
//! `last_error`. From 1.57 PATCH changes its name and `extra` (the API writes them, as Ironic's
//! does); from 1.58 a create naming a deployed node backfills an allocation for it.

use serde_json::{Value, json};

use crate::{
    error::{Error, Result},
    node::{Json, JsonObject, validate_length, validate_name, validate_resource_class},
    resource::{self, Field, Reset, Write, opt_string, set_if},
};

/// The states of an allocation, as the API names them.
pub const ALLOCATING: &str = "allocating";
pub const ACTIVE: &str = "active";
pub const ERROR: &str = "error";

resource::record_type! {
    /// An allocation as Ferrum stores and shows it.
    Allocation, AllocationChanges, allocations {
        uuid: String,
        name: Option<String>,
        /// The node reserved for it, once active.
        node_uuid: Option<String>,
        state: String,
        last_error: Option<String>,
        resource_class: Option<String>,
        traits: Json<Vec<String>>,
        /// The UUIDs of the nodes it may take (the API resolved names); empty for any.
        candidate_nodes: Json<Vec<String>>,
        extra: Json<JsonObject>,
        owner: Option<String>,
        created_at: chrono::NaiveDateTime,
        updated_at: Option<chrono::NaiveDateTime>,
        /// The host name of the conductor processing it while it is `allocating` (not shown).
        #[serde(default)]
        conductor_affinity: Option<String>,
    }
}

resource::record_resource!(Allocation, AllocationChanges, "allocations", FIELDS);

/// The fields of the short form of GET /v1/allocations (Ironic shows them all).
pub const SUMMARY: &[&str] = &[
    "uuid",
    "name",
    "node_uuid",
    "state",
    "last_error",
    "resource_class",
    "traits",
    "candidate_nodes",
    "extra",
    "owner",
    "created_at",
    "updated_at",
    "links",
];

pub fn not_found(ident: &str) -> Error {
    Error::NotFound(format!("Allocation {ident} could not be found."))
}

/// A list of strings, as `traits` and `candidate_nodes` are written (null is empty).
fn string_list(field: &str, v: Value) -> Result<Vec<String>> {
    match v {
        Value::Null => Ok(Vec::new()),
        Value::Array(items) => items
            .into_iter()
            .map(|i| resource::string(field, i))
            .collect(),
        other => Err(resource::wrong(field, "a list of strings", &other)),
    }
}

static FIELDS: &[Field<Allocation>] = &[
    resource::uuid_field!(52),
    Field {
        name: "name",
        since: 52,
        show: |v| json!(v.item.name),
        write: Some(Write {
            create: true,
            patch: true,
            reset: Reset::Null,
            get: |_, a| json!(a.name),
            set: |f, a, v, c| {
                let name = opt_string(f, v)?;
                if let Some(n) = &name {
                    validate_name(n).map_err(|_| {
                        Error::InvalidParameterValue(format!(
                            "Cannot use invalid name '{n}' for an allocation."
                        ))
                    })?;
                }
                set_if(&mut c.name, name, &a.name);
                Ok(())
            },
        }),
    },
    Field {
        name: "node_uuid",
        since: 52,
        show: |v| json!(v.item.node_uuid),
        write: None,
    },
    Field {
        name: "state",
        since: 52,
        show: |v| json!(v.item.state),
        write: None,
    },
    Field {
        name: "last_error",
        since: 52,
        show: |v| json!(v.item.last_error),
        write: None,
    },
    Field {
        name: "resource_class",
        since: 52,
        show: |v| json!(v.item.resource_class),
        write: Some(Write {
            create: true,
            patch: false,
            reset: Reset::Null,
            get: |_, a| json!(a.resource_class),
            set: |f, a, v, c| {
                let rc = opt_string(f, v)?;
                if let Some(rc) = &rc {
                    validate_resource_class(rc)?;
                }
                set_if(&mut c.resource_class, rc, &a.resource_class);
                Ok(())
            },
        }),
    },
    Field {
        name: "traits",
        since: 52,
        show: |v| json!(v.item.traits.0),
        write: Some(Write {
            create: true,
            patch: false,
            reset: Reset::Null,
            get: |_, a| json!(a.traits.0),
            set: |f, a, v, c| {
                let traits = string_list(f, v)?;
                for t in &traits {
                    crate::node::validate_trait(f, t)?;
                }
                set_if(&mut c.traits, Json(traits), &a.traits);
                Ok(())
            },
        }),
    },
    Field {
        name: "candidate_nodes",
        since: 52,
        show: |v| json!(v.item.candidate_nodes.0),
        write: Some(Write {
            create: true,
            patch: false,
            reset: Reset::Null,
            get: |_, a| json!(a.candidate_nodes.0),
            set: |f, a, v, c| {
                // Names or UUIDs here; the API resolves them to UUIDs afterwards.
                let nodes = string_list(f, v)?;
                set_if(&mut c.candidate_nodes, Json(nodes), &a.candidate_nodes);
                Ok(())
            },
        }),
    },
    resource::document_field!("extra", extra, 52),
    Field {
        name: "owner",
        since: 60,
        show: |v| json!(v.item.owner),
        write: Some(Write {
            create: true,
            patch: false,
            reset: Reset::Null,
            get: |_, a| json!(a.owner),
            set: |f, a, v, c| {
                let owner = opt_string(f, v)?;
                if let Some(o) = &owner {
                    validate_length(f, o, 255)?;
                }
                set_if(&mut c.owner, owner, &a.owner);
                Ok(())
            },
        }),
    },
    resource::created_at_field!(52),
    resource::updated_at_field!(52),
    resource::links_field!("allocations", 52),
];

/// A new allocation (state `allocating`) as a create request's `body` asks for it; the
/// request's `node` (1.58) is not a field and was taken out by the API.
pub fn from_create(body: JsonObject) -> Result<Allocation> {
    let allocation = Allocation {
        state: ALLOCATING.to_owned(),
        ..Allocation::new_record()
    };
    crate::patch::created(allocation, body)
}

/// Whether `node` has every trait of `traits`.
pub fn traits_match(traits: &[String], node_traits: &[String]) -> bool {
    traits.iter().all(|t| node_traits.contains(t))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_create_reads_its_fields_and_refuses_bad_values() {
        let body = json!({"name": "a1", "resource_class": "gold", "traits": ["CUSTOM_X"]});
        let a = from_create(body.as_object().cloned().unwrap_or_default()).unwrap();
        assert_eq!(a.state, ALLOCATING);
        assert_eq!(a.name.as_deref(), Some("a1"));
        assert_eq!(a.traits.0, vec!["CUSTOM_X".to_owned()]);
        for bad in [
            json!({"traits": ["lower"]}),
            json!({"traits": "CUSTOM_X"}),
            json!({"name": "not a name"}),
            json!({"candidate_nodes": [1]}),
        ] {
            let err = from_create(bad.as_object().cloned().unwrap_or_default()).unwrap_err();
            assert!(
                matches!(err, Error::InvalidParameterValue(_)),
                "{bad}: {err:?}"
            );
        }
    }

    #[test]
    fn traits_match_needs_every_requested_trait() {
        let node = vec!["CUSTOM_A".to_owned(), "CUSTOM_B".to_owned()];
        assert!(traits_match(&[], &node));
        assert!(traits_match(&["CUSTOM_A".to_owned()], &node));
        assert!(!traits_match(&["CUSTOM_C".to_owned()], &node));
    }
}
