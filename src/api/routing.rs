//! Which conductor a request goes to: the hash ring of the node's conductor group and driver
//! over the alive conductors (built by `rpc::topology::Rings`, as take-over builds it), cached
//! for `hash_ring_reset_interval` and rebuilt at once on a miss; a conductor a call found gone
//! is left out of the cached rings until they are next rebuilt.

use std::{
    sync::{Arc, RwLock},
    time::Duration,
};

use tokio::time::Instant;

use crate::{
    db::{self, Db},
    error::{Error, Result},
    rpc::{Route, topology::Rings},
};

/// Ironic's NoValidHost for a node whose group has no conductor with its driver.
pub fn no_valid_host(route: &Route<'_>) -> Error {
    Error::NoValidHost(format!(
        "No conductor service registered which supports driver {} for conductor group \"{}\". Ensure the driver is valid and enabled.",
        route.driver, route.group
    ))
}

pub struct ConductorRouter {
    db: Db,
    refresh_every: Duration,
    heartbeat_timeout: Duration,
    cache: RwLock<Option<(Instant, Arc<Rings>)>>,
}

impl ConductorRouter {
    pub fn new(db: Db, refresh_every: Duration, heartbeat_timeout: Duration) -> Self {
        ConductorRouter {
            db,
            refresh_every,
            heartbeat_timeout,
            cache: RwLock::new(None),
        }
    }

    /// The conductor for a node. None online at all: 503 (a temporary condition); conductors
    /// online but none in the node's group with its driver: Ironic's 400 NoValidHost.
    pub async fn host_for(&self, route: &Route<'_>) -> Result<String> {
        self.lookup(route)
            .await?
            .ok_or_else(|| no_valid_host(route))
    }

    /// Where a node's requests go while its conductor `gone` has vanished (its queue has: it
    /// died, or the broker dropped it for going silent) but may still look alive (its lease has
    /// not run out yet): the host that will own the node once it has left. Until the next
    /// refresh the rings kept are those without `gone`, so its other nodes' requests go to
    /// their next owners at once rather than each first finding its queue gone, and the nodes
    /// show those as their conductor.
    pub async fn host_instead_of(&self, route: &Route<'_>, gone: &str) -> Result<Option<String>> {
        // Read afresh: the gone conductor may have left the rings already.
        let alive = db::conductors::list_alive(&self.db, self.heartbeat_timeout).await?;
        let rings = Rings::from_conductors(&alive);
        if rings.is_empty() {
            return Err(Error::TemporaryFailure(
                "No conductor service is online; please retry.".to_owned(),
            ));
        }
        let rings = self.keep(rings.without(gone));
        Ok(rings.owner(route).map(str::to_owned))
    }

    /// The node's conductor as the API shows it (`conductor`, 1.49): the owner on the current
    /// rings, None when no conductor serves it. Never rebuilds on a miss, so listing orphaned
    /// nodes costs no query per node.
    pub async fn conductor_of(&self, route: &Route<'_>) -> Result<Option<String>> {
        let rings = match self.cached() {
            Some(rings) => rings,
            None => self.rebuild().await?,
        };
        Ok(rings.owner(route).map(str::to_owned))
    }

    /// How long a conductor may go unheard before it counts as dead.
    pub fn heartbeat_timeout(&self) -> Duration {
        self.heartbeat_timeout
    }

    async fn lookup(&self, route: &Route<'_>) -> Result<Option<String>> {
        let owner = |rings: &Rings| rings.owner(route).map(str::to_owned);
        if let Some(rings) = self.cached()
            && let Some(host) = owner(&rings)
        {
            return Ok(Some(host));
        }
        let rings = self.rebuild().await?;
        if rings.is_empty() {
            return Err(Error::TemporaryFailure(
                "No conductor service is online; please retry.".to_owned(),
            ));
        }
        Ok(owner(&rings))
    }

    fn cached(&self) -> Option<Arc<Rings>> {
        let cache = self.cache.read().ok()?;
        let (built, rings) = cache.as_ref()?;
        (built.elapsed() < self.refresh_every).then(|| rings.clone())
    }

    async fn rebuild(&self) -> Result<Arc<Rings>> {
        let alive = db::conductors::list_alive(&self.db, self.heartbeat_timeout).await?;
        Ok(self.keep(Rings::from_conductors(&alive)))
    }

    /// Caches `rings` until the next refresh.
    fn keep(&self, rings: Rings) -> Arc<Rings> {
        let rings = Arc::new(rings);
        if let Ok(mut cache) = self.cache.write() {
            *cache = Some((Instant::now(), rings.clone()));
        }
        rings
    }
}
