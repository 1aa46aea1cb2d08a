//! The node listing: what it is narrowed to ([`NodeFilter`]), sorted by ([`SortKey`]) and one
//! page of it, every filter run in SQL before the page is cut; and the other reads over many
//! nodes the API answers with (a node's children, the shards).

use diesel::prelude::*;
use diesel_async::RunQueryDsl;

use super::get_by_uuid;
use crate::{
    db::{
        Db,
        listing::{Page, sort_keys, sorted_page},
        with_conn,
    },
    error::Result,
    node::Node,
    schema::nodes,
    states::ProvisionState,
};

/// What a node listing is narrowed to; every filter runs in SQL, before the page is cut.
#[derive(Debug, Clone, Default)]
pub struct NodeFilter {
    pub provision_state: Option<ProvisionState>,
    pub maintenance: Option<bool>,
    pub driver: Option<String>,
    /// Some(true): nodes with an instance; Some(false): nodes without.
    pub associated: Option<bool>,
    pub instance_uuid: Option<String>,
    /// Nodes whose instance is named so (API 1.104).
    pub instance_name: Option<String>,
    pub resource_class: Option<String>,
    pub conductor_group: Option<String>,
    pub fault: Option<String>,
    pub owner: Option<String>,
    /// Nodes whose description contains this text.
    pub description_contains: Option<String>,
    pub retired: Option<bool>,
    pub lessee: Option<String>,
    /// Nodes the project owns or leases (Ironic's `project` filter).
    pub project: Option<String>,
    /// Nodes among these UUIDs.
    pub uuid_in: Option<Vec<String>>,
    /// Nodes after this internal id: a page of a scan by id that needs no marker row.
    pub after_id: Option<i32>,
    pub chassis_uuid: Option<String>,
    /// Nodes in one of these shards (API 1.82).
    pub shard_in: Option<Vec<String>>,
    /// Some(true): nodes with a shard; Some(false): nodes without.
    pub sharded: Option<bool>,
    /// Which nodes by their parent (API 1.83); all of them by default.
    pub children: Children,
}

/// The nodes a listing takes by their `parent_node`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum Children {
    #[default]
    All,
    /// Nodes without a parent: what the API lists unless asked for children.
    TopLevel,
    /// The children of the node with this UUID.
    Of(String),
}

sort_keys! {
    /// The orders a listing can take: by a column, then by id. Nulls sort first, as both
    /// backends order them. Every key a listing may sort by (JSON columns and traits cannot be
    /// sorted, as in Ironic).
    pub enum SortKey {
        Id = "id", Uuid = "uuid", CreatedAt = "created_at", UpdatedAt = "updated_at",
        ProvisionState = "provision_state", ProvisionUpdatedAt = "provision_updated_at",
        PowerState = "power_state", Driver = "driver", Name = "name",
        InstanceUuid = "instance_uuid", ResourceClass = "resource_class",
        ConductorGroup = "conductor_group",
    }
}

