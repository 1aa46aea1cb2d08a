//! A deploy template (API 1.55): a named list of deploy steps. A deploy adds the steps of the
//! templates whose names are among the instance's traits (`instance_info.traits`) to its
//! driver's (`conductor/steps.rs`). The API writes templates itself, as Ironic's does: no driver
//! and no node lock is involved. The steps are checked here as Ironic's API schema checks them
//! (`DEPLOY_STEP_SCHEMA`, `duplicate_steps` in `api/controllers/v1/utils.py`); whether a node's
//! driver offers them is the conductor's check at deploy time.
//!
//! Must not: know HTTP, the database or the conductor.

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::{
    error::{Error, Result},
    node::{Json, JsonObject, validate_trait},
    resource::{self, Field, Reset, Resource, Write, set_if},
};

/// The interfaces whose steps a deploy runs, in Ironic's order for steps of equal priority
/// (`DEPLOYING_INTERFACE_PRIORITY`, `conductor/steps.py`): the first runs first.
pub const DEPLOYING_INTERFACES: &[&str] = &[
    "vendor",
    "power",
    "management",
    "firmware",
    "deploy",
    "bios",
    "raid",
];

/// One deploy step, as a template, `driver_internal_info.deploy_steps` and `deploy_step` show it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeployStep {
    pub interface: String,
    pub step: String,
    #[serde(default)]
    pub args: JsonObject,
    pub priority: u32,
}

impl DeployStep {
    /// The step as JSON (what `deploy_step` holds while it runs).
    pub fn to_object(&self) -> JsonObject {
        match serde_json::to_value(self) {
            Ok(Value::Object(m)) => m,
            _ => JsonObject::new(),
        }
    }

    /// The rank of its interface among equal priorities (lower runs first).
    pub fn interface_rank(&self) -> usize {
        DEPLOYING_INTERFACES
            .iter()
            .position(|i| *i == self.interface)
            .unwrap_or(DEPLOYING_INTERFACES.len())
    }
}

resource::record_type! {
    /// A deploy template as Ferrum stores and shows it.
    DeployTemplate, DeployTemplateChanges, deploy_templates {
        uuid: String,
        name: String,
        steps: Json<Vec<DeployStep>>,
        extra: Json<JsonObject>,
        created_at: chrono::NaiveDateTime,
        updated_at: Option<chrono::NaiveDateTime>,
    }
}

impl Resource for DeployTemplate {
    type Changes = DeployTemplateChanges;
    const COLLECTION: &'static str = "deploy_templates";

    fn fields() -> &'static [Field<DeployTemplate>] {
        FIELDS
    }

    fn uuid(&self) -> &str {
        &self.uuid
    }
}

/// The API minor version that introduced deploy templates.
pub const SINCE: u32 = 55;

/// The fields of the short form of GET /v1/deploy_templates (Ironic's DEFAULT_RETURN_FIELDS).
pub const SUMMARY: &[&str] = &["uuid", "name", "links"];

pub fn not_found(ident: &str) -> Error {
    Error::NotFound(format!("Deploy template {ident} could not be found."))
}

static FIELDS: &[Field<DeployTemplate>] = &[
    resource::uuid_field!(SINCE),
    Field {
        name: "name",
        since: SINCE,
        show: |v| json!(v.item.name),
        write: Some(Write {
            create: true,
            patch: true,
            reset: Reset::Mandatory,
            get: |_, t| json!(t.name),
            set: |f, t, v, changes| {
                let name = resource::string(f, v)?;
                validate_trait(f, &name)?;
                set_if(&mut changes.name, name, &t.name);
                Ok(())
            },
        }),
    },
    Field {
        name: "steps",
        since: SINCE,
        show: |v| json!(v.item.steps.0),
        write: Some(Write {
            create: true,
            patch: true,
            reset: Reset::Mandatory,
            get: |_, t| json!(t.steps.0),
            set: |_, t, v, changes| {
                let steps = read_steps(v)?;
                set_if(&mut changes.steps, Json(steps), &t.steps);
                Ok(())
            },
        }),
    },
    resource::document_field!("extra", extra, SINCE),
    resource::created_at_field!(SINCE),
    resource::updated_at_field!(SINCE),
    resource::links_field!("deploy_templates", SINCE),
];

fn invalid(reason: String) -> Error {
    Error::InvalidParameterValue(format!("Invalid deploy template: {reason}"))
}

