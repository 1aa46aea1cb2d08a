//! The actions a rule runs (Ironic's `inspection_rules/actions.py`), with the reading of their
//! paths: on the node's document (each written field checked as a PATCH would write it) and on
//! the plugin data, with Ironic's words for each failure.

use serde_json::{Value, json};

use super::{RuleError, Subject};
use crate::{
    inspection_rule::{interpolate, operators},
    node::{JsonObject, Node},
    resource,
};

/// A dotted or slashed path as its parts (Ironic's `normalize_path`).
fn path_parts(path: &Value) -> Result<Vec<String>, String> {
    let Value::String(path) = path else {
        return Err(format!(
            "argument of type '{}' is not iterable",
            interpolate::py_type(path)
        ));
    };
    Ok(if path.contains('/') {
        path.trim_matches('/')
            .split('/')
            .map(str::to_owned)
            .collect()
    } else {
        path.split('.').map(str::to_owned).collect()
    })
}

/// A plugin-data path: dotted text, or a list of keys.
fn data_keys(path: &Value) -> Result<Vec<String>, String> {
    match path {
        Value::String(p) => Ok(p.split('.').map(str::to_owned).collect()),
        Value::Array(keys) => Ok(keys.iter().map(interpolate::py_str).collect()),
        other => Err(format!(
            "'{}' object has no attribute 'split'",
            interpolate::py_type(other)
        )),
    }
}

/// Python's `d.setdefault(key, {})` on what must be an object.
fn setdefault<'v>(
    current: &'v mut Value,
    key: &str,
    default: Value,
) -> Result<&'v mut Value, String> {
    match current {
        Value::Object(m) => Ok(m.entry(key.to_owned()).or_insert(default)),
        other => Err(format!(
            "'{}' object has no attribute 'setdefault'",
            interpolate::py_type(other)
        )),
    }
}

/// The value at `parts` inside the node's document, made as `setdefault` makes it, for a write.
fn node_slot<'d>(
    subject: &'d mut Subject<'_>,
    parts: &[String],
    leaf_default: Value,
) -> Result<&'d mut Value, String> {
    let (root, inner) = parts.split_first().ok_or("empty path")?;
    resource::writable::<Node>(root)
        .filter(|w| w.patch)
        .ok_or_else(|| format!("{root} cannot be changed by a rule"))?;
    let mut current = subject
        .doc
        .get_mut(root.as_str())
        .ok_or_else(|| format!("'Node' object has no attribute '{root}'"))?;
    let Some((last, middle)) = inner.split_last() else {
        return Ok(current);
    };
    for part in middle {
        current = setdefault(current, part, json!({}))?;
    }
    setdefault(current, last, leaf_default)
}

