//! Verification (`manage` from `enroll`): the power credentials checked and the power state
//! read (`Verify`).

use super::done_with_power_state;
use crate::{
    conductor::{
        task::Task,
        worker::{Failure, Flow},
    },
    drivers::Driver,
    node::Node,
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
    done_with_power_state(
        task,
        driver,
        |e| format!("Failed to get power state for node {uuid}: {e}"),
        |e| format!("Failed to finish verification: {e}"),
    )
    .await
}
