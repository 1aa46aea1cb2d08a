//! Inspection (`inspect`): the fake inspect interface's, which completes at once, or the
//! `agent` one's (API 1.84; Ironic's `inspector/agent.py` and `conductor/inspection.py`):
//! inspecting boots the ramdisk and waits in `inspect wait`; the agent posts what it found to
//! `/v1/continue_inspection`, whose conductor takes the node (`inspect wait` -> `inspecting`),
//! runs the inspection hooks over the data, then the inspection rules of the `main` phase (API
//! 1.96, `inspection_rule::apply_rules`), stores the inventory (API 1.81) and finishes in
//! `manageable`, powering the node off, with the rules' changes to the node in the same write. A
//! hook or a rule that fails (a rule's `fail` action included), or the agent's own error, fails
//! the inspection with the reason in `last_error`; an agent that never posts is failed by
//! `inspect_wait_timeout` (`periodic.rs`). The ramdisk is booted as a deploy's is (the boot
//! interface's `prepare_ramdisk`: over the network, the node's ports' MACs and the kernel's
//! `ipa-inspection-callback-url`), and its boot undone however the inspection ends.

use std::time::Duration;

use serde_json::Value;
use tokio::time::Instant;

use super::{begin, ports_for_agent, power_off_or_reboot, start};
use crate::{
    conductor::{
        Ctx,
        task::Task,
        worker::{Failure, Flow, hw},
    },
    config::ConductorConfig,
    db,
    drivers::{
        BootDevice, Driver, StepContext,
        boot::{InspectionBoot, dhcp::Dhcp},
        require_interface,
    },
    error::{Error, Result},
    inspection_rule,
    node::{
        self, InterfaceKind, JsonObject, Node, NodeChanges, PowerState,
        inventory::{LOOKUP_BMC_ADDRESSES, NodeInventory},
    },
    ports::{Port, normalize_mac},
    states::{Event, ProvisionState},
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
/// ([`start_agent_inspection`]); the fake one has nothing to discover, so inspection completes at once.
async fn inspect(task: &mut Task, driver: &Driver) -> std::result::Result<(), String> {
    if in_band(&task.node) {
        return start_agent_inspection(task, driver).await;
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
/// `no-inspect` node is UnsupportedDriverExtension, never inspected; nor, with
/// `inspector_require_managed_boot`, is an in-band inspection whose boot the node's boot
/// interface cannot set up (`ports` are the node's, as [`super::ports_of`] reads them).
pub(crate) fn require_inspectable(
    node: &Node,
    driver: &Driver,
    ports: &[Value],
    config: &ConductorConfig,
) -> Result<()> {
    driver
        .power
        .validate(node)
        .map_err(|e| Error::InvalidParameterValue(e.to_string()))?;
    require_interface(node, InterfaceKind::Inspect)?;
    if in_band(node) {
        let boot = driver
            .boot
            .validate_inspection(node, ports)
            .map_err(|e| Error::InvalidParameterValue(e.to_string()))?;
        if let InspectionBoot::Unmanageable(why) = boot
            && config.inspector_require_managed_boot
        {
            return Err(Error::InvalidParameterValue(why));
        }
    }
    Ok(())
}

/// Drops the BMC addresses an inspection kept for the agent's lookup from what `changes` write
/// (Ironic's `clear_lookup_addresses`, when an inspection ends either way).
fn forget_lookup_addresses(node: &Node, changes: &mut NodeChanges) {
    if node
        .driver_internal_info
        .0
        .contains_key(LOOKUP_BMC_ADDRESSES)
    {
        changes
            .driver_internal_info
            .get_or_insert_with(|| node.driver_internal_info.clone())
            .0
            .remove(LOOKUP_BMC_ADDRESSES);
    }
}

/// The inspect interface that inspects through the ramdisk's agent.
pub const AGENT_INSPECT: &str = "agent";

/// Whether the node is inspected in band, by its ramdisk's agent (which needs a boot).
pub(crate) fn in_band(node: &Node) -> bool {
    node.interfaces.get(InterfaceKind::Inspect) == AGENT_INSPECT
}

/// The hooks Ferrum can run over inspection data, in order (described with the setting that
/// names them).
pub use crate::config::INSPECTION_HOOKS as HOOKS;

/// Boots the ramdisk for an agent inspection and waits for its data. Managed (Ironic's managed
/// inspection), the node's boot interface prepares its next boot (over the network: its ports'
/// MACs allowed in DHCP, the kernel told `ipa-inspection-callback-url`). Unmanaged, where the
/// boot interface cannot (no port to boot from) and `inspector_require_managed_boot` is off: the
/// node is only set to boot from the network once, the operator's DHCP and boot configuration
/// answer it (with `dnsmasq`, unknown MACs are allowed DHCP from now on:
/// [`sync_unknown_hosts`]), and the agent finds its node by the BMC address. Either way the BMC
/// addresses are kept for that lookup (Ironic's `cache_lookup_addresses`) and the node is
/// (re)started; a node that may not be powered off is rebooted.
pub async fn start_agent_inspection(
    task: &mut Task,
    driver: &Driver,
) -> std::result::Result<(), String> {
    let timeout = Duration::from_secs(60);
    let uuid = task.node.uuid.clone();
    let ports = ports_for_agent(task)
        .await
        .map_err(|e| format!("Failed to read the ports of node {uuid}: {e}"))?;
    let unable = |e: &dyn std::fmt::Display| {
        format!("Failed to inspect hardware. Reason: unable to start inspection: {e}")
    };
    let mut info = task.node.driver_internal_info.0.clone();
    info.insert(
        LOOKUP_BMC_ADDRESSES.to_owned(),
        lookup_addresses(&task.node).await.into(),
    );
    let boot = driver
        .boot
        .validate_inspection(&task.node, &ports)
        .map_err(|e| unable(&e))?;
    let managed = boot == InspectionBoot::Managed;
    match boot {
        InspectionBoot::Managed => {
            let context = StepContext {
                driver,
                ports: &ports,
                config: &task.ctx().config,
                inspection: true,
            };
            let prepared = hw(task, driver.boot.prepare_ramdisk(&task.node, &context)).await?;
            match prepared {
                Ok(remember) => info.extend(remember),
                Err(e) => {
                    undo_ramdisk(task, driver).await;
                    return Err(format!(
                        "Failed to inspect hardware. Reason: unable to boot the ramdisk: {e}"
                    ));
                }
            }
        }
        InspectionBoot::Unmanageable(why) if task.ctx().config.inspector_require_managed_boot => {
            return Err(unable(&why));
        }
        InspectionBoot::Unmanageable(why) => {
            tracing::info!(node.uuid = %uuid, reason = %why, "Inspecting node {uuid} unmanaged: its boot is the operator's network boot");
            if let Err(e) = sync_unknown_hosts(task.ctx()).await {
                tracing::warn!(node.uuid = %uuid, error = %e, "Could not allow unknown MACs DHCP for the unmanaged inspection of node {uuid}");
            }
            if !task.node.disable_power_off {
                hw(
                    task,
                    driver
                        .power
                        .set_power_state(&task.node, PowerState::Off, timeout),
                )
                .await?
                .map_err(|e| unable(&e))?;
            }
            let remember = hw(
                task,
                driver
                    .management
                    .set_boot_device(&task.node, BootDevice::Pxe, false),
            )
            .await?
            .map_err(|e| unable(&e))?;
            info.extend(remember);
        }
    }
    // The power-on reads what setting the boot device recorded (a device kept to set again
    // before each power-on must not undo the one-time network boot just set).
    let mut booting = task.node.clone();
    booting.driver_internal_info = node::Json(info.clone());
    let power = driver.power.get_power_state(&booting).await;
    let booted = if matches!(power, Ok(PowerState::On)) || booting.disable_power_off {
        hw(task, driver.power.reboot(&booting, timeout)).await?
    } else {
        hw(
            task,
            driver
                .power
                .set_power_state(&booting, PowerState::On, timeout),
        )
        .await?
    };
    if let Err(e) = booted {
        if managed {
            undo_ramdisk(task, driver).await;
        }
        return Err(unable(&e));
    }
    let mut changes = NodeChanges::default().power(Some(PowerState::On), None);
    changes.driver_internal_info = Some(node::Json(info));
    task.process_event(Event::Wait, false, changes.release())
        .await
        .map_err(|e| format!("Failed to wait for the inspection data: {e}"))
}

/// How long a BMC's host name may take to resolve for the lookup by BMC address.
const RESOLVE_TIMEOUT: Duration = Duration::from_secs(5);

/// The addresses of the node's BMC an agent may report as its `bmc_address`: every
/// `driver_info` `*_address` (a URL's host), with the IPs a name resolves to, loopback left out
/// (a BMC the conductor reaches on loopback is not an address the machine reports). Ironic's
/// `_get_bmc_addresses`.
async fn lookup_addresses(node: &Node) -> Vec<String> {
    let mut found: Vec<String> = Vec::new();
    for (key, value) in node.driver_info.iter() {
        let Some(address) = value.as_str().filter(|_| key.ends_with("_address")) else {
            continue;
        };
        let host = match reqwest::Url::parse(address) {
            Ok(url) if address.contains("//") => url.host_str().unwrap_or_default().to_owned(),
            _ => address.to_owned(),
        };
        let host = host
            .trim_start_matches('[')
            .trim_end_matches(']')
            .to_owned();
        if host.is_empty() || host.eq_ignore_ascii_case("localhost") {
            continue;
        }
        let ips: Vec<std::net::IpAddr> = match host.parse::<std::net::IpAddr>() {
            Ok(ip) => vec![ip],
            // The node is locked meanwhile: a resolver that does not answer is given up on.
            Err(_) => match tokio::time::timeout(
                RESOLVE_TIMEOUT,
                tokio::net::lookup_host((host.as_str(), 0)),
            )
            .await
            {
                Ok(Ok(addrs)) => {
                    if !found.contains(&host) {
                        found.push(host.clone());
                    }
                    addrs.map(|a| a.ip()).collect()
                }
                Ok(Err(e)) => {
                    tracing::warn!(node.uuid = %node.uuid, error = %e, "Failed to resolve the host name ({host}) in {key} of node {}", node.uuid);
                    Vec::new()
                }
                Err(_) => {
                    tracing::warn!(node.uuid = %node.uuid, "The host name ({host}) in {key} of node {} was not resolved within {RESOLVE_TIMEOUT:?}", node.uuid);
                    Vec::new()
                }
            },
        };
        for ip in ips.into_iter().filter(|ip| !ip.is_loopback()) {
            let ip = ip.to_string();
            if !found.contains(&ip) {
                found.push(ip);
            }
        }
    }
    found
}

/// After an inspection ended: unknown MACs are answered no more unless another node is being
/// inspected ([`sync_unknown_hosts`]; a failure is only logged, the periodic sync retries).
async fn close_unknown_hosts(task: &Task) {
    if let Err(e) = sync_unknown_hosts(task.ctx()).await {
        tracing::warn!(node.uuid = %task.node.uuid, error = %e, "Could not update unknown MACs' DHCP after the inspection of node {}", task.node.uuid);
    }
}

/// Undoes a ramdisk boot prepared for an inspection that then failed to start: its boot files
/// and DHCP allowance go with it (the failure moves the node to `inspect failed` with no flow
/// after it). Best effort: the start's own error is the one the node shows.
async fn undo_ramdisk(task: &Task, driver: &Driver) {
    let uuid = &task.node.uuid;
    if let Ok(Err(e)) = hw(task, driver.boot.clean_up_ramdisk(&task.node, driver)).await {
        tracing::warn!(node.uuid = %uuid, error = %e, "Failed to undo the ramdisk's boot of node {uuid}'s inspection that did not start");
    }
}

/// Lets dnsmasq answer unknown MACs exactly while some node is being inspected in band (`inspect
/// wait` or `inspecting`, `agent`), as Ironic's PXE filter does for the unmanaged inspection's
/// DHCP: on each unmanaged start, when an inspection ends, and every
/// `check_provision_state_interval` (`periodic.rs`), which also covers an inspection whose
/// conductor died. Every conductor gives the same answer; with the `none` provider there is
/// nothing to write.
pub async fn sync_unknown_hosts(ctx: &Ctx) -> Result<()> {
    // One read and write at a time in this process, so that a late answer read before an
    // inspection started never overwrites that inspection's.
    static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());
    let dhcp = Dhcp::of(&ctx.config);
    if dhcp == Dhcp::None {
        return Ok(());
    }
    let _one = ONE_AT_A_TIME.lock().await;
    let inspecting = db::nodes::any_inspecting(
        &ctx.db,
        [ProvisionState::InspectWait, ProvisionState::Inspecting],
        AGENT_INSPECT,
    )
    .await?;
    dhcp.allow_unknown(inspecting)
        .await
        .map_err(|e| e.into_error("dnsmasq"))
}

/// The ramdisk is done, however the inspection ended: its boot is undone (boot files and DHCP
/// allowance withdrawn, a virtual-media ISO ejected) and the node powered off (rebooted if it
/// may not be), as Ironic's `clean_up(always_power_off=True)`. Returns the power state.
async fn end_ramdisk(task: &Task, driver: &Driver) -> std::result::Result<PowerState, String> {
    let uuid = task.node.uuid.clone();
    let power = power_off_or_reboot(task, driver)
        .await
        .map_err(|e| format!("Failed to power off the node after inspection: {e}"))?;
    if let Ok(Err(e)) = hw(task, driver.boot.clean_up_ramdisk(&task.node, driver)).await {
        tracing::warn!(node.uuid = %uuid, error = %e, "Failed to undo the ramdisk's boot after the inspection of node {uuid}");
    }
    Ok(power)
}

/// An inspection failed while the agent was awaited (its timeout, or the agent's own error):
/// the ramdisk's boot is undone and the node powered off ([`end_ramdisk`]).
pub(super) struct InspectFailed;

#[async_trait::async_trait]
impl Flow for InspectFailed {
    fn name(&self) -> &'static str {
        "Cleaning up after a failed inspection"
    }

    async fn run(&self, task: &mut Task, driver: &Driver) -> std::result::Result<(), String> {
        let uuid = task.node.uuid.clone();
        match end_ramdisk(task, driver).await {
            Ok(power) => {
                let mut changes = NodeChanges::default().power(Some(power), None);
                forget_lookup_addresses(&task.node, &mut changes);
                if let Err(e) = task.write(changes.release()).await {
                    tracing::warn!(node.uuid = %uuid, error = %e, "Failed to record the power-off after the failed inspection of node {uuid}");
                }
            }
            Err(e) => {
                tracing::error!(node.uuid = %uuid, error = %e, "Node {uuid} failed to power off after its failed inspection")
            }
        }
        close_unknown_hosts(task).await;
        Ok(())
    }

    /// Only a panic gets here: the inspection's error stays the one the operator sees.
    fn failure(&self, _: &Node, _: &str) -> Failure {
        Failure::default()
    }
}

/// `continue_inspection` RPC: the node must still be in `inspect wait` with the agent inspect
/// interface (Ironic answers NotFound otherwise, disclosing nothing); it moves to `inspecting`
/// under its lock and a worker processes the data after the reply.
pub async fn continue_inspection(
    ctx: &Ctx,
    node: Node,
    inventory: JsonObject,
    plugin_data: JsonObject,
    deadline: Option<Instant>,
) -> Result<()> {
    let check = |node: &Node, _: &Driver| {
        if node.provision_state != ProvisionState::InspectWait {
            tracing::error!(node.uuid = %node.uuid, state = %node.provision_state,
                "Refusing to process inspection data for node {} in invalid state {}",
                node.uuid, node.provision_state);
            return Err(Error::NotFound("Resource could not be found.".to_owned()));
        }
        if !in_band(node) {
            return Err(Error::UnsupportedDriverExtension {
                driver: node.driver.clone(),
                extension: "inspect (processing inspection data)".to_owned(),
            });
        }
        Ok(NodeChanges::default())
    };
    let Some((task, _, worker)) = begin(
        ctx,
        node,
        deadline,
        "continue inspection",
        Event::Resume,
        check,
    )
    .await?
    else {
        return Err(Error::internal(
            "continuing an inspection reserved no worker",
        ));
    };
    // The move into `inspecting` names the inspection's own work; this flow carries the data
    // the agent sent, which that work does not have.
    worker.run(
        task,
        InspectionData {
            inventory,
            plugin_data,
        },
    )
}

/// Fails an inspection whose wait in `inspect wait` has outlasted `inspect_wait_timeout`
/// (Ironic's `_check_inspect_wait_timeouts`), provided it still waits as read.
pub async fn fail_timed_out_inspection(ctx: &Ctx, node: Node) -> Result<()> {
    let waited_since = node.provision_updated_at;
    let message = format!(
        "Timeout reached while inspecting the node: no inspection data from the agent of node {} in {} s.",
        node.uuid,
        ctx.config.inspect_wait_timeout.as_secs()
    );
    start(ctx, node, None, "fail", Event::Fail, move |node, _| {
        if node.provision_state != ProvisionState::InspectWait
            || node.provision_updated_at != waited_since
        {
            return Err(Error::Conflict(format!(
                "The inspection of node {} has moved on already.",
                node.uuid
            )));
        }
        Ok(NodeChanges::default().last_error(Some(message.clone())))
    })
    .await
}

/// The worker half of `continue_inspection`.
struct InspectionData {
    inventory: JsonObject,
    plugin_data: JsonObject,
}

#[async_trait::async_trait]
impl Flow for InspectionData {
    fn name(&self) -> &'static str {
        "Inspection"
    }

    async fn run(&self, task: &mut Task, driver: &Driver) -> std::result::Result<(), String> {
        let processed = self.process(task, driver).await;
        if processed.is_err() {
            // The failure is the one the node shows; the ramdisk goes all the same.
            let _ = end_ramdisk(task, driver).await;
        }
        processed
    }

    fn failure(&self, _: &Node, _: &str) -> Failure {
        Failure {
            extra: NodeChanges::default(),
            fail_edge: true,
        }
    }
}

