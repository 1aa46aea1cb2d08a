//! Conductor RPC: the wire types, their versioned MessagePack envelope, the client the API uses,
//! and the [`transport::Transport`] seam with its AMQP implementation.
//!
//! The API only ever *calls* (request/reply); long work continues in the conductor after it has
//! replied, as in Ironic. This module knows message shapes and queue names, not what a deploy is.

pub mod amqp;
pub mod local;
pub mod topology;
pub mod transport;

use std::{sync::Arc, time::Duration};

use serde::{Deserialize, Serialize};
use serde_json::Value;

use self::transport::{Transport, TransportError};
use crate::{
    allocation::Allocation,
    drivers::{BootDevice, BootDeviceSetting, IndicatorState, Indicators},
    error::Error,
    node::{JsonObject, Node, PowerTarget, Verb},
    patch::PatchOp,
    ports::{Port, Portgroup},
    states::ProvisionState,
    volume::{VolumeConnector, VolumeTarget},
};

/// Bumped when a change to the wire types is not backwards compatible. A conductor refuses an
/// envelope of a newer version with a clear error instead of misreading it.
pub const WIRE_VERSION: u16 = 1;

/// What travels: the request plus what every request carries.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Envelope {
    pub version: u16,
    /// The API's request id (`req-<uuid>`), carried into the conductor's logs.
    pub request_id: String,
    /// How long the conductor may take, in milliseconds ([`conductor_budget`]: a little less than
    /// the caller waits); 0 for no limit. A request that waited too long in the broker's queue
    /// expires there.
    pub timeout_ms: u64,
    /// When the caller sent it: milliseconds since the Unix epoch by the caller's clock; 0 from a
    /// sender that does not say. The conductor takes the time the request waited before it was
    /// read (in its socket while the process was paused, say) off `timeout_ms`, so a request read
    /// after its caller gave up is not applied (`conductor::task::deadline_after`).
    #[serde(default)]
    pub sent_at_ms: u64,
    pub request: RpcRequest,
}