/// A template's `steps` as Ironic's schema takes them: a list of at least one step, each an
/// object of exactly `interface` (a deploying interface), `step` (a non-empty string), `args` (an
/// object) and `priority` (an integer of at least 0, or a string of digits), no two with the same
/// interface and step.
pub fn read_steps(v: Value) -> Result<Vec<DeployStep>> {
    let Value::Array(items) = v else {
        return Err(invalid(format!("steps must be a list, got {v}")));
    };
    if items.is_empty() {
        return Err(invalid("steps must hold at least one step".to_owned()));
    }
    let mut steps: Vec<DeployStep> = Vec::with_capacity(items.len());
    for item in items {
        let step = read_step(item)?;
        if steps
            .iter()
            .any(|s| s.interface == step.interface && s.step == step.step)
        {
            return Err(invalid(format!(
                "Duplicate deploy steps. A template cannot have multiple deploy steps with the same interface and step. Duplicates: interface: {}, step: {}",
                step.interface, step.step
            )));
        }
        steps.push(step);
    }
    Ok(steps)
}

fn read_step(item: Value) -> Result<DeployStep> {
    let Value::Object(mut m) = item else {
        return Err(invalid(format!("a step must be an object, got {item}")));
    };
    for key in ["interface", "step", "args", "priority"] {
        if !m.contains_key(key) {
            return Err(invalid(format!("'{key}' is a required property of a step")));
        }
    }
    if let Some(key) = m
        .keys()
        .find(|k| !["interface", "step", "args", "priority"].contains(&k.as_str()))
    {
        return Err(invalid(format!(
            "Additional properties are not allowed in a step ('{key}' was unexpected)"
        )));
    }
    let interface = match m.remove("interface") {
        Some(Value::String(i)) if DEPLOYING_INTERFACES.contains(&i.as_str()) => i,
        other => {
            return Err(invalid(format!(
                "a step's interface must be one of {}, got {}",
                DEPLOYING_INTERFACES.join(", "),
                other.unwrap_or_default()
            )));
        }
    };
    let step = match m.remove("step") {
        Some(Value::String(s)) if !s.is_empty() => s,
        other => {
            return Err(invalid(format!(
                "a step's name must be a non-empty string, got {}",
                other.unwrap_or_default()
            )));
        }
    };
    let args = match m.remove("args") {
        Some(Value::Object(a)) => a,
        other => {
            return Err(invalid(format!(
                "a step's args must be an object, got {}",
                other.unwrap_or_default()
            )));
        }
    };
    let priority = match m.remove("priority") {
        Some(Value::Number(n)) => n.as_u64().and_then(|p| u32::try_from(p).ok()),
        Some(Value::String(s)) if !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()) => {
            s.parse::<u32>().ok()
        }
        _ => None,
    }
    .ok_or_else(|| invalid("a step's priority must be an integer of at least 0".to_owned()))?;
    Ok(DeployStep {
        interface,
        step,
        args,
        priority,
    })
}

/// A new template as a create request's `body` asks for it: `name` and `steps` are required.
pub fn from_create(body: JsonObject) -> Result<DeployTemplate> {
    for key in ["name", "steps"] {
        if !body.contains_key(key) {
            return Err(invalid(format!("'{key}' is a required property")));
        }
    }
    let mut template = DeployTemplate {
        uuid: uuid::Uuid::new_v4().to_string(),
        created_at: crate::node::now(),
        ..DeployTemplate::default()
    };
    crate::patch::changes_for_create(&template, body)?.set_into(&mut template);
    Ok(template)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn step(v: Value) -> Result<Vec<DeployStep>> {
        read_steps(json!([v]))
    }

    #[test]
    fn steps_are_read_as_ironics_schema_reads_them() {
        let ok = step(json!({"interface": "bios", "step": "s", "args": {}, "priority": "10"}));
        assert_eq!(ok.unwrap()[0].priority, 10);
        let bad = [
            json!({"interface": "boot", "step": "s", "args": {}, "priority": 1}),
            json!({"interface": "bios", "step": "", "args": {}, "priority": 1}),
            json!({"interface": "bios", "step": "s", "args": [], "priority": 1}),
            json!({"interface": "bios", "step": "s", "args": {}, "priority": -1}),
            json!({"interface": "bios", "step": "s", "args": {}, "priority": "x"}),
            json!({"interface": "bios", "step": "s", "args": {}}),
            json!({"interface": "bios", "step": "s", "args": {}, "priority": 1, "x": 1}),
            json!("bios.s"),
        ];
        for b in bad {
            assert!(step(b.clone()).is_err(), "{b}");
        }
        assert!(read_steps(json!([])).is_err());
        assert!(read_steps(json!({})).is_err());
        let s = json!({"interface": "bios", "step": "s", "args": {}, "priority": 1});
        let dup = read_steps(json!([s, s])).unwrap_err().to_string();
        assert!(dup.contains("Duplicate deploy steps"), "{dup}");
    }
}
