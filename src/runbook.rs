//! A runbook (API 1.92): a named list of clean (or service) steps that a manual clean or a
//! service runs instead of steps given in the request. Which nodes may run it (Ironic's
//! `_handle_runbook` in `api/controllers/v1/node.py`): before 1.112 a node whose traits include
//! the runbook's name, which must then be a trait name; from 1.112 a node that has one of the
//! runbook's own traits (`/v1/runbooks/{id}/traits`), and the name may be any URL-safe string.
//! A runbook created below 1.112 starts with its name as its one trait, so it stays usable from
//! either version (Ironic gives it none and backfills only existing runbooks, in a data
//! migration: a runbook made by an older client could then not be used by a newer one).
//! The API writes runbooks itself, as Ironic's does; its steps are read as a deploy template's
//! are ([`crate::steps::StepSchema`]), ranked by `order` and with `args` optional.
//!
//! Must not: know HTTP, the database or the conductor.

use serde_json::{Value, json};

use crate::{
    error::{Error, Result},
    node::{Json, JsonObject, validate_trait},
    patch::{Op, PatchOp},
    resource::{self, Field, Reset, Write, boolean, set_if},
    steps::{RunbookStep, StepSchema, UserStep},
};

resource::record_type! {
    /// A runbook as Ferrum stores and shows it.
    Runbook, RunbookChanges, runbooks {
        uuid: String,
        name: String,
        steps: Json<Vec<RunbookStep>>,
        /// Whether the steps run without booting the ramdisk.
        disable_ramdisk: bool,
        /// A public runbook is usable by any project (Ironic's policy: Ferrum has none).
        public: bool,
        owner: Option<String>,
        extra: Json<JsonObject>,
        created_at: chrono::NaiveDateTime,
        updated_at: Option<chrono::NaiveDateTime>,
        /// From 1.112.
        description: Option<String>,
        /// The traits a node needs one of to run it (1.112), written by `/traits` only.
        traits: Json<Vec<String>>,
    }
}

resource::record_resource!(Runbook, RunbookChanges, "runbooks", FIELDS);

/// The API minor version that introduced runbooks.
pub const SINCE: u32 = 92;

/// The API minor version of runbook traits, descriptions and names that need not be traits.
pub const SINCE_TRAITS: u32 = 112;

/// The fields of the short form of GET /v1/runbooks (Ironic's DEFAULT_RETURN_FIELDS).
pub const SUMMARY: &[&str] = &["uuid", "name", "links"];

/// A runbook's steps: ranked by `order`, `args` optional (Ironic's `RUNBOOK_STEP_SCHEMA`).
pub const RUNBOOK_STEPS: StepSchema = StepSchema {
    what: "runbook",
    rank: "order",
    args_required: false,
    rank_required: true,
};

pub fn not_found(ident: &str) -> Error {
    Error::NotFound(format!("Runbook {ident} could not be found."))
}

