//! An inspection rule (API 1.96): conditions checked against a node and the data its inspection
//! found, and actions run on the node when they all hold (Ironic's
//! `common/inspection_rules/`). The API writes rules itself, as Ironic's does; a finished
//! inspection runs the rules of its phase (`engine.rs`) in priority order. A rule is checked as
//! Ironic checks it: its schema (`create_request_body`: the operators and actions it knows, the
//! shapes of `args`, `loop` and `multiple`), then `validate_rule` (the phase, the priority range,
//! and each operator's and action's named arguments). A sensitive rule's conditions and actions
//! are never shown.
//!
//! Must not: know HTTP, the database or the conductor.

pub mod engine;
pub mod interpolate;
pub mod operators;

pub use engine::{RuleError, apply_rules};

use serde_json::{Value, json};

use crate::{
    error::{Error, Result},
    node::{Json, JsonObject, normalize_uuid},
    patch::{Op, PatchOp},
    resource::{self, Field, Reset, Write, set_if},
};

resource::record_type! {
    /// An inspection rule as Ferrum stores and shows it.
    InspectionRule, InspectionRuleChanges, inspection_rules {
        uuid: String,
        description: Option<String>,
        /// When the rule runs; Ironic knows one phase, `main` (the end of an inspection).
        phase: String,
        /// Rules run from the highest priority down (0 to 9999 for rules written through the API).
        priority: i32,
        /// A sensitive rule's conditions and actions are hidden in every response, and the flag
        /// cannot be unset.
        sensitive: bool,
        /// The conditions, as given (each with `op`, `args`, and optionally `loop` and
        /// `multiple`; other members are kept, not shown).
        conditions: Json<Vec<JsonObject>>,
        /// The actions, as given (each with `op`, `args` and optionally `loop`).
        actions: Json<Vec<JsonObject>>,
        created_at: chrono::NaiveDateTime,
        updated_at: Option<chrono::NaiveDateTime>,
    }
}

resource::record_resource!(
    InspectionRule,
    InspectionRuleChanges,
    "inspection_rules",
    FIELDS
);

/// The API minor version that introduced inspection rules.
pub const SINCE: u32 = 96;

/// The fields of the short form of GET /v1/inspection_rules (Ironic's DEFAULT_RETURN_FIELDS,
/// with the links every item keeps).
pub const SUMMARY: &[&str] = &["uuid", "priority", "phase", "description", "links"];

/// The phases a rule can run in (Ironic's `InspectionPhase`).
pub const PHASES: &[&str] = &["main"];

/// The highest priority a rule written through the API may have.
pub const MAX_PRIORITY: i64 = 9999;

/// How a condition's results over its `loop` combine.
pub const MULTIPLE: &[&str] = &["any", "all", "first", "last"];

/// The named arguments of an operator or action: required, then optional (Ironic reads them
/// from the signature of the plugin's `__call__`; a list of `args` is read in this order).
#[derive(Debug, Clone, Copy)]
pub struct Signature {
    pub name: &'static str,
    pub required: &'static [&'static str],
    pub optional: &'static [&'static str],
    /// The arguments interpolated outside a loop (Ironic's `FORMATTED_ARGS`; in a loop, all).
    pub formatted: &'static [&'static str],
}

const fn sig(
    name: &'static str,
    required: &'static [&'static str],
    optional: &'static [&'static str],
    formatted: &'static [&'static str],
) -> Signature {
    Signature {
        name,
        required,
        optional,
        formatted,
    }
}

/// The condition operators, in Ironic's order (`operators.OPERATORS`); each may be inverted
/// with a leading `!`.
pub const OPERATORS: &[Signature] = &[
    sig("eq", &["values"], &["force_strings"], &["values"]),
    sig("lt", &["values"], &["force_strings"], &["values"]),
    sig("gt", &["values"], &["force_strings"], &["values"]),
    sig("is-empty", &["value"], &[], &["value"]),
    sig(
        "in-net",
        &["address", "subnet"],
        &[],
        &["address", "subnet"],
    ),
    sig("matches", &["value", "regex"], &[], &["value"]),
    sig("contains", &["value", "regex"], &[], &["value"]),
    sig("one-of", &["value"], &["values"], &["value"]),
    sig("is-none", &["value"], &[], &["value"]),
    sig("is-true", &["value"], &[], &["value"]),
    sig("is-false", &["value"], &[], &["value"]),
];

