//! `{...}` in a rule's arguments, as Ironic fills them in: Python's `str.format` with the
//! keyword arguments `node` (read by attribute: `{node.driver}`), `inventory`, `plugin_data` and,
//! in a loop, `item` (read by key or index: `{inventory[cpu][count]}`,
//! `{inventory[interfaces][0][mac_address]}`). The result is always text, values rendered as
//! Python's `str` renders them (`True`, `None`, `{'a': 1}`; an object's keys in sorted order,
//! as Ferrum keeps them, where Python keeps the order they were written in). A field that cannot be filled in
//! leaves the text as it was, except a missing key under `is-empty`, which reads as None
//! (Ironic's `safe_format`). Conversions `!s`, `!r` and `!a` are read; a format spec after `:` is
//! not (the text is left as it was).

use serde_json::Value;

use crate::node::JsonObject;

/// What a format field can refer to.
pub struct Context<'a> {
    /// The node's fields, by name.
    pub node: &'a JsonObject,
    pub inventory: &'a Value,
    pub plugin_data: &'a Value,
    /// The current item of a `loop`.
    pub item: Option<&'a Value>,
}

/// Why a field could not be filled in: a missing key (Python's KeyError), or anything else.
#[derive(Debug, PartialEq, Eq)]
enum Miss {
    Key,
    Other,
}

/// Python's truth of a JSON value.
pub use crate::resource::json::truthy;

/// Python's name of a JSON value's type, for messages.
pub fn py_type(v: &Value) -> &'static str {
    match v {
        Value::Null => "NoneType",
        Value::Bool(_) => "bool",
        Value::Number(n) if n.is_f64() => "float",
        Value::Number(_) => "int",
        Value::String(_) => "str",
        Value::Array(_) => "list",
        Value::Object(_) => "dict",
    }
}

/// Python's `str()` of a JSON value.
pub fn py_str(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => py_repr(other),
    }
}

/// Python's `repr()` of a JSON value.
pub fn py_repr(v: &Value) -> String {
    match v {
        Value::Null => "None".to_owned(),
        Value::Bool(true) => "True".to_owned(),
        Value::Bool(false) => "False".to_owned(),
        Value::Number(n) => n.to_string(),
        Value::String(s) => {
            let quote = if s.contains('\'') && !s.contains('"') {
                '"'
            } else {
                '\''
            };
            let mut out = String::with_capacity(s.len() + 2);
            out.push(quote);
            for c in s.chars() {
                match c {
                    '\\' => out.push_str("\\\\"),
                    '\n' => out.push_str("\\n"),
                    '\r' => out.push_str("\\r"),
                    '\t' => out.push_str("\\t"),
                    c if c == quote => {
                        out.push('\\');
                        out.push(c);
                    }
                    c => out.push(c),
                }
            }
            out.push(quote);
            out
        }
        Value::Array(items) => {
            let items: Vec<String> = items.iter().map(py_repr).collect();
            format!("[{}]", items.join(", "))
        }
        Value::Object(m) => {
            let items: Vec<String> = m
                .iter()
                .map(|(k, v)| format!("{}: {}", py_repr(&Value::String(k.clone())), py_repr(v)))
                .collect();
            format!("{{{}}}", items.join(", "))
        }
    }
}

/// The keys whose values rules never see (Ironic's `SENSITIVE_FIELDS`, masked with the
/// default `[inspection_rules]mask_secrets = always`).
pub const SENSITIVE_FIELDS: &[&str] = &["password", "auth_token", "bmc_password"];

/// `v` with the value of every sensitive key, at any depth, replaced by `***`.
pub fn masked(v: &Value) -> Value {
    match v {
        Value::Object(m) => Value::Object(
            m.iter()
                .map(|(k, v)| {
                    let v = if SENSITIVE_FIELDS.contains(&k.as_str()) {
                        Value::String("***".to_owned())
                    } else {
                        masked(v)
                    };
                    (k.clone(), v)
                })
                .collect(),
        ),
        Value::Array(items) => Value::Array(items.iter().map(masked).collect()),
        other => other.clone(),
    }
}

