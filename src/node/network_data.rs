//! A node's `network_data` (API 1.66): the instance's network configuration in the OpenStack
//! `network_data.json` format a config drive carries (L2 links, L3 networks, services). Ironic
//! checks it against that format's JSON schema (`ironic/api/controllers/v1/network-data-schema.json`,
//! from Nova); these are the same rules, written out: an empty object, or an object with the
//! `links`, `networks` and `services` arrays whose items have the required keys of their
//! `type`. Addresses are parsed as addresses rather than matched by the schema's patterns (its
//! IPv4 netmask pattern, for one, is not anchored at both ends); keys the format does not name
//! are allowed, as the schema allows them.

use std::net::{Ipv4Addr, Ipv6Addr};

use serde_json::{Map, Value};

use crate::error::{Error, Result};

type Object = Map<String, Value>;

/// Checks `data` as a node's `network_data`.
pub fn validate(data: &Object) -> Result<()> {
    if data.is_empty() {
        return Ok(());
    }
    check_document(data)
        .map_err(|reason| Error::InvalidParameterValue(format!("Invalid network_data: {reason}")))
}

type Check = std::result::Result<(), String>;

fn check_document(data: &Object) -> Check {
    for (key, check) in [
        ("links", check_link as fn(&Object) -> Check),
        ("networks", check_network),
        ("services", check_service),
    ] {
        let items = match data.get(key) {
            None => return Err(format!("'{key}' is a required property")),
            Some(Value::Array(items)) => items,
            Some(other) => return Err(format!("{key}: {other} is not an array")),
        };
        for (i, item) in items.iter().enumerate() {
            let item = as_object(item).map_err(|e| format!("{key}[{i}]: {e}"))?;
            check(item).map_err(|e| format!("{key}[{i}]: {e}"))?;
        }
    }
    Ok(())
}

/// The L2 link types of the format other than `bond` and `vlan`.
const PLAIN_LINK_TYPES: &[&str] = &[
    "bridge",
    "dvs",
    "hw_veb",
    "hyperv",
    "ovs",
    "tap",
    "vhostuser",
    "vif",
    "phy",
];
const BOND_MODES: &[&str] = &[
    "802.3ad",
    "balance-rr",
    "active-backup",
    "balance-xor",
    "broadcast",
    "balance-tlb",
    "balance-alb",
];

fn check_link(link: &Object) -> Check {
    let kind = required_string(link, "type")?;
    required_string(link, "id")?;
    optional_string(link, "vif_id")?;
    match link.get("mtu") {
        None | Some(Value::Null) => {}
        Some(Value::Number(n)) if n.as_f64().is_some_and(|m| (1.0..=65535.0).contains(&m)) => {}
        Some(other) => return Err(format!("mtu: {other} is not a number from 1 to 65535")),
    }
    match kind {
        "bond" => {
            mac(required_string(link, "ethernet_mac_address")?)?;
            let mode = required_string(link, "bond_mode")?;
            one_of("bond_mode", mode, BOND_MODES)?;
            match link.get("bond_links") {
                Some(Value::Array(links)) if links.iter().all(Value::is_string) => Ok(()),
                Some(other) => Err(format!("bond_links: {other} is not an array of strings")),
                None => Err("'bond_links' is a required property".to_owned()),
            }
        }
        "vlan" => {
            mac(required_string(link, "vlan_mac_address")?)?;
            required_string(link, "vlan_link")?;
            match link.get("vlan_id") {
                Some(v) if v.is_i64() || v.is_u64() => Ok(()),
                Some(other) => Err(format!("vlan_id: {other} is not an integer")),
                None => Err("'vlan_id' is a required property".to_owned()),
            }
        }
        other => {
            one_of("type", other, PLAIN_LINK_TYPES)?;
            mac(required_string(link, "ethernet_mac_address")?)
        }
    }
}

fn check_network(network: &Object) -> Check {
    let kind = required_string(network, "type")?;
    for key in ["id", "link", "network_id"] {
        required_string(network, key)?;
    }
    let v6 = match kind {
        "ipv4" | "ipv4_dhcp" => false,
        "ipv6" | "ipv6_dhcp" | "ipv6_slaac" => true,
        other => {
            return Err(format!(
                "type: '{other}' is not one of ipv4, ipv4_dhcp, ipv6, ipv6_dhcp, ipv6_slaac"
            ));
        }
    };
    if let Some(ip) = optional_string(network, "ip_address")? {
        host(ip, v6, true).map_err(|e| format!("ip_address: {e}"))?;
    }
    if let Some(mask) = optional_string(network, "netmask")? {
        netmask(mask, v6).map_err(|e| format!("netmask: {e}"))?;
    }
    let routes = match network.get("routes") {
        None => return Ok(()),
        Some(Value::Array(routes)) => routes,
        Some(other) => return Err(format!("routes: {other} is not an array")),
    };
    for (i, route) in routes.iter().enumerate() {
        check_route(as_object(route)?, v6).map_err(|e| format!("routes[{i}]: {e}"))?;
    }
    Ok(())
}