/// The actions, in Ironic's order (`actions.ACTIONS`). The plugin-data actions also take
/// `plugin_data`, which the engine gives them (a rule's own is ignored).
pub const ACTIONS: &[Signature] = &[
    sig("fail", &["msg"], &[], &[]),
    sig("log", &["msg"], &["level"], &["msg"]),
    sig("set-attribute", &["path", "value"], &[], &["value"]),
    sig(
        "extend-attribute",
        &["path", "value"],
        &["unique"],
        &["value"],
    ),
    sig("del-attribute", &["path"], &[], &[]),
    sig("set-capability", &["name", "value"], &[], &["value"]),
    sig("unset-capability", &["name"], &[], &[]),
    sig("add-trait", &["name"], &[], &[]),
    sig("remove-trait", &["name"], &[], &[]),
    sig(
        "set-plugin-data",
        &["path", "value", "plugin_data"],
        &[],
        &["value"],
    ),
    sig(
        "extend-plugin-data",
        &["path", "value", "plugin_data"],
        &["unique"],
        &["value"],
    ),
    sig("unset-plugin-data", &["path", "plugin_data"], &[], &[]),
    sig(
        "set-port-attribute",
        &["port_id", "path", "value"],
        &[],
        &["value"],
    ),
    sig(
        "extend-port-attribute",
        &["port_id", "path", "value"],
        &["unique"],
        &["value"],
    ),
    sig("del-port-attribute", &["port_id", "path"], &[], &[]),
    sig(
        "api-call",
        &["url"],
        &["headers", "proxies", "timeout", "retries", "backoff_factor"],
        &[],
    ),
];

pub fn operator(name: &str) -> Option<&'static Signature> {
    OPERATORS.iter().find(|s| s.name == name)
}

pub fn action(name: &str) -> Option<&'static Signature> {
    ACTIONS.iter().find(|s| s.name == name)
}

pub fn not_found(ident: &str) -> Error {
    Error::NotFound(format!("Rule {ident} could not be found."))
}

/// Ironic's answer to a request body its JSON schema refuses.
fn schema_error(message: impl std::fmt::Display) -> Error {
    Error::InvalidParameterValue(format!("Schema error: {message}"))
}

/// Ironic's `InspectionRuleValidationFailure`. Ironic raises it unhandled (a 500) where its
/// validation meant to answer 400; Ferrum answers 400 with Ironic's words.
fn args_error(reason: impl std::fmt::Display) -> Error {
    Error::InvalidParameterValue(format!(
        "Inspection rule validation failed. Reason: {reason}"
    ))
}

/// Splits `!op` into the operator and whether it is inverted (Ironic's
/// `parse_inverted_operator`: spaces around either are allowed, one `!` at most).
pub fn parse_inverted(op: &str) -> std::result::Result<(&str, bool), String> {
    let op = op.trim();
    if op.matches('!').count() > 1 {
        return Err("Multiple exclamation marks are not allowed. To apply the invert of an operation, simply add an exclamation mark (with an optional space) before the operator, e.g. eq - !eq.".to_owned());
    }
    match op.strip_prefix('!') {
        Some(rest) => Ok((rest.trim(), true)),
        None => Ok((op, false)),
    }
}

/// A Python list of strings as jsonschema's messages show it.
fn py_list(names: impl IntoIterator<Item = String>) -> String {
    let items: Vec<String> = names.into_iter().map(|n| format!("'{n}'")).collect();
    format!("[{}]", items.join(", "))
}

fn json_type_is(v: &Value, types: &[&str]) -> bool {
    types.iter().any(|t| match *t {
        "array" => v.is_array(),
        "object" => v.is_object(),
        "string" => v.is_string(),
        "null" => v.is_null(),
        "boolean" => v.is_boolean(),
        "integer" => is_integer(v),
        _ => false,
    })
}

fn is_integer(v: &Value) -> bool {
    v.as_i64().is_some() || v.as_u64().is_some() || v.as_f64().is_some_and(|f| f.fract() == 0.0)
}

fn require_type(v: &Value, types: &[&str]) -> Result<()> {
    if json_type_is(v, types) {
        return Ok(());
    }
    let names: Vec<String> = types.iter().map(|t| format!("'{t}'")).collect();
    Err(schema_error(format!(
        "{} is not of type {}",
        interpolate::py_repr(v),
        names.join(", ")
    )))
}

