//! Hardware drivers: the power, management, deploy and vendor interfaces, and the hardware types
//! that bundle them. A driver sees a node (read-only) and talks to hardware; it never touches the
//! database or the state machine: the conductor does both around it.

pub mod agent_client;
pub mod boot;
pub mod direct;
pub mod fake;
pub mod ipmi;
pub mod local_image;
pub mod redfish;
mod registry;

use std::{sync::Arc, time::Duration};

use async_trait::async_trait;
use serde_json::Value;

pub use self::{
    boot::BootInterface,
    registry::{HardwareType, Registry, catalogue},
};
use crate::{
    config::ConductorConfig,
    error::Error,
    node::{InterfaceKind, JsonObject, Node, PowerState, PowerTarget, bios::BiosValue},
    steps::{CleanStep, DeployStep, DriverStep},
};

/// What a driver can raise, with Ironic's message texts.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DriverError {
    #[error("Image {image} is unacceptable: {reason}")]
    ImageUnacceptable { image: String, reason: String },
    #[error("{0}")]
    InvalidParameterValue(String),
    #[error("{0}")]
    MissingParameterValue(String),
    /// The hardware did not do what was asked.
    #[error("{0}")]
    Failed(String),
    /// The interface does not offer the call (Ironic's base interfaces' refusal).
    #[error("Driver {driver} does not support {extension} (disabled or not implemented).")]
    Unsupported { driver: String, extension: String },
}

/// What an interface reads from a node's `driver_info`: each property's name and what it means
/// (Ironic's `get_properties()`, shown by GET /v1/drivers/{name}/properties).
pub type Properties = &'static [(&'static str, &'static str)];

impl DriverError {
    /// The error a client sees for a driver call made while it waits (a synchronous call):
    /// a bad or missing parameter is its 400, a failure of the hardware Ironic's 500
    /// DriverOperationError naming `driver`.
    pub fn into_error(self, driver: &str) -> Error {
        match self {
            DriverError::InvalidParameterValue(m) => Error::InvalidParameterValue(m),
            DriverError::MissingParameterValue(m) => Error::MissingParameterValue(m),
            DriverError::Unsupported { driver, extension } => {
                Error::UnsupportedDriverExtension { driver, extension }
            }
            e @ (DriverError::ImageUnacceptable { .. } | DriverError::Failed(_)) => {
                Error::DriverOperationError {
                    driver: driver.to_owned(),
                    reason: e.to_string(),
                }
            }
        }
    }
}

/// The disk erasures every deploy interface offers in cleaning (see
/// [`DeployInterface::clean_steps`]).
const ERASE_STEPS: &[DriverStep] = &[
    DriverStep::manual("deploy", "erase_devices", &[]),
    DriverStep::manual("deploy", "erase_devices_metadata", &[]),
];

/// The outcome of a deploy: done, or waiting for an agent to call back (`wait call-back`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeployOutcome {
    Done,
    Wait,
}

/// What a deploy step has besides the node: the node's interfaces (a step may power the node or
/// set its boot device) and its ports as the agent is shown them.
pub struct StepContext<'a> {
    pub driver: &'a Driver,
    pub ports: &'a [Value],
    pub config: &'a ConductorConfig,
    /// The ramdisk boots for an in-band inspection: its agent is told where to post what it
    /// finds (`ipa-inspection-callback-url`).
    pub inspection: bool,
}

/// What a deploy step did: done or waiting (the node goes to `wait call-back` until
/// [`DeployInterface::poll_step`] says it has finished), and what the conductor is to record on
/// the node for it (a driver never writes the database).
#[derive(Debug, Default)]
pub struct StepDone {
    pub waits: bool,
    /// `driver_internal_info` entries to set.
    pub remember: JsonObject,
    /// The power state the step left the node in.
    pub power: Option<PowerState>,
    /// The node's BIOS settings as the step left them, for the conductor to store in place of
    /// the ones before (a BIOS step's outcome).
    pub bios_settings: Option<Vec<BiosValue>>,
}

