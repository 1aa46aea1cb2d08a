//! The hardware types of this build and the registry of those a conductor enables: which
//! interfaces each type has, which the configuration enables and makes the default (Ironic's
//! `enabled_*_interfaces`, `default_*_interface`), the check that a configuration can serve,
//! the choice of a node's interfaces, and the catalogue the API describes.

use std::{
    collections::BTreeMap,
    sync::{Arc, LazyLock},
};

use serde_json::Value;

use super::{
    BootInterface, ConsoleInterface, DeployInterface, Driver, ManagementInterface, PowerInterface,
    StepInterface, VendorInterface, fake, ipmi, redfish,
};
use crate::{
    config::ConductorConfig,
    error::Error,
    node::{
        InterfaceKind, Interfaces, Node,
        hardware::{Catalogue, HardwareTypeFacts},
    },
};

/// A hardware type: the interfaces it supports, the first of each being its default.
pub struct HardwareType {
    pub name: &'static str,
    /// The passive interfaces ([`InterfaceKind::PASSIVE`]): names only, the first of each the
    /// default. Ferrum's are no-ops or not supported (`no-*`), and read no properties (as
    /// Ironic's fake, `no-*`, `noop` and `flat` ones).
    pub passive: Vec<(InterfaceKind, Vec<&'static str>)>,
    /// The console interfaces of `passive` that run something (by name): the others only
    /// record on the node.
    pub consoles: Vec<Arc<dyn ConsoleInterface>>,
    pub power: Vec<Arc<dyn PowerInterface>>,
    pub management: Vec<Arc<dyn ManagementInterface>>,
    pub boot: Vec<Arc<dyn BootInterface>>,
    pub deploy: Vec<Arc<dyn DeployInterface>>,
    pub vendor: Vec<Arc<dyn VendorInterface>>,
    pub bios: Vec<Arc<dyn StepInterface>>,
    pub firmware: Vec<Arc<dyn StepInterface>>,
}

impl HardwareType {
    /// The names of the interfaces of `kind` this type supports, the default first.
    pub fn interface_names(&self, kind: InterfaceKind) -> Vec<&'static str> {
        match kind {
            InterfaceKind::Deploy => self.deploy.iter().map(|i| i.name()).collect(),
            InterfaceKind::Power => self.power.iter().map(|i| i.name()).collect(),
            InterfaceKind::Management => self.management.iter().map(|i| i.name()).collect(),
            InterfaceKind::Boot => self.boot.iter().map(|i| i.name()).collect(),
            InterfaceKind::Vendor => self.vendor.iter().map(|i| i.name()).collect(),
            InterfaceKind::Bios => self.bios.iter().map(|i| i.name()).collect(),
            InterfaceKind::Firmware => self.firmware.iter().map(|i| i.name()).collect(),
            InterfaceKind::Console
            | InterfaceKind::Inspect
            | InterfaceKind::Network
            | InterfaceKind::Raid
            | InterfaceKind::Rescue
            | InterfaceKind::Storage => self
                .passive
                .iter()
                .find(|(k, _)| *k == kind)
                .map(|(_, names)| names.clone())
                .unwrap_or_default(),
        }
    }