fn check_route(route: &Object, v6: bool) -> Check {
    host(required_string(route, "network")?, v6, false).map_err(|e| format!("network: {e}"))?;
    netmask(required_string(route, "netmask")?, v6).map_err(|e| format!("netmask: {e}"))?;
    host(required_string(route, "gateway")?, v6, false).map_err(|e| format!("gateway: {e}"))?;
    match route.get("services") {
        None => Ok(()),
        Some(Value::Array(services)) => services.iter().enumerate().try_for_each(|(i, s)| {
            let service = as_object(s).map_err(|e| format!("services[{i}]: {e}"))?;
            check_service_of(service, Some(v6)).map_err(|e| format!("services[{i}]: {e}"))
        }),
        Some(other) => Err(format!("services: {other} is not an array")),
    }
}

fn check_service(service: &Object) -> Check {
    check_service_of(service, None)
}

/// A DNS service; its address of the route's family, or of either at the top level.
fn check_service_of(service: &Object, v6: Option<bool>) -> Check {
    one_of("type", required_string(service, "type")?, &["dns"])?;
    let address = required_string(service, "address")?;
    let ok = match v6 {
        Some(v6) => host(address, v6, true).is_ok(),
        None => host(address, false, true).is_ok() || host(address, true, true).is_ok(),
    };
    if ok {
        Ok(())
    } else {
        Err(format!("address: '{address}' is not an IP address"))
    }
}

fn as_object(v: &Value) -> std::result::Result<&Object, String> {
    v.as_object().ok_or_else(|| format!("{v} is not an object"))
}

fn required_string<'a>(o: &'a Object, key: &str) -> std::result::Result<&'a str, String> {
    optional_string(o, key)?.ok_or_else(|| format!("'{key}' is a required property"))
}

fn optional_string<'a>(o: &'a Object, key: &str) -> std::result::Result<Option<&'a str>, String> {
    match o.get(key) {
        None => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(other) => Err(format!("{key}: {other} is not a string")),
    }
}

fn one_of(key: &str, value: &str, allowed: &[&str]) -> Check {
    if allowed.contains(&value) {
        Ok(())
    } else {
        Err(format!(
            "{key}: '{value}' is not one of {}",
            allowed.join(", ")
        ))
    }
}

/// A MAC address: six pairs of hex digits separated by `:` or `-`.
fn mac(s: &str) -> Check {
    let pairs: Vec<&str> = s.split([':', '-']).collect();
    if pairs.len() == 6
        && pairs
            .iter()
            .all(|p| p.len() == 2 && p.chars().all(|c| c.is_ascii_hexdigit()))
    {
        Ok(())
    } else {
        Err(format!("'{s}' is not a MAC address"))
    }
}

/// An address of the family; an IPv6 host address may carry a `/prefix` and, when link-local, a
/// `%zone`, as the format allows.
fn host(s: &str, v6: bool, is_host: bool) -> Check {
    let valid = if v6 {
        let (addr, prefix) = match s.split_once('/') {
            Some((a, p)) if is_host => (a, Some(p)),
            _ => (s, None),
        };
        let addr = match addr.split_once('%') {
            Some((a, zone)) if !zone.is_empty() && a.to_ascii_lowercase().starts_with("fe80:") => a,
            _ => addr,
        };
        addr.parse::<Ipv6Addr>().is_ok()
            && prefix.is_none_or(|p| (1..=2).contains(&p.len()) && p.parse::<u8>().is_ok())
    } else {
        s.parse::<Ipv4Addr>().is_ok()
    };
    if valid {
        Ok(())
    } else {
        let family = if v6 { "IPv6" } else { "IPv4" };
        Err(format!("'{s}' is not an {family} address"))
    }
}