impl StepDone {
    pub fn done() -> StepDone {
        StepDone::default()
    }

    pub fn wait() -> StepDone {
        StepDone {
            waits: true,
            ..StepDone::default()
        }
    }
}

/// Where a step that waits stands.
#[derive(Debug, PartialEq, Eq)]
pub enum StepPoll {
    /// Not finished (or not started yet, as far as the agent tells).
    Running,
    /// Finished: the deploy goes on with the next step.
    Finished,
    /// Failed, in these words (the agent's own where it gave them).
    Failed(String),
}

#[async_trait]
pub trait PowerInterface: Send + Sync + 'static {
    fn name(&self) -> &'static str;
    /// The `driver_info` keys it reads, with what each means (none by default).
    fn properties(&self) -> Properties {
        &[]
    }
    /// Checks `driver_info` has what this interface needs; no hardware access. By default it
    /// needs nothing.
    fn validate(&self, _node: &Node) -> Result<(), DriverError> {
        Ok(())
    }
    /// The BMC this interface talks to for `node` (scheme, host and port), so that work on many
    /// nodes can bound its requests to one BMC; None when it talks to none, or the node's
    /// `driver_info` does not say.
    fn bmc(&self, _node: &Node) -> Option<String> {
        None
    }
    async fn get_power_state(&self, node: &Node) -> Result<PowerState, DriverError>;
    /// Reaches `target` (what a client asks with `PUT .../states/power`), waiting at most
    /// `timeout`. An interface that cannot tell soft from hard treats the soft targets as their
    /// hard ones.
    async fn change_power(
        &self,
        node: &Node,
        target: PowerTarget,
        timeout: Duration,
    ) -> Result<(), DriverError>;
    /// Powers the node on or off: the flows' own power changes.
    async fn set_power_state(
        &self,
        node: &Node,
        target: PowerState,
        timeout: Duration,
    ) -> Result<(), DriverError> {
        self.change_power(node, target.into(), timeout).await
    }
    async fn reboot(&self, node: &Node, timeout: Duration) -> Result<(), DriverError> {
        self.change_power(node, PowerTarget::Reboot, timeout).await
    }
}

/// A console interface that runs something for a node's console: `ipmitool-socat` (a `socat`
/// serving the node's serial-over-LAN). The other console interfaces only record on the node
/// (`node::console`).
#[async_trait]
pub trait ConsoleInterface: Send + Sync + 'static {
    fn name(&self) -> &'static str;
    /// Checks `driver_info` has what a console needs; no hardware access.
    fn validate(&self, node: &Node) -> Result<(), DriverError>;
    /// Starts the node's console; its `console_info` (type and URL).
    async fn start(&self, node: &Node) -> Result<JsonObject, DriverError>;
    /// Stops the node's console; one not running is no error.
    async fn stop(&self, node: &Node) -> Result<(), DriverError>;
    /// Stops every console this process started (its shutdown).
    async fn stop_all(&self);
}

