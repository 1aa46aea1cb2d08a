//! Steps, the unit of work of deploys, cleanings and services: what a driver offers
//! ([`DriverStep`], [`CleanStep`]), what a deploy template, a deploy request or a runbook asks for
//! ([`DeployStep`], [`RunbookStep`]), and how a client's list of steps is read and checked
//! ([`StepSchema`], as Ironic's API schemas read them). Data only: which steps a deploy runs is
//! `deploy_template::steps_for_deploy`, running them is the conductor's step runner.
//!
//! Must not: know HTTP, the database, drivers or the conductor.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::{
    error::{Error, Result},
    node::JsonObject,
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

/// A deploy step a driver offers: its interface and name, its default priority (0: run only
/// when a deploy template asks for it), and its arguments (name, whether required).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DriverStep {
    pub interface: &'static str,
    pub step: &'static str,
    pub priority: u32,
    pub args: &'static [(&'static str, bool)],
}

impl DriverStep {
    /// `deploy.deploy`, the core step every deploy interface has: it writes the instance. A
    /// template may disable it (priority 0) but not move it (Ironic's `_validate_user_step`).
    pub const CORE: DriverStep = DriverStep {
        interface: "deploy",
        step: "deploy",
        priority: 100,
        args: &[],
    };

    /// A step that runs only when asked for (priority 0), as clean steps of manual cleaning.
    pub const fn manual(
        interface: &'static str,
        step: &'static str,
        args: &'static [(&'static str, bool)],
    ) -> DriverStep {
        DriverStep {
            interface,
            step,
            priority: 0,
            args,
        }
    }

    pub fn is_core(&self) -> bool {
        self.interface == "deploy" && self.step == "deploy"
    }
}

/// A clean step as an agent offers it for automated cleaning: its priority there (0: only
/// when a manual cleaning names it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CleanStep {
    pub interface: String,
    pub step: String,
    pub priority: u32,
}

/// One step of a runbook, as a response shows it and a clean is given it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunbookStep {
    pub interface: String,
    pub step: String,
    #[serde(default)]
    pub args: JsonObject,
    pub order: u32,
}

/// How a resource's list of user steps is read (Ironic's `DEPLOY_STEP_SCHEMA` for a deploy
/// template, `RUNBOOK_STEP_SCHEMA` for a runbook): which resource it is (for errors), what
/// ranks a step (`priority`, `order`), and whether `args` must be given.
#[derive(Debug, Clone, Copy)]
pub struct StepSchema {
    pub what: &'static str,
    pub rank: &'static str,
    pub args_required: bool,
    /// Whether a step must give its rank (a clean or service request's need not: 0 then).
    pub rank_required: bool,
}

/// One step as a client wrote it, its rank read from the schema's `rank` key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UserStep {
    pub interface: String,
    pub step: String,
    pub args: JsonObject,
    pub rank: u32,
}

impl StepSchema {
    pub fn invalid(&self, reason: String) -> Error {
        Error::InvalidParameterValue(format!("Invalid {}: {reason}", self.what))
    }

    /// A create request's `body` of a resource of steps (a template, a runbook) names both.
    pub fn require_name_and_steps(&self, body: &JsonObject) -> Result<()> {
        match ["name", "steps"]
            .into_iter()
            .find(|key| !body.contains_key(*key))
        {
            Some(key) => Err(self.invalid(format!("'{key}' is a required property"))),
            None => Ok(()),
        }
    }

    /// A list of at least one step, each an object of exactly `interface` (a deploying or
    /// cleaning interface: the same list), `step` (a non-empty string), `args` (an object) and
    /// the rank (an integer of at least 0, or a string of digits), no two with the same
    /// interface and step (Ironic's `duplicate_steps`).
    pub fn read(&self, v: Value) -> Result<Vec<UserStep>> {
        let Value::Array(items) = v else {
            return Err(self.invalid(format!("steps must be a list, got {v}")));
        };
        if items.is_empty() {
            return Err(self.invalid("steps must hold at least one step".to_owned()));
        }
        let mut steps: Vec<UserStep> = Vec::with_capacity(items.len());
        for item in items {
            let step = self.read_step(item)?;
            if steps
                .iter()
                .any(|s| s.interface == step.interface && s.step == step.step)
            {
                return Err(self.invalid(format!(
                    "Duplicate deploy steps. A template cannot have multiple deploy steps with the same interface and step. Duplicates: interface: {}, step: {}",
                    step.interface, step.step
                )));
            }
            steps.push(step);
        }
        Ok(steps)
    }

