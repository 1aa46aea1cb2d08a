//! Queries on `firmware_components` (API 1.86): a node's firmware components.

use diesel::prelude::*;
use diesel_async::RunQueryDsl;

use super::{Db, with_conn, with_write};
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

/// Stores a component of its node: what a firmware interface that reads the hardware's versions
/// writes (Ironic's `cache_firmware_components`; Ferrum's fake one reads none, as Ironic's).
pub async fn insert(db: &Db, component: &FirmwareComponent) -> Result<()> {
    with_write!(db, |conn| diesel::insert_into(firmware_components::table)
        .values(component)
        .execute(conn)
        .await?);
    Ok(())
}
