//! Allocations (API 1.52), as Ironic's `conductor/allocations.py` processes them: the candidates
//! (available, not in maintenance, without an instance, with a power state, of the resource
//! class, with every requested trait, among `candidate_nodes`, of the allocation's owner from
//! 1.60) are tried in random order (a node named like the allocation first), each reserved by
//! [`change_node`]'s conditional write that sets the node's `instance_uuid` and
//! `allocation_uuid` after checking it again on the row as read; a write that loses a race reads
//! the node afresh and checks again, so two allocations never get one node.
//!
//! As in Ironic's `create_allocation`, the conductor stores the allocation `allocating` under its
//! own host name (`conductor_affinity`), replies, and processes it on a worker; the client polls
//! until it is `active` or `error`. A backfill (1.58) is processed before the reply. An
//! allocation whose conductor stopped while it was `allocating` is resumed by that conductor's
//! next start (Ironic's `_resume_allocations`) or taken over by another conductor once its lease
//! has run out (Ironic's `_check_orphan_allocations`). The node is reserved before the
//! allocation is marked active (two writes, not Ironic's one transaction), so whoever resumes an
//! allocation first adopts a node already reserved for it.

use rand::seq::SliceRandom;
use tokio::time::Instant;

use super::{
    Ctx,
    task::{Decision, Hold, change_node},
    worker::Worker,
};
use crate::{
    allocation::{self, Allocation, AllocationChanges},
    db::{self, nodes::NodeFilter},
    error::{Error, Result},
    node::{Node, NodeChanges},
    states::ProvisionState,
};

/// Creates the allocation, stored `allocating` on this conductor: a backfill for `node` (1.58)
/// is processed before the reply; any other allocation by a worker after it. A worker is taken
/// before anything is written, so that a busy conductor refuses (503) with nothing stored.
pub async fn create(
    ctx: &Ctx,
    allocation: Allocation,
    node: Option<Node>,
    deadline: Option<Instant>,
) -> Result<Allocation> {
    let allocation = Allocation {
        conductor_affinity: Some(ctx.host.clone()),
        ..allocation
    };
    let Some(node) = node else {
        let worker = Worker::take(ctx)?;
        return match insert(ctx, &allocation).await? {
            Inserted::New(stored) => {
                let (c, a) = (ctx.clone(), stored.clone());
                worker.run_detached(ctx, "allocation", async move {
                    process(&c, a).await;
                    Ok(())
                });
                Ok(stored)
            }
            // Processed by the conductor that made it, or by one taking over from it.
            Inserted::Again(existing) => Ok(existing),
        };
    };
    match insert(ctx, &allocation).await? {
        Inserted::New(stored) => backfill(ctx, stored, node, deadline).await,
        Inserted::Again(existing) if existing.state == allocation::ALLOCATING => {
            backfill(ctx, existing, node, deadline).await
        }
        Inserted::Again(existing) => Ok(existing),
    }
}

/// What storing a new allocation found.
enum Inserted {
    New(Allocation),
    /// A retry of this very request (its first conductor went away before it answered, see
    /// `api::allocations::call`): the row its first attempt made.
    Again(Allocation),
}

async fn insert(ctx: &Ctx, allocation: &Allocation) -> Result<Inserted> {
    match db::allocations::insert(&ctx.db, allocation).await {
        Ok(stored) => Ok(Inserted::New(stored)),
        Err(e @ Error::Conflict(_)) => {
            match db::allocations::get(&ctx.db, &allocation.uuid).await {
                Ok(existing) if same_request(&existing, allocation) => {
                    Ok(Inserted::Again(existing))
                }
                _ => Err(e),
            }
        }
        Err(e) => Err(e),
    }
}

/// Processes an allocation stored `allocating` on this conductor (Ironic's `do_allocate`): it
/// ends `active` with a node reserved, or `error` with why; an unexpected error is recorded as
/// Ironic records it. Nothing is written once the allocation was deleted or taken over.
async fn process(ctx: &Ctx, a: Allocation) {
    if let Err(e) = allocate(ctx, &a).await {
        tracing::warn!(error = %e, "Unexpected error while processing allocation {}", a.uuid);
        let why = format!("Unexpected exception during allocation: {e}");
        if let Err(e) = record_failure(ctx, &a, why).await {
            tracing::warn!(error = %e, "Could not save the failed allocation {}", a.uuid);
        }
    }
}

/// Resumes, on a worker, the allocations this host was processing when it stopped (Ironic's
/// `_resume_allocations`, spawned at the conductor's start).
pub fn resume(ctx: &Ctx) {
    let worker = match Worker::take(ctx) {
        Ok(worker) => worker,
        Err(e) => {
            tracing::warn!(error = %e, "Failed to start a worker for resuming allocations");
            return;
        }
    };
    let c = ctx.clone();
    worker.run_detached(ctx, "resuming allocations", async move {
        let left = db::allocations::allocating_on(&c.db, &c.host)
            .await
            .map_err(|e| e.to_string())?;
        for a in left {
            tracing::info!("Resuming unfinished allocation {}", a.uuid);
            process(&c, a).await;
        }
        Ok(())
    });
}