/// Every conductor method, matched exhaustively in the conductor's dispatch.
///
/// Requests about an existing node carry the node as the API read it. The conductor decides on it
/// and writes only if the row is still that version, so a fresh read is spared in the common case
/// and a stale one is caught (see `conductor::task::change_node`).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub enum RpcRequest {
    CreateNode {
        node: Box<NodeCreate>,
    },
    UpdateNode {
        node: Box<Node>,
        patch: Vec<PatchOp>,
        /// `?reset_interfaces=true` (1.45): interfaces the patch does not set go back to the new
        /// driver's defaults.
        #[serde(default)]
        reset_interfaces: bool,
    },
    DestroyNode {
        node: Box<Node>,
    },
    DoNodeDeploy {
        node: Box<Node>,
        rebuild: bool,
        configdrive: Option<Value>,
        /// The request's own deploy steps (API 1.69), checked against the schema by the API.
        #[serde(default)]
        deploy_steps: Vec<crate::steps::DeployStep>,
    },
    DoNodeTearDown {
        node: Box<Node>,
    },
    /// Manual cleaning with steps (the `clean` verb).
    DoNodeClean {
        node: Box<Node>,
        clean_steps: Vec<Value>,
        /// Clean without booting the ramdisk (API 1.70).
        #[serde(default)]
        disable_ramdisk: bool,
    },
    /// Servicing a deployed node with steps (the `service` verb, API 1.87).
    DoNodeService {
        node: Box<Node>,
        service_steps: Vec<Value>,
        /// Service without booting the ramdisk (API 1.108).
        #[serde(default)]
        disable_ramdisk: bool,
    },
    DoNodeRescue {
        node: Box<Node>,
        rescue_password: String,
    },
    DoNodeUnrescue {
        node: Box<Node>,
    },
    /// Adds `traits` to the node's, or with `replace` makes them the node's only ones.
    AddNodeTraits {
        node: Box<Node>,
        traits: Vec<String>,
        replace: bool,
    },
    /// Removes `traits` from the node, or all of them when None.
    RemoveNodeTraits {
        node: Box<Node>,
        traits: Option<Vec<String>>,
    },
    /// manage, provide, inspect, adopt, abort.
    DoProvisioningAction {
        node: Box<Node>,
        action: Verb,
    },
    ChangeNodePowerState {
        node: Box<Node>,
        new_state: PowerTarget,
        timeout: Option<u32>,
    },
    /// PUT (with a reason) and DELETE /v1/nodes/{id}/maintenance.
    SetMaintenance {
        node: Box<Node>,
        maintenance: bool,
        reason: Option<String>,
    },
    ValidateDriverInterfaces {
        node: Box<Node>,
    },
    /// PUT /v1/nodes/{id}/states/console.
    SetConsoleMode {
        node: Box<Node>,
        enabled: bool,
    },
    /// GET /v1/nodes/{id}/management/boot_device/supported.
    GetSupportedBootDevices {
        node: Box<Node>,
    },
    /// GET /v1/nodes/{id}/management/boot_device.
    GetBootDevice {
        node: Box<Node>,
    },
    /// PUT /v1/nodes/{id}/management/boot_device.
    SetBootDevice {
        node: Box<Node>,
        device: BootDevice,
        persistent: bool,
    },
    /// PUT /v1/nodes/{id}/management/inject_nmi (1.29).
    InjectNmi {
        node: Box<Node>,
    },
    /// /v1/nodes/{id}/vendor_passthru?method=: the HTTP method as the client used it, the
    /// body as its arguments.
    VendorPassthru {
        node: Box<Node>,
        method: String,
        http_method: String,
        args: JsonObject,
    },
    GetNodeVendorPassthruMethods {
        node: Box<Node>,
    },
    /// /v1/drivers/{name}/vendor_passthru?method=: no node; any conductor offering the driver.
    DriverVendorPassthru {
        driver: String,
        method: String,
        http_method: String,
        args: JsonObject,
    },
    GetDriverVendorPassthruMethods {
        driver: String,
    },
    /// PUT /v1/nodes/{id}/states/raid: the target RAID configuration (`{}` clears it).
    SetTargetRaidConfig {
        node: Box<Node>,
        target_raid_config: JsonObject,
    },
    /// A change of the node's ports, portgroups or VIFs.
    ChangePorts {
        node: Box<Node>,
        change: PortsChange,
    },
    /// POST /v1/heartbeat/{node}: the deploy ramdisk's agent reports in.
    Heartbeat {
        node: Box<Node>,
        heartbeat: Heartbeat,
    },
    /// POST /v1/continue_inspection: what the agent of a node in `inspect wait` found.
    ContinueInspection {
        node: Box<Node>,
        inventory: crate::node::JsonObject,
        plugin_data: crate::node::JsonObject,
    },
    /// GET /v1/lookup from 1.62: the node with its agent token, made on the first lookup.
    GetNodeWithToken {
        node: Box<Node>,
    },
    /// An update or delete of one of the node's volume connectors or targets.
    ChangeVolume {
        node: Box<Node>,
        change: VolumeChange,
    },
    /// POST /v1/allocations (1.52): create and process an allocation; with `node` (1.58), a
    /// backfill for that deployed node, sent to the node's conductor.
    CreateAllocation {
        allocation: Box<Allocation>,
        node: Option<Box<Node>>,
    },
    /// DELETE of an allocation: frees its node (as the API read it), then deletes it.
    DestroyAllocation {
        allocation: Box<Allocation>,
        node: Option<Box<Node>>,
    },
    /// GET /v1/nodes/{id}/management/indicators (1.63).
    GetSupportedIndicators {
        node: Box<Node>,
    },
    /// GET /v1/nodes/{id}/management/indicators/{indicator}@{component} (1.63).
    GetIndicatorState {
        node: Box<Node>,
        component: String,
        indicator: String,
    },
    /// PUT /v1/nodes/{id}/management/indicators/{indicator}@{component} (1.63).
    SetIndicatorState {
        node: Box<Node>,
        component: String,
        indicator: String,
        state: IndicatorState,
    },
    /// PUT .../states/boot_mode or .../states/secure_boot (1.76).
    ChangeBootSetting {
        node: Box<Node>,
        setting: crate::node::management::BootSetting,
    },
    /// POST /v1/nodes/{id}/vmedia (1.89). `image_download_source` is as the client gave it
    /// (Ironic's default `local`); the drivers Ferrum has hand the URL to the BMC as it is.
    AttachVirtualMedia {
        node: Box<Node>,
        device_type: BootDevice,
        image_url: String,
        image_download_source: String,
    },
    /// DELETE /v1/nodes/{id}/vmedia (1.89): the devices named, or all.
    DetachVirtualMedia {
        node: Box<Node>,
        device_types: Option<Vec<BootDevice>>,
    },
    /// GET /v1/nodes/{id}/vmedia (1.93).
    GetVirtualMedia {
        node: Box<Node>,
    },
}

