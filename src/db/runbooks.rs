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
