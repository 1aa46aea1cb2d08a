//! Queries on `volume_connectors` and `volume_targets`. A create is one insert (the API's, as
//! in Ironic); an update or delete is a change of the node's children (`db::children`).

use diesel::{prelude::*, result::DatabaseErrorKind};
use diesel_async::RunQueryDsl;

use super::{Db, listing::Page, listing::sorted_page, with_conn};
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

/// Declares, for the volume table `$table` of rows `$row` (whose 404 is `$not_found`, and whose
/// write errors `$write_error` words): `$get`, a row by UUID; `$list`, one page of the rows (of
/// the node `node_uuid` when given); and `$insert`, which inserts a row and reads it back. A
/// duplicate is a 409; a node that is gone (the foreign key) is a 400, as Ironic answers a
/// create naming a missing one. The two tables share these columns.
macro_rules! volume_queries {
    ($table:ident, $row:ident, $not_found:ident, $write_error:ident,
     $get:ident, $list:ident, $insert:ident) => {
        pub async fn $get(db: &Db, uuid: &str) -> Result<$row> {
            let found: Option<$row> = with_conn!(db, |conn| $table::table
                .filter($table::uuid.eq(uuid.to_ascii_lowercase()))
                .select($row::as_select())
                .first(conn)
                .await
                .optional()?);
            found.ok_or_else(|| $not_found(uuid))
        }

        pub async fn $list(
            db: &Db,
            node_uuid: Option<&str>,
            page: &Page<'_, SortKey>,
        ) -> Result<Vec<$row>> {
            let marker = page.marker_row(|m| $get(db, m)).await?;
            Ok(with_conn!(db, |conn| {
                let mut q = $table::table.select($row::as_select()).into_boxed();
                if let Some(v) = node_uuid {
                    q = q.filter($table::node_uuid.eq(v));
                }
                let q = sorted_page!(q, $table, page, marker.as_ref(), SortKey {
                    Uuid => uuid, CreatedAt => created_at
                });
                q.load(conn).await?
            }))
        }

        pub async fn $insert(db: &Db, row: &$row) -> Result<$row> {
            super::insert_and_get!(db, $table, row, $get, |e| $write_error(e, row))
        }
    };
}

volume_queries!(
    volume_connectors,
    VolumeConnector,
    connector_not_found,
    connector_write_error,
    get_connector,
    list_connectors,
    insert_connector
);
volume_queries!(
    volume_targets,
    VolumeTarget,
    target_not_found,
    target_write_error,
    get_target,
    list_targets,
    insert_target
);

/// The error of a write of `connector` (as it would be after the write), in Ironic's words.
pub(super) fn connector_write_error(
    e: diesel::result::Error,
    connector: &VolumeConnector,
) -> Error {
    let duplicate = format!(
        "A volume connector with type {} and connector ID {} already exists.",
        connector.connector_type, connector.connector_id
    );
    write_error(
        e,
        ("volume connector", "connector_id"),
        &connector.uuid,
        duplicate,
    )
}

/// The error of a write of `target` (as it would be after the write), in Ironic's words.
pub(super) fn target_write_error(e: diesel::result::Error, target: &VolumeTarget) -> Error {
    let duplicate = format!(
        "A volume target with boot index '{}' for the same node already exists.",
        target.boot_index
    );
    write_error(e, ("volume target", "boot_index"), &target.uuid, duplicate)
}

/// The error of a write of the volume connector or target `uuid` (`what`: its name, and the
/// column whose unique key a `duplicate` breaks): a duplicate or a UUID taken is a 409, a node
/// that is gone (the foreign key) a 400.
fn write_error(
    e: diesel::result::Error,
    (what, unique): (&str, &str),
    uuid: &str,
    duplicate: String,
) -> Error {
    use diesel::result::Error::DatabaseError;
    match e {
        DatabaseError(DatabaseErrorKind::UniqueViolation, info) => {
            if info.message().contains(unique) {
                Error::Conflict(duplicate)
            } else {
                Error::Conflict(format!("A {what} with UUID {uuid} already exists."))
            }
        }
        DatabaseError(DatabaseErrorKind::ForeignKeyViolation, _) => Error::InvalidParameterValue(
            format!("The node of {what} {uuid} does not exist (any more)."),
        ),
        other => other.into(),
    }
}
