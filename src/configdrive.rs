//! Config drives: the ISO image a deploy writes to the node when its `configdrive` is a JSON
//! object rather than a ready image.
//!
//! Ironic (`ironic/conductor/deployments.py` and `ironic/conductor/utils.py`, building the
//! drive from `meta_data`, `network_data`, `user_data` and `vendor_data`) calls openstacksdk's
//! `openstack/baremetal/configdrive.py`: `populate_directory` lays out the files and `pack`
//! makes an ISO labelled `config-2`, gzips it and base64-encodes it, the string Ironic keeps
//! in `instance_info.configdrive`. This module does the same without an ISO tool, with the
//! writer in [`iso9660`].

pub mod iso9660;

use std::io::Write as _;

use base64::Engine as _;

use crate::resource::json::truthy;

/// The metadata versions openstacksdk writes when none are asked for.
const VERSIONS: [&str; 2] = ["2012-08-10", "latest"];

/// The gzipped, base64-encoded ISO 9660 config drive (label `config-2`) for these contents.
///
/// Files, per version `2012-08-10` and `latest` (openstacksdk's `populate_directory`):
/// `openstack/<v>/meta_data.json`, `network_data.json` and `vendor_data2.json` when given
/// and not empty, `user_data` (as is) when given and not empty; openstacksdk tests these by
/// truthiness, so an empty object or empty user data writes no file. JSON is written as
/// Python's `json.dump` does by default (`", "` and `": "` separators, non-ASCII as `\uXXXX`).
pub fn build(
    meta_data: &serde_json::Map<String, serde_json::Value>,
    network_data: Option<&serde_json::Value>,
    user_data: Option<&[u8]>,
    vendor_data: Option<&serde_json::Value>,
) -> String {
    let meta = python_json(&serde_json::Value::Object(meta_data.clone()));
    let network = network_data.filter(|v| truthy(v)).map(python_json);
    let vendor = vendor_data.filter(|v| truthy(v)).map(python_json);
    let user = user_data.filter(|u| !u.is_empty());
    let mut owned: Vec<(String, &[u8])> = Vec::new();
    for v in VERSIONS {
        owned.push((format!("openstack/{v}/meta_data.json"), &meta));
        if let Some(n) = &network {
            owned.push((format!("openstack/{v}/network_data.json"), n));
        }
        if let Some(vd) = &vendor {
            owned.push((format!("openstack/{v}/vendor_data2.json"), vd));
        }
        if let Some(u) = user {
            owned.push((format!("openstack/{v}/user_data"), u));
        }
    }
    let files: Vec<(&str, &[u8])> = owned.iter().map(|(p, d)| (p.as_str(), *d)).collect();
    let iso = iso9660::image("config-2", &files);
    // The fastest level: the image is mostly zeros, which it packs nearly as well (a 60 KiB
    // image: 987 bytes against 672 at the default level) for a sixth of the work.
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    // Writing to a Vec cannot fail.
    let _ = gz.write_all(&iso);
    let gz = gz.finish().unwrap_or_default();
    base64::engine::general_purpose::STANDARD.encode(gz)
}

/// JSON as Python's `json.dump(obj, fp)` writes it with its defaults.
fn python_json(v: &serde_json::Value) -> Vec<u8> {
    let mut out = Vec::new();
    let mut ser = serde_json::Serializer::with_formatter(&mut out, PythonFormatter);
    // Serializing a Value into a Vec cannot fail.
    let _ = serde::Serialize::serialize(v, &mut ser);
    out
}

/// `json.dump`'s default formatting: `", "` between items, `": "` after keys, and
/// `ensure_ascii` (anything outside `' '..='~'` escaped, astral characters as surrogates).
struct PythonFormatter;

impl serde_json::ser::Formatter for PythonFormatter {
    fn begin_array_value<W: ?Sized + std::io::Write>(
        &mut self,
        w: &mut W,
        first: bool,
    ) -> std::io::Result<()> {
        if first { Ok(()) } else { w.write_all(b", ") }
    }

    fn begin_object_key<W: ?Sized + std::io::Write>(
        &mut self,
        w: &mut W,
        first: bool,
    ) -> std::io::Result<()> {
        if first { Ok(()) } else { w.write_all(b", ") }
    }

    fn begin_object_value<W: ?Sized + std::io::Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        w.write_all(b": ")
    }

    fn write_string_fragment<W: ?Sized + std::io::Write>(
        &mut self,
        w: &mut W,
        fragment: &str,
    ) -> std::io::Result<()> {
        for c in fragment.chars() {
            if (' '..='~').contains(&c) {
                w.write_all(&[c as u8])?;
            } else {
                let mut buf = [0u16; 2];
                for u in c.encode_utf16(&mut buf) {
                    write!(w, "\\u{:04x}", u)?;
                }
            }
        }
        Ok(())
    }
}