/// What [`RpcRequest::ChangeVolume`] asks (Ironic's `update_volume_connector`,
/// `destroy_volume_connector` and the target ones); a patch is as the client sent it. A create
/// is not here: the API writes it, as Ironic's does.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub enum VolumeChange {
    UpdateConnector { uuid: String, patch: Vec<PatchOp> },
    DestroyConnector { uuid: String },
    UpdateTarget { uuid: String, patch: Vec<PatchOp> },
    DestroyTarget { uuid: String },
}

/// What [`RpcRequest::ChangePorts`] asks of a node's ports and portgroups. Fields and patches are
/// as the client sent them (the API checked their names and versions); the conductor reads and
/// validates the values, as it does a node's.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub enum PortsChange {
    CreatePort {
        fields: JsonObject,
    },
    UpdatePort {
        uuid: String,
        patch: Vec<PatchOp>,
    },
    DestroyPort {
        uuid: String,
    },
    CreatePortgroup {
        fields: JsonObject,
    },
    UpdatePortgroup {
        uuid: String,
        patch: Vec<PatchOp>,
    },
    DestroyPortgroup {
        uuid: String,
    },
    /// POST /v1/nodes/{id}/vifs: `vif_info` has the VIF's `id`, and from 1.67 optionally the
    /// `port_uuid` or `portgroup_uuid` to attach it to.
    AttachVif {
        vif_info: JsonObject,
    },
    DetachVif {
        vif_id: String,
    },
}