impl InspectionData {
    async fn process(&self, task: &mut Task, driver: &Driver) -> std::result::Result<(), String> {
        let hooks = &task.ctx().config.inspection_hooks;
        let mut plugin_data = self.plugin_data.clone();
        let found =
            run_hooks(hooks, &task.node, &self.inventory, &mut plugin_data).map_err(|e| {
                format!("Failed to inspect hardware. Reason: failed to run inspection hooks: {e}")
            })?;
        for mac in &found.new_ports {
            add_port(task, mac, found.pxe_mac.as_deref()).await?;
        }
        // The inspection rules of the `main` phase run over the node as the hooks left it.
        let mut inspected = task.node.clone();
        if let Some(arch) = found.cpu_arch {
            inspected
                .properties
                .0
                .insert("cpu_arch".to_owned(), Value::String(arch));
        }
        let rules = db::inspection_rules::for_phase(&task.ctx().db, "main")
            .await
            .map_err(|e| format!("Failed to finish inspection: {e}"))?;
        let mut changes =
            inspection_rule::apply_rules(&rules, &inspected, &self.inventory, &mut plugin_data)
                .map_err(|e| format!("Failed to finish inspection: {e}"))?;
        if changes.properties.is_none() && inspected.properties != task.node.properties {
            changes.properties = Some(inspected.properties.clone());
        }
        // Logs can be large and are not inventory; Ironic keeps them apart (or drops them).
        plugin_data.remove("logs");
        let record = NodeInventory::new(task.node.id, self.inventory.clone(), plugin_data);
        db::inventory::store(&task.ctx().db, &record)
            .await
            .map_err(|e| format!("Failed to store the inspection data: {e}"))?;
        let power = end_ramdisk(task, driver).await?;
        let mut changes = changes.power(Some(power), None);
        changes.inspection_finished_at = Some(Some(node::now()));
        forget_lookup_addresses(&task.node, &mut changes);
        tracing::info!(node.uuid = %task.node.uuid, "Successfully finished inspection of node {}", task.node.uuid);
        task.process_event(Event::Done, false, changes.release())
            .await
            .map_err(|e| format!("Failed to finish inspection: {e}"))?;
        close_unknown_hosts(task).await;
        Ok(())
    }
}

