//! `auth_strategy = http_basic`, as Ironic's: the users of an htpasswd file of bcrypt entries,
//! every route refused without them but the version documents, the deploy ramdisk's agent
//! routes, `/healthcheck` and `/metrics`; checked over HTTP and with the real `baremetal` CLI,
//! in process ([`TestApp`]). Also how a bad user file stops the start.

use std::time::{Duration, Instant};

use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use ferrum::config::AuthStrategy;

use crate::util::{TestApp, clients_venv};

const USER: &str = "operator";
const PASSWORD: &str = "s3cret:with colon";

/// An htpasswd file as `htpasswd -B` writes it (`$2y$`), in a directory of its own, with
/// `cost` rounds; also a second user, so that the right entry must be picked.
fn htpasswd(cost: u32) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("ferrum-auth-{}", uuid::Uuid::new_v4().simple()));
    std::fs::create_dir_all(&dir).expect("test directory");
    let entry = |password: &str| {
        bcrypt::hash_with_result(password, cost)
            .expect("bcrypt hash")
            .format_for_version(bcrypt::Version::TwoY)
    };
    let file = dir.join("htpasswd");
    std::fs::write(
        &file,
        format!(
            "someone:{}\n{USER}:{}\n",
            entry("another password"),
            entry(PASSWORD)
        ),
    )
    .expect("write the htpasswd file");
    file
}

/// A refusal's body: the keys of Ironic's basic-auth middleware, and the usual envelope with
/// the same message (which python-ironicclient reads).
fn refusal(code: u16, message: &str) -> Value {
    json!({
        "error": {"message": message, "code": code},
        "error_message": format!(
            r#"{{"faultcode": "Client", "faultstring": "{message}", "debuginfo": null}}"#
        ),
    })
}

/// The service in process, its API served to the users of `file` only.
async fn app_with_basic_auth(file: &std::path::Path) -> TestApp {
    TestApp::builder()
        .configure(|c| {
            c.api.auth_strategy = AuthStrategy::HttpBasic;
            c.api.http_basic_auth_user_file = file.to_owned();
        })
        .start()
        .await
}

/// A request with a raw `Authorization` header (or none): (status, headers, body).
async fn send(
    base: &str,
    method: Method,
    path: &str,
    authorization: Option<&str>,
) -> (StatusCode, reqwest::header::HeaderMap, Value) {
    let mut request = reqwest::Client::new()
        .request(method, format!("{base}{path}"))
        .header("X-OpenStack-Ironic-API-Version", "1.49");
    if let Some(value) = authorization {
        request = request.header("Authorization", value);
    }
    let response = request.send().await.expect("an answer");
    let status = response.status();
    let headers = response.headers().clone();
    let text = response.text().await.expect("a body");
    (
        status,
        headers,
        serde_json::from_str(&text).unwrap_or(Value::String(text)),
    )
}

