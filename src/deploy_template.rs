//! A deploy template (API 1.55): a named list of deploy steps. A deploy adds the steps of the
//! templates whose names are among the instance's traits (`instance_info.traits`) to its
//! driver's ([`steps_for_deploy`]; the step types are `steps.rs`'). The API writes templates itself, as Ironic's does: no driver
//! and no node lock is involved. The steps are checked here as Ironic's API schema checks them
//! (`DEPLOY_STEP_SCHEMA`, `duplicate_steps` in `api/controllers/v1/utils.py`); whether a node's
//! driver offers them is the conductor's check at deploy time.
//!
//! Must not: know HTTP, the database or the conductor.

use serde_json::{Value, json};

use crate::{
    error::{Error, Result},
    node::{Json, JsonObject},
    resource::{self, Field, Reset, Write, set_if},
    steps::{DeployStep, DriverStep, StepSchema},
};

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

resource::record_resource!(
    DeployTemplate,
    DeployTemplateChanges,
    "deploy_templates",
    FIELDS
);

/// The API minor version that introduced deploy templates.
pub const SINCE: u32 = 55;

/// The fields of the short form of GET /v1/deploy_templates (Ironic's DEFAULT_RETURN_FIELDS).
pub const SUMMARY: &[&str] = &["uuid", "name", "links"];

pub fn not_found(ident: &str) -> Error {
    Error::NotFound(format!("Deploy template {ident} could not be found."))
}