/// A netmask: an IPv4 one has its set bits contiguous from the top; an IPv6 one is an address.
fn netmask(s: &str, v6: bool) -> Check {
    let valid = if v6 {
        s.parse::<Ipv6Addr>().is_ok()
    } else {
        s.parse::<Ipv4Addr>()
            .is_ok_and(|m| u32::from(m).leading_ones() + u32::from(m).trailing_zeros() == 32)
    };
    if valid {
        Ok(())
    } else {
        Err(format!("'{s}' is not a netmask"))
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn check(v: Value) -> Result<()> {
        validate(v.as_object().unwrap())
    }

    /// The example of the OpenStack metadata documentation: a bond over two NICs, a VLAN on it,
    /// an IPv4 and an IPv6 network with routes, and DNS.
    fn example() -> Value {
        json!({
            "links": [
                {"id": "eth0", "type": "phy", "ethernet_mac_address": "a0:36:9f:2c:e8:80", "mtu": 9000},
                {"id": "eth1", "type": "phy", "ethernet_mac_address": "A0-36-9F-2C-E8-81"},
                {"id": "bond0", "type": "bond", "bond_links": ["eth0", "eth1"],
                 "bond_mode": "802.3ad", "ethernet_mac_address": "a0:36:9f:2c:e8:82",
                 "bond_xmit_hash_policy": "layer3+4"},
                {"id": "vlan0", "type": "vlan", "vlan_link": "bond0", "vlan_id": 101,
                 "vlan_mac_address": "a0:36:9f:2c:e8:80", "vif_id": "e1c90e6f"}
            ],
            "networks": [
                {"id": "private-ipv4", "type": "ipv4", "link": "vlan0", "network_id": "da5bb487",
                 "ip_address": "10.184.0.244", "netmask": "255.255.240.0",
                 "routes": [{"network": "0.0.0.0", "netmask": "0.0.0.0", "gateway": "10.184.0.1",
                             "services": [{"type": "dns", "address": "8.8.8.8"}]}]},
                {"id": "public-ipv6", "type": "ipv6", "link": "vlan0", "network_id": "cf5bb487",
                 "ip_address": "2001:cdba::3257:9652/24", "netmask": "ffff:ffff:ffff:ffff::",
                 "routes": [{"network": "::", "netmask": "::", "gateway": "fd00::1"}]},
                {"id": "dhcp", "type": "ipv4_dhcp", "link": "eth1", "network_id": "x"}
            ],
            "services": [
                {"type": "dns", "address": "10.0.0.1"},
                {"type": "dns", "address": "fe80::1%eth0"}
            ]
        })
    }

    #[test]
    fn the_format_and_an_empty_object_pass() {
        check(example()).unwrap();
        check(json!({})).unwrap();
        check(json!({"links": [], "networks": [], "services": []})).unwrap();
    }

    /// Breaks the example at `pointer`: sets the value there, or removes the key when None.
    fn broken(pointer: &str, value: Option<Value>) -> Value {
        let mut v = example();
        match value {
            Some(value) => *v.pointer_mut(pointer).unwrap() = value,
            None => {
                let (parent, key) = pointer.rsplit_once('/').unwrap();
                let parent = if parent.is_empty() {
                    &mut v
                } else {
                    v.pointer_mut(parent).unwrap()
                };
                parent.as_object_mut().unwrap().remove(key);
            }
        }
        v
    }

    #[test]
    fn what_the_format_refuses_is_refused_with_the_place() {
        let cases = [
            ("/links", None, "'links' is a required property"),
            ("/services", Some(json!(3)), "services: 3 is not an array"),
            (
                "/links/0/type",
                Some(json!("wifi")),
                "links[0]: type: 'wifi'",
            ),
            (
                "/links/1/ethernet_mac_address",
                Some(json!("A0-36")),
                "links[1]: 'A0-36' is not",
            ),
            ("/links/0/mtu", Some(json!(0)), "links[0]: mtu: 0"),
            (
                "/links/2/bond_mode",
                Some(json!("fast")),
                "links[2]: bond_mode: 'fast'",
            ),
            (
                "/links/2/bond_links",
                None,
                "links[2]: 'bond_links' is a required",
            ),
            (
                "/links/3/vlan_id",
                Some(json!("101")),
                "links[3]: vlan_id: \"101\"",
            ),
            (
                "/networks/0/ip_address",
                Some(json!("10.184.0.300")),
                "networks[0]: ip_address: '10.184.0.300'",
            ),
            (
                "/networks/0/netmask",
                Some(json!("255.0.255.0")),
                "networks[0]: netmask: '255.0.255.0'",
            ),
            (
                "/networks/0/ip_address",
                Some(json!("2001:db8::1")),
                "networks[0]: ip_address: '2001:db8::1'",
            ),
            (
                "/networks/1/routes/0/gateway",
                Some(json!("10.0.0.1")),
                "networks[1]: routes[0]: gateway: '10.0.0.1'",
            ),
            (
                "/networks/2/network_id",
                None,
                "networks[2]: 'network_id' is a required",
            ),
            (
                "/networks/2/type",
                Some(json!("ipx")),
                "networks[2]: type: 'ipx'",
            ),
            (
                "/services/0/type",
                Some(json!("ntp")),
                "services[0]: type: 'ntp'",
            ),
            (
                "/services/1/address",
                Some(json!("dns.example")),
                "services[1]: address: 'dns.example'",
            ),
        ];
        for (pointer, value, expected) in cases {
            let e = check(broken(pointer, value))
                .expect_err(expected)
                .to_string();
            assert!(e.starts_with("Invalid network_data: "), "{e}");
            assert!(e.contains(expected), "{expected:?} not in {e:?}");
        }
    }
}
