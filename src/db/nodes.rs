//! Queries on `nodes`, including the node lock.
//!
//! The lock is `nodes.reservation`: taken by a compare-and-set from NULL to the holder's host name,
//! released by a compare-and-set back. Every other write to a locked node goes through
//! [`update_held`], which is conditional on the caller still holding the lock *and* on the
//! provision state it read, so a conductor that lost its lock (or a stale reader) cannot win.

use chrono::NaiveDateTime;
use diesel::{prelude::*, result::DatabaseErrorKind};
use diesel_async::{AsyncConnection, RunQueryDsl};
use tokio::time::Instant;

use super::{
    Db,
    deadline::{self, BeforeDeadline},
    history::record_entry,
    not_written_past,
    reuse::{self, Reused},
    with_conn, with_write, with_write_result,
};
use crate::{
    error::{Error, Result},
    node::{
        Json, JsonObject, Node, NodeChanges,
        history::{self as events, HistoryEntry},
    },
    schema::nodes,
    states::ProvisionState,
};

mod listing;
pub(super) use listing::like_containing;
pub use listing::{Children, NodeFilter, SortKey, children_of, list, list_filtered, shard_counts};

/// How a client names a node: by UUID, or by its name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NodeIdent<'a> {
    Uuid(&'a str),
    Name(&'a str),
}

impl<'a> NodeIdent<'a> {
    /// A UUID-shaped string is a UUID; anything else is a name (names may not look like UUIDs).
    pub fn parse(s: &'a str) -> Self {
        if uuid::Uuid::try_parse(s).is_ok() {
            NodeIdent::Uuid(s)
        } else {
            NodeIdent::Name(s)
        }
    }
}

pub async fn get(db: &Db, ident: NodeIdent<'_>) -> Result<Node> {
    let node: Option<Node> = with_conn!(db, |conn| match ident {
        NodeIdent::Uuid(u) => nodes::table
            .filter(nodes::uuid.eq(u.to_ascii_lowercase()))
            .select(Node::as_select())
            .first(conn)
            .await
            .optional()?,
        NodeIdent::Name(n) => nodes::table
            .filter(nodes::name.eq(n))
            .select(Node::as_select())
            .first(conn)
            .await
            .optional()?,
    });
    match node {
        Some(node) => Ok(node),
        None => Err(Error::node_not_found(match ident {
            NodeIdent::Uuid(s) | NodeIdent::Name(s) => s,
        })),
    }
}

pub async fn get_by_uuid(db: &Db, uuid: &str) -> Result<Node> {
    get(db, NodeIdent::Uuid(uuid)).await
}

/// Inserts a node (all but its `id`, which the database assigns) and reads it back. A duplicate
/// UUID, name or instance UUID is a 409.
pub async fn insert(db: &Db, node: &Node) -> Result<Node> {
    let uuid = node.uuid.clone();
    let inserted = with_write_result!(db, |conn| diesel::insert_into(nodes::table)
        .values(node)
        .execute(conn)
        .await?);
    match inserted {
        Ok(_) => get_by_uuid(db, &uuid).await,
        Err(e) => Err(unique_conflict(e, &uuid, node.name.as_deref())),
    }
}

/// [`unique_conflict`] of a write of `changes` to the node `node_id`.
fn write_conflict(e: diesel::result::Error, node_id: i32, changes: &NodeChanges) -> Error {
    let name = changes.name.as_ref().and_then(Option::as_deref);
    unique_conflict(e, &node_id.to_string(), name)
}

/// A duplicate UUID, name or instance UUID is the client's conflict (409), not our fault; so is
/// a chassis deleted since the API checked it (400, as Ironic answers a missing chassis).
fn unique_conflict(e: diesel::result::Error, uuid: &str, name: Option<&str>) -> Error {
    match e {
        diesel::result::Error::DatabaseError(DatabaseErrorKind::ForeignKeyViolation, _) => {
            Error::InvalidParameterValue(format!("The chassis of node {uuid} could not be found."))
        }
        diesel::result::Error::DatabaseError(DatabaseErrorKind::UniqueViolation, info) => {
            let what = info.message();
            Error::Conflict(if what.contains("instance_uuid") {
                "The instance UUID is already associated with another node.".to_owned()
            } else if what.contains("name") {
                match name {
                    Some(name) => format!("A node with name {name} already exists."),
                    None => "A node with the same name already exists.".to_owned(),
                }
            } else {
                format!("A node with UUID {uuid} already exists.")
            })
        }
        other => other.into(),
    }
}

/// Takes the node lock for `host` if nobody holds it, before `deadline` (the caller's; see
/// [`deadline`]). True when this call won it; false when someone holds it, or the deadline
/// passed first (the caller tells which by the deadline).
pub async fn reserve(db: &Db, uuid: &str, host: &str, deadline: Option<Instant>) -> Result<bool> {
    if deadline::passed(deadline) {
        return Ok(false);
    }
    let keep = reuse::keep(("reserve", 0, deadline.is_some()));
    let changed = with_write_result!(db, until deadline, |conn| Reused {
        query: diesel::update(
            nodes::table
                .filter(nodes::uuid.eq(uuid))
                .filter(nodes::reservation.is_null())
                .filter(BeforeDeadline::new(deadline))
        )
        .set(nodes::reservation.eq(host)),
        keep,
    }
    .execute(conn)
    .await?);
    Ok(not_written_past(changed, deadline)? == 1)
}

/// Drops a lock `host` took with [`reserve`] before it could read the node. True when it did.
pub async fn unreserve(db: &Db, uuid: &str, host: &str) -> Result<bool> {
    let keep = reuse::keep(("unreserve", 0, false));
    let changed = with_write!(db, |conn| Reused {
        query: diesel::update(
            nodes::table
                .filter(nodes::uuid.eq(uuid))
                .filter(nodes::reservation.eq(host))
        )
        .set(nodes::reservation.eq(None::<String>)),
        keep,
    }
    .execute(conn)
    .await?);
    Ok(changed == 1)
}

/// Releases the lock if `host` holds it and the row is still at `version` (so a stale task cannot
/// release a lock that a newer task of the same host took since). True when it did.
pub async fn release(db: &Db, node_id: i32, host: &str, version: i64) -> Result<bool> {
    let keep = reuse::keep(("release", 0, false));
    let changed = with_write!(db, |conn| Reused {
        query: diesel::update(
            nodes::table
                .filter(nodes::id.eq(node_id))
                .filter(nodes::reservation.eq(host))
                .filter(nodes::version.eq(version))
        )
        .set(nodes::reservation.eq(None::<String>)),
        keep,
    }
    .execute(conn)
    .await?);
    Ok(changed == 1)
}

/// Runs `$write!` (a conditional write of node `$node_id`) on `$conn`: alone when `$entry` is
/// None; else in one transaction that, when it wrote, records the entry with how long the node
/// had been in its state (its `provision_updated_at`, read before the write moves it).
macro_rules! write_recording {
    ($conn:expr, $node_id:expr, $entry:expr, $max:expr, $write:ident) => {
        match $entry {
            None => $write!($conn),
            Some(entry) => {
                $conn
                    .transaction::<_, diesel::result::Error, _>(async |conn| {
                        let since: Option<Option<NaiveDateTime>> = nodes::table
                            .find($node_id)
                            .select(nodes::provision_updated_at)
                            .first(conn)
                            .await
                            .optional()?;
                        let changed = $write!(conn);
                        if changed == 1 {
                            let entry = entry.clone().in_state_since(since.flatten());
                            record_entry!(conn, &entry, $max);
                        }
                        Ok(changed)
                    })
                    .await?
            }
        }
    };
}

/// Writes `changes` to a node that `holder` has locked, that is still in `expected` state and at
/// `version` (the row the holder last wrote or read: a stale task of the same host cannot write
/// over a newer one's). Fails, writing nothing, when any of these moved. A `last_error` written
/// is recorded in the node's history in the same transaction, as a failure of the operation
/// `expected` names ([`events::event_type`]).
pub async fn update_held(
    db: &Db,
    node_id: i32,
    holder: &str,
    expected: ProvisionState,
    version: i64,
    changes: NodeChanges,
) -> Result<()> {
    let event_type = events::event_type(expected);
    update_held_as(db, node_id, holder, expected, version, changes, event_type).await
}

/// [`update_held`], a `last_error` recorded with `event_type` (a take-over, a start-up).
pub async fn update_held_as(
    db: &Db,
    node_id: i32,
    holder: &str,
    expected: ProvisionState,
    version: i64,
    changes: NodeChanges,
    event_type: &str,
) -> Result<()> {
    let entry = failure_entry(db, node_id, holder, event_type, expected, &changes);
    update_held_recording(db, node_id, holder, expected, version, changes, entry).await
}

/// [`update_held`], recording `entry` (if any, and if history is kept) in the node's history in
/// the same transaction, whatever the changes say (an event that is not a failure, or a failure
/// that must not replace the node's `last_error`).
pub async fn update_held_recording(
    db: &Db,
    node_id: i32,
    holder: &str,
    expected: ProvisionState,
    version: i64,
    changes: NodeChanges,
    entry: Option<HistoryEntry>,
) -> Result<()> {
    let changes = stamped(changes);
    let entry = entry.filter(|_| db.history_max_entries() > 0);
    let max = db.history_max_entries();
    let keep = reuse::keep(("update_held", changes.shape(), false));
    let changed = with_write_result!(db, |conn| {
        macro_rules! conditional_write {
            ($conn:expr) => {
                Reused {
                    query: diesel::update(
                        nodes::table
                            .filter(nodes::id.eq(node_id))
                            .filter(nodes::reservation.eq(holder))
                            .filter(nodes::provision_state.eq(expected))
                            .filter(nodes::version.eq(version)),
                    )
                    .set((&changes, nodes::version.eq(nodes::version + 1))),
                    keep,
                }
                .execute($conn)
                .await?
            };
        }
        write_recording!(conn, node_id, &entry, max, conditional_write)
    })
    .map_err(|e| write_conflict(e, node_id, &changes))?;
    if changed == 1 {
        return Ok(());
    }
    Err(explain_lost_write(db, node_id, holder, Some(expected)).await)
}

/// Writes `changes` to a node nobody has locked, if it is still at `version` (the row its caller
/// read and decided on, in state `state`), before `deadline` (the caller's; see [`deadline`]).
/// True when written; false when the node is locked or changed since, or the deadline passed
/// first, and nothing was written (the caller tells which by the deadline). With
/// `changes.reservation` set, the same statement takes the lock. A `last_error` written is
/// recorded in the node's history, by `host`, in the same transaction.
pub async fn update_unlocked(
    db: &Db,
    node_id: i32,
    version: i64,
    (host, state): (&str, ProvisionState),
    changes: NodeChanges,
    deadline: Option<Instant>,
) -> Result<bool> {
    if deadline::passed(deadline) {
        return Ok(false);
    }
    let changes = stamped(changes);
    let entry = failure_entry(
        db,
        node_id,
        host,
        events::event_type(state),
        state,
        &changes,
    );
    let max = db.history_max_entries();
    let keep = reuse::keep(("update_unlocked", changes.shape(), deadline.is_some()));
    let changed = with_write_result!(db, until deadline, |conn| {
        macro_rules! conditional_write {
            ($conn:expr) => {
                Reused {
                    query: diesel::update(
                        nodes::table
                            .filter(nodes::id.eq(node_id))
                            .filter(nodes::reservation.is_null())
                            .filter(nodes::version.eq(version))
                            .filter(BeforeDeadline::new(deadline)),
                    )
                    .set((&changes, nodes::version.eq(nodes::version + 1))),
                    keep,
                }
                .execute($conn)
                .await?
            };
        }
        write_recording!(conn, node_id, &entry, max, conditional_write)
    });
    let changed =
        not_written_past(changed, deadline).map_err(|e| write_conflict(e, node_id, &changes))?;
    Ok(changed == 1)
}

/// The history entry a write of `changes` by `conductor` records: a `last_error` set to a
/// message is a failure (Ironic's `node_history_record(error=True)`); clearing it records nothing.
fn failure_entry(
    db: &Db,
    node_id: i32,
    conductor: &str,
    event_type: &str,
    state: ProvisionState,
    changes: &NodeChanges,
) -> Option<HistoryEntry> {
    if db.history_max_entries() == 0 {
        return None;
    }
    match &changes.last_error {
        Some(Some(message)) if !message.is_empty() => Some(HistoryEntry::error(
            node_id, conductor, event_type, message, state,
        )),
        _ => None,
    }
}

/// Deletes a node nobody has locked, if it is still at `version`, before `deadline` (as
/// [`update_unlocked`] writes). True when deleted.
pub async fn delete_unlocked(
    db: &Db,
    node_id: i32,
    version: i64,
    deadline: Option<Instant>,
) -> Result<bool> {
    if deadline::passed(deadline) {
        return Ok(false);
    }
    let deleted = with_write_result!(db, until deadline, |conn| diesel::delete(
        nodes::table
            .filter(nodes::id.eq(node_id))
            .filter(nodes::reservation.is_null())
            .filter(nodes::version.eq(version))
            .filter(BeforeDeadline::new(deadline))
    )
    .execute(conn)
    .await?);
    Ok(not_written_past(deleted, deadline)? == 1)
}

fn stamped(changes: NodeChanges) -> NodeChanges {
    if changes.updated_at.is_some() {
        changes
    } else {
        changes.touch()
    }
}

/// Why a conditional write matched no row: the node is gone, someone else holds it, or its state
/// moved. Each of these is a bug or a take-over, never a normal path.
async fn explain_lost_write(
    db: &Db,
    node_id: i32,
    holder: &str,
    expected: Option<ProvisionState>,
) -> Error {
    let row: Result<Option<Node>> = async {
        Ok(with_conn!(db, |conn| nodes::table
            .filter(nodes::id.eq(node_id))
            .select(Node::as_select())
            .first(conn)
            .await
            .optional()?))
    }
    .await;
    match row {
        Err(e) => e,
        Ok(None) => Error::node_not_found(node_id.to_string()),
        Ok(Some(row)) if row.reservation.as_deref() != Some(holder) => Error::NodeLocked {
            node: row.uuid,
            host: row.reservation.unwrap_or_else(|| "nobody".to_owned()),
        },
        Ok(Some(row)) => Error::Conflict(format!(
            "Node {} (state \"{}\") changed since its lock holder {holder} last saw it in \"{}\".",
            row.uuid,
            row.provision_state,
            expected
                .map(ProvisionState::api_name)
                .unwrap_or("unchanged")
        )),
    }
}

/// (uuid, provision state, reservation) of the named nodes: one indexed query for many nodes.
pub async fn states_of(
    db: &Db,
    uuids: &[String],
) -> Result<Vec<(String, ProvisionState, Option<String>)>> {
    Ok(with_conn!(db, |conn| nodes::table
        .filter(nodes::uuid.eq_any(uuids))
        .select((nodes::uuid, nodes::provision_state, nodes::reservation))
        .load(conn)
        .await?))
}

/// Whether any node with inspect interface `interface` is in one of `states` (one query on the
/// state's index that reads one row at most).
pub async fn any_inspecting(db: &Db, states: [ProvisionState; 2], interface: &str) -> Result<bool> {
    // Two comparisons rather than `eq_any`: a statement of fixed shape stays prepared in the
    // connection's cache (an `IN` list is prepared at each of the periodic rounds).
    let [first, second] = states;
    let found: Vec<i32> = with_conn!(db, |conn| nodes::table
        .filter(
            nodes::provision_state
                .eq(first)
                .or(nodes::provision_state.eq(second))
        )
        .filter(nodes::inspect_interface.eq(interface))
        .select(nodes::id)
        .limit(1)
        .load(conn)
        .await?);
    Ok(!found.is_empty())
}

/// The nodes in `state` with their `driver_internal_info` (the inspection lookup by BMC
/// address reads the addresses kept there by the nodes in `inspect wait`).
pub async fn internal_info_in_state(
    db: &Db,
    state: ProvisionState,
) -> Result<Vec<(String, Json<JsonObject>)>> {
    Ok(with_conn!(db, |conn| nodes::table
        .filter(nodes::provision_state.eq(state))
        .select((nodes::uuid, nodes::driver_internal_info))
        .load(conn)
        .await?))
}

/// Nodes whose lock `host` holds (to recover them when that conductor starts or stops).
pub async fn held_by(db: &Db, host: &str) -> Result<Vec<Node>> {
    Ok(with_conn!(db, |conn| nodes::table
        .filter(nodes::reservation.eq(host))
        .select(Node::as_select())
        .load(conn)
        .await?))
}

/// Nodes locked by a host not in `alive` (a conductor that died holding them). Every round reads
/// the locks alone, by a statement of a fixed shape that diesel keeps prepared (one naming the
/// hosts is prepared anew each time: ~0.5 M instructions for the node's ~80 columns), and the
/// rows of the orphans, which are rare, only when there are some.
pub async fn locked_by_others(db: &Db, alive: &[String]) -> Result<Vec<Node>> {
    let locks: Vec<(i32, Option<String>)> = with_conn!(db, |conn| nodes::table
        .filter(nodes::reservation.is_not_null())
        .select((nodes::id, nodes::reservation))
        .load(conn)
        .await?);
    let orphans: Vec<i32> = locks
        .into_iter()
        .filter(|(_, host)| host.as_ref().is_some_and(|h| !alive.contains(h)))
        .map(|(id, _)| id)
        .collect();
    if orphans.is_empty() {
        return Ok(Vec::new());
    }
    // Read again under the same condition: a lock may have changed hands since.
    Ok(with_conn!(db, |conn| nodes::table
        .filter(nodes::id.eq_any(&orphans))
        .filter(nodes::reservation.is_not_null())
        .filter(nodes::reservation.ne_all(alive))
        .select(Node::as_select())
        .load(conn)
        .await?))
}

/// The node reserved for the allocation `allocation_uuid`, if one is: a conductor that reserved
/// it and stopped before it marked the allocation active leaves it so.
pub async fn reserved_for(db: &Db, allocation_uuid: &str) -> Result<Option<Node>> {
    Ok(with_conn!(db, |conn| nodes::table
        .filter(nodes::allocation_uuid.eq(allocation_uuid))
        .select(Node::as_select())
        .first(conn)
        .await
        .optional()?))
}

/// Up to `limit` unlocked nodes, not in maintenance, that have been in `state` since before
/// `before` (Ironic's `_fail_if_in_state` filters for the callback timeouts). The state's index
/// finds them; the waiting states hold few nodes.
pub async fn unlocked_in_state_since(
    db: &Db,
    state: ProvisionState,
    before: NaiveDateTime,
    limit: i64,
) -> Result<Vec<Node>> {
    Ok(with_conn!(db, |conn| nodes::table
        .filter(nodes::provision_state.eq(state))
        .filter(nodes::provision_updated_at.lt(before))
        .filter(nodes::reservation.is_null())
        .filter(nodes::maintenance.eq(false))
        .order(nodes::id.asc())
        .limit(limit)
        .select(Node::as_select())
        .load(conn)
        .await?))
}

/// Up to `limit` unlocked nodes whose console is on and is the `interface` one (Ironic's
/// periodic `_expire_fake_console_sessions` filters on `console_enabled` and the interface).
pub async fn unlocked_with_console_on(db: &Db, interface: &str, limit: i64) -> Result<Vec<Node>> {
    Ok(with_conn!(db, |conn| nodes::table
        .filter(nodes::console_enabled.eq(true))
        .filter(nodes::console_interface.eq(interface))
        .filter(nodes::reservation.is_null())
        .order(nodes::id.asc())
        .limit(limit)
        .select(Node::as_select())
        .load(conn)
        .await?))
}

/// Which nodes a power-state scan reads ([`power_scan_page`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PowerScan {
    /// The nodes the power-state sync compares with their hardware: not in maintenance, in a
    /// state the sync looks at ([`ProvisionState::power_synced`]), with no power change pending.
    Sync,
    /// The nodes in maintenance for a `power failure`, which the recovery asks again (not in
    /// `enroll`, as Ironic's `_power_failure_recovery` leaves it; no power change pending).
    Recovery,
}

