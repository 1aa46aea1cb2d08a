//! The condition operators (Ironic's `inspection_rules/operators.py`), over JSON values with
//! Python's comparison semantics (`1 == 1.0 == True`, `'<'` refused between text and numbers),
//! and a condition's `loop` and `multiple`.

use std::{cmp::Ordering, net::IpAddr};

use serde_json::Value;

use super::{
    RuleError,
    interpolate::{py_repr, py_str, py_type},
};
use crate::node::JsonObject;

/// Python's `==` between JSON values.
pub fn py_eq(a: &Value, b: &Value) -> bool {
    match (number(a), number(b)) {
        (Some(x), Some(y)) => return x == y,
        (Some(_), None) | (None, Some(_)) => return false,
        (None, None) => {}
    }
    match (a, b) {
        (Value::Null, Value::Null) => true,
        (Value::String(x), Value::String(y)) => x == y,
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(x, y)| py_eq(x, y))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len() && x.iter().all(|(k, v)| y.get(k).is_some_and(|w| py_eq(v, w)))
        }
        _ => false,
    }
}

/// A number as Python compares it (a boolean is 0 or 1).
fn number(v: &Value) -> Option<f64> {
    match v {
        Value::Bool(b) => Some(f64::from(u8::from(*b))),
        Value::Number(n) => n.as_f64(),
        _ => None,
    }
}

/// Python's ordering of two values, or its TypeError for `symbol`.
fn py_cmp(a: &Value, b: &Value, symbol: &str) -> Result<Ordering, String> {
    let refuse = || {
        format!(
            "'{symbol}' not supported between instances of '{}' and '{}'",
            py_type(a),
            py_type(b)
        )
    };
    if let (Some(x), Some(y)) = (number(a), number(b)) {
        return x.partial_cmp(&y).ok_or_else(refuse);
    }
    match (a, b) {
        (Value::String(x), Value::String(y)) => Ok(x.cmp(y)),
        (Value::Array(x), Value::Array(y)) => {
            for (x, y) in x.iter().zip(y) {
                if !py_eq(x, y) {
                    return py_cmp(x, y, symbol);
                }
            }
            Ok(x.len().cmp(&y.len()))
        }
        _ => Err(refuse()),
    }
}

/// `eq`, `lt` and `gt`: the relation holds between each value and the next.
fn simple(name: &str, args: &JsonObject) -> Result<bool, RuleError> {
    let values = args.get("values").unwrap_or(&Value::Null);
    let Value::Array(values) = values else {
        return Err(RuleError::Condition(format!(
            "Failed to check condition: '{name}' on values: {}: Expected list for 'values', got: {}",
            py_str(values),
            py_type(values)
        )));
    };
    if values.len() < 2 {
        return Ok(true);
    }
    let force_strings = args
        .get("force_strings")
        .is_some_and(super::interpolate::truthy);
    let values: Vec<Value> = if force_strings {
        values.iter().map(|v| Value::String(py_str(v))).collect()
    } else {
        values.clone()
    };
    for pair in values.windows(2) {
        let holds = match name {
            "eq" => py_eq(&pair[0], &pair[1]),
            "lt" => py_cmp(&pair[0], &pair[1], "<").map_err(RuleError::Other)? == Ordering::Less,
            _ => py_cmp(&pair[0], &pair[1], ">").map_err(RuleError::Other)? == Ordering::Greater,
        };
        if !holds {
            return Ok(false);
        }
    }
    Ok(true)
}

/// An address and prefix length, as netaddr's `IPNetwork` reads one (a bare address is a
/// network of one).
fn network(subnet: &str) -> Option<(IpAddr, u8)> {
    let (addr, prefix) = match subnet.split_once('/') {
        Some((a, p)) => (a, Some(p)),
        None => (subnet, None),
    };
    let addr: IpAddr = addr.trim().parse().ok()?;
    let max = if addr.is_ipv4() { 32 } else { 128 };
    let prefix = match prefix {
        Some(p) => p.trim().parse::<u8>().ok().filter(|p| *p <= max)?,
        None => max,
    };
    Some((addr, prefix))
}

fn in_network(address: IpAddr, (net, prefix): (IpAddr, u8)) -> bool {
    match (address, net) {
        (IpAddr::V4(a), IpAddr::V4(n)) => {
            let mask = if prefix == 0 {
                0
            } else {
                u32::MAX << (32 - prefix)
            };
            u32::from(a) & mask == u32::from(n) & mask
        }
        (IpAddr::V6(a), IpAddr::V6(n)) => {
            let mask = if prefix == 0 {
                0
            } else {
                u128::MAX << (128 - prefix)
            };
            u128::from(a) & mask == u128::from(n) & mask
        }
        _ => false,
    }
}

