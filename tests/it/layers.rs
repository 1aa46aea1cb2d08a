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
    &["host_list"],
    &["broker", "error", "schema", "telemetry"],
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
    &["steps"],
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
/// and shows drivers only as data; drivers see a node and hardware, never the database or the
/// state machine (the conductor does both around them).
const NEVER: &[(&str, &str)] = &[
    ("api", "conductor"),
    ("api", "drivers"),
    ("drivers", "db"),
    ("drivers", "states"),
];

/// Arrows against the plan that remain, and what removes each.
const KNOWN: &[(&str, &str, &str)] = &[];

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

/// A file's module path under `src/` (`src/conductor/flows/inspect.rs` → `conductor::flows::inspect`,
/// `src/lib.rs` → the crate root).
fn module_path_of(src: &Path, file: &Path) -> Vec<String> {
    let relative = file.strip_prefix(src).expect("a file under src/");
    let mut path: Vec<String> = relative
        .with_extension("")
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    if path.last().is_some_and(|last| last == "mod") || path == ["lib"] || path == ["main"] {
        path.pop();
    }
    path
}

/// The paths of a `use` tree (or an inline path) starting at `text`: `a::b::{c, d::{self, e}}`
/// gives `a::b::c`, `a::b::d`, `a::b::d::e`. Only the segments matter, not what they import.
fn use_tree_paths(text: &str, prefix: &[String], out: &mut Vec<Vec<String>>) -> usize {
    let mut path = prefix.to_vec();
    let mut at = 0;
    loop {
        let rest = &text[at..];
        let trimmed = rest.trim_start();
        at += rest.len() - trimmed.len();
        if let Some(group) = trimmed.strip_prefix('{') {
            at += 1;
            let mut consumed = 0;
            loop {
                let item = &group[consumed..];
                let skipped = item.len() - item.trim_start().len();
                consumed += skipped;
                if group[consumed..].starts_with('}') {
                    consumed += 1;
                    break;
                }
                consumed += use_tree_paths(&group[consumed..], &path, out);
                let after = &group[consumed..];
                let skipped = after.len() - after.trim_start().len();
                consumed += skipped;
                if group[consumed..].starts_with(',') {
                    consumed += 1;
                } else if group[consumed..].starts_with('}') {
                    consumed += 1;
                    break;
                } else {
                    break;
                }
            }
            return at + consumed;
        }
        let Some(name) = identifier_at(trimmed) else {
            out.push(path);
            return at;
        };
        at += name.len();
        if name != "self" {
            path.push(name.to_owned());
        }
        if text[at..].starts_with("::") {
            at += 2;
        } else {
            out.push(path);
            // Skip an `as alias`.
            return at;
        }
    }
}

/// The file that defines module `path` (or the deepest module of it that has a file).
fn file_of(src: &Path, path: &[String]) -> Option<PathBuf> {
    (0..=path.len()).rev().find_map(|n| {
        let prefix = &path[..n];
        let candidates = if prefix.is_empty() {
            vec![src.join("lib.rs")]
        } else {
            let joined = prefix.join("/");
            vec![
                src.join(format!("{joined}.rs")),
                src.join(joined).join("mod.rs"),
            ]
        };
        candidates.into_iter().find(|c| c.is_file())
    })
}

