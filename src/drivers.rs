//! Hardware drivers: the power, management and deploy interfaces, and the hardware types that
//! bundle them. A driver sees a node (read-only) and talks to hardware; it never touches the
//! database or the state machine: the conductor does both around it.

pub mod direct;
pub mod fake;
pub mod raid;

use std::{
    collections::BTreeMap,
    sync::{Arc, LazyLock},
    time::Duration,
};

use async_trait::async_trait;

use crate::{
    error::Error,
    node::{InterfaceKind, Interfaces, Node, PowerState},
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
}

/// What an interface reads from a node's `driver_info`: each property's name and what it means
/// (Ironic's `get_properties()`, shown by GET /v1/drivers/{name}/properties).
pub type Properties = &'static [(&'static str, &'static str)];

/// The outcome of a deploy: done, or waiting for an agent to call back (`wait call-back`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeployOutcome {
    Done,
    Wait,
}

#[async_trait]
pub trait PowerInterface: Send + Sync + 'static {
    fn name(&self) -> &'static str;
    fn properties(&self) -> Properties;
    /// Checks `driver_info` has what this interface needs; no hardware access.
    fn validate(&self, node: &Node) -> Result<(), DriverError>;
    async fn get_power_state(&self, node: &Node) -> Result<PowerState, DriverError>;
    async fn set_power_state(
        &self,
        node: &Node,
        target: PowerState,
        timeout: Duration,
    ) -> Result<(), DriverError>;
    async fn reboot(&self, node: &Node, timeout: Duration) -> Result<(), DriverError>;
}

pub trait ManagementInterface: Send + Sync + 'static {
    fn name(&self) -> &'static str;
    fn properties(&self) -> Properties;
    fn validate(&self, node: &Node) -> Result<(), DriverError>;
}

#[async_trait]
pub trait DeployInterface: Send + Sync + 'static {
    fn name(&self) -> &'static str;
    fn properties(&self) -> Properties;
    /// Synchronous checks before a deploy is accepted (a failure is the caller's 400).
    fn validate(&self, node: &Node) -> Result<(), DriverError>;
    /// Prepares the environment; a failure is "Failed to prepare to deploy: ...".
    async fn prepare(&self, node: &Node) -> Result<(), DriverError>;
    async fn deploy(&self, node: &Node) -> Result<DeployOutcome, DriverError>;
    async fn tear_down(&self, node: &Node) -> Result<(), DriverError>;
    /// Undoes `prepare` after a failure; best effort.
    async fn clean_up(&self, node: &Node) -> Result<(), DriverError>;
}

/// A hardware type: the interfaces it supports, the first of each being its default.
pub struct HardwareType {
    pub name: &'static str,
    /// The passive interfaces ([`InterfaceKind::PASSIVE`]): names only, the first of each the
    /// default. Ferrum's are no-ops or not supported (`no-*`), and read no properties (as
    /// Ironic's fake, `no-*`, `noop` and `flat` ones).
    pub passive: &'static [(InterfaceKind, &'static [&'static str])],
    pub power: Vec<Arc<dyn PowerInterface>>,
    pub management: Vec<Arc<dyn ManagementInterface>>,
    pub deploy: Vec<Arc<dyn DeployInterface>>,
}

impl HardwareType {
    /// The names of the interfaces of `kind` this type supports, the default first.
    pub fn interface_names(&self, kind: InterfaceKind) -> Vec<&'static str> {
        match kind {
            InterfaceKind::Deploy => self.deploy.iter().map(|i| i.name()).collect(),
            InterfaceKind::Power => self.power.iter().map(|i| i.name()).collect(),
            InterfaceKind::Management => self.management.iter().map(|i| i.name()).collect(),
            InterfaceKind::Bios
            | InterfaceKind::Boot
            | InterfaceKind::Console
            | InterfaceKind::Inspect
            | InterfaceKind::Network
            | InterfaceKind::Raid
            | InterfaceKind::Rescue
            | InterfaceKind::Storage
            | InterfaceKind::Vendor => self
                .passive
                .iter()
                .find(|(k, _)| *k == kind)
                .map(|(_, names)| names.to_vec())
                .unwrap_or_default(),
        }
    }

    /// Ironic's driver properties (`hardware_type.get_properties`): those of the default
    /// interface of each kind, by name. The passive interfaces read none.
    pub fn properties(&self) -> BTreeMap<&'static str, &'static str> {
        let defaults = [
            self.power.first().map(|i| i.properties()),
            self.management.first().map(|i| i.properties()),
            self.deploy.first().map(|i| i.properties()),
        ];
        defaults
            .into_iter()
            .flatten()
            .flat_map(|p| p.iter().copied())
            .collect()
    }
}

/// The interfaces one node uses.
#[derive(Clone)]
pub struct Driver {
    pub power: Arc<dyn PowerInterface>,
    pub management: Arc<dyn ManagementInterface>,
    pub deploy: Arc<dyn DeployInterface>,
}

/// The hardware types this conductor has enabled.
pub struct Registry {
    types: BTreeMap<&'static str, HardwareType>,
}

