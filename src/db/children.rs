//! A node's children (ports, portgroups, volume connectors and targets) change, or go, only in
//! [`change_children`]: one transaction that first bumps the node's `version`, conditional on
//! nobody holding the node's lock and on the version its caller read, then decides on the node's
//! children as they are (read inside the transaction) and writes the decision. So such a change
//! is ordered with every other write of the node, as Ironic orders it by taking the node's
//! exclusive lock, and no transaction stays open across anything but the database.

use diesel::prelude::*;
use diesel_async::{AsyncConnection, RunQueryDsl};
use tokio::time::Instant;

use super::{
    Db, classify,
    deadline::{self, BeforeDeadline},
    ports::{get_port, port_write_error, portgroup_not_found, portgroup_write_error},
    volume::{connector_write_error, target_write_error},
    with_conn, with_write_result,
};
use crate::{
    error::{Error, Result},
    ports::{Port, PortChanges, Portgroup, PortgroupChanges},
    schema::{nodes, portgroups, ports, volume_connectors, volume_targets},
    volume::{VolumeConnector, VolumeConnectorChanges, VolumeTarget, VolumeTargetChanges},
};

/// A node's children as read in one go, each kind in id order.
#[derive(Debug, Clone, Default)]
pub struct Children {
    pub ports: Vec<Port>,
    pub portgroups: Vec<Portgroup>,
    pub connectors: Vec<VolumeConnector>,
    pub targets: Vec<VolumeTarget>,
}

/// Loads a node's children on the connection `$conn` (a macro, so that it compiles for each
/// backend inside [`with_conn!`] bodies and transactions alike).
macro_rules! load_children {
    ($conn:expr, $node_uuid:expr) => {{
        macro_rules! of_node {
            ($table:ident, $row:ty) => {
                $table::table
                    .filter($table::node_uuid.eq($node_uuid))
                    .order($table::id.asc())
                    .select(<$row>::as_select())
                    .load($conn)
                    .await?
            };
        }
        Children {
            ports: of_node!(ports, Port),
            portgroups: of_node!(portgroups, Portgroup),
            connectors: of_node!(volume_connectors, VolumeConnector),
            targets: of_node!(volume_targets, VolumeTarget),
        }
    }};
}

/// A node's children.
pub async fn children(db: &Db, node_uuid: &str) -> Result<Children> {
    Ok(with_conn!(db, |conn| load_children!(conn, node_uuid)))
}

/// Inserts `port`, a member of a portgroup, once `decide` accepted it given that portgroup and
/// its member ports as they are; a portgroup that does not exist is the caller's 400. One
/// transaction that first takes the row of the port's node by a write that changes nothing
/// (a row lock on MySQL, the write lock on SQLite) and then reads: so it is ordered with
/// [`change_children`], whose bump of the node takes the same row first, and with other such
/// inserts, and a member's check (Ironic's `validate_port_physnet`) sees the others as they
/// are. The node's data and version stay as they are: creating a port takes no exclusion of
/// its node (Ironic's shared lock), and a conductor holding the node writes on undisturbed.
pub async fn insert_member_port(
    db: &Db,
    port: &Port,
    portgroup_uuid: &str,
    mut decide: impl FnMut(&Portgroup, &[Port]) -> Result<()> + Send,
) -> Result<Port> {
    // The error of `decide` or of the insert, carried out of the transaction that it rolled back.
    let mut refused: Option<Error> = None;
    let outcome = with_write_result!(db, |conn| {
        let refused = &mut refused;
        let decide = &mut decide;
        conn.transaction::<_, diesel::result::Error, _>(async |conn| {
            diesel::update(nodes::table.filter(nodes::uuid.eq(&port.node_uuid)))
                .set(nodes::version.eq(nodes::version))
                .execute(conn)
                .await?;
            let found: Option<Portgroup> = portgroups::table
                .filter(portgroups::uuid.eq(portgroup_uuid))
                .select(Portgroup::as_select())
                .first(conn)
                .await
                .optional()?;
            let members: Vec<Port> = ports::table
                .filter(ports::portgroup_uuid.eq(portgroup_uuid))
                .order(ports::id.asc())
                .select(Port::as_select())
                .load(conn)
                .await?;
            let decided = match found {
                Some(pg) => decide(&pg, &members),
                None => Err(Error::InvalidParameterValue(
                    portgroup_not_found(portgroup_uuid).to_string(),
                )),
            };
            let inserted = match decided {
                Ok(()) => diesel::insert_into(ports::table)
                    .values(port)
                    .execute(conn)
                    .await
                    .map_err(|e| {
                        port_write_error(e, &port.uuid, &port.address, port.name.as_deref())
                    }),
                Err(e) => Err(e),
            };
            match inserted {
                Ok(_) => Ok(()),
                Err(e) => {
                    *refused = Some(e);
                    Err(diesel::result::Error::RollbackTransaction)
                }
            }
        })
        .await?
    });
    match (outcome, refused) {
        (_, Some(refused)) => Err(refused),
        (outcome, None) => {
            outcome?;
            get_port(db, &port.uuid).await
        }
    }
}