    fn read_step(&self, item: Value) -> Result<UserStep> {
        let Value::Object(mut m) = item else {
            return Err(self.invalid(format!("a step must be an object, got {item}")));
        };
        let keys = ["interface", "step", "args", self.rank];
        for key in keys {
            let optional =
                (key == "args" && !self.args_required) || (key == self.rank && !self.rank_required);
            if !m.contains_key(key) && !optional {
                return Err(self.invalid(format!("'{key}' is a required property of a step")));
            }
        }
        if let Some(key) = m.keys().find(|k| !keys.contains(&k.as_str())) {
            return Err(self.invalid(format!(
                "Additional properties are not allowed in a step ('{key}' was unexpected)"
            )));
        }
        let interface = match m.remove("interface") {
            Some(Value::String(i)) if DEPLOYING_INTERFACES.contains(&i.as_str()) => i,
            other => {
                return Err(self.invalid(format!(
                    "a step's interface must be one of {}, got {}",
                    DEPLOYING_INTERFACES.join(", "),
                    other.unwrap_or_default()
                )));
            }
        };
        let step = match m.remove("step") {
            Some(Value::String(s)) if !s.is_empty() => s,
            other => {
                return Err(self.invalid(format!(
                    "a step's name must be a non-empty string, got {}",
                    other.unwrap_or_default()
                )));
            }
        };
        let args = match m.remove("args") {
            Some(Value::Object(a)) => a,
            None => JsonObject::new(),
            Some(other) => {
                return Err(self.invalid(format!("a step's args must be an object, got {other}")));
            }
        };
        let rank = match m.remove(self.rank) {
            None if !self.rank_required => Some(0),
            Some(Value::Number(n)) => n.as_u64().and_then(|p| u32::try_from(p).ok()),
            Some(Value::String(s)) if !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()) => {
                s.parse::<u32>().ok()
            }
            _ => None,
        }
        .ok_or_else(|| {
            self.invalid(format!(
                "a step's {} must be an integer of at least 0",
                self.rank
            ))
        })?;
        Ok(UserStep {
            interface,
            step,
            args,
            rank,
        })
    }
}

/// A deploy request's `deploy_steps` (API 1.69).
const REQUEST_STEPS: StepSchema = StepSchema {
    what: "deploy_steps",
    rank: "priority",
    args_required: true,
    rank_required: true,
};

/// The `deploy_steps` of a deploy request (API 1.69) as Ironic's schema takes them
/// (`_DEPLOY_STEPS_SCHEMA`, `api/controllers/v1/node.py`): a list of steps, each read as a
/// template's is. An empty list asks for nothing, as in Ironic. Whether the driver offers them,
/// and whether one is named twice, is the conductor's check ([`steps_for_deploy`]).
pub fn read_user_steps(v: Value) -> Result<Vec<DeployStep>> {
    let Value::Array(items) = v else {
        return Err(REQUEST_STEPS.invalid(format!("{v} is not of type 'array'")));
    };
    items
        .into_iter()
        .map(|item| {
            let s = REQUEST_STEPS.read_step(item)?;
            Ok(DeployStep {
                interface: s.interface,
                step: s.step,
                args: s.args,
                priority: s.rank,
            })
        })
        .collect()
}

/// The `clean_steps` (API 1.15) or `service_steps` (1.87), named by `what`, of a provision
/// request as Ironic's `_STEPS_SCHEMA` takes them (`api/controllers/v1/node.py`): a list of
/// steps, each of `interface` and `step` with optional `args` and `order`, kept as given.
/// Ironic's `execute_on_child_nodes` and `limit_child_node_execution` are refused by name:
/// Ferrum does not run steps on child nodes.
pub fn read_run_steps(what: &'static str, v: Value) -> Result<Vec<Value>> {
    let schema = StepSchema {
        what,
        rank: "order",
        args_required: false,
        rank_required: false,
    };
    let Value::Array(items) = v else {
        return Err(schema.invalid(format!("{v} is not of type 'array'")));
    };
    for item in &items {
        let child = ["execute_on_child_nodes", "limit_child_node_execution"]
            .into_iter()
            .find(|key| item.get(key).is_some());
        if let Some(key) = child {
            return Err(schema.invalid(format!(
                "'{key}' is not supported: Ferrum does not run steps on child nodes"
            )));
        }
        schema.read_step(item.clone())?;
    }
    Ok(items)
}
