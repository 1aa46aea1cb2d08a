//! Queries on `node_history` (API 1.78). Entries are written only with the node write that
//! records their failure ([`record_entry!`], inside `nodes::update_held`'s and
//! `nodes::update_unlocked`'s transaction), and the same transaction keeps at most the
//! configured number of entries per node (Ferrum's retention is at write time, where Ironic runs
//! a periodic purge, `[conductor]node_history_cleanup_interval`: a node never holds more than
//! `node_history_max_entries`, and no periodic task scans the table).

use diesel::prelude::*;
use diesel_async::RunQueryDsl;

use super::{Db, order_after, with_conn};
use crate::{error::Result, node::history::HistoryEntry, schema::node_history};

/// Inserts `$entry` on `$conn` (inside the caller's transaction), then deletes the node's
/// entries older than its newest `$max` (none are kept with `$max` 0: recording is off then, and
/// the caller does not come here). Two statements after the insert at most: the id of the
/// oldest entry kept, and the delete of those before it, only when there are more than `$max`.
macro_rules! record_entry {
    ($conn:expr, $entry:expr, $max:expr) => {{
        use diesel::prelude::*;
        use diesel_async::RunQueryDsl;
        use $crate::schema::node_history as h;
        let entry: &$crate::node::history::HistoryEntry = $entry;
        diesel::insert_into(h::table)
            .values(entry)
            .execute($conn)
            .await?;
        let boundary: Option<i32> = h::table
            .filter(h::node_id.eq(entry.node_id))
            .order(h::id.desc())
            .select(h::id)
            .offset(i64::from($max))
            .limit(1)
            .first($conn)
            .await
            .optional()?;
        if let Some(boundary) = boundary {
            diesel::delete(
                h::table
                    .filter(h::node_id.eq(entry.node_id))
                    .filter(h::id.le(boundary)),
            )
            .execute($conn)
            .await?;
        }
    }};
}
pub(crate) use record_entry;

/// The node's entries in creation order (`descending` for newest first), after `marker`'s, at
/// most `limit`.
pub async fn list(
    db: &Db,
    node_id: i32,
    marker: Option<&HistoryEntry>,
    limit: i64,
    descending: bool,
) -> Result<Vec<HistoryEntry>> {
    let marker = marker.map(|m| (m.created_at, m.id));
    Ok(with_conn!(db, |conn| {
        let q = node_history::table
            .filter(node_history::node_id.eq(node_id))
            .select(HistoryEntry::as_select())
            .into_boxed();
        order_after!(
            q,
            node_history::created_at,
            node_history::id,
            descending,
            marker
        )
        .limit(limit)
        .load(conn)
        .await?
    }))
}

/// The entry `uuid`, if it exists (of any node: the caller checks it is its node's).
pub async fn get(db: &Db, uuid: &str) -> Result<Option<HistoryEntry>> {
    Ok(with_conn!(db, |conn| node_history::table
        .filter(node_history::uuid.eq(uuid))
        .select(HistoryEntry::as_select())
        .first(conn)
        .await
        .optional()?))
}
