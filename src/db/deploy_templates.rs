//! Queries on `deploy_templates` (the shared ones of `db::named`). The API writes templates
//! directly (no node lock is involved); the deploy reads the templates matching an instance's
//! traits with one query (`by_names`).

use diesel::prelude::*;
use diesel_async::RunQueryDsl;

use super::{Db, with_conn};
use crate::{
    deploy_template::{self, DeployTemplate, DeployTemplateChanges},
    error::Result,
    schema::deploy_templates as table,
};

super::named::named_queries!(
    DeployTemplate,
    DeployTemplateChanges,
    table,
    deploy_template::not_found,
    "deploy template"
);

/// The templates named among `names` (an instance's traits), by id: one query.
pub async fn by_names(db: &Db, names: &[String]) -> Result<Vec<DeployTemplate>> {
    Ok(with_conn!(db, |conn| table::table
        .filter(table::name.eq_any(names))
        .order(table::id.asc())
        .select(DeployTemplate::as_select())
        .load(conn)
        .await?))
}
