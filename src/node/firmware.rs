//! A node's firmware components (API 1.86): what its firmware interface last reported of each
//! (Ironic's `FirmwareComponent`), one record per node and component.

use chrono::NaiveDateTime;
use diesel::prelude::*;

#[derive(Debug, Clone, PartialEq, Eq, Queryable, Selectable, Insertable)]
#[diesel(table_name = crate::schema::firmware_components)]
pub struct FirmwareComponent {
    #[diesel(skip_insertion)]
    pub id: i32,
    pub node_id: i32,
    pub component: String,
    pub initial_version: String,
    pub current_version: Option<String>,
    pub last_version_flashed: Option<String>,
    pub created_at: NaiveDateTime,
    pub updated_at: Option<NaiveDateTime>,
    /// Who made the hardware the firmware runs on, its model and serial number (API 1.114),
    /// where the interface that caches the component knows them.
    pub vendor: Option<String>,
    pub model: Option<String>,
    pub serial_number: Option<String>,
}
