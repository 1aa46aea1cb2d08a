//! Which conductor a request goes to: the hash ring of the node's driver over the alive
//! conductors, cached for `hash_ring_reset_interval` and rebuilt at once on a miss.

use std::{
    collections::HashMap,
    sync::{Arc, RwLock},
    time::Duration,
};

use tokio::time::Instant;

use crate::{
    db::{self, Db},
    error::{Error, Result},
    rpc::topology::HashRing,
};

type Rings = Arc<HashMap<String, HashRing>>;

pub struct ConductorRouter {
    db: Db,
    refresh_every: Duration,
    heartbeat_timeout: Duration,
    cache: RwLock<Option<(Instant, Rings)>>,
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

    /// The conductor for a node with `uuid` and `driver`. No conductor online at all, or none
    /// for this driver: 503 (a temporary condition for an existing node).
    pub async fn host_for(&self, uuid: &str, driver: &str) -> Result<String> {
        self.lookup(uuid, driver).await?.ok_or_else(|| {
            Error::TemporaryFailure(format!(
                "No conductor service is online for driver {driver}; please retry."
            ))
        })
    }

    /// The conductor to create a node on. An unknown driver is the client's mistake: 400.
    pub async fn host_for_new(&self, uuid: &str, driver: &str) -> Result<String> {
        self.lookup(uuid, driver).await?.ok_or_else(|| {
            Error::NoValidHost(format!(
                "No conductor service registered which supports driver {driver} for conductor group \"\"."
            ))
        })
    }

    /// Where a node's requests go while its conductor `gone` has vanished but still looks alive
    /// (its heartbeat has not timed out yet): the host that will own the node once it has.
    pub async fn host_instead_of(
        &self,
        uuid: &str,
        driver: &str,
        gone: &str,
    ) -> Result<Option<String>> {
        // Read afresh: the gone conductor may have left the rings already.
        let rings = self.rebuild().await?;
        if rings.is_empty() {
            return Err(Error::TemporaryFailure(
                "No conductor service is online; please retry.".to_owned(),
            ));
        }
        Ok(rings
            .get(driver)
            .and_then(|r| r.owner_excluding(uuid, gone))
            .map(str::to_owned))
    }

    /// How long a conductor may go unheard before it counts as dead.
    pub fn heartbeat_timeout(&self) -> Duration {
        self.heartbeat_timeout
    }

    async fn lookup(&self, uuid: &str, driver: &str) -> Result<Option<String>> {
        let owner = |rings: &Rings| {
            rings
                .get(driver)
                .and_then(|r| r.owner(uuid))
                .map(str::to_owned)
        };
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

    fn cached(&self) -> Option<Rings> {
        let cache = self.cache.read().ok()?;
        let (built, rings) = cache.as_ref()?;
        (built.elapsed() < self.refresh_every).then(|| rings.clone())
    }

    async fn rebuild(&self) -> Result<Rings> {
        let alive = db::conductors::list_alive(&self.db, self.heartbeat_timeout).await?;
        let mut hosts_by_driver: HashMap<String, Vec<String>> = HashMap::new();
        for c in alive {
            for d in c.drivers {
                hosts_by_driver
                    .entry(d)
                    .or_default()
                    .push(c.hostname.clone());
            }
        }
        let rings: Rings = Arc::new(
            hosts_by_driver
                .into_iter()
                .map(|(d, hosts)| (d, HashRing::new(hosts)))
                .collect(),
        );
        if let Ok(mut cache) = self.cache.write() {
            *cache = Some((Instant::now(), rings.clone()));
        }
        Ok(rings)
    }
}
