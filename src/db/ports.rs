//! Queries on `ports` and `portgroups`. Creating a port needs no exclusion (a shared lock in
//! Ironic); updating or deleting one is a change of its node's children (`db::children`). The
//! foreign keys keep a port from outliving its node.

use diesel::{prelude::*, result::DatabaseErrorKind};
use diesel_async::RunQueryDsl;

use super::{Db, listing::Page, with_conn};
use crate::{
    error::{Error, Result},
    ports::{Port, Portgroup},
    schema::{nodes, portgroups, ports},
};

pub fn port_not_found(ident: &str) -> Error {
    Error::NotFound(format!("Port {ident} could not be found."))
}

pub fn portgroup_not_found(ident: &str) -> Error {
    Error::NotFound(format!("Portgroup {ident} could not be found."))
}

pub async fn get_port(db: &Db, uuid: &str) -> Result<Port> {
    super::by_uuid_or_name!(db, ports, Port, uuid, true).ok_or_else(|| port_not_found(uuid))
}

/// A port by UUID or, when `ident` does not look like one, by name (API 1.88 gave ports names;
/// Ironic looks a name up at any version, as `Port.get` does). An `ident` that is neither is
/// Ironic's 400 for a path argument that is not a UUID or a logical name.
pub async fn find_port(db: &Db, ident: &str) -> Result<Port> {
    let by_uuid = uuid::Uuid::try_parse(ident).is_ok();
    let logical = !ident.is_empty()
        && ident.len() <= 255
        && ident
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~'));
    if !by_uuid && !logical {
        return Err(Error::InvalidParameterValue(format!(
            "Expected UUID or name for port_ident: {ident}"
        )));
    }
    super::by_uuid_or_name!(db, ports, Port, ident, by_uuid).ok_or_else(|| port_not_found(ident))
}

/// A portgroup by UUID or, when `ident` does not look like one, by name.
pub async fn get_portgroup(db: &Db, ident: &str) -> Result<Portgroup> {
    let by_uuid = uuid::Uuid::try_parse(ident).is_ok();
    super::by_uuid_or_name!(db, portgroups, Portgroup, ident, by_uuid)
        .ok_or_else(|| portgroup_not_found(ident))
}

/// The nodes (at most two: more than one is already too many) with a port of one of
/// `addresses` (normalized MACs), for the agent's lookup.
pub async fn nodes_with_addresses(db: &Db, addresses: &[String]) -> Result<Vec<String>> {
    Ok(with_conn!(db, |conn| ports::table
        .filter(ports::address.eq_any(addresses))
        .select(ports::node_uuid)
        .distinct()
        .limit(2)
        .load(conn)
        .await?))
}

/// What a port listing is narrowed to.
#[derive(Debug, Clone, Default)]
pub struct PortFilter {
    pub node_uuid: Option<String>,
    pub portgroup_uuid: Option<String>,
    pub address: Option<String>,
    /// Ports of the nodes in one of these shards (API 1.82).
    pub node_shard_in: Option<Vec<String>>,
    /// Ports of the nodes in one of these conductor groups (lower-cased, as stored; API 1.99).
    pub node_conductor_group_in: Option<Vec<String>>,
    /// Ports whose description contains this text (API 1.97).
    pub description_contains: Option<String>,
}

/// What a portgroup listing is narrowed to.
#[derive(Debug, Clone, Default)]
pub struct PortgroupFilter {
    pub node_uuid: Option<String>,
    pub address: Option<String>,
    /// Portgroups of the nodes in one of these shards (API 1.106).
    pub node_shard_in: Option<Vec<String>>,
    /// Portgroups of the nodes in one of these conductor groups (API 1.99).
    pub node_conductor_group_in: Option<Vec<String>>,
}

/// The UUIDs of the nodes in one of `shards` and in one of `groups` (each when given): the nodes
/// whose children a listing keeps (a statement of its own: the schema declares no join). None
/// when neither is given.
async fn nodes_in(
    db: &Db,
    shards: &Option<Vec<String>>,
    groups: &Option<Vec<String>>,
) -> Result<Option<Vec<String>>> {
    if shards.is_none() && groups.is_none() {
        return Ok(None);
    }
    Ok(Some(with_conn!(db, |conn| {
        let mut q = nodes::table.select(nodes::uuid).into_boxed();
        if let Some(shards) = shards {
            q = q.filter(nodes::shard.eq_any(shards));
        }
        if let Some(groups) = groups {
            q = q.filter(nodes::conductor_group.eq_any(groups));
        }
        q.load(conn).await?
    })))
}

super::listing::sort_keys! {
    /// What a port or portgroup listing can be sorted by.
    pub enum SortKey { Id = "id", Uuid = "uuid", Address = "address", CreatedAt = "created_at", }
}

