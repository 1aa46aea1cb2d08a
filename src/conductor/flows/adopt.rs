//! Adoption (`adopt`): a node already running its instance is taken over without deploying
//! (`Adopt`).

use crate::{
    conductor::{
        task::Task,
        worker::{Failure, Flow, hw},
    },
    drivers::Driver,
    node::{Node, NodeChanges},
    states::Event,
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
    driver
        .power
        .validate(&task.node)
        .and_then(|()| driver.deploy.validate(&task.node))
        .map_err(|e| format!("Error while attempting to adopt node {uuid}: {e}."))?;
    let power = hw(task, driver.power.get_power_state(&task.node))
        .await?
        .map_err(|e| format!("Error while attempting to adopt node {uuid}: {e}."))?;
    let changes = NodeChanges::default().power(Some(power), None);
    task.process_event(Event::Done, false, changes.release())
        .await
        .map_err(|e| format!("Error while attempting to adopt node {uuid}: {e}."))
}
