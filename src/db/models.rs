//! Rows of tables other than `nodes` as diesel reads them, and the values the rest of Ferrum
//! works with. (A node's row is `crate::node::Node` itself: its columns are typed.)

use chrono::NaiveDateTime;
use diesel::prelude::*;
use serde::{Deserialize, Serialize};

use crate::schema::conductors;

#[derive(Debug, Clone, Queryable, Selectable)]
#[diesel(table_name = conductors)]
pub(super) struct ConductorRow {
    #[expect(dead_code, reason = "read with the row, which diesel selects whole")]
    pub id: i32,
    pub hostname: String,
    pub drivers: String,
    pub conductor_group: String,
    pub online: bool,
    pub created_at: NaiveDateTime,
    pub updated_at: NaiveDateTime,
    pub instance: Option<String>,
    pub hardware_interfaces: Option<String>,
}

/// A registered conductor, as the hash ring and the API see it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Conductor {
    pub hostname: String,
    pub drivers: Vec<String>,
    pub conductor_group: String,
    pub online: bool,
    pub created_at: NaiveDateTime,
    pub updated_at: NaiveDateTime,
    /// The token of the process holding the host name's lease; None after a clean stop.
    #[serde(default)]
    pub instance: Option<String>,
    /// What it enables of each hardware type it offers (`drivers::Registry::describe`); None
    /// from a release before it.
    #[serde(default)]
    pub hardware_interfaces: Option<serde_json::Value>,
}

impl From<ConductorRow> for Conductor {
    fn from(r: ConductorRow) -> Conductor {
        Conductor {
            drivers: serde_json::from_str(&r.drivers).unwrap_or_default(),
            hostname: r.hostname,
            conductor_group: r.conductor_group,
            online: r.online,
            created_at: r.created_at,
            updated_at: r.updated_at,
            instance: r.instance,
            hardware_interfaces: r
                .hardware_interfaces
                .and_then(|text| serde_json::from_str(&text).ok()),
        }
    }
}
