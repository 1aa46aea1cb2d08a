//! Allocations (API 1.52), as Ironic's `conductor/allocations.py` processes them: the candidates
//! (available, not in maintenance, without an instance, with a power state, of the resource
//! class, with every requested trait, among `candidate_nodes`, of the allocation's owner from
//! 1.60) are tried in random order (a node named like the allocation first), each reserved by
//! [`change_node`]'s conditional write that sets the node's `instance_uuid` and
//! `allocation_uuid` after checking it again on the row as read; a write that loses a race reads
//! the node afresh and checks again, so two allocations never get one node.
//!
//! Ironic replies `allocating` and processes the allocation in a worker thread. Ferrum processes
//! it before replying: it is a few conditional writes, no driver call and no transaction, and a
//! client polling until the state is not `allocating` sees the same thing, one poll sooner.

use rand::seq::SliceRandom;
use tokio::time::Instant;

use super::{
    Ctx,
    task::{Decision, Hold, change_node},
};
use crate::{
    allocation::{self, Allocation, AllocationChanges},
    db::{self, nodes::NodeFilter},
    error::{Error, Result},
    node::{Node, NodeChanges},
    states::ProvisionState,
};

/// Creates the allocation and processes it: a backfill for `node` (1.58), or an allocation.
pub async fn create(
    ctx: &Ctx,
    allocation: Allocation,
    node: Option<Node>,
    deadline: Option<Instant>,
) -> Result<Allocation> {
    let stored = match db::allocations::insert(&ctx.db, &allocation).await {
        Ok(stored) => stored,
        // A retry of this very request (its first conductor went away, see `api::nodes::call`):
        // the row it made is carried on from, or is the answer once processed.
        Err(e @ Error::Conflict(_)) => {
            match db::allocations::get(&ctx.db, &allocation.uuid).await {
                Ok(existing) if same_request(&existing, &allocation) => {
                    if existing.state != allocation::ALLOCATING {
                        return Ok(existing);
                    }
                    existing
                }
                _ => return Err(e),
            }
        }
        Err(e) => return Err(e),
    };
    match node {
        Some(node) => backfill(ctx, stored, node, deadline).await,
        None => allocate(ctx, stored, deadline).await,
    }
}

/// Whether `stored` is the row `asked` made: the API stamps `created_at` once per request.
fn same_request(stored: &Allocation, asked: &Allocation) -> bool {
    stored.created_at == asked.created_at
        && stored.name == asked.name
        && stored.resource_class == asked.resource_class
        && stored.traits == asked.traits
        && stored.candidate_nodes == asked.candidate_nodes
        && stored.owner == asked.owner
}

/// Why a candidate is no longer suitable, checked on the row as read just before it is taken.
fn unsuitable(node: &Node, a: &Allocation) -> bool {
    node.maintenance
        || node.instance_uuid.is_some()
        || node.allocation_uuid.is_some()
        || node.provision_state != ProvisionState::Available
        || node.power_state.is_none()
        || node.resource_class != a.resource_class
        || (!a.candidate_nodes.0.is_empty() && !a.candidate_nodes.0.contains(&node.uuid))
        || (a.owner.is_some() && node.owner != a.owner && node.lessee != a.owner)
        || !allocation::traits_match(&a.traits.0, &node.traits.0)
}

/// The changes that reserve `node` for `a`: its instance is the allocation, and its
/// `instance_info` carries the requested traits (as Ironic's `update_allocation` does).
fn reservation(node: &Node, a: &Allocation) -> NodeChanges {
    let mut info = node.instance_info.clone();
    info.0
        .insert("traits".to_owned(), serde_json::json!(a.traits.0));
    NodeChanges {
        instance_uuid: Some(Some(a.uuid.clone())),
        allocation_uuid: Some(Some(a.uuid.clone())),
        instance_info: Some(info),
        ..NodeChanges::default()
    }
}

/// How many candidates are read at a time: an allocation reads pages of available nodes of its
/// class until one is reserved, so its cost does not grow with the number of such nodes (Ironic
/// reads them all).
const PAGE: usize = 100;

