//! A node's inventory (API 1.81): what an inspection found, as the agent reported it
//! (`inventory_data`), and what the inspection's hooks kept besides (`plugin_data`), one record
//! per node (Ironic's `NodeInventory`, `[inventory]data_backend = database`).

use chrono::NaiveDateTime;
use diesel::prelude::*;
use serde::{Deserialize, Serialize};

use super::{Json, JsonObject};

/// The `driver_internal_info` key that keeps, while an inspection waits for its agent, the
/// addresses of the node's BMC the agent may report, for the lookup of a node without ports
/// (Ironic's `lookup_bmc_addresses`).
pub const LOOKUP_BMC_ADDRESSES: &str = "lookup_bmc_addresses";

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Queryable, Selectable, Insertable)]
#[diesel(table_name = crate::schema::node_inventory)]
pub struct NodeInventory {
    #[diesel(skip_insertion)]
    pub id: i32,
    pub node_id: i32,
    pub inventory_data: Json<JsonObject>,
    pub plugin_data: Json<JsonObject>,
    pub created_at: NaiveDateTime,
    pub updated_at: Option<NaiveDateTime>,
}

impl NodeInventory {
    /// A new record of node `node_id`.
    pub fn new(node_id: i32, inventory: JsonObject, plugin_data: JsonObject) -> NodeInventory {
        NodeInventory {
            id: 0,
            node_id,
            inventory_data: Json(inventory),
            plugin_data: Json(plugin_data),
            created_at: super::now(),
            updated_at: None,
        }
    }
}
