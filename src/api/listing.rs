//! What every collection but the nodes' shares: `limit`, `marker`, `sort_key`, `sort_dir`,
//! `fields` and `detail`, checked as Ironic checks them, and a page rendered in the negotiated
//! version with its `next` link. (The node listing has more filters and its own module.)

use serde::Deserialize;
use serde_json::{Map, Value, json};

use super::{extract::ApiVersion, extract::parse_bool, nodes::require_version};
use crate::{
    db::listing::Page,
    error::{Error, Result},
    resource::{self, Resource, View},
};

/// Ironic's `[api]max_limit`.
const MAX_LIMIT: i64 = 1000;

/// The paging and shaping parameters of a listing (flattened into each listing's query, which
/// hands every value over as text: so `limit` is read here).
#[derive(Debug, Default, Deserialize)]
pub struct Paging {
    pub limit: Option<String>,
    pub marker: Option<String>,
    pub sort_key: Option<String>,
    pub sort_dir: Option<String>,
    pub fields: Option<String>,
    pub detail: Option<String>,
}

/// How the items of a page are shown.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Shape {
    Summary,
    Detail,
    Fields(Vec<String>),
}

impl Paging {
    pub fn limit(&self) -> Result<i64> {
        let limit = match &self.limit {
            Some(l) => Some(l.parse::<i64>().map_err(|_| {
                Error::InvalidParameterValue(format!(
                    "Invalid value for limit: '{l}' is not an integer."
                ))
            })?),
            None => None,
        };
        match limit {
            Some(l) if l <= 0 => Err(Error::InvalidParameterValue(format!(
                "Value must be positive: limit={l}"
            ))),
            Some(l) => Ok(l.min(MAX_LIMIT)),
            None => Ok(MAX_LIMIT),
        }
    }

    pub fn descending(&self) -> Result<bool> {
        match self.sort_dir.as_deref() {
            None | Some("asc") => Ok(false),
            Some("desc") => Ok(true),
            Some(other) => Err(Error::InvalidParameterValue(format!(
                "Invalid sort direction: {other}. Acceptable values are 'asc' or 'desc'"
            ))),
        }
    }

    /// The sort key (`parse` reads one; `names` lists them for the error), `default` if none.
    pub fn sort<K>(&self, parse: fn(&str) -> Option<K>, names: &[&str], default: K) -> Result<K> {
        match self.sort_key.as_deref() {
            None => Ok(default),
            Some(k) => parse(k).ok_or_else(|| {
                Error::InvalidParameterValue(format!(
                    "The sort_key value \"{k}\" is an invalid field for sorting; use one of {}.",
                    names.join(", ")
                ))
            }),
        }
    }

    /// The page asked for, sorted by `sort`.
    pub fn page<K>(&self, sort: K) -> Result<Page<'_, K>> {
        Ok(Page {
            sort,
            descending: self.descending()?,
            limit: self.limit()?,
            marker: self.marker.as_deref(),
        })
    }

    /// The shape asked for: `/detail` or `detail=true` (1.43) shows every field, `fields` (1.8)
    /// some; not both.
    pub fn shape<R: Resource>(&self, version: ApiVersion, detail_path: bool) -> Result<Shape> {
        self.shape_as::<R>(
            version,
            detail_path,
            43,
            "Can not specify ?detail=True and fields in the same request.",
        )
    }

    /// [`shape`](Self::shape) with `detail=true` read from API 1.`detail_since` and `both` the
    /// refusal of `detail` with `fields`: Ironic's volume controllers read `detail` at every
    /// version they serve (1.32) and refuse both in their own words.
    pub fn shape_as<R: Resource>(
        &self,
        version: ApiVersion,
        detail_path: bool,
        detail_since: u32,
        both: &str,
    ) -> Result<Shape> {
        let detail_param = match &self.detail {
            Some(_) if detail_path => {
                return Err(Error::InvalidParameterValue(
                    "The detail parameter cannot be used on a /detail listing.".to_owned(),
                ));
            }
            Some(d) => {
                require_version(version, detail_since, "The detail parameter")?;
                parse_bool("detail", d)?
            }
            None => false,
        };
        let detail = detail_path || detail_param;
        match &self.fields {
            Some(_) if detail => Err(Error::InvalidParameterValue(both.to_owned())),
            Some(f) => {
                require_version(version, 8, "The fields parameter")?;
                let names = resource::field_names(f);
                resource::check_field_names::<R>(version.0, &names)?;
                Ok(Shape::Fields(names))
            }
            None if detail => Ok(Shape::Detail),
            None => Ok(Shape::Summary),
        }
    }

    /// The query string that carries this listing's shape and order to its next page.
    fn carried(&self) -> String {
        let mut query = String::new();
        carry(
            &mut query,
            [
                ("sort_key", &self.sort_key),
                ("sort_dir", &self.sort_dir),
                ("fields", &self.fields),
                ("detail", &self.detail),
            ],
        );
        query
    }
}

