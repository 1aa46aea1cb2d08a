//! /v1/inspection_rules (API 1.96): the API reads and writes inspection rules itself, as
//! Ironic's does (no node lock is involved). A rule is named by UUID only (Ironic's schema asks
//! for one: anything else is a 400). Listings page, sort and shape as every listing does, and
//! filter on `phase` (which Ironic carries into its `next` link but does not apply; Ferrum
//! applies it). Below 1.96 a GET is 404 and any other method 405, as in Ironic.

use serde::Deserialize;

use super::{
    ApiState,
    collection::{Found, ListRequest, Listed, Patched, Stored},
    extract::{ApiVersion, JsonSuffix},
    listing,
};
use crate::{
    db::{self, Db, inspection_rules::SortKey},
    error::{Error, Result},
    inspection_rule::{self, InspectionRule, InspectionRuleChanges, SUMMARY},
    node::JsonObject,
    patch::PatchOp,
};

/// The rule named in a path: a UUID (Ironic's parameter schema), or a 400.
fn rule_uuid(ident: &str) -> Result<String> {
    uuid::Uuid::try_parse(ident)
        .map(|u| u.hyphenated().to_string())
        .map_err(|_| {
            Error::InvalidParameterValue(format!("Schema error: '{ident}' is not a 'uuid'"))
        })
}

/// A listing's filter: the phase (carried into the `next` link, as Ironic carries it).
#[derive(Debug, Default, Deserialize)]
pub struct Filters {
    phase: Option<String>,
}

impl Listed for InspectionRule {
    const SUMMARY: &'static [&'static str] = SUMMARY;
    type Sort = SortKey;
    type Filters = Filters;

    async fn read(request: &ListRequest<'_, Self>, carried: &mut String) -> Result<Vec<Self>> {
        let phase = request.filters.phase.as_deref();
        let items = db::inspection_rules::list(&request.state.db, &request.page()?, phase).await?;
        listing::carry(carried, [("phase", &request.filters.phase)]);
        Ok(items)
    }
}

/// A rule is named by its UUID only (Ironic's parameter schema): anything else is a 400.
impl Found for InspectionRule {
    fn checked_ident(ident: String) -> Result<String> {
        rule_uuid(&ident)
    }

    async fn find(state: &ApiState, _: JsonSuffix, uuid: &str) -> Result<Self> {
        db::inspection_rules::get(&state.db, uuid).await
    }
}

/// A PATCH writes the schema's fields, `conditions` and `actions` whole or by index
/// (`/actions/0/args/value`); the patched rule is checked whole, as a created one.
impl Patched for InspectionRule {
    fn patched(&self, ops: &[PatchOp]) -> Result<InspectionRuleChanges> {
        inspection_rule::patched(self, ops)
    }

    async fn write(db: &Db, rule: &Self, changes: InspectionRuleChanges) -> Result<Self> {
        db::inspection_rules::update(db, rule, changes).await
    }
}

/// A create is checked as Ironic's schema and `validate_rule` check it, then stored.
impl Stored for InspectionRule {
    fn from_create(body: JsonObject, _: ApiVersion) -> Result<Self> {
        inspection_rule::from_create(body)
    }

    async fn insert(db: &Db, rule: &Self) -> Result<Self> {
        db::inspection_rules::insert(db, rule).await
    }

    async fn remove(db: &Db, uuid: &str) -> Result<()> {
        db::inspection_rules::delete(db, uuid).await
    }
}
