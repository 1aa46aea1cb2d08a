//! A real Keystone as a test peer, through the repository's script (`tests/peers/keystone.sh`,
//! see `tests/peers/README.md`): keystone from PyPI on SQLite under gunicorn, each
//! [`PrivateKeystone`] on a free port of its own with its own copy of a bootstrapped template,
//! stopped by its PID when dropped. Where it cannot be had the tests say so loudly and return,
//! or fail under `FERRUM_REQUIRE_SERVICES=1`.

use std::{path::PathBuf, process::Command, sync::OnceLock};

use serde_json::{Value, json};

use super::{
    cluster::free_port,
    services::{not_run, peer_script, random_suffix},
};

/// The bootstrap administrator's password (`keystone.sh`).
pub const ADMIN_PASSWORD: &str = "admin-secret";

/// The script, once its `setup` has made the venv and template (asked once per test process),
/// or None (announced).
fn prepared() -> Option<PathBuf> {
    static PREPARED: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    static ANNOUNCED: OnceLock<()> = OnceLock::new();
    let prepared = PREPARED.get_or_init(|| {
        let script = peer_script("keystone.sh");
        let out = Command::new("bash")
            .arg(&script)
            .arg("setup")
            .output()
            .map_err(|e| format!("cannot run {}: {e}", script.display()))?;
        if !out.status.success() {
            return Err(format!(
                "`{} setup` failed: {}",
                script.display(),
                String::from_utf8_lossy(&out.stderr).trim()
            ));
        }
        Ok(script)
    });
    match prepared {
        Ok(script) => Some(script.clone()),
        Err(problem) => {
            not_run(
                &format!("{problem}; the Keystone suite was NOT run."),
                &ANNOUNCED,
            );
            None
        }
    }
}

/// A Keystone on 127.0.0.1 of its own.
pub struct PrivateKeystone {
    pub url: String,
    script: PathBuf,
    dir: PathBuf,
    http: reqwest::Client,
    /// The admin's token for the calls that manage Keystone, got once.
    manager: tokio::sync::OnceCell<String>,
    /// Held while it runs: see [`ONE_GALERA`](super::clusters::ONE_GALERA).
    _quiet: tokio::sync::MutexGuard<'static, ()>,
}

/// A user made for a test, with its password.
pub struct User {
    pub id: String,
    pub name: String,
    pub password: String,
}

impl PrivateKeystone {
    /// Starts one, or None (announced) when Keystone cannot be had.
    pub async fn start() -> Option<PrivateKeystone> {
        let script = prepared()?;
        let quiet = super::clusters::ONE_GALERA.lock().await;
        let dir = std::env::temp_dir().join(format!("ferrum-keystone-{}", random_suffix()));
        let port = free_port();
        let started = tokio::process::Command::new("bash")
            .arg(&script)
            .arg("up")
            .arg(&dir)
            .arg(port.to_string())
            .output()
            .await
            .expect("run keystone.sh up");
        assert!(
            started.status.success(),
            "keystone.sh up: {}",
            String::from_utf8_lossy(&started.stderr)
        );
        Some(PrivateKeystone {
            url: format!("http://127.0.0.1:{port}"),
            script,
            dir,
            http: reqwest::Client::new(),
            manager: tokio::sync::OnceCell::new(),
            _quiet: quiet,
        })
    }

    /// Kills it now (SIGKILL to its process group), as when Keystone's host dies.
    pub fn kill(&self) {
        if let Ok(pid) = std::fs::read_to_string(self.dir.join("pid")) {
            let _ = Command::new("kill")
                .args(["-KILL", "--", &format!("-{}", pid.trim())])
                .status();
        }
    }

    /// Stops it by its PID (`keystone.sh down`).
    fn stop(&self) {
        let _ = Command::new("bash")
            .arg(&self.script)
            .arg("down")
            .arg(&self.dir)
            .status();
    }