/// The config drive of `node` from the parts a deploy request gave (API 1.56; `vendor_data`
/// 1.59), as Ironic's `build_configdrive` (`ironic/conductor/configdrive_utils.py`) makes it:
/// `meta_data`'s `uuid` and `name` default to the node's, and `user_data` given as an object or
/// a list is its JSON. The API has checked the parts' types.
pub fn for_node(
    node: &crate::node::Node,
    parts: &serde_json::Map<String, serde_json::Value>,
) -> String {
    use serde_json::Value;
    let mut meta_data = parts
        .get("meta_data")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    meta_data
        .entry("uuid")
        .or_insert_with(|| Value::String(node.uuid.clone()));
    if let Some(name) = &node.name {
        meta_data
            .entry("name")
            .or_insert_with(|| Value::String(name.clone()));
    }
    let user_data = match parts.get("user_data") {
        Some(Value::String(text)) => Some(text.clone().into_bytes()),
        Some(v @ (Value::Object(_) | Value::Array(_))) => Some(v.to_string().into_bytes()),
        _ => None,
    };
    build(
        &meta_data,
        parts.get("network_data"),
        user_data.as_deref(),
        parts.get("vendor_data"),
    )
}

#[cfg(test)]
mod tests {
    use std::io::Read as _;

    use super::*;

    fn unpack(drive: &str) -> Vec<u8> {
        let gz = base64::engine::general_purpose::STANDARD
            .decode(drive)
            .expect("base64");
        let mut iso = Vec::new();
        flate2::read::GzDecoder::new(&gz[..])
            .read_to_end(&mut iso)
            .expect("gzip");
        iso
    }

    fn sample() -> String {
        let meta =
            serde_json::json!({"uuid": "1be26c0b-03f2-4d2e-ae87-c02d7f33c123", "name": "n\u{e9}"});
        let net = serde_json::json!({"links": [], "networks": []});
        let vendor = serde_json::json!({"static": {"k": 1}});
        build(
            meta.as_object().expect("object"),
            Some(&net),
            Some(b"#cloud-config\n"),
            Some(&vendor),
        )
    }

    #[test]
    fn python_style_json() {
        let v = serde_json::json!({"a": [1, 2], "b": "\u{e9}\u{1f600}\u{7f}"});
        assert_eq!(
            String::from_utf8(python_json(&v)).expect("utf8"),
            r#"{"a": [1, 2], "b": "\u00e9\ud83d\ude00\u007f"}"#
        );
    }

    #[test]
    fn empty_parts_write_no_file() {
        let meta = serde_json::Map::new();
        let iso = unpack(&build(&meta, Some(&serde_json::json!({})), Some(b""), None));
        let hay = String::from_utf8_lossy(&iso);
        assert!(hay.contains("META_DATA.JSON;1"));
        assert!(!hay.contains("NETWORK_DATA"));
        assert!(!hay.contains("USER_DATA"));
        assert!(!hay.contains("VENDOR_DATA2"));
    }

    #[test]
    fn drive_is_gzipped_iso() {
        let iso = unpack(&sample());
        assert_eq!(&iso[16 * 2048 + 1..16 * 2048 + 6], b"CD001");
        assert_eq!(&iso[16 * 2048 + 40..16 * 2048 + 48], b"config-2");
    }

    /// The clients venv's python when it has pycdlib (`FERRUM_CLIENTS_VENV`, else the venv
    /// `tests/peers/clients-venv.sh setup` makes once and keeps); `None` (after a loud message)
    /// when it has not, unless `FERRUM_REQUIRE_SERVICES=1`, which makes that a failure.
    pub(super) fn pycdlib_python() -> Option<String> {
        let venv = std::env::var("FERRUM_CLIENTS_VENV").unwrap_or_else(|_| {
            let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/peers/clients-venv.sh");
            std::process::Command::new("bash")
                .args([script, "setup"])
                .output()
                .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
                .unwrap_or_default()
        });
        let python = format!("{venv}/bin/python");
        let have = std::process::Command::new(&python)
            .args(["-c", "import pycdlib"])
            .output()
            .is_ok_and(|o| o.status.success());
        if have {
            return Some(python);
        }
        assert!(
            std::env::var("FERRUM_REQUIRE_SERVICES").as_deref() != Ok("1"),
            "pycdlib is missing from {venv} and FERRUM_REQUIRE_SERVICES=1"
        );
        eprintln!(
            "!!!!! SKIPPED: pycdlib not found in {venv:?} (tests/peers/clients-venv.sh setup makes it) !!!!!"
        );
        None
    }