#[async_trait]
pub trait ManagementInterface: Send + Sync + 'static {
    fn name(&self) -> &'static str;
    /// The `driver_info` keys it reads, with what each means (none by default).
    fn properties(&self) -> Properties {
        &[]
    }
    /// Checks `driver_info` has what this interface needs; no hardware access. By default it
    /// needs nothing.
    fn validate(&self, _node: &Node) -> Result<(), DriverError> {
        Ok(())
    }
    /// The devices the node can be told to boot from.
    async fn supported_boot_devices(&self, node: &Node) -> Result<Vec<BootDevice>, DriverError>;
    /// Makes the node boot from `device` next time (every time with `persistent`). What it
    /// returns are `driver_internal_info` keys for the conductor to record on the node, under
    /// the lock it holds for the call (a driver never writes the database); a BMC that keeps
    /// the setting itself returns none.
    async fn set_boot_device(
        &self,
        node: &Node,
        device: BootDevice,
        persistent: bool,
    ) -> Result<JsonObject, DriverError>;
    /// The device the node boots from next; either part None when the hardware cannot tell.
    async fn get_boot_device(&self, node: &Node) -> Result<BootDeviceSetting, DriverError>;
    /// Injects a non-maskable interrupt into the running machine, at once.
    async fn inject_nmi(&self, node: &Node) -> Result<(), DriverError>;
    /// The hardware's indicators (LEDs), by component (API 1.63).
    async fn supported_indicators(&self, node: &Node) -> Result<Indicators, DriverError>;
    /// The state of `indicator` on `component`; a bad name is InvalidParameterValue.
    async fn get_indicator_state(
        &self,
        node: &Node,
        component: &str,
        indicator: &str,
    ) -> Result<IndicatorState, DriverError>;
    /// Sets `indicator` on `component` to `state`. Like `set_boot_device`, what it returns are
    /// `driver_internal_info` keys for the conductor to record under its lock.
    async fn set_indicator_state(
        &self,
        node: &Node,
        component: &str,
        indicator: &str,
        state: IndicatorState,
    ) -> Result<JsonObject, DriverError>;
    /// The boot mode the machine is in (API 1.75); None when it cannot tell. By default the
    /// interface does not offer it, as Ironic's base `ManagementInterface`.
    async fn get_boot_mode(&self, node: &Node) -> Result<Option<BootMode>, DriverError> {
        Err(unsupported(node, "get_boot_mode"))
    }
    /// Puts the machine in `mode` (API 1.76); the conductor records it on the node after.
    async fn set_boot_mode(&self, node: &Node, _mode: BootMode) -> Result<(), DriverError> {
        Err(unsupported(node, "set_boot_mode"))
    }
    /// Whether UEFI secure boot is on (API 1.75).
    async fn get_secure_boot_state(&self, node: &Node) -> Result<bool, DriverError> {
        Err(unsupported(node, "get_secure_boot_state"))
    }
    /// Turns UEFI secure boot on or off (API 1.76); the conductor records it on the node after.
    async fn set_secure_boot_state(&self, node: &Node, _on: bool) -> Result<(), DriverError> {
        Err(unsupported(node, "set_secure_boot_state"))
    }
    /// Attaches the image at `image_url` as the node's virtual `device` (one of
    /// [`VMEDIA_DEVICES`], API 1.89). Like `set_boot_device`, what it returns are
    /// `driver_internal_info` keys for the conductor to record under its lock.
    async fn attach_virtual_media(
        &self,
        node: &Node,
        device: BootDevice,
        image_url: &str,
    ) -> Result<JsonObject, DriverError>;
    /// Detaches the virtual media of `devices`, or all of it when None; what it returns is
    /// recorded as for `attach_virtual_media`.
    async fn detach_virtual_media(
        &self,
        node: &Node,
        devices: Option<&[BootDevice]>,
    ) -> Result<JsonObject, DriverError>;
    /// The node's virtual media (API 1.93), each `{"media_types", "inserted", "image"}` as
    /// Ironic's Redfish driver reports them.
    async fn get_virtual_media(&self, node: &Node) -> Result<Vec<Value>, DriverError>;
}

/// Ironic's UnsupportedDriverExtension from a driver: the call `extension` is not offered.
pub fn unsupported(node: &Node, extension: &str) -> DriverError {
    DriverError::Unsupported {
        driver: node.driver.clone(),
        extension: extension.to_owned(),
    }
}

pub use crate::node::management::{
    BootDevice, BootDeviceSetting, BootMode, IndicatorInfo, IndicatorState, Indicators,
    VMEDIA_DEVICES, refuse_unstable,
};

/// A vendor passthru method and how it is called: Ironic's `@passthru` metadata
/// (`ironic/drivers/base.py`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct VendorMethod {
    pub name: &'static str,
    /// The HTTP methods it answers, upper case.
    pub http_methods: &'static [&'static str],
    /// Runs in the conductor's worker pool after the reply (202), or while the client waits
    /// (200 with its return value).
    pub asynchronous: bool,
    pub description: &'static str,
    /// The return value is the response body as it is (a file), not JSON.
    pub attach: bool,
    /// Holds the node's lock while it runs (node methods only; a method without it runs on a
    /// shared lock, which takes nothing).
    pub require_exclusive_lock: bool,
}

