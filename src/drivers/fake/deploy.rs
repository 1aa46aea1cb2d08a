//! The fake deploy, with its test hooks (`fake_deploy_delay`, `fake_deploy_block`,
//! `fake_deploy_panic`), and the
//! [`DeployGate`] an in-process test may hand it to hold deploys until it lets them through.

use std::{sync::Arc, time::Duration};

use async_trait::async_trait;
use tokio::sync::{Mutex, Semaphore, mpsc};
use tracing::info;

use crate::{
    drivers::{DeployInterface, DeployOutcome, DriverError, Properties, StepContext, StepDone},
    node::Node,
};

pub struct FakeDeploy {
    pub(super) gate: Option<DeployGate>,
}

/// A gate the fake deploy waits at, for tests: a deploy that reaches it announces its node
/// (see [`DeployGate::reached`]) and goes on only once the test lets it through
/// ([`DeployGate::release`], [`DeployGate::open`]). It waits inside the deploy step, so while
/// it waits the node is in `deploying` and its lock is held by the worker; a conductor shutting
/// down cuts the wait like any driver call.
#[derive(Clone)]
pub struct DeployGate {
    inner: Arc<GateInner>,
}

struct GateInner {
    reached_tx: mpsc::UnboundedSender<String>,
    reached_rx: Mutex<mpsc::UnboundedReceiver<String>>,
    /// One permit per deploy let through; closed once the gate is open for good.
    passes: Semaphore,
}

impl DeployGate {
    /// A closed gate: every deploy waits at it.
    pub fn new() -> Self {
        let (reached_tx, reached_rx) = mpsc::unbounded_channel();
        DeployGate {
            inner: Arc::new(GateInner {
                reached_tx,
                reached_rx: Mutex::new(reached_rx),
                passes: Semaphore::new(0),
            }),
        }
    }

    /// Waits until the next deploy reaches the gate and returns its node's UUID; deploys are
    /// reported in the order they arrived, each once.
    pub async fn reached(&self) -> String {
        self.inner
            .reached_rx
            .lock()
            .await
            .recv()
            .await
            .unwrap_or_default()
    }

    /// Lets `n` deploys through, waiting ones first.
    pub fn release(&self, n: usize) {
        self.inner.passes.add_permits(n);
    }

    /// Lets every deploy through, now and from now on.
    pub fn open(&self) {
        self.inner.passes.close();
    }

    async fn pass(&self, uuid: impl std::fmt::Display) {
        let _ = self.inner.reached_tx.send(uuid.to_string());
        // Closed (open for good): the acquire fails at once, and the deploy goes on.
        if let Ok(permit) = self.inner.passes.acquire().await {
            permit.forget();
        }
    }
}

impl Default for DeployGate {
    fn default() -> Self {
        Self::new()
    }
}

impl FakeDeploy {
    /// The seconds of the hook `key` in the node's driver_info, 0 to 3600, if set.
    fn seconds(node: &Node, key: &str) -> Result<Option<Duration>, DriverError> {
        match node.driver_info.get(key) {
            None => Ok(None),
            Some(v) => v
                .as_f64()
                .filter(|s| (0.0..=3600.0).contains(s))
                .and_then(|s| Duration::try_from_secs_f64(s).ok())
                .map(Some)
                .ok_or_else(|| {
                    DriverError::InvalidParameterValue(format!(
                        "driver_info/{key} must be 0 to 3600 seconds, not {v}"
                    ))
                }),
        }
    }
}

#[async_trait]
impl DeployInterface for FakeDeploy {
    fn name(&self) -> &'static str {
        "fake"
    }

    /// The test hooks of the module's documentation (Ironic's fake deploy reads none).
    fn properties(&self) -> Properties {
        &[
            (
                "fake_deploy_delay",
                "How many seconds the fake deploy step takes, 0 to 3600. Optional.",
            ),
            (
                "fake_deploy_block",
                "How many seconds the fake deploy step blocks its thread, 0 to 3600: a driver stuck in a call that cannot be cut short. Optional.",
            ),
            (
                "fake_deploy_panic",
                "A message the fake deploy step panics with, to test that a panicking driver cannot wedge a node. Optional.",
            ),
        ]
    }

    fn validate(&self, node: &Node) -> Result<(), DriverError> {
        Self::seconds(node, "fake_deploy_delay")?;
        Self::seconds(node, "fake_deploy_block").map(|_| ())
    }

    async fn prepare(&self, _node: &Node) -> Result<(), DriverError> {
        Ok(())
    }

    async fn deploy(&self, node: &Node) -> Result<DeployOutcome, DriverError> {
        // One stable line per run of the deploy step: the fault suite counts them to find a
        // deploy that ran twice.
        let uuid = &node.uuid;
        info!(node.uuid = %uuid, "fake deploy started on node {uuid}");
        if let Some(gate) = &self.gate {
            gate.pass(uuid).await;
        }
        if let Some(delay) = Self::seconds(node, "fake_deploy_delay")? {
            tokio::time::sleep(delay).await;
        }
        if let Some(block) = Self::seconds(node, "fake_deploy_block")? {
            // Deliberately blocks a runtime thread: nothing awaiting this can cut it short.
            std::thread::sleep(block);
        }
        if let Some(message) = node.driver_info.get("fake_deploy_panic") {
            panic!("fake deploy asked to panic: {message}");
        }
        Ok(DeployOutcome::Done)
    }

    /// Booting the cleaning ramdisk does nothing, but waits at the gate like a deploy, so a
    /// test sees whether cleaning prepared the ramdisk.
    async fn prepare_cleaning(
        &self,
        node: &Node,
        _ctx: &StepContext<'_>,
    ) -> Result<StepDone, DriverError> {
        if let Some(gate) = &self.gate {
            gate.pass(&node.uuid).await;
        }
        Ok(StepDone::done())
    }

    async fn tear_down(&self, _node: &Node) -> Result<(), DriverError> {
        Ok(())
    }

    async fn clean_up(&self, _node: &Node) -> Result<(), DriverError> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Deploys wait at a closed gate, are reported in the order they arrived, and go on one
    /// by one as they are released, then all at once when it opens.
    #[tokio::test]
    async fn a_gate_holds_deploys_until_released() {
        let gate = DeployGate::new();
        let first = tokio::spawn({
            let gate = gate.clone();
            async move { gate.pass("a").await }
        });
        assert_eq!(gate.reached().await, "a");
        let second = tokio::spawn({
            let gate = gate.clone();
            async move { gate.pass("b").await }
        });
        assert_eq!(gate.reached().await, "b");
        assert!(!first.is_finished() && !second.is_finished());
        gate.release(1);
        first.await.unwrap();
        assert!(!second.is_finished(), "one release lets one deploy through");
        gate.open();
        second.await.unwrap();
        gate.pass("c").await;
        assert_eq!(
            gate.reached().await,
            "c",
            "an open gate still reports arrivals"
        );
    }
}