/// Without credentials only `/`, `/v1` and the agent's routes answer; with wrong ones, 401
/// in the envelope and words of Ironic's basic-auth middleware; with the right ones, the API.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_basic_refuses_all_but_the_public_routes() {
    let file = htpasswd(4);
    let app = app_with_basic_auth(&file).await;
    let base = app.api().base.as_str();

    for path in ["/", "/v1", "/v1/", "/metrics"] {
        let (status, _, body) = send(base, Method::GET, path, None).await;
        assert_eq!(status, StatusCode::OK, "{path}: {body}");
    }
    // Ironic answers its health check before authentication: healthy or not, never 401.
    let (status, _, body) = send(base, Method::GET, "/healthcheck", None).await;
    assert!(
        status == StatusCode::OK || status == StatusCode::SERVICE_UNAVAILABLE,
        "/healthcheck: {status} {body}"
    );
    assert!(body["status"].is_string(), "{body}");
    // The agent has no credentials: lookup and heartbeat are answered on their merits.
    let (status, _, body) = send(
        base,
        Method::GET,
        "/v1/lookup?addresses=52:54:00:00:00:99",
        None,
    )
    .await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{body}");
    // A heartbeat without its body: the API's own 400, not the middleware's 401.
    let (status, _, body) = send(
        base,
        Method::POST,
        &format!("/v1/heartbeat/{}", uuid::Uuid::new_v4()),
        None,
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    assert!(
        body["error_message"]
            .as_str()
            .is_some_and(|m| m.contains("Missing mandatory parameter: callback_url")),
        "{body}"
    );

    // Everything else, reads, writes and unknown paths alike.
    for (method, path) in [
        (Method::GET, "/v1/nodes"),
        (Method::GET, "/v1/nodes/detail"),
        (Method::POST, "/v1/nodes"),
        (Method::PUT, "/v1/nodes/n1/states/power"),
        (Method::DELETE, "/v1/nodes/n1"),
        (Method::GET, "/v1/drivers"),
        (Method::GET, "/v1/conductors"),
        (Method::GET, "/v1/nodes/n1/states"),
        (Method::PATCH, "/v1/nodes/n1"),
        (Method::GET, "/v1/nodes/n1/vifs"),
        (Method::POST, "/v1/nodes/n1/vendor_passthru?method=x"),
        (Method::GET, "/v1/chassis"),
        (Method::GET, "/v1/ports/detail"),
        (Method::GET, "/v1/portgroups"),
        (Method::GET, "/v1/allocations"),
        (Method::GET, "/v1/deploy_templates"),
        (Method::GET, "/v1/runbooks"),
        (Method::GET, "/v1/inspection_rules"),
        (Method::GET, "/v1/volume"),
        (Method::GET, "/v1/volume/connectors"),
        (Method::GET, "/v1/shards"),
        (Method::POST, "/v1/events"),
        (Method::GET, "/v1/drivers/fake-hardware/properties"),
        (Method::GET, "/v1/heartbeat/Not-Lower-Case"),
        (Method::GET, "/v1/no-such-thing"),
        (Method::GET, "/v1/metrics"),
        (Method::GET, "/ferrum/v1/watch"),
        (Method::GET, "/ferrum/v1/watch?node=n1"),
        (Method::GET, "/healthcheck/x"),
    ] {
        let (status, headers, body) = send(base, method.clone(), path, None).await;
        assert_eq!(status, StatusCode::UNAUTHORIZED, "{method} {path}: {body}");
        assert_eq!(
            headers["www-authenticate"], "Basic realm=\"Baremetal API\"",
            "{method} {path}"
        );
        assert_eq!(headers["content-type"], "application/json");
        assert!(headers.contains_key("x-openstack-request-id"));
        assert_eq!(
            body,
            refusal(401, "Authorization required"),
            "{method} {path}"
        );
    }

    let basic = |user_password: &str| {
        use base64::Engine as _;
        format!(
            "Basic {}",
            base64::engine::general_purpose::STANDARD.encode(user_password)
        )
    };
    for wrong in [
        format!("{USER}:not it"),
        format!("{USER}:"),
        "someone:s3cret:with colon".to_owned(),
        format!("nobody:{PASSWORD}"),
    ] {
        let (status, headers, body) =
            send(base, Method::GET, "/v1/nodes", Some(&basic(&wrong))).await;
        assert_eq!(status, StatusCode::UNAUTHORIZED, "{wrong}: {body}");
        assert!(headers.contains_key("www-authenticate"));
        assert_eq!(
            body,
            refusal(401, "Incorrect username or password"),
            "{wrong}"
        );
    }
    let (status, _, body) = send(base, Method::GET, "/v1/nodes", Some("Basic %%%")).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    assert_eq!(body, refusal(400, "Could not decode authorization token"));
    let (status, _, body) = send(base, Method::GET, "/v1/nodes", Some("Bearer abc")).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");

    // The right user and password: the whole API.
    let api = app.api().with_basic_auth(USER, PASSWORD);
    let node = api
        .create_node(json!({"name": "n1", "driver": "fake-hardware"}))
        .await;
    assert_eq!(node["provision_state"], "enroll");
    api.accepted("n1", "manage").await;
    api.wait_for("n1", "manageable").await;
    let r = api.get("/v1/nodes").await;
    assert_eq!(r.status, StatusCode::OK);
    assert_eq!(r.body["nodes"].as_array().unwrap().len(), 1);
    // Still refused without them, and nothing was done.
    let (status, _, _) = send(base, Method::DELETE, "/v1/nodes/n1", None).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    assert_eq!(api.node("n1").await["provision_state"], "manageable");
    app.assert_no_locks().await;
}