impl VendorMethod {
    /// The method's entry in `GET .../vendor_passthru/methods`; driver methods have no lock to
    /// speak of.
    pub fn metadata(&self, node_method: bool) -> Value {
        let mut entry = serde_json::json!({
            "http_methods": self.http_methods,
            "async": self.asynchronous,
            "description": self.description,
            "attach": self.attach,
        });
        if node_method {
            entry["require_exclusive_lock"] = self.require_exclusive_lock.into();
        }
        entry
    }
}

/// Vendor passthru: methods a driver offers beyond Ironic's interfaces, relayed from the API
/// without the conductor looking into their arguments or results.
#[async_trait]
pub trait VendorInterface: Send + Sync + 'static {
    fn name(&self) -> &'static str;
    /// The methods called on a node (Ironic's `vendor_routes`).
    fn methods(&self) -> &'static [VendorMethod];
    /// The methods called on the driver, without a node (Ironic's `driver_routes`); none
    /// unless an interface says otherwise.
    fn driver_methods(&self) -> &'static [VendorMethod] {
        &[]
    }
    /// Checks a node method's arguments before the call is accepted (a failure is the caller's
    /// 400); no hardware access.
    fn validate(&self, node: &Node, method: &str, args: &JsonObject) -> Result<(), DriverError>;
    /// Runs a node method; its return value is what a synchronous method answers.
    async fn call(
        &self,
        node: &Node,
        method: &str,
        http_method: &str,
        args: JsonObject,
    ) -> Result<Value, DriverError>;
    /// Checks a driver method's arguments, as [`validate`](Self::validate) does.
    fn driver_validate(&self, method: &str, _args: &JsonObject) -> Result<(), DriverError> {
        Err(no_handler(method))
    }
    /// Runs a driver method.
    async fn driver_call(
        &self,
        method: &str,
        _http_method: &str,
        _args: JsonObject,
    ) -> Result<Value, DriverError> {
        Err(no_handler(method))
    }
}

/// `no-vendor`: no methods, so every call is refused before it reaches the interface, as
/// Ironic's `NoVendor` (whose routes are empty) refuses it.
pub struct NoVendor;

#[async_trait]
impl VendorInterface for NoVendor {
    fn name(&self) -> &'static str {
        "no-vendor"
    }

    fn methods(&self) -> &'static [VendorMethod] {
        &[]
    }

    fn validate(&self, _: &Node, method: &str, _: &JsonObject) -> Result<(), DriverError> {
        Err(no_handler(method))
    }

    async fn call(
        &self,
        _: &Node,
        method: &str,
        _: &str,
        _: JsonObject,
    ) -> Result<Value, DriverError> {
        Err(no_handler(method))
    }
}

/// Ironic's refusal of a vendor method the interface does not have.
pub fn no_handler(method: &str) -> DriverError {
    DriverError::InvalidParameterValue(format!("No handler for method {method}"))
}

