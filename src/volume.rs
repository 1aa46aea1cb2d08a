//! A node's volume resources (API 1.32): its connectors (how the node reaches remote storage:
//! an initiator such as an IQN or a WWPN) and its targets (the volumes it boots from or
//! attaches, in boot order).
//!
//! Both name their node by UUID, which never changes. Updating or deleting one is a change of its
//! node, made by the node's conductor under the node's exclusion (`db::children`); a create is
//! written by the API itself, as Ironic's API does (no lock, no conductor).
//!
//! Must not: run queries, know HTTP.

mod connector;
mod target;

pub use self::{
    connector::{CONNECTOR_SUMMARY, VolumeConnector, VolumeConnectorChanges},
    target::{TARGET_SUMMARY, VolumeTarget, VolumeTargetChanges},
};