static FIELDS: &[Field<Runbook>] = &[
    resource::uuid_field!(SINCE),
    Field {
        name: "name",
        since: SINCE,
        show: |v| json!(v.item.name),
        write: Some(Write {
            create: true,
            patch: true,
            reset: Reset::Mandatory,
            get: |_, r| json!(r.name),
            set: |f, r, v, c| {
                let name = resource::string(f, v)?;
                validate_name(&name)?;
                set_if(&mut c.name, name, &r.name);
                Ok(())
            },
        }),
    },
    resource::bounded_text_field!("description", description, SINCE_TRAITS, 255),
    Field {
        name: "traits",
        since: SINCE_TRAITS,
        show: |v| json!(v.item.traits.0),
        write: None,
    },
    Field {
        name: "steps",
        since: SINCE,
        show: |v| json!(v.item.steps.0),
        write: Some(Write {
            create: true,
            patch: true,
            reset: Reset::Mandatory,
            get: |_, r| json!(r.steps.0),
            set: |_, r, v, changes| {
                let steps = RUNBOOK_STEPS
                    .read(v)?
                    .into_iter()
                    .map(
                        |UserStep {
                             interface,
                             step,
                             args,
                             rank,
                         }| RunbookStep {
                            interface,
                            step,
                            args,
                            order: rank,
                        },
                    )
                    .collect();
                set_if(&mut changes.steps, Json(steps), &r.steps);
                Ok(())
            },
        }),
    },
    Field {
        name: "disable_ramdisk",
        since: SINCE,
        show: |v| json!(v.item.disable_ramdisk),
        write: Some(Write {
            create: true,
            patch: true,
            reset: Reset::False,
            get: |_, r| json!(r.disable_ramdisk),
            set: |f, r, v, c| {
                let value = strict_boolean(f, v)?;
                set_if(&mut c.disable_ramdisk, value, &r.disable_ramdisk);
                Ok(())
            },
        }),
    },
    Field {
        name: "public",
        since: SINCE,
        show: |v| json!(v.item.public),
        write: Some(Write {
            create: true,
            patch: true,
            reset: Reset::False,
            get: |_, r| json!(r.public),
            set: |f, r, v, c| {
                let value = strict_boolean(f, v)?;
                set_if(&mut c.public, value, &r.public);
                Ok(())
            },
        }),
    },
    resource::bounded_text_field!("owner", owner, SINCE, 255),
    resource::document_field!("extra", extra, SINCE),
    resource::created_at_field!(SINCE),
    resource::updated_at_field!(SINCE),
    resource::links_field!("runbooks", SINCE),
];

/// Ironic's schema types `disable_ramdisk` and `public` as a JSON boolean or null (false).
fn strict_boolean(field: &str, v: Value) -> Result<bool> {
    match v {
        Value::Bool(_) | Value::Null => Ok(boolean(field, v)?.unwrap_or(false)),
        other => Err(resource::wrong(field, "a boolean", &other)),
    }
}

/// A name that can name the runbook in a URL (RFC 3986's unreserved characters), as Ironic's
/// schema from 1.112 has it; PATCH checks only this at any version, as Ironic's does.
fn validate_name(name: &str) -> Result<()> {
    let url_safe = name
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '.' | '_' | '~'));
    if (1..=255).contains(&name.len()) && url_safe {
        Ok(())
    } else {
        Err(Error::InvalidParameterValue(format!(
            "Invalid name '{name}': a runbook name is 1 to 255 of the characters A-Z, a-z, 0-9, '-', '.', '_' and '~'."
        )))
    }
}

/// A new runbook as a create request's `body` at API `minor` asks for it: `name` and `steps`
/// are required; below 1.112 the name must be a trait name and becomes the runbook's trait.
pub fn from_create(body: JsonObject, minor: u32) -> Result<Runbook> {
    RUNBOOK_STEPS.require_name_and_steps(&body)?;
    let mut runbook = crate::patch::created(Runbook::new_record(), body)?;
    if minor < SINCE_TRAITS {
        validate_trait("name", &runbook.name)?;
        runbook.traits = Json(vec![runbook.name.clone()]);
    }
    Ok(runbook)
}

/// The traits a PUT of the whole list gives: each checked, duplicates dropped, order kept.
pub fn checked_traits(traits: Vec<String>) -> Result<Vec<String>> {
    let mut kept: Vec<String> = Vec::with_capacity(traits.len());
    for t in traits {
        validate_trait("body", &t)?;
        if !kept.contains(&t) {
            kept.push(t);
        }
    }
    Ok(kept)
}