/// A value a field resolved to: the node itself, or a JSON value.
enum Resolved<'a> {
    Node(&'a JsonObject),
    Json(&'a Value),
    Char(String),
}

/// Python's `format(text, **context)`.
fn format(text: &str, ctx: &Context<'_>) -> Result<String, Miss> {
    let mut out = String::new();
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '{' if chars.peek() == Some(&'{') => {
                chars.next();
                out.push('{');
            }
            '{' => {
                let mut depth = 1;
                let mut field = String::new();
                loop {
                    match chars.next() {
                        None => return Err(Miss::Other),
                        Some('{') => {
                            depth += 1;
                            field.push('{');
                        }
                        Some('}') => {
                            depth -= 1;
                            if depth == 0 {
                                break;
                            }
                            field.push('}');
                        }
                        Some(c) => field.push(c),
                    }
                }
                out.push_str(&render_field(&field, ctx)?);
            }
            '}' if chars.peek() == Some(&'}') => {
                chars.next();
                out.push('}');
            }
            '}' => return Err(Miss::Other),
            c => out.push(c),
        }
    }
    Ok(out)
}

/// One replacement field: `name(.attr|[key])*[!conv][:spec]`.
fn render_field(field: &str, ctx: &Context<'_>) -> Result<String, Miss> {
    // The name ends at the first `!` or `:` outside brackets.
    let mut in_bracket = false;
    let mut end = field.len();
    for (i, c) in field.char_indices() {
        match c {
            '[' => in_bracket = true,
            ']' => in_bracket = false,
            '!' | ':' if !in_bracket => {
                end = i;
                break;
            }
            _ => {}
        }
    }
    let (name, rest) = field.split_at(end);
    let (conversion, spec) = match rest.strip_prefix('!') {
        Some(r) => {
            let mut cs = r.chars();
            let conv = cs.next().ok_or(Miss::Other)?;
            let after = cs.as_str();
            if !after.is_empty() && !after.starts_with(':') {
                return Err(Miss::Other);
            }
            (Some(conv), after.strip_prefix(':').unwrap_or(""))
        }
        None => (None, rest.strip_prefix(':').unwrap_or("")),
    };
    if !spec.is_empty() {
        return Err(Miss::Other);
    }
    let resolved = resolve(name, ctx)?;
    let as_json = |r: &Resolved<'_>| match r {
        Resolved::Node(m) => Value::Object((*m).clone()),
        Resolved::Json(v) => (*v).clone(),
        Resolved::Char(c) => Value::String(c.clone()),
    };
    let value = as_json(&resolved);
    match conversion {
        None | Some('s') => Ok(py_str(&value)),
        Some('r') | Some('a') => Ok(py_repr(&value)),
        Some(_) => Err(Miss::Other),
    }
}

