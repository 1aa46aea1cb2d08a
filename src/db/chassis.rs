//! Queries on `chassis`. The API writes chassis directly (no node lock is involved); the foreign
//! key from `nodes.chassis_uuid` refuses deleting a chassis that still has nodes.

use diesel::{prelude::*, result::DatabaseErrorKind};
use diesel_async::RunQueryDsl;

use super::{Db, with_conn, with_write, with_write_result};
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

/// What a chassis (or volume) listing can be sorted by.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SortKey {
    Id,
    Uuid,
    CreatedAt,
}

impl SortKey {
    pub const NAMES: &[&str] = &["id", "uuid", "created_at"];

    pub fn parse(key: &str) -> Option<SortKey> {
        Some(match key {
            "id" => SortKey::Id,
            "uuid" => SortKey::Uuid,
            "created_at" => SortKey::CreatedAt,
            _ => return None,
        })
    }
}

/// One page of chassis ordered by `sort` (then id), after the chassis `marker`.
pub async fn list(
    db: &Db,
    sort: SortKey,
    descending: bool,
    limit: i64,
    marker: Option<&str>,
) -> Result<Vec<Chassis>> {
    let marker = match marker {
        Some(m) => Some(get(db, m).await?),
        None => None,
    };
    let m = marker.as_ref();
    Ok(with_conn!(db, |conn| {
        let q = table::table.select(Chassis::as_select()).into_boxed();
        let q = match sort {
            SortKey::Id => super::order_by_id!(q, table::id, descending, m.map(|m| m.id)),
            SortKey::Uuid => super::order_after!(
                q,
                table::uuid,
                table::id,
                descending,
                m.map(|m| (m.uuid.clone(), m.id))
            ),
            SortKey::CreatedAt => super::order_after!(
                q,
                table::created_at,
                table::id,
                descending,
                m.map(|m| (m.created_at, m.id))
            ),
        };
        q.limit(limit).load(conn).await?
    }))
}

/// Inserts a chassis and reads it back; a duplicate UUID is a 409.
pub async fn insert(db: &Db, chassis: &Chassis) -> Result<Chassis> {
    let inserted = with_write_result!(db, |conn| diesel::insert_into(table::table)
        .values(chassis)
        .execute(conn)
        .await?);
    match inserted {
        Ok(_) => get(db, &chassis.uuid).await,
        Err(diesel::result::Error::DatabaseError(DatabaseErrorKind::UniqueViolation, _)) => {
            Err(Error::Conflict(format!(
                "A chassis with UUID {} already exists.",
                chassis.uuid
            )))
        }
        Err(e) => Err(e.into()),
    }
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