    /// Keeps, of each kind, only the interfaces `config` enables, its default first (Ironic's
    /// `enabled_supported_interfaces` and `default_interface`).
    fn narrow(&mut self, config: &ConductorConfig) {
        fn keep<T>(
            items: &mut Vec<T>,
            name: impl Fn(&T) -> &str,
            enabled: Option<&[&str]>,
            default: Option<&str>,
        ) {
            if let Some(enabled) = enabled {
                items.retain(|i| enabled.contains(&name(i)));
            }
            if let Some(at) = default.and_then(|d| items.iter().position(|i| name(i) == d)) {
                items[..=at].rotate_right(1);
            }
        }
        for kind in InterfaceKind::ALL {
            let enabled = config.enabled_interfaces(kind);
            let (enabled, default) = (enabled.as_deref(), config.default_interface(kind));
            match kind {
                InterfaceKind::Deploy => keep(&mut self.deploy, |i| i.name(), enabled, default),
                InterfaceKind::Power => keep(&mut self.power, |i| i.name(), enabled, default),
                InterfaceKind::Management => {
                    keep(&mut self.management, |i| i.name(), enabled, default);
                }
                InterfaceKind::Boot => keep(&mut self.boot, |i| i.name(), enabled, default),
                InterfaceKind::Vendor => keep(&mut self.vendor, |i| i.name(), enabled, default),
                InterfaceKind::Bios => keep(&mut self.bios, |i| i.name(), enabled, default),
                InterfaceKind::Firmware => {
                    keep(&mut self.firmware, |i| i.name(), enabled, default);
                }
                InterfaceKind::Console
                | InterfaceKind::Inspect
                | InterfaceKind::Network
                | InterfaceKind::Raid
                | InterfaceKind::Rescue
                | InterfaceKind::Storage => {
                    for (_, names) in self.passive.iter_mut().filter(|(k, _)| *k == kind) {
                        keep(names, |n: &&str| *n, enabled, default);
                    }
                }
            }
        }
    }

    /// What a conductor registers of this hardware type: its default and enabled interfaces
    /// of each kind, as `/v1/drivers/<name>` shows them (Ironic's rows of
    /// `conductor_hardware_interfaces`).
    pub fn describe(&self) -> Value {
        let mut out = serde_json::Map::new();
        for kind in InterfaceKind::ALL {
            let names = self.interface_names(kind);
            out.insert(
                format!("default_{}_interface", kind.name()),
                serde_json::json!(names.first()),
            );
            out.insert(
                format!("enabled_{}_interfaces", kind.name()),
                serde_json::json!(names),
            );
        }
        Value::Object(out)
    }

    /// Ironic's driver properties (`hardware_type.get_properties`): those of the default
    /// interface of each kind, by name. The passive interfaces read none.
    pub fn properties(&self) -> BTreeMap<&'static str, &'static str> {
        let defaults = [
            self.power.first().map(|i| i.properties()),
            self.management.first().map(|i| i.properties()),
            self.boot.first().map(|i| i.properties()),
            self.deploy.first().map(|i| i.properties()),
        ];
        defaults
            .into_iter()
            .flatten()
            .flat_map(|p| p.iter().copied())
            .collect()
    }

    /// This type as data, for the API ([`catalogue`]).
    fn facts(&self) -> HardwareTypeFacts {
        HardwareTypeFacts {
            interfaces: InterfaceKind::ALL
                .into_iter()
                .map(|kind| (kind, self.interface_names(kind)))
                .collect(),
            properties: self.properties(),
        }
    }
}

/// The hardware types this conductor has enabled, each with the interfaces it enables.
pub struct Registry {
    types: BTreeMap<&'static str, HardwareType>,
    /// The interfaces of each kind enabled, whatever the hardware type: what a node naming
    /// another is told are the valid ones (Ironic's interface factory's names).
    enabled: BTreeMap<InterfaceKind, Vec<String>>,
}

impl Registry {
    /// The hardware types Ferrum ships that `config` enables (`enabled_hardware_types`), set up
    /// as it says.
    pub fn builtin(config: &ConductorConfig) -> Self {
        Self::with_fake(config, None)
    }