/// The fault the power-state sync sets on a node whose BMC it cannot reach or correct (Ironic's
/// `faults.POWER_FAILURE`).
pub const POWER_FAILURE: &str = "power failure";

/// One page of a scan of the nodes of `group` that `scan` reads, in id order after
/// `after_id`, at most `limit`: keyed on the primary key, so every page costs the same however
/// far the scan has gone. Locked nodes are read too (the caller skips them, and knows it did).
pub async fn power_scan_page(
    db: &Db,
    scan: PowerScan,
    group: &str,
    after_id: i32,
    limit: i64,
) -> Result<Vec<Node>> {
    let synced: Vec<ProvisionState> = ProvisionState::ALL
        .into_iter()
        .filter(|s| s.power_synced())
        .collect();
    Ok(with_conn!(db, |conn| {
        let mut q = nodes::table
            .filter(nodes::id.gt(after_id))
            .filter(nodes::conductor_group.eq(group))
            .filter(nodes::target_power_state.is_null())
            .select(Node::as_select())
            .into_boxed();
        q = match scan {
            PowerScan::Sync => q
                .filter(nodes::maintenance.eq(false))
                .filter(nodes::provision_state.eq_any(&synced)),
            PowerScan::Recovery => q
                .filter(nodes::maintenance.eq(true))
                .filter(nodes::fault.eq(POWER_FAILURE))
                .filter(nodes::provision_state.ne(ProvisionState::Enroll)),
        };
        q.order(nodes::id.asc()).limit(limit).load(conn).await?
    }))
}

/// Releases every lock held under `host`: exact match, unlike Ironic's case-insensitive LIKE, in
/// which `_` and `%` in a host name act as wildcards (`clear_node_reservations_for_conductor` in
/// `ironic/db/sqlalchemy/api.py`).
pub async fn clear_reservations(db: &Db, host: &str) -> Result<usize> {
    Ok(with_write!(db, |conn| diesel::update(
        nodes::table.filter(nodes::reservation.eq(host))
    )
    .set(nodes::reservation.eq(None::<String>))
    .execute(conn)
    .await?))
}
