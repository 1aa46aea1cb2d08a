//! A node's BIOS settings (API 1.40; the registry fields 1.74): what its BIOS interface last
//! applied or reported, one record per setting name (Ironic's `BIOSSetting`).

use chrono::NaiveDateTime;
use diesel::prelude::*;
use serde::{Deserialize, Serialize};

use super::Json;

/// A setting as a BIOS interface gives it: its name and value, and what the BIOS attribute
/// registry says of it (each None when the interface did not say). The conductor stores it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct BiosValue {
    pub name: String,
    pub value: Option<String>,
    #[serde(default)]
    pub attribute_type: Option<String>,
    #[serde(default)]
    pub allowable_values: Option<Vec<String>>,
    #[serde(default)]
    pub lower_bound: Option<i64>,
    #[serde(default)]
    pub max_length: Option<i32>,
    #[serde(default)]
    pub min_length: Option<i32>,
    #[serde(default)]
    pub read_only: Option<bool>,
    #[serde(default)]
    pub reset_required: Option<bool>,
    #[serde(default)]
    pub unique: Option<bool>,
    #[serde(default)]
    pub upper_bound: Option<i64>,
}

/// A stored setting of node `node_id`.
#[derive(Debug, Clone, PartialEq, Eq, Queryable, Selectable, Insertable)]
#[diesel(table_name = crate::schema::bios_settings)]
pub struct BiosSetting {
    pub node_id: i32,
    pub name: String,
    pub value: Option<String>,
    pub attribute_type: Option<String>,
    pub allowable_values: Option<Json<Vec<String>>>,
    pub lower_bound: Option<i64>,
    pub max_length: Option<i32>,
    pub min_length: Option<i32>,
    pub read_only: Option<bool>,
    pub reset_required: Option<bool>,
    pub unique: Option<bool>,
    pub upper_bound: Option<i64>,
    pub created_at: NaiveDateTime,
    pub updated_at: Option<NaiveDateTime>,
}

impl BiosSetting {
    /// A new record of `value` for node `node_id`.
    pub fn new(node_id: i32, value: &BiosValue) -> BiosSetting {
        BiosSetting {
            node_id,
            name: value.name.clone(),
            value: value.value.clone(),
            attribute_type: value.attribute_type.clone(),
            allowable_values: value.allowable_values.clone().map(Json),
            lower_bound: value.lower_bound,
            max_length: value.max_length,
            min_length: value.min_length,
            read_only: value.read_only,
            reset_required: value.reset_required,
            unique: value.unique,
            upper_bound: value.upper_bound,
            created_at: super::now(),
            updated_at: None,
        }
    }
}
