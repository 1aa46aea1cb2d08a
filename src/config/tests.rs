use std::{collections::HashMap, ffi::OsString, path::Path, time::Duration};

use clap::Args as _;

use super::*;

/// The arguments of `ferrum <flags>` with the environment `env`.
fn args(flags: &[&str], env: &[(&str, &str)]) -> Result<ConfigArgs, clap::Error> {
    let cmd = ConfigArgs::augment_args(clap::Command::new("ferrum"));
    let matches =
        cmd.try_get_matches_from(std::iter::once("ferrum").chain(flags.iter().copied()))?;
    let env: HashMap<&str, &str> = env.iter().copied().collect();
    ConfigArgs::gather(&matches, &|name| env.get(name).map(OsString::from))
}

fn temp_file(name: &str, text: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("ferrum-config-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("a temporary directory");
    let path = dir.join("ferrum.toml");
    std::fs::write(&path, text).expect("a temporary file");
    path
}

#[test]
fn file_then_variables_then_flags() {
    let path = temp_file(
        "order",
        "[conductor]\nhost = \"file\"\nworkers = 5\nlock_retry_interval = 0.25\n\
         [api]\nbind = \"127.0.0.1:7000\"\n",
    );
    let path = path.to_str().expect("a UTF-8 path");
    let args = args(
        &["--conductor-host", "flag"],
        &[
            ("FERRUM_CONFIG", path),
            ("FERRUM_CONDUCTOR_HOST", "variable"),
            ("FERRUM_CONDUCTOR_WORKERS", "7"),
        ],
    )
    .expect("good arguments");
    let c = Config::load(&args).expect("a good config");
    assert_eq!(c.conductor.host, "flag");
    assert_eq!(c.conductor.workers, 7);
    assert_eq!(c.conductor.lock_retry_interval, Duration::from_millis(250));
    assert_eq!(c.api.bind.port(), 7000);
    // Untouched: the defaults.
    assert_eq!(c.conductor.lock_retry_attempts, 3);
    assert_eq!(c.api.header_read_timeout, Duration::from_secs(10));
}

#[test]
fn defaults_are_declared_once() {
    let c = Config::default();
    assert_eq!(c.conductor.workers, 300);
    assert_eq!(c.database.url, "sqlite://ferrum.sqlite");
    assert_eq!(c.api.tls_minimum_version, TlsVersion::V1_3);
    assert_eq!(c.conductor.inspection_hooks, INSPECTION_HOOKS);
    c.validate().expect("the defaults are good");
    let default = |name: &str| (Setting::named(name).expect("a setting").default)();
    assert_eq!(default("conductor.workers").as_deref(), Some("300"));
    assert_eq!(default("api.bind").as_deref(), Some("\"127.0.0.1:6385\""));
    assert_eq!(default("api.cert_file"), None);

    // Names, variables and flags are each one setting's; a flag is its variable's name.
    let mut seen = std::collections::HashSet::new();
    for s in SETTINGS {
        assert!(seen.insert(s.name), "{} twice", s.name);
        assert!(!s.help.trim().is_empty(), "{} has no help", s.name);
        if let (Some(env), Some(flag)) = (s.env, s.flag) {
            assert!(seen.insert(env), "{env} twice");
            let from_env = env["FERRUM_".len()..]
                .to_ascii_lowercase()
                .replace('_', "-");
            assert_eq!(flag, from_env, "{}", s.name);
        }
    }
}

#[test]
fn a_failing_check_names_the_setting_or_where_it_came_from() {
    let path = temp_file("check", "[conductor]\nworkers = 0\n");
    let err = Config::load(&ConfigArgs {
        config: Some(path),
        ..ConfigArgs::default()
    })
    .expect_err("0 workers")
    .to_string();
    assert_eq!(
        err,
        "bad configuration value conductor.workers: must be at least 1"
    );
    let err = args(&[], &[("FERRUM_CONDUCTOR_WORKERS", "0")])
        .expect_err("0 workers")
        .to_string();
    assert!(
        err.contains("invalid value '0' for the environment variable FERRUM_CONDUCTOR_WORKERS: must be at least 1"),
        "{err}"
    );
    let err = args(&["--conductor-workers", "many"], &[])
        .expect_err("many workers")
        .to_string();
    assert!(err.contains("--conductor-workers"), "{err}");
    // A bad variable a flag overrides is not read.
    args(
        &["--conductor-workers", "8"],
        &[("FERRUM_CONDUCTOR_WORKERS", "many")],
    )
    .expect("the flag wins");

    let load = |flags: &[&str]| {
        Config::load(&args(flags, &[]).expect("good arguments"))
            .expect_err("a bad config")
            .to_string()
    };
    let err = load(&["--enable-ssl-api", "true", "--api-cert-file", "/x.crt"]);
    assert!(err.contains("api.enable_ssl_api"), "{err}");
    let err = load(&["--heartbeat-timeout", "5"]);
    assert!(err.contains("conductor.heartbeat_timeout"), "{err}");
    let err = args(&["--database-url", "postgres://x"], &[])
        .expect_err("no postgres")
        .to_string();
    assert!(err.contains("expected sqlite://"), "{err}");
    // A refused URL's password is not repeated, whether it came by flag or variable.
    let bad = "amqp://ferrum:s3cret@broker:notaport/";
    let err = args(&["--transport-url", bad], &[])
        .expect_err("a bad port")
        .to_string();
    assert!(err.contains("--transport-url"), "{err}");
    // A host list that cannot be read shows nothing but its scheme.
    assert!(err.contains("'amqp://***'"), "{err}");
    assert!(!err.contains("s3cret"), "{err}");
    let err = args(&[], &[("FERRUM_TRANSPORT_URL", bad)])
        .expect_err("a bad port")
        .to_string();
    assert!(err.contains("FERRUM_TRANSPORT_URL"), "{err}");
    assert!(!err.contains("s3cret"), "{err}");
}

#[test]
fn the_file_is_strict() {
    let load = |text: &str| {
        Config::load(&ConfigArgs {
            config: Some(temp_file("strict", text)),
            ..ConfigArgs::default()
        })
        .expect_err("a bad file")
        .to_string()
    };
    let err = load("[conductor]\nworkerz = 3\n");
    assert!(
        err.contains("unknown setting conductor.workerz; did you mean conductor.workers?"),
        "{err}"
    );
    let err = load("[conductr]\nworkers = 3\n");
    assert!(err.contains("did you mean [conductor]?"), "{err}");
    let err = load("[conductor]\nworkers = \"many\"\n");
    assert!(
        err.contains("conductor.workers: expected a whole number"),
        "{err}"
    );
    let err = load("[api]\nbind = \"nowhere\"\n");
    assert!(
        err.contains("api.bind: 'nowhere' is not host:port"),
        "{err}"
    );
    let err = load("[conductor\n");
    assert!(err.contains("bad config file"), "{err}");
    let config = Config::from_toml("[api]\nbind = \"localhost:7001\"\n").expect("a good file");
    assert_eq!(config.api.bind.port(), 7001);
}

#[test]
fn each_subcommand_lists_the_settings_it_reads() {
    let help = |process: Process| {
        let cmd = ConfigArgs::augment_args(clap::Command::new(process.subcommand()));
        hide_unused(cmd, process).render_long_help().to_string()
    };
    let db_sync = help(Process::DbSync);
    assert!(db_sync.contains("--database-url"), "{db_sync}");
    assert!(db_sync.contains("--config"), "{db_sync}");
    assert!(!db_sync.contains("--api-bind"), "{db_sync}");
    assert!(!db_sync.contains("--conductor-workers"), "{db_sync}");
    let api = help(Process::Api);
    assert!(api.contains("--api-bind"), "{api}");
    assert!(api.contains("FERRUM_API_BIND"), "{api}");
    assert!(api.contains("[default: \"127.0.0.1:6385\"]"), "{api}");
    assert!(!api.contains("--conductor-workers"), "{api}");
    let conductor = help(Process::Conductor);
    assert!(
        conductor.contains("--conductor-metrics-bind"),
        "{conductor}"
    );
    assert!(!conductor.contains("--api-bind"), "{conductor}");
    let all_in_one = help(Process::AllInOne);
    assert!(all_in_one.contains("--api-bind"), "{all_in_one}");
    assert!(all_in_one.contains("--conductor-workers"), "{all_in_one}");
    assert!(
        !all_in_one.contains("--conductor-metrics-bind"),
        "{all_in_one}"
    );
    // Hidden, a flag is still taken, as before.
    let cmd = hide_unused(
        ConfigArgs::augment_args(clap::Command::new("db-sync")),
        Process::DbSync,
    );
    cmd.try_get_matches_from(["db-sync", "--api-bind", "127.0.0.1:1"])
        .expect("an unused flag is accepted");
}

#[test]
fn an_unknown_variable_is_warned_about() {
    let names = [
        "FERRUM_DATABSE_URL",
        "FERRUM_DATABASE_URL",
        "FERRUM_CONFIG",
        "FERRUM_LOG_JSON",
        "PATH",
        "FERRUM_SOMETHING_ELSE_ENTIRELY_UNHEARD_OF",
    ];
    let warnings = unknown_variables(names.map(str::to_owned));
    assert_eq!(
        warnings,
        [
            "FERRUM_DATABSE_URL is not a Ferrum setting; did you mean FERRUM_DATABASE_URL?",
            "FERRUM_SOMETHING_ELSE_ENTIRELY_UNHEARD_OF is not a Ferrum setting",
        ]
    );
}

/// Every `FERRUM_*` variable the code, tests, CI and docs name is a setting's, or one of
/// `OTHER_VARIABLES` (else the processes the tests start would warn about it).
#[test]
fn every_variable_named_in_the_repository_is_known() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let pattern = regex::Regex::new(r"FERRUM_[A-Z0-9_]*[A-Z0-9]").expect("a regex");
    let mut files = vec![
        root.join("README.md"),
        root.join("ferrum.toml"),
        root.join("docker-compose.yml"),
        root.join(".ci/run"),
    ];
    let mut dirs = vec![root.join("src"), root.join("tests")];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).expect("a directory").flatten() {
            let path = entry.path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.ends_with("config/tests.rs") {
                // This file's unknown names are on purpose.
            } else if path.extension().is_some_and(|e| e == "rs") {
                files.push(path);
            }
        }
    }
    let mut unknown = std::collections::BTreeSet::new();
    for file in files {
        let Ok(text) = std::fs::read_to_string(&file) else {
            continue;
        };
        for m in pattern.find_iter(&text) {
            // `FERRUM_ENABLED_<KIND>_INTERFACES` and the like name a family.
            if text[m.end()..].starts_with(['<', '_', '{']) {
                continue;
            }
            let name = m.as_str();
            if !unknown_variables([name.to_owned()]).is_empty() {
                unknown.insert(format!("{name} ({})", file.display()));
            }
        }
    }
    assert!(
        unknown.is_empty(),
        "not settings nor OTHER_VARIABLES: {unknown:#?}"
    );
}

