//! Secrets in a node's documents, masked (`******`) wherever a node is shown: by key name at
//! any depth, and as `password=...`-like text inside strings.

use serde_json::Value;

use super::JsonObject;

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
        .map(|(k, v)| (k.clone(), mask_entry(k, v)))
        .collect()
}

/// The value of `key` as shown: `******` when the key names a secret, else masked within.
fn mask_entry(key: &str, v: &Value) -> Value {
    let key = key.as_bytes();
    if (0..key.len()).any(|at| secret_word_at(key, at).is_some()) {
        Value::String(MASK.to_owned())
    } else {
        mask_value(v)
    }
}

fn mask_value(v: &Value) -> Value {
    match v {
        Value::Object(inner) => Value::Object(mask_secrets(inner)),
        Value::Array(items) => Value::Array(items.iter().map(mask_value).collect()),
        Value::String(s) => Value::String(mask_secret_text(s)),
        other => other.clone(),
    }
}

/// For each byte a secret word can start with (either case), the second letters that can
/// follow it (bit `c - b'a'` for lowercase `c`): a fast "no word starts here" test, which
/// leaves one byte in a hundred of base64 text (a config drive) to compare with the words.
const SECRET_SECOND_LETTERS: [u32; 256] = {
    let mut table = [0u32; 256];
    let mut k = 0;
    while k < SECRET_KEY_PARTS.len() {
        let word = SECRET_KEY_PARTS[k].as_bytes();
        let second = 1 << (word[1] - b'a');
        table[word[0].to_ascii_lowercase() as usize] |= second;
        table[word[0].to_ascii_uppercase() as usize] |= second;
        k += 1;
    }
    table
};

/// The length of the secret word starting at byte `at` of `text` (ASCII case-insensitive), the
/// shortest if several do.
fn secret_word_at(text: &[u8], at: usize) -> Option<usize> {
    let seconds = SECRET_SECOND_LETTERS[usize::from(text[at])];
    let second = text.get(at + 1)?.to_ascii_lowercase();
    if seconds == 0 || !second.is_ascii_lowercase() || seconds & (1 << (second - b'a')) == 0 {
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

/// `instance_info` as shown: its secrets masked, and its config drive and image URL (which can
/// hold credentials) hidden whole, without reading them (a config drive is kilobytes).
pub fn masked_instance_info(doc: &JsonObject) -> JsonObject {
    doc.iter()
        .map(|(k, v)| {
            let hidden = matches!(k.as_str(), "configdrive" | "image_url")
                && !v.is_null()
                && v.as_str() != Some("");
            let shown = if hidden {
                Value::String(MASK.to_owned())
            } else {
                mask_entry(k, v)
            };
            (k.clone(), shown)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

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

    #[test]
    fn keys_naming_secrets_are_masked_in_any_case_and_place() {
        for word in SECRET_KEY_PARTS {
            let key = format!("x_{}_y", word.to_ascii_uppercase());
            let doc = json!({ key.clone(): "v", "plain": "v" });
            let masked = mask_secrets(doc.as_object().unwrap());
            assert_eq!(masked[&key], "******", "{key}");
            assert_eq!(masked["plain"], "v");
        }
    }

    #[test]
    fn instance_info_hides_its_config_drive_and_image_url() {
        let doc = json!({
            "configdrive": "H4sIAAAAAAAA/password=abc",
            "image_url": "http://user:pw@host/image",
            "image_checksum": "abc",
            "kernel_append": "token=t",
            "empty": "",
        });
        let masked = masked_instance_info(doc.as_object().unwrap());
        assert_eq!(masked["configdrive"], "******");
        assert_eq!(masked["image_url"], "******");
        assert_eq!(masked["image_checksum"], "abc");
        assert_eq!(masked["kernel_append"], "token=******");
        assert_eq!(masked["empty"], "");
        let doc = json!({"configdrive": null, "image_url": ""});
        let masked = masked_instance_info(doc.as_object().unwrap());
        assert_eq!(masked["configdrive"], Value::Null);
        assert_eq!(masked["image_url"], "");
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
            "Encrypted_Key",
            "auth_key",
            "FERNETKEY",
            "sslkey",
            "cephxKey",
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
}
