//! Prepared statements kept for the node's conditional writes.
//!
//! Diesel prepares every UPDATE afresh, because the columns it sets may differ from one call to
//! the next. On the two writes of a fake deploy that was a tenth of the all-in-one's CPU (SQLite
//! parsing and planning a 54-column UPDATE), and on MySQL one round trip more per write (prepare,
//! then execute, then close). [`Reused`] lets the connection's statement cache keep such a
//! statement, keyed by its SQL text, which names its shape (the columns it sets and filters on)
//! and nothing else: the values are bound.
//!
//! A kept statement stays prepared on each pooled connection until the connection closes (the
//! cache has no bound), so only [`MAX_SHAPES`] shapes are kept, the first ones a process writes:
//! a deploy's and the other flows' few, and the fields a PATCH sets most. Any other shape is
//! prepared for each use, as before, so no request can make the cache grow without bound.

use std::{
    collections::HashSet,
    sync::{Mutex, PoisonError},
};

use diesel::{
    QueryResult,
    backend::Backend,
    query_builder::{AstPass, QueryFragment, QueryId},
};

/// How many statement shapes a process keeps prepared (on every pooled connection).
pub(crate) const MAX_SHAPES: usize = 32;

/// What tells one kept statement from another: the function writing it, the columns it sets
/// (`NodeChanges::shape`) and its variant (with or without a deadline).
pub(crate) type Shape = (&'static str, u128, bool);

static KEPT: Mutex<Option<HashSet<Shape>>> = Mutex::new(None);

/// Whether statements of `shape` are kept: yes for one kept already, and for a new one while
/// fewer than [`MAX_SHAPES`] are.
pub(crate) fn keep(shape: Shape) -> bool {
    let mut kept = KEPT.lock().unwrap_or_else(PoisonError::into_inner);
    let kept = kept.get_or_insert_with(HashSet::new);
    if kept.contains(&shape) {
        return true;
    }
    if kept.len() < MAX_SHAPES {
        kept.insert(shape);
        return true;
    }
    false
}

/// A statement the connection's cache keeps (by its SQL text) when `keep` is true.
pub(crate) struct Reused<Q> {
    pub(crate) query: Q,
    pub(crate) keep: bool,
}

/// No static id: the cache keys the statement by its SQL text.
impl<Q> QueryId for Reused<Q> {
    type QueryId = ();
    const HAS_STATIC_QUERY_ID: bool = false;
}

impl<Q: QueryFragment<DB>, DB: Backend> QueryFragment<DB> for Reused<Q> {
    fn walk_ast<'b>(&'b self, pass: AstPass<'_, 'b, DB>) -> QueryResult<()> {
        self.query.walk_ast(pass)
    }

    /// Diesel's answer for an UPDATE is always no; keyed by its SQL text, it is safe.
    fn is_safe_to_cache_prepared(&self, _backend: &DB) -> QueryResult<bool> {
        Ok(self.keep)
    }
}

#[cfg(test)]
mod tests {
    use diesel::{
        connection::SimpleConnection,
        prelude::*,
        query_dsl::methods::ExecuteDsl,
        sqlite::{Sqlite, SqliteConnection},
    };

    use super::*;

    diesel::table! {
        things (id) {
            id -> Integer,
            a -> Integer,
            b -> Integer,
        }
    }

    fn update(keep: bool, value: i32, both: bool) -> Reused<impl QueryFragment<Sqlite> + QueryId> {
        Reused {
            query: diesel::update(things::table.filter(things::id.eq(1)))
                .set((things::a.eq(value), both.then(|| things::b.eq(value)))),
            keep,
        }
    }

    #[test]
    fn a_kept_update_is_cached_by_its_sql_so_each_shape_has_its_own_statement() {
        // Diesel caches no UPDATE by itself; a kept one it may, by its SQL text (no static id).
        let plain = diesel::update(things::table).set(things::a.eq(1));
        assert_eq!(plain.is_safe_to_cache_prepared(&Sqlite), Ok(false));
        assert_eq!(
            update(true, 1, true).is_safe_to_cache_prepared(&Sqlite),
            Ok(true)
        );
        assert_eq!(
            update(false, 1, true).is_safe_to_cache_prepared(&Sqlite),
            Ok(false)
        );
        const { assert!(!<Reused<()> as QueryId>::HAS_STATIC_QUERY_ID) };

        // Two shapes of one Rust type, alternately: each runs its own statement.
        let mut conn = SqliteConnection::establish(":memory:").expect("sqlite");
        conn.batch_execute(
            "CREATE TABLE things (id INTEGER PRIMARY KEY, a INTEGER NOT NULL, b INTEGER NOT NULL);
             INSERT INTO things VALUES (1, 0, 0);",
        )
        .expect("table");
        let row = |conn: &mut SqliteConnection| {
            things::table
                .select((things::a, things::b))
                .first::<(i32, i32)>(conn)
                .expect("row")
        };
        for value in 1..4 {
            assert_eq!(
                ExecuteDsl::execute(update(true, value, true), &mut conn),
                Ok(1)
            );
            assert_eq!(row(&mut conn), (value, value));
            assert_eq!(
                ExecuteDsl::execute(update(true, -value, false), &mut conn),
                Ok(1)
            );
            assert_eq!(
                row(&mut conn),
                (-value, value),
                "the one-column shape sets a alone"
            );
        }
    }

    #[test]
    fn shapes_are_kept_up_to_the_bound_and_a_kept_one_stays_kept() {
        let first = ("reuse-test", 1, false);
        assert!(keep(first));
        let mut admitted = 0;
        for columns in 2..(2 + 2 * MAX_SHAPES as u128) {
            if keep(("reuse-test", columns, false)) {
                admitted += 1;
            }
        }
        assert!(admitted < MAX_SHAPES, "the bound holds ({admitted})");
        assert!(
            keep(first),
            "a kept shape stays kept once the bound is reached"
        );
        assert!(!keep(("reuse-test", u128::MAX, true)));
    }
}