/// The filter of the nodes an allocation may take (Ironic's `_candidate_nodes`); traits are
/// matched on the rows read. A retired node is never available, so it is not filtered on; a
/// child node (1.83) is not a candidate, as Ironic's node list leaves children out by default.
fn candidate_filter(a: &Allocation) -> NodeFilter {
    NodeFilter {
        children: crate::db::nodes::Children::TopLevel,
        provision_state: Some(ProvisionState::Available),
        maintenance: Some(false),
        associated: Some(false),
        resource_class: a.resource_class.clone(),
        project: a.owner.clone(),
        uuid_in: (!a.candidate_nodes.0.is_empty()).then(|| a.candidate_nodes.0.clone()),
        ..NodeFilter::default()
    }
}

/// What the scan for a node saw, for the reason an allocation failed.
#[derive(Default)]
struct Scan {
    of_class: usize,
    with_traits: usize,
    locked: usize,
}

/// Tries to reserve `node` for `a`: true when it is taken; false when it was taken by another
/// allocation, changed or gone meanwhile (or is locked, counted in `scan`).
async fn try_reserve(
    ctx: &Ctx,
    a: &Allocation,
    node: Node,
    deadline: Option<Instant>,
    scan: &mut Scan,
) -> Result<bool> {
    let uuid = node.uuid.clone();
    let taken = change_node(ctx, &uuid, Some(node), deadline, |n| {
        if unsuitable(n, a) {
            return Err(Error::InvalidState(format!(
                "node {} is no longer suitable",
                n.uuid
            )));
        }
        Ok(Decision::Write(reservation(n, a), Hold::Release))
    })
    .await;
    match taken {
        Ok(_) => Ok(true),
        Err(Error::NodeLocked { .. }) => {
            scan.locked += 1;
            Ok(false)
        }
        Err(Error::InvalidState(_) | Error::NodeNotFound { .. } | Error::NodeAssociated { .. }) => {
            Ok(false)
        }
        Err(e) => Err(e),
    }
}

/// Finds and reserves a node for `a`; the allocation ends active, or in error with why. A node
/// named as the allocation is tried first (as in Ironic); then pages of candidates by id, each
/// shuffled, so that allocations running at once seldom race for the same node.
async fn allocate(ctx: &Ctx, a: Allocation, deadline: Option<Instant>) -> Result<Allocation> {
    let mut filter = candidate_filter(&a);
    let mut scan = Scan::default();
    let mut reserved = None;
    if let Some(name) = &a.name {
        match db::nodes::get(&ctx.db, db::nodes::NodeIdent::Name(name)).await {
            Ok(node) if !unsuitable(&node, &a) => {
                let uuid = node.uuid.clone();
                if try_reserve(ctx, &a, node, deadline, &mut scan).await? {
                    reserved = Some(uuid);
                }
            }
            Ok(_) | Err(Error::NodeNotFound { .. }) => {}
            Err(e) => return Err(e),
        }
    }
    while reserved.is_none() {
        let page = db::nodes::list_filtered(
            &ctx.db,
            &filter,
            db::nodes::SortKey::Id,
            false,
            PAGE as i64,
            None,
        )
        .await?;
        let last_page = page.len() < PAGE;
        filter.after_id = page.last().map(|n| n.id);
        let mut nodes: Vec<Node> = page
            .into_iter()
            .filter(|n| n.power_state.is_some())
            .collect();
        scan.of_class += nodes.len();
        nodes.retain(|n| allocation::traits_match(&a.traits.0, &n.traits.0));
        scan.with_traits += nodes.len();
        nodes.shuffle(&mut rand::rng());
        for node in nodes {
            let uuid = node.uuid.clone();
            if try_reserve(ctx, &a, node, deadline, &mut scan).await? {
                reserved = Some(uuid);
                break;
            }
        }
        if last_page {
            break;
        }
    }
    if let Some(uuid) = reserved {
        tracing::info!(node.uuid = %uuid, "Node {uuid} has been reserved for allocation {}", a.uuid);
        let changes = AllocationChanges {
            node_uuid: Some(Some(uuid)),
            state: Some(allocation::ACTIVE.to_owned()),
            last_error: Some(None),
            ..AllocationChanges::default()
        };
        return db::allocations::update(&ctx.db, &a, changes).await;
    }
    let rc = a.resource_class.as_deref().unwrap_or_default();
    let why = if scan.of_class == 0 && a.candidate_nodes.0.is_empty() {
        format!("no available nodes match the resource class {rc}")
    } else if scan.of_class == 0 {
        format!("none of the requested nodes are available and match the resource class {rc}")
    } else if scan.with_traits == 0 {
        format!(
            "no suitable nodes have the requested traits {}",
            a.traits.0.join(", ")
        )
    } else if scan.locked > 0 {
        format!("could not reserve any of {} suitable nodes", scan.locked)
    } else {
        "all nodes were filtered out during reservation".to_owned()
    };
    failed(ctx, &a, &why).await
}

