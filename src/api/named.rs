//! A resource the API reads and writes itself, named by UUID or by a unique name, with no node
//! lock involved: deploy templates (API 1.55) and runbooks (1.92), each described by a [`Named`]
//! implementation beside its routes and served by the handlers of `collection.rs`, whose traits
//! [`named_collection!`] implements for it from its queries (`db::named`). A listing pages and
//! sorts as every listing does; `.json` below 1.91 is dropped from the name as for nodes.

use crate::{
    db::named::NamedQueries, error::Result, node::JsonObject, patch::PatchOp, resource::Resource,
};

/// A resource named by UUID or name: its version, its short form, how a create and a PATCH are
/// checked; its queries are its [`NamedQueries`].
pub trait Named:
    Resource<Changes: Send> + NamedQueries<Update = <Self as Resource>::Changes> + Send + Sync
{
    /// The API minor version that introduced it.
    const SINCE: u32;
    /// What it is called in the answer to a version without it ("deploy templates").
    const PLURAL: &'static str;
    /// The fields of the short form of a listing.
    const SUMMARY: &'static [&'static str];

    /// The new record a create's body at API `minor` asks for, checked.
    fn from_create(body: JsonObject, minor: u32) -> Result<Self>;

    /// Rules of a PATCH beyond the fields' own, with the patch's changes at hand.
    fn check_patch(&self, _ops: &[PatchOp], _changes: &mut Self::Changes) -> Result<()> {
        Ok(())
    }
}

/// Implements the traits of `collection.rs` for `$ty`, a [`Named`] resource: listed with no
/// filter; found by UUID or name (with `.json` put back when the path lost it); a PATCH writes
/// the writable fields (`steps` whole or by index, `/steps/0/priority`, `/steps/-`), then
/// `check_patch`'s rules; a create's fields are checked against the table first.
macro_rules! named_collection {
    ($ty:ty) => {
        impl $crate::api::collection::Listed for $ty {
            const SUMMARY: &'static [&'static str] = <$ty as $crate::api::named::Named>::SUMMARY;
            type Sort = $crate::db::named::SortKey;
            type Filters = $crate::api::collection::NoFilters;

            async fn read(
                request: &$crate::api::collection::ListRequest<'_, Self>,
                _: &mut String,
            ) -> $crate::error::Result<Vec<Self>> {
                let page = request.page()?;
                <Self as $crate::db::named::NamedQueries>::list(&request.state.db, &page).await
            }
        }

        impl $crate::api::collection::Found for $ty {
            async fn find(
                state: &$crate::api::ApiState,
                suffix: $crate::api::extract::JsonSuffix,
                ident: &str,
            ) -> $crate::error::Result<Self> {
                let db = &state.db;
                suffix
                    .find(ident, |i| async move {
                        <Self as $crate::db::named::NamedQueries>::get(db, &i).await
                    })
                    .await
            }
        }

        impl $crate::api::collection::Patched for $ty {
            fn patched(
                &self,
                ops: &[$crate::patch::PatchOp],
            ) -> $crate::error::Result<Self::Changes> {
                let mut changes = $crate::patch::apply(self, ops)?;
                <Self as $crate::api::named::Named>::check_patch(self, ops, &mut changes)?;
                Ok(changes)
            }

            async fn write(
                db: &$crate::db::Db,
                item: &Self,
                changes: Self::Changes,
            ) -> $crate::error::Result<Self> {
                <Self as $crate::db::named::NamedQueries>::update(db, item, changes).await
            }
        }

        impl $crate::api::collection::Stored for $ty {
            fn from_create(
                body: $crate::node::JsonObject,
                version: $crate::api::extract::ApiVersion,
            ) -> $crate::error::Result<Self> {
                $crate::api::listing::check_create::<Self>(version, &body)?;
                <Self as $crate::api::named::Named>::from_create(body, version.0)
            }

            async fn insert(db: &$crate::db::Db, item: &Self) -> $crate::error::Result<Self> {
                <Self as $crate::db::named::NamedQueries>::insert(db, item).await
            }

            async fn remove(db: &$crate::db::Db, uuid: &str) -> $crate::error::Result<()> {
                <Self as $crate::db::named::NamedQueries>::delete(db, uuid).await
            }
        }
    };
}
pub(crate) use named_collection;