    /// A token for `user` with `password`, scoped to the system (`Some("system")`), to a
    /// project by name, or unscoped.
    pub async fn token(&self, user: &str, password: &str, scope: Option<&str>) -> String {
        let scope = match scope {
            None => Value::Null,
            Some("system") => json!({"system": {"all": true}}),
            Some(project) => json!({"project": {"name": project, "domain": {"id": "default"}}}),
        };
        let mut auth = json!({"identity": {"methods": ["password"], "password": {"user": {
            "name": user, "domain": {"id": "default"}, "password": password}}}});
        if !scope.is_null() {
            auth["scope"] = scope;
        }
        let answer = self
            .http
            .post(format!("{}/v3/auth/tokens?nocatalog", self.url))
            .json(&json!({ "auth": auth }))
            .send()
            .await
            .expect("Keystone answers");
        assert_eq!(
            answer.status(),
            reqwest::StatusCode::CREATED,
            "token for {user}: {}",
            answer.text().await.unwrap_or_default()
        );
        answer.headers()["x-subject-token"]
            .to_str()
            .expect("a token")
            .to_owned()
    }

    /// A new system-scoped token of the bootstrap administrator.
    pub async fn admin_token(&self) -> String {
        self.token("admin", ADMIN_PASSWORD, Some("system")).await
    }

    /// The administrator's token the managing calls use (never one a test revokes).
    async fn manager(&self) -> String {
        self.manager
            .get_or_init(|| self.admin_token())
            .await
            .clone()
    }

    /// `POST /v3/<path>` with the admin's token; the answer's body.
    async fn create(&self, path: &str, body: Value) -> Value {
        let admin = self.manager().await;
        let answer = self
            .http
            .post(format!("{}/v3/{path}", self.url))
            .header("X-Auth-Token", admin)
            .json(&body)
            .send()
            .await
            .expect("Keystone answers");
        let status = answer.status();
        let body: Value = answer.json().await.unwrap_or(Value::Null);
        assert!(status.is_success(), "POST {path}: {status} {body}");
        body
    }

    /// `PUT /v3/<path>` with the admin's token (a role assignment).
    async fn put(&self, path: &str) {
        let admin = self.manager().await;
        let answer = self
            .http
            .put(format!("{}/v3/{path}", self.url))
            .header("X-Auth-Token", admin)
            .send()
            .await
            .expect("Keystone answers");
        assert!(
            answer.status().is_success(),
            "PUT {path}: {}",
            answer.status()
        );
    }

    /// The id of role `name`.
    async fn role_id(&self, name: &str) -> String {
        let admin = self.manager().await;
        let roles: Value = self
            .http
            .get(format!("{}/v3/roles?name={name}", self.url))
            .header("X-Auth-Token", admin)
            .send()
            .await
            .expect("Keystone answers")
            .json()
            .await
            .expect("JSON");
        roles["roles"][0]["id"]
            .as_str()
            .unwrap_or_else(|| panic!("no role {name}: {roles}"))
            .to_owned()
    }

    /// A project named `name`; its id.
    pub async fn project(&self, name: &str) -> String {
        let body = self
            .create(
                "projects",
                json!({"project": {"name": name, "domain_id": "default"}}),
            )
            .await;
        body["project"]["id"].as_str().expect("id").to_owned()
    }

    /// A new user named `name`.
    pub async fn user(&self, name: &str) -> User {
        let password = format!("{name}-password");
        let body = self
            .create(
                "users",
                json!({"user": {"name": name, "domain_id": "default", "password": password}}),
            )
            .await;
        User {
            id: body["user"]["id"].as_str().expect("id").to_owned(),
            name: name.to_owned(),
            password,
        }
    }

    /// Gives `user` role `role` on the whole system.
    pub async fn grant_system(&self, user: &User, role: &str) {
        let role = self.role_id(role).await;
        self.put(&format!("system/users/{}/roles/{role}", user.id))
            .await;
    }

    /// Gives `user` role `role` on project `project` (its id).
    pub async fn grant_project(&self, user: &User, project: &str, role: &str) {
        let role = self.role_id(role).await;
        self.put(&format!(
            "projects/{project}/users/{}/roles/{role}",
            user.id
        ))
        .await;
    }

    /// Revokes `token` (`DELETE /v3/auth/tokens`).
    pub async fn revoke(&self, token: &str) {
        let admin = self.manager().await;
        let answer = self
            .http
            .delete(format!("{}/v3/auth/tokens", self.url))
            .header("X-Auth-Token", admin)
            .header("X-Subject-Token", token)
            .send()
            .await
            .expect("Keystone answers");
        assert!(answer.status().is_success(), "revoke: {}", answer.status());
    }
}

impl Drop for PrivateKeystone {
    fn drop(&mut self) {
        self.stop();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