impl RpcRequest {
    pub fn method(&self) -> &'static str {
        match self {
            RpcRequest::CreateNode { .. } => "create_node",
            RpcRequest::UpdateNode { .. } => "update_node",
            RpcRequest::DestroyNode { .. } => "destroy_node",
            RpcRequest::DoNodeDeploy { .. } => "do_node_deploy",
            RpcRequest::DoNodeTearDown { .. } => "do_node_tear_down",
            RpcRequest::DoNodeClean { .. } => "do_node_clean",
            RpcRequest::DoNodeService { .. } => "do_node_service",
            RpcRequest::AddNodeTraits { .. } => "add_node_traits",
            RpcRequest::RemoveNodeTraits { .. } => "remove_node_traits",
            RpcRequest::DoNodeRescue { .. } => "do_node_rescue",
            RpcRequest::DoNodeUnrescue { .. } => "do_node_unrescue",
            RpcRequest::DoProvisioningAction { .. } => "do_provisioning_action",
            RpcRequest::ChangeNodePowerState { .. } => "change_node_power_state",
            RpcRequest::SetMaintenance { .. } => "set_maintenance",
            RpcRequest::ValidateDriverInterfaces { .. } => "validate_driver_interfaces",
            RpcRequest::SetConsoleMode { .. } => "set_console_mode",
            RpcRequest::SetTargetRaidConfig { .. } => "set_target_raid_config",
            RpcRequest::ChangePorts { change, .. } => match change {
                PortsChange::CreatePort { .. } => "create_port",
                PortsChange::UpdatePort { .. } => "update_port",
                PortsChange::DestroyPort { .. } => "destroy_port",
                PortsChange::CreatePortgroup { .. } => "create_portgroup",
                PortsChange::UpdatePortgroup { .. } => "update_portgroup",
                PortsChange::DestroyPortgroup { .. } => "destroy_portgroup",
                PortsChange::AttachVif { .. } => "vif_attach",
                PortsChange::DetachVif { .. } => "vif_detach",
            },
            RpcRequest::ChangeVolume { change, .. } => match change {
                VolumeChange::UpdateConnector { .. } => "update_volume_connector",
                VolumeChange::DestroyConnector { .. } => "destroy_volume_connector",
                VolumeChange::UpdateTarget { .. } => "update_volume_target",
                VolumeChange::DestroyTarget { .. } => "destroy_volume_target",
            },
            RpcRequest::GetSupportedBootDevices { .. } => "get_supported_boot_devices",
            RpcRequest::GetBootDevice { .. } => "get_boot_device",
            RpcRequest::SetBootDevice { .. } => "set_boot_device",
            RpcRequest::InjectNmi { .. } => "inject_nmi",
            RpcRequest::VendorPassthru { .. } => "vendor_passthru",
            RpcRequest::GetNodeVendorPassthruMethods { .. } => "get_node_vendor_passthru_methods",
            RpcRequest::DriverVendorPassthru { .. } => "driver_vendor_passthru",
            RpcRequest::GetDriverVendorPassthruMethods { .. } => {
                "get_driver_vendor_passthru_methods"
            }
            RpcRequest::Heartbeat { .. } => "heartbeat",
            RpcRequest::ContinueInspection { .. } => "continue_inspection",
            RpcRequest::GetNodeWithToken { .. } => "get_node_with_token",
            RpcRequest::CreateAllocation { .. } => "create_allocation",
            RpcRequest::DestroyAllocation { .. } => "destroy_allocation",
            RpcRequest::GetSupportedIndicators { .. } => "get_supported_indicators",
            RpcRequest::GetIndicatorState { .. } => "get_indicator_state",
            RpcRequest::SetIndicatorState { .. } => "set_indicator_state",
            RpcRequest::ChangeBootSetting { setting, .. } => setting.rpc_method(),
            RpcRequest::AttachVirtualMedia { .. } => "attach_virtual_media",
            RpcRequest::DetachVirtualMedia { .. } => "detach_virtual_media",
            RpcRequest::GetVirtualMedia { .. } => "get_virtual_media",
        }
    }

    /// The UUID of the node the request is about (empty for a driver-level one).
    pub fn node_uuid(&self) -> &str {
        self.routing().uuid
    }

    /// What the request asks for, as a stable 64-bit digest (FNV-1a over its JSON form): the
    /// node as the API read it is left out (a retry reads it afresh), except for a create,
    /// whose node is what it asks for. Two requests under one request id (OpenStack's global
    /// request id names a whole operation, several calls) are told apart by it; a retry of
    /// one request has the same digest.
    pub fn digest(&self) -> u64 {
        let mut value = serde_json::to_value(self).unwrap_or_default();
        if !matches!(self, RpcRequest::CreateNode { .. })
            && let Some(variant) = value.as_object_mut().and_then(|o| o.values_mut().next())
            && let Some(fields) = variant.as_object_mut()
        {
            fields.remove("node");
        }
        value
            .to_string()
            .bytes()
            .fold(0xcbf2_9ce4_8422_2325_u64, |hash, byte| {
                (hash ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3)
            })
    }

    /// What picks the conductor on the hash ring. A driver-level request has no node and is
    /// not routed by the ring (the API sends it to any conductor offering the driver, as
    /// Ironic's `get_topic_for_driver`): its route names only the driver.
    pub fn routing(&self) -> Route<'_> {
        match self {
            RpcRequest::CreateNode { node } => Route {
                uuid: &node.uuid,
                driver: &node.driver,
                group: &node.conductor_group,
            },
            RpcRequest::UpdateNode { node, .. }
            | RpcRequest::DestroyNode { node }
            | RpcRequest::DoNodeDeploy { node, .. }
            | RpcRequest::DoNodeTearDown { node }
            | RpcRequest::DoNodeClean { node, .. }
            | RpcRequest::DoNodeService { node, .. }
            | RpcRequest::AddNodeTraits { node, .. }
            | RpcRequest::RemoveNodeTraits { node, .. }
            | RpcRequest::DoNodeRescue { node, .. }
            | RpcRequest::DoNodeUnrescue { node }
            | RpcRequest::DoProvisioningAction { node, .. }
            | RpcRequest::ChangeNodePowerState { node, .. }
            | RpcRequest::SetMaintenance { node, .. }
            | RpcRequest::ValidateDriverInterfaces { node }
            | RpcRequest::SetConsoleMode { node, .. }
            | RpcRequest::ChangePorts { node, .. }
            | RpcRequest::ChangeVolume { node, .. }
            | RpcRequest::SetTargetRaidConfig { node, .. }
            | RpcRequest::GetSupportedBootDevices { node }
            | RpcRequest::GetBootDevice { node }
            | RpcRequest::SetBootDevice { node, .. }
            | RpcRequest::InjectNmi { node }
            | RpcRequest::VendorPassthru { node, .. }
            | RpcRequest::GetNodeVendorPassthruMethods { node }
            | RpcRequest::Heartbeat { node, .. }
            | RpcRequest::ContinueInspection { node, .. }
            | RpcRequest::GetNodeWithToken { node }
            | RpcRequest::GetSupportedIndicators { node }
            | RpcRequest::GetIndicatorState { node, .. }
            | RpcRequest::SetIndicatorState { node, .. }
            | RpcRequest::ChangeBootSetting { node, .. } => Route::of(node),
            RpcRequest::AttachVirtualMedia { node, .. }
            | RpcRequest::DetachVirtualMedia { node, .. }
            | RpcRequest::GetVirtualMedia { node } => Route::of(node),
            RpcRequest::DriverVendorPassthru { driver, .. }
            | RpcRequest::GetDriverVendorPassthruMethods { driver } => Route {
                uuid: "",
                driver,
                group: "",
            },
            // An allocation without a node goes to any alive conductor (Ironic's
            // `get_random_topic`), chosen by the API: its route names no driver.
            RpcRequest::CreateAllocation { allocation, node }
            | RpcRequest::DestroyAllocation { allocation, node } => match node {
                Some(node) => Route::of(node),
                None => Route {
                    uuid: &allocation.uuid,
                    driver: "",
                    group: "",
                },
            },
        }
    }
}