/// Takes over and processes the allocations left `allocating` by conductors whose lease has run
/// out (not among `leased`), or by none: each moved to this host by a write conditional on its
/// conductor, so one conductor takes it (Ironic's `_check_orphan_allocations`).
pub async fn take_over_orphans(ctx: &Ctx, leased: &[String]) -> Result<()> {
    for a in db::allocations::orphaned(&ctx.db, leased).await? {
        if !db::allocations::take_over(&ctx.db, &a, &ctx.host).await? {
            continue;
        }
        tracing::info!(
            "Taking over allocation {} from {}",
            a.uuid,
            a.conductor_affinity.as_deref().unwrap_or("no conductor")
        );
        let a = Allocation {
            conductor_affinity: Some(ctx.host.clone()),
            ..a
        };
        process(ctx, a).await;
    }
    Ok(())
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
async fn try_reserve(ctx: &Ctx, a: &Allocation, node: Node, scan: &mut Scan) -> Result<bool> {
    let uuid = node.uuid.clone();
    let taken = change_node(ctx, &uuid, Some(node), None, |n| {
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
/// already reserved for it (by a conductor that stopped before marking it active) is adopted.
/// Otherwise a node named as the allocation is tried first (as in Ironic); then pages of
/// candidates by id, each shuffled, so that allocations running at once seldom race for the
/// same node.
async fn allocate(ctx: &Ctx, a: &Allocation) -> Result<()> {
    if let Some(node) = db::nodes::reserved_for(&ctx.db, &a.uuid).await? {
        return reserved(ctx, a, &node.uuid).await;
    }
    let mut filter = candidate_filter(a);
    let mut scan = Scan::default();
    if let Some(name) = &a.name {
        match db::nodes::get(&ctx.db, db::nodes::NodeIdent::Name(name)).await {
            Ok(node) if !unsuitable(&node, a) => {
                let uuid = node.uuid.clone();
                if try_reserve(ctx, a, node, &mut scan).await? {
                    return reserved(ctx, a, &uuid).await;
                }
            }
            Ok(_) | Err(Error::NodeNotFound { .. }) => {}
            Err(e) => return Err(e),
        }
    }
    loop {
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
            if try_reserve(ctx, a, node, &mut scan).await? {
                return reserved(ctx, a, &uuid).await;
            }
        }
        if last_page {
            break;
        }
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
    tracing::warn!("{}", failure(a, &why));
    record_failure(ctx, a, failure(a, &why)).await
}

/// Marks `a` active on the node `node_uuid`, reserved for it. If `a` was deleted meanwhile (or
/// ended otherwise by a conductor that took it over), the node is let go again; if another
/// conductor took it over and is still at it, that one adopts the node.
async fn reserved(ctx: &Ctx, a: &Allocation, node_uuid: &str) -> Result<()> {
    let changes = AllocationChanges {
        node_uuid: Some(Some(node_uuid.to_owned())),
        state: Some(allocation::ACTIVE.to_owned()),
        last_error: Some(None),
        ..AllocationChanges::default()
    };
    if db::allocations::finish(&ctx.db, a, &ctx.host, changes)
        .await?
        .is_some()
    {
        tracing::info!(node.uuid = %node_uuid, "Node {node_uuid} has been reserved for allocation {}", a.uuid);
        return Ok(());
    }
    match db::allocations::get(&ctx.db, &a.uuid).await {
        Ok(now)
            if now.state == allocation::ALLOCATING
                || now.node_uuid.as_deref() == Some(node_uuid) =>
        {
            return Ok(());
        }
        Ok(_) | Err(Error::NotFound(_)) => {}
        Err(e) => return Err(e),
    }
    tracing::info!(node.uuid = %node_uuid, "Allocation {} ended meanwhile; releasing node {node_uuid}", a.uuid);
    let freed = change_node(ctx, node_uuid, None, None, |n| {
        if n.allocation_uuid.as_deref() != Some(a.uuid.as_str()) {
            return Ok(Decision::Nothing);
        }
        Ok(Decision::Write(free(), Hold::Release))
    })
    .await;
    match freed {
        Ok(_) | Err(Error::NodeNotFound { .. }) => Ok(()),
        Err(e) => Err(e),
    }
}

/// Ironic's AllocationFailed, recorded on the allocation.
fn failure(a: &Allocation, why: &str) -> String {
    format!("Failed to process allocation {}: {why}.", a.uuid)
}

/// Ironic's `_allocation_failed`: `a` ends in error with `last_error`, unless it was deleted or
/// taken over meanwhile.
async fn record_failure(ctx: &Ctx, a: &Allocation, last_error: String) -> Result<()> {
    let changes = AllocationChanges {
        node_uuid: Some(None),
        state: Some(allocation::ERROR.to_owned()),
        last_error: Some(Some(last_error)),
        ..AllocationChanges::default()
    };
    if db::allocations::finish(&ctx.db, a, &ctx.host, changes)
        .await?
        .is_none()
    {
        tracing::debug!(
            "Not saving the failed allocation {}: it ended meanwhile",
            a.uuid
        );
    }
    Ok(())
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
            tracing::warn!("{e}");
            record_failure(ctx, &a, e.to_string()).await?;
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
