//! Running the rules of a phase over a node and its inspection data (Ironic's
//! `inspection_rules/engine.py` and `actions.py`): from the highest priority down, a rule whose
//! conditions all hold runs its actions. The actions work on the node as a document of its
//! fields (what the rules' `{node.*}` fields read, so a later rule sees an earlier one's
//! changes) and on the plugin data; the node's changes come out as one [`NodeChanges`], each
//! written field read by the node's field table as a PATCH would be. The first error ends the
//! run with Ironic's words for it; `fail` is how a rule fails the inspection on purpose.
//!
//! Departures from Ironic: the port actions and `api-call` are accepted in a rule but fail when
//! run (Ferrum's inspection changes no port under the node's lock, and makes no outgoing call);
//! a rule may change only the node fields a PATCH may change, and its traits; the changes are
//! written with the inspection's outcome, so a failed inspection keeps none of them (Ironic
//! saves each action's change at once).
//!
//! The actions themselves, and the paths they write to, are `actions.rs`.

mod actions;

use std::cmp::Reverse;

use serde_json::Value;

use self::actions::run_action;
use super::{
    InspectionRule, Signature, action, interpolate, named_args, operator, operators, parse_inverted,
};
use crate::{
    node::{Json, JsonObject, Node, NodeChanges},
    resource::{self, Resource, View},
};

/// Why a rule failed, as Ironic's exceptions word it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RuleError {
    /// The `fail` action (Ironic's `HardwareInspectionFailure`).
    #[error("Failed to inspect hardware. Reason: {0}")]
    Failure(String),
    #[error("Inspection rule execution failed. Reason: {0}")]
    Execution(String),
    #[error("Inspection rule action execution failed. Reason: {0}")]
    Action(String),
    #[error("Inspection rule condition check failed. Reason: {0}")]
    Condition(String),
    #[error("Inspection rule validation failed. Reason: {0}")]
    Validation(String),
    /// What Ironic does not raise as its own exception (a Python TypeError and the like).
    #[error("{0}")]
    Other(String),
}

/// The node as the rules see and change it.
struct Subject<'a> {
    node: &'a Node,
    /// Every field of the node by name (the stored value of those a PATCH writes).
    doc: JsonObject,
}

impl<'a> Subject<'a> {
    fn new(node: &'a Node) -> Self {
        let view = View::new(node, u32::MAX, "");
        let doc = Node::fields()
            .iter()
            .map(|f| {
                let value = match f.write.as_ref().filter(|w| w.patch) {
                    Some(w) => (w.get)(f.name, node),
                    None => (f.show)(&view),
                };
                (f.name.to_owned(), value)
            })
            .collect();
        Subject { node, doc }
    }

    /// Checks the field `root` as the rule left it, as a PATCH would write it.
    fn check(&self, root: &str) -> Result<(), String> {
        let write = resource::writable::<Node>(root)
            .filter(|w| w.patch)
            .ok_or_else(|| format!("{root} cannot be changed by a rule"))?;
        let value = self.doc.get(root).cloned().unwrap_or(Value::Null);
        let mut scratch = NodeChanges::default();
        (write.set)(root, self.node, value, &mut scratch).map_err(|e| e.to_string())
    }

    /// The node's changes: every field the rules changed, and its traits.
    fn changes(self) -> Result<NodeChanges, RuleError> {
        let mut changes = NodeChanges::default();
        for f in Node::fields() {
            let Some(w) = f.write.as_ref().filter(|w| w.patch) else {
                continue;
            };
            let now = self.doc.get(f.name).cloned().unwrap_or(Value::Null);
            if now != (w.get)(f.name, self.node) {
                (w.set)(f.name, self.node, now, &mut changes)
                    .map_err(|e| RuleError::Action(e.to_string()))?;
            }
        }
        let traits: Vec<String> = self
            .doc
            .get("traits")
            .and_then(Value::as_array)
            .map(|t| {
                t.iter()
                    .filter_map(Value::as_str)
                    .map(str::to_owned)
                    .collect()
            })
            .unwrap_or_default();
        if traits != self.node.traits.0 {
            changes.traits = Some(Json(traits));
        }
        self.node
            .check_changes(&mut changes)
            .map_err(|e| RuleError::Action(e.to_string()))?;
        Ok(changes)
    }
}