    /// Every hardware type of this build, enabled or not (what the API describes).
    pub const BUILT: [&'static str; 3] = crate::config::HARDWARE_TYPES;

    /// The built-in hardware types, the fake deploy waiting at `gate` (for tests; see
    /// [`fake::DeployGate`]).
    pub fn with_deploy_gate(config: &ConductorConfig, gate: fake::DeployGate) -> Self {
        Self::with_fake(config, Some(gate))
    }

    fn with_fake(config: &ConductorConfig, gate: Option<fake::DeployGate>) -> Self {
        let enabled = |name: &str| config.enabled_hardware_types.iter().any(|t| t == name);
        let mut types = BTreeMap::new();
        if enabled("fake-hardware") {
            let fake = fake::hardware_type(gate, config);
            types.insert(fake.name, fake);
        }
        if enabled("ipmi") {
            let ipmi = ipmi::hardware_type(config);
            types.insert(ipmi.name, ipmi);
        }
        if enabled("redfish") {
            let redfish = redfish::hardware_type(config);
            types.insert(redfish.name, redfish);
        }
        let mut by_kind = BTreeMap::new();
        for kind in InterfaceKind::ALL {
            let names: Vec<String> = match config.enabled_interfaces(kind) {
                Some(names) => names.into_iter().map(str::to_owned).collect(),
                None => {
                    let mut all: Vec<String> = Vec::new();
                    for name in types.values().flat_map(|hw| hw.interface_names(kind)) {
                        if !all.iter().any(|n| n == name) {
                            all.push(name.to_owned());
                        }
                    }
                    all
                }
            };
            by_kind.insert(kind, names);
        }
        for hw in types.values_mut() {
            hw.narrow(config);
        }
        Registry {
            types,
            enabled: by_kind,
        }
    }

    /// Why `config`'s interfaces cannot serve: an interface no hardware type of this build
    /// has, a default that is not enabled, or an enabled hardware type left without an
    /// interface of some kind (Ironic refuses to start its conductor for the same, with the
    /// words of `NoValidDefaultForInterface`). The setting's name and the reason.
    pub fn check_config(config: &ConductorConfig) -> Result<(), (String, String)> {
        let built = built();
        let registry = Registry::builtin(config);
        for kind in InterfaceKind::ALL {
            let key = format!("conductor.enabled_{}_interfaces", kind.name());
            let known: Vec<&str> = built
                .types
                .values()
                .flat_map(|hw| hw.interface_names(kind))
                .collect();
            for name in config.enabled_interfaces(kind).unwrap_or_default() {
                if !known.contains(&name) {
                    return Err((
                        key,
                        format!(
                            "Could not find the following items in the 'ironic.hardware.interfaces.{}' entrypoint: {name}. Ferrum has {}.",
                            kind.name(),
                            python_list(&known)
                        ),
                    ));
                }
            }
            let default = config.default_interface(kind);
            if let Some(default) = default
                && !registry.enabled[&kind].iter().any(|n| n == default)
            {
                return Err((
                    format!("conductor.default_{}_interface", kind.name()),
                    not_found(kind, default, &registry.enabled[&kind]).to_string(),
                ));
            }
            for (name, hw) in &registry.types {
                let names = hw.interface_names(kind);
                if names.is_empty() || default.is_some_and(|d| names.first() != Some(&d)) {
                    return Err((
                        key,
                        format!(
                            "For hardware type '{name}', no default value found for {} interface could be determined. Please ensure the interfaces are enabled.",
                            kind.name()
                        ),
                    ));
                }
            }
        }
        Ok(())
    }

    pub fn names(&self) -> Vec<String> {
        self.types.keys().map(|n| (*n).to_owned()).collect()
    }

    /// What a conductor registers (its row's `hardware_interfaces`): each hardware type's
    /// [`HardwareType::describe`], by name.
    pub fn describe(&self) -> Value {
        Value::Object(
            self.types
                .iter()
                .map(|(name, hw)| ((*name).to_owned(), hw.describe()))
                .collect(),
        )
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
        let names = hw.interface_names(kind);
        match wanted {
            None => names
                .first()
                .map(|n| (*n).to_owned())
                .ok_or_else(|| Error::internal(format!("{driver} has no {kind:?} interface"))),
            Some(w) if names.contains(&w) => Ok(w.to_owned()),
            Some(w) => Err(self.unavailable(driver, kind, w)),
        }
    }

    /// Ironic's refusal of an interface `wanted` that a node of `driver` cannot have: one this
    /// conductor does not enable (`InterfaceNotFoundInEntrypoint`), or one it enables that the
    /// hardware type does not support (`IncompatibleInterface`, which names the hardware
    /// type by its name where Ironic names its class).
    fn unavailable(&self, driver: &str, kind: InterfaceKind, wanted: &str) -> Error {
        let enabled = &self.enabled[&kind];
        if enabled.iter().any(|n| n == wanted) {
            return Error::InvalidParameterValue(format!(
                "{} interface implementation '{wanted}' is not supported by hardware type {driver}.",
                kind.name()
            ));
        }
        not_found(kind, wanted, enabled)
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
            firmware: pick(InterfaceKind::Firmware)?,
        })
    }

    /// The node's console interface when it runs something (`ipmitool-socat`), None when it
    /// only records on the node; one this conductor does not enable is refused as by
    /// [`Self::for_node`].
    pub fn console(&self, node: &Node) -> Result<Option<Arc<dyn ConsoleInterface>>, Error> {
        let hw = self.hardware_type(&node.driver)?;
        let wanted = node.interfaces.console.as_str();
        if !hw.interface_names(InterfaceKind::Console).contains(&wanted) {
            return Err(self.unavailable(&node.driver, InterfaceKind::Console, wanted));
        }
        Ok(hw.consoles.iter().find(|c| c.name() == wanted).cloned())
    }

    /// The names of the console interfaces that run something.
    pub fn running_console_names(&self) -> Vec<&'static str> {
        let mut names: Vec<_> = self
            .types
            .values()
            .flat_map(|hw| hw.consoles.iter().map(|c| c.name()))
            .collect();
        names.sort_unstable();
        names.dedup();
        names
    }

    /// Stops every console the hardware types started (the conductor's shutdown).
    pub async fn stop_consoles(&self) {
        for hw in self.types.values() {
            for console in &hw.consoles {
                console.stop_all().await;
            }
        }
    }

    /// The interfaces of `node`.
    pub fn for_node(&self, node: &Node) -> Result<Driver, Error> {
        let hw = self.hardware_type(&node.driver)?;
        // An interface a node was given that this conductor does not enable (any more) is
        // refused as at create (Ironic checks the node's interfaces whenever it builds its
        // driver).
        let find = |kind: InterfaceKind| {
            let wanted = node.interfaces.get(kind);
            move |names: Vec<&str>| -> Result<usize, Error> {
                names
                    .iter()
                    .position(|n| *n == wanted)
                    .ok_or_else(|| self.unavailable(&node.driver, kind, wanted))
            }
        };
        let pick = |kind: InterfaceKind| find(kind)(hw.interface_names(kind));
        Ok(Driver {
            power: hw.power[pick(InterfaceKind::Power)?].clone(),
            management: hw.management[pick(InterfaceKind::Management)?].clone(),
            boot: hw.boot[pick(InterfaceKind::Boot)?].clone(),
            deploy: hw.deploy[pick(InterfaceKind::Deploy)?].clone(),
            vendor: hw.vendor[pick(InterfaceKind::Vendor)?].clone(),
            bios: hw.bios[pick(InterfaceKind::Bios)?].clone(),
            firmware: hw.firmware[pick(InterfaceKind::Firmware)?].clone(),
        })
    }

    /// The vendor interface driver-level passthru calls go to: the hardware type's default
    /// one, as Ironic's `driver_vendor_passthru` picks it.
    pub fn default_vendor(&self, driver: &str) -> Result<Arc<dyn VendorInterface>, Error> {
        let hw = self
            .types
            .get(driver)
            .ok_or_else(|| Error::driver_not_found(driver))?;
        hw.vendor
            .first()
            .cloned()
            .ok_or_else(|| Error::internal(format!("{driver} has no vendor interface")))
    }
}