/// Adds a port of the node for `mac` (PXE-enabled if it is the interface the node booted
/// from); one that exists already is kept, as Ironic's `ports` hook keeps it.
async fn add_port(
    task: &Task,
    mac: &str,
    pxe_mac: Option<&str>,
) -> std::result::Result<(), String> {
    let port = Port {
        address: mac.to_owned(),
        node_uuid: task.node.uuid.clone(),
        pxe_enabled: pxe_mac.is_none_or(|pxe| pxe == mac),
        ..Port::template()
    };
    match db::ports::insert_port(&task.ctx().db, &port).await {
        Ok(_) => {
            tracing::info!(node.uuid = %task.node.uuid, "Port created for MAC address {mac} for node {}", task.node.uuid);
            Ok(())
        }
        Err(Error::Conflict(_)) => {
            tracing::info!(node.uuid = %task.node.uuid, "Port already exists for MAC address {mac} for node {}", task.node.uuid);
            Ok(())
        }
        Err(e) => Err(format!(
            "Failed to create a port for MAC address {mac}: {e}"
        )),
    }
}

/// What the hooks found that the node keeps.
#[derive(Debug, Default, PartialEq)]
struct Found {
    /// The MACs to have ports for (the `ports` hook).
    new_ports: Vec<String>,
    /// The MAC the node booted the ramdisk from, when the agent names it.
    pxe_mac: Option<String>,
    /// `properties.cpu_arch` (the `architecture` hook).
    cpu_arch: Option<String>,
}

