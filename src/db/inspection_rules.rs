//! Queries on `inspection_rules`. The API writes rules directly, as Ironic's does (no node lock
//! is involved); a finished inspection reads the rules of its phase with one query
//! (`for_phase`).

use diesel::prelude::*;
use diesel_async::RunQueryDsl;

use super::{Db, order_after, order_by_id, with_conn, with_write, with_write_result};
use crate::{
    error::{Error, Result},
    inspection_rule::{self, InspectionRule, InspectionRuleChanges},
    schema::inspection_rules as table,
};

/// What a listing can be sorted by (Ironic refuses `conditions` and `actions`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SortKey {
    Id,
    Uuid,
    Priority,
    Phase,
    CreatedAt,
}

impl SortKey {
    pub const NAMES: &[&str] = &["id", "uuid", "priority", "phase", "created_at"];

    pub fn parse(key: &str) -> Option<SortKey> {
        Some(match key {
            "id" => SortKey::Id,
            "uuid" => SortKey::Uuid,
            "priority" => SortKey::Priority,
            "phase" => SortKey::Phase,
            "created_at" => SortKey::CreatedAt,
            _ => return None,
        })
    }
}

/// A rule by UUID.
pub async fn get(db: &Db, uuid: &str) -> Result<InspectionRule> {
    let uuid = uuid.to_ascii_lowercase();
    let found: Option<InspectionRule> = with_conn!(db, |conn| table::table
        .filter(table::uuid.eq(&uuid))
        .select(InspectionRule::as_select())
        .first(conn)
        .await
        .optional()?);
    found.ok_or_else(|| inspection_rule::not_found(&uuid))
}

/// One page ordered by `sort` (then id), after the rule `marker`, of the `phase` if given.
pub async fn list(
    db: &Db,
    sort: SortKey,
    descending: bool,
    limit: i64,
    marker: Option<&str>,
    phase: Option<&str>,
) -> Result<Vec<InspectionRule>> {
    let marker = match marker {
        Some(m) => Some(get(db, m).await?),
        None => None,
    };
    let m = marker.as_ref();
    Ok(with_conn!(db, |conn| {
        let mut q = table::table
            .select(InspectionRule::as_select())
            .into_boxed();
        if let Some(phase) = phase {
            q = q.filter(table::phase.eq(phase.to_owned()));
        }
        let q = match sort {
            SortKey::Id => order_by_id!(q, table::id, descending, m.map(|m| m.id)),
            SortKey::Uuid => order_after!(
                q,
                table::uuid,
                table::id,
                descending,
                m.map(|m| (m.uuid.clone(), m.id))
            ),
            SortKey::Priority => order_after!(
                q,
                table::priority,
                table::id,
                descending,
                m.map(|m| (m.priority, m.id))
            ),
            SortKey::Phase => order_after!(
                q,
                table::phase,
                table::id,
                descending,
                m.map(|m| (m.phase.clone(), m.id))
            ),
            SortKey::CreatedAt => order_after!(
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

/// The rules of `phase`, the highest priority first (then in the order they were made): what
/// an inspection runs.
pub async fn for_phase(db: &Db, phase: &str) -> Result<Vec<InspectionRule>> {
    Ok(with_conn!(db, |conn| table::table
        .filter(table::phase.eq(phase))
        .order((table::priority.desc(), table::id.asc()))
        .select(InspectionRule::as_select())
        .load(conn)
        .await?))
}

/// Inserts a rule and reads it back; a duplicate UUID is a 409.
pub async fn insert(db: &Db, rule: &InspectionRule) -> Result<InspectionRule> {
    let inserted = with_write_result!(db, |conn| diesel::insert_into(table::table)
        .values(rule)
        .execute(conn)
        .await?);
    match inserted {
        Ok(_) => get(db, &rule.uuid).await,
        Err(diesel::result::Error::DatabaseError(
            diesel::result::DatabaseErrorKind::UniqueViolation,
            _,
        )) => Err(Error::Conflict(format!(
            "A rule with UUID {} already exists.",
            rule.uuid
        ))),
        Err(e) => Err(e.into()),
    }
}

/// Writes `changes` to `rule` and reads it back.
pub async fn update(
    db: &Db,
    rule: &InspectionRule,
    changes: InspectionRuleChanges,
) -> Result<InspectionRule> {
    if changes.is_empty() {
        return get(db, &rule.uuid).await;
    }
    let changes = InspectionRuleChanges {
        updated_at: Some(Some(crate::node::now())),
        ..changes
    };
    let updated = with_write!(db, |conn| diesel::update(table::table.find(rule.id))
        .set(&changes)
        .execute(conn)
        .await?);
    if updated == 0 {
        return Err(inspection_rule::not_found(&rule.uuid));
    }
    get(db, &rule.uuid).await
}

pub async fn delete(db: &Db, uuid: &str) -> Result<()> {
    let deleted = with_write!(db, |conn| diesel::delete(
        table::table.filter(table::uuid.eq(uuid))
    )
    .execute(conn)
    .await?);
    if deleted == 1 {
        Ok(())
    } else {
        Err(inspection_rule::not_found(uuid))
    }
}