/// Reads a list of conditions (`actions == false`) or actions as Ironic's schema reads it.
fn read_list(v: Value, actions: bool) -> Result<Vec<JsonObject>> {
    require_type(&v, &["array"])?;
    let Value::Array(items) = v else {
        unreachable!("checked to be an array")
    };
    if actions && items.is_empty() {
        return Err(schema_error("[] should be non-empty"));
    }
    items
        .into_iter()
        .map(|item| {
            require_type(&item, &["object"])?;
            let Value::Object(item) = item else {
                unreachable!("checked to be an object")
            };
            for key in ["op", "args"] {
                if !item.contains_key(key) {
                    return Err(schema_error(format!("'{key}' is a required property")));
                }
            }
            let op = &item["op"];
            let known = op.as_str().is_some_and(|op| {
                if actions {
                    action(op).is_some()
                } else {
                    let bare = op.strip_prefix('!').unwrap_or(op);
                    operator(bare).is_some()
                }
            });
            if !known {
                let names: Vec<String> = if actions {
                    ACTIONS.iter().map(|s| s.name.to_owned()).collect()
                } else {
                    let plain = OPERATORS.iter().map(|s| s.name.to_owned());
                    let inverted = OPERATORS.iter().map(|s| format!("!{}", s.name));
                    plain.chain(inverted).collect()
                };
                return Err(schema_error(format!(
                    "{} is not one of {}",
                    interpolate::py_repr(op),
                    py_list(names)
                )));
            }
            require_type(&item["args"], &["array", "object"])?;
            if let Some(l) = item.get("loop") {
                require_type(l, &["array", "object"])?;
            }
            if !actions
                && let Some(m) = item.get("multiple")
                && !m.as_str().is_some_and(|m| MULTIPLE.contains(&m))
            {
                return Err(schema_error(format!(
                    "{} is not one of {}",
                    interpolate::py_repr(m),
                    py_list(MULTIPLE.iter().map(|m| (*m).to_owned()))
                )));
            }
            Ok(item)
        })
        .collect()
}

/// The arguments `args` names for `sig`, as Ironic's `_normalize_list_args` reads them: an object
/// as is; a list (deprecated in Ironic) by position, required then optional.
pub fn named_args(sig: &Signature, args: &Value) -> std::result::Result<JsonObject, String> {
    match args {
        Value::Object(m) => Ok(m.clone()),
        Value::Array(items) => {
            let required: Vec<&str> = sig
                .required
                .iter()
                .copied()
                .filter(|a| *a != "plugin_data")
                .collect();
            if items.len() < required.len() {
                return Err(format!(
                    "Not enough arguments provided. Missing: {}",
                    required[items.len()..].join(", ")
                ));
            }
            Ok(required
                .iter()
                .chain(sig.optional.iter())
                .zip(items.iter())
                .map(|(name, v)| ((*name).to_owned(), v.clone()))
                .collect())
        }
        _ => Err("args must be either a list or dictionary".to_owned()),
    }
}

/// Ironic's `Base.validate`: every required argument given, nothing it does not know.
fn check_args(sig: &Signature, args: &Value) -> Result<()> {
    let given = named_args(sig, args).map_err(args_error)?;
    let missing: Vec<&str> = sig
        .required
        .iter()
        .copied()
        .filter(|a| *a != "plugin_data" && !given.contains_key(*a))
        .collect();
    let unexpected: Vec<&str> = given
        .keys()
        .map(String::as_str)
        .filter(|a| !sig.required.contains(a) && !sig.optional.contains(a))
        .collect();
    let mut msg = Vec::new();
    if !missing.is_empty() {
        msg.push(format!(
            "missing required argument(s): {}",
            missing.join(", ")
        ));
    }
    if !unexpected.is_empty() {
        msg.push(format!("unexpected argument(s): {}", unexpected.join(", ")));
    }
    if msg.is_empty() {
        Ok(())
    } else {
        Err(args_error(msg.join("; ")))
    }
}

