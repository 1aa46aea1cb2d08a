//! Bounded work per request at the HTTP server, over raw TCP (an HTTP client would not send
//! what these tests send): an oversized body is refused with 413 in Ironic's envelope without
//! being read, a request head that is too slow is cut, one that is too large is refused.

use std::time::Duration;

use ferrum::http_server::{MAX_BODY_BYTES, MAX_HEADER_BYTES};
use serde_json::Value;
use tokio::{
    io::{AsyncRead, AsyncReadExt as _, AsyncWriteExt as _},
    net::TcpStream,
    time::timeout,
};

use crate::util::{Cluster, ClusterOptions, Stack, on_both_stacks};

/// Generous: an answer that does not wait for anything comes in milliseconds.
const PROMPTLY: Duration = Duration::from_secs(5);

async fn connect(cluster: &Cluster) -> TcpStream {
    let addr = cluster.api.base.trim_start_matches("http://");
    TcpStream::connect(addr).await.expect("connect to the API")
}

/// A cluster whose API cuts a request head after 1 s.
async fn with_header_timeout(stack: Stack) -> Option<Cluster> {
    Cluster::start(ClusterOptions {
        stack,
        api_header_timeout: Some(1.0),
        ..ClusterOptions::default()
    })
    .await
}

/// Reads one response: its status and body (by its Content-Length).
async fn read_response(stream: &mut (impl AsyncRead + Unpin)) -> (u16, String) {
    let mut data = Vec::new();
    let mut buf = [0u8; 4096];
    let head_end = loop {
        if let Some(at) = data.windows(4).position(|w| w == b"\r\n\r\n") {
            break at + 4;
        }
        let n = stream.read(&mut buf).await.expect("read the response");
        assert!(n > 0, "closed before a whole response: {data:?}");
        data.extend_from_slice(&buf[..n]);
    };
    let head = String::from_utf8_lossy(&data[..head_end]).into_owned();
    let status = head
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no status in {head:?}"));
    let length: usize = head
        .lines()
        .find_map(|l| {
            let (name, value) = l.split_once(':')?;
            name.eq_ignore_ascii_case("content-length")
                .then(|| value.trim().parse().ok())?
        })
        .unwrap_or(0);
    while data.len() < head_end + length {
        let n = stream.read(&mut buf).await.expect("read the body");
        assert!(n > 0, "closed inside the body");
        data.extend_from_slice(&buf[..n]);
    }
    let body = String::from_utf8_lossy(&data[head_end..head_end + length]).into_owned();
    (status, body)
}

/// The faultstring of Ironic's envelope.
fn faultstring(body: &str) -> String {
    let outer: Value = serde_json::from_str(body).unwrap_or_else(|_| panic!("not JSON: {body}"));
    let text = outer["error_message"]
        .as_str()
        .unwrap_or_else(|| panic!("not Ironic's envelope: {body}"));
    let inner: Value = serde_json::from_str(text).expect("error_message is JSON text");
    assert_eq!(inner["faultcode"], "Client");
    inner["faultstring"]
        .as_str()
        .expect("faultstring")
        .to_owned()
}

/// Everything the server sends until it closes (a reset counts as closed).
async fn read_until_closed(stream: &mut (impl AsyncRead + Unpin)) -> Vec<u8> {
    let mut data = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        match stream.read(&mut buf).await {
            Ok(0) | Err(_) => return data,
            Ok(n) => data.extend_from_slice(&buf[..n]),
        }
    }
}

on_both_stacks! {
/// A declared body over the limit is answered 413 at once, without waiting for the body (none
/// is sent); a chunked one is cut with 413 when it reaches the limit. Nothing is created.
async fn an_oversized_body_gets_413_in_the_envelope(stack) {
    let Some(cluster) = Cluster::start(ClusterOptions {
        stack,
        ..ClusterOptions::default()
    })
    .await
    else {
        return;
    };

    let mut stream = connect(&cluster).await;
    stream
        .write_all(
            b"POST /v1/nodes HTTP/1.1\r\nHost: ferrum\r\nContent-Type: application/json\r\n\
              Content-Length: 99999999999\r\n\r\n",
        )
        .await
        .unwrap();
    let (status, body) = timeout(PROMPTLY, read_response(&mut stream))
        .await
        .expect("answered without waiting for the declared body");
    assert_eq!(status, 413, "{body}");
    let fault = faultstring(&body);
    assert!(fault.contains("too large"), "{fault}");
    assert!(fault.contains(&MAX_BODY_BYTES.to_string()), "{fault}");

    // Chunked: the server reads up to the limit, then answers; the writer keeps going until
    // the server has closed, so its errors are expected.
    let (mut reader, mut writer) = connect(&cluster).await.into_split();
    let sender = tokio::spawn(async move {
        writer
            .write_all(
                b"POST /v1/nodes HTTP/1.1\r\nHost: ferrum\r\nContent-Type: application/json\r\n\
                  Transfer-Encoding: chunked\r\n\r\n",
            )
            .await?;
        let chunk = format!("10000\r\n{}\r\n", "a".repeat(0x10000));
        for _ in 0..(MAX_BODY_BYTES / 0x10000 + 16) {
            writer.write_all(chunk.as_bytes()).await?;
        }
        writer.write_all(b"0\r\n\r\n").await
    });
    let (status, body) = timeout(PROMPTLY, read_response(&mut reader))
        .await
        .expect("answered once the chunked body passed the limit");
    assert_eq!(status, 413, "{body}");
    assert!(faultstring(&body).contains("too large"), "{body}");
    drop(reader);
    let _ = sender.await;

    let list = cluster.api.get("/v1/nodes").await;
    assert_eq!(list.body["nodes"], serde_json::json!([]), "{}", list.body);
}
}

