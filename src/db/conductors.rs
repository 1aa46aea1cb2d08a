//! Queries on `conductors`: registration, heartbeat, and who is alive.
//!
//! One definition of alive, used by the hash ring and the API alike: `online` and heard from
//! within the heartbeat timeout. (Ironic has two in `ironic/db/sqlalchemy/api.py`: its query for
//! offline conductors ignores `online` on MySQL, its query for active ones requires it.)

use std::time::Duration;

use diesel::{prelude::*, result::DatabaseErrorKind};
use diesel_async::RunQueryDsl;

use super::{
    Db,
    models::{Conductor, ConductorRow},
    with_conn, with_write, with_write_result,
};
use crate::{
    error::{Error, Result},
    node::now,
    schema::conductors,
};

/// What [`claim`] found.
#[derive(Debug)]
pub enum Claim {
    /// This process now holds the host name's lease.
    Claimed,
    /// Another process holds it, or held it and has not released it: its row as read.
    Held(Conductor),
}

/// Takes the lease on `host` for the process `instance`, as one compare-and-set: won only when
/// no row exists (insert), the row was released by a clean stop (`instance` NULL), or it is
/// exactly the row `expired` that the caller watched go stale (same instance, same renewal time).
/// Two processes claiming at the same instant: one statement wins, the other reads `Held`.
/// The row is written offline: the conductor goes online once it can serve.
pub async fn claim(
    db: &Db,
    host: &str,
    instance: &str,
    drivers: &[String],
    hardware_interfaces: &serde_json::Value,
    group: &str,
    expired: Option<&Conductor>,
) -> Result<Claim> {
    let drivers = serde_json::to_string(drivers).map_err(Error::internal)?;
    let interfaces = hardware_interfaces.to_string();
    let stamp = now();
    let values = (
        conductors::instance.eq(instance),
        conductors::drivers.eq(&drivers),
        conductors::hardware_interfaces.eq(Some(&interfaces)),
        conductors::conductor_group.eq(group),
        conductors::online.eq(false),
        conductors::updated_at.eq(stamp),
    );
    // A watched row without an instance was released: the first form takes it.
    let watched = expired.and_then(|c| c.instance.as_deref().map(|i| (i, c.updated_at)));
    let updated = match watched {
        None => with_write!(db, |conn| diesel::update(
            conductors::table
                .filter(conductors::hostname.eq(host))
                .filter(conductors::instance.is_null())
        )
        .set(values)
        .execute(conn)
        .await?),
        Some((seen, renewed)) => with_write!(db, |conn| diesel::update(
            conductors::table
                .filter(conductors::hostname.eq(host))
                .filter(conductors::instance.eq(seen))
                .filter(conductors::updated_at.eq(renewed))
        )
        .set(values)
        .execute(conn)
        .await?),
    };
    if updated == 1 {
        return Ok(Claim::Claimed);
    }
    let inserted = with_write_result!(db, |conn| diesel::insert_into(conductors::table)
        .values((
            conductors::hostname.eq(host),
            conductors::instance.eq(instance),
            conductors::drivers.eq(&drivers),
            conductors::hardware_interfaces.eq(Some(&interfaces)),
            conductors::conductor_group.eq(group),
            conductors::online.eq(false),
            conductors::created_at.eq(stamp),
            conductors::updated_at.eq(stamp),
        ))
        .execute(conn)
        .await?);
    match inserted {
        Ok(_) => Ok(Claim::Claimed),
        Err(diesel::result::Error::DatabaseError(DatabaseErrorKind::UniqueViolation, _)) => {
            Ok(Claim::Held(get(db, host).await?))
        }
        Err(e) => Err(e.into()),
    }
}

/// Renews the lease of `instance` on `host` and says whether it serves the hash rings
/// (`online`). False when the lease is no longer this process's: another one claimed the name
/// after this one's lease ran out.
pub async fn renew(db: &Db, host: &str, instance: &str, online: bool) -> Result<bool> {
    let updated = with_write!(db, |conn| diesel::update(
        conductors::table
            .filter(conductors::hostname.eq(host))
            .filter(conductors::instance.eq(instance))
    )
    .set((
        conductors::online.eq(online),
        conductors::updated_at.eq(now()),
    ))
    .execute(conn)
    .await?);
    Ok(updated == 1)
}

/// Gives up the lease of `instance` on `host` (a clean stop, with no node left locked): a
/// process starting under this name claims it at once.
pub async fn release(db: &Db, host: &str, instance: &str) -> Result<()> {
    with_write!(db, |conn| diesel::update(
        conductors::table
            .filter(conductors::hostname.eq(host))
            .filter(conductors::instance.eq(instance))
    )
    .set((
        conductors::online.eq(false),
        conductors::instance.eq(None::<String>),
    ))
    .execute(conn)
    .await?);
    Ok(())
}

/// Host names whose lease is live: renewed within `timeout` by a process that has not released
/// it. A draining conductor (offline, still finishing its work) is among them; only a host not
/// here is gone, and only its locks may be taken over. (A row of a release before leases has no
/// instance and counts while it is online and fresh.)
pub async fn leased_hosts(db: &Db, timeout: Duration) -> Result<Vec<String>> {
    let since = now() - chrono::Duration::from_std(timeout).map_err(Error::internal)?;
    Ok(with_conn!(db, |conn| conductors::table
        .filter(conductors::updated_at.ge(since))
        .filter(
            conductors::instance
                .is_not_null()
                .or(conductors::online.eq(true))
        )
        .select(conductors::hostname)
        .load::<String>(conn)
        .await?))
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