/// Every arrow between files of `src/`: file A names a path into file B's module. A child's
/// arrow to its own parent module (or the parent's parent) is not counted: a module's files
/// share what their root file declares, as farm-studio reads a house.
fn file_arrows() -> BTreeMap<PathBuf, BTreeSet<PathBuf>> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let mut arrows: BTreeMap<PathBuf, BTreeSet<PathBuf>> = BTreeMap::new();
    for file in &files {
        let module = module_path_of(&src, file);
        let code = code_of(&std::fs::read_to_string(file).expect("read a source file"));
        let mut paths = Vec::new();
        for start in ["crate::", "super::", "self::"] {
            for (at, _) in code.match_indices(start) {
                let before = code[..at].trim_end();
                if before.ends_with("::")
                    || before.ends_with('{')
                    || before.ends_with(',')
                    || before.ends_with(|c: char| c.is_ascii_alphanumeric() || c == '_')
                        && !before.ends_with("use")
                {
                    continue;
                }
                let mut base = match start {
                    "crate::" => Vec::new(),
                    _ => module.clone(),
                };
                let mut rest = &code[at + start.len()..];
                if start == "super::" {
                    base.pop();
                    while let Some(more) = rest.strip_prefix("super::") {
                        base.pop();
                        rest = more;
                    }
                }
                use_tree_paths(rest, &base, &mut paths);
            }
        }
        for path in paths {
            let Some(target) = file_of(&src, &path) else {
                continue;
            };
            let target_module = module_path_of(&src, &target);
            let is_ancestor = module.starts_with(&target_module);
            if target != *file && !is_ancestor {
                arrows.entry(file.clone()).or_default().insert(target);
            }
        }
    }
    arrows
}

/// The files of `arrows` that lie on a circle, each with the arrows from it that close one.
fn files_in_circles(arrows: &BTreeMap<PathBuf, BTreeSet<PathBuf>>) -> Vec<(PathBuf, Vec<PathBuf>)> {
    // Every file reachable from `from`.
    let reaches = |from: &PathBuf| {
        let mut seen = BTreeSet::new();
        let mut todo = vec![from.clone()];
        while let Some(file) = todo.pop() {
            for next in arrows.get(&file).into_iter().flatten() {
                if seen.insert(next.clone()) {
                    todo.push(next.clone());
                }
            }
        }
        seen
    };
    arrows
        .iter()
        .filter(|(file, _)| reaches(file).contains(*file))
        .map(|(file, targets)| {
            let closing = targets
                .iter()
                .filter(|next| reaches(next).contains(file))
                .cloned()
                .collect();
            (file.clone(), closing)
        })
        .collect()
}

#[test]
fn no_files_import_each_other_in_a_circle() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let short = |file: &PathBuf| {
        file.strip_prefix(&src)
            .unwrap_or(file)
            .display()
            .to_string()
    };
    let circles: Vec<String> = files_in_circles(&file_arrows())
        .iter()
        .map(|(file, closing)| {
            let to: Vec<String> = closing.iter().map(short).collect();
            format!("{} -> {}", short(file), to.join(", "))
        })
        .collect();
    assert!(
        circles.is_empty(),
        "files in import circles (each with the arrows that close one):\n{}",
        circles.join("\n")
    );
}

#[test]
fn the_file_arrows_are_read_from_use_trees_and_paths() {
    let mut paths = Vec::new();
    use_tree_paths("a::{b, c::{self, d}}, e;", &["x".to_owned()], &mut paths);
    let joined: Vec<String> = paths.iter().map(|p| p.join("::")).collect();
    assert_eq!(joined, ["x::a::b", "x::a::c", "x::a::c::d"]);
    // A circle of three is found, and a file that only leads into it is not on it.
    let graph: BTreeMap<PathBuf, BTreeSet<PathBuf>> =
        [("a", "b"), ("b", "c"), ("c", "a"), ("d", "a")]
            .into_iter()
            .map(|(from, to)| (PathBuf::from(from), BTreeSet::from([PathBuf::from(to)])))
            .collect();
    let on_circle: Vec<PathBuf> = files_in_circles(&graph)
        .into_iter()
        .map(|(f, _)| f)
        .collect();
    assert_eq!(on_circle, ["a", "b", "c"].map(PathBuf::from));
    // The circle this test would find: flows/inspect.rs's parent module imports it, and a
    // sibling of that parent would import the parent back.
    let arrows = file_arrows();
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let flows = src.join("conductor/flows.rs");
    assert!(
        arrows[&flows].contains(&src.join("conductor/flows/deploy.rs")),
        "the parent's arrow to its child is read: {:?}",
        arrows[&flows]
    );
    assert!(
        arrows[&src.join("conductor/dispatch.rs")]
            .contains(&src.join("conductor/flows/inspect.rs")),
        "an inline path (super::flows::inspect::continue_inspection) is read"
    );
}
