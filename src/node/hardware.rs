//! The hardware types of this build as data: each one's interfaces of every kind (the default
//! first) and the `driver_info` properties its default interfaces read. It is what the API shows
//! of a driver where no conductor's row says more (GET /v1/drivers/{name}, its properties),
//! without calling one: the drivers make it (`drivers::catalogue`), the service hands it to the
//! API, which does not import the drivers.

use std::collections::BTreeMap;

use super::InterfaceKind;

/// Every hardware type of the build, by name.
pub type Catalogue = BTreeMap<&'static str, HardwareTypeFacts>;

/// One hardware type as the catalogue describes it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HardwareTypeFacts {
    /// The names of its interfaces of each kind, the default first.
    pub interfaces: BTreeMap<InterfaceKind, Vec<&'static str>>,
    /// What its default interfaces read from a node's `driver_info`: name, meaning (Ironic's
    /// `get_properties()`).
    pub properties: BTreeMap<&'static str, &'static str>,
}

impl HardwareTypeFacts {
    /// The names of its interfaces of `kind`, the default first.
    pub fn interface_names(&self, kind: InterfaceKind) -> &[&'static str] {
        self.interfaces.get(&kind).map_or(&[], Vec::as_slice)
    }
}
