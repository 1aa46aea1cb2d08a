//! Queries on `allocations`. The API creates nothing here itself: a conductor inserts and
//! processes an allocation (`conductor::allocations`); the API writes only a PATCH (name, extra),
//! as Ironic's does. An active allocation's row names its node; the foreign key deletes it with
//! its node.

use diesel::{prelude::*, result::DatabaseErrorKind};
use diesel_async::RunQueryDsl;

use super::{Db, listing::Page, with_conn, with_write, with_write_result};
use crate::{
    allocation::{self, Allocation, AllocationChanges},
    error::{Error, Result},
    schema::allocations as table,
};

/// The allocation named `ident`: its UUID, or its name.
pub async fn get(db: &Db, ident: &str) -> Result<Allocation> {
    let by_uuid = uuid::Uuid::try_parse(ident).is_ok();
    super::by_uuid_or_name!(db, table, Allocation, ident, by_uuid)
        .ok_or_else(|| allocation::not_found(ident))
}

/// The allocation of the node `node_uuid`, if it has one.
pub async fn of_node(db: &Db, node_uuid: &str) -> Result<Option<Allocation>> {
    Ok(with_conn!(db, |conn| table::table
        .filter(table::node_uuid.eq(node_uuid))
        .select(Allocation::as_select())
        .first(conn)
        .await
        .optional()?))
}

/// What an allocation listing is narrowed to.
#[derive(Debug, Clone, Default)]
pub struct Filter {
    pub node_uuid: Option<String>,
    pub resource_class: Option<String>,
    pub state: Option<String>,
    pub owner: Option<String>,
}

super::listing::sort_keys! {
    /// What an allocation listing can be sorted by: Ironic sorts by any column but the JSON ones
    /// (extra, traits, candidate_nodes).
    pub enum SortKey {
        Id = "id", Uuid = "uuid", Name = "name", State = "state",
        ResourceClass = "resource_class", CreatedAt = "created_at", UpdatedAt = "updated_at",
    }
}

/// One page of the allocations matching `filter`.
pub async fn list(db: &Db, filter: &Filter, page: &Page<'_, SortKey>) -> Result<Vec<Allocation>> {
    let marker = page.marker_row(|m| get(db, m)).await?;
    Ok(with_conn!(db, |conn| {
        let mut q = table::table.select(Allocation::as_select()).into_boxed();
        if let Some(v) = &filter.node_uuid {
            q = q.filter(table::node_uuid.eq(v.clone()));
        }
        if let Some(v) = &filter.resource_class {
            q = q.filter(table::resource_class.eq(v.clone()));
        }
        if let Some(v) = &filter.state {
            q = q.filter(table::state.eq(v.clone()));
        }
        if let Some(v) = &filter.owner {
            q = q.filter(table::owner.eq(v.clone()));
        }
        let q = super::listing::sorted_page!(q, table, page, marker.as_ref(), SortKey {
            Uuid => uuid, State => state, CreatedAt => created_at
        } nullable {
            Name => name, ResourceClass => resource_class, UpdatedAt => updated_at
        });
        q.load(conn).await?
    }))
}

/// A duplicate UUID or name is Ironic's AllocationAlreadyExists / AllocationDuplicateName (409).
fn duplicate(allocation: &Allocation, e: diesel::result::Error) -> Error {
    match e {
        diesel::result::Error::DatabaseError(DatabaseErrorKind::UniqueViolation, info) => {
            if info.message().contains("name") {
                Error::Conflict(format!(
                    "An allocation with name {} already exists.",
                    allocation.name.as_deref().unwrap_or_default()
                ))
            } else {
                Error::Conflict(format!(
                    "An allocation with UUID {} already exists.",
                    allocation.uuid
                ))
            }
        }
        other => other.into(),
    }
}

/// Inserts an allocation and reads it back.
pub async fn insert(db: &Db, allocation: &Allocation) -> Result<Allocation> {
    super::insert_and_get!(db, table, allocation, get, |e| duplicate(allocation, e))
}