/// A node's place on the hash rings: the ring of its conductor group and driver, and the point
/// of its UUID on it.
#[derive(Debug, Clone, Copy)]
pub struct Route<'a> {
    pub uuid: &'a str,
    pub driver: &'a str,
    pub group: &'a str,
}

impl<'a> Route<'a> {
    pub fn of(node: &'a Node) -> Self {
        Route {
            uuid: &node.uuid,
            driver: &node.driver,
            group: &node.conductor_group,
        }
    }

    /// The key of the ring this node is on.
    pub fn ring(&self) -> String {
        topology::ring_key(self.group, self.driver)
    }
}

/// A heartbeat of a node's agent, as the API checked it (see `conductor::agent::heartbeat`).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Heartbeat {
    /// Where the agent listens (`""` is accepted, as Ironic accepts it from one-way ramdisks).
    pub callback_url: String,
    pub agent_version: Option<String>,
    pub agent_token: Option<String>,
    /// The agent's TLS certificate (1.68).
    pub agent_verify_ca: Option<String>,
    /// The agent's status (1.72: `start`, `end` or `error`) and a message about it.
    #[serde(default)]
    pub agent_status: Option<String>,
    #[serde(default)]
    pub agent_status_message: Option<String>,
}

/// A node as the API asks for it to be created. The API checked which fields the request may
/// give at its version; the conductor reads and validates their values (the same way a PATCH's
/// are) onto a node with its driver's default interfaces.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct NodeCreate {
    pub uuid: String,
    /// The driver and the conductor group (normalized): what routes the request.
    pub driver: String,
    pub conductor_group: String,
    /// `enroll` from API 1.11 on, `available` before.
    #[serde(with = "crate::node::state_name")]
    pub initial_state: ProvisionState,
    /// The node fields of the request body, as the client sent them.
    pub fields: JsonObject,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub enum RpcReply {
    Node(Box<Node>),
    Port(Box<Port>),
    Portgroup(Box<Portgroup>),
    VolumeConnector(Box<VolumeConnector>),
    VolumeTarget(Box<VolumeTarget>),
    Validation(Vec<InterfaceValidation>),
    /// The conductor took the lock and accepted the work (202 for the API).
    Accepted,
    Done,
    BootDevice(BootDeviceSetting),
    BootDevices(Vec<BootDevice>),
    /// A vendor method's answer: what it returned (null for an asynchronous one, which runs
    /// after the reply), whether it runs after the reply, and whether its return value is the
    /// response body as it is.
    Passthru {
        return_value: Value,
        asynchronous: bool,
        attach: bool,
    },
    /// `{<method>: <metadata>}` (see `drivers::VendorMethod::metadata`).
    VendorMethods(JsonObject),
    Allocation(Box<Allocation>),
    Indicators(Indicators),
    IndicatorState(IndicatorState),
    /// The node's virtual media devices (1.93).
    VirtualMedia(Vec<Value>),
}