/// Ironic's `validate_rule` past the schema: each condition's and action's arguments (the first
/// bad one answers), then the phase and the priority (reported together).
pub fn validate(rule: &InspectionRule) -> Result<()> {
    for condition in rule.conditions.iter() {
        let op = condition.get("op").and_then(Value::as_str).unwrap_or("");
        let (op, _) = parse_inverted(op).map_err(Error::InvalidParameterValue)?;
        let sig = operator(op)
            .ok_or_else(|| Error::InvalidParameterValue(format!("Unsupported operator '{op}'.")))?;
        check_args(sig, condition.get("args").unwrap_or(&Value::Null))?;
    }
    for a in rule.actions.iter() {
        let op = a.get("op").and_then(Value::as_str).unwrap_or("");
        let sig = action(op)
            .ok_or_else(|| Error::InvalidParameterValue(format!("Unsupported action '{op}'.")))?;
        check_args(sig, a.get("args").unwrap_or(&Value::Null))?;
    }
    let mut errors = Vec::new();
    if !PHASES.contains(&rule.phase.as_str()) {
        errors.push(format!(
            "Invalid phase: {}. Valid phases are: {}",
            rule.phase,
            PHASES.join(", ")
        ));
    }
    if i64::from(rule.priority) > MAX_PRIORITY {
        errors.push("Priority must be between 0 and 9999 for user-defined rules.".to_owned());
    }
    match errors.len() {
        0 => Ok(()),
        1 => Err(Error::InvalidParameterValue(errors.remove(0))),
        _ => Err(Error::InvalidParameterValue(format!(
            "Multiple validation errors occurred: {}",
            errors.join("; ")
        ))),
    }
}

/// A condition or action as a response shows it (Ironic's `convert_conditions` and
/// `convert_actions`): `op` and `args`, `loop` when there is one, and for a looping condition
/// how its results combine.
fn shown(items: &[JsonObject], conditions: bool) -> Value {
    let rendered: Vec<Value> = items
        .iter()
        .map(|item| {
            let mut out = JsonObject::new();
            out.insert("op".into(), item.get("op").cloned().unwrap_or(Value::Null));
            out.insert(
                "args".into(),
                item.get("args").cloned().unwrap_or(Value::Null),
            );
            if let Some(l) = item.get("loop").filter(|l| interpolate::truthy(l)) {
                out.insert("loop".into(), l.clone());
                if conditions {
                    let multiple = item.get("multiple").cloned().unwrap_or(json!("any"));
                    out.insert("multiple".into(), multiple);
                }
            }
            Value::Object(out)
        })
        .collect();
    Value::Array(rendered)
}

static FIELDS: &[Field<InspectionRule>] = &[
    resource::uuid_field!(SINCE),
    resource::created_at_field!(SINCE),
    resource::updated_at_field!(SINCE),
    Field {
        name: "description",
        since: SINCE,
        show: |v| json!(v.item.description),
        write: Some(Write {
            create: true,
            patch: true,
            reset: Reset::Null,
            get: |_, r| json!(r.description),
            set: |_, r, v, c| {
                require_type(&v, &["string", "null"])?;
                let description = v.as_str().map(str::to_owned);
                if let Some(d) = &description
                    && d.chars().count() > 255
                {
                    return Err(schema_error(format!(
                        "{} is too long",
                        interpolate::py_repr(&v)
                    )));
                }
                set_if(&mut c.description, description, &r.description);
                Ok(())
            },
        }),
    },
    Field {
        name: "priority",
        since: SINCE,
        show: |v| json!(v.item.priority),
        write: Some(Write {
            create: true,
            patch: true,
            reset: Reset::Mandatory,
            get: |_, r| json!(r.priority),
            set: |_, r, v, c| {
                require_type(&v, &["integer"])?;
                let n = v.as_f64().unwrap_or(0.0);
                if n < 0.0 {
                    return Err(schema_error(format!(
                        "{} is less than the minimum of 0",
                        interpolate::py_repr(&v)
                    )));
                }
                // Past 9999 only `validate` speaks: a value that large is refused there.
                let priority = i32::try_from(n as i64).unwrap_or(i32::MAX);
                set_if(&mut c.priority, priority, &r.priority);
                Ok(())
            },
        }),
    },
    Field {
        name: "sensitive",
        since: SINCE,
        show: |v| json!(v.item.sensitive),
        write: Some(Write {
            create: true,
            patch: true,
            reset: Reset::Mandatory,
            get: |_, r| json!(r.sensitive),
            set: |_, r, v, c| {
                require_type(&v, &["boolean", "null"])?;
                set_if(&mut c.sensitive, v.as_bool().unwrap_or(false), &r.sensitive);
                Ok(())
            },
        }),
    },
    Field {
        name: "phase",
        since: SINCE,
        show: |v| json!(v.item.phase),
        write: Some(Write {
            create: true,
            patch: true,
            reset: Reset::Mandatory,
            get: |_, r| json!(r.phase),
            set: |_, r, v, c| {
                require_type(&v, &["string", "null"])?;
                if let Some(p) = v.as_str()
                    && p.chars().count() > 16
                {
                    return Err(schema_error(format!(
                        "{} is too long",
                        interpolate::py_repr(&v)
                    )));
                }
                // Null is allowed by the schema and refused by the phase check, as "None".
                let phase = v.as_str().unwrap_or("None").to_owned();
                set_if(&mut c.phase, phase, &r.phase);
                Ok(())
            },
        }),
    },
    Field {
        name: "conditions",
        since: SINCE,
        show: |v| {
            if v.item.sensitive {
                Value::Null
            } else {
                shown(&v.item.conditions, true)
            }
        },
        write: Some(Write {
            create: true,
            patch: true,
            reset: Reset::Mandatory,
            get: |_, r| json!(r.conditions.0),
            set: |_, r, v, c| {
                let conditions = read_list(v, false)?;
                set_if(&mut c.conditions, Json(conditions), &r.conditions);
                Ok(())
            },
        }),
    },
    Field {
        name: "actions",
        since: SINCE,
        show: |v| {
            if v.item.sensitive {
                Value::Null
            } else {
                shown(&v.item.actions, false)
            }
        },
        write: Some(Write {
            create: true,
            patch: true,
            reset: Reset::Mandatory,
            get: |_, r| json!(r.actions.0),
            set: |_, r, v, c| {
                let actions = read_list(v, true)?;
                set_if(&mut c.actions, Json(actions), &r.actions);
                Ok(())
            },
        }),
    },
    resource::links_field!("inspection_rules", SINCE),
];

