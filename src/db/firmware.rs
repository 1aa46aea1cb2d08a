//! Queries on `firmware_components` (API 1.86): a node's firmware components.

use diesel::prelude::*;
use diesel_async::RunQueryDsl;

use super::{Db, with_conn};
use crate::{error::Result, node::firmware::FirmwareComponent, schema::firmware_components};

/// The components of node `node_id`, by name.
pub async fn list(db: &Db, node_id: i32) -> Result<Vec<FirmwareComponent>> {
    Ok(with_conn!(db, |conn| firmware_components::table
        .filter(firmware_components::node_id.eq(node_id))
        .order(firmware_components::component.asc())
        .select(FirmwareComponent::as_select())
        .load(conn)
        .await?))
}
