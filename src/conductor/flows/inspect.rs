//! Inspection (`inspect`): the fake inspect interface's, which completes at once, or the start
//! of the `agent` one's, which boots the ramdisk and waits for its data (`inspection.rs`)
//! (`Inspect`).

use crate::{
    conductor::{
        inspection,
        task::Task,
        worker::{Failure, Flow},
    },
    drivers::{Driver, require_interface},
    error::{Error, Result},
    node::{self, InterfaceKind, Node, NodeChanges},
    states::Event,
};

/// Inspecting the node, run by a worker ([`inspect`]).
pub(super) struct Inspect;

#[async_trait::async_trait]
impl Flow for Inspect {
    fn name(&self) -> &'static str {
        "Inspection"
    }

    async fn run(&self, task: &mut Task, driver: &Driver) -> std::result::Result<(), String> {
        inspect(task, driver).await
    }

    fn failure(&self, _: &Node, _: &str) -> Failure {
        Failure::fail_edge()
    }
}

/// Inspection. The `agent` inspect interface boots the ramdisk and waits for its data
/// (`inspection.rs`); the fake one has nothing to discover, so inspection completes at once.
async fn inspect(task: &mut Task, driver: &Driver) -> std::result::Result<(), String> {
    if task.node.interfaces.get(InterfaceKind::Inspect) == inspection::AGENT_INSPECT {
        return inspection::start_agent_inspection(task, driver).await;
    }
    let changes = NodeChanges {
        inspection_finished_at: Some(Some(node::now())),
        ..NodeChanges::default()
    };
    task.process_event(Event::Done, false, changes.release())
        .await
        .map_err(|e| format!("Failed to finish inspection: {e}"))
}

/// Ironic's inspect_hardware validates the power and inspect interfaces before it inspects: a
/// `no-inspect` node is UnsupportedDriverExtension, never inspected.
pub(crate) fn require_inspectable(node: &Node, driver: &Driver) -> Result<()> {
    driver
        .power
        .validate(node)
        .map_err(|e| Error::InvalidParameterValue(e.to_string()))?;
    require_interface(node, InterfaceKind::Inspect)
}