static FIELDS: &[Field<DeployTemplate>] = &[
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

/// A deploy template's steps.
pub const TEMPLATE_STEPS: StepSchema = StepSchema {
    what: "deploy template",
    rank: "priority",
    args_required: true,
    rank_required: true,
};

/// A template's `steps` as Ironic's schema takes them ([`StepSchema::read`], with `priority`).
pub fn read_steps(v: Value) -> Result<Vec<DeployStep>> {
    Ok(TEMPLATE_STEPS
        .read(v)?
        .into_iter()
        .map(|s| DeployStep {
            interface: s.interface,
            step: s.step,
            args: s.args,
            priority: s.rank,
        })
        .collect())
}

/// A new template as a create request's `body` asks for it: `name` and `steps` are required.
pub fn from_create(body: JsonObject) -> Result<DeployTemplate> {
    TEMPLATE_STEPS.require_name_and_steps(&body)?;
    crate::patch::created(DeployTemplate::new_record(), body)
}

/// The traits of the instance being deployed (`instance_info.traits`), whose names pick the
/// deploy templates a deploy applies; none when absent or not a list of strings.
pub fn instance_traits(instance_info: &JsonObject) -> Vec<String> {
    match instance_info.get("traits") {
        Some(Value::Array(items)) => items
            .iter()
            .filter_map(|t| t.as_str().map(str::to_owned))
            .collect(),
        _ => Vec::new(),
    }
}

/// The deploy steps a deploy runs, in order: the driver's (`offered`), with the steps of the
/// `templates` whose names are among `traits` over them, and the deploy request's own `user`
/// steps (API 1.69) over both (a step replaces the one of the same interface and name; priority 0
/// disables it), without the disabled ones, highest priority first (Ironic's
/// `_get_all_deployment_steps` and `_validate_user_step` in `conductor/steps.py`). A step the
/// driver does not offer, an argument it does not take or a required one missing, the core step
/// moved, or a step named twice (by the request, or by two matching templates) fail the deploy
/// request (400), listing every problem: the request's steps are checked first. Ironic also
/// accepts the conductor's own `power_on`, `power_off`, `reboot`, `hold` and `wait` steps;
/// Ferrum does not run those yet and says so rather than skipping them.
pub fn steps_for_deploy(
    traits: &[String],
    templates: &[DeployTemplate],
    user: &[DeployStep],
    offered: &[DriverStep],
) -> Result<Vec<DeployStep>> {
    let errors = check_user_steps(
        user.iter(),
        offered,
        "the \"deploy_steps\" argument cannot name the same step twice",
    );
    if !errors.is_empty() {
        return Err(Error::InvalidParameterValue(format!(
            "Validation of deploy steps from \"deploy steps\" argument failed. {}",
            errors.join("; ")
        )));
    }
    let matching: Vec<&DeployTemplate> = templates
        .iter()
        .filter(|t| traits.contains(&t.name))
        .collect();
    let errors = check_user_steps(
        matching.iter().flat_map(|t| t.steps.0.iter()),
        offered,
        "the deploy templates matching the instance's traits cannot name the same step",
    );
    if !errors.is_empty() {
        let names: Vec<&str> = matching.iter().map(|t| t.name.as_str()).collect();
        return Err(Error::InvalidParameterValue(format!(
            "Validation of deploy steps from deploy templates matching this node's instance traits failed. Matching deploy templates: {}. Errors: {}",
            names.join(", "),
            errors.join("; ")
        )));
    }
    let same = |a: &DeployStep, b: &DeployStep| a.interface == b.interface && a.step == b.step;
    // The request's steps override the templates', which override the driver's.
    let mut chosen: Vec<DeployStep> = user.to_vec();
    for step in matching.iter().flat_map(|t| t.steps.0.iter()) {
        if !chosen.iter().any(|c| same(c, step)) {
            chosen.push(step.clone());
        }
    }
    let mut steps: Vec<DeployStep> = offered
        .iter()
        .map(|d| DeployStep {
            interface: d.interface.to_owned(),
            step: d.step.to_owned(),
            args: JsonObject::new(),
            priority: d.priority,
        })
        .filter(|d| d.priority > 0 && !chosen.iter().any(|c| same(c, d)))
        .collect();
    steps.extend(chosen.into_iter().filter(|s| s.priority > 0));
    steps.sort_by_key(|s| (std::cmp::Reverse(s.priority), s.interface_rank()));
    Ok(steps)
}

/// The problems of steps asked for (by a request or by templates) against those the driver
/// `offered`; `twice` says why a step named twice is refused.
fn check_user_steps<'a>(
    given: impl Iterator<Item = &'a DeployStep>,
    offered: &[DriverStep],
    twice: &str,
) -> Vec<String> {
    let mut errors = Vec::new();
    let mut seen: Vec<(&str, &str)> = Vec::new();
    for user in given {
        // The reserved `hold` step is the conductor's, not the driver's (Ironic's
        // `_validate_user_steps` skips it).
        if user.step == "hold" {
            continue;
        }
        let id = (user.interface.as_str(), user.step.as_str());
        if seen.contains(&id) {
            errors.push(format!(
                "duplicate deploy steps for {}.{}: {twice}",
                user.interface, user.step
            ));
            continue;
        }
        seen.push(id);
        let Some(driver) = offered
            .iter()
            .find(|d| d.interface == user.interface && d.step == user.step)
        else {
            errors.push(format!(
                "node does not support this deploy step: {}.{}",
                user.interface, user.step
            ));
            continue;
        };
        let unexpected: Vec<&str> = user
            .args
            .keys()
            .map(String::as_str)
            .filter(|a| !driver.args.iter().any(|(name, _)| name == a))
            .collect();
        if !unexpected.is_empty() {
            errors.push(format!(
                "deploy step {}.{} has these unexpected arguments: {}",
                user.interface,
                user.step,
                unexpected.join(", ")
            ));
        }
        if user.priority > 0 {
            let missing: Vec<&str> = driver
                .args
                .iter()
                .filter(|(name, required)| *required && !user.args.contains_key(*name))
                .map(|(name, _)| *name)
                .collect();
            if !missing.is_empty() {
                errors.push(format!(
                    "deploy step {}.{} is missing these required arguments: {}",
                    user.interface,
                    user.step,
                    missing.join(", ")
                ));
            }
            if driver.is_core() {
                errors.push(format!(
                    "deploy step {} on interface {} is a core step and cannot be overridden by user steps. It may be disabled by setting the priority to 0",
                    user.step, user.interface
                ));
            }
        }
    }
    errors
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::steps::read_user_steps;

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

    fn template(name: &str, steps: Value) -> DeployTemplate {
        DeployTemplate {
            name: name.to_owned(),
            steps: Json(serde_json::from_value(steps).unwrap()),
            ..DeployTemplate::default()
        }
    }

    #[test]
    fn templates_of_the_instance_traits_apply_over_the_driver_steps() {
        const BIOS: DriverStep = DriverStep {
            interface: "bios",
            step: "apply_configuration",
            priority: 0,
            args: &[("settings", true)],
        };
        let offered = [DriverStep::CORE, BIOS];
        let traits = vec!["CUSTOM_BIOS".to_owned()];
        let bios = json!([{"interface": "bios", "step": "apply_configuration",
                           "args": {"settings": []}, "priority": 150}]);
        let templates = [
            template("CUSTOM_BIOS", bios),
            template("CUSTOM_OTHER", json!([])),
        ];
        let steps = steps_for_deploy(&traits, &templates, &[], &offered).unwrap();
        let names: Vec<_> = steps
            .iter()
            .map(|s| (s.step.as_str(), s.priority))
            .collect();
        assert_eq!(names, [("apply_configuration", 150), ("deploy", 100)]);
        // Without the trait, the template does not apply; priority 0 drops the offered step.
        let steps = steps_for_deploy(&[], &templates, &[], &offered).unwrap();
        assert_eq!(steps.len(), 1);
        let off = [template(
            "CUSTOM_BIOS",
            json!([{"interface": "deploy", "step": "deploy", "args": {}, "priority": 0}]),
        )];
        assert!(
            steps_for_deploy(&traits, &off, &[], &offered)
                .unwrap()
                .is_empty()
        );

        for (steps, expected) in [
            (
                json!([{"interface": "raid", "step": "create", "args": {}, "priority": 10}]),
                "node does not support this deploy step: raid.create",
            ),
            (
                json!([{"interface": "deploy", "step": "deploy", "args": {"x": 1}, "priority": 0}]),
                "has these unexpected arguments: x",
            ),
            (
                json!([{"interface": "bios", "step": "apply_configuration", "args": {}, "priority": 5}]),
                "is missing these required arguments: settings",
            ),
            (
                json!([{"interface": "deploy", "step": "deploy", "args": {}, "priority": 90}]),
                "is a core step and cannot be overridden",
            ),
        ] {
            let t = [template("CUSTOM_BIOS", steps)];
            let e = steps_for_deploy(&traits, &t, &[], &offered)
                .unwrap_err()
                .to_string();
            assert!(e.contains(expected), "{expected:?} not in {e}");
            assert!(e.contains("Matching deploy templates: CUSTOM_BIOS"), "{e}");
        }
        let twice = json!([{"interface": "deploy", "step": "deploy", "args": {}, "priority": 0}]);
        let t = [
            template("CUSTOM_A", twice.clone()),
            template("CUSTOM_B", twice),
        ];
        let traits = vec!["CUSTOM_A".to_owned(), "CUSTOM_B".to_owned()];
        let e = steps_for_deploy(&traits, &t, &[], &offered)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("duplicate deploy steps for deploy.deploy"),
            "{e}"
        );
    }

    #[test]
    fn request_steps_override_templates_which_override_the_driver() {
        const WRITE: DriverStep = DriverStep {
            interface: "deploy",
            step: "write_image",
            priority: 80,
            args: &[],
        };
        const BOOT: DriverStep = DriverStep {
            interface: "deploy",
            step: "boot_instance",
            priority: 20,
            args: &[],
        };
        let offered = [DriverStep::CORE, WRITE, BOOT];
        let traits = vec!["CUSTOM_T".to_owned()];
        let templates = [template(
            "CUSTOM_T",
            json!([{"interface": "deploy", "step": "write_image", "args": {}, "priority": 10},
                   {"interface": "deploy", "step": "boot_instance", "args": {}, "priority": 90}]),
        )];
        let user = read_user_steps(json!([
            {"interface": "deploy", "step": "write_image", "args": {}, "priority": 95}]))
        .unwrap();
        let steps = steps_for_deploy(&traits, &templates, &user, &offered).unwrap();
        let names: Vec<_> = steps
            .iter()
            .map(|s| (s.step.as_str(), s.priority))
            .collect();
        assert_eq!(
            names,
            [("deploy", 100), ("write_image", 95), ("boot_instance", 90)]
        );
        // Priority 0 disables a step; the core step may be disabled but not moved.
        let off = read_user_steps(json!([
            {"interface": "deploy", "step": "boot_instance", "args": {}, "priority": 0}]))
        .unwrap();
        let steps = steps_for_deploy(&[], &[], &off, &offered).unwrap();
        assert_eq!(steps.len(), 2);
        assert!(steps.iter().all(|s| s.step != "boot_instance"));
        for (user, expected) in [
            (
                json!([{"interface": "raid", "step": "create", "args": {}, "priority": 1}]),
                "node does not support this deploy step: raid.create",
            ),
            (
                json!([{"interface": "deploy", "step": "write_image", "args": {"x": 1}, "priority": 1}]),
                "has these unexpected arguments: x",
            ),
            (
                json!([{"interface": "deploy", "step": "deploy", "args": {}, "priority": 1}]),
                "is a core step and cannot be overridden",
            ),
            (
                json!([{"interface": "deploy", "step": "write_image", "args": {}, "priority": 1},
                       {"interface": "deploy", "step": "write_image", "args": {}, "priority": 2}]),
                "duplicate deploy steps for deploy.write_image",
            ),
        ] {
            let user = read_user_steps(user).unwrap();
            let e = steps_for_deploy(&traits, &templates, &user, &offered)
                .unwrap_err()
                .to_string();
            assert!(e.contains(expected), "{expected:?} not in {e}");
            assert!(
                e.starts_with("Validation of deploy steps from \"deploy steps\" argument failed."),
                "{e}"
            );
        }
        for bad in [
            json!({}),
            json!([{"interface": "boot", "step": "s", "args": {}, "priority": 1}]),
            json!([{"interface": "deploy", "step": "s", "args": {}, "priority": -1}]),
            json!([{"interface": "deploy", "step": "s", "args": {}, "priority": 1, "x": 1}]),
        ] {
            let e = read_user_steps(bad.clone()).unwrap_err().to_string();
            assert!(e.starts_with("Invalid deploy_steps: "), "{bad}: {e}");
        }
        assert!(read_user_steps(json!([])).unwrap().is_empty());
    }
}
