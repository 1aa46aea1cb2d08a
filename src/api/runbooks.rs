//! /v1/runbooks (API 1.92): the API reads and writes runbooks itself, as Ironic's does (no node
//! lock is involved), through the handlers of `named.rs`. A runbook is named by UUID or by name;
//! a clean names one with `runbook` (`nodes/provision.rs`).

use super::named::Named;
use crate::{
    error::Result,
    node::JsonObject,
    patch::PatchOp,
    runbook::{self, Runbook, RunbookChanges},
};

impl Named for Runbook {
    const SINCE: u32 = runbook::SINCE;
    const PLURAL: &'static str = "runbooks";
    const SUMMARY: &'static [&'static str] = runbook::SUMMARY;

    fn from_create(body: JsonObject) -> Result<Self> {
        runbook::from_create(body)
    }

    fn check_patch(&self, ops: &[PatchOp], changes: &mut RunbookChanges) -> Result<()> {
        runbook::check_patch(self, ops, changes)
    }
}