/// Ironic's rules of a PATCH on `owner` and `public`: a public runbook (or one the patch makes
/// public) has no owner, and making it public or not forgets its owner unless the patch sets one.
pub fn check_patch(runbook: &Runbook, ops: &[PatchOp], changes: &mut RunbookChanges) -> Result<()> {
    let sets = |path: &str| {
        ops.iter()
            .filter(|op| op.path == path && op.op != Op::Remove)
            .filter_map(|op| op.value.as_ref())
            .collect::<Vec<_>>()
    };
    let owner = sets("/owner");
    let public = sets("/public");
    let public_value = public
        .first()
        .is_some_and(|v| boolean("public", (*v).clone()).ok().flatten() == Some(true));
    if !owner.is_empty() && ((runbook.public && public.is_empty()) || public_value) {
        return Err(Error::InvalidParameterValue(
            "There cannot be an owner for a public runbook".to_owned(),
        ));
    }
    if !public.is_empty() && owner.is_empty() && runbook.owner.is_some() {
        changes.owner = Some(None);
    }
    Ok(())
}

/// The clean steps a runbook gives a manual clean (Ironic's `convert_steps`).
pub fn clean_steps(runbook: &Runbook) -> Vec<Value> {
    runbook
        .steps
        .0
        .iter()
        .map(
            |s| json!({"interface": s.interface, "step": s.step, "args": s.args, "order": s.order}),
        )
        .collect()
}