/// Runs `rules` (those of the phase) over `node`, its `inventory` and `plugin_data` (which the
/// rules may change): the node's changes, or the message the inspection fails with.
pub fn apply_rules(
    rules: &[InspectionRule],
    node: &Node,
    inventory: &JsonObject,
    plugin_data: &mut JsonObject,
) -> Result<NodeChanges, String> {
    let mut rules: Vec<&InspectionRule> = rules.iter().collect();
    rules.sort_by_key(|r| Reverse(r.priority));
    let mut subject = Subject::new(node);
    let inventory = interpolate::masked(&Value::Object(inventory.clone()));
    for rule in rules {
        let outcome = run_rule(rule, &mut subject, &inventory, plugin_data);
        match outcome {
            Ok(true) => {
                tracing::info!(node.uuid = %node.uuid, "Applied actions of rule {} to node {}", rule.uuid, node.uuid);
            }
            Ok(false) => {
                tracing::debug!(node.uuid = %node.uuid, "Skipping rule {} on node {}: a condition does not hold", rule.uuid, node.uuid);
            }
            Err(RuleError::Other(e)) => {
                let msg = format!(
                    "Failed to apply rule {} to node {}: {e}",
                    rule.uuid, node.uuid
                );
                tracing::error!(node.uuid = %node.uuid, "{msg}");
                return Err(msg);
            }
            Err(e) => {
                tracing::error!(node.uuid = %node.uuid, "Error applying rule {} to node {}: {e}", rule.uuid, node.uuid);
                return Err(e.to_string());
            }
        }
    }
    subject.changes().map_err(|e| e.to_string())
}

/// One rule: whether its conditions held (and its actions ran).
fn run_rule(
    rule: &InspectionRule,
    subject: &mut Subject<'_>,
    inventory: &Value,
    plugin_data: &mut JsonObject,
) -> Result<bool, RuleError> {
    for condition in rule.conditions.iter() {
        let data = interpolate::masked(&Value::Object(plugin_data.clone()));
        if !check_condition(condition, &subject.doc, inventory, &data)? {
            return Ok(false);
        }
    }
    for a in rule.actions.iter() {
        let op = a.get("op").and_then(Value::as_str).unwrap_or("");
        let sig = action(op).ok_or_else(|| {
            RuleError::Other(format!(
                "Unsupported action: '{op}'. Supported actions are: {}.",
                super::ACTIONS
                    .iter()
                    .map(|s| s.name)
                    .collect::<Vec<_>>()
                    .join(", ")
            ))
        })?;
        for item in loop_items(a) {
            let data = interpolate::masked(&Value::Object(plugin_data.clone()));
            let args = process_args(sig, a, &subject.doc, inventory, &data, item.as_ref(), None)?;
            run_action(op, &args, subject, plugin_data)?;
        }
    }
    Ok(true)
}

/// The items a condition or action runs for: each of a non-empty `loop` list, a non-empty `loop`
/// object as one item, or once without an item.
fn loop_items(entry: &JsonObject) -> Vec<Option<Value>> {
    match entry.get("loop").filter(|l| interpolate::truthy(l)) {
        Some(Value::Array(items)) => items.iter().cloned().map(Some).collect(),
        Some(item @ Value::Object(_)) => vec![Some(item.clone())],
        _ => vec![None],
    }
}

/// A condition's or action's arguments by name, filled in (those the plugin formats, or all in
/// a loop).
fn process_args(
    sig: &Signature,
    entry: &JsonObject,
    node: &JsonObject,
    inventory: &Value,
    plugin_data: &Value,
    item: Option<&Value>,
    op: Option<&str>,
) -> Result<JsonObject, RuleError> {
    let args = named_args(sig, entry.get("args").unwrap_or(&Value::Null))
        .map_err(RuleError::Validation)?;
    let ctx = interpolate::Context {
        node,
        inventory,
        plugin_data,
        item,
    };
    Ok(args
        .into_iter()
        .map(|(k, v)| {
            let v = if item.is_some() || sig.formatted.contains(&k.as_str()) {
                interpolate::interpolate(&v, &ctx, op)
            } else {
                v
            };
            (k, v)
        })
        .collect())
}

