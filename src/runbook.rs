//! A runbook (API 1.92): a named list of clean (or service) steps that a manual clean runs
//! instead of steps given in the request, on a node whose traits include the runbook's name
//! (Ironic's `_handle_runbook` in `api/controllers/v1/node.py`, before 1.112). The API writes
//! runbooks itself, as Ironic's does; its steps are read as a deploy template's are
//! ([`deploy_template::StepSchema`]), ranked by `order` and with `args` optional.
//!
//! Must not: know HTTP, the database or the conductor.

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::{
    deploy_template::{StepSchema, UserStep},
    error::{Error, Result},
    node::{Json, JsonObject, validate_length},
    patch::{Op, PatchOp},
    resource::{self, Field, Reset, Resource, Write, boolean, opt_string, set_if},
};

/// One step of a runbook, as a response shows it and a clean is given it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunbookStep {
    pub interface: String,
    pub step: String,
    #[serde(default)]
    pub args: JsonObject,
    pub order: u32,
}

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
    }
}

impl Resource for Runbook {
    type Changes = RunbookChanges;
    const COLLECTION: &'static str = "runbooks";

    fn fields() -> &'static [Field<Runbook>] {
        FIELDS
    }

    fn uuid(&self) -> &str {
        &self.uuid
    }
}

/// The API minor version that introduced runbooks.
pub const SINCE: u32 = 92;

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
    resource::trait_name_field!(SINCE),
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
    Field {
        name: "owner",
        since: SINCE,
        show: |v| json!(v.item.owner),
        write: Some(Write {
            create: true,
            patch: true,
            reset: Reset::Null,
            get: |_, r| json!(r.owner),
            set: |f, r, v, c| {
                let owner = opt_string(f, v)?;
                if let Some(owner) = &owner {
                    validate_length(f, owner, 255)?;
                }
                set_if(&mut c.owner, owner, &r.owner);
                Ok(())
            },
        }),
    },
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

/// A new runbook as a create request's `body` asks for it: `name` and `steps` are required.
pub fn from_create(body: JsonObject) -> Result<Runbook> {
    for key in ["name", "steps"] {
        if !body.contains_key(key) {
            return Err(RUNBOOK_STEPS.invalid(format!("'{key}' is a required property")));
        }
    }
    let mut runbook = Runbook {
        uuid: uuid::Uuid::new_v4().to_string(),
        created_at: crate::node::now(),
        ..Runbook::default()
    };
    crate::patch::changes_for_create(&runbook, body)?.set_into(&mut runbook);
    Ok(runbook)
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

/// Whether a node with `traits` may run the runbook: its name must be among them (before API
/// 1.112, whose runbook traits Ferrum does not have).
pub fn check_usable(runbook: &Runbook, node_uuid: &str, traits: &[String]) -> Result<()> {
    if traits.contains(&runbook.name) {
        Ok(())
    } else {
        Err(Error::InvalidParameterValue(format!(
            "This runbook has not been approved for use on this node {node_uuid}. Please ask an administrator to add it to your node traits."
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
        let rb = from_create(body(json!({
            "name": "CUSTOM_WIPE",
            "steps": [{"interface": "deploy", "step": "erase_devices", "order": "1"}],
        })))
        .unwrap();
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
            assert!(from_create(body(bad.clone())).is_err(), "{bad}");
        }
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
        assert!(check_usable(&rb, "n", &traits).is_ok());
        assert!(check_usable(&rb, "n", &[]).is_err());
    }
}
