//! Every power change a worker's driver makes is announced (`baremetal.node.power_set.*`),
//! whichever flow makes it: the driver's power interface is wrapped once, where the worker hands
//! the driver out ([`announcing`]).

use std::{future::Future, sync::Arc, time::Duration};

use crate::{
    drivers::{Driver, DriverError, PowerInterface, Properties},
    node::{Node, PowerState, PowerTarget},
    notifications::{Notifier, Status, node as notify_node},
};

/// `driver` with a power interface that announces each change it makes: `power_set` start
/// before, then end (the node as it will be recorded: the new state, no target) or error (with
/// the failure as `last_error`), as Ironic's `node_power_action` does wherever it is called.
/// Reading the power state announces nothing.
pub(super) fn announcing(mut driver: Driver, notifier: &Notifier) -> Driver {
    driver.power = Arc::new(Announced {
        inner: driver.power.clone(),
        notifier: notifier.clone(),
    });
    driver
}

struct Announced {
    inner: Arc<dyn PowerInterface>,
    notifier: Notifier,
}

impl Announced {
    async fn announce(
        &self,
        node: &Node,
        to: PowerTarget,
        change: impl Future<Output = std::result::Result<(), DriverError>>,
    ) -> std::result::Result<(), DriverError> {
        let notifier = &self.notifier;
        notifier.emit("node", "power_set", Status::Start, || {
            notify_node::power_set(node, to)
        });
        let done = change.await;
        let mut after = node.clone();
        after.target_power_state = None;
        match &done {
            Ok(()) => {
                after.power_state = Some(to.resulting_state());
                notifier.emit("node", "power_set", Status::End, || {
                    notify_node::power_set(&after, to)
                });
            }
            Err(e) => {
                after.last_error = Some(format!(
                    "Failed to change power state to '{}' by '{}': {e}",
                    to.resulting_state().api_name(),
                    to.api_name()
                ));
                notifier.emit("node", "power_set", Status::Error, || {
                    notify_node::power_set(&after, to)
                });
            }
        }
        done
    }
}

#[async_trait::async_trait]
impl PowerInterface for Announced {
    fn name(&self) -> &'static str {
        self.inner.name()
    }

    fn properties(&self) -> Properties {
        self.inner.properties()
    }

    fn validate(&self, node: &Node) -> std::result::Result<(), DriverError> {
        self.inner.validate(node)
    }

    fn bmc(&self, node: &Node) -> Option<String> {
        self.inner.bmc(node)
    }

    async fn get_power_state(&self, node: &Node) -> std::result::Result<PowerState, DriverError> {
        self.inner.get_power_state(node).await
    }

    async fn change_power(
        &self,
        node: &Node,
        target: PowerTarget,
        timeout: Duration,
    ) -> std::result::Result<(), DriverError> {
        self.announce(node, target, self.inner.change_power(node, target, timeout))
            .await
    }
}
