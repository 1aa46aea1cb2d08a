//! The fake step interfaces, BIOS and firmware (Ironic's `FakeBIOS` and `FakeFirmware`): clean
//! steps that take their arguments and change nothing but the BIOS settings stored on the node.

use async_trait::async_trait;
use serde_json::Value;

use crate::{
    drivers::{DriverError, StepDone, StepInterface, unsupported},
    node::{JsonObject, Node, bios::BiosValue},
    steps::DriverStep,
};

/// The fake firmware (Ironic's `FakeFirmware`): its clean step `update` accepts its
/// `settings` and does nothing else.
pub struct FakeFirmware;

const FAKE_FIRMWARE_STEPS: &[DriverStep] = &[DriverStep::manual(
    "firmware",
    "update",
    &[("settings", true)],
)];

#[async_trait]
impl StepInterface for FakeFirmware {
    fn name(&self) -> &'static str {
        "fake"
    }

    fn clean_steps(&self) -> &'static [DriverStep] {
        FAKE_FIRMWARE_STEPS
    }

    async fn execute_clean_step(
        &self,
        node: &Node,
        step: &str,
        args: &JsonObject,
    ) -> Result<StepDone, DriverError> {
        if step != "update" {
            return Err(unsupported(node, step));
        }
        tracing::debug!(node.uuid = %node.uuid, "Fake firmware update with settings {:?}", args.get("settings"));
        Ok(StepDone::done())
    }
}

/// The fake BIOS (Ironic's `FakeBIOS`): its clean step `apply_configuration` makes the node's
/// stored settings exactly the ones given (Ironic's `sync_node_setting`: new names created,
/// changed values updated, names not given deleted), `factory_reset` deletes them all.
pub struct FakeBios;

const FAKE_BIOS_STEPS: &[DriverStep] = &[
    DriverStep::manual("bios", "apply_configuration", &[("settings", true)]),
    DriverStep::manual("bios", "factory_reset", &[]),
];

impl FakeBios {
    /// The `settings` of `apply_configuration`: a list of `{"name", "value"}` (value a string or
    /// null), each with the registry fields optionally.
    fn settings(args: &JsonObject) -> Result<Vec<BiosValue>, DriverError> {
        let settings = args.get("settings").cloned().unwrap_or(Value::Null);
        serde_json::from_value::<Vec<BiosValue>>(settings).map_err(|e| {
            DriverError::InvalidParameterValue(format!(
                "The settings of bios.apply_configuration must be a list of objects with a \"name\" and a string \"value\": {e}"
            ))
        })
    }
}

#[async_trait]
impl StepInterface for FakeBios {
    fn name(&self) -> &'static str {
        "fake"
    }

    fn clean_steps(&self) -> &'static [DriverStep] {
        FAKE_BIOS_STEPS
    }

    fn check_step(&self, step: &str, args: &JsonObject) -> Result<(), DriverError> {
        if step == "apply_configuration" {
            FakeBios::settings(args)?;
        }
        Ok(())
    }

    async fn execute_clean_step(
        &self,
        node: &Node,
        step: &str,
        args: &JsonObject,
    ) -> Result<StepDone, DriverError> {
        let settings = match step {
            "apply_configuration" => FakeBios::settings(args)?,
            "factory_reset" => Vec::new(),
            other => return Err(unsupported(node, other)),
        };
        Ok(StepDone {
            bios_settings: Some(settings),
            ..StepDone::default()
        })
    }
}
