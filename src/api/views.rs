//! How nodes look in responses: the fields of the negotiated version, timestamps as Ironic writes
//! them, secrets masked.

use chrono::NaiveDateTime;
use serde_json::{Map, Value, json};

use super::extract::{ApiVersion, MAX_VERSION};
use crate::{
    db::models::{JsonObject, Node},
    error::Error,
    states::ProvisionState,
};

const MASK: &str = "******";

/// Key fragments whose values are secrets (oslo.utils' `mask_dict_password` list, in spirit).
const SECRET_KEY_PARTS: &[&str] = &[
    "password",
    "passwd",
    "pswd",
    "secret",
    "token",
    "passphrase",
    "private_key",
    "encrypted_key",
    "auth_key",
    "priv_key",
    "fernetkey",
    "sslkey",
    "cephxkey",
    "credential",
];

/// Masks the value of every key that names a secret, at any depth (objects and arrays), and
/// `password=...`-like text inside strings.
pub fn mask_secrets(doc: &JsonObject) -> JsonObject {
    doc.iter()
        .map(|(k, v)| {
            let lower = k.to_ascii_lowercase();
            let masked = if SECRET_KEY_PARTS.iter().any(|p| lower.contains(p)) {
                Value::String(MASK.to_owned())
            } else {
                mask_value(v)
            };
            (k.clone(), masked)
        })
        .collect()
}

fn mask_value(v: &Value) -> Value {
    match v {
        Value::Object(inner) => Value::Object(mask_secrets(inner)),
        Value::Array(items) => Value::Array(items.iter().map(mask_value).collect()),
        Value::String(s) => Value::String(mask_secret_text(s)),
        other => other.clone(),
    }
}

/// The bytes a secret word can start with, either case: a fast "no word starts here" test.
const SECRET_FIRST_BYTES: [bool; 256] = {
    let mut table = [false; 256];
    let mut k = 0;
    while k < SECRET_KEY_PARTS.len() {
        let first = SECRET_KEY_PARTS[k].as_bytes()[0];
        table[first.to_ascii_lowercase() as usize] = true;
        table[first.to_ascii_uppercase() as usize] = true;
        k += 1;
    }
    table
};

/// The length of the secret word starting at byte `at` of `text` (ASCII case-insensitive), the
/// shortest if several do.
fn secret_word_at(text: &[u8], at: usize) -> Option<usize> {
    if !SECRET_FIRST_BYTES[usize::from(text[at])] {
        return None;
    }
    let rest = &text[at..];
    SECRET_KEY_PARTS
        .iter()
        .map(|p| p.as_bytes())
        .filter(|p| rest.len() >= p.len() && rest[..p.len()].eq_ignore_ascii_case(p))
        .map(<[u8]>::len)
        .min()
}

/// Replaces the value after `<secret word>=` or `<secret word>: ` in free text: after a secret
/// word, a run of `=`, `:`, space and quotes, then the value up to whitespace, a quote, `,`, `&`
/// or `;` becomes `******`. A word with no separator after it is left alone, and so is an empty
/// value; the scan goes on after the word or the value (a value is never searched for words).
///
/// One left-to-right pass: every byte is looked at a bounded number of times, so the cost is
/// linear in the text (a node's `driver_info` string is shown on every GET).
fn mask_secret_text(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = String::with_capacity(text.len());
    // `text[..copied]` is already in `out`.
    let mut copied = 0;
    let mut at = 0;
    while at < bytes.len() {
        let Some(word_len) = secret_word_at(bytes, at) else {
            at += 1;
            continue;
        };
        let after_word = at + word_len;
        // The separators are ASCII, so counting bytes is counting characters.
        let value_start = after_word
            + bytes[after_word..]
                .iter()
                .take_while(|b| matches!(b, b'=' | b':' | b' ' | b'"' | b'\''))
                .count();
        if value_start == after_word {
            at = after_word;
            continue;
        }
        // Characters, not bytes: any Unicode whitespace ends the value.
        let value_end = value_start
            + text[value_start..]
                .chars()
                .take_while(|c| !c.is_whitespace() && !matches!(c, '"' | '\'' | ',' | '&' | ';'))
                .map(char::len_utf8)
                .sum::<usize>();
        if value_end > value_start {
            out.push_str(&text[copied..value_start]);
            out.push_str(MASK);
            copied = value_end;
        }
        at = value_end;
    }
    out.push_str(&text[copied..]);
    out
}

fn masked_instance_info(doc: &JsonObject) -> JsonObject {
    let mut m = mask_secrets(doc);
    for key in ["configdrive", "image_url"] {
        if let Some(v) = m.get_mut(key)
            && !v.is_null()
            && v.as_str() != Some("")
        {
            *v = Value::String(MASK.to_owned());
        }
    }
    m
}

