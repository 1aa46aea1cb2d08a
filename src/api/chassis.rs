//! /v1/chassis: the API reads and writes chassis itself, as Ironic's does (no node lock is
//! involved), through the handlers of `collection.rs`; `/v1/chassis/{uuid}/nodes` lists a
//! chassis' nodes.

use axum::{Json, extract::State};
use serde_json::Value;

use super::{
    ApiState, BaseUrl,
    collection::{Found, ListRequest, Listed, NoFilters, Patched, Stored},
    extract::{ApiQuery, ApiVersion, JsonSuffix},
    listing::{self, Route},
};
use crate::{
    chassis::{self, Chassis, ChassisChanges},
    db::{self, Db, chassis::SortKey},
    error::Result,
    node::{JsonObject, normalize_uuid},
};

impl Listed for Chassis {
    const SUMMARY: &'static [&'static str] = chassis::SUMMARY;
    type Sort = SortKey;
    type Filters = NoFilters;

    async fn read(request: &ListRequest<'_, Self>, _: &mut String) -> Result<Vec<Self>> {
        db::chassis::list(&request.state.db, &request.page()?).await
    }
}

/// A chassis is named by its UUID only.
impl Found for Chassis {
    async fn find(state: &ApiState, _: JsonSuffix, uuid: &str) -> Result<Self> {
        db::chassis::get(&state.db, uuid).await
    }
}

impl Patched for Chassis {
    async fn write(db: &Db, chassis: &Self, changes: ChassisChanges) -> Result<Self> {
        db::chassis::update(db, chassis, changes).await
    }
}

impl Stored for Chassis {
    fn from_create(body: JsonObject, version: ApiVersion) -> Result<Self> {
        listing::check_create::<Self>(version, &body)?;
        chassis::from_create(body)
    }

    async fn insert(db: &Db, chassis: &Self) -> Result<Self> {
        db::chassis::insert(db, chassis).await
    }

    /// A chassis that still has nodes is not deleted (a 400).
    async fn remove(db: &Db, uuid: &str) -> Result<()> {
        db::chassis::delete(db, uuid).await
    }
}

/// GET /v1/chassis/{uuid}/nodes[/detail]: the node listing, narrowed to the chassis.
pub async fn nodes(
    state: State<ApiState>,
    version: ApiVersion,
    base: BaseUrl,
    route: Route,
    ApiQuery(mut q): ApiQuery<super::nodes::list::ListQuery>,
) -> Result<Json<Value>> {
    let uuid = route.parent.map(|(_, id)| id).unwrap_or_default();
    let found = db::chassis::get(&state.db, &normalize_uuid("chassis_uuid", &uuid)?).await?;
    q.chassis_uuid = Some(found.uuid);
    if route.detail {
        super::nodes::list::list_detail(state, version, base, ApiQuery(q)).await
    } else {
        super::nodes::list::list(state, version, base, ApiQuery(q)).await
    }
}
