//! Queries on `bios_settings` (API 1.40): a node's BIOS settings, by name.

use diesel::prelude::*;
use diesel_async::{AsyncConnection, RunQueryDsl};

use super::{Db, with_conn, with_write};
use crate::{
    error::Result,
    node::{
        Json,
        bios::{BiosSetting, BiosValue},
    },
    schema::bios_settings,
};

/// The settings of node `node_id`, by name.
pub async fn list(db: &Db, node_id: i32) -> Result<Vec<BiosSetting>> {
    Ok(with_conn!(db, |conn| bios_settings::table
        .filter(bios_settings::node_id.eq(node_id))
        .order(bios_settings::name.asc())
        .select(BiosSetting::as_select())
        .load(conn)
        .await?))
}

/// The setting `name` of node `node_id`, if it has one.
pub async fn get(db: &Db, node_id: i32, name: &str) -> Result<Option<BiosSetting>> {
    Ok(with_conn!(db, |conn| bios_settings::table
        .filter(bios_settings::node_id.eq(node_id))
        .filter(bios_settings::name.eq(name))
        .select(BiosSetting::as_select())
        .first(conn)
        .await
        .optional()?))
}

/// Makes the node's settings exactly `values`, as Ironic's `sync_node_setting` and the fake
/// BIOS do: a new name is created, a changed value updated (with the registry fields given
/// with it), an unchanged one left alone, and a name not among `values` deleted; in one
/// transaction.
pub async fn sync(db: &Db, node_id: i32, values: &[BiosValue]) -> Result<()> {
    with_write!(db, |conn| conn
        .transaction::<_, diesel::result::Error, _>(async |conn| {
            let current: Vec<(String, Option<String>)> = bios_settings::table
                .filter(bios_settings::node_id.eq(node_id))
                .select((bios_settings::name, bios_settings::value))
                .load(conn)
                .await?;
            let names: Vec<&str> = values.iter().map(|v| v.name.as_str()).collect();
            let gone: Vec<&str> = current
                .iter()
                .map(|(name, _)| name.as_str())
                .filter(|name| !names.contains(name))
                .collect();
            diesel::delete(
                bios_settings::table
                    .filter(bios_settings::node_id.eq(node_id))
                    .filter(bios_settings::name.eq_any(&gone)),
            )
            .execute(conn)
            .await?;
            for v in values {
                match current.iter().find(|(name, _)| *name == v.name) {
                    None => {
                        diesel::insert_into(bios_settings::table)
                            .values(BiosSetting::new(node_id, v))
                            .execute(conn)
                            .await?;
                    }
                    Some((_, value)) if *value == v.value => {}
                    Some(_) => {
                        diesel::update(
                            bios_settings::table
                                .filter(bios_settings::node_id.eq(node_id))
                                .filter(bios_settings::name.eq(&v.name)),
                        )
                        .set((
                            bios_settings::value.eq(&v.value),
                            bios_settings::attribute_type.eq(&v.attribute_type),
                            bios_settings::allowable_values
                                .eq(v.allowable_values.clone().map(Json)),
                            bios_settings::lower_bound.eq(v.lower_bound),
                            bios_settings::max_length.eq(v.max_length),
                            bios_settings::min_length.eq(v.min_length),
                            bios_settings::read_only.eq(v.read_only),
                            bios_settings::reset_required.eq(v.reset_required),
                            bios_settings::unique.eq(v.unique),
                            bios_settings::upper_bound.eq(v.upper_bound),
                            bios_settings::updated_at.eq(Some(crate::node::now())),
                        ))
                        .execute(conn)
                        .await?;
                    }
                }
            }
            Ok(())
        })
        .await?);
    Ok(())
}