/// The name of one of a family of settings, one per interface kind, as the docs write the
/// family: `conductor.enabled_<kind>_interfaces`.
fn family(name: &str) -> String {
    let kind = regex::Regex::new(
        r"_(bios|boot|console|deploy|firmware|inspect|management|network|power|raid|rescue|storage|vendor)_",
    )
    .expect("a regex");
    kind.replace(name, "_<kind>_").into_owned()
}

/// Whether `text` names the variable `env`, or its family (`FERRUM_ENABLED_<KIND>_INTERFACES`).
fn mentions_variable(text: &str, env: &str) -> bool {
    let family = family(&env.to_ascii_lowercase()).to_ascii_uppercase();
    text.contains(env) || text.contains(&family)
}

/// `ferrum.toml` has every setting (`# key = value` in its section, its variable named), and
/// the values it shows are good. What to paste for a missing one is printed.
#[test]
fn the_sample_file_documents_every_setting_and_loads() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("ferrum.toml");
    let sample = std::fs::read_to_string(&path).expect("ferrum.toml");
    // As shipped (every setting commented out: the defaults).
    Config::from_file(&path)
        .expect("ferrum.toml loads")
        .validate()
        .expect("and is good");

    let mut missing = Vec::new();
    for s in SETTINGS {
        let header = format!("[{}]\n", s.section);
        let body = sample
            .split_once(&header)
            .map(|(_, rest)| rest.split("\n[").next().unwrap_or_default())
            .unwrap_or_default();
        let documented = body
            .lines()
            .any(|l| l.starts_with(&format!("# {} = ", s.key)));
        let variable_named = s.env.is_none_or(|env| mentions_variable(body, env));
        if !(documented && variable_named) {
            let help = s.help.split_whitespace().collect::<Vec<_>>().join(" ");
            let default = (s.default)().unwrap_or_else(|| "...".to_owned());
            let env = s.env.map(|e| format!(" {e}")).unwrap_or_default();
            missing.push(format!(
                "[{}]\n# {help}{env}\n# {} = {default}",
                s.section, s.key
            ));
        }
    }
    assert!(
        missing.is_empty(),
        "ferrum.toml lacks these settings; paste:\n\n{}\n",
        missing.join("\n")
    );

    // Every sample value is of the right type and valid together.
    let setting = regex::Regex::new(r"^# ([a-z_]+) = ").expect("a regex");
    let uncommented: String = sample
        .lines()
        .map(|l| if setting.is_match(l) { &l[2..] } else { l })
        .collect::<Vec<_>>()
        .join("\n");
    let config = Config::from_toml(&uncommented).expect("the sample values load");
    config.validate().expect("the sample values are good");
    assert_eq!(config.conductor.host, "conductor-1");
    assert_eq!(config.api.tls_minimum_version, TlsVersion::V1_3);
}