fn resolve<'a>(name: &str, ctx: &'a Context<'_>) -> Result<Resolved<'a>, Miss> {
    let first_end = name.find(['.', '[']).unwrap_or(name.len());
    let (arg, mut rest) = name.split_at(first_end);
    // Positional fields: Ironic passes none.
    if arg.is_empty() || arg.bytes().all(|b| b.is_ascii_digit()) {
        return Err(Miss::Other);
    }
    let mut current = match arg {
        "node" => Resolved::Node(ctx.node),
        "inventory" => Resolved::Json(ctx.inventory),
        "plugin_data" => Resolved::Json(ctx.plugin_data),
        "item" => Resolved::Json(ctx.item.ok_or(Miss::Key)?),
        _ => return Err(Miss::Key),
    };
    while !rest.is_empty() {
        if let Some(r) = rest.strip_prefix('.') {
            let end = r.find(['.', '[']).unwrap_or(r.len());
            let (attr, after) = r.split_at(end);
            current = match current {
                Resolved::Node(m) if !attr.is_empty() => {
                    Resolved::Json(m.get(attr).ok_or(Miss::Other)?)
                }
                _ => return Err(Miss::Other),
            };
            rest = after;
        } else if let Some(r) = rest.strip_prefix('[') {
            let close = r.find(']').ok_or(Miss::Other)?;
            let key = &r[..close];
            let after = &r[close + 1..];
            if !after.is_empty() && !after.starts_with(['.', '[']) {
                return Err(Miss::Other);
            }
            if key.is_empty() {
                return Err(Miss::Other);
            }
            let index = key
                .bytes()
                .all(|b| b.is_ascii_digit())
                .then(|| key.parse::<usize>().ok())
                .flatten();
            current = match current {
                Resolved::Node(_) => return Err(Miss::Other),
                Resolved::Char(_) => return Err(Miss::Other),
                Resolved::Json(Value::Object(m)) => match index {
                    // A JSON object's keys are text: an integer key is never there.
                    Some(_) => return Err(Miss::Key),
                    None => Resolved::Json(m.get(key).ok_or(Miss::Key)?),
                },
                Resolved::Json(Value::Array(items)) => match index {
                    Some(i) => Resolved::Json(items.get(i).ok_or(Miss::Other)?),
                    None => return Err(Miss::Other),
                },
                Resolved::Json(Value::String(s)) => match index {
                    Some(i) => Resolved::Char(s.chars().nth(i).ok_or(Miss::Other)?.to_string()),
                    None => return Err(Miss::Other),
                },
                Resolved::Json(_) => return Err(Miss::Other),
            };
            rest = after;
        } else {
            return Err(Miss::Other);
        }
    }
    Ok(current)
}

/// Ironic's `safe_format`: the text filled in, or as it was when a field cannot be filled in;
/// None (JSON null) for a missing key under `is-empty`.
fn safe_format(text: &str, ctx: &Context<'_>, op: Option<&str>) -> Value {
    match format(text, ctx) {
        Ok(s) => Value::String(s),
        Err(Miss::Key) if op == Some("is-empty") => Value::Null,
        Err(miss) => {
            tracing::warn!("Interpolation failed: {text}: {miss:?}");
            Value::String(text.to_owned())
        }
    }
}