/// Ironic's AllocationFailed, recorded on the allocation.
fn failure(a: &Allocation, why: &str) -> String {
    format!("Failed to process allocation {}: {why}.", a.uuid)
}

async fn failed(ctx: &Ctx, a: &Allocation, why: &str) -> Result<Allocation> {
    tracing::warn!("{}", failure(a, why));
    let changes = AllocationChanges {
        node_uuid: Some(None),
        state: Some(allocation::ERROR.to_owned()),
        last_error: Some(Some(failure(a, why))),
        ..AllocationChanges::default()
    };
    db::allocations::update(&ctx.db, a, changes).await
}

/// An allocation for a node deployed without one (1.58): the node must be active, of the
/// resource class, with the traits, among the candidates, and have no other instance. A refusal
/// leaves the allocation in error and is the answer. Ironic answers a mismatch with a 500
/// (AllocationFailed has no code); Ferrum with a 409, as the node's state or values conflict.
async fn backfill(
    ctx: &Ctx,
    a: Allocation,
    node: Node,
    deadline: Option<Instant>,
) -> Result<Allocation> {
    let uuid = node.uuid.clone();
    let taken = change_node(ctx, &uuid, Some(node), deadline, |n| {
        let mut errors = Vec::new();
        if n.provision_state != ProvisionState::Active {
            errors.push(format!(
                "Node must be in the \"active\" state, but the current state is \"{}\"",
                n.provision_state
            ));
        }
        if a.resource_class.is_some() && n.resource_class != a.resource_class {
            errors.push(format!(
                "Resource class {} does not match the requested resource class {}",
                n.resource_class.as_deref().unwrap_or("None"),
                a.resource_class.as_deref().unwrap_or_default()
            ));
        }
        if !allocation::traits_match(&a.traits.0, &n.traits.0) {
            errors.push(format!(
                "List of traits {:?} does not match the requested traits {:?}",
                n.traits.0, a.traits.0
            ));
        }
        if !a.candidate_nodes.0.is_empty() && !a.candidate_nodes.0.contains(&n.uuid) {
            errors.push(format!(
                "Candidate nodes must be empty or contain the target node, but got {:?}",
                a.candidate_nodes.0
            ));
        }
        if !errors.is_empty() {
            return Err(Error::Conflict(failure(
                &a,
                &format!(
                    "Cannot backfill an allocation for node {}: {}",
                    n.uuid,
                    errors.join("; ")
                ),
            )));
        }
        match (&n.instance_uuid, &n.allocation_uuid) {
            (Some(instance), _) if *instance != a.uuid => Err(Error::NodeAssociated {
                node: n.uuid.clone(),
                instance: instance.clone(),
            }),
            (_, Some(other)) if *other != a.uuid => Err(Error::NodeAssociated {
                node: n.uuid.clone(),
                instance: other.clone(),
            }),
            _ => Ok(Decision::Write(reservation(n, &a), Hold::Release)),
        }
    })
    .await;
    match taken {
        Ok(_) => {
            let changes = AllocationChanges {
                node_uuid: Some(Some(uuid)),
                state: Some(allocation::ACTIVE.to_owned()),
                ..AllocationChanges::default()
            };
            db::allocations::update(&ctx.db, &a, changes).await
        }
        Err(e) => {
            failed(ctx, &a, &e.to_string()).await?;
            Err(e)
        }
    }
}

/// Deletes an allocation, freeing its node first (its `instance_uuid` and `allocation_uuid`
/// cleared), unless the node is active or mid-transition outside maintenance (Ironic's
/// `verify_node_for_deallocation`). A node gone meanwhile took its allocation with it.
pub async fn destroy(
    ctx: &Ctx,
    a: Allocation,
    node: Option<Node>,
    deadline: Option<Instant>,
) -> Result<()> {
    if let Some(node) = node {
        let uuid = node.uuid.clone();
        let freed = change_node(ctx, &uuid, Some(node), deadline, |n| {
            if n.allocation_uuid.as_deref() != Some(a.uuid.as_str()) {
                return Ok(Decision::Nothing);
            }
            check_deallocation(n, &a)?;
            Ok(Decision::Write(free(), Hold::Release))
        })
        .await;
        match freed {
            Ok(_) | Err(Error::NodeNotFound { .. }) => {}
            Err(e) => return Err(e),
        }
    }
    db::allocations::delete(&ctx.db, &a.uuid).await?;
    Ok(())
}

