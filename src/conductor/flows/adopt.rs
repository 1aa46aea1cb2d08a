//! Adoption (`adopt`): a node already running its instance is taken over without deploying
//! (`Adopt`).

use super::done_with_power_state;
use crate::{
    conductor::{
        task::Task,
        worker::{Failure, Flow},
    },
    drivers::Driver,
    node::Node,
};

/// Adopting the node, run by a worker ([`adopt`]).
pub(super) struct Adopt;

#[async_trait::async_trait]
impl Flow for Adopt {
    fn name(&self) -> &'static str {
        "Adoption"
    }

    async fn run(&self, task: &mut Task, driver: &Driver) -> std::result::Result<(), String> {
        adopt(task, driver).await
    }

    fn failure(&self, _: &Node, _: &str) -> Failure {
        Failure::fail_edge()
    }
}

/// Adoption: take over a node already running its instance: check the interfaces, read the power
/// state, and call it active without deploying.
async fn adopt(task: &mut Task, driver: &Driver) -> std::result::Result<(), String> {
    let uuid = task.node.uuid.clone();
    let failed =
        |e: &dyn std::fmt::Display| format!("Error while attempting to adopt node {uuid}: {e}.");
    driver
        .power
        .validate(&task.node)
        .and_then(|()| driver.deploy.validate(&task.node))
        .map_err(|e| failed(&e))?;
    done_with_power_state(task, driver, |e| failed(&e), |e| failed(&e)).await
}