pub fn timestamp(t: &NaiveDateTime) -> String {
    t.format("%Y-%m-%dT%H:%M:%S%.6f+00:00").to_string()
}

fn opt_timestamp(t: &Option<NaiveDateTime>) -> Value {
    t.as_ref()
        .map(|t| Value::String(timestamp(t)))
        .unwrap_or(Value::Null)
}

/// A provision state as the version shows it: `available` is null before 1.2, `inspect wait`
/// is `inspecting` before 1.39.
fn state_value(state: Option<ProvisionState>, version: ApiVersion) -> Value {
    match state {
        Some(ProvisionState::Available) if !version.at_least(2) => Value::Null,
        Some(ProvisionState::InspectWait) if !version.at_least(39) => {
            Value::String(ProvisionState::Inspecting.api_name().to_owned())
        }
        Some(s) => Value::String(s.api_name().to_owned()),
        None => Value::Null,
    }
}

pub fn links(base: &str, resource: &str, id: &str) -> Value {
    json!([
        {"href": format!("{base}/v1/{resource}/{id}"), "rel": "self"},
        {"href": format!("{base}/{resource}/{id}"), "rel": "bookmark"},
    ])
}

/// The full node, as GET /v1/nodes/{id} shows it at `version`. `conductor` is the node's
/// conductor on the hash ring (shown from 1.49).
pub fn node_detail(node: &Node, version: ApiVersion, base: &str, conductor: Option<&str>) -> Value {
    let mut m = Map::new();
    m.insert("uuid".into(), json!(node.uuid));
    m.insert("created_at".into(), json!(timestamp(&node.created_at)));
    m.insert("updated_at".into(), opt_timestamp(&node.updated_at));
    m.insert("chassis_uuid".into(), Value::Null);
    m.insert("console_enabled".into(), json!(node.console_enabled));
    m.insert("driver".into(), json!(node.driver));
    m.insert(
        "driver_info".into(),
        Value::Object(mask_secrets(&node.driver_info)),
    );
    m.insert("extra".into(), Value::Object(node.extra.clone()));
    m.insert(
        "instance_info".into(),
        Value::Object(masked_instance_info(&node.instance_info)),
    );
    m.insert("instance_uuid".into(), json!(node.instance_uuid));
    m.insert("last_error".into(), json!(node.last_error));
    m.insert("maintenance".into(), json!(node.maintenance));
    m.insert("maintenance_reason".into(), json!(node.maintenance_reason));
    m.insert("power_state".into(), json!(node.power_state));
    m.insert("properties".into(), Value::Object(node.properties.clone()));
    m.insert(
        "provision_state".into(),
        state_value(Some(node.provision_state), version),
    );
    m.insert(
        "provision_updated_at".into(),
        opt_timestamp(&node.provision_updated_at),
    );
    m.insert("reservation".into(), json!(node.reservation));
    m.insert("target_power_state".into(), json!(node.target_power_state));
    m.insert(
        "target_provision_state".into(),
        state_value(node.target_provision_state, version),
    );
    m.insert("links".into(), links(base, "nodes", &node.uuid));
    m.insert(
        "ports".into(),
        links(base, "nodes", &format!("{}/ports", node.uuid)),
    );
    if version.at_least(3) {
        m.insert(
            "driver_internal_info".into(),
            Value::Object(mask_secrets(&node.driver_internal_info)),
        );
    }
    if version.at_least(5) {
        m.insert("name".into(), json!(node.name));
    }
    if version.at_least(6) {
        m.insert(
            "inspection_started_at".into(),
            opt_timestamp(&node.inspection_started_at),
        );
        m.insert(
            "inspection_finished_at".into(),
            opt_timestamp(&node.inspection_finished_at),
        );
    }
    if version.at_least(7) {
        m.insert("clean_step".into(), json!({}));
    }
    if version.at_least(12) {
        m.insert("raid_config".into(), json!({}));
        m.insert("target_raid_config".into(), json!({}));
    }
    if version.at_least(14) {
        m.insert(
            "states".into(),
            links(base, "nodes", &format!("{}/states", node.uuid)),
        );
    }
    if version.at_least(20) {
        m.insert("network_interface".into(), json!(node.network_interface));
    }
    if version.at_least(21) {
        m.insert("resource_class".into(), json!(node.resource_class));
    }
    if version.at_least(24) {
        m.insert(
            "portgroups".into(),
            links(base, "nodes", &format!("{}/portgroups", node.uuid)),
        );
    }
    if version.at_least(31) {
        m.insert("boot_interface".into(), json!(node.boot_interface));
        m.insert("console_interface".into(), json!(node.console_interface));
        m.insert("deploy_interface".into(), json!(node.deploy_interface));
        m.insert("inspect_interface".into(), json!(node.inspect_interface));
        m.insert(
            "management_interface".into(),
            json!(node.management_interface),
        );
        m.insert("power_interface".into(), json!(node.power_interface));
        m.insert("raid_interface".into(), json!(node.raid_interface));
        m.insert("vendor_interface".into(), json!(node.vendor_interface));
    }
    if version.at_least(33) {
        m.insert("storage_interface".into(), json!(node.storage_interface));
    }
    if version.at_least(37) {
        m.insert("traits".into(), json!(node.traits));
    }
    if version.at_least(38) {
        m.insert("rescue_interface".into(), json!(node.rescue_interface));
    }
    if version.at_least(40) {
        m.insert("bios_interface".into(), json!(node.bios_interface));
    }
    if version.at_least(42) {
        m.insert("fault".into(), json!(node.fault));
    }
    if version.at_least(44) {
        m.insert(
            "deploy_step".into(),
            Value::Object(node.deploy_step.clone()),
        );
    }
    if version.at_least(46) {
        m.insert("conductor_group".into(), json!(node.conductor_group));
    }
    if version.at_least(47) {
        m.insert("automated_clean".into(), json!(node.automated_clean));
    }
    if version.at_least(48) {
        m.insert("protected".into(), json!(node.protected));
        m.insert("protected_reason".into(), json!(node.protected_reason));
    }
    if version.at_least(49) {
        m.insert("conductor".into(), json!(conductor));
    }
    Value::Object(m)
}

