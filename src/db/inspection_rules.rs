//! Queries on `inspection_rules`. The API writes rules directly, as Ironic's does (no node lock
//! is involved); a finished inspection reads the rules of its phase with one query
//! (`for_phase`).

use diesel::prelude::*;
use diesel_async::RunQueryDsl;

use super::{Db, duplicate_is_conflict, listing::Page, with_conn, with_write};
use crate::{
    error::Result,
    inspection_rule::{self, InspectionRule, InspectionRuleChanges},
    schema::inspection_rules as table,
};

super::listing::sort_keys! {
    /// What a listing can be sorted by (Ironic refuses `conditions` and `actions`).
    pub enum SortKey {
        Id = "id", Uuid = "uuid", Priority = "priority", Phase = "phase", CreatedAt = "created_at",
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

/// One page of the rules (of the `phase` if given).
pub async fn list(
    db: &Db,
    page: &Page<'_, SortKey>,
    phase: Option<&str>,
) -> Result<Vec<InspectionRule>> {
    let marker = page.marker_row(|m| get(db, m)).await?;
    Ok(with_conn!(db, |conn| {
        let mut q = table::table
            .select(InspectionRule::as_select())
            .into_boxed();
        if let Some(phase) = phase {
            q = q.filter(table::phase.eq(phase.to_owned()));
        }
        let q = super::listing::sorted_page!(q, table, page, marker.as_ref(), SortKey {
            Uuid => uuid, Priority => priority, Phase => phase, CreatedAt => created_at
        });
        q.load(conn).await?
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
    super::insert_and_get!(db, table, rule, get, |e| duplicate_is_conflict(e, || {
        format!("A rule with UUID {} already exists.", rule.uuid)
    }))
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