fn regex(pattern: &Value, anchored: bool) -> Result<regex::Regex, RuleError> {
    let Value::String(pattern) = pattern else {
        return Err(RuleError::Other(format!(
            "first argument must be string or compiled pattern, not {}",
            py_type(pattern)
        )));
    };
    let invalid =
        |e: regex::Error| RuleError::Execution(format!("invalid regular expression: {e}"));
    regex::Regex::new(pattern).map_err(invalid)?;
    if anchored {
        // Ironic appends `$` unless the expression ends with one, and matches at the start.
        let body = if pattern.ends_with('$') {
            pattern.clone()
        } else {
            format!("{pattern}$")
        };
        regex::Regex::new(&format!("^(?:{body})")).map_err(invalid)
    } else {
        regex::Regex::new(pattern).map_err(invalid)
    }
}

/// The operator `name` (checked to be one) over its arguments, already filled in.
pub fn check(name: &str, args: &JsonObject) -> Result<bool, RuleError> {
    let arg = |n: &str| args.get(n).unwrap_or(&Value::Null);
    let value = arg("value");
    match name {
        "eq" | "lt" | "gt" => simple(name, args),
        "is-empty" => Ok(matches!(py_str(value).as_str(), "" | "None" | "[]" | "{}")),
        "in-net" => {
            let subnet = arg("subnet");
            let net = subnet.as_str().and_then(network).ok_or_else(|| {
                RuleError::Execution(format!(
                    "invalid value: invalid IPNetwork {}",
                    py_str(subnet)
                ))
            })?;
            let address = arg("address");
            let address: IpAddr = address
                .as_str()
                .and_then(|a| a.trim().parse().ok())
                .ok_or_else(|| {
                    RuleError::Other(format!(
                        "failed to detect a valid IP address from {}",
                        py_repr(address)
                    ))
                })?;
            Ok(in_network(address, net))
        }
        "matches" => Ok(regex(arg("regex"), true)?.is_match(&py_str(value))),
        "contains" => Ok(regex(arg("regex"), false)?.is_match(&py_str(value))),
        "one-of" => match args.get("values").unwrap_or(&Value::Array(Vec::new())) {
            Value::Array(values) => Ok(values.iter().any(|v| py_eq(value, v))),
            Value::Object(keys) => Ok(value.as_str().is_some_and(|k| keys.contains_key(k))),
            Value::String(s) => match value {
                Value::String(v) => Ok(s.contains(v.as_str())),
                other => Err(RuleError::Other(format!(
                    "'in <string>' requires string as left operand, not {}",
                    py_type(other)
                ))),
            },
            other => Err(RuleError::Other(format!(
                "argument of type '{}' is not iterable",
                py_type(other)
            ))),
        },
        "is-none" => Ok(value.is_null()),
        "is-true" => Ok(match value {
            Value::Bool(b) => *b,
            Value::Number(n) => n.as_f64().is_some_and(|f| f != 0.0),
            Value::String(s) => matches!(s.to_lowercase().as_str(), "yes" | "true"),
            _ => false,
        }),
        "is-false" => Ok(match value {
            Value::Bool(b) => !*b,
            Value::Number(n) => n.as_f64().is_some_and(|f| f == 0.0),
            Value::String(s) => matches!(s.to_lowercase().as_str(), "no" | "false"),
            Value::Null => true,
            _ => false,
        }),
        other => Err(RuleError::Other(format!("Unsupported operator '{other}'."))),
    }
}

