//! Queries on `runbooks` (the shared ones of `db::named`). The API writes runbooks directly, as
//! Ironic's does; a clean with a runbook reads it by UUID or name.

use diesel::prelude::*;
use diesel_async::RunQueryDsl;

use crate::{
    runbook::{self, Runbook, RunbookChanges},
    schema::runbooks as table,
};

super::named::named_queries!(
    Runbook,
    RunbookChanges,
    table,
    runbook::not_found,
    "runbook"
);

/// How often a change of the traits reads the list again after another writer changed it in
/// between, and the first backoff (doubling: ~2 s in all, as many clients editing one runbook's
/// traits at once on a loaded machine have been seen to lose 8 races in a row).
const TRAIT_EDIT_ATTEMPTS: u32 = 10;
const TRAIT_EDIT_BACKOFF: std::time::Duration = std::time::Duration::from_millis(2);

/// Replaces the traits of the runbook `ident` (UUID or name), as [`edit_traits`] changes them.
pub async fn set_traits(
    db: &crate::db::Db,
    ident: &str,
    traits: Vec<String>,
) -> crate::error::Result<()> {
    edit_traits(db, ident, |current| current.clone_from(&traits)).await
}

/// Changes the traits of the runbook `ident` by `edit` (one added or removed): the list is
/// written only if it is still the one read, so two clients adding different traits at once
/// both keep theirs; a lost race reads the list again after a short backoff.
pub async fn edit_traits(
    db: &crate::db::Db,
    ident: &str,
    edit: impl Fn(&mut Vec<String>),
) -> crate::error::Result<()> {
    for attempt in 0..TRAIT_EDIT_ATTEMPTS {
        let runbook = get(db, ident).await?;
        let mut traits = runbook.traits.0.clone();
        edit(&mut traits);
        if traits == runbook.traits.0 {
            return Ok(());
        }
        let written = crate::db::with_write!(db, |conn| diesel::update(
            table::table
                .find(runbook.id)
                .filter(table::traits.eq(&runbook.traits))
        )
        .set((
            table::traits.eq(crate::node::Json(traits.clone())),
            table::updated_at.eq(Some(crate::node::now())),
        ))
        .execute(conn)
        .await?);
        if written == 1 {
            return Ok(());
        }
        tokio::time::sleep(TRAIT_EDIT_BACKOFF * 2u32.pow(attempt)).await;
    }
    Err(crate::error::Error::Conflict(format!(
        "The traits of runbook {ident} changed too often while this request ran; try again."
    )))
}
