//! /v1/ports, /v1/nodes/{id}/ports and /v1/portgroups/{id}/ports: listings are read from the
//! database; a change goes to the conductor of the port's node (`conductor/ports.rs`).

use axum::{extract::State, response::Response};
use serde::Deserialize;
use serde_json::Value;

use super::{
    ApiState, BaseUrl,
    collection::{Found, ListRequest, Listed, NodeChild},
    extract::{ApiJson, ApiVersion, JsonSuffix, RequestId},
    listing,
    nodes::{call, find, require_version},
};
use crate::{
    db::{
        self,
        nodes::NodeIdent,
        ports::{PortFilter, SortKey},
    },
    error::{Error, Result},
    node::{JsonObject, Node, normalize_uuid},
    patch::PatchOp,
    ports::{self, Port},
    rpc::{PortsChange, RpcReply, RpcRequest},
};

/// A listing's filters.
#[derive(Debug, Default, Deserialize)]
pub struct Filters {
    node: Option<String>,
    node_uuid: Option<String>,
    address: Option<String>,
    portgroup: Option<String>,
    shard: Option<String>,
    conductor_groups: Option<String>,
    description_contains: Option<String>,
}

/// A comma-separated list as Ironic's `args.string_list` reads it: trimmed, lower-cased, empty
/// items and repeats dropped. Conductor groups are stored lower-cased, so the list matches them.
pub(super) fn string_list(text: &str) -> Vec<String> {
    let mut items: Vec<String> = Vec::new();
    for item in text.split(',') {
        let item = item.trim().to_lowercase();
        if !item.is_empty() && !items.contains(&item) {
            items.push(item);
        }
    }
    items
}

/// GET /v1/ports[/detail], /v1/nodes/{id}/ports[/detail] and /v1/portgroups/{id}/ports[/detail].
impl Listed for Port {
    const SUMMARY: &'static [&'static str] = ports::PORT_SUMMARY;
    type Sort = SortKey;
    type Filters = Filters;

    /// The filters a sub-collection's route does not carry already go into `next`.
    async fn read(request: &ListRequest<'_, Self>, carried: &mut String) -> Result<Vec<Self>> {
        let (state, version, route, q) = (
            request.state,
            request.version,
            request.route,
            request.filters,
        );
        let (node, portgroup) = match &route.parent {
            Some((parent, id)) if parent == "nodes" => (Some(id.clone()), None),
            Some((_, id)) => {
                require_version(version, 24, "ListRequest a portgroup's ports")?;
                (None, Some(id.clone()))
            }
            None => (
                q.node.clone().or_else(|| q.node_uuid.clone()),
                q.portgroup.clone(),
            ),
        };
        if let Some(shard) = &q.shard {
            require_version(version, 82, "The shard filter")?;
            // Ironic's `_get_ports_collection`: node, portgroup and shard exclude one another.
            if node.is_some() || portgroup.is_some() {
                return Err(Error::OperationNotPermitted);
            }
            carried.push_str(&format!(
                "shard={}&",
                super::nodes::list::encode_query_value(shard)
            ));
        }
        if node.is_some() && portgroup.is_some() {
            return Err(Error::InvalidParameterValue(
                "Ports can be listed by node or by portgroup, not both.".to_owned(),
            ));
        }
        // Ironic takes `conductor_groups` (1.99) and `description_contains` (1.97) at every
        // version, as here. (With `shard` Ironic drops the conductor groups; Ferrum keeps both.)
        let groups = q
            .conductor_groups
            .as_deref()
            .map(string_list)
            .filter(|g| !g.is_empty());
        if groups.is_some() && (node.is_some() || portgroup.is_some() || q.address.is_some()) {
            return Err(Error::InvalidParameterValue(
                "Filtering by conductor_groups cannot be combined with node_ident, portgroup_ident, or node address filters.".to_owned(),
            ));
        }
        let mut filter = PortFilter {
            node_shard_in: q.shard.as_deref().map(super::nodes::list::shard_list),
            node_conductor_group_in: groups,
            description_contains: q.description_contains.clone().filter(|d| !d.is_empty()),
            ..PortFilter::default()
        };
        if let Some(node) = &node {
            let found = find(state, node, version).await?;
            carried.push_str(&format!("node={}&", found.uuid));
            filter.node_uuid = Some(found.uuid);
        }
        if let Some(pg) = &portgroup {
            require_version(version, 24, "The portgroup filter")?;
            let found = db::ports::get_portgroup(&state.db, pg).await?;
            carried.push_str(&format!("portgroup={}&", found.uuid));
            filter.portgroup_uuid = Some(found.uuid);
        }
        if route.parent.is_some() {
            carried.clear();
        }
        listing::carry(
            carried,
            [
                ("conductor_groups", &q.conductor_groups),
                ("description_contains", &q.description_contains),
            ],
        );
        if let Some(address) = &q.address {
            filter.address = Some(ports::normalize_mac(address)?);
        }
        db::ports::list_ports(&state.db, &filter, &request.page()?).await
    }
}