/// Only `fields` of the node (and its links), for `?fields=`. A field the version does not have
/// is 406 when a later version has it; an unknown one is 400.
pub fn node_fields(
    node: &Node,
    version: ApiVersion,
    base: &str,
    conductor: Option<&str>,
    fields: &[String],
) -> Result<Value, Error> {
    let full = node_detail(node, version, base, conductor);
    let mut m = Map::new();
    for f in fields {
        match full.get(f.as_str()) {
            Some(v) => {
                m.insert(f.clone(), v.clone());
            }
            None if node_detail(node, MAX_VERSION, base, conductor)
                .get(f.as_str())
                .is_some() =>
            {
                return Err(Error::NotAcceptable(format!(
                    "Field {f} is not available in API version {version}."
                )));
            }
            None => {
                return Err(Error::InvalidParameterValue(format!(
                    "Field {f} is not a valid field."
                )));
            }
        }
    }
    m.insert("links".into(), links(base, "nodes", &node.uuid));
    Ok(Value::Object(m))
}

/// The short form of GET /v1/nodes.
pub fn node_summary(node: &Node, version: ApiVersion, base: &str) -> Value {
    let mut m = Map::new();
    m.insert("uuid".into(), json!(node.uuid));
    m.insert("instance_uuid".into(), json!(node.instance_uuid));
    m.insert("maintenance".into(), json!(node.maintenance));
    m.insert("power_state".into(), json!(node.power_state));
    m.insert(
        "provision_state".into(),
        state_value(Some(node.provision_state), version),
    );
    m.insert("links".into(), links(base, "nodes", &node.uuid));
    if version.at_least(5) {
        m.insert("name".into(), json!(node.name));
    }
    Value::Object(m)
}