pub(super) fn run_action(
    op: &str,
    args: &JsonObject,
    subject: &mut Subject<'_>,
    plugin_data: &mut JsonObject,
) -> Result<(), RuleError> {
    let arg = |n: &str| args.get(n).cloned().unwrap_or(Value::Null);
    let s = interpolate::py_str;
    match op {
        "fail" => Err(RuleError::Failure(s(&arg("msg")))),
        "log" => {
            let level = match args.get("level") {
                None => "info".to_owned(),
                Some(Value::String(l)) => l.to_lowercase(),
                Some(other) => {
                    return Err(RuleError::Other(format!(
                        "'{}' object has no attribute 'lower'",
                        interpolate::py_type(other)
                    )));
                }
            };
            let msg = s(&arg("msg"));
            match level.as_str() {
                "debug" => tracing::debug!("{msg}"),
                "info" => tracing::info!("{msg}"),
                "warning" => tracing::warn!("{msg}"),
                "error" | "critical" => tracing::error!("{msg}"),
                _ => {
                    return Err(RuleError::Execution(format!(
                        "Invalid log level: {level}. Choose from {{'debug', 'info', 'warning', 'error', 'critical'}}"
                    )));
                }
            }
            Ok(())
        }
        "set-attribute" => {
            let (path, value) = (arg("path"), arg("value"));
            let set = |subject: &mut Subject<'_>| -> Result<(), String> {
                let parts = path_parts(&path)?;
                *node_slot(subject, &parts, Value::Null)? = value.clone();
                subject.check(&parts[0])
            };
            set(subject).map_err(|e| {
                RuleError::Action(format!(
                    "Failed to set attribute {} with value {}: {e}",
                    s(&path),
                    s(&value)
                ))
            })
        }
        "extend-attribute" => {
            let (path, value) = (arg("path"), arg("value"));
            let unique = args.get("unique").is_some_and(interpolate::truthy);
            let extend = |subject: &mut Subject<'_>| -> Result<(), String> {
                let parts = path_parts(&path)?;
                let slot = node_slot(subject, &parts, json!([]))?;
                if slot.is_null() && parts.len() == 1 {
                    *slot = json!([]);
                }
                let Value::Array(list) = slot else {
                    return Err(RuleError::Action(format!(
                        "Cannot extend non-list attribute {} with value {}",
                        s(&path),
                        s(&value)
                    ))
                    .to_string());
                };
                if !unique || !list.iter().any(|v| operators::py_eq(v, &value)) {
                    list.push(value.clone());
                }
                subject.check(&parts[0])
            };
            extend(subject).map_err(|e| {
                RuleError::Action(format!("Failed to extend attribute {}: {e}", s(&path)))
            })
        }
        "del-attribute" => {
            let path = arg("path");
            let delete = |subject: &mut Subject<'_>| -> Result<(), String> {
                let parts = path_parts(&path)?;
                let (root, inner) = parts.split_first().ok_or("empty path")?;
                let write = resource::writable::<Node>(root)
                    .filter(|w| w.patch)
                    .ok_or_else(|| format!("{root} cannot be changed by a rule"))?;
                match inner.split_last() {
                    None => {
                        let reset = write
                            .reset
                            .value()
                            .ok_or_else(|| format!("{root} cannot be deleted"))?;
                        subject.doc.insert(root.clone(), reset);
                    }
                    Some((last, middle)) => {
                        let mut current = subject
                            .doc
                            .get_mut(root.as_str())
                            .ok_or_else(|| format!("'{root}'"))?;
                        for part in middle {
                            current = match current {
                                Value::Object(m) => {
                                    m.get_mut(part).ok_or_else(|| format!("'{part}'"))?
                                }
                                other => {
                                    return Err(format!(
                                        "'{}' object is not subscriptable",
                                        interpolate::py_type(other)
                                    ));
                                }
                            };
                        }
                        match current {
                            Value::Object(m) => {
                                m.remove(last).ok_or_else(|| format!("'{last}'"))?;
                            }
                            other => {
                                return Err(format!(
                                    "'{}' object does not support item deletion",
                                    interpolate::py_type(other)
                                ));
                            }
                        }
                    }
                }
                subject.check(root)
            };
            delete(subject).map_err(|e| {
                RuleError::Action(format!("Failed to delete attribute at {}: {e}", s(&path)))
            })
        }
        "set-capability" | "unset-capability" => {
            let name = arg("name");
            let change = |subject: &mut Subject<'_>| -> Result<(), String> {
                let Value::String(name) = &name else {
                    return Err(format!(
                        "sequence item 0: expected str instance, {} found",
                        interpolate::py_type(&name)
                    ));
                };
                let props = node_slot(subject, &["properties".to_owned()], json!({}))?;
                let Value::Object(props) = props else {
                    return Err("properties is not an object".to_owned());
                };
                let current = props.get("capabilities").cloned();
                let caps = match &current {
                    None => String::new(),
                    Some(Value::String(c)) => c.clone(),
                    Some(other) if op == "set-capability" && !interpolate::truthy(other) => {
                        String::new()
                    }
                    Some(other) => {
                        return Err(format!(
                            "'{}' object has no attribute 'split'",
                            interpolate::py_type(other)
                        ));
                    }
                };
                let caps = if op == "set-capability" {
                    let value = arg("value");
                    let Value::String(value) = &value else {
                        return Err(format!(
                            "sequence item 1: expected str instance, {} found",
                            interpolate::py_type(&value)
                        ));
                    };
                    let new = format!("{name}:{value}");
                    if caps.is_empty() {
                        new
                    } else {
                        format!("{caps},{new}")
                    }
                } else {
                    let prefix = format!("{name}:");
                    caps.split(',')
                        .filter(|c| !c.starts_with(&prefix))
                        .collect::<Vec<_>>()
                        .join(",")
                };
                props.insert("capabilities".into(), Value::String(caps));
                subject.check("properties")
            };
            let verb = if op == "set-capability" {
                "set"
            } else {
                "unset"
            };
            change(subject).map_err(|e| {
                RuleError::Action(format!("Failed to {verb} capability {}: {e}", s(&name)))
            })
        }
        "add-trait" | "remove-trait" => {
            let name = arg("name");
            let Value::String(trait_name) = &name else {
                let verb = if op == "add-trait" {
                    "add new"
                } else {
                    "remove"
                };
                return Err(RuleError::Action(format!(
                    "Failed to {verb} trait {}: a trait is text",
                    s(&name)
                )));
            };
            let traits = subject.doc.entry("traits").or_insert_with(|| json!([]));
            let Value::Array(traits) = traits else {
                return Err(RuleError::Other("the node's traits are not a list".into()));
            };
            let present = traits.iter().any(|t| t.as_str() == Some(trait_name));
            if op == "add-trait" {
                if trait_name.len() > 255 {
                    return Err(RuleError::Action(format!(
                        "Failed to add new trait {trait_name}: longer than 255 characters"
                    )));
                }
                if !present {
                    traits.push(name.clone());
                }
            } else if present {
                traits.retain(|t| t.as_str() != Some(trait_name));
            } else {
                tracing::warn!(
                    "Failed to remove trait {trait_name}: Node {} doesn't have a trait '{trait_name}'",
                    subject.node.uuid
                );
            }
            Ok(())
        }
        "set-plugin-data" | "extend-plugin-data" => {
            let (path, value) = (arg("path"), arg("value"));
            let unique = args.get("unique").is_some_and(interpolate::truthy);
            let mut root = Value::Object(std::mem::take(plugin_data));
            let result = (|| -> Result<(), String> {
                let keys = data_keys(&path)?;
                let (last, middle) = keys.split_last().ok_or("empty path")?;
                let mut current = &mut root;
                for key in middle {
                    current = setdefault(current, key, json!({}))?;
                }
                let container = match current {
                    Value::Object(m) => m,
                    other => {
                        return Err(format!(
                            "'{}' object does not support item assignment",
                            interpolate::py_type(other)
                        ));
                    }
                };
                if op == "set-plugin-data" {
                    container.insert(last.clone(), value.clone());
                    return Ok(());
                }
                let slot = container.entry(last.clone()).or_insert(Value::Null);
                if !interpolate::truthy(slot) {
                    *slot = json!([]);
                }
                let list = match slot {
                    Value::Array(list) => list,
                    other => {
                        return Err(format!(
                            "'{}' object has no attribute 'append'",
                            interpolate::py_type(other)
                        ));
                    }
                };
                if !unique || !list.iter().any(|v| operators::py_eq(v, &value)) {
                    list.push(value.clone());
                }
                Ok(())
            })();
            if let Value::Object(m) = root {
                *plugin_data = m;
            }
            let verb = if op == "set-plugin-data" {
                "set"
            } else {
                "extend"
            };
            result.map_err(|e| {
                RuleError::Action(format!("Failed to {verb} plugin data at {}: {e}", s(&path)))
            })
        }
        "unset-plugin-data" => {
            let path = arg("path");
            let keys = data_keys(&path).map_err(|e| {
                RuleError::Action(format!("Failed to unset plugin data at {}: {e}", s(&path)))
            })?;
            if !unset_nested(plugin_data, &keys) {
                tracing::warn!("Path {} not found", s(&path));
            }
            Ok(())
        }
        "set-port-attribute" | "extend-port-attribute" | "del-port-attribute" | "api-call" => Err(
            RuleError::Execution(format!("the {op} action is not supported by this service")),
        ),
        other => Err(RuleError::Other(format!("Unsupported action '{other}'."))),
    }
}

