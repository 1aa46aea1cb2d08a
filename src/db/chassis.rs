//! Queries on `chassis`. The API writes chassis directly (no node lock is involved); the foreign
//! key from `nodes.chassis_uuid` refuses deleting a chassis that still has nodes.

use diesel::{prelude::*, result::DatabaseErrorKind};
use diesel_async::RunQueryDsl;

use super::{Db, duplicate_is_conflict, listing::Page, with_conn, with_write, with_write_result};
use crate::{
    chassis::{self, Chassis, ChassisChanges},
    error::{Error, Result},
    schema::chassis as table,
};

pub async fn get(db: &Db, uuid: &str) -> Result<Chassis> {
    let found: Option<Chassis> = with_conn!(db, |conn| table::table
        .filter(table::uuid.eq(uuid.to_ascii_lowercase()))
        .select(Chassis::as_select())
        .first(conn)
        .await
        .optional()?);
    found.ok_or_else(|| chassis::not_found(uuid))
}

super::listing::sort_keys! {
    /// What a chassis (or volume) listing can be sorted by.
    pub enum SortKey { Id = "id", Uuid = "uuid", CreatedAt = "created_at", }
}

/// One page of chassis.
pub async fn list(db: &Db, page: &Page<'_, SortKey>) -> Result<Vec<Chassis>> {
    let marker = page.marker_row(|m| get(db, m)).await?;
    Ok(with_conn!(db, |conn| {
        let q = table::table.select(Chassis::as_select()).into_boxed();
        let q = super::listing::sorted_page!(q, table, page, marker.as_ref(), SortKey {
            Uuid => uuid, CreatedAt => created_at
        });
        q.load(conn).await?
    }))
}

/// Inserts a chassis and reads it back; a duplicate UUID is a 409.
pub async fn insert(db: &Db, chassis: &Chassis) -> Result<Chassis> {
    super::insert_and_get!(db, table, chassis, get, |e| duplicate_is_conflict(
        e,
        || { format!("A chassis with UUID {} already exists.", chassis.uuid) }
    ))
}

pub async fn update(db: &Db, chassis: &Chassis, changes: ChassisChanges) -> Result<Chassis> {
    if !changes.is_empty() {
        let changes = ChassisChanges {
            updated_at: Some(Some(crate::node::now())),
            ..changes
        };
        with_write!(db, |conn| diesel::update(table::table.find(chassis.id))
            .set(&changes)
            .execute(conn)
            .await?);
    }
    get(db, &chassis.uuid).await
}

/// Deletes a chassis that no node is in (ChassisNotEmpty, a 400, otherwise).
pub async fn delete(db: &Db, uuid: &str) -> Result<()> {
    let deleted = with_write_result!(db, |conn| diesel::delete(
        table::table.filter(table::uuid.eq(uuid))
    )
    .execute(conn)
    .await?);
    match deleted {
        Ok(1) => Ok(()),
        Ok(_) => Err(chassis::not_found(uuid)),
        Err(diesel::result::Error::DatabaseError(DatabaseErrorKind::ForeignKeyViolation, _)) => {
            Err(Error::InvalidParameterValue(format!(
                "Cannot complete the requested action because chassis {uuid} contains nodes."
            )))
        }
        Err(e) => Err(e.into()),
    }
}
