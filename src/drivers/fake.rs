//! `fake-hardware`: interfaces that succeed without hardware, for tests and benchmarks.
//!
//! The fake deploy reads two optional `driver_info` keys so tests can observe the middle of a
//! deploy and its failure paths: `fake_deploy_delay` (seconds the deploy takes) and
//! `fake_deploy_panic` (a message the deploy panics with, to prove a panicking driver cannot wedge
//! a node). Each run of the deploy step logs "fake deploy started on node <uuid>" at INFO.
//!
//! The fake management interface remembers the boot device it was last set to, and the fake
//! vendor interface offers the methods of Ironic's (`FakeVendorB`), each taking the configured
//! `fake_vendor_delay` (Ironic's `[fake]vendor_delay`).
//!
//! Tests that build the service in process can also hand the fake deploy a [`DeployGate`]: each
//! deploy (and each manual cleaning's ramdisk preparation) then waits at it until the test lets
//! it through, so a test knows the node is in
//! `deploying` with its lock held for as long as it likes, without timing anything. The service
//! itself never sets one.

use std::{sync::Arc, time::Duration};

use async_trait::async_trait;
use serde_json::Value;
use tokio::sync::{Mutex, Semaphore, mpsc};
use tracing::info;

use super::{
    BootDevice, BootDeviceSetting, BootMode, DeployInterface, DeployOutcome, DriverError,
    DriverStep, HardwareType, IndicatorInfo, IndicatorState, Indicators, ManagementInterface,
    NoSteps, NoVendor, PowerInterface, Properties, StepDone, StepInterface, VMEDIA_DEVICES,
    VendorInterface, VendorMethod, direct::DirectDeploy, local_image::LocalImages, no_handler,
};
use crate::config::ConductorConfig;
use crate::node::{InterfaceKind, JsonObject, Node, PowerState, bios::BiosValue};

/// `fake-hardware`; with a gate, every fake deploy waits at it (see [`DeployGate`]); each fake
/// vendor method takes `vendor_delay`.
///
/// The order of each kind is Ironic's (`ironic/drivers/fake_hardware.py` over
/// `generic.GenericHardware`): `fake` first, then the generic ones, so a node gets the first
/// enabled one (`driver_factory.default_interface`). Storage is the exception: Ironic lists
/// `fake` first too, but its `default_storage_interface` is `noop` unless configured, which the
/// order here stands for.
pub fn hardware_type(gate: Option<DeployGate>, config: &ConductorConfig) -> HardwareType {
    HardwareType {
        name: "fake-hardware",
        passive: vec![
            (InterfaceKind::Boot, vec!["fake"]),
            (
                InterfaceKind::Console,
                vec!["fake", "no-console", "fake-graphical"],
            ),
            (InterfaceKind::Inspect, vec!["fake", "agent", "no-inspect"]),
            (InterfaceKind::Network, vec!["flat", "noop"]),
            (InterfaceKind::Raid, vec!["fake", "no-raid"]),
            (InterfaceKind::Storage, vec!["noop", "fake"]),
            (InterfaceKind::Rescue, vec!["fake", "no-rescue"]),
        ],
        power: vec![Arc::new(FakePower)],
        management: vec![Arc::new(FakeManagement)],
        deploy: vec![
            Arc::new(FakeDeploy { gate }),
            Arc::new(DirectDeploy {
                images: LocalImages::new(config),
            }),
        ],
        vendor: vec![
            Arc::new(FakeVendor {
                delay: config.fake_vendor_delay,
            }),
            Arc::new(NoVendor),
        ],
        bios: vec![Arc::new(FakeBios), Arc::new(NoSteps("no-bios"))],
        firmware: vec![Arc::new(FakeFirmware), Arc::new(NoSteps("no-firmware"))],
    }
}

/// The fake firmware (Ironic's `FakeFirmware`): its clean step `update` accepts its
/// `settings` and does nothing else.
pub struct FakeFirmware;