/// bcrypt is slow by design; a client's repeated credentials are verified once, so reads keep
/// their speed. At cost 12 a bcrypt check takes a quarter of a second or more, so 100 reads
/// checked each time would take 25 s at least.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn verified_credentials_are_remembered() {
    let file = htpasswd(12);
    let app = app_with_basic_auth(&file).await;
    let api = app.api().with_basic_auth(USER, PASSWORD);
    assert_eq!(api.get("/v1/nodes").await.status, StatusCode::OK);
    let started = Instant::now();
    for _ in 0..100 {
        assert_eq!(api.get("/v1/nodes").await.status, StatusCode::OK);
    }
    let took = started.elapsed();
    assert!(took < Duration::from_secs(10), "100 reads took {took:?}");
    // A wrong password is never remembered as right.
    let wrong = app.api().with_basic_auth(USER, "wrong");
    assert_eq!(
        wrong.get("/v1/nodes").await.status,
        StatusCode::UNAUTHORIZED
    );
    assert_eq!(api.get("/v1/nodes").await.status, StatusCode::OK);
}

/// The real `baremetal` CLI with keystoneauth's `http_basic` plugin: the right password works,
/// a wrong one and none get Ironic's 401.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_baremetal_cli_authenticates_with_http_basic() {
    let Some(venv) = clients_venv() else {
        return;
    };
    let file = htpasswd(10);
    let app = app_with_basic_auth(&file).await;
    let endpoint = app.api().base.clone();
    let cli = move |auth: Vec<String>, args: Vec<&'static str>| {
        let venv = venv.clone();
        let endpoint = endpoint.clone();
        async move {
            tokio::task::spawn_blocking(move || {
                std::process::Command::new(venv.join("bin/baremetal"))
                    .args(auth)
                    .arg("--os-endpoint")
                    .arg(&endpoint)
                    .args(args)
                    .env_remove("OS_CLOUD")
                    .output()
                    .unwrap()
            })
            .await
            .unwrap()
        }
    };
    let basic = |password: &str| {
        vec![
            "--os-auth-type".to_owned(),
            "http_basic".to_owned(),
            "--os-username".to_owned(),
            USER.to_owned(),
            "--os-password".to_owned(),
            password.to_owned(),
        ]
    };

    let out = cli(
        basic(PASSWORD),
        vec![
            "node",
            "create",
            "--driver",
            "fake-hardware",
            "--name",
            "cli-1",
            "-f",
            "json",
        ],
    )
    .await;
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = cli(basic(PASSWORD), vec!["node", "list", "-f", "json"]).await;
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let listed: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(listed[0]["name"], "cli-1", "{listed}");

    let out = cli(basic("wrong password"), vec!["node", "list"]).await;
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("Incorrect username or password") && stderr.contains("401"),
        "{stderr}"
    );
    let out = cli(
        vec!["--os-auth-type".to_owned(), "none".to_owned()],
        vec!["node", "list"],
    )
    .await;
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("Authorization required"), "{stderr}");
    app.assert_no_locks().await;
}

/// A user file that cannot be read, or has an entry that is not bcrypt, stops the start with a
/// message naming the file and the fault.
#[test]
fn a_bad_user_file_stops_the_start() {
    let dir =
        std::env::temp_dir().join(format!("ferrum-authfile-{}", uuid::Uuid::new_v4().simple()));
    std::fs::create_dir_all(&dir).unwrap();
    let md5 = dir.join("md5-htpasswd");
    std::fs::write(&md5, "admin:$apr1$Zb9X3bV0$1H1yC0J1bEc9v0pYQ6nq1/\n").unwrap();
    for (file, expected) in [
        (
            dir.join("missing"),
            "cannot read the http_basic user file".to_owned(),
        ),
        (
            md5.clone(),
            "Only bcrypt digested passwords are supported for admin".to_owned(),
        ),
    ] {
        let output = std::process::Command::new(env!("CARGO_BIN_EXE_ferrum"))
            .current_dir(&dir)
            .env_clear()
            .env("FERRUM_API_BIND", "127.0.0.1:0")
            .env("FERRUM_AUTH_STRATEGY", "http_basic")
            .env("FERRUM_HTTP_BASIC_AUTH_USER_FILE", &file)
            .stdin(std::process::Stdio::null())
            .output()
            .unwrap();
        assert!(!output.status.success());
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(stderr.contains(&expected), "{stderr}");
        assert!(stderr.contains(&file.display().to_string()), "{stderr}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}
