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

use std::time::Duration;

use async_trait::async_trait;
use serde_json::{Value, json};

use super::{
    CleanStep, DeployInterface, DeployOutcome, DriverError, DriverStep, Properties, StepContext,
    StepDone, StepPoll,
    agent_client::{AgentClient, CommandResult, CommandStatus},
    local_image::{LocalImage, LocalImages},
};
use crate::{
    config::ImageDownloadSource,
    deploy_template::DeployStep,
    drivers::{BootDevice, Driver, ManagementInterface},
    node::{JsonObject, Node, PowerState, mask},
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

/// What a partition image adds to the image information (Ironic's `PARTITION_IMAGE_LABELS`).
const PARTITION_IMAGE_LABELS: &[&str] = &[
    "kernel",
    "ramdisk",
    "root_gb",
    "root_mb",
    "swap_mb",
    "ephemeral_mb",
    "ephemeral_format",
    "configdrive",
    "preserve_ephemeral",
    "image_type",
    "deploy_boot_mode",
];

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

fn info_str<'a>(node: &'a Node, key: &str) -> Option<&'a str> {
    node.instance_info
        .get(key)
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
}

/// Whether the instance image is a partition image: one with its own kernel and ramdisk
/// (Ironic's `is_whole_disk_image` for images that are not in Glance).
fn is_partition_image(node: &Node) -> bool {
    match info_str(node, "image_type") {
        Some(kind) => kind == "partition",
        None => info_str(node, "kernel").is_some() && info_str(node, "ramdisk").is_some(),
    }
}

/// The node as the agent is shown it (Ironic sends `node.as_dict(secure=True)`): its
/// identity and documents, secrets masked.
fn node_for_agent(node: &Node) -> Value {
    json!({
        "uuid": node.uuid,
        "name": node.name,
        "driver": node.driver,
        "driver_info": mask::mask_secrets(&node.driver_info),
        "driver_internal_info": mask::mask_secrets(&node.driver_internal_info),
        "instance_info": mask::masked_instance_info(&node.instance_info),
        "instance_uuid": node.instance_uuid,
        "properties": node.properties.0,
        "extra": node.extra.0,
        "provision_state": node.provision_state.api_name(),
        "deploy_step": node.deploy_step.0,
    })
}

/// What the agent needs to fetch and write the image (Ironic's `AgentDeploy.write_image`):
/// the image's own URL and checksum, or those of the raw copy the conductor published (`local`).
fn image_info(
    node: &Node,
    stream_raw_images: bool,
    local: Option<&LocalImage>,
) -> Result<Value, DriverError> {
    let source = DirectDeploy::image_source(node)?;
    let mut info = JsonObject::new();
    let id = source.rsplit('/').next().unwrap_or(source);
    info.insert("id".into(), json!(id));
    let url = match local {
        Some(local) => local.url.as_str(),
        None => info_str(node, "image_url").unwrap_or(source),
    };
    info.insert("urls".into(), json!([url]));
    info.insert(
        "disk_format".into(),
        match local {
            Some(_) => json!("raw"),
            None => node
                .instance_info
                .get("image_disk_format")
                .cloned()
                .unwrap_or(Value::Null),
        },
    );
    info.insert(
        "container_format".into(),
        node.instance_info
            .get("image_container_format")
            .cloned()
            .unwrap_or(Value::Null),
    );
    info.insert("stream_raw_images".into(), json!(stream_raw_images));
    if let Some(local) = local {
        info.insert("os_hash_algo".into(), json!("sha256"));
        info.insert("os_hash_value".into(), json!(local.sha256));
    } else {
        if let Some(checksum) = info_str(node, "image_checksum") {
            info.insert("checksum".into(), json!(checksum));
        }
        if let (Some(algo), Some(value)) = (
            info_str(node, "image_os_hash_algo"),
            info_str(node, "image_os_hash_value"),
        ) {
            info.insert("os_hash_algo".into(), json!(algo));
            info.insert("os_hash_value".into(), json!(value));
        }
    }
    let mut proxies = JsonObject::new();
    for scheme in ["http", "https"] {
        if let Some(proxy) = node
            .driver_info
            .get(&format!("image_{scheme}_proxy"))
            .and_then(Value::as_str)
        {
            proxies.insert(scheme.into(), json!(proxy));
        }
    }
    if !proxies.is_empty() {
        info.insert("proxies".into(), Value::Object(proxies));
        if let Some(no_proxy) = node.driver_info.get("image_no_proxy") {
            info.insert("no_proxy".into(), no_proxy.clone());
        }
    }
    info.insert("node_uuid".into(), json!(node.uuid));
    if is_partition_image(node) {
        for label in PARTITION_IMAGE_LABELS {
            info.insert(
                (*label).into(),
                node.instance_info
                    .get(*label)
                    .cloned()
                    .unwrap_or(Value::Null),
            );
        }
        info.insert("image_type".into(), json!("partition"));
    } else {
        info.insert("image_type".into(), json!("whole-disk"));
    }
    if let Some(configdrive) = node.instance_info.get("configdrive") {
        info.insert("configdrive".into(), configdrive.clone());
    }
    Ok(Value::Object(info))
}

