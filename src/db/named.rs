//! The queries of a resource named by UUID or by a unique name that the API writes itself, with
//! no node lock involved: deploy templates and runbooks. [`named_queries!`] writes them once
//! for a table with `id`, `uuid`, `name` and `created_at` columns; the unique keys on `uuid` and
//! `name` make a duplicate a 409.

use futures::future::BoxFuture;

use super::{
    Db,
    listing::{Page, sort_keys},
};
use crate::error::Result;

/// The queries of such a resource, for handlers generic over it (`api::named`); implemented by
/// [`named_queries!`] over the functions it declares.
pub trait NamedQueries: Sized {
    /// The resource's partial update.
    type Update;

    fn get<'a>(db: &'a Db, ident: &'a str) -> BoxFuture<'a, Result<Self>>;
    fn list<'a>(db: &'a Db, page: &'a Page<'a, SortKey>) -> BoxFuture<'a, Result<Vec<Self>>>;
    fn insert<'a>(db: &'a Db, item: &'a Self) -> BoxFuture<'a, Result<Self>>;
    fn update<'a>(db: &'a Db, item: &'a Self, changes: Self::Update)
    -> BoxFuture<'a, Result<Self>>;
    fn delete<'a>(db: &'a Db, uuid: &'a str) -> BoxFuture<'a, Result<()>>;
}

sort_keys! {
    /// What a listing of such a resource can be sorted by (Ironic refuses its JSON columns).
    pub enum SortKey { Id = "id", Uuid = "uuid", Name = "name", CreatedAt = "created_at", }
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
            $crate::db::by_uuid_or_name!(db, $table, $record, ident, by_uuid)
                .ok_or_else(|| $not_found(ident))
        }

        /// One page of the records.
        pub async fn list(
            db: &$crate::db::Db,
            page: &$crate::db::listing::Page<'_, SortKey>,
        ) -> $crate::error::Result<Vec<$record>> {
            let marker = page.marker_row(|m| get(db, m)).await?;
            Ok($crate::db::with_conn!(db, |conn| {
                let q = $table::table.select($record::as_select()).into_boxed();
                let q = $crate::db::listing::sorted_page!(q, $table, page, marker.as_ref(), SortKey {
                    Uuid => uuid, Name => name, CreatedAt => created_at
                });
                q.load(conn).await?
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
            $crate::db::insert_and_get!(db, $table, record, get, |e| match e {
                diesel::result::Error::DatabaseError(
                    diesel::result::DatabaseErrorKind::UniqueViolation,
                    info,
                ) => conflict(record, info.as_ref()),
                e => $crate::error::Error::from(e),
            })
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
                page: &'a $crate::db::listing::Page<'a, SortKey>,
            ) -> futures::future::BoxFuture<'a, $crate::error::Result<Vec<Self>>> {
                Box::pin(list(db, page))
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