/// A port is named by UUID or name.
impl Found for Port {
    async fn find(state: &ApiState, _: JsonSuffix, ident: &str) -> Result<Self> {
        db::ports::find_port(&state.db, ident).await
    }
}

/// The node a request names for a port or portgroup: 400 (not 404) when it does not exist, as
/// Ironic answers a create naming a missing node.
pub(super) async fn parent_node(state: &ApiState, body: &JsonObject) -> Result<Node> {
    let ident = match body.get("node_uuid") {
        Some(Value::String(n)) => normalize_uuid("node_uuid", n)?,
        Some(other) => return Err(crate::resource::wrong("node_uuid", "a string", other)),
        None => {
            return Err(Error::MissingParameterValue(
                "Missing mandatory parameter: node_uuid".to_owned(),
            ));
        }
    };
    match db::nodes::get(&state.db, NodeIdent::Uuid(&ident)).await {
        Err(Error::NodeNotFound { node }) => Err(Error::InvalidParameterValue(format!(
            "Node {node} could not be found."
        ))),
        other => other,
    }
}

/// `local_link_connection/network_type` is of API 1.64, its OVN VTEP switch keys of 1.90 to
/// 1.104.
fn check_local_link_version(version: ApiVersion, link: Option<&Value>) -> Result<()> {
    if link.and_then(|l| l.get("network_type")).is_some() {
        require_version(version, 64, "local_link_connection/network_type")?;
    }
    if link
        .and_then(Value::as_object)
        .is_some_and(ports::has_vtep_keys)
    {
        require_vtep_version(version)?;
    }
    Ok(())
}

/// The OVN VTEP switch keys of `local_link_connection` came in API 1.90 and went in 1.105: a
/// request outside that range that writes them is a 406, as Ironic's `_check_allowed_port_fields`
/// answers a create. (Ironic does not check a PATCH's version at all; Ferrum checks it as a
/// create's, so that no client writes a link it would be shown as `{}`.)
fn require_vtep_version(version: ApiVersion) -> Result<()> {
    require_version(version, 90, "local_link_connection/vtep-logical-switch")?;
    if ports::vtep_keys_allowed(version.0) {
        Ok(())
    } else {
        Err(Error::NotAcceptable(format!(
            "local_link_connection/vtep-logical-switch was removed in API version 1.105; this request asked for {version}."
        )))
    }
}

/// The node a port create names by `node_ident` (API 1.94: a UUID or a name) instead of
/// `node_uuid`; Ironic's schema wants exactly one of the two. A node that does not exist is a
/// 400, as for `node_uuid`. The body then names the node by UUID, as the conductor reads it.
async fn node_by_ident(
    state: &ApiState,
    version: ApiVersion,
    body: &mut JsonObject,
) -> Result<Option<Node>> {
    let Some(ident) = body.remove("node_ident") else {
        return Ok(None);
    };
    if body.contains_key("node_uuid") {
        return Err(Error::InvalidParameterValue(
            "Only one of node_ident and node_uuid may be given.".to_owned(),
        ));
    }
    let ident = crate::resource::string("node_ident", ident)?;
    require_version(version, 94, "node_ident")?;
    let node = match find(state, &ident, version).await {
        Err(Error::NodeNotFound { node }) => {
            return Err(Error::InvalidParameterValue(format!(
                "Node {node} could not be found."
            )));
        }
        other => other?,
    };
    body.insert("node_uuid".into(), Value::String(node.uuid.clone()));
    Ok(Some(node))
}