/// `deploy.write_image` as the agent runs it, with the image information.
fn agent_write_image_step(
    node: &Node,
    stream_raw_images: bool,
    local: Option<&LocalImage>,
) -> Result<Value, DriverError> {
    Ok(json!({
        "interface": "deploy",
        "step": "write_image",
        "priority": 80,
        "reboot_requested": false,
        "args": {
            "image_info": image_info(node, stream_raw_images, local)?,
            "configdrive": node.instance_info.get("configdrive").cloned().unwrap_or(Value::Null),
        },
    }))
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
        eject_deploy_iso(node, driver.management.as_ref()).await
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
        let result = agent
            .run(
                "clean.get_clean_steps",
                json!({"node": node_for_agent(node), "ports": ctx.ports}),
            )
            .await?
            .unwrap_or(Value::Null);
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

/// Where an asynchronous step the agent runs stands.
enum AgentStep {
    Running,
    Finished,
    /// The agent's last command, which did not succeed.
    Failed(CommandResult),
}

/// Where the agent's asynchronous `command` running `interface.step` stands (Ironic's
/// `_get_completed_command`): finished once the agent's last command is this command, done,
/// with this step in its result under `result_key`; running until then.
async fn poll_agent_step(
    node: &Node,
    command: &str,
    result_key: &str,
    interface: &str,
    step: &str,
) -> Result<AgentStep, DriverError> {
    let mut commands = AgentClient::for_node(node)?.commands().await?;
    let Some(last) = commands.pop() else {
        return Ok(AgentStep::Running);
    };
    if last.command_name != command {
        return Ok(AgentStep::Running);
    }
    Ok(match last.status() {
        CommandStatus::Running => AgentStep::Running,
        CommandStatus::Succeeded => {
            let finished = last.command_result.as_ref().and_then(|r| r.get(result_key));
            let same = finished.is_some_and(|s| {
                s.get("interface").and_then(Value::as_str) == Some(interface)
                    && s.get("step").and_then(Value::as_str) == Some(step)
            });
            if same {
                AgentStep::Finished
            } else {
                AgentStep::Running
            }
        }
        CommandStatus::Failed | CommandStatus::VersionMismatch | CommandStatus::Other(_) => {
            AgentStep::Failed(last)
        }
    })
}

/// Boots the deploy ramdisk: (re)starts the node, then waits for its agent. With the
/// `redfish-virtual-media` boot interface the deploy ISO goes into the virtual CD first.
async fn boot_ramdisk(node: &Node, ctx: &StepContext<'_>) -> Result<StepDone, DriverError> {
    let remember = insert_deploy_iso(node, ctx).await?;
    let power = ctx.driver.power.get_power_state(node).await?;
    match power {
        PowerState::On => ctx.driver.power.reboot(node, POWER_TIMEOUT).await?,
        PowerState::Off => {
            ctx.driver
                .power
                .set_power_state(node, PowerState::On, POWER_TIMEOUT)
                .await?;
        }
    }
    Ok(StepDone {
        power: Some(PowerState::On),
        remember,
        ..StepDone::wait()
    })
}

/// The boot interface that inserts the deploy ISO as virtual media.
const VMEDIA_BOOT: &str = "redfish-virtual-media";

/// With the `redfish-virtual-media` boot interface: the deploy ISO (`driver_info.deploy_iso`,
/// an http(s) URL) inserted into the node's virtual CD and the CD set as its next boot device
/// (Ironic's `RedfishVirtualMediaBoot.prepare_ramdisk`, without building an ISO from
/// `deploy_kernel` and `deploy_ramdisk`, which Ferrum does not do yet). What the management
/// interface asks to keep is returned to be remembered.
async fn insert_deploy_iso(node: &Node, ctx: &StepContext<'_>) -> Result<JsonObject, DriverError> {
    if node.interfaces.boot != VMEDIA_BOOT {
        return Ok(JsonObject::new());
    }
    let iso = node
        .driver_info
        .get("deploy_iso")
        .and_then(Value::as_str)
        .filter(|u| u.starts_with("http://") || u.starts_with("https://"))
        .ok_or_else(|| {
            DriverError::InvalidParameterValue(format!(
                "Node {} boots by redfish-virtual-media: driver_info deploy_iso must be the http(s) URL of the deploy ISO (Ferrum does not build one from deploy_kernel and deploy_ramdisk yet)",
                node.uuid
            ))
        })?;
    let management = &ctx.driver.management;
    let mut kept = management
        .attach_virtual_media(node, BootDevice::Cdrom, iso)
        .await?;
    kept.extend(
        management
            .set_boot_device(node, BootDevice::Cdrom, false)
            .await?,
    );
    Ok(kept)
}

/// With the `redfish-virtual-media` boot interface: the virtual CD ejected (Ironic's
/// `_eject_all` of the boot interface, for the CD: Ferrum inserts nothing else).
async fn eject_deploy_iso(
    node: &Node,
    management: &dyn ManagementInterface,
) -> Result<(), DriverError> {
    if node.interfaces.boot != VMEDIA_BOOT {
        return Ok(());
    }
    management
        .detach_virtual_media(node, Some(&[BootDevice::Cdrom]))
        .await
        .map(|_| ())
}

/// A clean step the agent failed, in its words (Ironic's "Agent returned error for clean
/// step ..."); a changed set of hardware managers is its own failure.
fn clean_step_failed(node: &Node, step: &str, result: &CommandResult) -> DriverError {
    DriverError::Failed(match result.status() {
        CommandStatus::VersionMismatch => format!(
            "The agent of node {} changed its hardware managers during the cleaning (VERSION_MISMATCH); clean again.",
            node.uuid
        ),
        _ => format!(
            "Agent returned error for clean step deploy.{step} on node {} : {}.",
            node.uuid,
            result.error_text()
        ),
    })
}

/// The agent's clean steps (keyed by hardware manager, each step once: the agent keeps the
/// one of its highest-priority manager) as automated cleaning ranks them, with the
/// conductor's priority overrides for the disk erasures.
fn agent_clean_steps(offered: &Value, config: &crate::config::ConductorConfig) -> Vec<CleanStep> {
    let mut steps: Vec<CleanStep> = Vec::new();
    for step in offered
        .as_object()
        .into_iter()
        .flat_map(|managers| managers.values())
        .filter_map(Value::as_array)
        .flatten()
    {
        let (Some(interface), Some(name)) = (
            step.get("interface").and_then(Value::as_str),
            step.get("step").and_then(Value::as_str),
        ) else {
            continue;
        };
        let own = step
            .get("priority")
            .and_then(Value::as_u64)
            .and_then(|p| u32::try_from(p).ok())
            .unwrap_or(0);
        let priority = match name {
            "erase_devices" => config.erase_devices_priority.unwrap_or(own),
            "erase_devices_metadata" => config.erase_devices_metadata_priority.unwrap_or(own),
            _ => own,
        };
        if steps
            .iter()
            .any(|s| s.interface == interface && s.step == name)
        {
            continue;
        }
        steps.push(CleanStep {
            interface: interface.to_owned(),
            step: name.to_owned(),
            priority,
        });
    }
    steps
}

/// Reads the agent's deploy steps and its hardware managers' versions (Ironic's
/// `refresh_steps`), which every step sent to it must carry.
async fn refresh_steps(
    agent: &AgentClient,
    node: &Node,
    ctx: &StepContext<'_>,
    done: &mut StepDone,
) -> Result<Value, DriverError> {
    if let Some(version) = node.driver_internal_info.get(MANAGER_VERSION) {
        return Ok(version.clone());
    }
    let result = agent
        .run(
            "deploy.get_deploy_steps",
            json!({"node": node_for_agent(node), "ports": ctx.ports}),
        )
        .await?
        .unwrap_or(Value::Null);
    let version = result
        .get("hardware_manager_version")
        .cloned()
        .unwrap_or(Value::Null);
    done.remember.insert(
        CACHED_STEPS.into(),
        result.get("deploy_steps").cloned().unwrap_or(Value::Null),
    );
    done.remember
        .insert(MANAGER_VERSION.into(), version.clone());
    Ok(version)
}

/// Has the agent write the image, asynchronously: the deploy waits for the command. A `local`
/// image is downloaded, checked and converted by the conductor first.
async fn write_image(
    node: &Node,
    ctx: &StepContext<'_>,
    images: &LocalImages,
) -> Result<StepDone, DriverError> {
    let agent = AgentClient::for_node(node)?;
    let mut done = StepDone::wait();
    let version = refresh_steps(&agent, node, ctx, &mut done).await?;
    let local = match images.source_for(node)? {
        ImageDownloadSource::Http => None,
        ImageDownloadSource::Local => {
            let source = DirectDeploy::image_source(node)?;
            tracing::info!(node.uuid = %node.uuid, "Downloading and converting image {source} for node {}", node.uuid);
            Some(images.prepare(node, source).await?)
        }
    };
    let result = agent
        .command(
            "deploy.execute_deploy_step",
            json!({
                "step": agent_write_image_step(node, ctx.config.stream_raw_images, local.as_ref())?,
                "node": node_for_agent(node),
                "ports": ctx.ports,
                "deploy_version": version,
            }),
            false,
        )
        .await?;
    match result.status() {
        CommandStatus::Running => Ok(done),
        // The agent had written this very image already (it caches by image id).
        CommandStatus::Succeeded => {
            done.waits = false;
            Ok(done)
        }
        CommandStatus::Failed | CommandStatus::VersionMismatch | CommandStatus::Other(_) => {
            Err(DriverError::Failed(format!(
                "Deploy step deploy.write_image failed on node {}. {}",
                node.uuid,
                result.error_text()
            )))
        }
    }
}

/// Reads the written disk's identifier from the agent and makes the node boot from its disk
/// (Ironic's `prepare_instance_boot` and the boot interface's local boot).
async fn prepare_instance_boot(
    node: &Node,
    ctx: &StepContext<'_>,
) -> Result<StepDone, DriverError> {
    let agent = AgentClient::for_node(node)?;
    let uuids = agent
        .run("standby.get_partition_uuids", json!({}))
        .await
        .map_err(|e| DriverError::Failed(format!("Failed to prepare instance for booting: {e}")))?
        .unwrap_or(Value::Null);
    let mut done = StepDone::done();
    if let Some(root) = uuids.get("root uuid").filter(|v| !v.is_null()) {
        done.remember
            .insert("root_uuid_or_disk_id".into(), root.clone());
    } else if is_partition_image(node) {
        tracing::error!(node.uuid = %node.uuid, partitions = %uuids,
            "No root UUID returned from the ramdisk for node {}, the deploy will likely fail", node.uuid);
    }
    // The ramdisk's work is done: its ISO leaves the virtual CD before the disk boots.
    eject_deploy_iso(node, ctx.driver.management.as_ref())
        .await
        .map_err(|e| DriverError::Failed(format!("Failed to prepare instance for booting: {e}")))?;
    let kept = ctx
        .driver
        .management
        .set_boot_device(node, BootDevice::Disk, true)
        .await
        .map_err(|e| DriverError::Failed(format!("Failed to prepare instance for booting: {e}")))?;
    done.remember.extend(kept);
    tracing::info!(node.uuid = %node.uuid, "Image successfully written to node {}", node.uuid);
    Ok(done)
}

/// Powers the node off after the image is written (Ironic's `tear_down_agent`): out of band
/// after the agent flushed its writes when `deploy_forces_oob_reboot`, else by the agent, with
/// the power state watched and forced off when it does not go.
async fn tear_down_agent(node: &Node, ctx: &StepContext<'_>) -> Result<StepDone, DriverError> {
    let agent = AgentClient::for_node(node)?;
    let fail = |e: DriverError| {
        DriverError::Failed(format!(
            "Error rebooting node {} after deploy. {e}",
            node.uuid
        ))
    };
    let power = ctx.driver.power.as_ref();
    if node.disable_power_off {
        // A node that may not be powered off (API 1.95) is rebooted into its instance. Ironic
        // first locks the agent down (`system.lockdown`) and waits for it to go; Ferrum only
        // flushes its file systems, as Ironic does for a power interface that cannot power on:
        // the reboot ends the agent all the same.
        tracing::info!(node.uuid = %node.uuid,
            "Node {} does not support power off, rebooting it into the instance", node.uuid);
        if let Err(e) = agent.run("standby.sync", json!({})).await {
            tracing::warn!(node.uuid = %node.uuid,
                "Failed to flush the file system prior to rebooting the node {}: {e}", node.uuid);
        }
        power.reboot(node, POWER_TIMEOUT).await.map_err(fail)?;
        return Ok(StepDone {
            power: Some(PowerState::On),
            ..StepDone::done()
        });
    }
    if oob_reboot(node) {
        if let Err(e) = agent.run("standby.sync", json!({})).await {
            tracing::warn!(node.uuid = %node.uuid,
                "Failed to flush the file system prior to hard rebooting the node {}: {e}", node.uuid);
        }
    } else {
        if let Err(e) = agent.command("standby.power_off", json!({}), false).await {
            tracing::warn!(node.uuid = %node.uuid, "Failed to soft power off node {}. {e}", node.uuid);
        }
        let mut attempts = ctx.config.agent_power_off_retries + 1;
        loop {
            if matches!(power.get_power_state(node).await, Ok(PowerState::Off)) {
                return Ok(StepDone {
                    power: Some(PowerState::Off),
                    ..StepDone::done()
                });
            }
            attempts -= 1;
            if attempts == 0 {
                break;
            }
            tokio::time::sleep(ctx.config.agent_power_off_retry_interval).await;
        }
        tracing::warn!(node.uuid = %node.uuid,
            "Failed to soft power off node {} in time. Forcing hard power off and proceeding.", node.uuid);
    }
    power
        .set_power_state(node, PowerState::Off, POWER_TIMEOUT)
        .await
        .map_err(fail)?;
    Ok(StepDone {
        power: Some(PowerState::Off),
        ..StepDone::done()
    })
}

/// `driver_info.deploy_forces_oob_reboot`, read as oslo reads a boolean.
fn oob_reboot(node: &Node) -> bool {
    match node.driver_info.get("deploy_forces_oob_reboot") {
        Some(Value::Bool(b)) => *b,
        Some(Value::String(s)) => matches!(
            s.trim().to_ascii_lowercase().as_str(),
            "true" | "1" | "yes" | "on" | "t" | "y"
        ),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
    fn automated_cleaning_takes_the_agents_priorities_or_the_conductors() {
        let offered = json!({
            "GenericHardwareManager": [
                {"step": "erase_devices", "priority": 10, "interface": "deploy"},
                {"step": "erase_devices_metadata", "priority": 99, "interface": "deploy"},
                {"step": "apply_configuration", "priority": 0, "interface": "raid"},
            ],
            "SandboxHardwareManager": [{"step": "erase_devices", "priority": 10, "interface": "deploy"}],
        });
        let mut config = crate::config::ConductorConfig::default();
        let priorities = |config: &crate::config::ConductorConfig| {
            agent_clean_steps(&offered, config)
                .into_iter()
                .map(|s| (s.step, s.priority))
                .collect::<Vec<_>>()
        };
        assert_eq!(
            priorities(&config),
            [
                ("erase_devices".to_owned(), 10),
                ("erase_devices_metadata".to_owned(), 99),
                ("apply_configuration".to_owned(), 0)
            ]
        );
        config.erase_devices_priority = Some(0);
        config.erase_devices_metadata_priority = Some(5);
        assert_eq!(
            priorities(&config)[..2],
            [
                ("erase_devices".to_owned(), 0),
                ("erase_devices_metadata".to_owned(), 5)
            ]
        );
    }

    #[test]
    fn the_agent_gets_the_image_as_ironic_describes_it() {
        let mut node: Node = crate::node::tests_support::node();
        for (k, v) in [
            ("image_source", "http://127.0.0.1:8080/images/disk.raw"),
            ("image_os_hash_algo", "sha256"),
            ("image_os_hash_value", "feed"),
            ("image_disk_format", "raw"),
        ] {
            node.instance_info.insert(k.into(), json!(v));
        }
        let step = agent_write_image_step(&node, true, None).unwrap();
        let info = &step["args"]["image_info"];
        assert_eq!(info["id"], "disk.raw");
        assert_eq!(
            info["urls"],
            json!(["http://127.0.0.1:8080/images/disk.raw"])
        );
        assert_eq!(info["os_hash_algo"], "sha256");
        assert_eq!(info["os_hash_value"], "feed");
        assert_eq!(info["disk_format"], "raw");
        assert_eq!(info["stream_raw_images"], true);
        assert_eq!(info["image_type"], "whole-disk");
        assert_eq!(info["node_uuid"], json!(node.uuid));
        assert_eq!(step["priority"], 80);

        // The raw copy the conductor published replaces the image's URL, format and hash.
        let local = LocalImage {
            url: "http://10.0.0.1:8088/agent_images/n".to_owned(),
            sha256: "beef".to_owned(),
        };
        node.instance_info
            .insert("image_disk_format".into(), json!("qcow2"));
        node.instance_info
            .insert("image_checksum".into(), json!("c0ffee"));
        let step = agent_write_image_step(&node, true, Some(&local)).unwrap();
        let info = &step["args"]["image_info"];
        assert_eq!(info["urls"], json!([local.url]));
        assert_eq!(info["disk_format"], "raw");
        assert_eq!(info["os_hash_value"], "beef");
        assert!(info.get("checksum").is_none(), "{info}");
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