/// Ironic's `_unset_nested_dict`, quirk included: the last key of an object holding nothing
/// else goes with its parent key (and a top-level key alone in the data stays).
fn unset_nested(data: &mut JsonObject, keys: &[String]) -> bool {
    let Some((target, parents)) = keys.split_last() else {
        return false;
    };
    let mut current = &*data;
    for key in parents {
        match current.get(key) {
            Some(Value::Object(m)) => current = m,
            _ => return false,
        }
    }
    if !current.contains_key(target) {
        return false;
    }
    if current.len() == 1 {
        if let Some((parent_key, grand)) = parents.split_last() {
            let mut holder = &mut *data;
            for key in grand {
                match holder.get_mut(key) {
                    Some(Value::Object(m)) => holder = m,
                    _ => return false,
                }
            }
            holder.remove(parent_key);
        }
    } else {
        let mut holder = &mut *data;
        for key in parents {
            match holder.get_mut(key) {
                Some(Value::Object(m)) => holder = m,
                _ => return false,
            }
        }
        holder.remove(target);
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plugin_data_is_unset_as_ironic_unsets_it() {
        let mut data = json!({"a": {"b": 1}, "c": {"d": 1, "e": 2}, "f": 1})
            .as_object()
            .unwrap()
            .clone();
        assert!(unset_nested(&mut data, &["a".into(), "b".into()]));
        assert!(unset_nested(&mut data, &["c".into(), "d".into()]));
        assert!(!unset_nested(&mut data, &["x".into()]));
        assert_eq!(Value::Object(data.clone()), json!({"c": {"e": 2}, "f": 1}));
        let mut alone = json!({"f": 1}).as_object().unwrap().clone();
        assert!(unset_nested(&mut alone, &["f".into()]));
        assert_eq!(Value::Object(alone), json!({"f": 1}), "Ironic's quirk");
    }
}
