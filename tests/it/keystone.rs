//! `auth_strategy = keystone` against a real Keystone ([`PrivateKeystone`]): tokens validated
//! as keystonemiddleware does (401 with Keystone's `WWW-Authenticate`, public routes open, the
//! service token), remembered for `token_cache_time` (a revoked token works until then; while
//! Keystone is away, one validated before works and others are 503), and the coarse policy (a
//! system reader reads, a system admin writes, project tokens refused), over HTTP in process
//! ([`TestApp`]).

use std::time::Duration;

use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use ferrum::config::AuthStrategy;

use crate::util::{
    TestApp,
    keystone::{PrivateKeystone, User},
};

/// Keystone, Ferrum's service user (`ironic`, role `service` on project `service`), and the
/// service in process validating tokens with it, remembering them for `cache`.
async fn keystone_and_app(cache: Duration) -> Option<(PrivateKeystone, User, TestApp)> {
    let keystone = PrivateKeystone::start().await?;
    let service = keystone.project("service").await;
    let ironic = keystone.user("ironic").await;
    keystone.grant_project(&ironic, &service, "service").await;
    let (url, password) = (keystone.url.clone(), ironic.password.clone());
    let app = TestApp::builder()
        .configure(move |c| {
            c.api.auth_strategy = AuthStrategy::Keystone;
            c.keystone_authtoken.auth_url = Some(url);
            c.keystone_authtoken.password = Some(password);
            c.keystone_authtoken.token_cache_time = cache;
        })
        .start()
        .await;
    Some((keystone, ironic, app))
}

/// A request to the app's loopback listener with `token` (if any) and extra `headers`: the
/// status, the `WWW-Authenticate` header and the body.
async fn call(
    app: &TestApp,
    method: Method,
    path: &str,
    token: Option<&str>,
    headers: &[(&str, &str)],
    body: Option<Value>,
) -> (StatusCode, Option<String>, Value) {
    let mut request = reqwest::Client::new()
        .request(method, format!("{}{path}", app.api().base))
        .header("X-OpenStack-Ironic-API-Version", "1.80");
    if let Some(token) = token {
        request = request.header("X-Auth-Token", token);
    }
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    if let Some(body) = body {
        request = request.json(&body);
    }
    let answer = request.send().await.expect("the API answers");
    let status = answer.status();
    let challenge = answer
        .headers()
        .get("www-authenticate")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let body = answer.json().await.unwrap_or(Value::Null);
    (status, challenge, body)
}

/// A refusal's message: `error.message` (the auth middleware's envelope) or the
/// `faultstring` in Ironic's `error_message`.
fn message(body: &Value) -> String {
    if let Some(message) = body["error"]["message"].as_str() {
        return message.to_owned();
    }
    let inner: Value = body["error_message"]
        .as_str()
        .and_then(|text| serde_json::from_str(text).ok())
        .unwrap_or(Value::Null);
    inner["faultstring"].as_str().unwrap_or_default().to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keystone_tokens_are_validated_and_system_readers_read_and_admins_write() {
    let Some((keystone, ironic, app)) = keystone_and_app(Duration::from_secs(300)).await else {
        return;
    };
    // Without a token, or with one Keystone does not know: keystonemiddleware's 401.
    for token in [None, Some("gAAAAA-not-a-token")] {
        let (status, challenge, body) =
            call(&app, Method::GET, "/v1/nodes", token, &[], None).await;
        assert_eq!(status, StatusCode::UNAUTHORIZED, "{token:?}: {body}");
        assert_eq!(
            challenge.as_deref(),
            Some(format!("Keystone uri=\"{}\"", keystone.url).as_str())
        );
        assert_eq!(
            message(&body),
            "The request you have made requires authentication."
        );
    }
    // Ironic's public routes need none.
    for path in ["/", "/v1"] {
        let (status, _, _) = call(&app, Method::GET, path, None, &[], None).await;
        assert_eq!(status, StatusCode::OK, "{path}");
    }

    // The system admin does everything.
    let admin = keystone.admin_token().await;
    let (status, _, node) = call(
        &app,
        Method::POST,
        "/v1/nodes",
        Some(&admin),
        &[],
        Some(json!({"driver": "fake-hardware", "name": "ks-node"})),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED, "{node}");

    // A system reader reads and is refused changes, in Ironic's words.
    let reader = keystone.user("auditor").await;
    keystone.grant_system(&reader, "reader").await;
    let reader_token = keystone
        .token(&reader.name, &reader.password, Some("system"))
        .await;
    let (status, _, body) = call(
        &app,
        Method::GET,
        "/v1/nodes/ks-node",
        Some(&reader_token),
        &[],
        None,
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["name"], "ks-node");
    let (status, _, body) = call(
        &app,
        Method::PATCH,
        "/v1/nodes/ks-node",
        Some(&reader_token),
        &[],
        Some(json!([{"op": "add", "path": "/extra/x", "value": "y"}])),
    )
    .await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{body}");
    assert!(
        message(&body).starts_with("Access was denied to the following resource"),
        "{body}"
    );

    // A project's member is refused until the owner and lessee rules land.
    let demo = keystone.project("demo").await;
    let member = keystone.user("demo-member").await;
    keystone.grant_project(&member, &demo, "member").await;
    let member_token = keystone
        .token(&member.name, &member.password, Some("demo"))
        .await;
    let (status, _, body) = call(
        &app,
        Method::GET,
        "/v1/nodes",
        Some(&member_token),
        &[],
        None,
    )
    .await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{body}");

    // A service token must be valid; with a service role it is taken.
    let (status, _, _) = call(
        &app,
        Method::GET,
        "/v1/nodes",
        Some(&admin),
        &[("X-Service-Token", "not-a-token")],
        None,
    )
    .await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    let service_token = keystone
        .token(&ironic.name, &ironic.password, Some("service"))
        .await;
    let (status, _, body) = call(
        &app,
        Method::GET,
        "/v1/nodes",
        Some(&reader_token),
        &[("X-Service-Token", &service_token)],
        None,
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
}

/// A revoked token works until its validation is forgotten (`token_cache_time`), then is
/// refused; with Keystone gone, a token validated before works on while one never seen is 503.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn validated_tokens_are_remembered_for_the_cache_time_only() {
    let cache = Duration::from_secs(2);
    let Some((keystone, _ironic, app)) = keystone_and_app(cache).await else {
        return;
    };
    let admin = keystone.admin_token().await;
    let get = async |token: &str| {
        call(&app, Method::GET, "/v1/nodes", Some(token), &[], None)
            .await
            .0
    };
    assert_eq!(get(&admin).await, StatusCode::OK);
    keystone.revoke(&admin).await;
    assert_eq!(get(&admin).await, StatusCode::OK, "remembered");
    tokio::time::sleep(cache + Duration::from_millis(300)).await;
    assert_eq!(get(&admin).await, StatusCode::UNAUTHORIZED, "revoked");

    let seen = keystone.admin_token().await;
    let unseen = keystone.admin_token().await;
    assert_eq!(get(&seen).await, StatusCode::OK);
    keystone.kill();
    assert_eq!(
        get(&seen).await,
        StatusCode::OK,
        "validated before Keystone went"
    );
    let (status, _, body) = call(&app, Method::GET, "/v1/nodes", Some(&unseen), &[], None).await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{body}");
    assert_eq!(
        message(&body),
        "The Keystone service is temporarily unavailable."
    );
    tokio::time::sleep(cache + Duration::from_millis(300)).await;
    assert_eq!(
        get(&seen).await,
        StatusCode::SERVICE_UNAVAILABLE,
        "forgotten"
    );
}