impl RpcReply {
    /// The node a create or update answered with.
    pub fn into_node(self) -> Result<Node, Error> {
        match self {
            RpcReply::Node(node) => Ok(*node),
            other => Err(Error::internal(format!(
                "expected a node in the answer, got {other:?}"
            ))),
        }
    }

    /// The port a port create or update answered with.
    pub fn into_port(self) -> Result<Port, Error> {
        match self {
            RpcReply::Port(port) => Ok(*port),
            other => Err(Error::internal(format!(
                "expected a port in the answer, got {other:?}"
            ))),
        }
    }

    /// The portgroup a portgroup create or update answered with.
    pub fn into_portgroup(self) -> Result<Portgroup, Error> {
        match self {
            RpcReply::Portgroup(portgroup) => Ok(*portgroup),
            other => Err(Error::internal(format!(
                "expected a portgroup in the answer, got {other:?}"
            ))),
        }
    }

    /// The answer of a request whose reply is not a node, nor validation results, nor a bare
    /// acknowledgement: `pick` takes it out, anything else is a conductor bug.
    pub fn pick<T>(self, pick: impl FnOnce(RpcReply) -> Result<T, RpcReply>) -> Result<T, Error> {
        pick(self).map_err(|other| {
            Error::internal(format!("unexpected answer from the conductor: {other:?}"))
        })
    }

    /// The verdicts `validate` answered with.
    pub fn into_validation(self) -> Result<Vec<InterfaceValidation>, Error> {
        match self {
            RpcReply::Validation(results) => Ok(results),
            other => Err(Error::internal(format!(
                "expected validation results in the answer, got {other:?}"
            ))),
        }
    }
}

