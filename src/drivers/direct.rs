//! `direct`: the image deploy through the deploy ramdisk's agent (Ironic's `AgentDeploy`,
//! `drivers/modules/agent.py` and `agent_base.py`), driving the unmodified Ironic Python Agent.
//!
//! Its deploy steps, in Ironic's order and priorities: `deploy` (100) boots the ramdisk and
//! waits for the agent to call back; `write_image` (80) has the agent download the image and
//! write it, and waits for that command; `prepare_instance_boot` (60) reads the written disk's
//! identifiers and makes the node boot from its disk; `tear_down_agent` (40) powers the node
//! off (through the agent, or out of band with `deploy_forces_oob_reboot`);
//! `switch_to_tenant_network` (30) is Ironic's network switch, nothing without Neutron; and
//! `boot_instance` (20) powers the node on. The conductor runs them in order and resumes after a
//! step that waits when [`DeployInterface::poll_step`] says it has finished.
//!
//! Cleaning is in band, as Ironic's agent deploy cleans: `prepare_cleaning` boots the ramdisk;
//! once its agent has called back, the conductor reads the agent's clean steps
//! ([`refresh_clean_steps`](DeployInterface::refresh_clean_steps), `clean.get_clean_steps`),
//! automated cleaning picks those of priority above 0 (`erase_devices_metadata` at 99 and
//! `erase_devices` at 10 in the agent, both overridable), and each deploy-interface clean step
//! runs as the agent's asynchronous `clean.execute_clean_step`, waited for in `clean wait`.
//!
//! Only `http://` and `https://` images are accepted: anything else fails in `prepare` with
//! ImageUnacceptable (the failure of Ironic bug 1405420).
//!
//! Here are the interface and its steps; what the agent is shown and asked about its steps is
//! `agent.rs`, the image information it is sent `image.rs`, and the work of the steps that do
//! more than one call `deploy_steps.rs`.

mod agent;
mod deploy_steps;
mod image;

use std::time::Duration;

use async_trait::async_trait;
use serde_json::{Value, json};

use self::{
    agent::{
        AgentStep, agent_clean_steps, clean_step_failed, get_agent_steps, node_for_agent,
        poll_agent_step,
    },
    deploy_steps::{boot_ramdisk, prepare_instance_boot, tear_down_agent, write_image},
    image::info_str,
};
use super::{
    DeployInterface, DeployOutcome, DriverError, Properties, StepContext, StepDone, StepPoll,
    agent_client::{AgentClient, CommandStatus},
    local_image::LocalImages,
};
use crate::{
    drivers::Driver,
    node::{JsonObject, Node, PowerState},
    steps::{CleanStep, DeployStep, DriverStep},
};

/// The `direct` deploy interface; `images` are the instance images the conductor downloads
/// and converts itself when a node's image download source is `local`.
pub struct DirectDeploy {
    pub images: LocalImages,
}

/// The direct deploy's steps (Ironic's `@base.deploy_step` priorities in `agent.py` and
/// `agent_base.py`).
const STEPS: &[DriverStep] = &[
    DriverStep::CORE,
    DriverStep {
        interface: "deploy",
        step: "write_image",
        priority: 80,
        args: &[],
    },
    DriverStep {
        interface: "deploy",
        step: "prepare_instance_boot",
        priority: 60,
        args: &[],
    },
    DriverStep {
        interface: "deploy",
        step: "tear_down_agent",
        priority: 40,
        args: &[],
    },
    DriverStep {
        interface: "deploy",
        step: "switch_to_tenant_network",
        priority: 30,
        args: &[],
    },
    DriverStep {
        interface: "deploy",
        step: "boot_instance",
        priority: 20,
        args: &[],
    },
];

/// How long a power change the deploy makes may take.
const POWER_TIMEOUT: Duration = Duration::from_secs(60);

/// Where the agent's hardware managers' versions are kept once read (Ironic's key): every step
/// the agent runs is sent with them, and the agent refuses a step if they changed.
const MANAGER_VERSION: &str = "hardware_manager_version";
/// Where the agent's own deploy steps are kept once read (Ironic's key).
const CACHED_STEPS: &str = "agent_cached_deploy_steps";
/// Where the agent's clean steps are kept once read (Ironic's key).
const CACHED_CLEAN_STEPS: &str = "agent_cached_clean_steps";

/// The instance image kinds Ironic knows (`images.VALID_IMAGE_TYPES`).
const IMAGE_TYPES: &[&str] = &["partition", "whole-disk"];

