//! What every listing query shares: the keys it can be sorted by, declared once per resource
//! ([`sort_keys!`]); the page asked for ([`Page`]: order, direction, size, marker); and the order
//! and cut of a page after its marker row ([`sorted_page!`], over [`order_by_id!`],
//! [`order_after!`] and [`order_after_nullable!`]). What a listing is narrowed to stays with its
//! resource's queries.

use std::future::Future;

use crate::error::Result;

/// The keys a listing can be sorted by (an enum declared by [`sort_keys!`]).
pub trait SortKeys: Copy + Send + Sync + 'static {
    /// Their names, as a request gives them and an error lists them.
    const NAMES: &'static [&'static str];
    /// By id: the order of a listing that asks for none.
    const ID: Self;
    fn parse(key: &str) -> Option<Self>;
}

/// Declares the enum `$name` of the keys a listing can be sorted by, each with the name a request
/// gives it, and its [`SortKeys`]; the first must be `Id = "id"`.
macro_rules! sort_keys {
    ($(#[$meta:meta])* pub enum $name:ident { Id = "id", $($variant:ident = $key:literal,)+ }) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        pub enum $name {
            Id,
            $($variant,)+
        }

        impl $name {
            pub const NAMES: &[&str] = &["id", $($key,)+];

            pub fn parse(key: &str) -> Option<$name> {
                match key {
                    "id" => Some($name::Id),
                    $($key => Some($name::$variant),)+
                    _ => None,
                }
            }
        }

        impl $crate::db::listing::SortKeys for $name {
            const NAMES: &'static [&'static str] = $name::NAMES;
            const ID: Self = $name::Id;

            fn parse(key: &str) -> Option<Self> {
                $name::parse(key)
            }
        }
    };
}
pub(crate) use sort_keys;

/// The page a listing asks for.
#[derive(Debug, Clone, Copy)]
pub struct Page<'a, K> {
    pub sort: K,
    pub descending: bool,
    pub limit: i64,
    /// The UUID (or name) of the row the page starts after.
    pub marker: Option<&'a str>,
}

impl<'a, K> Page<'a, K> {
    /// The marker's row, read by `get` (a marker that names none is `get`'s not-found).
    pub async fn marker_row<T, F>(&self, get: impl FnOnce(&'a str) -> F) -> Result<Option<T>>
    where
        F: Future<Output = Result<T>>,
    {
        match self.marker {
            Some(m) => get(m).await.map(Some),
            None => Ok(None),
        }
    }
}

/// The boxed query `$q` on `$table` cut to the page `$page` ([`Page`]): ordered by its sort key
/// (of the enum `$Sort`), then by id, after the marker row `$marker` (`Option<&Row>`). `Id`
/// orders by id alone; each `Key => column` by that column, each in `nullable { .. }` by that
/// nullable column (the row's field has the column's name).
macro_rules! sorted_page {
    ($q:expr, $table:ident, $page:expr, $marker:expr,
     $Sort:ident { $($key:ident => $col:ident),* $(,)? }
     $(nullable { $($nkey:ident => $ncol:ident),* $(,)? })?) => {{
        let page = $page;
        let m = $marker;
        let q = $q;
        let q = match page.sort {
            $Sort::Id => $crate::db::order_by_id!(q, $table::id, page.descending, m.map(|m| m.id)),
            $($Sort::$key => $crate::db::order_after!(
                q,
                $table::$col,
                $table::id,
                page.descending,
                m.map(|m| (m.$col.clone(), m.id))
            ),)*
            $($($Sort::$nkey => $crate::db::order_after_nullable!(
                q,
                $table::$ncol,
                $table::id,
                page.descending,
                m.map(|m| (m.$ncol.clone(), m.id))
            ),)*)?
        };
        q.limit(page.limit)
    }};
}
pub(crate) use sorted_page;

/// Orders a boxed listing query by `$id` and keeps only the rows after the marker's id
/// (`$marker`: `Option<i32>`).
macro_rules! order_by_id {
    ($q:expr, $id:expr, $descending:expr, $marker:expr) => {{
        let q = $q;
        match ($descending, $marker) {
            (false, None) => q.order($id.asc()),
            (true, None) => q.order($id.desc()),
            (false, Some(m)) => q.filter($id.gt(m)).order($id.asc()),
            (true, Some(m)) => q.filter($id.lt(m)).order($id.desc()),
        }
    }};
}
pub(crate) use order_by_id;

/// Orders a boxed listing query by the column `$col`, then `$id`, and keeps only the rows after
/// the marker (`$marker`: `Option<(value, id)>` of the marker's row).
macro_rules! order_after {
    ($q:expr, $col:expr, $id:expr, $descending:expr, $marker:expr) => {{
        let q = $q;
        match ($descending, $marker) {
            (false, None) => q.order(($col.asc(), $id.asc())),
            (true, None) => q.order(($col.desc(), $id.desc())),
            (false, Some((v, id))) => q
                .filter($col.gt(v.clone()).or($col.eq(v).and($id.gt(id))))
                .order(($col.asc(), $id.asc())),
            (true, Some((v, id))) => q
                .filter($col.lt(v.clone()).or($col.eq(v).and($id.lt(id))))
                .order(($col.desc(), $id.desc())),
        }
    }};
}
pub(crate) use order_after;

/// [`order_after!`] for a nullable column: nulls come first ascending and last descending, as
/// both backends order them.
macro_rules! order_after_nullable {
    ($q:expr, $col:expr, $id:expr, $descending:expr, $marker:expr) => {{
        let q = $q;
        match ($descending, $marker) {
            (false, None) => q.order(($col.asc(), $id.asc())),
            (true, None) => q.order(($col.desc(), $id.desc())),
            (false, Some((None, id))) => q
                .filter($col.is_not_null().or($col.is_null().and($id.gt(id))))
                .order(($col.asc(), $id.asc())),
            (false, Some((Some(v), id))) => q
                .filter($col.gt(v.clone()).or($col.eq(v).and($id.gt(id))))
                .order(($col.asc(), $id.asc())),
            (true, Some((None, id))) => q
                .filter($col.is_null().and($id.lt(id)))
                .order(($col.desc(), $id.desc())),
            (true, Some((Some(v), id))) => q
                .filter(
                    $col.lt(v.clone())
                        .or($col.eq(v).and($id.lt(id)))
                        .or($col.is_null()),
                )
                .order(($col.desc(), $id.desc())),
        }
    }};
}
pub(crate) use order_after_nullable;