/// Runs the named hooks in order over the data (Ironic's `run_inspection_hooks`); the hook
/// names were checked when the configuration was read.
fn run_hooks(
    hooks: &[String],
    node: &Node,
    inventory: &JsonObject,
    plugin_data: &mut JsonObject,
) -> std::result::Result<Found, String> {
    let mut found = Found::default();
    let mut valid: Option<Vec<String>> = None;
    for hook in hooks.iter().map(|h| h.trim()).filter(|h| !h.is_empty()) {
        match hook {
            "ramdisk-error" => {
                if let Some(error) = plugin_data.get("error").filter(|e| is_set(e)) {
                    let error = error
                        .as_str()
                        .map_or_else(|| error.to_string(), str::to_owned);
                    return Err(format!("Ramdisk reported error: {error}"));
                }
            }
            "validate-interfaces" => {
                let (macs, pxe_mac) = valid_interfaces(node, inventory)?;
                plugin_data.insert("macs".to_owned(), Value::from(macs.clone()));
                found.pxe_mac = pxe_mac;
                valid = Some(macs);
            }
            "ports" => {
                let Some(macs) = &valid else {
                    return Err(
                        "the ports hook needs the validate-interfaces hook before it".to_owned(),
                    );
                };
                found.new_ports = macs.clone();
            }
            "architecture" => {
                let arch = inventory
                    .get("cpu")
                    .and_then(|cpu| cpu.get("architecture"))
                    .and_then(Value::as_str)
                    .filter(|a| !a.is_empty());
                let Some(arch) = arch else {
                    return Err(format!(
                        "Inventory has malformed or missing CPU architecture information: {} for node {}.",
                        inventory.get("cpu").unwrap_or(&Value::Null),
                        node.uuid
                    ));
                };
                found.cpu_arch = Some(arch.to_owned());
            }
            other => return Err(format!("unknown inspection hook {other}")),
        }
    }
    Ok(found)
}