impl DirectDeploy {
    fn image_source(node: &Node) -> Result<&str, DriverError> {
        node.instance_info
            .get("image_source")
            .and_then(|v| v.as_str())
            .filter(|s| !s.is_empty())
            .ok_or_else(|| {
                DriverError::MissingParameterValue(format!(
                    "Node {} failed to validate deploy image info. Some parameters were missing. Missing are: ['instance_info.image_source']",
                    node.uuid
                ))
            })
    }
}

#[async_trait]
impl DeployInterface for DirectDeploy {
    fn name(&self) -> &'static str {
        "direct"
    }

    /// What Ironic's direct deploy reads from `driver_info` (its `agent.py` and `agent_base.py`
    /// properties), described in Ferrum's words.
    fn properties(&self) -> Properties {
        &[
            (
                "deploy_kernel",
                "The kernel image (an image service UUID or a URL) the deploy ramdisk boots with. Required.",
            ),
            (
                "deploy_ramdisk",
                "The ramdisk image (an image service UUID or a URL) with the agent that writes the instance image. Required.",
            ),
            (
                "image_http_proxy",
                "The URL of the proxy the agent fetches images through over HTTP. Optional.",
            ),
            (
                "image_https_proxy",
                "The URL of the proxy the agent fetches images through over HTTPS. Optional.",
            ),
            (
                "image_no_proxy",
                "Comma-separated host names, IP addresses and domains (a leading dot for a domain, an optional :port) the agent reaches without the proxies; only read when a proxy is set. Optional.",
            ),
            (
                "image_download_source",
                "Where the agent downloads the image from: \"swift\", \"http\" (the image's own URL) or \"local\" (a copy cached and served by the conductor). Optional.",
            ),
            (
                "deploy_forces_oob_reboot",
                "Whether the node is rebooted out of band (by its power interface) once the image is written, for ramdisks that cannot reboot themselves. Default false. Optional.",
            ),
            (
                "agent_verify_ca",
                "How the agent's TLS certificate is checked: true to verify it, false not to, or the path of a CA bundle file or directory to verify it against. Default true. Optional.",
            ),
        ]
    }

    /// Ironic's `AgentDeploy.validate`: an image source, a known image type, and for an image
    /// that is not a local file a checksum (`image_checksum`, or `image_os_hash_algo` with
    /// `image_os_hash_value`).
    fn validate(&self, node: &Node) -> Result<(), DriverError> {
        let source = Self::image_source(node)?;
        if let Some(kind) = node.instance_info.get("image_type").and_then(Value::as_str)
            && !IMAGE_TYPES.contains(&kind)
        {
            return Err(DriverError::InvalidParameterValue(format!(
                "Invalid image_type \"{kind}\", valid are {}",
                IMAGE_TYPES.join(", ")
            )));
        }
        self.images.source_for(node)?;
        if !source.starts_with("file://") && !source.starts_with("oci://") {
            let algo = info_str(node, "image_os_hash_algo");
            let value = info_str(node, "image_os_hash_value");
            let checksum = info_str(node, "image_checksum");
            let complete = match (algo, value) {
                (Some(_), Some(_)) => true,
                (None, None) => checksum.is_some(),
                _ => false,
            };
            if !complete {
                return Err(DriverError::MissingParameterValue(format!(
                    "image_source's \"image_checksum\", or \"image_os_hash_algo\" and \"image_os_hash_value\" must be provided in instance_info for node {}",
                    node.uuid
                )));
            }
        }
        Ok(())
    }

    async fn prepare(&self, node: &Node) -> Result<(), DriverError> {
        let image = Self::image_source(node)?;
        let scheme_ok = image.split_once("://").is_some_and(|(scheme, rest)| {
            (scheme.eq_ignore_ascii_case("http") || scheme.eq_ignore_ascii_case("https"))
                && !rest.is_empty()
        });
        if !scheme_ok {
            return Err(DriverError::ImageUnacceptable {
                image: image.to_owned(),
                reason: "Agent deploy supports only HTTP(S) URLs".to_owned(),
            });
        }
        Ok(())
    }

    async fn deploy(&self, _node: &Node) -> Result<DeployOutcome, DriverError> {
        // The node now boots the agent ramdisk; the agent's heartbeat continues the deploy.
        Ok(DeployOutcome::Wait)
    }

    fn deploy_steps(&self) -> Vec<DriverStep> {
        STEPS.to_vec()
    }

    async fn execute_step(
        &self,
        node: &Node,
        step: &DeployStep,
        ctx: &StepContext<'_>,
    ) -> Result<StepDone, DriverError> {
        if step.interface != "deploy" {
            return Err(DriverError::Failed(format!(
                "Deploy step {}.{} is not offered by the direct deploy interface.",
                step.interface, step.step
            )));
        }
        match step.step.as_str() {
            "deploy" => boot_ramdisk(node, ctx).await,
            "write_image" => write_image(node, ctx, &self.images).await,
            "prepare_instance_boot" => {
                // The agent has written the image: a copy the conductor published is not needed.
                self.images.remove(&node.uuid).await;
                prepare_instance_boot(node, ctx).await
            }
            "tear_down_agent" => tear_down_agent(node, ctx).await,
            // Ironic moves the node to its tenant networks here through Neutron; Ferrum's
            // network interfaces (`flat`, `noop`) have no networks to switch.
            "switch_to_tenant_network" => Ok(StepDone::done()),
            "boot_instance" => {
                ctx.driver
                    .power
                    .set_power_state(node, PowerState::On, POWER_TIMEOUT)
                    .await?;
                Ok(StepDone {
                    power: Some(PowerState::On),
                    ..StepDone::done()
                })
            }
            other => Err(DriverError::Failed(format!(
                "Deploy step deploy.{other} is not offered by the direct deploy interface."
            ))),
        }
    }

    /// `deploy` waits for the agent's first heartbeat; `write_image` for the agent's command
    /// (Ironic's `_get_completed_command`: the last command must be the step's, finished).
    async fn poll_step(&self, node: &Node, step: &DeployStep) -> Result<StepPoll, DriverError> {
        if step.step != "write_image" {
            return Ok(if node.driver_internal_info.contains_key("agent_url") {
                StepPoll::Finished
            } else {
                StepPoll::Running
            });
        }
        let last = match poll_agent_step(
            node,
            "execute_deploy_step",
            "deploy_step",
            &step.interface,
            &step.step,
        )
        .await?
        {
            AgentStep::Running => return Ok(StepPoll::Running),
            AgentStep::Finished => return Ok(StepPoll::Finished),
            AgentStep::Failed(last) => last,
        };
        Ok(match last.status() {
            CommandStatus::Running | CommandStatus::Succeeded => StepPoll::Running,
            CommandStatus::Failed => StepPoll::Failed(format!(
                "Deploy step deploy.write_image failed on node {}. {}",
                node.uuid,
                last.error_text()
            )),
            CommandStatus::VersionMismatch => StepPoll::Failed(format!(
                "The agent of node {} changed its hardware managers during the deploy (VERSION_MISMATCH); deploy again.",
                node.uuid
            )),
            CommandStatus::Other(status) => StepPoll::Failed(format!(
                "Agent returned unknown status for deploy step deploy.write_image on node {} : {status}.",
                node.uuid
            )),
        })
    }

    async fn tear_down(&self, node: &Node) -> Result<(), DriverError> {
        self.images.remove(&node.uuid).await;
        Ok(())
    }

    async fn clean_up(&self, node: &Node) -> Result<(), DriverError> {
        self.images.remove(&node.uuid).await;
        Ok(())
    }

    async fn clean_up_boot(&self, node: &Node, driver: &Driver) -> Result<(), DriverError> {
        driver.boot.clean_up_ramdisk(node, driver).await
    }

    fn cleans_in_band(&self) -> bool {
        true
    }

    async fn prepare_cleaning(
        &self,
        node: &Node,
        ctx: &StepContext<'_>,
    ) -> Result<StepDone, DriverError> {
        boot_ramdisk(node, ctx).await
    }

    async fn refresh_clean_steps(
        &self,
        node: &Node,
        ctx: &StepContext<'_>,
    ) -> Result<(Vec<CleanStep>, StepDone), DriverError> {
        let agent = AgentClient::for_node(node)?;
        let result = get_agent_steps(&agent, node, ctx, "clean.get_clean_steps").await?;
        let offered = result.get("clean_steps").cloned().unwrap_or(Value::Null);
        let mut done = StepDone::done();
        done.remember.insert(
            MANAGER_VERSION.into(),
            result
                .get("hardware_manager_version")
                .cloned()
                .unwrap_or(Value::Null),
        );
        done.remember
            .insert(CACHED_CLEAN_STEPS.into(), offered.clone());
        Ok((agent_clean_steps(&offered, ctx.config), done))
    }

    /// Sends the step to the agent, which runs it in the background: the cleaning waits for it
    /// unless the agent reports it done at once.
    async fn execute_clean_step(
        &self,
        node: &Node,
        step: &str,
        args: &JsonObject,
        ctx: &StepContext<'_>,
    ) -> Result<StepDone, DriverError> {
        let agent = AgentClient::for_node(node)?;
        let version = node
            .driver_internal_info
            .get(MANAGER_VERSION)
            .cloned()
            .unwrap_or(Value::Null);
        let result = agent
            .command(
                "clean.execute_clean_step",
                json!({
                    "step": {"interface": "deploy", "step": step, "args": args},
                    "node": node_for_agent(node),
                    "ports": ctx.ports,
                    "clean_version": version,
                }),
                false,
            )
            .await?;
        match result.status() {
            CommandStatus::Running => Ok(StepDone::wait()),
            CommandStatus::Succeeded => Ok(StepDone::done()),
            _ => Err(clean_step_failed(node, step, &result)),
        }
    }

    /// The agent's last command must be this step's `execute_clean_step`, finished (Ironic's
    /// `_get_completed_command`).
    async fn poll_clean_step(
        &self,
        node: &Node,
        interface: &str,
        step: &str,
    ) -> Result<StepPoll, DriverError> {
        Ok(
            match poll_agent_step(node, "execute_clean_step", "clean_step", interface, step).await?
            {
                AgentStep::Running => StepPoll::Running,
                AgentStep::Finished => StepPoll::Finished,
                AgentStep::Failed(last) => {
                    StepPoll::Failed(clean_step_failed(node, step, &last).to_string())
                }
            },
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::ImageDownloadSource;

    #[tokio::test]
    async fn only_http_images_are_acceptable() {
        let mut node: Node = crate::node::tests_support::node();
        for (image, ok) in [
            ("http://example.com/img.qcow2", true),
            ("HTTPS://example.com/img", true),
            ("file:///home/user/aaa", false),
            ("/var/lib/img.raw", false),
            ("http://", false),
        ] {
            node.instance_info
                .insert("image_source".into(), serde_json::json!(image));
            let got = direct().prepare(&node).await;
            assert_eq!(got.is_ok(), ok, "{image}: {got:?}");
            if !ok {
                let msg = got.unwrap_err().to_string();
                assert!(
                    msg.starts_with(&format!("Image {image} is unacceptable: ")),
                    "{msg}"
                );
            }
        }
        node.instance_info.remove("image_source");
        assert!(direct().validate(&node).is_err());
    }

    #[test]
    fn an_http_image_needs_a_checksum() {
        let mut node: Node = crate::node::tests_support::node();
        node.instance_info
            .insert("image_source".into(), json!("http://example.com/disk.raw"));
        let e = direct().validate(&node).unwrap_err().to_string();
        assert!(e.contains("image_os_hash_algo"), "{e}");
        node.instance_info
            .insert("image_os_hash_value".into(), json!("abc"));
        assert!(
            direct().validate(&node).is_err(),
            "a value without its algorithm"
        );
        node.instance_info
            .insert("image_os_hash_algo".into(), json!("sha256"));
        direct().validate(&node).unwrap();
        node.instance_info.remove("image_os_hash_algo");
        node.instance_info.remove("image_os_hash_value");
        node.instance_info.insert(
            "image_checksum".into(),
            json!("http://example.com/SHA256SUMS"),
        );
        direct().validate(&node).unwrap();
        node.instance_info
            .insert("image_type".into(), json!("tarball"));
        let e = direct().validate(&node).unwrap_err().to_string();
        assert!(e.contains("Invalid image_type \"tarball\""), "{e}");
    }

    #[test]
    fn the_image_download_source_is_the_nodes_or_the_conductors() {
        let mut node: Node = crate::node::tests_support::node();
        let deploy = direct();
        assert_eq!(
            deploy.images.source_for(&node).unwrap(),
            ImageDownloadSource::Http
        );
        node.driver_info
            .insert("image_download_source".into(), json!("local"));
        assert_eq!(
            deploy.images.source_for(&node).unwrap(),
            ImageDownloadSource::Local
        );
        node.instance_info
            .insert("image_download_source".into(), json!("http"));
        assert_eq!(
            deploy.images.source_for(&node).unwrap(),
            ImageDownloadSource::Http
        );
        node.instance_info
            .insert("image_download_source".into(), json!("swift"));
        node.instance_info
            .insert("image_source".into(), json!("http://example.com/disk.raw"));
        node.instance_info
            .insert("image_checksum".into(), json!("abc"));
        let e = deploy.validate(&node).unwrap_err().to_string();
        assert!(e.contains("image_download_source"), "{e}");
    }

    fn direct() -> DirectDeploy {
        DirectDeploy {
            images: LocalImages::new(&crate::config::ConductorConfig::default()),
        }
    }
}
