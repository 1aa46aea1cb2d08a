//! Which conductor serves a node: a consistent hash ring over the alive conductors that offer the
//! node's driver, keyed by the node's UUID. Adding or losing a conductor moves only the nodes of
//! the ring segments it owned, so the other conductors' work is not disturbed.
//!
//! [`Rings`] is the one builder of the rings from the conductors: the API routes with it, a
//! conductor decides with it which orphaned nodes it takes over, and the tests predict owners
//! with it, and take-over is only correct while these agree. This module reads no database: the
//! callers hand it the conductors they read.

use std::collections::HashMap;

use super::Route;
use crate::db::models::Conductor;

/// The name of the ring of conductors in `group` that offer `driver` (Ironic's
/// `"<group>:<driver>"`): a node is served only by conductors of its own group.
pub fn ring_key(group: &str, driver: &str) -> String {
    format!("{group}:{driver}")
}

/// Points per host on the ring (Ironic: 2^hash_partition_exponent = 32).
const POINTS_PER_HOST: u32 = 32;

#[derive(Debug, Clone, Default)]
pub struct HashRing {
    /// (point, index into `hosts`), sorted by point.
    points: Vec<(u64, usize)>,
    hosts: Vec<String>,
}

impl HashRing {
    pub fn new(hosts: impl IntoIterator<Item = String>) -> Self {
        let mut hosts: Vec<String> = hosts.into_iter().collect();
        hosts.sort();
        hosts.dedup();
        let mut points = Vec::with_capacity(hosts.len() * POINTS_PER_HOST as usize);
        for (index, host) in hosts.iter().enumerate() {
            for replica in 0..POINTS_PER_HOST {
                points.push((stable_hash(format!("{host}-{replica}").as_bytes()), index));
            }
        }
        points.sort_unstable();
        HashRing { points, hosts }
    }

    /// The host owning `key`, or None on an empty ring.
    pub fn owner(&self, key: &str) -> Option<&str> {
        if self.points.is_empty() {
            return None;
        }
        let h = stable_hash(key.as_bytes());
        let at = self.points.partition_point(|&(p, _)| p < h) % self.points.len();
        Some(&self.hosts[self.points[at].1])
    }
}

/// What the rings need to know of a conductor.
#[derive(Debug, Clone, Copy)]
pub struct Member<'a> {
    pub host: &'a str,
    pub group: &'a str,
    pub drivers: &'a [String],
}

impl<'a> From<&'a Conductor> for Member<'a> {
    fn from(c: &'a Conductor) -> Self {
        Member {
            host: &c.hostname,
            group: &c.conductor_group,
            drivers: &c.drivers,
        }
    }
}

/// Every ring: one per `group:driver` ([`ring_key`]), over the conductors of that group that
/// offer that driver.
#[derive(Debug, Clone, Default)]
pub struct Rings {
    rings: HashMap<String, HashRing>,
}

impl Rings {
    pub fn new<'a>(members: impl IntoIterator<Item = Member<'a>>) -> Self {
        let mut hosts_by_ring: HashMap<String, Vec<String>> = HashMap::new();
        for m in members {
            for d in m.drivers {
                hosts_by_ring
                    .entry(ring_key(m.group, d))
                    .or_default()
                    .push(m.host.to_owned());
            }
        }
        Rings {
            rings: hosts_by_ring
                .into_iter()
                .map(|(key, hosts)| (key, HashRing::new(hosts)))
                .collect(),
        }
    }

    /// The rings over `conductors` (the alive ones, as the callers read them).
    pub fn from_conductors(conductors: &[Conductor]) -> Self {
        Self::new(conductors.iter().map(Member::from))
    }

    /// Whether no conductor is on any ring.
    pub fn is_empty(&self) -> bool {
        self.rings.is_empty()
    }

    /// The host serving the node at `route`, or None when no conductor of its group offers its
    /// driver.
    pub fn owner(&self, route: &Route<'_>) -> Option<&str> {
        self.rings.get(&route.ring())?.owner(route.uuid)
    }

    /// The rings as they are once `host` has left them: each of its nodes goes to the next
    /// host clockwise on its ring, and no other node moves.
    pub fn without(&self, host: &str) -> Rings {
        Rings {
            rings: self
                .rings
                .iter()
                .map(|(key, ring)| {
                    let others = ring.hosts.iter().filter(|h| *h != host).cloned();
                    (key.clone(), HashRing::new(others))
                })
                .filter(|(_, ring)| !ring.hosts.is_empty())
                .collect(),
        }
    }
}

