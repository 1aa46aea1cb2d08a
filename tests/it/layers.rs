//! The floor plan, held: each top-level module of `src/` lives on a floor and imports only from
//! the floors below it, so the modules form no circle. Read from the source text: every
//! `crate::<module>` path (grouped `use crate::{...}` included) outside comments and test
//! modules is an arrow from the file's top-level module to `<module>`.
//!
//! Arrows that still run against the plan are listed in [`KNOWN`], each with what removes it.
//! The test fails on an arrow that is neither allowed nor known, and on a known one that is gone
//! (strike it from the list), so the list only shrinks.

use std::{
    collections::{BTreeMap, BTreeSet},
    path::{Path, PathBuf},
};

/// The floors, lowest first. A module may import the modules of lower floors only.
const FLOORS: &[&[&str]] = &[
    &["error", "schema", "telemetry"],
    &["states", "resource"],
    &["node"],
    &["patch"],
    &[
        "metrics",
        "ports",
        "volume",
        "configdrive",
        "chassis",
        "allocation",
        "inspection_rule",
        "notifications",
    ],
    &["deploy_template"],
    &["runbook"],
    &["db"],
    &["config"],
    &["drivers", "http_server"],
    &["rpc"],
    &["conductor"],
    &["api"],
    &["service"],
];

/// Arrows the floors allow that the plan still forbids: the API reaches conductors only by RPC
/// and shows drivers only as data.
const NEVER: &[(&str, &str)] = &[("api", "conductor"), ("api", "drivers")];

/// Arrows against the plan that remain, and what removes each.
const KNOWN: &[(&str, &str, &str)] = &[
    (
        "api",
        "drivers",
        "the hardware types' catalogue (interfaces, properties, RAID's logical disk properties) as data below api",
    ),
    (
        "deploy_template",
        "drivers",
        "the step types of drivers, deploy templates and runbooks in one room below both",
    ),
];

fn floor_of(module: &str) -> Option<usize> {
    FLOORS.iter().position(|floor| floor.contains(&module))
}

/// The top-level module a file of `src/` belongs to (`src/api/nodes/show.rs` → `api`).
fn module_of(src: &Path, file: &Path) -> String {
    let relative = file.strip_prefix(src).expect("a file under src/");
    let first = relative
        .components()
        .next()
        .expect("a path")
        .as_os_str()
        .to_string_lossy()
        .into_owned();
    first.trim_end_matches(".rs").to_owned()
}

fn rust_files(dir: &Path, found: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("read src/") {
        let path = entry.expect("a directory entry").path();
        if path.is_dir() {
            rust_files(&path, found);
        } else if path.extension().is_some_and(|e| e == "rs") {
            found.push(path);
        }
    }
}

/// The code of a file without its comments and without its test module (tests may reach
/// anywhere).
fn code_of(text: &str) -> String {
    let text = text
        .find("#[cfg(test)]\nmod tests")
        .map_or(text, |at| &text[..at]);
    text.lines()
        .map(|line| line.find("//").map_or(line, |at| &line[..at]))
        .collect::<Vec<_>>()
        .join("\n")
}

fn identifier_at(text: &str) -> Option<&str> {
    let end = text
        .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .unwrap_or(text.len());
    (end > 0).then(|| &text[..end])
}

/// The top-level modules `code` names through `crate::`.
fn imports_of(code: &str) -> BTreeSet<String> {
    let mut found = BTreeSet::new();
    for (at, _) in code.match_indices("crate::") {
        let rest = &code[at + "crate::".len()..];
        if let Some(group) = rest.strip_prefix('{') {
            // `crate::{a, b::{c, d}, e}`: the first name of each item at the group's own depth.
            let mut depth = 0usize;
            let mut item_start = true;
            for (i, c) in group.char_indices() {
                match c {
                    '{' => depth += 1,
                    '}' if depth == 0 => break,
                    '}' => depth -= 1,
                    ',' if depth == 0 => item_start = true,
                    c if item_start && !c.is_whitespace() => {
                        item_start = false;
                        if depth == 0
                            && let Some(name) = identifier_at(&group[i..])
                            && name != "self"
                        {
                            found.insert(name.to_owned());
                        }
                    }
                    _ => {}
                }
            }
        } else if let Some(name) = identifier_at(rest) {
            found.insert(name.to_owned());
        }
    }
    found
}

/// Every arrow between top-level modules, with a file that draws it.
fn arrows() -> BTreeMap<(String, String), PathBuf> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let mut arrows = BTreeMap::new();
    for file in files {
        let from = module_of(&src, &file);
        if from == "main" || from == "lib" {
            continue;
        }
        let text = std::fs::read_to_string(&file).expect("read a source file");
        for to in imports_of(&code_of(&text)) {
            if to != from {
                arrows
                    .entry((from.clone(), to))
                    .or_insert_with(|| file.clone());
            }
        }
    }
    arrows
}

#[test]
fn every_module_imports_only_from_the_floors_below_it() {
    let arrows = arrows();
    let mut wrong = Vec::new();
    for ((from, to), file) in &arrows {
        let (Some(from_floor), Some(to_floor)) = (floor_of(from), floor_of(to)) else {
            wrong.push(format!(
                "{from} -> {to} ({}): a module with no floor; give it one in FLOORS",
                file.display()
            ));
            continue;
        };
        let against_plan = to_floor >= from_floor || NEVER.contains(&(from.as_str(), to.as_str()));
        let known = KNOWN.iter().any(|(f, t, _)| f == from && t == to);
        if against_plan && !known {
            wrong.push(format!(
                "{from} (floor {from_floor}) -> {to} (floor {to_floor}), first in {}",
                file.display()
            ));
        }
    }
    for (from, to, _) in KNOWN {
        if !arrows.contains_key(&((*from).to_owned(), (*to).to_owned())) {
            wrong.push(format!("{from} -> {to} is gone: strike it from KNOWN"));
        }
    }
    assert!(
        wrong.is_empty(),
        "arrows against the floor plan:\n{}",
        wrong.join("\n")
    );
}

#[test]
fn the_floors_name_each_module_once_and_every_module_has_one() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let lib = std::fs::read_to_string(src.join("lib.rs")).expect("read lib.rs");
    let declared: BTreeSet<&str> = lib
        .lines()
        .filter_map(|l| l.strip_prefix("pub mod ")?.strip_suffix(';'))
        .collect();
    let floored: Vec<&str> = FLOORS.iter().flat_map(|f| f.iter().copied()).collect();
    let unique: BTreeSet<&str> = floored.iter().copied().collect();
    assert_eq!(unique.len(), floored.len(), "a module on two floors");
    assert_eq!(unique, declared, "FLOORS and lib.rs's modules differ");
}

#[test]
fn the_reader_sees_grouped_and_plain_paths_and_skips_comments_and_tests() {
    let code = code_of(
        "use crate::{a, b::{c, d::{e}}, self};\n\
         fn f() { crate::g::h(); } // crate::comment\n\
         #[cfg(test)]\nmod tests { use crate::hidden; }",
    );
    let found: Vec<String> = imports_of(&code).into_iter().collect();
    assert_eq!(found, ["a", "b", "g"]);
}