on_both_stacks! {
/// A request head dripped a byte every 200 ms is cut at the header timeout (1 s here) without an
/// answer; a head over the size limit, or with too many fields, gets 431 (or the connection is
/// closed); a large head within the limit is served; and the server serves on.
async fn request_heads_are_bounded_in_time_and_size(stack) {
    let Some(cluster) = with_header_timeout(stack).await else {
        return;
    };

    // 100 bytes at 5 a second would take 20 s: longer than even the default timeout (10 s).
    let head = format!("GET / HTTP/1.1\r\nHost: ferrum\r\nX-Slow: {}\r\n\r\n", "a".repeat(60));
    assert!(head.len() >= 100);
    let mut stream = connect(&cluster).await;
    let mut buf = [0u8; 1024];
    let mut sent = 0;
    let closed = loop {
        if sent == head.len() {
            break false;
        }
        if stream.write_all(&head.as_bytes()[sent..=sent]).await.is_err() {
            break true;
        }
        sent += 1;
        match timeout(Duration::from_millis(200), stream.read(&mut buf)).await {
            Err(_) => {}
            Ok(Ok(0) | Err(_)) => break true,
            Ok(Ok(n)) => panic!(
                "a head dripped over {} ms was served, not cut: {}",
                sent * 200,
                String::from_utf8_lossy(&buf[..n])
            ),
        }
    };
    assert!(closed, "the connection outlived a head dripped for {} bytes", head.len());

    // A head over the size limit: 431, or closed, never served.
    let (mut reader, mut writer) = connect(&cluster).await.into_split();
    let sender = tokio::spawn(async move {
        let big = format!(
            "GET / HTTP/1.1\r\nHost: ferrum\r\nX-Big: {}\r\n\r\n",
            "a".repeat(MAX_HEADER_BYTES * 3)
        );
        writer.write_all(big.as_bytes()).await
    });
    let answer = timeout(PROMPTLY, read_until_closed(&mut reader))
        .await
        .expect("an oversized head is refused promptly");
    assert!(
        answer.is_empty() || answer.starts_with(b"HTTP/1.1 431"),
        "{}",
        String::from_utf8_lossy(&answer)
    );
    let _ = sender.await;

    // Too many header fields: 431.
    let mut many = String::from("GET / HTTP/1.1\r\nHost: ferrum\r\n");
    for i in 0..200 {
        many.push_str(&format!("X-Field-{i}: v\r\n"));
    }
    many.push_str("\r\n");
    let mut stream = connect(&cluster).await;
    stream.write_all(many.as_bytes()).await.unwrap();
    let (status, _) = timeout(PROMPTLY, read_response(&mut stream))
        .await
        .expect("too many fields are refused promptly");
    assert_eq!(status, 431);

    // A large head within the limit is served.
    let mut stream = connect(&cluster).await;
    let large = format!(
        "GET / HTTP/1.1\r\nHost: ferrum\r\nX-Token: {}\r\n\r\n",
        "t".repeat(MAX_HEADER_BYTES / 2)
    );
    stream.write_all(large.as_bytes()).await.unwrap();
    let (status, body) = timeout(PROMPTLY, read_response(&mut stream)).await.unwrap();
    assert_eq!(status, 200, "{body}");

    assert_eq!(cluster.api.get("/").await.status, 200, "the API serves on");
}
}

on_both_stacks! {
/// The header timeout counts a client's slowness, not the server's own pause: an API paused with
/// SIGSTOP past it (1 s here) answers, once woken, the request that arrived meanwhile on a
/// keep-alive connection (the runtime, its wait for sockets interrupted by the stop, fired the
/// timers that had run out before it saw that the request was there).
async fn a_request_that_arrived_while_the_api_was_paused_is_answered(stack) {
    let Some(mut cluster) = with_header_timeout(stack).await else {
        return;
    };
    let api_process = match stack {
        Stack::Embedded => "all-in-one",
        Stack::MultiHost => "api",
    };
    let request = b"GET / HTTP/1.1\r\nHost: ferrum\r\n\r\n";
    let mut stream = connect(&cluster).await;
    stream.write_all(request).await.unwrap();
    let (status, body) = timeout(PROMPTLY, read_response(&mut stream)).await.unwrap();
    assert_eq!(status, 200, "{body}");

    cluster.signal(api_process, "STOP");
    stream.write_all(request).await.unwrap();
    tokio::time::sleep(Duration::from_millis(2500)).await;
    cluster.signal(api_process, "CONT");
    let (status, body) = timeout(PROMPTLY, read_response(&mut stream))
        .await
        .expect("answered once woken");
    assert_eq!(status, 200, "{body}");
}
}
