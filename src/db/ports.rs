//! Queries on `ports` and `portgroups`.
//!
//! A port or portgroup changes (or goes) only in [`change_children`]: one transaction that first
//! bumps its node's `version`, conditional on nobody holding the node's lock and on the version
//! its caller read, then decides on the node's ports and portgroups as they are (read inside the
//! transaction) and writes the decision. So such a change is ordered with every other write of the
//! node, as Ironic orders it by taking the node's exclusive lock, and no transaction stays open
//! across anything but the database. Creating a port needs no exclusion (a shared lock in
//! Ironic); the foreign keys keep a port from outliving its node.

use diesel::{prelude::*, result::DatabaseErrorKind};
use diesel_async::{AsyncConnection, RunQueryDsl};

use super::{Db, with_conn, with_conn_result};
use crate::{
    error::{Error, Result},
    ports::{Port, PortChanges, Portgroup, PortgroupChanges},
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

/// One page of portgroups (of the node `node_uuid`, or with the `address`, when given).
pub async fn list_portgroups(
    db: &Db,
    node_uuid: Option<&str>,
    address: Option<&str>,
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
    Ok(with_conn!(db, |conn| {
        let mut q = portgroups::table
            .select(Portgroup::as_select())
            .into_boxed();
        if let Some(v) = node_uuid {
            q = q.filter(portgroups::node_uuid.eq(v));
        }
        if let Some(v) = address {
            q = q.filter(portgroups::address.eq(v));
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

/// Loads a node's ports and portgroups, in id order, on the connection `$conn` (a macro, so that
/// it compiles for each backend inside [`with_conn!`] bodies and transactions alike).
macro_rules! load_children {
    ($conn:expr, $node_uuid:expr) => {{
        let ports: Vec<Port> = ports::table
            .filter(ports::node_uuid.eq($node_uuid))
            .order(ports::id.asc())
            .select(Port::as_select())
            .load($conn)
            .await?;
        let portgroups: Vec<Portgroup> = portgroups::table
            .filter(portgroups::node_uuid.eq($node_uuid))
            .order(portgroups::id.asc())
            .select(Portgroup::as_select())
            .load($conn)
            .await?;
        (ports, portgroups)
    }};
}

/// A node's ports and portgroups, in id order.
pub async fn children(db: &Db, node_uuid: &str) -> Result<(Vec<Port>, Vec<Portgroup>)> {
    Ok(with_conn!(db, |conn| load_children!(conn, node_uuid)))
}

/// Inserts a port and reads it back. A duplicate address or UUID is a 409; a node or portgroup
/// that is gone (the foreign keys) is a 400, as Ironic answers a create that names a missing one.
pub async fn insert_port(db: &Db, port: &Port) -> Result<Port> {
    let inserted = with_conn_result!(db, |conn| diesel::insert_into(ports::table)
        .values(port)
        .execute(conn)
        .await?);
    match inserted {
        Ok(_) => get_port(db, &port.uuid).await,
        Err(e) => Err(port_write_error(e, &port.uuid, &port.address)),
    }
}

/// Inserts a portgroup and reads it back, as [`insert_port`].
pub async fn insert_portgroup(db: &Db, portgroup: &Portgroup) -> Result<Portgroup> {
    let inserted = with_conn_result!(db, |conn| diesel::insert_into(portgroups::table)
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

fn port_write_error(e: diesel::result::Error, uuid: &str, address: &str) -> Error {
    use diesel::result::Error::DatabaseError;
    match e {
        DatabaseError(DatabaseErrorKind::UniqueViolation, info) => {
            if info.message().contains("address") {
                Error::Conflict(format!("A port with MAC address {address} already exists."))
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

fn portgroup_write_error(
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

/// A change of a node's port or portgroup that [`change_children`] writes.
#[derive(Debug, Clone)]
pub enum ChildWrite {
    UpdatePort(Port, PortChanges),
    DeletePort(Port),
    UpdatePortgroup(Portgroup, PortgroupChanges),
    DeletePortgroup(Portgroup),
}

/// Decides on the ports and portgroups of the node `node_id` (UUID `node_uuid`) and writes the
/// decision, in one transaction that first bumps the node's version, conditional on nobody
/// holding its lock and on it being at `version`. None when the node is locked or changed since
/// (nothing was written: read it again and retry); otherwise the writes made. `decide`'s error
/// is returned with nothing written.
pub async fn change_children(
    db: &Db,
    node_id: i32,
    node_uuid: &str,
    version: i64,
    mut decide: impl FnMut(&[Port], &[Portgroup]) -> Result<Vec<ChildWrite>> + Send,
) -> Result<Option<Vec<ChildWrite>>> {
    let now = crate::node::now();
    // The error of `decide` or of a write, carried out of the transaction that it rolled back.
    let mut refused: Option<Error> = None;
    let outcome = with_conn_result!(db, |conn| {
        let refused = &mut refused;
        let decide = &mut decide;
        conn.transaction::<_, diesel::result::Error, _>(async |conn| {
            let bumped = diesel::update(
                nodes::table
                    .filter(nodes::id.eq(node_id))
                    .filter(nodes::reservation.is_null())
                    .filter(nodes::version.eq(version)),
            )
            .set(nodes::version.eq(nodes::version + 1))
            .execute(conn)
            .await?;
            if bumped != 1 {
                return Ok(None);
            }
            let (ports, portgroups) = load_children!(conn, node_uuid);
            let writes = match decide(&ports, &portgroups) {
                Ok(writes) => writes,
                Err(e) => {
                    *refused = Some(e);
                    return Err(diesel::result::Error::RollbackTransaction);
                }
            };
            for write in &writes {
                let written = match write {
                    ChildWrite::UpdatePort(port, changes) if !changes.is_empty() => {
                        let changes = PortChanges {
                            updated_at: Some(Some(now)),
                            ..changes.clone()
                        };
                        diesel::update(ports::table.find(port.id))
                            .set(&changes)
                            .execute(conn)
                            .await
                            .map_err(|e: diesel::result::Error| {
                                let address = changes.address.as_deref().unwrap_or_default();
                                port_write_error(e, &port.uuid, address)
                            })
                    }
                    ChildWrite::UpdatePortgroup(pg, changes) if !changes.is_empty() => {
                        let changes = PortgroupChanges {
                            updated_at: Some(Some(now)),
                            ..changes.clone()
                        };
                        diesel::update(portgroups::table.find(pg.id))
                            .set(&changes)
                            .execute(conn)
                            .await
                            .map_err(|e: diesel::result::Error| {
                                portgroup_write_error(
                                    e,
                                    &pg.uuid,
                                    changes.address.as_ref().and_then(Option::as_deref),
                                    changes.name.as_ref().and_then(Option::as_deref),
                                )
                            })
                    }
                    ChildWrite::UpdatePort(..) | ChildWrite::UpdatePortgroup(..) => Ok(0),
                    ChildWrite::DeletePort(port) => diesel::delete(ports::table.find(port.id))
                        .execute(conn)
                        .await
                        .map_err(Error::from),
                    ChildWrite::DeletePortgroup(pg) => {
                        diesel::delete(portgroups::table.find(pg.id))
                            .execute(conn)
                            .await
                            .map_err(Error::from)
                    }
                };
                if let Err(e) = written {
                    *refused = Some(e);
                    return Err(diesel::result::Error::RollbackTransaction);
                }
            }
            Ok(Some(writes))
        })
        .await?
    });
    match (outcome, refused) {
        (_, Some(refused)) => Err(refused),
        (outcome, None) => Ok(outcome?),
    }
}
