//! JSON Patch (RFC 6902, the add/replace/remove subset Ironic accepts) over a resource's writable
//! fields (its field table, `resource.rs`). The API checks a patch's shape and paths before
//! sending it; the conductor applies it to the resource it has just read under the node's lock, so
//! concurrent PATCHes never lose each other's changes.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::{
    error::Error,
    node::{InterfaceKind, JsonObject},
    resource::{self, Resource},
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
    /// The operation's value; `Some(Value::Null)` for an explicit `"value": null` (which
    /// JSON Patch allows), None when there is no `value` member.
    #[serde(
        default,
        deserialize_with = "present",
        skip_serializing_if = "Option::is_none"
    )]
    pub value: Option<Value>,
}

/// A `value` member that is there, null included.
fn present<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<Value>, D::Error> {
    Value::deserialize(d).map(Some)
}

impl PatchOp {
    /// How Ironic quotes an operation in PatchError messages.
    pub fn describe(&self) -> String {
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

    /// Whether the operation is on the whole root field `field` (`/field`).
    pub fn is_on_field(&self, field: &str) -> bool {
        self.path.strip_prefix('/') == Some(field)
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
/// a value where the op needs one. An empty patch is valid and changes nothing, as in Ironic
/// (`jsonpatch` applies it; `PATCH /v1/chassis/{id}` with `[]` answers the chassis).
pub fn validate<R: Resource>(patch: &[PatchOp]) -> Result<(), Error> {
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
        // RFC 6901: a `~` escapes `~` (`~0`) or `/` (`~1`), nothing else (jsonpointer's
        // "Found invalid escape", which Ironic answers as a PatchError).
        if let Some(bad) = op.path[1..].split('/').find(|seg| {
            seg.split('~')
                .skip(1)
                .any(|rest| !rest.starts_with(['0', '1']))
        }) {
            return Err(Error::PatchError {
                patch: op.describe(),
                reason: format!("Found invalid escape {bad}"),
            });
        }
        let root = op.segments().remove(0);
        let patchable = resource::writable::<R>(&root).is_some_and(|w| w.patch);
        if !patchable {
            return Err(Error::InvalidParameterValue(format!(
                "Cannot patch /{root}. Only the following can be updated: {}",
                resource::patchable_names::<R>().join(", ")
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

/// Applies `patch` to `item` and returns the columns that changed, or a 400 naming the operation
/// that failed. Nothing is written here.
pub fn apply<R: Resource>(item: &R, patch: &[PatchOp]) -> Result<R::Changes, Error> {
    validate::<R>(patch)?;
    let mut doc = writable_view(item);
    for op in patch {
        apply_one::<R>(&mut doc, op).map_err(|reason| Error::PatchError {
            patch: op.describe(),
            reason,
        })?;
    }
    changes_from(item, doc)
}

/// The fields a PATCH may change, as JSON: what the patch is applied to.
fn writable_view<R: Resource>(item: &R) -> Map<String, Value> {
    R::fields()
        .iter()
        .filter_map(|f| {
            let write = f.write.as_ref().filter(|w| w.patch)?;
            Some((f.name.to_owned(), (write.get)(f.name, item)))
        })
        .collect()
}

fn apply_one<R: Resource>(doc: &mut Map<String, Value>, op: &PatchOp) -> Result<(), String> {
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
                let reset = resource::writable::<R>(last)
                    .and_then(|w| w.reset.value())
                    .ok_or_else(|| format!("/{last} is mandatory and cannot be removed"))?;
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
            Value::Array(items) => {
                let i = array_index(seg, items.len())?;
                &mut items[i]
            }
            _ => return Err(format!("'{seg}' is not inside an object or a list")),
        };
    }
    let value = || op.value.clone().unwrap_or(Value::Null);
    match (target, &op.op) {
        (Value::Object(container), Op::Add) => {
            container.insert(last.clone(), value());
        }
        (Value::Object(container), Op::Replace) => {
            let slot = container
                .get_mut(last)
                .ok_or_else(|| format!("can't replace non-existent object '{last}'"))?;
            *slot = value();
        }
        (Value::Object(container), Op::Remove) => {
            container
                .remove(last)
                .ok_or_else(|| format!("can't remove non-existent object '{last}'"))?;
        }
        // In a list (RFC 6902 section 4.1): `add` inserts before the index, or appends at `-`
        // or at the length.
        (Value::Array(items), Op::Add) => {
            let i = if last == "-" {
                items.len()
            } else {
                array_index(last, items.len() + 1)?
            };
            items.insert(i, value());
        }
        (Value::Array(items), Op::Replace) => {
            let i = array_index(last, items.len())?;
            items[i] = value();
        }
        (Value::Array(items), Op::Remove) => {
            let i = array_index(last, items.len())?;
            items.remove(i);
        }
        _ => return Err(format!("cannot patch inside a non-object at {}", op.path)),
    }
    Ok(())
}

/// A list index of a path, below `len`: digits only, without leading zeros (RFC 6901).
fn array_index(seg: &str, len: usize) -> Result<usize, String> {
    let well_formed = !seg.is_empty()
        && seg.bytes().all(|b| b.is_ascii_digit())
        && (seg == "0" || !seg.starts_with('0'));
    match seg.parse::<usize>() {
        Ok(i) if well_formed && i < len => Ok(i),
        Ok(_) if well_formed => Err(format!("index '{seg}' is out of range")),
        _ => Err(format!("'{seg}' is not a list index")),
    }
}

/// Whether `patch` sets the interface of `kind` back to the driver's default: its last operation
/// on the field removes it or sets it to null.
pub fn resets_interface(patch: &[PatchOp], kind: InterfaceKind) -> bool {
    patch
        .iter()
        .rev()
        .find(|op| op.is_on_field(kind.field()))
        .is_some_and(|op| op.op == Op::Remove || op.value == Some(Value::Null))
}

/// Type-checks the patched document and turns the differences into changes.
fn changes_from<R: Resource>(item: &R, doc: Map<String, Value>) -> Result<R::Changes, Error> {
    let mut changes = R::Changes::default();
    for (name, value) in doc {
        set_field(item, &name, value, &mut changes)?;
    }
    item.check_changes(&mut changes)?;
    Ok(changes)
}

/// `template` (a new resource with its defaults) made what a create request's `body` asks for
/// ([`changes_for_create`]).
pub fn created<R: Resource>(mut template: R, body: JsonObject) -> Result<R, Error> {
    let changes = changes_for_create(&template, body)?;
    template.apply(changes);
    Ok(template)
}

/// The changes that make `template` (a new resource with its defaults) what a create request's
/// `body` asks for. A field that cannot be given at create is refused, as an unknown one is.
pub fn changes_for_create<R: Resource>(
    template: &R,
    body: JsonObject,
) -> Result<R::Changes, Error> {
    let mut changes = R::Changes::default();
    for (name, value) in body {
        let creatable = resource::writable::<R>(&name).is_some_and(|w| w.create);
        if !creatable {
            return Err(Error::InvalidParameterValue(format!(
                "Unexpected arguments: {name}"
            )));
        }
        set_field(template, &name, value, &mut changes)?;
    }
    template.check_changes(&mut changes)?;
    Ok(changes)
}

fn set_field<R: Resource>(
    item: &R,
    name: &str,
    value: Value,
    changes: &mut R::Changes,
) -> Result<(), Error> {
    let write = resource::writable::<R>(name)
        .ok_or_else(|| Error::internal(format!("{name} is not writable")))?;
    (write.set)(name, item, value, changes)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::node::Node;

    fn node() -> Node {
        let mut n = crate::node::tests_support::node();
        n.driver_info = crate::node::Json(json!({"a": 1}).as_object().unwrap().clone());
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
        assert_eq!(
            c.extra.map(|e| e.0),
            json!({"foo": "bar"}).as_object().cloned()
        );
        assert_eq!(
            c.driver_info.map(|d| d.0),
            json!({"a": 2}).as_object().cloned()
        );
        assert_eq!(c.name, Some(Some("n2".into())));
        assert_eq!(c.properties, None, "unchanged fields are not written");
    }

    /// RFC 6901 escapes: `~0` is `~`, `~1` is `/`, in any segment; any other `~` is refused.
    #[test]
    fn escaped_keys_are_decoded_and_stray_tildes_refused() {
        let c = apply(
            &node(),
            &ops(json!([
                {"op": "add", "path": "/extra/a~1b", "value": 1},
                {"op": "add", "path": "/extra/~0c~1~0", "value": 2},
            ])),
        )
        .unwrap();
        assert_eq!(
            c.extra.map(|e| e.0),
            json!({"a/b": 1, "~c/~": 2}).as_object().cloned()
        );
        for path in ["/extra/a~2b", "/extra/a~", "/na~me"] {
            let e = apply(
                &node(),
                &ops(json!([{"op": "add", "path": path, "value": 1}])),
            );
            assert!(
                matches!(&e, Err(Error::PatchError { reason, .. }) if reason.starts_with("Found invalid escape")),
                "{path}: {e:?}"
            );
        }
        let e = apply(
            &node(),
            &ops(json!([{"op": "add", "path": "/extra~1x", "value": 1}])),
        );
        assert!(
            matches!(&e, Err(Error::InvalidParameterValue(m)) if m.starts_with("Cannot patch /extra/x.")),
            "{e:?}"
        );
    }

    #[test]
    fn lists_inside_documents_are_patched_by_index() {
        let mut n = node();
        n.extra = crate::node::Json(
            json!({"l": [1, 2, 3], "o": [{"k": 1}]})
                .as_object()
                .unwrap()
                .clone(),
        );
        let c = apply(
            &n,
            &ops(json!([
                {"op": "replace", "path": "/extra/l/0", "value": 10},
                {"op": "remove", "path": "/extra/l/1"},
                {"op": "add", "path": "/extra/l/-", "value": 4},
                {"op": "add", "path": "/extra/l/0", "value": 0},
                {"op": "replace", "path": "/extra/o/0/k", "value": 2},
            ])),
        )
        .unwrap();
        assert_eq!(
            c.extra.map(|e| Value::Object(e.0)),
            Some(json!({"l": [0, 10, 3, 4], "o": [{"k": 2}]}))
        );
        for (path, reason) in [
            ("/extra/l/3", "index '3' is out of range"),
            ("/extra/l/01", "'01' is not a list index"),
            ("/extra/l/x", "'x' is not a list index"),
            ("/extra/l/-/k", "'-' is not a list index"),
        ] {
            let e = apply(
                &n,
                &ops(json!([{"op": "replace", "path": path, "value": 1}])),
            )
            .unwrap_err();
            assert!(e.to_string().contains(reason), "{path}: {e}");
        }
    }

    #[test]
    fn bad_paths_and_values() {
        let err = validate::<Node>(&ops(
            json!([{"op": "replace", "path": "/reservation", "value": "x"}]),
        ))
        .unwrap_err();
        assert!(
            err.to_string().starts_with("Cannot patch /reservation."),
            "{err}"
        );
        assert!(
            validate::<Node>(&ops(json!([{"op": "add", "path": "extra", "value": 1}]))).is_err()
        );
        assert!(validate::<Node>(&ops(json!([{"op": "add", "path": "/extra"}]))).is_err());
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

    /// `"value": null` is a value (JSON Patch allows it), not a missing one, and survives the
    /// trip over RPC.
    #[test]
    fn a_null_value_is_a_value() {
        let patch = ops(json!([{"op": "replace", "path": "/name", "value": null}]));
        assert_eq!(patch[0].value, Some(Value::Null));
        let c = apply(&node(), &patch).unwrap();
        assert_eq!(c.name, Some(None));
        let bytes = rmp_serde::to_vec_named(&patch).unwrap();
        assert_eq!(
            rmp_serde::from_slice::<Vec<PatchOp>>(&bytes).unwrap(),
            patch
        );
        assert_eq!(
            ops(json!([{"op": "remove", "path": "/name"}]))[0].value,
            None
        );
        assert!(validate::<Node>(&ops(json!([{"op": "replace", "path": "/name"}]))).is_err());
        let patch = ops(json!([
            {"op": "replace", "path": "/boot_interface", "value": null},
            {"op": "remove", "path": "/raid_interface"},
            {"op": "remove", "path": "/vendor_interface"},
            {"op": "add", "path": "/vendor_interface", "value": "fake"},
        ]));
        let reset: Vec<_> = InterfaceKind::ALL
            .into_iter()
            .filter(|&kind| resets_interface(&patch, kind))
            .collect();
        assert_eq!(reset, [InterfaceKind::Boot, InterfaceKind::Raid]);
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
}