/// README's settings table has every setting, with its variable and flag. A row's setting may be
/// a family (`conductor.enabled_<kind>_interfaces`). What to paste for a missing one is printed.
#[test]
fn the_readme_table_documents_every_setting() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("README.md");
    let readme = std::fs::read_to_string(&path).expect("README.md");
    let section = readme
        .split_once("## Configuration\n")
        .map(|(_, rest)| rest.split("\n## ").next().unwrap_or_default())
        .expect("README has ## Configuration");
    let rows: Vec<&str> = section.lines().filter(|l| l.starts_with("| ")).collect();
    let mut missing = Vec::new();
    for s in SETTINGS {
        let name = format!("`{}`", s.name);
        let family_name = format!("`{}`", family(s.name));
        let found = rows.iter().any(|row| {
            let named = row.contains(&name) || row.contains(&family_name);
            let variable = match s.env {
                Some(env) => mentions_variable(row, env),
                None => row.contains("(file only)"),
            };
            named && variable
        });
        if !found {
            let help = s.help.split_whitespace().collect::<Vec<_>>().join(" ");
            let from = match (s.env, s.flag) {
                (Some(env), Some(flag)) => format!("`{env}` / `--{flag}`"),
                _ => "(file only)".to_owned(),
            };
            let default = (s.default)().map_or_else(|| "unset".to_owned(), |d| format!("`{d}`"));
            missing.push(format!("| {help} | `{}` | {from} | {default} |", s.name));
        }
    }
    assert!(
        missing.is_empty(),
        "README's settings table lacks these; paste:\n\n{}\n",
        missing.join("\n")
    );
}
