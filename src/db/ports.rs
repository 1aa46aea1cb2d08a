//! Queries on `ports` and `portgroups`. Creating a port needs no exclusion (a shared lock in
//! Ironic); updating or deleting one is a change of its node's children (`db::children`). The
//! foreign keys keep a port from outliving its node.

use diesel::{prelude::*, result::DatabaseErrorKind};
use diesel_async::RunQueryDsl;

use super::{Db, with_conn, with_write_result};
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
    let found: Option<Port> = with_conn!(db, |conn| ports::table
        .filter(ports::uuid.eq(uuid.to_ascii_lowercase()))
        .select(Port::as_select())
        .first(conn)
        .await
        .optional()?);
    found.ok_or_else(|| port_not_found(uuid))
}

/// A port by UUID or, when `ident` does not look like one, by name (API 1.88 gave ports names;
/// Ironic looks a name up at any version, as `Port.get` does). An `ident` that is neither is
/// Ironic's 400 for a path argument that is not a UUID or a logical name.
pub async fn find_port(db: &Db, ident: &str) -> Result<Port> {
    if uuid::Uuid::try_parse(ident).is_ok() {
        return get_port(db, ident).await;
    }
    let logical = !ident.is_empty()
        && ident.len() <= 255
        && ident
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~'));
    if !logical {
        return Err(Error::InvalidParameterValue(format!(
            "Expected UUID or name for port_ident: {ident}"
        )));
    }
    let found: Option<Port> = with_conn!(db, |conn| ports::table
        .filter(ports::name.eq(ident))
        .select(Port::as_select())
        .first(conn)
        .await
        .optional()?);
    found.ok_or_else(|| port_not_found(ident))
}

/// A portgroup by UUID or, when `ident` does not look like one, by name.
pub async fn get_portgroup(db: &Db, ident: &str) -> Result<Portgroup> {
    let by_uuid = uuid::Uuid::try_parse(ident).is_ok();
    let found: Option<Portgroup> = with_conn!(db, |conn| {
        let q = portgroups::table
            .select(Portgroup::as_select())
            .into_boxed();
        let q = if by_uuid {
            q.filter(portgroups::uuid.eq(ident.to_ascii_lowercase()))
        } else {
            q.filter(portgroups::name.eq(ident))
        };
        q.first(conn).await.optional()?
    });
    found.ok_or_else(|| portgroup_not_found(ident))
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
    shards: Option<&[String]>,
    groups: Option<&[String]>,
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

/// What a port or portgroup listing can be sorted by.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SortKey {
    Id,
    Uuid,
    Address,
    CreatedAt,
}

impl SortKey {
    pub const NAMES: &[&str] = &["id", "uuid", "address", "created_at"];

    pub fn parse(key: &str) -> Option<SortKey> {
        Some(match key {
            "id" => SortKey::Id,
            "uuid" => SortKey::Uuid,
            "address" => SortKey::Address,
            "created_at" => SortKey::CreatedAt,
            _ => return None,
        })
    }
}

/// One page of ports matching `filter`, ordered by `sort` (then id), after the port `marker`.
pub async fn list_ports(
    db: &Db,
    filter: &PortFilter,
    sort: SortKey,
    descending: bool,
    limit: i64,
    marker: Option<&str>,
) -> Result<Vec<Port>> {
    let marker = match marker {
        Some(m) => Some(get_port(db, m).await?),
        None => None,
    };
    let m = marker.as_ref();
    let of_nodes = nodes_in(
        db,
        filter.node_shard_in.as_deref(),
        filter.node_conductor_group_in.as_deref(),
    )
    .await?;
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
        let q = match sort {
            SortKey::Id => super::order_by_id!(q, ports::id, descending, m.map(|m| m.id)),
            SortKey::Uuid => super::order_after!(
                q,
                ports::uuid,
                ports::id,
                descending,
                m.map(|m| (m.uuid.clone(), m.id))
            ),
            SortKey::Address => super::order_after!(
                q,
                ports::address,
                ports::id,
                descending,
                m.map(|m| (m.address.clone(), m.id))
            ),
            SortKey::CreatedAt => super::order_after!(
                q,
                ports::created_at,
                ports::id,
                descending,
                m.map(|m| (m.created_at, m.id))
            ),
        };
        q.limit(limit).load(conn).await?
    }))
}

