//! The queries of a resource named by UUID or by a unique name that the API writes itself, with
//! no node lock involved: deploy templates and runbooks. [`named_queries!`] writes them once
//! for a table with `id`, `uuid`, `name` and `created_at` columns; the unique keys on `uuid` and
//! `name` make a duplicate a 409.

use futures::future::BoxFuture;

use super::Db;
use crate::error::Result;

/// The queries of such a resource, for handlers generic over it (`api::named`); implemented by
/// [`named_queries!`] over the functions it declares.
pub trait NamedQueries: Sized {
    /// The resource's partial update.
    type Update;

    fn get<'a>(db: &'a Db, ident: &'a str) -> BoxFuture<'a, Result<Self>>;
    fn list<'a>(
        db: &'a Db,
        sort: SortKey,
        descending: bool,
        limit: i64,
        marker: Option<&'a str>,
    ) -> BoxFuture<'a, Result<Vec<Self>>>;
    fn insert<'a>(db: &'a Db, item: &'a Self) -> BoxFuture<'a, Result<Self>>;
    fn update<'a>(db: &'a Db, item: &'a Self, changes: Self::Update)
    -> BoxFuture<'a, Result<Self>>;
    fn delete<'a>(db: &'a Db, uuid: &'a str) -> BoxFuture<'a, Result<()>>;
}

/// What a listing of such a resource can be sorted by (Ironic refuses its JSON columns).
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