/// One page of the ports matching `filter`.
pub async fn list_ports(
    db: &Db,
    filter: &PortFilter,
    page: &Page<'_, SortKey>,
) -> Result<Vec<Port>> {
    let marker = page.marker_row(|m| get_port(db, m)).await?;
    let of_nodes = nodes_in(db, &filter.node_shard_in, &filter.node_conductor_group_in).await?;
    Ok(with_conn!(db, |conn| {
        let mut q = ports::table.select(Port::as_select()).into_boxed();
        if let Some(v) = &filter.node_uuid {
            q = q.filter(ports::node_uuid.eq(v));
        }
        if let Some(v) = &filter.portgroup_uuid {
            q = q.filter(ports::portgroup_uuid.eq(v));
        }
        if let Some(v) = &filter.address {
            q = q.filter(ports::address.eq(v));
        }
        if let Some(v) = &of_nodes {
            q = q.filter(ports::node_uuid.eq_any(v));
        }
        if let Some(v) = &filter.description_contains {
            q = q.filter(
                ports::description
                    .like(super::nodes::like_containing(v))
                    .escape('\\'),
            );
        }
        let q = super::listing::sorted_page!(q, ports, page, marker.as_ref(), SortKey {
            Uuid => uuid, Address => address, CreatedAt => created_at
        });
        q.load(conn).await?
    }))
}

/// One page of the portgroups matching `filter` (a portgroup's address may be null).
pub async fn list_portgroups(
    db: &Db,
    filter: &PortgroupFilter,
    page: &Page<'_, SortKey>,
) -> Result<Vec<Portgroup>> {
    let marker = page.marker_row(|m| get_portgroup(db, m)).await?;
    let of_nodes = nodes_in(db, &filter.node_shard_in, &filter.node_conductor_group_in).await?;
    Ok(with_conn!(db, |conn| {
        let mut q = portgroups::table
            .select(Portgroup::as_select())
            .into_boxed();
        if let Some(v) = &filter.node_uuid {
            q = q.filter(portgroups::node_uuid.eq(v));
        }
        if let Some(v) = &filter.address {
            q = q.filter(portgroups::address.eq(v));
        }
        if let Some(v) = &of_nodes {
            q = q.filter(portgroups::node_uuid.eq_any(v));
        }
        let q = super::listing::sorted_page!(q, portgroups, page, marker.as_ref(), SortKey {
            Uuid => uuid, CreatedAt => created_at
        } nullable {
            Address => address
        });
        q.load(conn).await?
    }))
}

/// Inserts a port and reads it back. A duplicate address or UUID is a 409; a node or portgroup
/// that is gone (the foreign keys) is a 400, as Ironic answers a create that names a missing one.
pub async fn insert_port(db: &Db, port: &Port) -> Result<Port> {
    super::insert_and_get!(db, ports, port, get_port, |e| {
        port_write_error(e, &port.uuid, &port.address, port.name.as_deref())
    })
}

/// Inserts a portgroup and reads it back, as [`insert_port`].
pub async fn insert_portgroup(db: &Db, portgroup: &Portgroup) -> Result<Portgroup> {
    super::insert_and_get!(db, portgroups, portgroup, get_portgroup, |e| {
        let (address, name) = (portgroup.address.as_deref(), portgroup.name.as_deref());
        portgroup_write_error(e, &portgroup.uuid, address, name)
    })
}

pub(super) fn port_write_error(
    e: diesel::result::Error,
    uuid: &str,
    address: &str,
    name: Option<&str>,
) -> Error {
    write_error(e, "port", "node or portgroup", uuid, address, name)
}

pub(super) fn portgroup_write_error(
    e: diesel::result::Error,
    uuid: &str,
    address: Option<&str>,
    name: Option<&str>,
) -> Error {
    let address = address.unwrap_or_default();
    write_error(e, "portgroup", "node", uuid, address, name)
}

/// The error of a write of the port or portgroup (`what`) `uuid`, in Ironic's words: a duplicate
/// MAC address, name or UUID is a 409; a row its foreign keys name (`parents`) that is gone, a
/// 400.
fn write_error(
    e: diesel::result::Error,
    what: &str,
    parents: &str,
    uuid: &str,
    address: &str,
    name: Option<&str>,
) -> Error {
    use diesel::result::Error::DatabaseError;
    match e {
        DatabaseError(DatabaseErrorKind::UniqueViolation, info) => {
            let on = info.message();
            if on.contains("address") {
                Error::Conflict(format!(
                    "A {what} with MAC address {address} already exists."
                ))
            } else if on.contains("name") {
                Error::Conflict(format!(
                    "A {what} with name {} already exists.",
                    name.unwrap_or_default()
                ))
            } else {
                Error::Conflict(format!("A {what} with UUID {uuid} already exists."))
            }
        }
        DatabaseError(DatabaseErrorKind::ForeignKeyViolation, _) => Error::InvalidParameterValue(
            format!("The {parents} of {what} {uuid} does not exist (any more)."),
        ),
        other => other.into(),
    }
}