const FAKE_FIRMWARE_STEPS: &[DriverStep] = &[DriverStep::manual(
    "firmware",
    "update",
    &[("settings", true)],
)];

#[async_trait]
impl StepInterface for FakeFirmware {
    fn name(&self) -> &'static str {
        "fake"
    }

    fn clean_steps(&self) -> &'static [DriverStep] {
        FAKE_FIRMWARE_STEPS
    }

    async fn execute_clean_step(
        &self,
        node: &Node,
        step: &str,
        args: &JsonObject,
    ) -> Result<StepDone, DriverError> {
        if step != "update" {
            return Err(super::unsupported(node, step));
        }
        tracing::debug!(node.uuid = %node.uuid, "Fake firmware update with settings {:?}", args.get("settings"));
        Ok(StepDone::done())
    }
}

/// The fake BIOS (Ironic's `FakeBIOS`): its clean step `apply_configuration` makes the node's
/// stored settings exactly the ones given (Ironic's `sync_node_setting`: new names created,
/// changed values updated, names not given deleted), `factory_reset` deletes them all.
pub struct FakeBios;

const FAKE_BIOS_STEPS: &[DriverStep] = &[
    DriverStep::manual("bios", "apply_configuration", &[("settings", true)]),
    DriverStep::manual("bios", "factory_reset", &[]),
];

impl FakeBios {
    /// The `settings` of `apply_configuration`: a list of `{"name", "value"}` (value a string or
    /// null), each with the registry fields optionally.
    fn settings(args: &JsonObject) -> Result<Vec<BiosValue>, DriverError> {
        let settings = args.get("settings").cloned().unwrap_or(Value::Null);
        serde_json::from_value::<Vec<BiosValue>>(settings).map_err(|e| {
            DriverError::InvalidParameterValue(format!(
                "The settings of bios.apply_configuration must be a list of objects with a \"name\" and a string \"value\": {e}"
            ))
        })
    }
}

#[async_trait]
impl StepInterface for FakeBios {
    fn name(&self) -> &'static str {
        "fake"
    }

    fn clean_steps(&self) -> &'static [DriverStep] {
        FAKE_BIOS_STEPS
    }

    fn check_step(&self, step: &str, args: &JsonObject) -> Result<(), DriverError> {
        if step == "apply_configuration" {
            FakeBios::settings(args)?;
        }
        Ok(())
    }

    async fn execute_clean_step(
        &self,
        node: &Node,
        step: &str,
        args: &JsonObject,
    ) -> Result<StepDone, DriverError> {
        let settings = match step {
            "apply_configuration" => FakeBios::settings(args)?,
            "factory_reset" => Vec::new(),
            other => return Err(super::unsupported(node, other)),
        };
        Ok(StepDone {
            bios_settings: Some(settings),
            ..StepDone::default()
        })
    }
}

pub struct FakePower;

#[async_trait]
impl PowerInterface for FakePower {
    fn name(&self) -> &'static str {
        "fake"
    }

    /// None, as Ironic's fake power.
    fn properties(&self) -> Properties {
        &[]
    }

    fn validate(&self, _node: &Node) -> Result<(), DriverError> {
        Ok(())
    }

    /// The fake machine is in whatever state it was last put in (off when new).
    async fn get_power_state(&self, node: &Node) -> Result<PowerState, DriverError> {
        Ok(node.power_state.unwrap_or(PowerState::Off))
    }

    async fn set_power_state(
        &self,
        node: &Node,
        target: PowerState,
        _timeout: Duration,
    ) -> Result<(), DriverError> {
        fake_power_failure(node, target.api_name())
    }

    async fn reboot(&self, node: &Node, _timeout: Duration) -> Result<(), DriverError> {
        fake_power_failure(node, "rebooting")
    }
}

