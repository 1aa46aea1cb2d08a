//! HTTPS on the API (`enable_ssl_api` with `cert_file` and `key_file`, rustls): a client that
//! trusts the certificate is served; plain HTTP on the same port is not.

use std::time::{Duration, Instant};

use reqwest::StatusCode;

/// A self-signed certificate for `localhost` and 127.0.0.1, written as PEM files in `dir`:
/// (certificate file, key file, certificate PEM).
fn self_signed(dir: &std::path::Path) -> (std::path::PathBuf, std::path::PathBuf, String) {
    let certified =
        rcgen::generate_simple_self_signed(vec!["localhost".to_owned(), "127.0.0.1".to_owned()])
            .expect("a self-signed certificate");
    let cert_pem = certified.cert.pem();
    let cert = dir.join("api.crt");
    let key = dir.join("api.key");
    std::fs::write(&cert, &cert_pem).expect("write the certificate");
    std::fs::write(&key, certified.signing_key.serialize_pem()).expect("write the key");
    (cert, key, cert_pem)
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port()
}

/// Kills the process when the test ends, passed or not.
struct Killed(std::process::Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_api_serves_https_with_the_configured_certificate() {
    let dir = std::env::temp_dir().join(format!("ferrum-tls-{}", uuid::Uuid::new_v4().simple()));
    std::fs::create_dir_all(&dir).unwrap();
    let (cert, key, cert_pem) = self_signed(&dir);
    let port = free_port();
    let log = std::fs::File::create(dir.join("ferrum.log")).unwrap();
    let _ferrum = Killed(
        std::process::Command::new(env!("CARGO_BIN_EXE_ferrum"))
            .arg("all-in-one")
            .current_dir(&dir)
            .env_clear()
            .env("FERRUM_API_BIND", format!("127.0.0.1:{port}"))
            .env("FERRUM_ENABLE_SSL_API", "true")
            .env("FERRUM_API_CERT_FILE", &cert)
            .env("FERRUM_API_KEY_FILE", &key)
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap(),
    );
    let trusting = reqwest::Client::builder()
        .add_root_certificate(reqwest::Certificate::from_pem(cert_pem.as_bytes()).unwrap())
        .timeout(Duration::from_secs(10))
        .build()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    let root = loop {
        match trusting
            .get(format!("https://localhost:{port}/"))
            .send()
            .await
        {
            Ok(response) => break response,
            Err(e) => {
                assert!(
                    Instant::now() < deadline,
                    "no HTTPS answer: {e}; log: {}",
                    std::fs::read_to_string(dir.join("ferrum.log")).unwrap_or_default()
                );
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    };
    assert_eq!(root.status(), StatusCode::OK);
    // The links it writes say https.
    let root: serde_json::Value = root.json().await.unwrap();
    let links = root.to_string();
    assert!(
        links.contains(&format!("https://localhost:{port}/v1")) && !links.contains("http://"),
        "{links}"
    );
    let response = trusting
        .post(format!("https://127.0.0.1:{port}/v1/nodes"))
        .header("X-OpenStack-Ironic-API-Version", "1.49")
        .json(&serde_json::json!({"name": "n1", "driver": "fake-hardware"}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::CREATED);

    // Plain HTTP to the TLS port: no HTTP answer.
    let plain = reqwest::Client::builder()
        .timeout(Duration::from_secs(10))
        .build()
        .unwrap();
    let refused = plain.get(format!("http://127.0.0.1:{port}/")).send().await;
    assert!(refused.is_err(), "{refused:?}");
    // A client that does not trust the certificate refuses it.
    let untrusting = reqwest::Client::builder()
        .timeout(Duration::from_secs(10))
        .build()
        .unwrap();
    assert!(
        untrusting
            .get(format!("https://localhost:{port}/"))
            .send()
            .await
            .is_err()
    );
    let banner = std::fs::read_to_string(dir.join("ferrum.log")).unwrap();
    assert!(
        banner.contains(&format!("https://127.0.0.1:{port}")),
        "{banner}"
    );
    drop(_ferrum);
    let _ = std::fs::remove_dir_all(&dir);
}

/// A certificate file that is not there stops the start, naming it.
#[test]
fn a_missing_certificate_stops_the_start() {
    let dir = std::env::temp_dir().join(format!("ferrum-tls-{}", uuid::Uuid::new_v4().simple()));
    std::fs::create_dir_all(&dir).unwrap();
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_ferrum"))
        .current_dir(&dir)
        .env_clear()
        .env("FERRUM_API_BIND", "127.0.0.1:0")
        .env("FERRUM_ENABLE_SSL_API", "true")
        .env("FERRUM_API_CERT_FILE", dir.join("nope.crt"))
        .env("FERRUM_API_KEY_FILE", dir.join("nope.key"))
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("cannot read a PEM certificate from api.cert_file")
            && stderr.contains("nope.crt"),
        "{stderr}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
