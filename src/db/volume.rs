//! Queries on `volume_connectors` and `volume_targets`. A create is one insert (the API's, as
//! in Ironic); an update or delete is a change of the node's children (`db::children`).

use diesel::{prelude::*, result::DatabaseErrorKind};
use diesel_async::RunQueryDsl;

use super::{Db, with_conn, with_write_result};
use crate::{
    error::{Error, Result},
    schema::{volume_connectors, volume_targets},
    volume::{VolumeConnector, VolumeTarget},
};

pub fn connector_not_found(ident: &str) -> Error {
    Error::NotFound(format!("Volume connector {ident} could not be found."))
}

pub fn target_not_found(ident: &str) -> Error {
    Error::NotFound(format!("Volume target {ident} could not be found."))
}

/// A volume listing is sorted as a chassis listing is (Ironic takes any column but the JSON
/// documents; these are the ones sorted by in practice).
pub use super::chassis::SortKey;

/// One page of a volume table (`$table`, rows `$row`): of the node `$node` when Some, ordered by
/// `$sort`, after the row `$marker`. A macro over the two tables, which share these columns.
macro_rules! list_page {
    ($db:expr, $table:ident, $row:ty, $node:expr, $sort:expr, $desc:expr, $limit:expr, $marker:expr) => {{
        let m: Option<&$row> = $marker;
        Ok(with_conn!($db, |conn| {
            let mut q = $table::table.select(<$row>::as_select()).into_boxed();
            if let Some(v) = $node {
                q = q.filter($table::node_uuid.eq(v));
            }
            let q = match $sort {
                SortKey::Id => super::order_by_id!(q, $table::id, $desc, m.map(|m| m.id)),
                SortKey::Uuid => super::order_after!(
                    q,
                    $table::uuid,
                    $table::id,
                    $desc,
                    m.map(|m| (m.uuid.clone(), m.id))
                ),
                SortKey::CreatedAt => super::order_after!(
                    q,
                    $table::created_at,
                    $table::id,
                    $desc,
                    m.map(|m| (m.created_at, m.id))
                ),
            };
            q.limit($limit).load(conn).await?
        }))
    }};
}

pub async fn get_connector(db: &Db, uuid: &str) -> Result<VolumeConnector> {
    let found: Option<VolumeConnector> = with_conn!(db, |conn| volume_connectors::table
        .filter(volume_connectors::uuid.eq(uuid.to_ascii_lowercase()))
        .select(VolumeConnector::as_select())
        .first(conn)
        .await
        .optional()?);
    found.ok_or_else(|| connector_not_found(uuid))
}

pub async fn get_target(db: &Db, uuid: &str) -> Result<VolumeTarget> {
    let found: Option<VolumeTarget> = with_conn!(db, |conn| volume_targets::table
        .filter(volume_targets::uuid.eq(uuid.to_ascii_lowercase()))
        .select(VolumeTarget::as_select())
        .first(conn)
        .await
        .optional()?);
    found.ok_or_else(|| target_not_found(uuid))
}

/// One page of connectors (of the node `node_uuid` when given), after the connector `marker`.
pub async fn list_connectors(
    db: &Db,
    node_uuid: Option<&str>,
    sort: SortKey,
    descending: bool,
    limit: i64,
    marker: Option<&str>,
) -> Result<Vec<VolumeConnector>> {
    let marker = match marker {
        Some(m) => Some(get_connector(db, m).await?),
        None => None,
    };
    list_page!(
        db,
        volume_connectors,
        VolumeConnector,
        node_uuid,
        sort,
        descending,
        limit,
        marker.as_ref()
    )
}

/// One page of targets (of the node `node_uuid` when given), after the target `marker`.
pub async fn list_targets(
    db: &Db,
    node_uuid: Option<&str>,
    sort: SortKey,
    descending: bool,
    limit: i64,
    marker: Option<&str>,
) -> Result<Vec<VolumeTarget>> {
    let marker = match marker {
        Some(m) => Some(get_target(db, m).await?),
        None => None,
    };
    list_page!(
        db,
        volume_targets,
        VolumeTarget,
        node_uuid,
        sort,
        descending,
        limit,
        marker.as_ref()
    )
}

/// Inserts a connector and reads it back. A duplicate (type, connector ID) or UUID is a 409; a
/// node that is gone (the foreign key) is a 400, as Ironic answers a create naming a missing one.
pub async fn insert_connector(db: &Db, connector: &VolumeConnector) -> Result<VolumeConnector> {
    let inserted = with_write_result!(db, |conn| diesel::insert_into(volume_connectors::table)
        .values(connector)
        .execute(conn)
        .await?);
    match inserted {
        Ok(_) => get_connector(db, &connector.uuid).await,
        Err(e) => Err(connector_write_error(e, connector)),
    }
}

/// Inserts a target and reads it back, as [`insert_connector`].
pub async fn insert_target(db: &Db, target: &VolumeTarget) -> Result<VolumeTarget> {
    let inserted = with_write_result!(db, |conn| diesel::insert_into(volume_targets::table)
        .values(target)
        .execute(conn)
        .await?);
    match inserted {
        Ok(_) => get_target(db, &target.uuid).await,
        Err(e) => Err(target_write_error(e, target)),
    }
}

/// The error of a write of `connector` (as it would be after the write), in Ironic's words.
pub(super) fn connector_write_error(
    e: diesel::result::Error,
    connector: &VolumeConnector,
) -> Error {
    use diesel::result::Error::DatabaseError;
    match e {
        DatabaseError(DatabaseErrorKind::UniqueViolation, info) => {
            if info.message().contains("connector_id") {
                Error::Conflict(format!(
                    "A volume connector with type {} and connector ID {} already exists.",
                    connector.connector_type, connector.connector_id
                ))
            } else {
                Error::Conflict(format!(
                    "A volume connector with UUID {} already exists.",
                    connector.uuid
                ))
            }
        }
        DatabaseError(DatabaseErrorKind::ForeignKeyViolation, _) => {
            Error::InvalidParameterValue(format!(
                "The node of volume connector {} does not exist (any more).",
                connector.uuid
            ))
        }
        other => other.into(),
    }
}

/// The error of a write of `target` (as it would be after the write), in Ironic's words.
pub(super) fn target_write_error(e: diesel::result::Error, target: &VolumeTarget) -> Error {
    use diesel::result::Error::DatabaseError;
    match e {
        DatabaseError(DatabaseErrorKind::UniqueViolation, info) => {
            if info.message().contains("boot_index") {
                Error::Conflict(format!(
                    "A volume target with boot index '{}' for the same node already exists.",
                    target.boot_index
                ))
            } else {
                Error::Conflict(format!(
                    "A volume target with UUID {} already exists.",
                    target.uuid
                ))
            }
        }
        DatabaseError(DatabaseErrorKind::ForeignKeyViolation, _) => {
            Error::InvalidParameterValue(format!(
                "The node of volume target {} does not exist (any more).",
                target.uuid
            ))
        }
        other => other.into(),
    }
}
