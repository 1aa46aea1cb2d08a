//! Verification (`manage` from `enroll`): the power credentials checked and the power state
//! read (`Verify`).

use crate::{
    conductor::{
        task::Task,
        worker::{Failure, Flow, hw},
    },
    drivers::Driver,
    node::{Node, NodeChanges},
    states::Event,
};

/// Verifying the node, run by a worker ([`verify`]).
pub(super) struct Verify;

#[async_trait::async_trait]
impl Flow for Verify {
    fn name(&self) -> &'static str {
        "Verification"
    }

    async fn run(&self, task: &mut Task, driver: &Driver) -> std::result::Result<(), String> {
        verify(task, driver).await
    }

    fn failure(&self, _: &Node, _: &str) -> Failure {
        Failure::fail_edge()
    }
}

/// `manage` from enroll: check the power credentials and read the power state.
async fn verify(task: &mut Task, driver: &Driver) -> std::result::Result<(), String> {
    let uuid = task.node.uuid.clone();
    driver
        .power
        .validate(&task.node)
        .map_err(|e| format!("Failed to validate power driver interface for node {uuid}: {e}"))?;
    let power = hw(task, driver.power.get_power_state(&task.node))
        .await?
        .map_err(|e| format!("Failed to get power state for node {uuid}: {e}"))?;
    let changes = NodeChanges::default().power(Some(power), None);
    task.process_event(Event::Done, false, changes.release())
        .await
        .map_err(|e| format!("Failed to finish verification: {e}"))
}