/// GET /v1/nodes/{id}/states.
pub fn node_states(node: &Node, version: ApiVersion) -> Value {
    let mut m = Map::new();
    m.insert("console_enabled".into(), json!(node.console_enabled));
    m.insert("last_error".into(), json!(node.last_error));
    m.insert("power_state".into(), json!(node.power_state));
    m.insert(
        "provision_state".into(),
        state_value(Some(node.provision_state), version),
    );
    m.insert(
        "provision_updated_at".into(),
        opt_timestamp(&node.provision_updated_at),
    );
    m.insert("target_power_state".into(), json!(node.target_power_state));
    m.insert(
        "target_provision_state".into(),
        state_value(node.target_provision_state, version),
    );
    if version.at_least(12) {
        m.insert("raid_config".into(), json!({}));
        m.insert("target_raid_config".into(), json!({}));
    }
    Value::Object(m)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_are_masked_at_any_depth() {
        let doc = json!({
            "ipmi_password": "hunter2",
            "ipmi_address": "10.0.0.1",
            "nested": {"Auth_Token": "t", "user": "admin"},
        });
        let masked = mask_secrets(doc.as_object().unwrap());
        assert_eq!(masked["ipmi_password"], "******");
        assert_eq!(masked["ipmi_address"], "10.0.0.1");
        assert_eq!(masked["nested"]["Auth_Token"], "******");
        assert_eq!(masked["nested"]["user"], "admin");
        let doc = json!({
            "bmcs": [{"password": "x", "host": "h"}],
            "cmdline": "console=ttyS0 password=hunter2 quiet",
        });
        let masked = mask_secrets(doc.as_object().unwrap());
        assert_eq!(masked["bmcs"][0]["password"], "******");
        assert_eq!(masked["bmcs"][0]["host"], "h");
        assert_eq!(masked["cmdline"], "console=ttyS0 password=****** quiet");
    }

    #[test]
    fn secret_text_edge_cases() {
        for (text, want) in [
            // A word at the very end, with or without a separator, and an empty value.
            ("boot password", "boot password"),
            ("boot password=", "boot password="),
            ("password", "password"),
            ("password=\"\"", "password=\"\""),
            // Quotes are separators before the value and end it after.
            ("password=\"hunter2\" x", "password=\"******\" x"),
            ("{'password': 'hunter2'}", "{'password': '******'}"),
            // Key-like text without a separator is not a key.
            ("passwordless boot", "passwordless boot"),
            // A space alone is a separator too (as it always was here).
            ("the token is here", "the token ****** here"),
            // Case, several keys, the value's ends, a key inside a value.
            ("PassWord=X", "PassWord=******"),
            (
                "a password=x,token=y&secret=z;end",
                "a password=******,token=******&secret=******;end",
            ),
            ("password=token=abc", "password=******"),
            ("my_token: abc def", "my_token: ****** def"),
            // Non-ASCII values and whitespace.
            ("password=пароль next", "password=****** next"),
            ("password=a\u{a0}b", "password=******\u{a0}b"),
            ("пароль password=a", "пароль password=******"),
            ("", ""),
        ] {
            assert_eq!(mask_secret_text(text), want, "{text:?}");
        }
    }

    /// A megabyte of `password=a `: masked right (a quadratic pass would never finish).
    #[test]
    fn secret_text_masking_is_linear() {
        let repeats = (1 << 20) / "password=a ".len() + 1;
        let text = "password=a ".repeat(repeats);
        assert!(text.len() >= 1 << 20);
        assert_eq!(mask_secret_text(&text), "password=****** ".repeat(repeats));
        let doc = json!({ "note": text });
        let masked = mask_secrets(doc.as_object().unwrap());
        assert_eq!(masked["note"].as_str().unwrap().len(), repeats * 16);
    }

    /// The masking as it was before it became one pass (quadratic), kept as the reference.
    fn reference_mask(text: &str) -> String {
        let mut out = String::new();
        let mut rest = text;
        while let Some((start, len)) = SECRET_KEY_PARTS
            .iter()
            .filter_map(|p| rest.to_ascii_lowercase().find(p).map(|i| (i, p.len())))
            .min()
        {
            let after_word = start + len;
            let sep_len = rest[after_word..]
                .chars()
                .take_while(|c| matches!(c, '=' | ':' | ' ' | '"' | '\''))
                .map(char::len_utf8)
                .sum::<usize>();
            out.push_str(&rest[..after_word + sep_len]);
            let value_start = after_word + sep_len;
            let value_len = if sep_len == 0 {
                0
            } else {
                rest[value_start..]
                    .chars()
                    .take_while(|c| {
                        !c.is_whitespace() && !matches!(c, '"' | '\'' | ',' | '&' | ';')
                    })
                    .map(char::len_utf8)
                    .sum::<usize>()
            };
            if value_len > 0 {
                out.push_str(MASK);
            }
            rest = &rest[value_start + value_len..];
        }
        out.push_str(rest);
        out
    }

    #[test]
    fn secret_text_masking_matches_the_reference() {
        use rand::{Rng as _, SeedableRng as _};
        const PIECES: &[&str] = &[
            "password",
            "PASSWD",
            "pswd",
            "Secret",
            "token",
            "passphrase",
            "private_key",
            "priv_key",
            "credential",
            "pass",
            "key",
            "=",
            ":",
            " ",
            "\"",
            "'",
            ",",
            "&",
            ";",
            "a",
            "xyz",
            "\u{a0}",
            "é",
            "\t",
            "==",
            ": ",
        ];
        let mut rng = rand::rngs::StdRng::seed_from_u64(7);
        for _ in 0..20_000 {
            let text: String = (0..rng.random_range(0..12))
                .map(|_| PIECES[rng.random_range(0..PIECES.len())])
                .collect();
            assert_eq!(mask_secret_text(&text), reference_mask(&text), "{text:?}");
        }
    }

    #[test]
    fn fields_follow_the_version() {
        let node = crate::db::models::tests_support::node();
        let old = node_detail(&node, ApiVersion(1), "http://h", None);
        assert!(old.get("name").is_none());
        assert!(old.get("deploy_interface").is_none());
        let new = node_detail(&node, ApiVersion(31), "http://h", None);
        assert_eq!(new["name"], "n1");
        assert_eq!(new["deploy_interface"], "fake");
        assert_eq!(new["target_provision_state"], "active");
        assert_eq!(new["provision_state"], "deploy failed");
    }
}