/// Appends to `query` each parameter given (`key=value&`, the value encoded), for a `next` link.
pub fn carry<const N: usize>(query: &mut String, params: [(&str, &Option<String>); N]) {
    for (key, value) in params {
        if let Some(value) = value {
            query.push_str(&format!(
                "{key}={}&",
                super::nodes::list::encode_query_value(value)
            ));
        }
    }
}

/// Where a listing was asked for: its route (`/v1/nodes/{ident}/ports/detail`) and the
/// identifier in it, if any. One handler serves a collection's listings at all its routes.
pub struct Route {
    /// Whether the route ends in `/detail`.
    pub detail: bool,
    /// The route's parent collection and the identifier given for it (`nodes`, `n1`), if the
    /// listing is a sub-collection.
    pub parent: Option<(String, String)>,
    /// The route's path for `next` links, without `/v1/`.
    pub path: String,
}

impl<S: Send + Sync> axum::extract::FromRequestParts<S> for Route {
    type Rejection = Error;

    async fn from_request_parts(parts: &mut axum::http::request::Parts, state: &S) -> Result<Self> {
        let matched = axum::extract::MatchedPath::from_request_parts(parts, state)
            .await
            .map_err(|e| Error::internal(format!("no matched route: {e}")))?;
        let params = axum::extract::RawPathParams::from_request_parts(parts, state)
            .await
            .map_err(|e| Error::InvalidParameterValue(format!("Invalid path: {e}")))?;
        let ident = params.iter().next().map(|(_, v)| v.to_owned());
        let pattern = matched.as_str().trim_start_matches("/v1/");
        let detail = pattern.ends_with("/detail");
        let segments: Vec<&str> = pattern.split('/').collect();
        let parent = ident.map(|id| (segments[0].to_owned(), id));
        let path = match &parent {
            Some((collection, id)) => {
                let rest = segments[2..].join("/");
                format!("{collection}/{id}/{rest}")
            }
            None => pattern.to_owned(),
        };
        Ok(Route {
            detail,
            parent,
            path,
        })
    }
}

/// One item as `shape` shows it.
pub fn render_item<R: Resource>(
    item: &R,
    shape: &Shape,
    summary: &[&str],
    version: ApiVersion,
    base: &str,
) -> Value {
    let view = View::new(item, version.0, base);
    Value::Object(match shape {
        Shape::Summary => resource::render_some(&view, summary),
        Shape::Detail => resource::render(&view),
        Shape::Fields(names) => resource::render_fields(&view, names),
    })
}