fn is_set(value: &Value) -> bool {
    !(value.is_null() || value.as_str() == Some("") || value == &Value::Bool(false))
}

/// The inventory's interfaces a port may be made for, by MAC (Ironic's `validate_interfaces`
/// with `add_ports = pxe`): a name and a valid MAC, not loopback (by name or address), and,
/// when the agent names the interface it booted from, only that one; and that MAC.
fn valid_interfaces(
    node: &Node,
    inventory: &JsonObject,
) -> std::result::Result<(Vec<String>, Option<String>), String> {
    let invalid = |reason: &str| format!("Inventory of node {} is invalid: {reason}", node.uuid);
    let pxe_mac = inventory
        .get("boot")
        .and_then(|b| b.get("pxe_interface"))
        .and_then(Value::as_str)
        .map(pxelinux_mac)
        .and_then(|mac| normalize_mac(&mac).ok());
    let Some(interfaces) = inventory.get("interfaces").and_then(Value::as_array) else {
        return Err(invalid("no interfaces present in inventory"));
    };
    let usable: Vec<(&str, String, Option<&str>)> = interfaces
        .iter()
        .filter_map(|iface| {
            let name = iface
                .get("name")
                .and_then(Value::as_str)
                .filter(|n| !n.is_empty())?;
            let mac = normalize_mac(iface.get("mac_address")?.as_str()?).ok()?;
            let ip = ["ipv4_address", "ipv6_address"].iter().find_map(|k| {
                iface
                    .get(*k)
                    .and_then(Value::as_str)
                    .filter(|ip| !ip.is_empty())
            });
            Some((name, mac, ip))
        })
        .collect();
    if usable.is_empty() {
        return Err(invalid("no valid network interfaces"));
    }
    let macs: Vec<String> = usable
        .into_iter()
        .filter(|(name, _, ip)| *name != "lo" && !ip.is_some_and(is_loopback))
        .filter(|(_, mac, _)| pxe_mac.as_ref().is_none_or(|pxe| pxe == mac))
        .map(|(_, mac, _)| mac)
        .collect();
    if macs.is_empty() {
        return Err(invalid(
            "no network interfaces match the configuration (add_ports set to \"pxe\")",
        ));
    }
    Ok((macs, pxe_mac))
}