/// Declares, in the calling module, `get` (by UUID or name), `list`, `insert`, `update` and
/// `delete` for the record `$record` (changes `$changes`) stored in `$table`, whose 404 is
/// `$not_found` and whose 409 names it as `$what` ("deploy template": Ironic's
/// `DeployTemplateDuplicateName` and `DeployTemplateAlreadyExists`, and so on).
macro_rules! named_queries {
    ($record:ident, $changes:ident, $table:ident, $not_found:path, $what:literal) => {
        pub use $crate::db::named::SortKey;

        /// A record by UUID or, when `ident` does not look like one, by name.
        pub async fn get(db: &$crate::db::Db, ident: &str) -> $crate::error::Result<$record> {
            let by_uuid = uuid::Uuid::try_parse(ident).is_ok();
            let found: Option<$record> = $crate::db::with_conn!(db, |conn| {
                let q = $table::table.select($record::as_select()).into_boxed();
                let q = if by_uuid {
                    q.filter($table::uuid.eq(ident.to_ascii_lowercase()))
                } else {
                    q.filter($table::name.eq(ident))
                };
                q.first(conn).await.optional()?
            });
            found.ok_or_else(|| $not_found(ident))
        }

        /// One page ordered by `sort` (then id), after the record `marker`.
        pub async fn list(
            db: &$crate::db::Db,
            sort: SortKey,
            descending: bool,
            limit: i64,
            marker: Option<&str>,
        ) -> $crate::error::Result<Vec<$record>> {
            let marker = match marker {
                Some(m) => Some(get(db, m).await?),
                None => None,
            };
            let m = marker.as_ref();
            Ok($crate::db::with_conn!(db, |conn| {
                let q = $table::table.select($record::as_select()).into_boxed();
                let q = match sort {
                    SortKey::Id => {
                        $crate::db::order_by_id!(q, $table::id, descending, m.map(|m| m.id))
                    }
                    SortKey::Uuid => $crate::db::order_after!(
                        q,
                        $table::uuid,
                        $table::id,
                        descending,
                        m.map(|m| (m.uuid.clone(), m.id))
                    ),
                    SortKey::Name => $crate::db::order_after!(
                        q,
                        $table::name,
                        $table::id,
                        descending,
                        m.map(|m| (m.name.clone(), m.id))
                    ),
                    SortKey::CreatedAt => $crate::db::order_after!(
                        q,
                        $table::created_at,
                        $table::id,
                        descending,
                        m.map(|m| (m.created_at, m.id))
                    ),
                };
                q.limit(limit).load(conn).await?
            }))
        }

        /// The 409 of a write that broke the unique key on the name or the UUID.
        fn conflict(
            record: &$record,
            info: &dyn diesel::result::DatabaseErrorInformation,
        ) -> $crate::error::Error {
            let on_name = info
                .constraint_name()
                .map(|c| c.contains("name"))
                .unwrap_or_else(|| info.message().contains("name"));
            if on_name {
                $crate::error::Error::Conflict(format!(
                    concat!("A ", $what, " with name {} already exists."),
                    record.name
                ))
            } else {
                $crate::error::Error::Conflict(format!(
                    concat!("A ", $what, " with UUID {} already exists."),
                    record.uuid
                ))
            }
        }

        /// Inserts a record and reads it back; a duplicate UUID or name is a 409.
        pub async fn insert(
            db: &$crate::db::Db,
            record: &$record,
        ) -> $crate::error::Result<$record> {
            let inserted =
                $crate::db::with_write_result!(db, |conn| diesel::insert_into($table::table)
                    .values(record)
                    .execute(conn)
                    .await?);
            match inserted {
                Ok(_) => get(db, &record.uuid).await,
                Err(diesel::result::Error::DatabaseError(
                    diesel::result::DatabaseErrorKind::UniqueViolation,
                    info,
                )) => Err(conflict(record, info.as_ref())),
                Err(e) => Err(e.into()),
            }
        }

        /// Writes `changes` to `record`; a name another record has is a 409.
        pub async fn update(
            db: &$crate::db::Db,
            record: &$record,
            changes: $changes,
        ) -> $crate::error::Result<$record> {
            if !changes.is_empty() {
                let renamed = $record {
                    name: changes.name.clone().unwrap_or_else(|| record.name.clone()),
                    ..record.clone()
                };
                let changes = $changes {
                    updated_at: Some(Some($crate::node::now())),
                    ..changes
                };
                let updated = $crate::db::with_write_result!(db, |conn| diesel::update(
                    $table::table.find(record.id)
                )
                .set(&changes)
                .execute(conn)
                .await?);
                match updated {
                    Ok(_) => {}
                    Err(diesel::result::Error::DatabaseError(
                        diesel::result::DatabaseErrorKind::UniqueViolation,
                        info,
                    )) => return Err(conflict(&renamed, info.as_ref())),
                    Err(e) => return Err(e.into()),
                }
            }
            get(db, &record.uuid).await
        }

        pub async fn delete(db: &$crate::db::Db, uuid: &str) -> $crate::error::Result<()> {
            let deleted = $crate::db::with_write!(db, |conn| diesel::delete(
                $table::table.filter($table::uuid.eq(uuid))
            )
            .execute(conn)
            .await?);
            if deleted == 1 {
                Ok(())
            } else {
                Err($not_found(uuid))
            }
        }

        impl $crate::db::named::NamedQueries for $record {
            type Update = $changes;

            fn get<'a>(
                db: &'a $crate::db::Db,
                ident: &'a str,
            ) -> futures::future::BoxFuture<'a, $crate::error::Result<Self>> {
                Box::pin(get(db, ident))
            }

            fn list<'a>(
                db: &'a $crate::db::Db,
                sort: SortKey,
                descending: bool,
                limit: i64,
                marker: Option<&'a str>,
            ) -> futures::future::BoxFuture<'a, $crate::error::Result<Vec<Self>>> {
                Box::pin(list(db, sort, descending, limit, marker))
            }

            fn insert<'a>(
                db: &'a $crate::db::Db,
                item: &'a Self,
            ) -> futures::future::BoxFuture<'a, $crate::error::Result<Self>> {
                Box::pin(insert(db, item))
            }

            fn update<'a>(
                db: &'a $crate::db::Db,
                item: &'a Self,
                changes: $changes,
            ) -> futures::future::BoxFuture<'a, $crate::error::Result<Self>> {
                Box::pin(update(db, item, changes))
            }

            fn delete<'a>(
                db: &'a $crate::db::Db,
                uuid: &'a str,
            ) -> futures::future::BoxFuture<'a, $crate::error::Result<()>> {
                Box::pin(delete(db, uuid))
            }
        }
    };
}
pub(crate) use named_queries;