/// Ironic's `interpolate_variables`: text filled in, objects (keys too) and lists throughout.
/// In a loop, text is filled in twice, so an item may itself hold fields to fill in.
pub fn interpolate(value: &Value, ctx: &Context<'_>, op: Option<&str>) -> Value {
    let in_loop = ctx.item.is_some();
    match value {
        Value::String(s) if in_loop => match safe_format(s, ctx, op) {
            Value::String(once) => safe_format(&once, ctx, op),
            other => other,
        },
        Value::String(s) => safe_format(s, ctx, op),
        Value::Object(m) => Value::Object(
            m.iter()
                .map(|(k, v)| {
                    let key = match safe_format(k, ctx, op) {
                        Value::String(k) => k,
                        _ => k.clone(),
                    };
                    (key, interpolate(v, ctx, op))
                })
                .collect(),
        ),
        Value::Array(items) => Value::Array(
            items
                .iter()
                .map(|v| match v {
                    Value::String(s) => safe_format(s, ctx, op),
                    other => interpolate(other, ctx, op),
                })
                .collect(),
        ),
        other => other.clone(),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn with<T>(item: Option<Value>, f: impl FnOnce(&Context<'_>) -> T) -> T {
        let node = json!({"driver": "fake-hardware", "properties": {"cpus": 4}});
        let inventory = json!({
            "cpu": {"architecture": "x86_64", "count": 4},
            "interfaces": [{"mac_address": "2a:03:9c:53:4e:46"}],
            "bmc_address": "192.168.1.100",
            "bmc": {"password": "hunter2"},
        });
        let plugin_data = json!({"plugin": "data"});
        let masked_inventory = masked(&inventory);
        let ctx = Context {
            node: node.as_object().unwrap(),
            inventory: &masked_inventory,
            plugin_data: &plugin_data,
            item: item.as_ref(),
        };
        f(&ctx)
    }

    fn fill(text: &str, item: Option<Value>, op: Option<&str>) -> Value {
        with(item, |ctx| interpolate(&json!(text), ctx, op))
    }

    #[test]
    fn fields_are_filled_in_as_pythons_format_fills_them() {
        assert_eq!(fill("{inventory[cpu][architecture]}", None, None), "x86_64");
        assert_eq!(
            fill("{inventory[interfaces][0][mac_address]}", None, None),
            "2a:03:9c:53:4e:46"
        );
        assert_eq!(fill("{plugin_data[plugin]}", None, None), "data");
        assert_eq!(fill("{node.driver}", None, None), "fake-hardware");
        assert_eq!(
            fill("{node.properties[cpus]}", None, None),
            "4",
            "always text"
        );
        assert_eq!(fill("{inventory[cpu][count]!r}/{{x}}", None, None), "4/{x}");
        let item =
            json!({"key": "value", "nested": {"deep": "nested_value"}, "t": true, "n": null});
        assert_eq!(
            fill("{item}", Some(item.clone()), None),
            "{'key': 'value', 'n': None, 'nested': {'deep': 'nested_value'}, 't': True}",
            "Python's rendering, keys in Ferrum's (sorted) order"
        );
        assert_eq!(
            fill(
                "CPU: {inventory[cpu][count]}, Item: {item[key]}",
                Some(item.clone()),
                None
            ),
            "CPU: 4, Item: value"
        );
        assert_eq!(
            fill("{item[nested][deep]}", Some(item), None),
            "nested_value"
        );
        // In a loop an item's own fields are filled in too.
        assert_eq!(
            fill("{item}", Some(json!("{inventory[bmc_address]}")), None),
            "192.168.1.100"
        );
        // Secrets are masked.
        assert_eq!(fill("{inventory[bmc][password]}", None, None), "***");
    }

    #[test]
    fn what_cannot_be_filled_in_is_left_or_none_for_is_empty() {
        for text in [
            "{inventory[missing][key]}",
            "{inventory.cpu}",
            "{inventory[interfaces][5]}",
            "{node[driver]}",
            "{node.nothing}",
            "{}",
            "{0}",
            "{unknown}",
            "{inventory[cpu]:>10}",
            "{unclosed",
            "stray }",
        ] {
            assert_eq!(fill(text, None, None), json!(text), "{text}");
        }
        assert_eq!(
            fill("{inventory[i.do.not.exist]}", None, Some("is-empty")),
            Value::Null
        );
        assert_eq!(
            fill("{inventory[missing][key]}", None, Some("eq")),
            "{inventory[missing][key]}"
        );
        assert_eq!(
            fill("{inventory[interfaces][9]}", None, Some("is-empty")),
            "{inventory[interfaces][9]}",
            "an index error is not a missing key"
        );
    }

    #[test]
    fn objects_and_lists_are_filled_in_throughout() {
        let value = json!({
            "plain": "normal",
            "{plugin_data[plugin]}": "{inventory[cpu][architecture]}",
            "nested": {"list": ["{item[key]}", ["{inventory[bmc_address]}"], 5]},
        });
        let got = with(Some(json!({"key": "value"})), |ctx| {
            interpolate(&value, ctx, None)
        });
        assert_eq!(
            got,
            json!({
                "plain": "normal",
                "data": "x86_64",
                "nested": {"list": ["value", ["192.168.1.100"], 5]},
            })
        );
        assert_eq!(py_repr(&json!("it's")), "\"it's\"");
        assert_eq!(py_repr(&json!([1.5, "a", false])), "[1.5, 'a', False]");
    }
}
