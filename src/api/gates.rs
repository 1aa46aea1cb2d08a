//! Which microversion each resource exists from, and how Ironic answers a request for it below
//! that version: one table, [`GATES`], read by one middleware before routing.
//!
//! Ironic decides these before it matches the request's method, so the answer depends on the
//! method as its routing does, not on which methods the resource has: a node's sub-resources
//! are refused by `NodesController._lookup` (`ironic/api/controllers/v1/node.py`) with a 404
//! for any method, except `traits`, which `_lookup` hands back to the node's own handlers
//! (its GET becomes the node's `get_one` with `fields=traits`: 406; PUT finds no handler: 405;
//! DELETE reaches the node's `delete` with arguments left over: 404); the top-level resources
//! are refused by each controller's `validation.api_version` (`allocation.py`,
//! `deploy_template.py`, `runbook.py`, `inspection_rule.py`: a GET 404, a change 405) or its own
//! check. Checks on a request's body or parameters stay in the handlers.

use axum::{extract::Request, http::Method, middleware::Next, response::IntoResponse};

use super::extract::ApiVersion;
use crate::error::Error;

/// How a too-old request is answered: the status, and Ironic's message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    NotFound(&'static str),
    MethodNotAllowed(&'static str),
    NotAcceptable(&'static str),
}

impl Refusal {
    pub fn error(self) -> Error {
        match self {
            Refusal::NotFound(message) => Error::NotFound(message.to_owned()),
            Refusal::MethodNotAllowed(message) => Error::MethodNotAllowed(message.to_owned()),
            Refusal::NotAcceptable(message) => Error::NotAcceptable(message.to_owned()),
        }
    }
}

/// One row: requests with one of `methods` ("*": any) to a path matching `path` (below `/v1/`;
/// `*` is any one segment, a final `**` any number of them, none included) are answered
/// `refusal` below API 1.`since`.
#[derive(Debug, Clone, Copy)]
pub struct Gate {
    pub methods: &'static [&'static str],
    pub path: &'static str,
    pub since: u32,
    pub refusal: Refusal,
}

const ANY: &[&str] = &["*"];
const GET: &[&str] = &["GET"];
const PUT: &[&str] = &["PUT"];
const DELETE: &[&str] = &["DELETE"];
const CHANGES: &[&str] = &["POST", "PUT", "PATCH", "DELETE"];
const CHANGES_BUT_PUT: &[&str] = &["POST", "PATCH", "DELETE"];

/// The web framework's answers (pecan's `abort`), and Ironic's own for a resource that its
/// version does not have.
const NO_RESOURCE: Refusal = Refusal::NotFound("The resource could not be found.");
const NO_METHOD: Refusal =
    Refusal::MethodNotAllowed("The method is not allowed for this resource.");
const NOT_IN_VERSION: Refusal = Refusal::NotFound("The API is not supported for this version");

const fn gate(
    methods: &'static [&'static str],
    path: &'static str,
    since: u32,
    refusal: Refusal,
) -> Gate {
    Gate {
        methods,
        path,
        since,
        refusal,
    }
}

use Refusal::{MethodNotAllowed, NotAcceptable, NotFound};

/// Every resource's version gate. A request is refused by the first row that refuses it.
pub const GATES: &[Gate] = &[
    // A node's sub-resources (`NodesController._lookup`, its `_subcontroller_map`, and the
    // `allow_*` checks of `utils.py` it calls).
    gate(ANY, "nodes/*/portgroups/**", 24, NO_RESOURCE),
    gate(ANY, "nodes/*/vifs/**", 28, NO_RESOURCE),
    // `VolumeController` is not gated by `_lookup`: its GET refuses itself, and its connectors
    // and targets controllers refuse any method.
    gate(GET, "nodes/*/volume", 32, NOT_IN_VERSION),
    gate(ANY, "nodes/*/volume/*/**", 32, NO_RESOURCE),
    gate(
        GET,
        "nodes/*/traits",
        37,
        NotAcceptable("Request not acceptable."),
    ),
    gate(PUT, "nodes/*/traits/**", 37, NO_METHOD),
    gate(DELETE, "nodes/*/traits/**", 37, NO_RESOURCE),
    gate(ANY, "nodes/*/bios/**", 40, NO_RESOURCE),
    gate(ANY, "nodes/*/allocation/**", 52, NO_RESOURCE),
    gate(ANY, "nodes/*/history/**", 78, NO_RESOURCE),
    gate(ANY, "nodes/*/inventory/**", 81, NO_RESOURCE),
    // `NodeChildrenController` raises its 404 while it is looked up, outside any handler,
    // which Ironic's server turns into a 500; the 404 is what it means.
    gate(ANY, "nodes/*/children/**", 83, NO_RESOURCE),
    gate(ANY, "nodes/*/firmware/**", 86, NO_RESOURCE),
    gate(ANY, "nodes/*/vmedia/**", 89, NO_RESOURCE),
    gate(GET, "nodes/*/vmedia", 93, NO_RESOURCE),
    // `InjectNmiController.put`.
    gate(PUT, "nodes/*/management/inject_nmi", 29, NO_RESOURCE),
    // Top-level resources: `validation.api_version` on each controller's methods, or the
    // controller's own check.
    gate(CHANGES_BUT_PUT, "portgroups/**", 23, NOT_IN_VERSION),
    gate(GET, "portgroups/**", 23, NOT_IN_VERSION),
    gate(GET, "volume", 32, NOT_IN_VERSION),
    gate(ANY, "volume/*/**", 32, NO_RESOURCE),
    gate(GET, "conductors/**", 49, NOT_IN_VERSION),
    gate(
        GET,
        "allocations/**",
        52,
        NotFound("The API version does not allow allocations"),
    ),
    gate(
        &["POST", "DELETE"],
        "allocations/**",
        52,
        MethodNotAllowed("The API version does not allow allocations"),
    ),
    gate(
        &["PATCH"],
        "allocations/**",
        57,
        MethodNotAllowed("The API version does not allow updating allocations"),
    ),
    gate(&["POST"], "events", 54, NOT_IN_VERSION),
    gate(
        GET,
        "deploy_templates/**",
        55,
        NotFound("The API version does not allow deploy templates"),
    ),
    gate(
        CHANGES,
        "deploy_templates/**",
        55,
        MethodNotAllowed("The API version does not allow deploy templates"),
    ),
    gate(
        GET,
        "shards",
        82,
        NotFound("The API version does not allow shards"),
    ),
    gate(
        GET,
        "runbooks/**",
        92,
        NotFound("The API version does not allow runbooks"),
    ),
    gate(
        CHANGES,
        "runbooks/**",
        92,
        MethodNotAllowed("The API version does not allow runbooks"),
    ),
    gate(
        ANY,
        "runbooks/*/traits/**",
        112,
        NotFound("The API version does not allow runbook traits"),
    ),
    gate(
        GET,
        "inspection_rules/**",
        96,
        NotFound("The API version does not allow inspection rules"),
    ),
    gate(
        CHANGES_BUT_PUT,
        "inspection_rules/**",
        96,
        MethodNotAllowed("The API version does not allow inspection rules"),
    ),
    // `LookupController.get_all`.
    gate(GET, "lookup", 22, NO_RESOURCE),
];

