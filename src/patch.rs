//! JSON Patch (RFC 6902, the add/replace/remove subset Ironic accepts) over a node's writable
//! fields. The API checks a patch's shape and paths before sending it; the conductor applies it to
//! the node it has just read under the lock, so concurrent PATCHes never lose each other's changes.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::{
    db::models::{JsonObject, Node, NodeChanges, json_text},
    error::Error,
};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Op {
    Add,
    Replace,
    Remove,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PatchOp {
    pub op: Op,
    pub path: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<Value>,
}

/// Root fields a PATCH may change, of those Ferrum stores (Ironic's PATCH_ALLOWED_FIELDS ∩ ours).
pub const PATCHABLE_FIELDS: &[&str] = &[
    "automated_clean",
    "bios_interface",
    "boot_interface",
    "conductor_group",
    "console_interface",
    "deploy_interface",
    "driver",
    "driver_info",
    "extra",
    "instance_info",
    "inspect_interface",
    "instance_uuid",
    "maintenance",
    "management_interface",
    "name",
    "network_interface",
    "power_interface",
    "properties",
    "protected",
    "protected_reason",
    "raid_interface",
    "rescue_interface",
    "resource_class",
    "storage_interface",
    "vendor_interface",
];

impl PatchOp {
    /// How Ironic quotes an operation in PatchError messages.
    fn describe(&self) -> String {
        let op = match self.op {
            Op::Add => "add",
            Op::Replace => "replace",
            Op::Remove => "remove",
        };
        match &self.value {
            Some(v) => format!("{{'op': '{op}', 'path': '{}', 'value': {v}}}", self.path),
            None => format!("{{'op': '{op}', 'path': '{}'}}", self.path),
        }
    }

    fn segments(&self) -> Vec<String> {
        self.path
            .split('/')
            .skip(1)
            .map(|s| s.replace("~1", "/").replace("~0", "~"))
            .collect()
    }
}

/// Checks what can be checked without the node: a path of `^(/[\w-]+)+$`, a patchable root,
/// a value where the op needs one.
pub fn validate(patch: &[PatchOp]) -> Result<(), Error> {
    if patch.is_empty() {
        return Err(Error::InvalidParameterValue(
            "Patch must contain at least one operation.".to_owned(),
        ));
    }
    for op in patch {
        let well_formed = op.path.starts_with('/')
            && op.path[1..].split('/').all(|seg| {
                !seg.is_empty()
                    && seg
                        .chars()
                        .all(|c| c.is_alphanumeric() || c == '_' || c == '-' || c == '~')
            });
        if !well_formed {
            return Err(Error::InvalidParameterValue(format!(
                "Invalid patch path '{}': a path is /field or /field/key, of letters, digits, '_' and '-'.",
                op.path
            )));
        }
        let root = op.segments().remove(0);
        if !PATCHABLE_FIELDS.contains(&root.as_str()) {
            return Err(Error::InvalidParameterValue(format!(
                "Cannot patch /{root}. Only the following can be updated: {}",
                PATCHABLE_FIELDS.join(", ")
            )));
        }
        if op.op != Op::Remove && op.value.is_none() {
            return Err(Error::InvalidParameterValue(format!(
                "'add' and 'replace' operations need a value: {}",
                op.describe()
            )));
        }
    }
    Ok(())
}

/// Applies `patch` to `node` and returns the columns that changed, or a 400 naming the operation
/// that failed. Nothing is written here.
pub fn apply(node: &Node, patch: &[PatchOp]) -> Result<NodeChanges, Error> {
    validate(patch)?;
    let mut doc = writable_view(node);
    for op in patch {
        apply_one(&mut doc, op).map_err(|reason| Error::PatchError {
            patch: op.describe(),
            reason,
        })?;
    }
    changes_from(node, doc)
}

fn writable_view(node: &Node) -> Map<String, Value> {
    let mut m = Map::new();
    let s = |v: &str| Value::String(v.to_owned());
    let opt = |v: &Option<String>| v.as_deref().map(s).unwrap_or(Value::Null);
    m.insert("conductor_group".into(), s(&node.conductor_group));
    for (kind, name) in node.passive_interfaces() {
        m.insert(format!("{kind}_interface"), s(name));
    }
    m.insert(
        "automated_clean".into(),
        node.automated_clean.map(Value::Bool).unwrap_or(Value::Null),
    );
    m.insert("protected".into(), Value::Bool(node.protected));
    m.insert("protected_reason".into(), opt(&node.protected_reason));
    m.insert("deploy_interface".into(), s(&node.deploy_interface));
    m.insert("driver".into(), s(&node.driver));
    m.insert(
        "driver_info".into(),
        Value::Object(node.driver_info.clone()),
    );
    m.insert("extra".into(), Value::Object(node.extra.clone()));
    m.insert(
        "instance_info".into(),
        Value::Object(node.instance_info.clone()),
    );
    m.insert("instance_uuid".into(), opt(&node.instance_uuid));
    m.insert("maintenance".into(), Value::Bool(node.maintenance));
    m.insert("management_interface".into(), s(&node.management_interface));
    m.insert("name".into(), opt(&node.name));
    m.insert("power_interface".into(), s(&node.power_interface));
    m.insert("properties".into(), Value::Object(node.properties.clone()));
    m.insert("resource_class".into(), opt(&node.resource_class));
    m
}

fn apply_one(doc: &mut Map<String, Value>, op: &PatchOp) -> Result<(), String> {
    let segments = op.segments();
    let (last, parents) = segments
        .split_last()
        .ok_or_else(|| "empty path".to_owned())?;
    if parents.is_empty() {
        // A root field: all of them exist, so add and replace both overwrite; remove resets it.
        return match op.op {
            Op::Add | Op::Replace => {
                doc.insert(last.clone(), op.value.clone().unwrap_or(Value::Null));
                Ok(())
            }
            Op::Remove => {
                let reset = match last.as_str() {
                    "driver_info" | "extra" | "instance_info" | "properties" => {
                        Value::Object(Map::new())
                    }
                    "maintenance" | "protected" => Value::Bool(false),
                    "conductor_group" => Value::String(String::new()),
                    "name" | "instance_uuid" | "resource_class" | "automated_clean"
                    | "protected_reason" => Value::Null,
                    other => return Err(format!("/{other} is mandatory and cannot be removed")),
                };
                doc.insert(last.clone(), reset);
                Ok(())
            }
        };
    }
    let mut target: &mut Value = doc
        .get_mut(&parents[0])
        .ok_or_else(|| format!("no such field /{}", parents[0]))?;
    for seg in &parents[1..] {
        target = match target {
            Value::Object(m) => m
                .get_mut(seg)
                .ok_or_else(|| format!("can't find '{seg}' in the path"))?,
            _ => return Err(format!("'{seg}' is not inside an object")),
        };
    }
    let Value::Object(container) = target else {
        return Err(format!("cannot patch inside a non-object at {}", op.path));
    };
    match op.op {
        Op::Add => {
            container.insert(last.clone(), op.value.clone().unwrap_or(Value::Null));
        }
        Op::Replace => {
            let slot = container
                .get_mut(last)
                .ok_or_else(|| format!("can't replace non-existent object '{last}'"))?;
            *slot = op.value.clone().unwrap_or(Value::Null);
        }
        Op::Remove => {
            container
                .remove(last)
                .ok_or_else(|| format!("can't remove non-existent object '{last}'"))?;
        }
    }
    Ok(())
}

/// Type-checks the patched document and turns the differences into column changes.
fn changes_from(node: &Node, mut doc: Map<String, Value>) -> Result<NodeChanges, Error> {
    let mut take = |field: &str| doc.remove(field).unwrap_or(Value::Null);
    let wrong = |field: &str, want: &str, got: &Value| {
        Error::InvalidParameterValue(format!(
            "Invalid value for {field}: expected {want}, got {got}"
        ))
    };
    let string = |field: &str, v: Value| match v {
        Value::String(s) => Ok(s),
        other => Err(wrong(field, "a string", &other)),
    };
    let opt_string = |field: &str, v: Value| match v {
        Value::Null => Ok(None),
        Value::String(s) => Ok(Some(s)),
        other => Err(wrong(field, "a string or null", &other)),
    };
    let object = |field: &str, v: Value| match v {
        Value::Object(m) => Ok(m),
        other => Err(wrong(field, "an object", &other)),
    };
    let mut c = NodeChanges::default();
    fn set_if<T: PartialEq>(slot: &mut Option<T>, new: T, old: &T) {
        if new != *old {
            *slot = Some(new);
        }
    }
    let set_json = |slot: &mut Option<String>, new: JsonObject, old: &JsonObject| {
        if new != *old {
            *slot = Some(json_text(&new));
        }
    };

    let name = opt_string("name", take("name"))?;
    if let Some(n) = &name {
        validate_name(n)?;
    }
    set_if(&mut c.name, name, &node.name);
    let driver = string("driver", take("driver"))?;
    set_if(&mut c.driver, driver, &node.driver);
    let active = [
        ("deploy", node.deploy_interface.as_str()),
        ("power", node.power_interface.as_str()),
        ("management", node.management_interface.as_str()),
    ];
    for (kind, old) in active.into_iter().chain(node.passive_interfaces()) {
        let field = format!("{kind}_interface");
        let v = string(&field, take(&field))?;
        if v != old {
            c.set_interface(kind, v);
        }
    }
    let group = normalize_conductor_group(&string("conductor_group", take("conductor_group"))?)?;
    set_if(&mut c.conductor_group, group, &node.conductor_group);
    let automated_clean = boolean("automated_clean", take("automated_clean"))?;
    set_if(
        &mut c.automated_clean,
        automated_clean,
        &node.automated_clean,
    );
    // null (as after `remove`) is false, as in Ironic.
    let protected = boolean("protected", take("protected"))?.unwrap_or(false);
    let mut protected_reason = opt_string("protected_reason", take("protected_reason"))?;
    if !protected && node.protected {
        // Unprotecting a node forgets why it was protected.
        protected_reason = None;
    }
    if !protected
        && protected_reason != node.protected_reason
        && protected_reason.as_deref().is_some_and(|r| !r.is_empty())
    {
        return Err(Error::InvalidParameterValue(
            "The protected_reason field can only be set when protected is True".to_owned(),
        ));
    }
    set_if(&mut c.protected, protected, &node.protected);
    set_if(
        &mut c.protected_reason,
        protected_reason,
        &node.protected_reason,
    );
    let rc = opt_string("resource_class", take("resource_class"))?;
    if rc.as_deref().is_some_and(|r| r.len() > 80) {
        return Err(Error::InvalidParameterValue(
            "resource_class must be at most 80 characters".to_owned(),
        ));
    }
    set_if(&mut c.resource_class, rc, &node.resource_class);
    // Stored in one spelling, so that uniqueness and the instance_uuid filter see one value.
    let instance_uuid = opt_string("instance_uuid", take("instance_uuid"))?
        .map(|u| {
            uuid::Uuid::try_parse(&u)
                .map(|p| p.hyphenated().to_string())
                .map_err(|_| {
                    Error::InvalidParameterValue(format!(
                        "Expected a UUID for instance_uuid but received {u}."
                    ))
                })
        })
        .transpose()?;
    set_if(&mut c.instance_uuid, instance_uuid, &node.instance_uuid);
    match boolean("maintenance", take("maintenance"))? {
        Some(m) => {
            if m != node.maintenance {
                c.maintenance = Some(m);
                if !m {
                    c.maintenance_reason = Some(None);
                    c.fault = Some(None);
                }
            }
        }
        None => return Err(wrong("maintenance", "a boolean", &Value::Null)),
    }
    set_json(
        &mut c.driver_info,
        object("driver_info", take("driver_info"))?,
        &node.driver_info,
    );
    set_json(
        &mut c.properties,
        object("properties", take("properties"))?,
        &node.properties,
    );
    set_json(
        &mut c.instance_info,
        object("instance_info", take("instance_info"))?,
        &node.instance_info,
    );
    set_json(&mut c.extra, object("extra", take("extra"))?, &node.extra);
    Ok(c)
}

/// A boolean as Ironic's PATCH takes it: JSON true/false, or a string oslo's strict
/// `bool_from_string` reads (the `baremetal` CLI sends `"True"`); null is None.
fn boolean(field: &str, v: Value) -> Result<Option<bool>, Error> {
    let parsed = match &v {
        Value::Null => return Ok(None),
        Value::Bool(b) => Some(*b),
        Value::String(s) => match s.to_ascii_lowercase().as_str() {
            "1" | "t" | "true" | "on" | "y" | "yes" => Some(true),
            "0" | "f" | "false" | "off" | "n" | "no" => Some(false),
            _ => None,
        },
        _ => None,
    };
    parsed.map(Some).ok_or_else(|| {
        Error::InvalidParameterValue(format!(
            "Invalid value for {field}: expected a boolean, got {v}"
        ))
    })
}

/// A conductor group as stored: lower-cased, of `[a-zA-Z0-9_.-]`, at most 255 characters.
pub fn normalize_conductor_group(group: &str) -> Result<String, Error> {
    let ok = group.len() <= 255
        && group
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'));
    if !ok {
        return Err(Error::InvalidConductorGroup(group.to_owned()));
    }
    Ok(group.to_ascii_lowercase())
}

/// Node names: RFC 3986 unreserved characters, at most 255, not UUID-shaped, not a reserved word.
pub fn validate_name(name: &str) -> Result<(), Error> {
    const RESERVED: &[&str] = &[
        "detail",
        "validate",
        "states",
        "maintenance",
        "management",
        "vendor_passthru",
    ];
    let ok_chars = name
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '.' | '_' | '~'));
    if name.is_empty()
        || name.len() > 255
        || !ok_chars
        || uuid::Uuid::try_parse(name).is_ok()
        || RESERVED.contains(&name)
    {
        return Err(Error::InvalidParameterValue(format!(
            "Expected a logical name but received {name}."
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn node() -> Node {
        let mut n = crate::db::models::tests_support::node();
        n.driver_info = json!({"a": 1}).as_object().unwrap().clone();
        n
    }

    fn ops(v: Value) -> Vec<PatchOp> {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn nested_add_replace_remove() {
        let c = apply(
            &node(),
            &ops(json!([
                {"op": "add", "path": "/extra/foo", "value": "bar"},
                {"op": "replace", "path": "/driver_info/a", "value": 2},
                {"op": "add", "path": "/instance_info/image_source", "value": "http://x/img"},
                {"op": "replace", "path": "/name", "value": "n2"},
            ])),
        )
        .unwrap();
        assert_eq!(c.extra.as_deref(), Some(r#"{"foo":"bar"}"#));
        assert_eq!(c.driver_info.as_deref(), Some(r#"{"a":2}"#));
        assert_eq!(c.name, Some(Some("n2".into())));
        assert_eq!(c.properties, None, "unchanged fields are not written");
    }

    #[test]
    fn bad_paths_and_values() {
        let err = validate(&ops(
            json!([{"op": "replace", "path": "/reservation", "value": "x"}]),
        ))
        .unwrap_err();
        assert!(
            err.to_string().starts_with("Cannot patch /reservation."),
            "{err}"
        );
        assert!(validate(&ops(json!([{"op": "add", "path": "extra", "value": 1}]))).is_err());
        assert!(validate(&ops(json!([{"op": "add", "path": "/extra"}]))).is_err());
        let err = apply(
            &node(),
            &ops(json!([{"op": "replace", "path": "/extra/missing", "value": 1}])),
        )
        .unwrap_err();
        assert_eq!(err.status(), http::StatusCode::BAD_REQUEST);
        assert!(
            err.to_string().starts_with("Couldn't apply patch '"),
            "{err}"
        );
        let err = apply(
            &node(),
            &ops(json!([{"op": "replace", "path": "/maintenance", "value": "perhaps"}])),
        )
        .unwrap_err();
        assert!(err.to_string().contains("maintenance"), "{err}");
        assert!(
            serde_json::from_value::<Vec<PatchOp>>(json!([{"op": "move", "path": "/extra"}]))
                .is_err()
        );
    }

    #[test]
    fn booleans_may_be_strings_as_the_cli_sends_them() {
        let c = apply(
            &node(),
            &ops(
                json!([{"op": "replace", "path": "/maintenance", "value": "True"},
                        {"op": "replace", "path": "/automated_clean", "value": "off"}]),
            ),
        )
        .unwrap();
        assert_eq!(
            (c.maintenance, c.automated_clean),
            (Some(true), Some(Some(false)))
        );
        let mut in_maintenance = node();
        in_maintenance.maintenance = true;
        in_maintenance.fault = Some("power failure".into());
        let c = apply(
            &in_maintenance,
            &ops(json!([{"op": "replace", "path": "/maintenance", "value": "false"}])),
        )
        .unwrap();
        assert_eq!(
            (c.maintenance, c.fault, c.maintenance_reason),
            (Some(false), Some(None), Some(None)),
            "leaving maintenance clears the fault and the reason"
        );
        let c = apply(
            &node(),
            &ops(json!([{"op": "remove", "path": "/automated_clean"}])),
        )
        .unwrap();
        assert_eq!(c.automated_clean, None, "already null");
        assert!(
            apply(
                &node(),
                &ops(json!([{"op": "replace", "path": "/protected", "value": 1}]))
            )
            .is_err()
        );
    }

    #[test]
    fn remove_root_resets_to_default() {
        let c = apply(&node(), &ops(json!([{"op": "remove", "path": "/name"}]))).unwrap();
        assert_eq!(c.name, Some(None));
        assert!(apply(&node(), &ops(json!([{"op": "remove", "path": "/driver"}]))).is_err());
    }

    #[test]
    fn names() {
        assert!(validate_name("node-1.a_b~").is_ok());
        for bad in [
            "",
            "has space",
            "detail",
            "1be26c0b-03f2-4d2e-ae87-c02d7f33c123",
        ] {
            assert!(validate_name(bad).is_err(), "{bad}");
        }
    }
}