/// A power change fails with `driver_info.fake_power_fail`'s text when it is set, so a test can
/// see a failed power change (its notifications, its `last_error`); an object fails only the
/// changes it names (`{"power off": "why"}`; `rebooting` for a reboot). Not among the
/// properties: those stay Ironic's fake power's (none).
fn fake_power_failure(node: &Node, change: &str) -> Result<(), DriverError> {
    let why = match node.driver_info.get("fake_power_fail") {
        Some(Value::String(why)) => Some(why.as_str()),
        Some(Value::Object(by_change)) => by_change.get(change).and_then(Value::as_str),
        _ => None,
    };
    why.map_or(Ok(()), |why| Err(DriverError::Failed(why.to_owned())))
}

pub struct FakeManagement;

/// Where the fake management interface keeps the boot device it was set to: in
/// `driver_internal_info`, as Ironic's own drivers keep what the hardware cannot tell them.
const BOOT_DEVICE_KEY: &str = "fake_boot_device";
const BOOT_PERSISTENT_KEY: &str = "fake_boot_device_persistent";

/// The devices the fake machine offers. Ironic's fake offers only `pxe` and always reads back
/// `pxe`, not persistent; this one offers what a typical BMC does and reads back what it was
/// last set to (`pxe`, not persistent, before that), so that a client's set-then-show is
/// tested for real. Its record lives on the node, like the fake power state, so it survives a
/// conductor restart or a take-over.
const FAKE_BOOT_DEVICES: [BootDevice; 5] = [
    BootDevice::Pxe,
    BootDevice::Disk,
    BootDevice::Cdrom,
    BootDevice::Bios,
    BootDevice::Safe,
];