fn check_condition(
    condition: &JsonObject,
    node: &JsonObject,
    inventory: &Value,
    plugin_data: &Value,
) -> Result<bool, RuleError> {
    let raw = condition.get("op").and_then(Value::as_str).unwrap_or("");
    let (op, inverted) = parse_inverted(raw).map_err(RuleError::Other)?;
    let sig = operator(op).ok_or_else(|| {
        RuleError::Other(format!(
            "Unsupported operator: '{op}'. Supported operators are: {}.",
            super::OPERATORS
                .iter()
                .map(|s| s.name)
                .collect::<Vec<_>>()
                .join(", ")
        ))
    })?;
    let check = |item: Option<&Value>| -> Result<bool, RuleError> {
        let mut args = process_args(sig, condition, node, inventory, plugin_data, item, Some(op))?;
        // Filled-in numbers are text: a loop compares everything as text.
        if item.is_some() && sig.optional.contains(&"force_strings") {
            args.insert("force_strings".into(), Value::Bool(true));
        }
        Ok(operators::check(op, &args)? != inverted)
    };
    let multiple = condition
        .get("multiple")
        .and_then(Value::as_str)
        .unwrap_or("any");
    match condition.get("loop").filter(|l| interpolate::truthy(l)) {
        Some(Value::Array(items)) => operators::combine(items, multiple, |i| check(Some(i))),
        Some(item @ Value::Object(_)) => check(Some(item)),
        _ => check(None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn rule(priority: i32, conditions: Value, actions: Value) -> InspectionRule {
        InspectionRule {
            uuid: format!("rule-{priority}"),
            phase: "main".into(),
            priority,
            conditions: Json(serde_json::from_value(conditions).unwrap()),
            actions: Json(serde_json::from_value(actions).unwrap()),
            ..InspectionRule::default()
        }
    }

    fn node() -> Node {
        let mut node = crate::node::tests_support::node();
        node.properties = Json(
            json!({"capabilities": "boot_mode:bios"})
                .as_object()
                .unwrap()
                .clone(),
        );
        node.traits = Json(vec!["CUSTOM_OLD".to_owned()]);
        node
    }

    fn inventory() -> JsonObject {
        json!({
            "cpu": {"architecture": "x86_64", "count": 4},
            "interfaces": [{"name": "eth0", "ipv4_address": "10.0.0.5"}, {"name": "eth1", "ipv4_address": "192.168.1.7"}],
            "bmc_address": "192.168.1.100",
            "bmc_password": "hunter2",
        })
        .as_object()
        .unwrap()
        .clone()
    }

    #[test]
    fn matching_rules_change_the_node_in_priority_order() {
        let rules = [
            rule(
                10,
                json!([]),
                json!([{"op": "set-attribute", "args": {"path": "extra/order", "value": "second"}}]),
            ),
            rule(
                50,
                json!([
                    {"op": "eq", "args": {"values": ["{inventory[cpu][architecture]}", "x86_64"]}},
                    {"op": "in-net", "args": {"address": "{item}", "subnet": "192.168.0.0/16"}, "loop": ["10.0.0.5", "{inventory[interfaces][1][ipv4_address]}"]},
                    {"op": "!is-empty", "args": {"value": "{inventory[bmc_address]}"}},
                ]),
                json!([
                    {"op": "set-attribute", "args": {"path": "extra/order", "value": "first"}},
                    {"op": "set-attribute", "args": {"path": "driver_info.ipmi.address", "value": "{inventory[bmc_address]}"}},
                    {"op": "set-attribute", "args": {"path": "extra/secret", "value": "{inventory[bmc_password]}"}},
                    {"op": "set-capability", "args": {"name": "cpus", "value": "{inventory[cpu][count]}"}},
                    {"op": "unset-capability", "args": {"name": "boot_mode"}},
                    {"op": "add-trait", "args": {"name": "CUSTOM_X86"}},
                    {"op": "remove-trait", "args": {"name": "CUSTOM_OLD"}},
                    {"op": "extend-attribute", "args": {"path": "extra/tags", "value": "{item}", "unique": true}, "loop": ["a", "b", "a"]},
                    {"op": "set-plugin-data", "args": {"path": "seen.by", "value": "{node.driver}"}},
                    {"op": "extend-plugin-data", "args": {"path": "list", "value": 1}},
                    {"op": "log", "args": {"msg": "matched {node.uuid}", "level": "warning"}},
                ]),
            ),
            rule(
                5,
                json!([{"op": "eq", "args": {"values": [1, 2]}}]),
                json!([{"op": "fail", "args": {"msg": "never"}}]),
            ),
        ];
        let node = node();
        let mut data = JsonObject::new();
        let changes = apply_rules(&rules, &node, &inventory(), &mut data).unwrap();
        let extra = changes.extra.unwrap().0;
        assert_eq!(extra["order"], "second", "the lower priority ran last");
        assert_eq!(extra["secret"], "***", "secrets are masked");
        assert_eq!(extra["tags"], json!(["a", "b"]));
        assert_eq!(
            changes.driver_info.unwrap()["ipmi"],
            json!({"address": "192.168.1.100"})
        );
        assert_eq!(changes.properties.unwrap()["capabilities"], "cpus:4");
        assert_eq!(changes.traits.unwrap().0, ["CUSTOM_X86"]);
        assert_eq!(
            data,
            *json!({"seen": {"by": "fake-hardware"}, "list": [1]})
                .as_object()
                .unwrap()
        );
    }

    #[test]
    fn a_failing_rule_fails_with_ironics_words() {
        let node = node();
        let run = |actions: Value| {
            let rules = [rule(0, json!([]), actions)];
            apply_rules(&rules, &node, &inventory(), &mut JsonObject::new()).unwrap_err()
        };
        assert_eq!(
            run(json!([{"op": "fail", "args": {"msg": "no {inventory[cpu][count]} CPUs"}}])),
            "Failed to inspect hardware. Reason: no {inventory[cpu][count]} CPUs",
            "fail's msg is not filled in"
        );
        assert!(run(json!([{"op": "set-attribute", "args": {"path": "uuid", "value": "x"}}])).starts_with("Inspection rule action execution failed. Reason: Failed to set attribute uuid with value x: uuid cannot be changed"));
        assert!(
            run(json!([{"op": "set-attribute", "args": {"path": "driver.x", "value": "y"}}]))
                .contains("'str' object has no attribute 'setdefault'")
        );
        assert!(
            run(json!([{"op": "extend-attribute", "args": {"path": "driver", "value": "y"}}]))
                .contains("Cannot extend non-list attribute driver")
        );
        assert!(
            run(json!([{"op": "del-attribute", "args": {"path": "extra/missing"}}]))
                .contains("Failed to delete attribute at extra/missing: 'missing'")
        );
        assert!(
            run(json!([{"op": "set-capability", "args": {"name": "c", "value": 1}}])).contains(
                "Failed to set capability c: sequence item 1: expected str instance, int found"
            )
        );
        assert!(
            run(json!([{"op": "log", "args": {"msg": "m", "level": "loud"}}]))
                .starts_with("Inspection rule execution failed. Reason: Invalid log level: loud")
        );
        assert!(run(json!([{"op": "set-port-attribute", "args": {"port_id": "p", "path": "extra", "value": 1}}])).contains("not supported"));
        let rules = [rule(
            0,
            json!([{"op": "lt", "args": {"values": ["a", 1]}}]),
            json!([{"op": "log", "args": {"msg": "m"}}]),
        )];
        let err = apply_rules(&rules, &node, &inventory(), &mut JsonObject::new()).unwrap_err();
        assert!(
            err.starts_with("Failed to apply rule rule-0 to node"),
            "{err}"
        );
    }
}