impl Registry {
    /// Every hardware type Ferrum ships (today `fake-hardware`, always enabled).
    pub fn builtin() -> Self {
        Self::with_fake(None)
    }

    /// The built-in hardware types, the fake deploy waiting at `gate` (for tests; see
    /// [`fake::DeployGate`]).
    pub fn with_deploy_gate(gate: fake::DeployGate) -> Self {
        Self::with_fake(Some(gate))
    }

    fn with_fake(gate: Option<fake::DeployGate>) -> Self {
        let mut types = BTreeMap::new();
        let fake = fake::hardware_type(gate);
        types.insert(fake.name, fake);
        Registry { types }
    }

    pub fn names(&self) -> Vec<String> {
        self.types.keys().map(|n| (*n).to_owned()).collect()
    }

    /// The hardware type named `driver`, if this registry has it.
    pub fn get(&self, driver: &str) -> Option<&HardwareType> {
        self.types.get(driver)
    }

    fn hardware_type(&self, driver: &str) -> Result<&HardwareType, Error> {
        self.get(driver).ok_or_else(|| {
            Error::NoValidHost(format!(
                "No conductor service registered which supports driver {driver} for conductor group \"\"."
            ))
        })
    }

    /// The interface of `kind` for `driver`: `wanted`, or the hardware type's default when None;
    /// an error naming it when the hardware type does not have it.
    pub fn resolve(
        &self,
        driver: &str,
        kind: InterfaceKind,
        wanted: Option<&str>,
    ) -> Result<String, Error> {
        let hw = self.hardware_type(driver)?;
        choose(kind.name(), driver, wanted, &hw.interface_names(kind))
    }

    /// Every interface of a node of `driver`: `wanted(kind)` where it names one, else the
    /// defaults. The first unsupported one, in [`InterfaceKind::ALL`] order, is the error.
    pub fn resolve_all<'a>(
        &self,
        driver: &str,
        wanted: impl Fn(InterfaceKind) -> Option<&'a str>,
    ) -> Result<Interfaces, Error> {
        let pick = |kind| self.resolve(driver, kind, wanted(kind));
        Ok(Interfaces {
            deploy: pick(InterfaceKind::Deploy)?,
            power: pick(InterfaceKind::Power)?,
            management: pick(InterfaceKind::Management)?,
            bios: pick(InterfaceKind::Bios)?,
            boot: pick(InterfaceKind::Boot)?,
            console: pick(InterfaceKind::Console)?,
            inspect: pick(InterfaceKind::Inspect)?,
            network: pick(InterfaceKind::Network)?,
            raid: pick(InterfaceKind::Raid)?,
            rescue: pick(InterfaceKind::Rescue)?,
            storage: pick(InterfaceKind::Storage)?,
            vendor: pick(InterfaceKind::Vendor)?,
        })
    }

    /// The interfaces of `node`.
    pub fn for_node(&self, node: &Node) -> Result<Driver, Error> {
        let hw = self.hardware_type(&node.driver)?;
        fn find<T: ?Sized>(
            kind: &str,
            wanted: &str,
            available: &[Arc<T>],
            name: impl Fn(&T) -> &'static str,
        ) -> Result<Arc<T>, Error> {
            available
                .iter()
                .find(|i| name(i) == wanted)
                .cloned()
                .ok_or_else(|| {
                    Error::InvalidParameterValue(format!(
                        "The {kind} interface {wanted} is not enabled for this node's driver."
                    ))
                })
        }
        Ok(Driver {
            power: find("power", &node.interfaces.power, &hw.power, |i| i.name())?,
            management: find(
                "management",
                &node.interfaces.management,
                &hw.management,
                |i| i.name(),
            )?,
            deploy: find("deploy", &node.interfaces.deploy, &hw.deploy, |i| i.name())?,
        })
    }
}

/// The hardware types of this build, for the API to describe (their interfaces' names and
/// properties: facts of the build, the same in the API and in every conductor of one release).
/// The API reads it and never calls an interface. Ironic's API reads the same facts from the
/// conductors' rows and, for properties, by RPC; Ferrum's hardware types are compiled in.
pub fn catalogue() -> &'static Registry {
    static CATALOGUE: LazyLock<Registry> = LazyLock::new(Registry::builtin);
    &CATALOGUE
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

/// The interface `wanted` among `names` (the first being the default), or the error Ironic
/// gives for one the hardware type does not have.
fn choose(kind: &str, driver: &str, wanted: Option<&str>, names: &[&str]) -> Result<String, Error> {
    match wanted {
        None => names
            .first()
            .map(|n| (*n).to_owned())
            .ok_or_else(|| Error::internal(format!("{driver} has no {kind} interface"))),
        Some(w) if names.contains(&w) => Ok(w.to_owned()),
        Some(w) => Err(Error::InvalidParameterValue(format!(
            "Could not find the following interface in the 'ironic.hardware.interfaces.{kind}' entrypoint: {w}. Valid interfaces are {}.",
            names.join(", ")
        ))),
    }
}
