//! GET /v1/nodes and /v1/nodes/detail: filters, sorting and paging in SQL, the fields of the
//! negotiated version, and `next` links that keep every filter.

use axum::{Json, extract::State};
use serde::Deserialize;
use serde_json::{Value, json};

use super::{conductor_shown, require_version};
use crate::{
    api::{
        ApiState, BaseUrl,
        extract::{ApiQuery, ApiVersion, parse_bool},
        views,
    },
    db,
    error::{Error, Result},
    node::normalize_uuid,
    states::ProvisionState,
};

#[derive(Debug, Default, Deserialize)]
pub struct ListQuery {
    limit: Option<i64>,
    marker: Option<String>,
    sort_key: Option<String>,
    sort_dir: Option<String>,
    fields: Option<String>,
    detail: Option<String>,
    provision_state: Option<String>,
    maintenance: Option<String>,
    driver: Option<String>,
    associated: Option<String>,
    instance_uuid: Option<String>,
    resource_class: Option<String>,
    conductor_group: Option<String>,
    fault: Option<String>,
    owner: Option<String>,
    description_contains: Option<String>,
    retired: Option<String>,
    lessee: Option<String>,
    conductor: Option<String>,
    shard: Option<String>,
    sharded: Option<String>,
    include_children: Option<String>,
    parent_node: Option<String>,
    instance_name: Option<String>,
    pub(in crate::api) chassis_uuid: Option<String>,
}

/// Ironic's `faults.VALID_FAULTS`.
pub const VALID_FAULTS: &[&str] = &[
    "power failure",
    "clean failure",
    "rescue abort failure",
    "service failure",
];

const MAX_LIMIT: i64 = 1000;

/// The query string of the next page: every filter of this one, then limit and marker
/// (Ironic's `next` link drops provision_state, driver, resource_class, conductor_group and
/// other filters: `_get_nodes_collection` in `ironic/api/controllers/v1/node.py`).
fn next_link(base: &str, path: &str, q: &ListQuery, limit: i64, marker: &str) -> String {
    let params = [
        ("sort_key", &q.sort_key),
        ("sort_dir", &q.sort_dir),
        ("fields", &q.fields),
        ("detail", &q.detail),
        ("provision_state", &q.provision_state),
        ("maintenance", &q.maintenance),
        ("driver", &q.driver),
        ("associated", &q.associated),
        ("resource_class", &q.resource_class),
        ("conductor_group", &q.conductor_group),
        ("fault", &q.fault),
        ("owner", &q.owner),
        ("description_contains", &q.description_contains),
        ("retired", &q.retired),
        ("lessee", &q.lessee),
        ("conductor", &q.conductor),
        ("shard", &q.shard),
        ("sharded", &q.sharded),
        ("include_children", &q.include_children),
        ("parent_node", &q.parent_node),
        ("instance_name", &q.instance_name),
    ];
    let mut url = format!("{base}/v1/{path}?");
    for (k, v) in params {
        if let Some(v) = v {
            url.push_str(&format!("{k}={}&", encode_query_value(v)));
        }
    }
    url.push_str(&format!("limit={limit}&marker={marker}"));
    url
}

/// A comma-separated list of shards, as Ironic's `args.string_list` reads it.
pub(in crate::api) fn shard_list(text: &str) -> Vec<String> {
    text.split(',').map(|s| s.trim().to_owned()).collect()
}

pub(in crate::api) fn encode_query_value(v: &str) -> String {
    v.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' | b',' => {
                (b as char).to_string()
            }
            other => format!("%{other:02X}"),
        })
        .collect()
}