#[async_trait]
impl ManagementInterface for FakeManagement {
    fn name(&self) -> &'static str {
        "fake"
    }

    /// None, as Ironic's fake management.
    fn properties(&self) -> Properties {
        &[]
    }

    fn validate(&self, _node: &Node) -> Result<(), DriverError> {
        Ok(())
    }

    async fn supported_boot_devices(&self, _node: &Node) -> Result<Vec<BootDevice>, DriverError> {
        Ok(FAKE_BOOT_DEVICES.to_vec())
    }

    async fn set_boot_device(
        &self,
        _node: &Node,
        device: BootDevice,
        persistent: bool,
    ) -> Result<JsonObject, DriverError> {
        if !FAKE_BOOT_DEVICES.contains(&device) {
            return Err(DriverError::InvalidParameterValue(format!(
                "Invalid boot device {} specified.",
                device.api_name()
            )));
        }
        let mut record = JsonObject::new();
        record.insert(BOOT_DEVICE_KEY.into(), device.api_name().into());
        record.insert(BOOT_PERSISTENT_KEY.into(), persistent.into());
        Ok(record)
    }

    async fn get_boot_device(&self, node: &Node) -> Result<BootDeviceSetting, DriverError> {
        let info = &node.driver_internal_info;
        let boot_device = match info.get(BOOT_DEVICE_KEY).and_then(Value::as_str) {
            Some(name) => BootDevice::parse(name).ok(),
            None => Some(BootDevice::Pxe),
        };
        let persistent = info
            .get(BOOT_PERSISTENT_KEY)
            .map_or(Some(false), Value::as_bool);
        Ok(BootDeviceSetting {
            boot_device,
            persistent,
        })
    }

    /// Ironic's fake has no boot mode (its base class refuses with UnsupportedDriverExtension);
    /// the fake machine has one, kept on the node itself (`boot_mode`, which the conductor
    /// writes after a change), so that the path of a change is real. Unknown until first set.
    async fn get_boot_mode(&self, node: &Node) -> Result<Option<BootMode>, DriverError> {
        Ok(node
            .boot_mode
            .as_deref()
            .and_then(|m| BootMode::parse(m).ok()))
    }

    async fn set_boot_mode(&self, node: &Node, mode: BootMode) -> Result<(), DriverError> {
        if mode == BootMode::Bios && node.secure_boot == Some(true) {
            return Err(DriverError::InvalidParameterValue(
                "Secure boot is on: the legacy BIOS boot mode cannot be set while it is".to_owned(),
            ));
        }
        Ok(())
    }

    /// Secure boot, kept on the node like the boot mode (off until first set). It is a UEFI
    /// feature: in the legacy BIOS boot mode the fake machine does not offer it.
    async fn get_secure_boot_state(&self, node: &Node) -> Result<bool, DriverError> {
        Ok(node.secure_boot.unwrap_or(false))
    }

    async fn set_secure_boot_state(&self, node: &Node, _on: bool) -> Result<(), DriverError> {
        if node.boot_mode.as_deref() == Some(BootMode::Bios.api_name()) {
            return Err(super::unsupported(node, "set_secure_boot_state"));
        }
        Ok(())
    }

    /// Ironic's fake has no NMI (its base class refuses with UnsupportedDriverExtension); the
    /// fake machine takes one, so that the call's path (lock, RPC, 204) is real.
    async fn inject_nmi(&self, node: &Node) -> Result<(), DriverError> {
        let uuid = &node.uuid;
        info!(node.uuid = %uuid, "fake NMI injected into node {uuid}");
        Ok(())
    }

    async fn supported_indicators(&self, _node: &Node) -> Result<Indicators, DriverError> {
        Ok(fake_indicators())
    }

    /// Ironic's fake always reads `on`; this one reads back what the indicator was last set
    /// to (`on` before that), kept on the node like the boot device.
    async fn get_indicator_state(
        &self,
        node: &Node,
        component: &str,
        indicator: &str,
    ) -> Result<IndicatorState, DriverError> {
        fake_indicator(component, indicator)?;
        let state = node
            .driver_internal_info
            .get(INDICATORS_KEY)
            .and_then(|set| set.get(format!("{indicator}@{component}")))
            .and_then(|v| serde_json::from_value(v.clone()).ok())
            .unwrap_or(IndicatorState::On);
        Ok(state)
    }

    async fn set_indicator_state(
        &self,
        node: &Node,
        component: &str,
        indicator: &str,
        state: IndicatorState,
    ) -> Result<JsonObject, DriverError> {
        let info = fake_indicator(component, indicator)?;
        if info.readonly {
            return Err(DriverError::InvalidParameterValue(format!(
                "Indicator {indicator} on component {component} is read-only."
            )));
        }
        if !info.states.contains(&state) {
            return Err(DriverError::InvalidParameterValue(format!(
                "Invalid state {} for indicator {indicator} on component {component}.",
                state.api_name()
            )));
        }
        let mut set = node
            .driver_internal_info
            .get(INDICATORS_KEY)
            .and_then(Value::as_object)
            .cloned()
            .unwrap_or_default();
        set.insert(format!("{indicator}@{component}"), state.api_name().into());
        let mut record = JsonObject::new();
        record.insert(INDICATORS_KEY.into(), Value::Object(set));
        Ok(record)
    }

    async fn attach_virtual_media(
        &self,
        node: &Node,
        device: BootDevice,
        image_url: &str,
    ) -> Result<JsonObject, DriverError> {
        let mut attached = fake_vmedia(node);
        attached.insert(device.api_name().into(), image_url.into());
        Ok(JsonObject::from_iter([(
            VMEDIA_KEY.to_owned(),
            Value::Object(attached),
        )]))
    }

    async fn detach_virtual_media(
        &self,
        node: &Node,
        devices: Option<&[BootDevice]>,
    ) -> Result<JsonObject, DriverError> {
        let mut attached = fake_vmedia(node);
        match devices {
            Some(devices) => {
                for device in devices {
                    attached.remove(device.api_name());
                }
            }
            None => attached.clear(),
        }
        Ok(JsonObject::from_iter([(
            VMEDIA_KEY.to_owned(),
            Value::Object(attached),
        )]))
    }

    async fn get_virtual_media(&self, node: &Node) -> Result<Vec<Value>, DriverError> {
        let attached = fake_vmedia(node);
        Ok(VMEDIA_DEVICES
            .iter()
            .map(|device| {
                let image = attached.get(device.api_name());
                serde_json::json!({
                    "media_types": [device.api_name()],
                    "inserted": image.is_some(),
                    "image": image.cloned().unwrap_or_else(|| Value::String(String::new())),
                })
            })
            .collect())
    }
}