/// The hardware types of this build as data, for the API to describe (their interfaces' names
/// and properties: facts of the build, the same in the API and in every conductor of one
/// release). Ironic's API reads the same facts from the conductors' rows and, for properties, by
/// RPC; Ferrum's hardware types are compiled in.
pub fn catalogue() -> &'static Catalogue {
    static CATALOGUE: LazyLock<Catalogue> = LazyLock::new(|| {
        built()
            .types
            .iter()
            .map(|(name, hw)| (*name, hw.facts()))
            .collect()
    });
    &CATALOGUE
}

/// Every hardware type of this build with all its interfaces, enabled or not.
fn built() -> &'static Registry {
    // The fake vendor delay does not change what the API describes; every built type is in it
    // (which conductors enable one is in their rows).
    static CATALOGUE: LazyLock<Registry> = LazyLock::new(|| {
        Registry::builtin(&crate::config::ConductorConfig {
            enabled_hardware_types: Registry::BUILT.map(str::to_owned).to_vec(),
            ..crate::config::ConductorConfig::default()
        })
    });
    &CATALOGUE
}

/// Ironic's `InterfaceNotFoundInEntrypoint`: `wanted` is no enabled interface of `kind`;
/// `enabled` are (its list as Python prints one).
fn not_found(kind: InterfaceKind, wanted: &str, enabled: &[String]) -> Error {
    let enabled: Vec<&str> = enabled.iter().map(String::as_str).collect();
    Error::InvalidParameterValue(format!(
        "Could not find the following interface in the 'ironic.hardware.interfaces.{}' entrypoint: {wanted}. Valid interfaces are {}.",
        kind.name(),
        python_list(&enabled)
    ))
}