/// A new rule as a create request's `body` asks for it: `actions` is required; a missing or
/// null `uuid` is made; the whole rule is then checked.
pub fn from_create(mut body: JsonObject) -> Result<InspectionRule> {
    if let Some(unknown) = body
        .keys()
        .find(|k| resource::writable::<InspectionRule>(k.as_str()).is_none_or(|w| !w.create))
    {
        return Err(schema_error(format!(
            "Additional properties are not allowed ('{unknown}' was unexpected)"
        )));
    }
    if !body.contains_key("actions") {
        return Err(schema_error("'actions' is a required property"));
    }
    let uuid = match body.remove("uuid") {
        None | Some(Value::Null) => uuid::Uuid::new_v4().to_string(),
        Some(Value::String(u)) => normalize_uuid("uuid", &u)?,
        Some(other) => {
            require_type(&other, &["string", "null"])?;
            unreachable!("not a string")
        }
    };
    let rule = InspectionRule {
        uuid,
        phase: "main".to_owned(),
        ..InspectionRule::new_record()
    };
    let rule = crate::patch::created(rule, body)?;
    validate(&rule)?;
    Ok(rule)
}

/// A PATCH of `rule`: the sensitive flag cannot be unset once set; the patched rule is checked
/// whole, as a created one.
pub fn patched(rule: &InspectionRule, ops: &[PatchOp]) -> Result<InspectionRuleChanges> {
    let unsets_sensitive = ops.iter().any(|op| {
        op.is_on_field("sensitive")
            && op.op != Op::Remove
            && op
                .value
                .as_ref()
                .is_some_and(|v| !v.is_null() && !interpolate::truthy(v))
    });
    if unsets_sensitive && rule.sensitive {
        return Err(Error::PatchError {
            patch: ops
                .iter()
                .map(PatchOp::describe)
                .collect::<Vec<_>>()
                .join(", "),
            reason: "Inspection rules cannot have the sensitive flag unset.".to_owned(),
        });
    }
    let changes = crate::patch::apply(rule, ops)?;
    let mut after = rule.clone();
    changes.clone().set_into(&mut after);
    validate(&after)?;
    Ok(changes)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn body(v: Value) -> JsonObject {
        v.as_object().unwrap().clone()
    }

    fn refused(v: Value) -> String {
        from_create(body(v.clone()))
            .map(|r| panic!("{v} was accepted: {r:?}"))
            .unwrap_err()
            .to_string()
    }

    #[test]
    fn rules_are_read_as_ironics_schema_and_validation_read_them() {
        let rule = from_create(body(json!({
            "description": "d",
            "priority": 10,
            "conditions": [{"op": "!eq", "args": {"values": [1, 1]}, "force_strings": true}],
            "actions": [{"op": "set-plugin-data", "args": ["a.b", 1]}],
        })))
        .unwrap();
        assert_eq!(
            (rule.phase.as_str(), rule.priority, rule.sensitive),
            ("main", 10, false)
        );
        assert_eq!(rule.conditions[0]["force_strings"], json!(true));
        let a = json!([{"op": "log", "args": {"msg": "x"}}]);
        for (bad, says) in [
            (
                json!({"conditions": []}),
                "Schema error: 'actions' is a required property",
            ),
            (
                json!({"actions": []}),
                "Schema error: [] should be non-empty",
            ),
            (
                json!({"actions": a, "colour": 1}),
                "('colour' was unexpected)",
            ),
            (
                json!({"actions": [{"op": "explode", "args": {}}]}),
                "'explode' is not one of ['fail', 'log'",
            ),
            (
                json!({"actions": a, "conditions": [{"op": "near", "args": {}}]}),
                "'near' is not one of ['eq', 'lt'",
            ),
            (
                json!({"actions": [{"op": "log"}]}),
                "'args' is a required property",
            ),
            (
                json!({"actions": [{"op": "log", "args": "x"}]}),
                "'x' is not of type 'array', 'object'",
            ),
            (
                json!({"actions": a, "conditions": [{"op": "eq", "args": {"values": []}, "multiple": "most"}]}),
                "'most' is not one of ['any', 'all', 'first', 'last']",
            ),
            (
                json!({"actions": a, "priority": -1}),
                "Schema error: -1 is less than the minimum of 0",
            ),
            (
                json!({"actions": a, "priority": "1"}),
                "'1' is not of type 'integer'",
            ),
            (
                json!({"actions": a, "priority": 10000}),
                "Priority must be between 0 and 9999 for user-defined rules.",
            ),
            (
                json!({"actions": a, "phase": "early"}),
                "Invalid phase: early. Valid phases are: main",
            ),
            (
                json!({"actions": a, "phase": "early", "priority": 10000}),
                "Multiple validation errors occurred: Invalid phase: early",
            ),
            (
                json!({"actions": a, "sensitive": "yes"}),
                "is not of type 'boolean', 'null'",
            ),
            (
                json!({"actions": a, "description": "d".repeat(256)}),
                "is too long",
            ),
            (
                json!({"actions": [{"op": "log", "args": {}}]}),
                "Inspection rule validation failed. Reason: missing required argument(s): msg",
            ),
            (
                json!({"actions": [{"op": "log", "args": {"msg": "m", "colour": 1}}]}),
                "unexpected argument(s): colour",
            ),
            (
                json!({"actions": a, "conditions": [{"op": "eq", "args": {"value": 1}}]}),
                "missing required argument(s): values; unexpected argument(s): value",
            ),
            (
                json!({"actions": a, "conditions": [{"op": "in-net", "args": ["10.0.0.1"]}]}),
                "Not enough arguments provided. Missing: subnet",
            ),
            (json!({"actions": a, "uuid": "nope"}), "uuid"),
        ] {
            let got = refused(bad.clone());
            assert!(got.contains(says), "{bad}: {got}");
        }
    }

    #[test]
    fn a_sensitive_rule_hides_its_conditions_and_actions_and_stays_sensitive() {
        let rule = from_create(body(json!({
            "sensitive": true,
            "conditions": [{"op": "eq", "args": {"values": [1, 1]}, "loop": [1]}],
            "actions": [{"op": "log", "args": {"msg": "secret"}}],
        })))
        .unwrap();
        let view = resource::View::new(&rule, 96, "http://x");
        let shown = resource::render(&view);
        assert_eq!(
            (&shown["conditions"], &shown["actions"]),
            (&Value::Null, &Value::Null)
        );
        let open = InspectionRule {
            sensitive: false,
            ..rule.clone()
        };
        let shown = resource::render(&resource::View::new(&open, 96, "http://x"));
        assert_eq!(shown["conditions"][0]["multiple"], "any");
        let op = |v: Value| PatchOp {
            op: Op::Replace,
            path: "/sensitive".into(),
            value: Some(v),
        };
        let err = patched(&rule, &[op(json!(false))]).unwrap_err().to_string();
        assert!(
            err.contains("Inspection rules cannot have the sensitive flag unset."),
            "{err}"
        );
        assert_eq!(
            patched(&open, &[op(json!(true))]).unwrap().sensitive,
            Some(true)
        );
    }
}
