//! Queries on `deploy_templates`. The API writes templates directly (no node lock is involved);
//! the unique keys on `uuid` and `name` make a duplicate a 409. The deploy reads the templates
//! matching an instance's traits with one query (`by_names`).

use diesel::{prelude::*, result::DatabaseErrorKind};
use diesel_async::RunQueryDsl;

use super::{Db, with_conn, with_conn_result};
use crate::{
    deploy_template::{self, DeployTemplate, DeployTemplateChanges},
    error::{Error, Result},
    schema::deploy_templates as table,
};

/// A template by UUID or, when `ident` does not look like one, by name.
pub async fn get(db: &Db, ident: &str) -> Result<DeployTemplate> {
    let by_uuid = uuid::Uuid::try_parse(ident).is_ok();
    let found: Option<DeployTemplate> = with_conn!(db, |conn| {
        let q = table::table
            .select(DeployTemplate::as_select())
            .into_boxed();
        let q = if by_uuid {
            q.filter(table::uuid.eq(ident.to_ascii_lowercase()))
        } else {
            q.filter(table::name.eq(ident))
        };
        q.first(conn).await.optional()?
    });
    found.ok_or_else(|| deploy_template::not_found(ident))
}

/// The templates named among `names` (an instance's traits), by id: one query.
pub async fn by_names(db: &Db, names: &[String]) -> Result<Vec<DeployTemplate>> {
    Ok(with_conn!(db, |conn| table::table
        .filter(table::name.eq_any(names))
        .order(table::id.asc())
        .select(DeployTemplate::as_select())
        .load(conn)
        .await?))
}

/// What a template listing can be sorted by (Ironic refuses `extra` and `steps`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SortKey {
    Id,
    Uuid,
    Name,
    CreatedAt,
}

impl SortKey {
    pub const NAMES: &[&str] = &["id", "uuid", "name", "created_at"];

    pub fn parse(key: &str) -> Option<SortKey> {
        Some(match key {
            "id" => SortKey::Id,
            "uuid" => SortKey::Uuid,
            "name" => SortKey::Name,
            "created_at" => SortKey::CreatedAt,
            _ => return None,
        })
    }
}

/// One page of templates ordered by `sort` (then id), after the template `marker`.
pub async fn list(
    db: &Db,
    sort: SortKey,
    descending: bool,
    limit: i64,
    marker: Option<&str>,
) -> Result<Vec<DeployTemplate>> {
    let marker = match marker {
        Some(m) => Some(get(db, m).await?),
        None => None,
    };
    let m = marker.as_ref();
    Ok(with_conn!(db, |conn| {
        let q = table::table
            .select(DeployTemplate::as_select())
            .into_boxed();
        let q = match sort {
            SortKey::Id => super::order_by_id!(q, table::id, descending, m.map(|m| m.id)),
            SortKey::Uuid => super::order_after!(
                q,
                table::uuid,
                table::id,
                descending,
                m.map(|m| (m.uuid.clone(), m.id))
            ),
            SortKey::Name => super::order_after!(
                q,
                table::name,
                table::id,
                descending,
                m.map(|m| (m.name.clone(), m.id))
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

/// Ironic's DeployTemplateAlreadyExists or DeployTemplateDuplicateName (409).
fn conflict(
    template: &DeployTemplate,
    info: &dyn diesel::result::DatabaseErrorInformation,
) -> Error {
    let on_name = info
        .constraint_name()
        .map(|c| c.contains("name"))
        .unwrap_or_else(|| info.message().contains("name"));
    if on_name {
        Error::Conflict(format!(
            "A deploy template with name {} already exists.",
            template.name
        ))
    } else {
        Error::Conflict(format!(
            "A deploy template with UUID {} already exists.",
            template.uuid
        ))
    }
}

/// Inserts a template and reads it back; a duplicate UUID or name is a 409.
pub async fn insert(db: &Db, template: &DeployTemplate) -> Result<DeployTemplate> {
    let inserted = with_conn_result!(db, |conn| diesel::insert_into(table::table)
        .values(template)
        .execute(conn)
        .await?);
    match inserted {
        Ok(_) => get(db, &template.uuid).await,
        Err(diesel::result::Error::DatabaseError(DatabaseErrorKind::UniqueViolation, info)) => {
            Err(conflict(template, info.as_ref()))
        }
        Err(e) => Err(e.into()),
    }
}

/// Writes `changes` to `template`; a name another template has is a 409.
pub async fn update(
    db: &Db,
    template: &DeployTemplate,
    changes: DeployTemplateChanges,
) -> Result<DeployTemplate> {
    if !changes.is_empty() {
        let renamed = DeployTemplate {
            name: changes
                .name
                .clone()
                .unwrap_or_else(|| template.name.clone()),
            ..template.clone()
        };
        let changes = DeployTemplateChanges {
            updated_at: Some(Some(crate::node::now())),
            ..changes
        };
        let updated = with_conn_result!(db, |conn| diesel::update(table::table.find(template.id))
            .set(&changes)
            .execute(conn)
            .await?);
        match updated {
            Ok(_) => {}
            Err(diesel::result::Error::DatabaseError(DatabaseErrorKind::UniqueViolation, info)) => {
                return Err(conflict(&renamed, info.as_ref()));
            }
            Err(e) => return Err(e.into()),
        }
    }
    get(db, &template.uuid).await
}

pub async fn delete(db: &Db, uuid: &str) -> Result<()> {
    let deleted = with_conn!(db, |conn| diesel::delete(
        table::table.filter(table::uuid.eq(uuid))
    )
    .execute(conn)
    .await?);
    if deleted == 1 {
        Ok(())
    } else {
        Err(deploy_template::not_found(uuid))
    }
}