/// Whether a node with `traits` may run the runbook at API `minor`: from 1.112 the node needs
/// one of the runbook's traits, before it the runbook's name among its own.
pub fn check_usable(
    runbook: &Runbook,
    node_uuid: &str,
    traits: &[String],
    minor: u32,
) -> Result<()> {
    if minor < SINCE_TRAITS {
        return if traits.contains(&runbook.name) {
            Ok(())
        } else {
            Err(Error::InvalidParameterValue(format!(
                "This runbook has not been approved for use on this node {node_uuid}. Please ask an administrator to add it to your node traits."
            )))
        };
    }
    let wanted = &runbook.traits.0;
    if wanted.is_empty() {
        return Err(Error::InvalidParameterValue(format!(
            "Runbook {} has no traits configured. Please ask an administrator to add traits to the runbook.",
            runbook.uuid
        )));
    }
    if wanted.iter().any(|t| traits.contains(t)) {
        Ok(())
    } else {
        let mut sorted = wanted.clone();
        sorted.sort();
        // As Ironic's message shows the list (Python's repr).
        let listed = sorted
            .iter()
            .map(|t| format!("'{t}'"))
            .collect::<Vec<_>>()
            .join(", ");
        Err(Error::InvalidParameterValue(format!(
            "This runbook has not been approved for use on this node {node_uuid}. The node does not have any of the runbook's traits [{listed}]. Please ask an administrator to add a matching trait to your node."
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn body(v: Value) -> JsonObject {
        v.as_object().unwrap().clone()
    }

    #[test]
    fn runbooks_are_read_as_ironics_schema_reads_them() {
        let rb = from_create(
            body(json!({
                "name": "CUSTOM_WIPE",
                "steps": [{"interface": "deploy", "step": "erase_devices", "order": "1"}],
            })),
            95,
        )
        .unwrap();
        assert_eq!(rb.traits.0, ["CUSTOM_WIPE"]);
        assert_eq!(rb.steps.0[0].order, 1);
        assert!(rb.steps.0[0].args.is_empty());
        assert!(!rb.public && !rb.disable_ramdisk && rb.owner.is_none());
        assert_eq!(
            clean_steps(&rb),
            [json!({"interface": "deploy", "step": "erase_devices", "args": {}, "order": 1})]
        );
        let step = json!({"interface": "deploy", "step": "s", "order": 0});
        for bad in [
            json!({"name": "not a trait", "steps": [step]}),
            json!({"name": "CUSTOM_X"}),
            json!({"steps": [step]}),
            json!({"name": "CUSTOM_X", "steps": []}),
            json!({"name": "CUSTOM_X", "steps": [{"interface": "deploy", "step": "s", "priority": 1}]}),
            json!({"name": "CUSTOM_X", "steps": [{"interface": "boot", "step": "s", "order": 1}]}),
            json!({"name": "CUSTOM_X", "steps": [step, step]}),
            json!({"name": "CUSTOM_X", "steps": [step], "public": "yes"}),
            json!({"name": "CUSTOM_X", "steps": [step], "colour": "red"}),
        ] {
            assert!(from_create(body(bad.clone()), 95).is_err(), "{bad}");
        }
    }

    #[test]
    fn from_1_112_a_name_need_not_be_a_trait_and_traits_decide_who_may_run_it() {
        let step = json!({"interface": "deploy", "step": "s", "order": 0});
        let rb = from_create(
            body(json!({"name": "wipe-disks.v2~a", "steps": [step]})),
            112,
        )
        .unwrap();
        assert!(
            rb.traits.0.is_empty(),
            "a runbook starts without traits from 1.112"
        );
        for bad in ["not a trait", "", "a/b", &"x".repeat(256)] {
            assert!(
                from_create(body(json!({"name": bad, "steps": [step]})), 112).is_err(),
                "{bad:?}"
            );
        }
        assert!(from_create(body(json!({"name": "wipe", "steps": [step]})), 111).is_err());
        let long = "d".repeat(256);
        assert!(
            from_create(
                body(json!({"name": "w", "steps": [step], "description": long})),
                112
            )
            .is_err()
        );
        let node = vec!["CUSTOM_B".to_owned(), "CUSTOM_WIPE".to_owned()];
        let err = check_usable(&rb, "n", &node, 112).unwrap_err().to_string();
        assert!(err.contains("has no traits configured"), "{err}");
        let rb = Runbook {
            traits: Json(vec!["CUSTOM_Z".to_owned(), "CUSTOM_A".to_owned()]),
            ..rb
        };
        let err = check_usable(&rb, "n", &node, 112).unwrap_err().to_string();
        assert!(err.contains("traits ['CUSTOM_A', 'CUSTOM_Z']"), "{err}");
        let rb = Runbook {
            traits: Json(vec!["CUSTOM_Z".to_owned(), "CUSTOM_B".to_owned()]),
            ..rb
        };
        assert!(check_usable(&rb, "n", &node, 112).is_ok());
        // Below 1.112 only the name counts, whatever its traits.
        assert!(check_usable(&rb, "n", &node, 111).is_err());
        assert_eq!(
            checked_traits(vec![
                "CUSTOM_A".into(),
                "CUSTOM_B".into(),
                "CUSTOM_A".into()
            ])
            .unwrap(),
            ["CUSTOM_A", "CUSTOM_B"]
        );
        assert!(checked_traits(vec!["lower".into()]).is_err());
    }

    #[test]
    fn a_public_runbook_has_no_owner() {
        let op = |path: &str, value: Value| PatchOp {
            op: Op::Replace,
            path: path.to_owned(),
            value: Some(value),
        };
        let public = Runbook {
            public: true,
            ..Runbook::default()
        };
        let mut changes = RunbookChanges::default();
        assert!(check_patch(&public, &[op("/owner", json!("p"))], &mut changes).is_err());
        let owned = Runbook {
            owner: Some("p".to_owned()),
            ..Runbook::default()
        };
        assert!(
            check_patch(
                &owned,
                &[op("/public", json!(true)), op("/owner", json!("q"))],
                &mut changes
            )
            .is_err()
        );
        check_patch(&owned, &[op("/public", json!(true))], &mut changes).unwrap();
        assert_eq!(changes.owner, Some(None));
        let traits = vec!["CUSTOM_X".to_owned()];
        let rb = Runbook {
            name: "CUSTOM_X".to_owned(),
            ..Runbook::default()
        };
        assert!(check_usable(&rb, "n", &traits, 95).is_ok());
        assert!(check_usable(&rb, "n", &[], 95).is_err());
    }
}