/// How a looping condition's results combine (Ironic's `check_with_loop`): `any` and `all` over
/// every item; `first` is true at the first item that holds, else the first item's result;
/// `last` is the last item's result. An object as `loop` is one item.
pub fn combine(
    items: &[Value],
    multiple: &str,
    mut check_item: impl FnMut(&Value) -> Result<bool, RuleError>,
) -> Result<bool, RuleError> {
    let mut results = Vec::new();
    for item in items {
        let result = check_item(item)?;
        match multiple {
            "first" if result => return Ok(true),
            "last" => results = vec![result],
            _ => results.push(result),
        }
    }
    Ok(match multiple {
        "any" => results.iter().any(|r| *r),
        "all" => results.iter().all(|r| *r),
        _ => results.first().copied().unwrap_or(false),
    })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn holds(name: &str, args: Value) -> bool {
        check(name, args.as_object().unwrap()).unwrap_or_else(|e| panic!("{name} {args}: {e:?}"))
    }

    fn fails(name: &str, args: Value) -> String {
        check(name, args.as_object().unwrap())
            .unwrap_err()
            .to_string()
    }

    #[test]
    fn each_operator_holds_and_fails_as_ironics_does() {
        let cases = [
            ("eq", json!({"values": [5, 5]}), json!({"values": [5, 10]})),
            (
                "eq",
                json!({"values": [1, 1.0, true]}),
                json!({"values": ["5", 5]}),
            ),
            (
                "lt",
                json!({"values": [5, 10, 11]}),
                json!({"values": [10, 5]}),
            ),
            ("gt", json!({"values": [10, 5]}), json!({"values": [5, 10]})),
            (
                "gt",
                json!({"values": ["b", "a"]}),
                json!({"values": [[1, 2], [1, 3]]}),
            ),
            (
                "is-empty",
                json!({"value": ""}),
                json!({"value": "not empty"}),
            ),
            ("is-empty", json!({"value": {}}), json!({"value": 0})),
            (
                "in-net",
                json!({"address": "192.168.1.5", "subnet": "192.168.1.0/24"}),
                json!({"address": "10.0.0.1", "subnet": "192.168.1.0/24"}),
            ),
            (
                "in-net",
                json!({"address": "fd00::5", "subnet": "fd00::/64"}),
                json!({"address": "10.0.0.1", "subnet": "::/0"}),
            ),
            (
                "matches",
                json!({"value": "abc123", "regex": "abc\\d+"}),
                json!({"value": "abc123x", "regex": "abc\\d+"}),
            ),
            (
                "matches",
                json!({"value": "a", "regex": "a|b"}),
                json!({"value": "xb", "regex": "a|b$"}),
            ),
            (
                "contains",
                json!({"value": "test-abc123-end", "regex": "abc\\d+"}),
                json!({"value": "test-xyz-end", "regex": "abc\\d+"}),
            ),
            (
                "one-of",
                json!({"value": "b", "values": ["a", "b", "c"]}),
                json!({"value": "z", "values": ["a", "b"]}),
            ),
            (
                "one-of",
                json!({"value": "a", "values": "abc"}),
                json!({"value": "test"}),
            ),
            (
                "is-none",
                json!({"value": null}),
                json!({"value": "something"}),
            ),
            ("is-true", json!({"value": "TRUE"}), json!({"value": {}})),
            ("is-true", json!({"value": 0.1}), json!({"value": 0})),
            ("is-false", json!({"value": null}), json!({"value": "yes"})),
            ("is-false", json!({"value": "No"}), json!({"value": []})),
        ];
        for (name, yes, no) in cases {
            assert!(holds(name, yes.clone()), "{name} {yes}");
            assert!(!holds(name, no.clone()), "{name} {no}");
        }
        assert!(holds(
            "eq",
            json!({"values": [4, "4"], "force_strings": true})
        ));
        assert!(
            holds("eq", json!({"values": [1]})),
            "fewer than two values hold"
        );
    }

    #[test]
    fn bad_arguments_fail_the_check() {
        assert!(
            fails("eq", json!({"values": "not-a-list"}))
                .contains("Expected list for 'values', got: str")
        );
        assert!(
            fails("lt", json!({"values": ["a", 1]}))
                .contains("'<' not supported between instances of 'str' and 'int'")
        );
        assert!(
            fails(
                "in-net",
                json!({"address": "10.0.0.1", "subnet": "invalid-subnet"})
            )
            .contains("invalid value")
        );
        assert!(
            fails("in-net", json!({"address": "nope", "subnet": "10.0.0.0/8"}))
                .contains("valid IP address")
        );
        assert!(
            fails("matches", json!({"value": "x", "regex": "[unclosed"}))
                .contains("invalid regular expression")
        );
        assert!(fails("one-of", json!({"value": 1, "values": 5})).contains("not iterable"));
    }

    #[test]
    fn loops_combine_as_multiple_says() {
        let items = [json!(1), json!(2), json!(3), json!(4)];
        let is_one = |v: &Value| Ok(v == &json!(1));
        assert!(combine(&items, "any", is_one).unwrap());
        assert!(!combine(&items, "all", is_one).unwrap());
        assert!(combine(&items, "first", is_one).unwrap());
        assert!(!combine(&items, "last", is_one).unwrap());
        let is_four = |v: &Value| Ok(v == &json!(4));
        assert!(combine(&items, "last", is_four).unwrap());
        assert!(!combine(&items, "first", |_| Ok(false)).unwrap());
        assert!(!combine(&[], "any", is_one).unwrap());
    }
}