/// FNV-1a, then a 64-bit finalizer to spread FNV's weak low bits. Stable across processes,
/// platforms and releases (std's hasher is not), which every API process relies on to agree.
fn stable_hash(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in bytes {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h ^= h >> 33;
    h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
    h ^= h >> 33;
    h = h.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    h ^ (h >> 33)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keys(n: usize) -> Vec<String> {
        (0..n)
            .map(|i| format!("00000000-0000-4000-8000-{i:012x}"))
            .collect()
    }

    #[test]
    fn empty_ring_has_no_owner() {
        assert_eq!(HashRing::new(Vec::new()).owner("x"), None);
    }

    #[test]
    fn owner_is_stable_and_order_independent() {
        let a = HashRing::new(["c1".to_owned(), "c2".to_owned(), "c3".to_owned()]);
        let b = HashRing::new(["c3".to_owned(), "c1".to_owned(), "c2".to_owned()]);
        for k in keys(200) {
            assert_eq!(a.owner(&k), b.owner(&k));
        }
        // A fixed answer guards against an accidental change of the hash, which would reroute
        // every node at once during a rolling upgrade.
        assert_eq!(stable_hash(b"ferrum"), 0x49d3ad5c2b18ba68);
        assert_ne!(stable_hash(b"c1-0"), stable_hash(b"c1-1"));
    }

    #[test]
    fn without_a_host_its_keys_go_to_the_next_host_and_no_other_key_moves() {
        let fake = vec!["fake".to_owned()];
        let member = |host| Member {
            host,
            group: "",
            drivers: &fake,
        };
        let three = Rings::new([member("c1"), member("c2"), member("c3")]);
        let two = Rings::new([member("c1"), member("c2")]);
        let without = three.without("c3");
        for k in keys(500) {
            let route = Route {
                uuid: &k,
                driver: "fake",
                group: "",
            };
            assert_eq!(without.owner(&route), two.owner(&route));
            if three.owner(&route) != Some("c3") {
                assert_eq!(without.owner(&route), three.owner(&route));
            }
        }
        assert!(Rings::new([member("c1")]).without("c1").is_empty());
    }

    #[test]
    fn rings_are_per_group_and_driver() {
        let (fake, other) = (
            vec!["fake".to_owned()],
            vec!["fake".to_owned(), "x".to_owned()],
        );
        let member = |host, group, drivers| Member {
            host,
            group,
            drivers,
        };
        let rings = Rings::new([
            member("c1", "", &fake),
            member("c2", "", &other),
            member("c3", "rack", &other),
        ]);
        let only_c1_c2 = HashRing::new(["c1".to_owned(), "c2".to_owned()]);
        for k in keys(200) {
            let route = |driver, group| Route {
                uuid: &k,
                driver,
                group,
            };
            assert_eq!(rings.owner(&route("fake", "")), only_c1_c2.owner(&k));
            assert_eq!(rings.owner(&route("x", "")), Some("c2"));
            assert_eq!(rings.owner(&route("fake", "rack")), Some("c3"));
            assert_eq!(rings.owner(&route("x", "rack")), Some("c3"));
            assert_eq!(rings.owner(&route("y", "")), None);
            assert_eq!(rings.without("c2").owner(&route("x", "")), None);
            assert_eq!(rings.without("c1").owner(&route("fake", "")), Some("c2"));
        }
        assert!(!rings.is_empty());
        assert!(Rings::new([]).is_empty());
        assert!(Rings::new([member("c1", "", &[])]).is_empty());
    }

    #[test]
    fn spreads_load_and_moves_little_when_a_host_joins() {
        let two = HashRing::new(["c1".to_owned(), "c2".to_owned()]);
        let three = HashRing::new(["c1".to_owned(), "c2".to_owned(), "c3".to_owned()]);
        let keys = keys(3000);
        let on_c1 = keys.iter().filter(|k| two.owner(k) == Some("c1")).count();
        assert!((900..2100).contains(&on_c1), "unbalanced: {on_c1}/3000");
        let moved = keys
            .iter()
            .filter(|k| two.owner(k) != three.owner(k))
            .count();
        // Ideally a third of the keys move, all of them to the new host.
        assert!(moved < 1800, "too many moved: {moved}");
        for k in &keys {
            if two.owner(k) != three.owner(k) {
                assert_eq!(three.owner(k), Some("c3"));
            }
        }
    }
}