/// A list of names as Python prints it: `['a', 'b']`.
fn python_list(names: &[&str]) -> String {
    let quoted: Vec<String> = names.iter().map(|n| format!("'{n}'")).collect();
    format!("[{}]", quoted.join(", "))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn interfaces_that_cannot_serve_stop_the_start() {
        let check = |config: ConductorConfig| match Registry::check_config(&config) {
            Ok(()) => String::new(),
            Err((key, reason)) => format!("{key}: {reason}"),
        };
        let names = |n: &[&str]| Some(n.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>());
        let err = check(ConductorConfig {
            enabled_boot_interfaces: names(&["bogus"]),
            ..ConductorConfig::default()
        });
        assert!(err.contains("conductor.enabled_boot_interfaces: Could not find the following items in the 'ironic.hardware.interfaces.boot' entrypoint: bogus."), "{err}");
        // fake-hardware has no ipxe boot.
        let err = check(ConductorConfig {
            default_boot_interface: Some("ipxe".into()),
            ..ConductorConfig::default()
        });
        assert!(err.contains("For hardware type 'fake-hardware', no default value found for boot interface could be determined. Please ensure the interfaces are enabled."), "{err}");
        let err = check(ConductorConfig {
            enabled_power_interfaces: names(&["fake"]),
            ..ConductorConfig::default()
        });
        assert!(
            err.contains("For hardware type 'ipmi', no default value found for power interface"),
            "{err}"
        );
        let err = check(ConductorConfig {
            enabled_deploy_interfaces: names(&["direct"]),
            default_deploy_interface: Some("fake".into()),
            ..ConductorConfig::default()
        });
        assert!(err.contains("conductor.default_deploy_interface: Could not find the following interface in the 'ironic.hardware.interfaces.deploy' entrypoint: fake. Valid interfaces are ['direct']."), "{err}");
        // What a redfish-only conductor may default to.
        let ok = check(ConductorConfig {
            enabled_hardware_types: names(&["redfish"]).expect("names"),
            default_boot_interface: Some("redfish-virtual-media".into()),
            enabled_inspect_interfaces: names(&[" agent ", ""]),
            ..ConductorConfig::default()
        });
        assert_eq!(ok, "");
    }
}