    /// What `script` prints, run by pycdlib's `python` with the path of a file holding `iso`.
    pub(super) fn run_pycdlib(python: &str, script: &str, iso: &[u8]) -> String {
        let path =
            std::env::temp_dir().join(format!("ferrum-configdrive-{}.iso", uuid::Uuid::new_v4()));
        std::fs::write(&path, iso).expect("write iso");
        let out = std::process::Command::new(python)
            .args(["-c", script])
            .arg(&path)
            .output()
            .expect("run python");
        let _ = std::fs::remove_file(&path);
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "pycdlib failed: {stderr}\n{stdout}");
        stdout
    }

    /// Reads the drive back with pycdlib, an ISO reader independent of this writer.
    #[test]
    fn pycdlib_reads_the_drive() {
        let Some(python) = pycdlib_python() else {
            return;
        };
        let script = r#"
import io, sys, pycdlib
iso = pycdlib.PyCdlib()
iso.open(sys.argv[1])
print("PVD", iso.pvd.volume_identifier.decode().rstrip())
print("JOLIET", iso.joliet_vd.volume_identifier.decode("utf-16-be").rstrip())
for root, dirs, files in iso.walk(joliet_path="/"):
    for f in sorted(files):
        p = root.rstrip("/") + "/" + f
        out = io.BytesIO()
        iso.get_file_from_iso_fp(out, joliet_path=p)
        # Linux drops the ";1" of Joliet names (fs/isofs/joliet.c), as genisoimage writes them.
        print("FILE", p[:-2] if p.endswith(";1") else p, out.getvalue().decode())
for root, dirs, files in iso.walk(iso_path="/"):
    for f in sorted(files):
        print("ISO", root.rstrip("/") + "/" + f)
iso.close()
"#;
        let stdout = run_pycdlib(&python, script, &unpack(&sample()));
        eprintln!("{stdout}");
        assert!(stdout.contains("PVD config-2\n"), "{stdout}");
        assert!(stdout.contains("JOLIET config-2\n"), "{stdout}");
        for v in VERSIONS {
            let p = format!("/openstack/{v}/");
            assert!(
                stdout.contains(&format!(
                    "FILE {p}meta_data.json {{\"uuid\": \"1be26c0b-03f2-4d2e-ae87-c02d7f33c123\", \"name\": \"n\\u00e9\"}}\n"
                )) || stdout.contains(&format!(
                    "FILE {p}meta_data.json {{\"name\": \"n\\u00e9\", \"uuid\": \"1be26c0b-03f2-4d2e-ae87-c02d7f33c123\"}}\n"
                )),
                "{stdout}"
            );
            assert!(
                stdout.contains(&format!(
                    "FILE {p}network_data.json {{\"links\": [], \"networks\": []}}\n"
                )),
                "{stdout}"
            );
            assert!(
                stdout.contains(&format!(
                    "FILE {p}vendor_data2.json {{\"static\": {{\"k\": 1}}}}\n"
                )),
                "{stdout}"
            );
            assert!(
                stdout.contains(&format!("FILE {p}user_data #cloud-config\n")),
                "{stdout}"
            );
            let i = format!("/OPENSTACK/{}/", v.to_uppercase().replace('-', "_"));
            assert!(
                stdout.contains(&format!("ISO {i}META_DATA.JSON;1\n")),
                "{stdout}"
            );
            assert!(
                stdout.contains(&format!("ISO {i}USER_DATA.;1\n")),
                "{stdout}"
            );
        }
    }

    /// A directory whose records span several sectors, and a file of several sectors, read
    /// back by pycdlib (skipped like `pycdlib_reads_the_drive` when pycdlib is missing).
    #[test]
    fn pycdlib_reads_a_large_directory() {
        let Some(python) = pycdlib_python() else {
            return;
        };
        let names: Vec<String> = (0..120)
            .map(|i| format!("d/file_number_{i:03}.txt"))
            .collect();
        let big = vec![b'z'; 3 * 2048 + 5];
        let mut files: Vec<(&str, &[u8])> = names.iter().map(|n| (n.as_str(), &b"x"[..])).collect();
        files.push(("d/big", &big));
        let script = r#"
import io, sys, pycdlib
iso = pycdlib.PyCdlib()
iso.open(sys.argv[1])
for kw in ("joliet_path", "iso_path"):
    n = sum(len(f) for _, _, f in iso.walk(**{kw: "/"}))
    print(kw, n)
out = io.BytesIO()
iso.get_file_from_iso_fp(out, joliet_path="/d/big;1")
print("big", len(out.getvalue()), set(out.getvalue()) == {ord("z")})
out = io.BytesIO()
iso.get_file_from_iso_fp(out, joliet_path="/d/file_number_119.txt;1")
print("last", out.getvalue().decode())
iso.close()
"#;
        let stdout = run_pycdlib(&python, script, &iso9660::image("config-2", &files));
        assert_eq!(
            stdout,
            "joliet_path 121\niso_path 121\nbig 6149 True\nlast x\n"
        );
    }
}
