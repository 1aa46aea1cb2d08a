//! Queries on `node_inventory` (API 1.81): one record per node, replaced by a later inspection.

use diesel::prelude::*;
use diesel_async::{AsyncConnection, RunQueryDsl};

use super::{Db, with_conn, with_write};
use crate::{error::Result, node::inventory::NodeInventory, schema::node_inventory};

/// The inventory stored for node `node_id`, if any.
pub async fn get(db: &Db, node_id: i32) -> Result<Option<NodeInventory>> {
    Ok(with_conn!(db, |conn| node_inventory::table
        .filter(node_inventory::node_id.eq(node_id))
        .select(NodeInventory::as_select())
        .first(conn)
        .await
        .optional()?))
}

/// Stores `record` as its node's inventory, replacing the one before (a delete and an insert
/// in one transaction: portable, where an upsert is not).
pub async fn store(db: &Db, record: &NodeInventory) -> Result<()> {
    with_write!(db, |conn| conn
        .transaction::<_, diesel::result::Error, _>(async |conn| {
            diesel::delete(
                node_inventory::table.filter(node_inventory::node_id.eq(record.node_id)),
            )
            .execute(conn)
            .await?;
            diesel::insert_into(node_inventory::table)
                .values(record)
                .execute(conn)
                .await
        })
        .await?);
    Ok(())
}