#[async_trait]
pub trait DeployInterface: Send + Sync + 'static {
    fn name(&self) -> &'static str;
    fn properties(&self) -> Properties;
    /// Synchronous checks before a deploy is accepted (a failure is the caller's 400).
    fn validate(&self, node: &Node) -> Result<(), DriverError>;
    /// Prepares the environment; a failure is "Failed to prepare to deploy: ...".
    async fn prepare(&self, node: &Node) -> Result<(), DriverError>;
    /// Whether cleaning boots the deploy ramdisk and runs this interface's clean steps in its
    /// agent, waiting in `clean wait` (Ironic's agent-based deploy interfaces); the default
    /// cleans out of band, at once.
    fn cleans_in_band(&self) -> bool {
        false
    }
    /// Prepares in-band cleaning (Ironic's `prepare_cleaning`): an in-band interface boots the
    /// ramdisk, whose agent's first heartbeat continues the cleaning. Not called when a manual
    /// cleaning disables the ramdisk (API 1.70). The default needs nothing.
    async fn prepare_cleaning(
        &self,
        _node: &Node,
        _ctx: &StepContext<'_>,
    ) -> Result<StepDone, DriverError> {
        Ok(StepDone::done())
    }
    /// Reads the clean steps the booted ramdisk's agent offers (Ironic's `_refresh_clean_steps`),
    /// with what to remember of them; automated cleaning runs those of priority above 0. The
    /// default offers none.
    async fn refresh_clean_steps(
        &self,
        _node: &Node,
        _ctx: &StepContext<'_>,
    ) -> Result<(Vec<CleanStep>, StepDone), DriverError> {
        Ok((Vec::new(), StepDone::done()))
    }
    /// Where a clean step that waits (for the agent's command) stands; the default has none.
    async fn poll_clean_step(
        &self,
        _node: &Node,
        _interface: &str,
        _step: &str,
    ) -> Result<StepPoll, DriverError> {
        Ok(StepPoll::Finished)
    }
    async fn deploy(&self, node: &Node) -> Result<DeployOutcome, DriverError>;
    /// The deploy steps it offers (Ironic's `get_deploy_steps`): by default the core step,
    /// `deploy.deploy` at priority 100, which is [`DeployInterface::deploy`].
    fn deploy_steps(&self) -> Vec<DriverStep> {
        vec![DriverStep::CORE]
    }
    /// Runs one of its [`deploy_steps`](DeployInterface::deploy_steps). The default offers only
    /// the core step, which is [`DeployInterface::deploy`].
    async fn execute_step(
        &self,
        node: &Node,
        step: &DeployStep,
        _ctx: &StepContext<'_>,
    ) -> Result<StepDone, DriverError> {
        if step.interface == DriverStep::CORE.interface && step.step == DriverStep::CORE.step {
            return Ok(match self.deploy(node).await? {
                DeployOutcome::Done => StepDone::done(),
                DeployOutcome::Wait => StepDone::wait(),
            });
        }
        Err(DriverError::Failed(format!(
            "Deploy step {}.{} is not offered by the {} deploy interface.",
            step.interface,
            step.step,
            self.name()
        )))
    }
    /// Where `step`, which waits, stands now. The default: a step that waits is finished when
    /// the node's agent has called back (recorded its `agent_url`).
    async fn poll_step(&self, node: &Node, _step: &DeployStep) -> Result<StepPoll, DriverError> {
        Ok(if node.driver_internal_info.contains_key("agent_url") {
            StepPoll::Finished
        } else {
            StepPoll::Running
        })
    }
    /// The clean steps it offers: by default the disk erasures, which do nothing on fake
    /// hardware (a manual cleaning may name them; Ferrum runs no automated clean steps).
    fn clean_steps(&self) -> &'static [DriverStep] {
        ERASE_STEPS
    }
    /// Runs one of its [`clean_steps`](DeployInterface::clean_steps) (or, in band, one its
    /// agent offers); by default nothing.
    async fn execute_clean_step(
        &self,
        _node: &Node,
        _step: &str,
        _args: &JsonObject,
        _ctx: &StepContext<'_>,
    ) -> Result<StepDone, DriverError> {
        Ok(StepDone::done())
    }
    async fn tear_down(&self, node: &Node) -> Result<(), DriverError>;
    /// Undoes, once the node is off, what booting the ramdisk or the instance left on the
    /// machine (the deploy ISO in a virtual CD): at the end of in-band cleaning and at
    /// tear-down (Ironic's boot interface's `clean_up_ramdisk` and `clean_up_instance`). The
    /// default has nothing to undo.
    async fn clean_up_boot(&self, _node: &Node, _driver: &Driver) -> Result<(), DriverError> {
        Ok(())
    }
    /// Undoes `prepare` after a failure; best effort.
    async fn clean_up(&self, node: &Node) -> Result<(), DriverError>;
}