impl Gate {
    /// Whether this row is about `method` on `path` (segments below `/v1/`).
    pub fn covers(&self, method: &Method, path: &[&str]) -> bool {
        let method_matches = self
            .methods
            .iter()
            .any(|m| *m == "*" || *m == method.as_str());
        method_matches && matches(self.path, path)
    }
}

/// Whether `segments` match `pattern` (see [`Gate`]).
fn matches(pattern: &str, segments: &[&str]) -> bool {
    let mut rest = segments;
    for want in pattern.split('/') {
        if want == "**" {
            return true;
        }
        match rest.split_first() {
            Some((seg, tail)) if want == "*" || want == *seg => rest = tail,
            _ => return false,
        }
    }
    rest.is_empty()
}

/// The refusal of a request with `method` to `path` at `version`, if a gate refuses it.
pub fn refusal(method: &Method, path: &str, version: ApiVersion) -> Option<Refusal> {
    let below_v1 = path.strip_prefix("/v1/")?;
    let segments: Vec<&str> = below_v1.split('/').collect();
    GATES
        .iter()
        .find(|g| !version.at_least(g.since) && g.covers(method, &segments))
        .map(|g| g.refusal)
}

/// Middleware (inside version negotiation, before routing): answers a request its version is
/// too old for as [`GATES`] says.
pub async fn refuse_too_old(request: Request, next: Next) -> axum::response::Response {
    let version = request.extensions().get::<ApiVersion>().copied();
    let refused = version.and_then(|v| refusal(request.method(), request.uri().path(), v));
    match refused {
        Some(refusal) => refusal.error().into_response(),
        None => next.run(request).await,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patterns_match_whole_segments() {
        assert!(matches("nodes/*/vifs/**", &["nodes", "n", "vifs"]));
        assert!(matches("nodes/*/vifs/**", &["nodes", "n", "vifs", "v"]));
        assert!(!matches("nodes/*/vifs/**", &["nodes", "n", "vif"]));
        assert!(!matches("nodes/*/vifs/**", &["nodes", "n"]));
        assert!(matches("nodes/*/traits", &["nodes", "n", "traits"]));
        assert!(!matches("nodes/*/traits", &["nodes", "n", "traits", "T"]));
        assert!(!matches("volume/*/**", &["volume"]));
        assert!(matches("volume/*/**", &["volume", "connectors", "x"]));
    }

    #[test]
    fn the_first_refusing_row_answers() {
        let at = |m: Method, p: &str, v: u32| refusal(&m, p, ApiVersion(v));
        assert_eq!(
            at(Method::GET, "/v1/nodes/n/traits", 36),
            Some(NotAcceptable("Request not acceptable."))
        );
        assert_eq!(at(Method::GET, "/v1/nodes/n/traits", 37), None);
        assert_eq!(at(Method::GET, "/v1/nodes/n/vmedia", 92), Some(NO_RESOURCE));
        assert_eq!(at(Method::POST, "/v1/nodes/n/vmedia", 92), None);
        assert_eq!(at(Method::GET, "/v1/nodes/traits", 1), None);
        assert_eq!(at(Method::GET, "/nodes/n/traits", 1), None);
    }
}
