//! Queries on `conductors`: registration, heartbeat, and who is alive.
//!
//! One definition of alive, used by the hash ring and the API alike (unlike Ironic, §12 #12):
//! `online` and heard from within the heartbeat timeout.

use std::time::Duration;

use diesel::{prelude::*, result::DatabaseErrorKind};
use diesel_async::RunQueryDsl;

use super::{
    Db,
    models::{Conductor, ConductorRow},
    now,
    schema::conductors,
    with_conn, with_conn_result,
};
use crate::error::{Error, Result};

/// Marks `host` online with the drivers it offers, creating its row on first start.
pub async fn register(db: &Db, host: &str, drivers: &[String], group: &str) -> Result<()> {
    let drivers = serde_json::to_string(drivers).map_err(Error::internal)?;
    // Portable upsert: update, else insert; a racing insert of the same host loses and updates.
    for _ in 0..2 {
        let stamp = now();
        let updated = with_conn!(db, |conn| diesel::update(
            conductors::table.filter(conductors::hostname.eq(host))
        )
        .set((
            conductors::drivers.eq(&drivers),
            conductors::conductor_group.eq(group),
            conductors::online.eq(true),
            conductors::updated_at.eq(stamp),
        ))
        .execute(conn)
        .await?);
        if updated == 1 {
            return Ok(());
        }
        let inserted = with_conn_result!(db, |conn| diesel::insert_into(conductors::table)
            .values((
                conductors::hostname.eq(host),
                conductors::drivers.eq(&drivers),
                conductors::conductor_group.eq(group),
                conductors::online.eq(true),
                conductors::created_at.eq(stamp),
                conductors::updated_at.eq(stamp),
            ))
            .execute(conn)
            .await?);
        match inserted {
            Ok(_) => return Ok(()),
            Err(diesel::result::Error::DatabaseError(DatabaseErrorKind::UniqueViolation, _)) => {}
            Err(e) => return Err(e.into()),
        }
    }
    Err(Error::internal(format!(
        "could not register conductor {host}"
    )))
}

/// The keepalive. False when the row is gone (then the caller registers again).
pub async fn heartbeat(db: &Db, host: &str) -> Result<bool> {
    let updated = with_conn!(db, |conn| diesel::update(
        conductors::table.filter(conductors::hostname.eq(host))
    )
    .set((
        conductors::online.eq(true),
        conductors::updated_at.eq(now()),
    ))
    .execute(conn)
    .await?);
    Ok(updated == 1)
}

/// Stamps `updated_at` without touching `online`: a conductor that has left the rings but is
/// still finishing its work shows it is alive (see `conductor::ensure_host_name_is_free`).
pub async fn touch(db: &Db, host: &str) -> Result<()> {
    with_conn!(db, |conn| diesel::update(
        conductors::table.filter(conductors::hostname.eq(host))
    )
    .set(conductors::updated_at.eq(now()))
    .execute(conn)
    .await?);
    Ok(())
}

/// Takes `host` out of every hash ring at once (graceful stop).
pub async fn unregister(db: &Db, host: &str) -> Result<()> {
    with_conn!(db, |conn| diesel::update(
        conductors::table.filter(conductors::hostname.eq(host))
    )
    .set(conductors::online.eq(false))
    .execute(conn)
    .await?);
    Ok(())
}

/// Conductors that are online and were heard from within `timeout`, by host name.
pub async fn list_alive(db: &Db, timeout: Duration) -> Result<Vec<Conductor>> {
    let since = now() - chrono::Duration::from_std(timeout).map_err(Error::internal)?;
    let rows: Vec<ConductorRow> = with_conn!(db, |conn| conductors::table
        .filter(conductors::online.eq(true))
        .filter(conductors::updated_at.ge(since))
        .order(conductors::hostname.asc())
        .select(ConductorRow::as_select())
        .load(conn)
        .await?);
    Ok(rows.into_iter().map(Conductor::from).collect())
}

/// Every registered conductor, by host name, after `marker` if given.
pub async fn list(db: &Db, limit: i64, marker: Option<&str>) -> Result<Vec<Conductor>> {
    let after = marker.unwrap_or("");
    let rows: Vec<ConductorRow> = with_conn!(db, |conn| conductors::table
        .filter(conductors::hostname.gt(after))
        .order(conductors::hostname.asc())
        .limit(limit)
        .select(ConductorRow::as_select())
        .load(conn)
        .await?);
    Ok(rows.into_iter().map(Conductor::from).collect())
}

pub async fn get(db: &Db, host: &str) -> Result<Conductor> {
    let row: Option<ConductorRow> = with_conn!(db, |conn| conductors::table
        .filter(conductors::hostname.eq(host))
        .select(ConductorRow::as_select())
        .first(conn)
        .await
        .optional()?);
    row.map(Conductor::from)
        .ok_or_else(|| Error::ConductorNotFound(host.to_owned()))
}