/// Where the fake management interface keeps its virtual media: `{"<device>": "<image URL>"}`
/// in `driver_internal_info`. Ironic's fake management has no virtual media (the base
/// interface's UnsupportedDriverExtension); Ferrum's remembers what it was given, as it does
/// the boot device, so that the API's attach, list and detach are tested for real.
const VMEDIA_KEY: &str = "fake_vmedia";

fn fake_vmedia(node: &Node) -> JsonObject {
    node.driver_internal_info
        .get(VMEDIA_KEY)
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default()
}

/// Where the fake management interface keeps the indicator states it was set to:
/// `{"<indicator>@<component>": "<state>"}` in `driver_internal_info`.
const INDICATORS_KEY: &str = "fake_indicators";

/// Ironic's fake indicators: a read-only `led-0` on the chassis and a settable `led` on the
/// system.
fn fake_indicators() -> Indicators {
    let one = |name: &str, readonly, states: &[IndicatorState]| {
        let info = IndicatorInfo {
            readonly,
            states: states.to_vec(),
        };
        std::iter::once((name.to_owned(), info)).collect()
    };
    Indicators::from([
        (
            "chassis".to_owned(),
            one("led-0", true, &[IndicatorState::Off, IndicatorState::On]),
        ),
        (
            "system".to_owned(),
            one(
                "led",
                false,
                &[
                    IndicatorState::Blinking,
                    IndicatorState::Off,
                    IndicatorState::On,
                ],
            ),
        ),
    ])
}

/// The fake indicator `indicator` on `component`, or Ironic's messages for a bad name.
fn fake_indicator(component: &str, indicator: &str) -> Result<IndicatorInfo, DriverError> {
    let mut all = fake_indicators();
    let Some(mut on_component) = all.remove(component) else {
        return Err(DriverError::InvalidParameterValue(format!(
            "Invalid component {component} specified."
        )));
    };
    on_component.remove(indicator).ok_or_else(|| {
        DriverError::InvalidParameterValue(format!("Invalid indicator {indicator} specified."))
    })
}

/// The fake vendor interface (Ironic's `fake`, `FakeVendorB`): each method checks `bar` and
/// says whether it is its word, after `delay`.
pub struct FakeVendor {
    delay: Duration,
}

const FAKE_VENDOR_METHODS: &[VendorMethod] = &[
    VendorMethod {
        name: "second_method",
        http_methods: &["POST"],
        asynchronous: true,
        description: "Test if the value of bar is kazoo",
        attach: false,
        require_exclusive_lock: true,
    },
    VendorMethod {
        name: "third_method_sync",
        http_methods: &["POST"],
        asynchronous: false,
        description: "Test if the value of bar is meow",
        attach: false,
        require_exclusive_lock: true,
    },
    VendorMethod {
        name: "fourth_method_shared_lock",
        http_methods: &["POST"],
        asynchronous: true,
        description: "Test if the value of bar is woof",
        attach: false,
        require_exclusive_lock: false,
    },
    VendorMethod {
        name: "log_passthrough",
        http_methods: &["POST"],
        asynchronous: true,
        description: "Test pass-through to wait.",
        attach: false,
        require_exclusive_lock: true,
    },
];