/// An interface whose calls are clean steps (Ironic's BIOS and firmware interfaces, as Ferrum
/// has them): the steps it offers and how one runs. A `no-*` one ([`NoSteps`]) offers none.
#[async_trait]
pub trait StepInterface: Send + Sync + 'static {
    fn name(&self) -> &'static str;
    /// The clean steps it offers.
    fn clean_steps(&self) -> &'static [DriverStep];
    /// Checks a step's arguments before a cleaning is accepted (a failure is the caller's 400);
    /// the step is one of [`clean_steps`](StepInterface::clean_steps), its required arguments
    /// present.
    fn check_step(&self, _step: &str, _args: &JsonObject) -> Result<(), DriverError> {
        Ok(())
    }
    /// Runs one of its clean steps.
    async fn execute_clean_step(
        &self,
        node: &Node,
        step: &str,
        args: &JsonObject,
    ) -> Result<StepDone, DriverError>;
}

/// `no-bios`, `no-firmware`: no steps, so a cleaning naming one is refused when it is asked
/// for (Ironic's `NoBIOS`, `NoFirmware`, whose methods are not clean steps).
pub struct NoSteps(pub &'static str);

#[async_trait]
impl StepInterface for NoSteps {
    fn name(&self) -> &'static str {
        self.0
    }

    fn clean_steps(&self) -> &'static [DriverStep] {
        &[]
    }

    async fn execute_clean_step(
        &self,
        node: &Node,
        step: &str,
        _args: &JsonObject,
    ) -> Result<StepDone, DriverError> {
        Err(unsupported(node, step))
    }
}

/// The interfaces one node uses.
#[derive(Clone)]
pub struct Driver {
    pub power: Arc<dyn PowerInterface>,
    pub management: Arc<dyn ManagementInterface>,
    pub boot: Arc<dyn BootInterface>,
    pub deploy: Arc<dyn DeployInterface>,
    pub vendor: Arc<dyn VendorInterface>,
    pub bios: Arc<dyn StepInterface>,
    pub firmware: Arc<dyn StepInterface>,
}

impl Driver {
    /// Every clean step the node's interfaces offer (deploy, bios, firmware): the one list a
    /// manual cleaning's steps are checked against (Ironic's `_get_cleaning_steps`).
    pub fn clean_steps(&self) -> Vec<DriverStep> {
        let mut steps = self.deploy.clean_steps().to_vec();
        steps.extend_from_slice(self.bios.clean_steps());
        steps.extend_from_slice(self.firmware.clean_steps());
        steps
    }

    /// Checks the arguments of one of [`clean_steps`](Driver::clean_steps) with its interface.
    pub fn check_clean_step(
        &self,
        interface: &str,
        step: &str,
        args: &JsonObject,
    ) -> Result<(), DriverError> {
        match interface {
            "bios" => self.bios.check_step(step, args),
            "firmware" => self.firmware.check_step(step, args),
            _ => Ok(()),
        }
    }

    /// Runs one of [`clean_steps`](Driver::clean_steps) on its interface.
    pub async fn execute_clean_step(
        &self,
        node: &Node,
        interface: &str,
        step: &str,
        args: &JsonObject,
        ctx: &StepContext<'_>,
    ) -> Result<StepDone, DriverError> {
        match interface {
            "deploy" => self.deploy.execute_clean_step(node, step, args, ctx).await,
            "bios" => self.bios.execute_clean_step(node, step, args).await,
            "firmware" => self.firmware.execute_clean_step(node, step, args).await,
            other => Err(unsupported(node, &format!("{other}.{step}"))),
        }
    }
}

/// Ironic's UnsupportedDriverExtension when the node's interface of `kind` is a `no-*` one:
/// those refuse every call (Ironic's `drivers/modules/noop.py`).
pub fn require_interface(node: &Node, kind: InterfaceKind) -> Result<(), Error> {
    if node.interfaces.get(kind).starts_with("no-") {
        return Err(Error::UnsupportedDriverExtension {
            driver: node.driver.clone(),
            extension: kind.name().to_owned(),
        });
    }
    Ok(())
}
