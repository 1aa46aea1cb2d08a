//! The node event stream `GET /ferrum/v1/watch` (server-sent events) as a client reads it: the
//! watch's own tests, and waits that should not poll (the lab's, whose CPU figures polling
//! would blur).

use std::time::Duration;

use reqwest::StatusCode;
use serde_json::Value;

/// A server-sent-event stream as a client reads it.
pub struct EventStream {
    response: reqwest::Response,
    buffer: String,
    /// Comment lines seen (keep-alives).
    pub comments: usize,
}

/// One event: its name and its data, parsed.
#[derive(Debug)]
pub struct Sse {
    pub event: String,
    pub data: Value,
}

impl EventStream {
    /// Opens `/ferrum/v1/watch?<query>` and reads its first event, `watching`.
    pub async fn open(base: &str, query: &str) -> (EventStream, Value) {
        let opening = reqwest::Client::new()
            .get(format!("{base}/ferrum/v1/watch?{query}"))
            .header("Accept", "text/event-stream")
            .send();
        let response = tokio::time::timeout(Duration::from_secs(10), opening)
            .await
            .expect("the watch answers within 10 s")
            .expect("open the watch");
        assert_eq!(response.status(), StatusCode::OK);
        assert_eq!(
            response.headers()["content-type"],
            "text/event-stream",
            "{:?}",
            response.headers()
        );
        let mut stream = EventStream {
            response,
            buffer: String::new(),
            comments: 0,
        };
        let first = stream
            .next(Duration::from_secs(10))
            .await
            .expect("the first event");
        assert_eq!(first.event, "watching", "{first:?}");
        (stream, first.data)
    }

    /// The next event, or None after `limit` without one.
    pub async fn next(&mut self, limit: Duration) -> Option<Sse> {
        let deadline = tokio::time::Instant::now() + limit;
        loop {
            if let Some(end) = self.buffer.find("\n\n") {
                let frame: String = self.buffer.drain(..end + 2).collect();
                let mut event = "message".to_owned();
                let mut data = String::new();
                for line in frame.lines() {
                    if line.starts_with(':') {
                        self.comments += 1;
                    } else if let Some(v) = line.strip_prefix("event:") {
                        event = v.trim().to_owned();
                    } else if let Some(v) = line.strip_prefix("data:") {
                        data.push_str(v.trim_start());
                    }
                }
                if data.is_empty() {
                    continue; // a keep-alive comment alone
                }
                let data = serde_json::from_str(&data).expect("JSON data");
                return Some(Sse { event, data });
            }
            let left = deadline.saturating_duration_since(tokio::time::Instant::now());
            match tokio::time::timeout(left, self.response.chunk()).await {
                Ok(Ok(Some(chunk))) => {
                    self.buffer
                        .push_str(std::str::from_utf8(&chunk).expect("UTF-8"));
                }
                Ok(Ok(None)) => panic!("the stream ended"),
                Ok(Err(e)) => panic!("reading the stream: {e}"),
                Err(_) => return None,
            }
        }
    }

    /// Reads events until one satisfies `last` (included), failing after `limit`.
    pub async fn until(&mut self, limit: Duration, last: impl Fn(&Sse) -> bool) -> Vec<Sse> {
        let deadline = tokio::time::Instant::now() + limit;
        let mut seen = Vec::new();
        loop {
            let left = deadline.saturating_duration_since(tokio::time::Instant::now());
            let Some(event) = self.next(left).await else {
                panic!("not seen within {limit:?}; seen: {seen:#?}");
            };
            let done = last(&event);
            seen.push(event);
            if done {
                return seen;
            }
        }
    }
}