/// A page: `{"<collection>": [...]}`, with a `next` link to `<base>/v1/<path>` when the page is
/// full (`filters` is the query string of the listing's filters, carried along).
#[expect(clippy::too_many_arguments, reason = "each is one part of the page")]
pub fn page<R: Resource>(
    items: &[R],
    paging: &Paging,
    shape: &Shape,
    summary: &[&str],
    version: ApiVersion,
    base: &str,
    path: &str,
    filters: &str,
) -> Result<Value> {
    let rendered: Vec<Value> = items
        .iter()
        .map(|i| render_item(i, shape, summary, version, base))
        .collect();
    let mut body = Map::new();
    body.insert(R::LIST_KEY.to_owned(), Value::Array(rendered));
    let limit = paging.limit()?;
    if items.len() as i64 == limit
        && let Some(last) = items.last()
    {
        body.insert(
            "next".to_owned(),
            json!(format!(
                "{base}/v1/{path}?{}{filters}limit={limit}&marker={}",
                paging.carried(),
                last.uuid()
            )),
        );
    }
    Ok(Value::Object(body))
}

/// The field `name` of a create body or a PATCH path's root, checked against `R`'s field table: a
/// field `R` does not have, or that this kind of request cannot write, is refused as Ironic
/// refuses unexpected arguments (400); one newer than the negotiated version is 406.
pub fn check_written_field<R: Resource>(
    version: ApiVersion,
    name: &str,
    allowed: fn(&resource::Write<R>) -> bool,
) -> Result<()> {
    let field = resource::field::<R>(name)
        .filter(|f| f.write.as_ref().is_some_and(allowed))
        .ok_or_else(|| Error::InvalidParameterValue(format!("Unexpected arguments: {name}")))?;
    require_version(version, field.since, name)
}

/// Checks each field of a create's `body` as [`check_written_field`] does.
pub fn check_create<R: Resource>(
    version: ApiVersion,
    body: &serde_json::Map<String, Value>,
) -> Result<()> {
    for name in body.keys() {
        check_written_field::<R>(version, name, |w| w.create)?;
    }
    Ok(())
}

/// Checks a PATCH against `R`'s table at `version`: its shape, and each root field's version.
pub fn check_patch<R: Resource>(version: ApiVersion, ops: &[crate::patch::PatchOp]) -> Result<()> {
    crate::patch::validate::<R>(ops)?;
    for op in ops {
        let root = op
            .path
            .trim_start_matches('/')
            .split('/')
            .next()
            .unwrap_or("");
        check_written_field::<R>(version, root, |w| w.patch)?;
    }
    Ok(())
}

/// GET of one resource, or only `?fields=` of it (1.8).
pub fn show_one<R: Resource>(
    item: &R,
    fields: Option<&str>,
    version: ApiVersion,
    base: &str,
) -> Result<Value> {
    let shape = match fields {
        None => Shape::Detail,
        Some(f) => {
            require_version(version, 8, "The fields parameter")?;
            let names = resource::field_names(f);
            resource::check_field_names::<R>(version.0, &names)?;
            Shape::Fields(names)
        }
    };
    Ok(render_item(item, &shape, &[], version, base))
}

/// The full resource, as a show, create or update answers with it.
pub fn detail<R: Resource>(item: &R, version: ApiVersion, base: &str) -> Value {
    render_item(item, &Shape::Detail, &[], version, base)
}

/// 201 Created with the resource and `Location: <url>/v1/<collection>/<uuid>`.
pub fn created<R: Resource>(item: &R, version: ApiVersion, base: &str) -> axum::response::Response {
    use axum::{
        http::{HeaderValue, StatusCode, header},
        response::IntoResponse,
    };
    let body = detail(item, version, base);
    let mut response = (StatusCode::CREATED, axum::Json(body)).into_response();
    let location = format!("{base}/v1/{}/{}", R::COLLECTION, item.uuid());
    if let Ok(v) = HeaderValue::from_str(&location) {
        response.headers_mut().insert(header::LOCATION, v);
    }
    response
}

/// The `fields` parameter of a GET of one resource.
#[derive(Debug, Default, Deserialize)]
pub struct ShowQuery {
    pub fields: Option<String>,
}