/// One page of portgroups matching `filter`, ordered by `sort` (then id), after the portgroup
/// `marker`.
pub async fn list_portgroups(
    db: &Db,
    filter: &PortgroupFilter,
    sort: SortKey,
    descending: bool,
    limit: i64,
    marker: Option<&str>,
) -> Result<Vec<Portgroup>> {
    let marker = match marker {
        Some(m) => Some(get_portgroup(db, m).await?),
        None => None,
    };
    let m = marker.as_ref();
    let of_nodes = nodes_in(
        db,
        filter.node_shard_in.as_deref(),
        filter.node_conductor_group_in.as_deref(),
    )
    .await?;
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
        let q = match sort {
            SortKey::Id => super::order_by_id!(q, portgroups::id, descending, m.map(|m| m.id)),
            SortKey::Uuid => super::order_after!(
                q,
                portgroups::uuid,
                portgroups::id,
                descending,
                m.map(|m| (m.uuid.clone(), m.id))
            ),
            SortKey::Address => super::order_after_nullable!(
                q,
                portgroups::address,
                portgroups::id,
                descending,
                m.map(|m| (m.address.clone(), m.id))
            ),
            SortKey::CreatedAt => super::order_after!(
                q,
                portgroups::created_at,
                portgroups::id,
                descending,
                m.map(|m| (m.created_at, m.id))
            ),
        };
        q.limit(limit).load(conn).await?
    }))
}

/// Inserts a port and reads it back. A duplicate address or UUID is a 409; a node or portgroup
/// that is gone (the foreign keys) is a 400, as Ironic answers a create that names a missing one.
pub async fn insert_port(db: &Db, port: &Port) -> Result<Port> {
    let inserted = with_write_result!(db, |conn| diesel::insert_into(ports::table)
        .values(port)
        .execute(conn)
        .await?);
    match inserted {
        Ok(_) => get_port(db, &port.uuid).await,
        Err(e) => Err(port_write_error(
            e,
            &port.uuid,
            &port.address,
            port.name.as_deref(),
        )),
    }
}

/// Inserts a portgroup and reads it back, as [`insert_port`].
pub async fn insert_portgroup(db: &Db, portgroup: &Portgroup) -> Result<Portgroup> {
    let inserted = with_write_result!(db, |conn| diesel::insert_into(portgroups::table)
        .values(portgroup)
        .execute(conn)
        .await?);
    match inserted {
        Ok(_) => get_portgroup(db, &portgroup.uuid).await,
        Err(e) => Err(portgroup_write_error(
            e,
            &portgroup.uuid,
            portgroup.address.as_deref(),
            portgroup.name.as_deref(),
        )),
    }
}

pub(super) fn port_write_error(
    e: diesel::result::Error,
    uuid: &str,
    address: &str,
    name: Option<&str>,
) -> Error {
    use diesel::result::Error::DatabaseError;
    match e {
        DatabaseError(DatabaseErrorKind::UniqueViolation, info) => {
            let what = info.message();
            if what.contains("address") {
                Error::Conflict(format!("A port with MAC address {address} already exists."))
            } else if what.contains("name") {
                Error::Conflict(format!(
                    "A port with name {} already exists.",
                    name.unwrap_or_default()
                ))
            } else {
                Error::Conflict(format!("A port with UUID {uuid} already exists."))
            }
        }
        DatabaseError(DatabaseErrorKind::ForeignKeyViolation, _) => Error::InvalidParameterValue(
            format!("The node or portgroup of port {uuid} does not exist (any more)."),
        ),
        other => other.into(),
    }
}

pub(super) fn portgroup_write_error(
    e: diesel::result::Error,
    uuid: &str,
    address: Option<&str>,
    name: Option<&str>,
) -> Error {
    use diesel::result::Error::DatabaseError;
    match e {
        DatabaseError(DatabaseErrorKind::UniqueViolation, info) => {
            let what = info.message();
            if what.contains("address") {
                Error::Conflict(format!(
                    "A portgroup with MAC address {} already exists.",
                    address.unwrap_or_default()
                ))
            } else if what.contains("name") {
                Error::Conflict(format!(
                    "A portgroup with name {} already exists.",
                    name.unwrap_or_default()
                ))
            } else {
                Error::Conflict(format!("A portgroup with UUID {uuid} already exists."))
            }
        }
        DatabaseError(DatabaseErrorKind::ForeignKeyViolation, _) => Error::InvalidParameterValue(
            format!("The node of portgroup {uuid} does not exist (any more)."),
        ),
        other => other.into(),
    }
}