/// A MAC in pxelinux's form (`01-aa-bb-cc-dd-ee-ff`) as a MAC.
fn pxelinux_mac(mac: &str) -> String {
    match mac.split_once('-') {
        Some((_, rest)) if mac.contains('-') => rest.replace('-', ":"),
        _ => mac.to_owned(),
    }
}

fn is_loopback(ip: &str) -> bool {
    let ip = ip.split('%').next().unwrap_or(ip);
    ip.parse::<std::net::IpAddr>()
        .is_ok_and(|ip| ip.is_loopback())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn hooks() -> Vec<String> {
        HOOKS.iter().map(|h| (*h).to_owned()).collect()
    }

    fn inventory(value: Value) -> JsonObject {
        value.as_object().unwrap().clone()
    }

    #[tokio::test]
    async fn the_lookup_addresses_are_the_bmc_hosts_without_loopback() {
        let mut node = node::tests_support::node();
        node.driver_info = node::Json(inventory(json!({
            "redfish_address": "https://[fd00::7]:8443",
            "ipmi_address": "198.51.100.20",
            "console_address": "127.0.0.1",
            "other_address": "localhost",
            "snmp_address": "http://127.0.0.1:8000/x",
            "number_address": 5,
            "deploy_kernel": "http://198.51.100.9/k",
        })));
        let mut found = lookup_addresses(&node).await;
        found.sort();
        assert_eq!(found, ["198.51.100.20", "fd00::7"]);
    }

    #[test]
    fn the_default_hooks_keep_the_pxe_interface_and_the_architecture() {
        let node = node::tests_support::node();
        let inv = inventory(json!({
            "interfaces": [
                {"name": "lo", "mac_address": "00:00:00:00:00:01", "ipv4_address": "127.0.0.1"},
                {"name": "eth0", "mac_address": "52:54:00:AA:BB:01", "ipv4_address": "10.0.0.5"},
                {"name": "eth1", "mac_address": "52:54:00:aa:bb:02", "ipv4_address": "10.0.1.5"},
                {"name": "eth2", "mac_address": "nonsense"},
            ],
            "boot": {"pxe_interface": "01-52-54-00-aa-bb-01"},
            "cpu": {"architecture": "x86_64"},
        }));
        let mut data = JsonObject::new();
        let found = run_hooks(&hooks(), &node, &inv, &mut data).unwrap();
        assert_eq!(found.new_ports, ["52:54:00:aa:bb:01"]);
        assert_eq!(found.pxe_mac.as_deref(), Some("52:54:00:aa:bb:01"));
        assert_eq!(found.cpu_arch.as_deref(), Some("x86_64"));
        assert_eq!(data["macs"], json!(["52:54:00:aa:bb:01"]));
    }

    #[test]
    fn the_hooks_fail_as_ironics_do() {
        let node = node::tests_support::node();
        let loopback_only = inventory(json!({
            "interfaces": [{"name": "sandbox0", "mac_address": "52:54:00:aa:bb:01", "ipv4_address": "127.0.0.1"}],
            "cpu": {"architecture": "x86_64"},
        }));
        let err = run_hooks(&hooks(), &node, &loopback_only, &mut JsonObject::new()).unwrap_err();
        assert!(
            err.contains("no network interfaces match the configuration"),
            "{err}"
        );
        let mut error = inventory(json!({"error": "lshw failed"}));
        let err = run_hooks(&hooks(), &node, &loopback_only, &mut error).unwrap_err();
        assert_eq!(err, "Ramdisk reported error: lshw failed");
        let no_arch =
            inventory(json!({"interfaces": [{"name": "e", "mac_address": "52:54:00:aa:bb:01"}]}));
        let err = run_hooks(&hooks(), &node, &no_arch, &mut JsonObject::new()).unwrap_err();
        assert!(
            err.starts_with("Inventory has malformed or missing CPU architecture"),
            "{err}"
        );
        let only_arch = ["ramdisk-error".to_owned(), "architecture".to_owned()];
        let found = run_hooks(&only_arch, &node, &loopback_only, &mut JsonObject::new()).unwrap();
        assert_eq!(
            (found.new_ports.len(), found.cpu_arch.as_deref()),
            (0, Some("x86_64"))
        );
    }
}
