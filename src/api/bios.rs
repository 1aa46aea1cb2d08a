//! /v1/nodes/{id}/bios (API 1.40): the BIOS settings stored for a node (Ironic's
//! `NodeBiosController`), which its BIOS interface's clean steps write. A listing shows each
//! setting's `name` and `value`; from 1.74 `?detail=True`, and a single setting always, also
//! the registry fields, and `?fields=` picks among them. Every setting also shows `created_at`,
//! `updated_at` and its `links`, as Ironic's `object_to_dict` adds them.

use axum::{Json, extract::State};
use serde::Deserialize;
use serde_json::{Map, Value, json};

use super::{
    ApiState, BaseUrl,
    extract::{ApiPath, ApiQuery, ApiVersion, parse_bool},
    nodes::find,
};
use crate::{
    db,
    error::{Error, Result},
    node::bios::BiosSetting,
    resource::{field_names, links, opt_timestamp, timestamp},
};

/// The version of the registry fields, `?detail` and `?fields` (Ironic's `allow_query_bios`).
const REGISTRY: u32 = 74;

/// What a setting shows by default.
const DEFAULT_FIELDS: &[&str] = &["name", "value"];
/// What a setting shows with the registry fields (`?detail=True`, a single setting).
const REGISTRY_FIELDS: &[&str] = &[
    "name",
    "value",
    "attribute_type",
    "allowable_values",
    "lower_bound",
    "max_length",
    "min_length",
    "read_only",
    "reset_required",
    "unique",
    "upper_bound",
];
/// What `?fields=` may name besides the registry fields (Ironic's query schema).
const OTHER_FIELDS: &[&str] = &["created_at", "updated_at", "links", "node_uuid"];

#[derive(Debug, Default, Deserialize)]
pub struct BiosQuery {
    detail: Option<String>,
    fields: Option<String>,
}

/// GET /v1/nodes/{id}/bios.
pub async fn list(
    State(state): State<ApiState>,
    version: ApiVersion,
    BaseUrl(base): BaseUrl,
    ApiPath(ident): ApiPath<String>,
    ApiQuery(q): ApiQuery<BiosQuery>,
) -> Result<Json<Value>> {
    let fields = shown_fields(version, &q)?;
    let node = find(&state, &ident, version).await?;
    let settings = db::bios::list(&state.db, node.id).await?;
    let names: Vec<&str> = fields.iter().map(String::as_str).collect();
    let items: Vec<Value> = settings
        .iter()
        .map(|s| Value::Object(render(s, &ident, &node.uuid, &base, &names)))
        .collect();
    Ok(Json(json!({ "bios": items })))
}

/// GET /v1/nodes/{id}/bios/{name}: `{"<name>": {...}}`, with the registry fields from 1.74.
pub async fn show(
    State(state): State<ApiState>,
    version: ApiVersion,
    BaseUrl(base): BaseUrl,
    ApiPath((ident, name)): ApiPath<(String, String)>,
) -> Result<Json<Value>> {
    let node = find(&state, &ident, version).await?;
    let Some(setting) = db::bios::get(&state.db, node.id, &name).await? else {
        return Err(Error::BiosSettingNotFound {
            node: node.uuid,
            name,
        });
    };
    let names = if version.at_least(REGISTRY) {
        REGISTRY_FIELDS
    } else {
        DEFAULT_FIELDS
    };
    let mut body = Map::new();
    body.insert(
        name,
        Value::Object(render(&setting, &node.uuid, &node.uuid, &base, names)),
    );
    Ok(Json(Value::Object(body)))
}

/// The fields a listing shows, as Ironic's `get_request_return_fields` decides them: `detail`
/// and `fields` only from 1.74, not both at once; the names of `fields` checked.
fn shown_fields(version: ApiVersion, q: &BiosQuery) -> Result<Vec<String>> {
    let too_early = |what: &str, value: &str| {
        Error::InvalidParameterValue(format!("Invalid query parameter ?{what}={value} received."))
    };
    let detail = match &q.detail {
        Some(d) if !version.at_least(REGISTRY) => return Err(too_early("detail", d)),
        Some(d) => parse_bool("detail", d)?,
        None => false,
    };
    let own = |names: &[&str]| names.iter().map(|n| (*n).to_owned()).collect();
    match &q.fields {
        Some(f) if !version.at_least(REGISTRY) => Err(too_early("fields", f)),
        Some(_) if detail => Err(Error::InvalidParameterValue(
            "Can not specify ?detail=True and fields in the same request.".to_owned(),
        )),
        Some(f) => {
            let names = field_names(f);
            if let Some(bad) = names.iter().find(|n| {
                !REGISTRY_FIELDS.contains(&n.as_str()) && !OTHER_FIELDS.contains(&n.as_str())
            }) {
                return Err(Error::InvalidParameterValue(format!(
                    "Field {bad} is not a valid field."
                )));
            }
            Ok(names)
        }
        None if detail => Ok(own(REGISTRY_FIELDS)),
        None => Ok(own(DEFAULT_FIELDS)),
    }
}

/// A setting with `names`, its timestamps and its links (under the node as the client named
/// it, `ident`, as Ironic links them).
fn render(
    s: &BiosSetting,
    ident: &str,
    node_uuid: &str,
    base: &str,
    names: &[&str],
) -> Map<String, Value> {
    let mut m = Map::new();
    m.insert("created_at".into(), json!(timestamp(&s.created_at)));
    m.insert("updated_at".into(), opt_timestamp(&s.updated_at));
    for name in names {
        let value = match *name {
            "name" => json!(s.name),
            "value" => json!(s.value),
            "attribute_type" => json!(s.attribute_type),
            "allowable_values" => json!(s.allowable_values.as_ref().map(|v| &v.0)),
            "lower_bound" => json!(s.lower_bound),
            "max_length" => json!(s.max_length),
            "min_length" => json!(s.min_length),
            "read_only" => json!(s.read_only),
            "reset_required" => json!(s.reset_required),
            "unique" => json!(s.unique),
            "upper_bound" => json!(s.upper_bound),
            "node_uuid" => json!(node_uuid),
            // Always shown (above and below).
            _ => continue,
        };
        m.insert((*name).to_owned(), value);
    }
    m.insert(
        "links".into(),
        links(base, "nodes", &format!("{ident}/bios/{}", s.name)),
    );
    m
}