/// Writes `changes` to the allocation and reads it back (404 if it went meanwhile).
pub async fn update(
    db: &Db,
    allocation: &Allocation,
    changes: AllocationChanges,
) -> Result<Allocation> {
    if !changes.is_empty() {
        let changes = AllocationChanges {
            updated_at: Some(Some(crate::node::now())),
            ..changes
        };
        with_write_result!(db, |conn| diesel::update(table::table.find(allocation.id))
            .set(&changes)
            .execute(conn)
            .await?)
        .map_err(|e| duplicate(allocation, e))?;
    }
    get(db, &allocation.uuid).await
}

/// The allocations `host` was processing when it stopped (still `allocating`), oldest first.
pub async fn allocating_on(db: &Db, host: &str) -> Result<Vec<Allocation>> {
    Ok(with_conn!(db, |conn| table::table
        .filter(table::state.eq(allocation::ALLOCATING))
        .filter(table::conductor_affinity.eq(host))
        .order(table::id.asc())
        .select(Allocation::as_select())
        .load(conn)
        .await?))
}

/// The allocations still `allocating` on a conductor whose lease has run out (not among
/// `leased`), or on none, oldest first (Ironic's `_check_orphan_allocations` filter).
/// The hosts are compared here, not in the SQL: a list of them in the statement would make a
/// statement to prepare at every round (diesel caches only those of a fixed shape), and the
/// allocations being allocated are few.
pub async fn orphaned(db: &Db, leased: &[String]) -> Result<Vec<Allocation>> {
    let allocating: Vec<Allocation> = with_conn!(db, |conn| table::table
        .filter(table::state.eq(allocation::ALLOCATING))
        .order(table::id.asc())
        .select(Allocation::as_select())
        .load(conn)
        .await?);
    Ok(allocating
        .into_iter()
        .filter(|a| {
            a.conductor_affinity
                .as_ref()
                .is_none_or(|host| !leased.contains(host))
        })
        .collect())
}

/// Moves the allocation `a`, still `allocating` on the conductor it names, to `host`: true when
/// this call moved it, false when another conductor took it first or it was finished meanwhile
/// (Ironic's `take_over_allocation`).
pub async fn take_over(db: &Db, a: &Allocation, host: &str) -> Result<bool> {
    let moved = match &a.conductor_affinity {
        Some(old) => with_write!(db, |conn| diesel::update(table::table)
            .filter(table::id.eq(a.id))
            .filter(table::state.eq(allocation::ALLOCATING))
            .filter(table::conductor_affinity.eq(old))
            .set(table::conductor_affinity.eq(host))
            .execute(conn)
            .await?),
        None => with_write!(db, |conn| diesel::update(table::table)
            .filter(table::id.eq(a.id))
            .filter(table::state.eq(allocation::ALLOCATING))
            .filter(table::conductor_affinity.is_null())
            .set(table::conductor_affinity.eq(host))
            .execute(conn)
            .await?),
    };
    Ok(moved == 1)
}

/// Writes how the allocation `a` ended (`changes`), if it is still `allocating` on `host`, and
/// reads it back; None when it was deleted, or taken over, meanwhile.
pub async fn finish(
    db: &Db,
    a: &Allocation,
    host: &str,
    changes: AllocationChanges,
) -> Result<Option<Allocation>> {
    let changes = AllocationChanges {
        updated_at: Some(Some(crate::node::now())),
        ..changes
    };
    let written = with_write!(db, |conn| diesel::update(table::table)
        .filter(table::id.eq(a.id))
        .filter(table::state.eq(allocation::ALLOCATING))
        .filter(table::conductor_affinity.eq(host))
        .set(&changes)
        .execute(conn)
        .await?);
    if written == 0 {
        return Ok(None);
    }
    get(db, &a.uuid).await.map(Some)
}

/// Deletes the allocation `uuid`; false when it was gone already.
pub async fn delete(db: &Db, uuid: &str) -> Result<bool> {
    let deleted = with_write!(db, |conn| diesel::delete(
        table::table.filter(table::uuid.eq(uuid))
    )
    .execute(conn)
    .await?);
    Ok(deleted == 1)
}