async fn list_page(
    state: &ApiState,
    q: &ListQuery,
    version: ApiVersion,
    base: &str,
    detail_path: bool,
) -> Result<Value> {
    let limit = match q.limit {
        Some(l) if l <= 0 => {
            return Err(Error::InvalidParameterValue(format!(
                "Value must be positive: limit={l}"
            )));
        }
        Some(l) => l.min(MAX_LIMIT),
        None => MAX_LIMIT,
    };
    let detail_param = match &q.detail {
        Some(d) => {
            require_version(version, 43, "The detail parameter")?;
            parse_bool("detail", d)?
        }
        None => false,
    };
    if detail_path && q.detail.is_some() {
        return Err(Error::InvalidParameterValue(
            "The detail parameter cannot be used on /v1/nodes/detail.".to_owned(),
        ));
    }
    let detail = detail_path || detail_param;
    let fields: Option<Vec<String>> = match &q.fields {
        Some(f) => {
            require_version(version, 8, "The fields parameter")?;
            if detail {
                return Err(Error::InvalidParameterValue(
                    "Can not specify ?detail=True and fields in the same request.".to_owned(),
                ));
            }
            let names = views::field_names(f);
            views::check_field_names(version, &names)?;
            Some(names)
        }
        None => None,
    };
    let sort = match q.sort_key.as_deref() {
        None => db::nodes::SortKey::Id,
        Some(k) => db::nodes::SortKey::parse(k).ok_or_else(|| {
            Error::InvalidParameterValue(format!(
                "The sort_key value \"{k}\" is an invalid field for sorting; use one of {}.",
                db::nodes::SortKey::NAMES.join(", ")
            ))
        })?,
    };
    let descending = match q.sort_dir.as_deref() {
        None | Some("asc") => false,
        Some("desc") => true,
        Some(other) => {
            return Err(Error::InvalidParameterValue(format!(
                "Invalid sort direction: {other}. Acceptable values are 'asc' or 'desc'"
            )));
        }
    };
    let mut filter = db::nodes::NodeFilter::default();
    if let Some(s) = &q.provision_state {
        require_version(version, 9, "The provision_state filter")?;
        let Some(wanted) = ProvisionState::from_api_name(s) else {
            return Err(Error::InvalidParameterValue(format!(
                "Invalid value for provision_state: '{s}' is not a provision state."
            )));
        };
        filter.provision_state = Some(wanted);
    }
    if let Some(m) = &q.maintenance {
        filter.maintenance = Some(parse_bool("maintenance", m)?);
    }
    if let Some(d) = &q.driver {
        require_version(version, 16, "The driver filter")?;
        filter.driver = Some(d.clone());
    }
    if let Some(a) = &q.associated {
        filter.associated = Some(parse_bool("associated", a)?);
    }
    if let Some(c) = &q.chassis_uuid {
        filter.chassis_uuid = Some(normalize_uuid("chassis_uuid", c)?);
    }
    if let Some(i) = &q.instance_uuid {
        filter.instance_uuid = Some(normalize_uuid("instance_uuid", i)?);
    }
    if let Some(r) = &q.resource_class {
        require_version(version, 21, "The resource_class filter")?;
        filter.resource_class = Some(r.clone());
    }
    if let Some(g) = &q.conductor_group {
        require_version(version, 46, "The conductor_group filter")?;
        filter.conductor_group = Some(g.clone());
    }
    if let Some(f) = &q.fault {
        require_version(version, 42, "The fault filter")?;
        if !VALID_FAULTS.contains(&f.as_str()) {
            return Err(Error::InvalidParameterValue(format!(
                "Unrecognized fault \"{f}\" is specified, allowed faults are {}",
                VALID_FAULTS.join(", ")
            )));
        }
        filter.fault = Some(f.clone());
    }
    if let Some(r) = &q.retired {
        require_version(version, 61, "The retired filter")?;
        filter.retired = Some(parse_bool("retired", r)?);
    }
    if let Some(l) = &q.lessee {
        require_version(version, 65, "The lessee filter")?;
        filter.lessee = Some(l.clone());
    }
    if let Some(o) = &q.owner {
        require_version(version, 50, "The owner filter")?;
        filter.owner = Some(o.clone());
    }
    if let Some(d) = &q.description_contains {
        require_version(version, 51, "The description_contains filter")?;
        filter.description_contains = Some(d.clone());
    }
    if q.conductor.is_some() {
        require_version(version, 49, "The conductor filter")?;
    }
    if let Some(s) = &q.shard {
        require_version(version, 82, "The shard filter")?;
        filter.shard_in = Some(shard_list(s));
    }
    if let Some(s) = &q.sharded {
        require_version(version, 82, "The sharded filter")?;
        filter.sharded = Some(parse_bool("sharded", s)?);
    }
    if let Some(n) = &q.instance_name {
        require_version(version, 104, "The instance_name filter")?;
        filter.instance_name = Some(n.clone());
    }
    // As Ironic lists nodes (at every version): only those without a parent, or the children
    // of `parent_node`, unless `include_children` is true (which then ignores `parent_node`).
    let include_children = match &q.include_children {
        Some(i) => {
            require_version(version, 83, "The include_children parameter")?;
            parse_bool("include_children", i)?
        }
        None => false,
    };
    if q.parent_node.is_some() {
        require_version(version, 83, "The parent_node filter")?;
    }
    filter.children = if include_children {
        db::nodes::Children::All
    } else {
        match &q.parent_node {
            Some(p) => db::nodes::Children::Of(p.clone()),
            None => db::nodes::Children::TopLevel,
        }
    };
    let nodes = db::nodes::list_filtered(
        &state.db,
        &filter,
        sort,
        descending,
        limit,
        q.marker.as_deref(),
    )
    .await?;
    let wants_conductor = q.conductor.is_some()
        || match &fields {
            Some(fields) => fields.iter().any(|f| f == "conductor"),
            None => detail,
        };
    let mut items = Vec::with_capacity(nodes.len());
    for n in &nodes {
        let conductor = if wants_conductor {
            conductor_shown(state, n, version).await?
        } else {
            None
        };
        // As in Ironic, the conductor filter applies to the page read, so a page may come out
        // short while `next` still leads on.
        if let Some(wanted) = &q.conductor
            && conductor.as_deref() != Some(wanted.as_str())
        {
            continue;
        }
        let conductor = conductor.as_deref();
        items.push(match &fields {
            Some(fields) => views::node_fields(n, version, base, conductor, fields),
            None if detail => views::node_detail(n, version, base, conductor),
            None => views::node_summary(n, version, base),
        });
    }
    let mut body = json!({ "nodes": items });
    if nodes.len() as i64 == limit
        && let Some(last) = nodes.last()
        && q.instance_uuid.is_none()
    {
        let path = if detail_path { "nodes/detail" } else { "nodes" };
        body["next"] = json!(next_link(base, path, q, limit, &last.uuid));
    }
    Ok(body)
}

pub async fn list(
    State(state): State<ApiState>,
    version: ApiVersion,
    BaseUrl(base): BaseUrl,
    ApiQuery(query): ApiQuery<ListQuery>,
) -> Result<Json<Value>> {
    list_page(&state, &query, version, &base, false)
        .await
        .map(Json)
}

pub async fn list_detail(
    State(state): State<ApiState>,
    version: ApiVersion,
    BaseUrl(base): BaseUrl,
    ApiQuery(query): ApiQuery<ListQuery>,
) -> Result<Json<Value>> {
    list_page(&state, &query, version, &base, true)
        .await
        .map(Json)
}