pub async fn create(
    State(state): State<ApiState>,
    version: ApiVersion,
    request_id: RequestId,
    BaseUrl(base): BaseUrl,
    ApiJson(mut body): ApiJson<JsonObject>,
) -> Result<Response> {
    let by_ident = node_by_ident(&state, version, &mut body).await?;
    listing::check_create::<Port>(version, &body)?;
    if !body.contains_key("address") {
        return Err(Error::MissingParameterValue(
            "Missing mandatory parameter: address".to_owned(),
        ));
    }
    check_local_link_version(version, body.get("local_link_connection"))?;
    let node = match by_ident {
        Some(node) => node,
        None => parent_node(&state, &body).await?,
    };
    let change = PortsChange::CreatePort { fields: body };
    let port = ports_call(&state, &request_id, node, change)
        .await?
        .into_port()?;
    Ok(listing::created(&port, version, &base))
}

/// A PATCH of a port's `local_link_connection` is checked against the version as a create's
/// is, and one of a portgroup member's `physical_network` is refused from 1.102.
impl NodeChild for Port {
    fn node_uuid(&self) -> &str {
        &self.node_uuid
    }

    fn check_ops(version: ApiVersion, ops: &[PatchOp]) -> Result<()> {
        for op in ops {
            if op.path.starts_with("/local_link_connection") {
                let value = op.value.as_ref();
                if op.path.ends_with("/network_type") && value.is_some() {
                    require_version(version, 64, "local_link_connection/network_type")?;
                }
                if (op.path.ends_with(ports::VTEP_LOGICAL_SWITCH)
                    || op.path.ends_with(ports::VTEP_PHYSICAL_SWITCH))
                    && value.is_some()
                {
                    require_vtep_version(version)?;
                }
                check_local_link_version(version, value)?;
            }
        }
        Ok(())
    }

    fn check_patch_of(&self, version: ApiVersion, ops: &[PatchOp]) -> Result<()> {
        check_physical_network_of_member(version, self, ops)
    }

    fn patch_request(node: Box<Node>, uuid: String, patch: Vec<PatchOp>) -> RpcRequest {
        let change = PortsChange::UpdatePort { uuid, patch };
        RpcRequest::ChangePorts { node, change }
    }

    fn destroy_request(node: Box<Node>, uuid: String) -> RpcRequest {
        let change = PortsChange::DestroyPort { uuid };
        RpcRequest::ChangePorts { node, change }
    }

    fn patched_item(reply: RpcReply) -> Result<Self> {
        reply.into_port()
    }
}

/// From API 1.102 a portgroup has a physical network, which its ports follow: a PATCH that
/// writes the `physical_network` of a port that is (or, after the patch, will be) in a portgroup
/// is refused, as Ironic refuses it. (Ironic's `is_path_updated` looks at the patch's first
/// operation only; Ferrum at all of them.)
fn check_physical_network_of_member(
    version: ApiVersion,
    port: &Port,
    ops: &[PatchOp],
) -> Result<()> {
    let writes_physnet = ops
        .iter()
        .any(|op| op.path == "/physical_network" || op.path.starts_with("/physical_network/"));
    if !version.at_least(102) || !writes_physnet {
        return Ok(());
    }
    let changes = crate::patch::apply(port, ops)?;
    let portgroup = changes
        .portgroup_uuid
        .unwrap_or_else(|| port.portgroup_uuid.clone());
    if portgroup.is_some() {
        return Err(Error::InvalidParameterValue(
            "physical_network cannot be changed while the port belongs to a portgroup.".to_owned(),
        ));
    }
    Ok(())
}

/// Sends a change of `node`'s ports, portgroups or VIFs to its conductor.
pub(super) async fn ports_call(
    state: &ApiState,
    request_id: &RequestId,
    node: Node,
    change: PortsChange,
) -> Result<RpcReply> {
    call(
        state,
        request_id,
        RpcRequest::ChangePorts {
            node: Box::new(node),
            change,
        },
    )
    .await
}