impl FakeVendor {
    /// The word each method that takes `bar` compares it with.
    fn word(method: &str) -> Option<&'static str> {
        match method {
            "second_method" => Some("kazoo"),
            "third_method_sync" => Some("meow"),
            "fourth_method_shared_lock" => Some("woof"),
            _ => None,
        }
    }
}

/// Python's truth of a JSON value, which Ironic's fake tests `bar` with.
fn truthy(value: &Value) -> bool {
    match value {
        Value::Null => false,
        Value::Bool(b) => *b,
        Value::Number(n) => n.as_f64().is_some_and(|f| f != 0.0),
        Value::String(s) => !s.is_empty(),
        Value::Array(a) => !a.is_empty(),
        Value::Object(o) => !o.is_empty(),
    }
}

#[async_trait]
impl VendorInterface for FakeVendor {
    fn name(&self) -> &'static str {
        "fake"
    }

    fn methods(&self) -> &'static [VendorMethod] {
        FAKE_VENDOR_METHODS
    }

    /// `bar` is required and nothing else is taken. Ironic's fake methods fail on another
    /// argument when they run (a TypeError: 500 for the synchronous one, a logged failure after
    /// 202 for the others); here it is refused up front, as a bad parameter.
    fn validate(&self, _node: &Node, method: &str, args: &JsonObject) -> Result<(), DriverError> {
        if Self::word(method).is_none() {
            return Ok(());
        }
        if !args.get("bar").is_some_and(truthy) {
            return Err(DriverError::MissingParameterValue(format!(
                "Parameter 'bar' not passed to method '{method}'."
            )));
        }
        let unexpected: Vec<&str> = args
            .keys()
            .map(String::as_str)
            .filter(|k| *k != "bar")
            .collect();
        if !unexpected.is_empty() {
            return Err(DriverError::InvalidParameterValue(format!(
                "Unexpected arguments for method '{method}': {}",
                unexpected.join(", ")
            )));
        }
        Ok(())
    }

    async fn call(
        &self,
        node: &Node,
        method: &str,
        _http_method: &str,
        args: JsonObject,
    ) -> Result<Value, DriverError> {
        if !FAKE_VENDOR_METHODS.iter().any(|m| m.name == method) {
            return Err(no_handler(method));
        }
        tokio::time::sleep(self.delay).await;
        match Self::word(method) {
            Some(word) => Ok(Value::Bool(
                args.get("bar").and_then(Value::as_str) == Some(word),
            )),
            None => {
                let uuid = &node.uuid;
                info!(node.uuid = %uuid, ?args, "fake vendor method {method} called on node {uuid}");
                Ok(Value::Null)
            }
        }
    }
}

pub struct FakeDeploy {
    gate: Option<DeployGate>,
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
    fn delay(node: &Node) -> Result<Option<Duration>, DriverError> {
        match node.driver_info.get("fake_deploy_delay") {
            None => Ok(None),
            Some(v) => v
                .as_f64()
                .filter(|s| (0.0..=3600.0).contains(s))
                .and_then(|s| Duration::try_from_secs_f64(s).ok())
                .map(Some)
                .ok_or_else(|| {
                    DriverError::InvalidParameterValue(format!(
                        "driver_info/fake_deploy_delay must be 0 to 3600 seconds, not {v}"
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

    /// The two test hooks of the module's documentation (Ironic's fake deploy reads none).
    fn properties(&self) -> Properties {
        &[
            (
                "fake_deploy_delay",
                "How many seconds the fake deploy step takes, 0 to 3600. Optional.",
            ),
            (
                "fake_deploy_panic",
                "A message the fake deploy step panics with, to test that a panicking driver cannot wedge a node. Optional.",
            ),
        ]
    }

    fn validate(&self, node: &Node) -> Result<(), DriverError> {
        Self::delay(node).map(|_| ())
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
        if let Some(delay) = Self::delay(node)? {
            tokio::time::sleep(delay).await;
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
        _ctx: &super::StepContext<'_>,
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