/// One page of nodes matching `filter`, ordered by `sort` (then id), after the node `marker`.
pub async fn list_filtered(
    db: &Db,
    filter: &NodeFilter,
    sort: SortKey,
    descending: bool,
    limit: i64,
    marker: Option<&str>,
) -> Result<Vec<Node>> {
    let page = Page {
        sort,
        descending,
        limit,
        marker,
    };
    let marker = page.marker_row(|m| get_by_uuid(db, m)).await?;
    Ok(with_conn!(db, |conn| {
        let mut q = nodes::table.select(Node::as_select()).into_boxed();
        if let Some(v) = &filter.provision_state {
            q = q.filter(nodes::provision_state.eq(*v));
        }
        if let Some(v) = filter.maintenance {
            q = q.filter(nodes::maintenance.eq(v));
        }
        if let Some(v) = &filter.driver {
            q = q.filter(nodes::driver.eq(v.clone()));
        }
        match filter.associated {
            Some(true) => q = q.filter(nodes::instance_uuid.is_not_null()),
            Some(false) => q = q.filter(nodes::instance_uuid.is_null()),
            None => {}
        }
        if let Some(v) = &filter.instance_uuid {
            q = q.filter(nodes::instance_uuid.eq(v.clone()));
        }
        if let Some(v) = &filter.instance_name {
            q = q.filter(nodes::instance_name.eq(v));
        }
        if let Some(v) = &filter.resource_class {
            q = q.filter(nodes::resource_class.eq(v.clone()));
        }
        if let Some(v) = &filter.fault {
            q = q.filter(nodes::fault.eq(v));
        }
        if let Some(v) = &filter.owner {
            q = q.filter(nodes::owner.eq(v));
        }
        if let Some(v) = &filter.chassis_uuid {
            q = q.filter(nodes::chassis_uuid.eq(v));
        }
        if let Some(v) = filter.retired {
            q = q.filter(nodes::retired.eq(v));
        }
        if let Some(v) = &filter.lessee {
            q = q.filter(nodes::lessee.eq(v));
        }
        if let Some(v) = &filter.project {
            q = q.filter(nodes::owner.eq(v).or(nodes::lessee.eq(v)));
        }
        if let Some(v) = &filter.uuid_in {
            q = q.filter(nodes::uuid.eq_any(v));
        }
        if let Some(v) = filter.after_id {
            q = q.filter(nodes::id.gt(v));
        }
        if let Some(v) = &filter.description_contains {
            q = q.filter(nodes::description.like(like_containing(v)).escape('\\'));
        }
        if let Some(v) = &filter.conductor_group {
            q = q.filter(nodes::conductor_group.eq(v.to_lowercase()));
        }
        if let Some(v) = &filter.shard_in {
            q = q.filter(nodes::shard.eq_any(v));
        }
        match filter.sharded {
            Some(true) => q = q.filter(nodes::shard.is_not_null()),
            Some(false) => q = q.filter(nodes::shard.is_null()),
            None => {}
        }
        match &filter.children {
            Children::All => {}
            Children::TopLevel => q = q.filter(nodes::parent_node.is_null()),
            Children::Of(parent) => q = q.filter(nodes::parent_node.eq(parent.clone())),
        }
        let q = sorted_page!(q, nodes, page, marker.as_ref(), SortKey {
            Uuid => uuid, CreatedAt => created_at, ProvisionState => provision_state,
            Driver => driver, ConductorGroup => conductor_group
        } nullable {
            Name => name, UpdatedAt => updated_at, ProvisionUpdatedAt => provision_updated_at,
            PowerState => power_state, InstanceUuid => instance_uuid,
            ResourceClass => resource_class
        });
        q.load(conn).await?
    }))
}

/// The UUIDs of the children of the node `parent`, in the order they were created.
pub async fn children_of(db: &Db, parent: &str) -> Result<Vec<String>> {
    Ok(with_conn!(db, |conn| nodes::table
        .filter(nodes::parent_node.eq(parent))
        .order(nodes::id)
        .select(nodes::uuid)
        .load(conn)
        .await?))
}

/// The shards nodes are in, with how many nodes each has (API 1.82): most nodes first, then by
/// name. Unlike Ironic's query, which also counts the unsharded nodes under the name `None`, a
/// node without a shard is in none.
pub async fn shard_counts(db: &Db) -> Result<Vec<(String, i64)>> {
    let rows: Vec<(Option<String>, i64)> = with_conn!(db, |conn| nodes::table
        .filter(nodes::shard.is_not_null())
        .group_by(nodes::shard)
        .select((nodes::shard, diesel::dsl::count_star()))
        .load(conn)
        .await?);
    let mut shards: Vec<(String, i64)> = rows
        .into_iter()
        .filter_map(|(name, count)| name.map(|n| (n, count)))
        .collect();
    shards.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    Ok(shards)
}

/// A LIKE pattern matching any text that contains `text` literally: its `%`, `_` and backslashes
/// are escaped with a backslash.
pub(in crate::db) fn like_containing(text: &str) -> String {
    let mut pattern = String::with_capacity(text.len() + 2);
    pattern.push('%');
    for c in text.chars() {
        if matches!(c, '%' | '_' | '\\') {
            pattern.push('\\');
        }
        pattern.push(c);
    }
    pattern.push('%');
    pattern
}

/// One page of nodes in id order, after the node `marker` (a UUID) if given.
pub async fn list(db: &Db, limit: i64, marker: Option<&str>) -> Result<Vec<Node>> {
    list_filtered(
        db,
        &NodeFilter::default(),
        SortKey::Id,
        false,
        limit,
        marker,
    )
    .await
}