/// One interface's verdict in `validate`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct InterfaceValidation {
    /// Ironic's interface name: deploy, power, management, boot, ...
    pub interface: String,
    /// Some(true) valid, Some(false) invalid, None not supported.
    pub result: Option<bool>,
    /// Why, when not valid.
    pub reason: Option<String>,
}

pub type RpcResult = Result<RpcReply, Error>;

pub fn encode<T: Serialize>(value: &T) -> Result<Vec<u8>, Error> {
    // Named fields: an older reader skips fields it does not know, a newer one defaults missing ones.
    rmp_serde::to_vec_named(value).map_err(|e| Error::internal(format!("RPC encode: {e}")))
}

pub fn decode<'a, T: Deserialize<'a>>(bytes: &'a [u8]) -> Result<T, String> {
    rmp_serde::from_slice(bytes).map_err(|e| e.to_string())
}

/// The time a conductor is given for a call its caller waits `timeout` for: a twentieth less (at
/// most half a second less), for the request's trip to the conductor and the reply's trip back.
/// So a change the conductor applies just before its deadline is still answered before the
/// caller gives up, and a call that timed out was not applied: the conductor applies nothing
/// past its deadline (`db::deadline`).
pub fn conductor_budget(timeout: Duration) -> Duration {
    timeout - (timeout / 20).min(Duration::from_millis(500))
}

/// Milliseconds since the Unix epoch (0 for a clock set before it).
pub fn unix_ms(at: std::time::SystemTime) -> u64 {
    at.duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// The API's side of RPC: encodes, sends to the chosen conductor, maps failures to [`Error`].
#[derive(Clone)]
pub struct RpcClient {
    transport: Arc<dyn Transport>,
    timeout: Duration,
}

impl RpcClient {
    pub fn new(transport: Arc<dyn Transport>, timeout: Duration) -> Self {
        RpcClient { transport, timeout }
    }

    /// Whether the transport's broker connection is up (None: in-process, no broker).
    pub fn connected(&self) -> Option<bool> {
        self.transport.connected()
    }

    pub async fn call(
        &self,
        host: &str,
        request_id: &str,
        request: RpcRequest,
    ) -> Result<RpcReply, Error> {
        let method = request.method();
        let envelope = Envelope {
            version: WIRE_VERSION,
            request_id: request_id.to_owned(),
            timeout_ms: u64::try_from(conductor_budget(self.timeout).as_millis())
                .unwrap_or(u64::MAX),
            sent_at_ms: unix_ms(std::time::SystemTime::now()),
            request,
        };
        let body = encode(&envelope)?;
        let started = std::time::Instant::now();
        let reply = self
            .transport
            .call(host, request_id, body, self.timeout)
            .await;
        crate::metrics::get().rpc_call(method, started.elapsed().as_secs_f64());
        let reply = reply.map_err(|e| match e {
            TransportError::Unroutable(_) => Error::ConductorUnreachable {
                host: host.to_owned(),
            },
            TransportError::Lost(_) => Error::ConductorLost {
                host: host.to_owned(),
            },
            TransportError::Timeout { after, .. } => Error::TemporaryFailure(format!(
                "Conductor {host} did not answer {method} within {} s; please retry.",
                after.as_secs_f64()
            )),
            TransportError::Unavailable(cause) => {
                tracing::warn!(%cause, "message broker unavailable");
                Error::TemporaryFailure(
                    "The message broker is unavailable; please retry.".to_owned(),
                )
            }
        })?;
        let result: RpcResult = decode(&reply)
            .map_err(|e| Error::internal(format!("undecodable reply from {host}: {e}")))?;
        result
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_conductor_has_a_little_less_time_than_its_caller() {
        let budget = |ms| conductor_budget(Duration::from_millis(ms)).as_millis();
        assert_eq!(budget(3_000), 2_850);
        assert_eq!(budget(60_000), 59_500);
        assert_eq!(budget(100), 95);
    }
}