/// The changes that free a node of its allocation.
pub fn free() -> NodeChanges {
    NodeChanges {
        instance_uuid: Some(None),
        allocation_uuid: Some(None),
        ..NodeChanges::default()
    }
}

/// Ironic's `verify_node_for_deallocation`.
pub fn check_deallocation(n: &Node, a: &Allocation) -> Result<()> {
    if n.maintenance {
        return Ok(());
    }
    if n.target_provision_state.is_some() && !n.provision_state.update_allowed() {
        return Err(Error::InvalidState(format!(
            "Cannot remove allocation {} for node {}, because the node is in state {} where updates are not allowed (and maintenance mode is off)",
            a.uuid, n.uuid, n.provision_state
        )));
    }
    if n.provision_state == ProvisionState::Active {
        return Err(Error::InvalidState(format!(
            "Cannot remove allocation {} for node {}, because the node is active (and maintenance mode is off)",
            a.uuid, n.uuid
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{node::Json, node::PowerState};

    fn candidate() -> Node {
        Node {
            uuid: "n1".to_owned(),
            provision_state: ProvisionState::Available,
            power_state: Some(PowerState::Off),
            resource_class: Some("gold".to_owned()),
            traits: Json(vec!["CUSTOM_A".to_owned()]),
            owner: Some("p1".to_owned()),
            ..Node::default()
        }
    }

    fn request() -> Allocation {
        Allocation {
            uuid: "a1".to_owned(),
            resource_class: Some("gold".to_owned()),
            traits: Json(vec!["CUSTOM_A".to_owned()]),
            ..Allocation::default()
        }
    }

    #[test]
    fn a_candidate_is_checked_again_on_every_rule() {
        assert!(!unsuitable(&candidate(), &request()));
        let changed: [fn(&mut Node, &mut Allocation); 9] = [
            |n, _| n.maintenance = true,
            |n, _| n.instance_uuid = Some("i".to_owned()),
            |n, _| n.allocation_uuid = Some("other".to_owned()),
            |n, _| n.provision_state = ProvisionState::Active,
            |n, _| n.power_state = None,
            |_, a| a.resource_class = Some("silver".to_owned()),
            |_, a| a.candidate_nodes = Json(vec!["n2".to_owned()]),
            |_, a| a.owner = Some("p2".to_owned()),
            |_, a| a.traits = Json(vec!["CUSTOM_B".to_owned()]),
        ];
        for (i, change) in changed.iter().enumerate() {
            let (mut n, mut a) = (candidate(), request());
            change(&mut n, &mut a);
            assert!(unsuitable(&n, &a), "rule {i}");
        }
        let mut a = request();
        a.candidate_nodes = Json(vec!["n1".to_owned()]);
        a.owner = Some("p1".to_owned());
        assert!(!unsuitable(&candidate(), &a));
        // The owner's project may also be the node's lessee (Ironic's `project` filter).
        let mut leased = candidate();
        leased.owner = Some("p0".to_owned());
        leased.lessee = Some("p1".to_owned());
        assert!(!unsuitable(&leased, &a));
    }

    #[test]
    fn deallocation_is_refused_for_active_or_busy_nodes_outside_maintenance() {
        let a = request();
        let mut n = candidate();
        assert!(check_deallocation(&n, &a).is_ok());
        n.provision_state = ProvisionState::Active;
        assert!(matches!(
            check_deallocation(&n, &a),
            Err(Error::InvalidState(_))
        ));
        n.maintenance = true;
        assert!(check_deallocation(&n, &a).is_ok());
        n.maintenance = false;
        n.provision_state = ProvisionState::Deploying;
        n.target_provision_state = Some(ProvisionState::Active);
        assert!(matches!(
            check_deallocation(&n, &a),
            Err(Error::InvalidState(_))
        ));
    }
}