/// A change of one of a node's children that [`change_children`] writes.
#[derive(Debug, Clone)]
pub enum ChildWrite {
    UpdatePort(Port, PortChanges),
    DeletePort(Port),
    UpdatePortgroup(Portgroup, PortgroupChanges),
    DeletePortgroup(Portgroup),
    UpdateConnector(VolumeConnector, VolumeConnectorChanges),
    DeleteConnector(VolumeConnector),
    UpdateTarget(VolumeTarget, VolumeTargetChanges),
    DeleteTarget(VolumeTarget),
}

/// Decides on the children of the node `node_id` (UUID `node_uuid`) and writes the decision, in
/// one transaction that first bumps the node's version, conditional on nobody holding its lock
/// and on it being at `version`. None when the node is locked or changed since, or `deadline`
/// (the caller's) passed before the transaction could commit: nothing was written (the caller
/// tells which by the deadline); otherwise the writes made. `decide`'s error is returned with
/// nothing written.
pub async fn change_children(
    db: &Db,
    node_id: i32,
    node_uuid: &str,
    version: i64,
    deadline: Option<Instant>,
    mut decide: impl FnMut(&Children) -> Result<Vec<ChildWrite>> + Send,
) -> Result<Option<Vec<ChildWrite>>> {
    if deadline::passed(deadline) {
        return Ok(None);
    }
    let now = crate::node::now();
    // The error of `decide` or of a write, carried out of the transaction that it rolled back.
    let mut refused: Option<Error> = None;
    // The transaction rolled back because the deadline passed before it could commit.
    let mut too_late = false;
    let outcome = with_write_result!(db, until deadline, |conn| {
        let refused = &mut refused;
        let too_late = &mut too_late;
        let decide = &mut decide;
        conn.transaction::<_, diesel::result::Error, _>(async |conn| {
            let bumped = diesel::update(
                nodes::table
                    .filter(nodes::id.eq(node_id))
                    .filter(nodes::reservation.is_null())
                    .filter(nodes::version.eq(version))
                    .filter(BeforeDeadline::new(deadline)),
            )
            .set(nodes::version.eq(nodes::version + 1))
            .execute(conn)
            .await?;
            if bumped != 1 {
                return Ok(None);
            }
            let children = load_children!(conn, node_uuid);
            let mut writes = match decide(&children) {
                Ok(writes) => writes,
                Err(e) => {
                    *refused = Some(e);
                    return Err(diesel::result::Error::RollbackTransaction);
                }
            };
            // An update stamps `updated_at`, in what is written and in what is returned.
            for write in &mut writes {
                let written = match write {
                    ChildWrite::UpdatePort(port, changes) if !changes.is_empty() => {
                        changes.updated_at = Some(Some(now));
                        diesel::update(ports::table.find(port.id))
                            .set(&*changes)
                            .execute(conn)
                            .await
                            .map_err(|e: diesel::result::Error| {
                                let address = changes.address.as_deref().unwrap_or_default();
                                let name = changes.name.clone().flatten();
                                port_write_error(e, &port.uuid, address, name.as_deref())
                            })
                    }
                    ChildWrite::UpdatePortgroup(pg, changes) if !changes.is_empty() => {
                        changes.updated_at = Some(Some(now));
                        diesel::update(portgroups::table.find(pg.id))
                            .set(&*changes)
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
                    ChildWrite::UpdateConnector(connector, changes) if !changes.is_empty() => {
                        changes.updated_at = Some(Some(now));
                        diesel::update(volume_connectors::table.find(connector.id))
                            .set(&*changes)
                            .execute(conn)
                            .await
                            .map_err(|e: diesel::result::Error| {
                                let mut after = connector.clone();
                                changes.clone().set_into(&mut after);
                                connector_write_error(e, &after)
                            })
                    }
                    ChildWrite::UpdateTarget(target, changes) if !changes.is_empty() => {
                        changes.updated_at = Some(Some(now));
                        diesel::update(volume_targets::table.find(target.id))
                            .set(&*changes)
                            .execute(conn)
                            .await
                            .map_err(|e: diesel::result::Error| {
                                let mut after = target.clone();
                                changes.clone().set_into(&mut after);
                                target_write_error(e, &after)
                            })
                    }
                    ChildWrite::UpdatePort(..)
                    | ChildWrite::UpdatePortgroup(..)
                    | ChildWrite::UpdateConnector(..)
                    | ChildWrite::UpdateTarget(..) => Ok(0),
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
                    ChildWrite::DeleteConnector(connector) => {
                        diesel::delete(volume_connectors::table.find(connector.id))
                            .execute(conn)
                            .await
                            .map_err(Error::from)
                    }
                    ChildWrite::DeleteTarget(target) => {
                        diesel::delete(volume_targets::table.find(target.id))
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
            // A write above may have waited on a row lock: commit only if the caller still waits.
            if deadline::passed(deadline) {
                *too_late = true;
                return Err(diesel::result::Error::RollbackTransaction);
            }
            Ok(Some(writes))
        })
        .await?
    });
    match (outcome, refused) {
        (_, Some(refused)) => Err(refused),
        (_, None) if too_late => Ok(None),
        (outcome, None) => match outcome {
            Err(e) if classify(&e).retryable() && deadline::passed(deadline) => Ok(None),
            outcome => Ok(outcome?),
        },
    }
}
