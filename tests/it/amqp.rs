//! `AmqpTransport` against the RabbitMQ at `FERRUM_TEST_AMQP_URL` (default: guest on
//! loopback), through its public API. When the broker is unreachable the tests say so and
//! return (they fail under `FERRUM_REQUIRE_SERVICES=1`). Each test uses its own prefix.
use std::{
    future::Future,
    sync::{
        Arc,
        atomic::{AtomicUsize, Ordering},
    },
    time::{Duration, Instant},
};

use ferrum::rpc::{
    amqp::{AmqpTransport, QueueType, conductor_queue, dead_letter_queue},
    transport::{Rejection, RequestHandler, Transport, TransportError},
};
use tokio::{
    sync::mpsc,
    task::{JoinHandle, JoinSet},
};
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

const PATIENCE: Duration = Duration::from_secs(10);
/// RabbitMQ 4's default `max_message_size`: the transport refuses larger bodies itself.
const BROKER_MAX_BODY_BYTES: usize = 16 * 1024 * 1024;

/// A transport with a prefix of its own, or None (announced) when RabbitMQ is unreachable.
async fn connect() -> Option<Arc<AmqpTransport>> {
    let url = crate::util::amqp_url()?;
    let prefix = format!("test-{}", Uuid::new_v4().simple());
    let transport = AmqpTransport::connect(&url, &prefix)
        .await
        .unwrap_or_else(|err| panic!("RabbitMQ answers on the network but not to AMQP: {err}"));
    Some(Arc::new(transport))
}

/// A handler made of an async closure.
struct FnHandler<F>(F);

#[async_trait::async_trait]
impl<F, Fut> RequestHandler for FnHandler<F>
where
    F: Fn(Vec<u8>) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<Vec<u8>, Rejection>> + Send,
{
    async fn handle(&self, body: Vec<u8>) -> Result<Vec<u8>, Rejection> {
        (self.0)(body).await
    }
}

fn handler<F, Fut>(f: F) -> Arc<dyn RequestHandler>
where
    F: Fn(Vec<u8>) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<Vec<u8>, Rejection>> + Send + 'static,
{
    Arc::new(FnHandler(f))
}

fn echo() -> Arc<dyn RequestHandler> {
    handler(|body| async move { Ok(body) })
}

/// Listens on `host` (calls route once this returns) and runs the listener in a task.
async fn serve(
    transport: &AmqpTransport,
    host: &str,
    handler: Arc<dyn RequestHandler>,
    max_in_flight: usize,
    shutdown: &CancellationToken,
) -> JoinHandle<Result<(), TransportError>> {
    let listener = transport
        .listen(host, handler, max_in_flight, shutdown.clone())
        .await
        .expect("listen");
    tokio::spawn(listener.run())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn call_round_trip() {
    let Some(transport) = connect().await else {
        return;
    };
    let shutdown = CancellationToken::new();
    let server = serve(&transport, "c1", echo(), 4, &shutdown).await;

    let reply = transport
        .call("c1", "req-1", b"ping".to_vec(), PATIENCE)
        .await
        .expect("call");
    assert_eq!(reply, b"ping");
    assert_eq!(transport.waiting_calls(), 0);

    shutdown.cancel();
    server.await.expect("join").expect("serve");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_calls_get_their_own_replies() {
    let Some(transport) = connect().await else {
        return;
    };
    let shutdown = CancellationToken::new();
    // Replies come back out of order: the handler waits longer for some bodies.
    let shuffle = handler(|body: Vec<u8>| async move {
        let wait = body.first().copied().unwrap_or(0) % 5;
        tokio::time::sleep(Duration::from_millis(u64::from(wait))).await;
        Ok(body)
    });
    let server = serve(&transport, "c1", shuffle, 32, &shutdown).await;

    let mut calls = JoinSet::new();
    for i in 0..200_u32 {
        let transport = transport.clone();
        calls.spawn(async move {
            let body = i.to_le_bytes().to_vec();
            let reply = transport
                .call("c1", &format!("req-{i}"), body.clone(), PATIENCE)
                .await;
            (body, reply)
        });
    }
    let mut answered = 0;
    while let Some(done) = calls.join_next().await {
        let (body, reply) = done.expect("join");
        assert_eq!(reply.expect("call"), body);
        answered += 1;
    }
    assert_eq!(answered, 200);
    assert_eq!(transport.waiting_calls(), 0);

    shutdown.cancel();
    server.await.expect("join").expect("serve");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn call_to_a_host_nobody_serves_is_unroutable_at_once() {
    let Some(transport) = connect().await else {
        return;
    };
    let started = Instant::now();
    let err = transport
        .call("nobody", "req-1", b"ping".to_vec(), PATIENCE)
        .await
        .expect_err("nobody listens");
    assert!(
        matches!(&err, TransportError::Unroutable(host) if host == "nobody"),
        "{err:?}"
    );
    assert!(started.elapsed() < PATIENCE / 10, "{:?}", started.elapsed());
    assert_eq!(transport.waiting_calls(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_handler_times_out_and_leaves_nothing_waiting() {
    let Some(transport) = connect().await else {
        return;
    };
    let shutdown = CancellationToken::new();
    let release = CancellationToken::new();
    let slow = {
        let release = release.clone();
        handler(move |body| {
            let release = release.clone();
            async move {
                release.cancelled().await;
                Ok(body)
            }
        })
    };
    let server = serve(&transport, "c1", slow, 4, &shutdown).await;

    let timeout = Duration::from_millis(300);
    let err = transport
        .call("c1", "req-1", b"ping".to_vec(), timeout)
        .await
        .expect_err("the handler is slower than the timeout");
    assert!(
        matches!(&err, TransportError::Timeout { host, after } if host == "c1" && *after == timeout),
        "{err:?}"
    );
    assert_eq!(transport.waiting_calls(), 0);

    // The late reply finds nobody waiting and is dropped.
    release.cancel();
    shutdown.cancel();
    server.await.expect("join").expect("serve");
    assert_eq!(transport.waiting_calls(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_undecodable_request_is_rejected_once_and_not_redelivered() {
    let Some(transport) = connect().await else {
        return;
    };
    let shutdown = CancellationToken::new();
    let rejected = Arc::new(AtomicUsize::new(0));
    let picky = {
        let rejected = rejected.clone();
        handler(move |body: Vec<u8>| {
            let rejected = rejected.clone();
            async move {
                if body == b"garbage" {
                    rejected.fetch_add(1, Ordering::SeqCst);
                    return Err(Rejection::silent("not MessagePack"));
                }
                if body == b"garbage with an answer" {
                    rejected.fetch_add(1, Ordering::SeqCst);
                    return Err(Rejection {
                        reason: "not MessagePack".to_owned(),
                        reply: Some(b"cannot decode".to_vec()),
                    });
                }
                Ok(body)
            }
        })
    };
    // One at a time: a requeued message would come back before the next one.
    let server = serve(&transport, "c1", picky, 1, &shutdown).await;

    let err = transport
        .call(
            "c1",
            "req-1",
            b"garbage".to_vec(),
            Duration::from_millis(500),
        )
        .await
        .expect_err("nobody replies to garbage");
    assert!(matches!(err, TransportError::Timeout { .. }), "{err:?}");
    let reply = transport
        .call("c1", "req-2", b"ping".to_vec(), PATIENCE)
        .await
        .expect("call after the rejected one");
    assert_eq!(reply, b"ping");
    assert_eq!(rejected.load(Ordering::SeqCst), 1);
    // A rejection that has an answer sends it: the caller does not wait for its timeout.
    let reply = transport
        .call("c1", "req-3", b"garbage with an answer".to_vec(), PATIENCE)
        .await
        .expect("the rejection's answer");
    assert_eq!(reply, b"cannot decode");
    let reply = transport
        .call("c1", "req-4", b"ping".to_vec(), PATIENCE)
        .await
        .expect("call after the rejected one");
    assert_eq!(reply, b"ping");
    assert_eq!(
        rejected.load(Ordering::SeqCst),
        2,
        "rejected once, not redelivered"
    );

    shutdown.cancel();
    server.await.expect("join").expect("serve");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_panicking_handler_gets_its_request_rejected() {
    let Some(transport) = connect().await else {
        return;
    };
    let shutdown = CancellationToken::new();
    let explosive = handler(|body: Vec<u8>| async move {
        assert_ne!(body, b"boom", "the handler blew up");
        Ok(body)
    });
    let server = serve(&transport, "c1", explosive, 1, &shutdown).await;

    let err = transport
        .call("c1", "req-1", b"boom".to_vec(), Duration::from_millis(300))
        .await
        .expect_err("a panicking handler does not reply");
    assert!(matches!(err, TransportError::Timeout { .. }), "{err:?}");
    let reply = transport
        .call("c1", "req-2", b"ping".to_vec(), PATIENCE)
        .await
        .expect("the server still serves");
    assert_eq!(reply, b"ping");

    shutdown.cancel();
    server.await.expect("join").expect("serve");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cast_is_delivered() {
    let Some(transport) = connect().await else {
        return;
    };
    let shutdown = CancellationToken::new();
    let (seen_tx, mut seen) = mpsc::unbounded_channel();
    let record = handler(move |body: Vec<u8>| {
        let seen_tx = seen_tx.clone();
        async move {
            let _ = seen_tx.send(body);
            Ok(Vec::new())
        }
    });
    let server = serve(&transport, "c1", record, 4, &shutdown).await;

    transport
        .cast("c1", "req-1", b"power on".to_vec())
        .await
        .expect("cast");
    let delivered = tokio::time::timeout(PATIENCE, seen.recv())
        .await
        .expect("the cast arrives");
    assert_eq!(delivered.as_deref(), Some(&b"power on"[..]));

    shutdown.cancel();
    server.await.expect("join").expect("serve");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cast_to_a_host_nobody_serves_is_unroutable() {
    let Some(transport) = connect().await else {
        return;
    };
    let err = transport
        .cast("nobody", "req-1", b"power on".to_vec())
        .await
        .expect_err("nobody listens");
    assert!(matches!(err, TransportError::Unroutable(_)), "{err:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_returns_after_shutdown_once_in_flight_work_is_done() {
    let Some(transport) = connect().await else {
        return;
    };
    let shutdown = CancellationToken::new();
    let release = CancellationToken::new();
    let (started_tx, mut started) = mpsc::unbounded_channel();
    let gated = {
        let release = release.clone();
        handler(move |body| {
            let release = release.clone();
            let started_tx = started_tx.clone();
            async move {
                let _ = started_tx.send(());
                release.cancelled().await;
                Ok(body)
            }
        })
    };
    let mut server = serve(&transport, "c1", gated, 4, &shutdown).await;

    let call = tokio::spawn({
        let transport = transport.clone();
        async move {
            transport
                .call("c1", "req-1", b"deploy".to_vec(), PATIENCE)
                .await
        }
    });
    tokio::time::timeout(PATIENCE, started.recv())
        .await
        .expect("the request reaches the handler");

    shutdown.cancel();
    assert!(
        tokio::time::timeout(Duration::from_millis(200), &mut server)
            .await
            .is_err(),
        "serve returned while a request was in flight"
    );

    release.cancel();
    let reply = call.await.expect("join").expect("the in-flight call");
    assert_eq!(reply, b"deploy");
    tokio::time::timeout(PATIENCE, server)
        .await
        .expect("serve returns")
        .expect("join")
        .expect("serve");

    // The queue went with its last consumer.
    let err = transport
        .call("c1", "req-2", b"deploy".to_vec(), PATIENCE)
        .await
        .expect_err("nobody listens any more");
    assert!(matches!(err, TransportError::Unroutable(_)), "{err:?}");
}

/// A conductor whose consumer is lost (here: its queue deleted under it, as a broker node's
/// loss takes a classic queue) consumes again without waiting for the requests it was
/// handling: a new call is answered while one taken before the loss still runs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_consumer_attaches_again_while_a_request_taken_before_still_runs() {
    let Some(url) = crate::util::amqp_url() else {
        return;
    };
    let prefix = format!("test-{}", Uuid::new_v4().simple());
    let transport = Arc::new(
        AmqpTransport::connect(&url, &prefix)
            .await
            .expect("transport"),
    );
    let shutdown = CancellationToken::new();
    let release = CancellationToken::new();
    let (started_tx, mut started) = mpsc::unbounded_channel();
    let slow_done = Arc::new(AtomicUsize::new(0));
    let gated = {
        let release = release.clone();
        let slow_done = slow_done.clone();
        handler(move |body| {
            let release = release.clone();
            let started_tx = started_tx.clone();
            let slow_done = slow_done.clone();
            async move {
                if body == b"slow" {
                    let _ = started_tx.send(());
                    release.cancelled().await;
                    slow_done.fetch_add(1, Ordering::SeqCst);
                }
                Ok(body)
            }
        })
    };
    let server = serve(&transport, "c1", gated, 4, &shutdown).await;
    let slow = tokio::spawn({
        let transport = transport.clone();
        async move {
            transport
                .call("c1", "req-slow", b"slow".to_vec(), PATIENCE)
                .await
        }
    });
    tokio::time::timeout(PATIENCE, started.recv())
        .await
        .expect("the slow request reaches the handler");

    delete_queues(&url, &[conductor_queue(&prefix, "c1")]).await;
    // The queue is declared again after its hold (2.5 s); until then calls are unroutable.
    let deadline = Instant::now() + Duration::from_secs(8);
    let answered = loop {
        match transport
            .call("c1", "req-new", b"new".to_vec(), Duration::from_secs(2))
            .await
        {
            Ok(reply) => break reply,
            Err(err) => {
                assert!(
                    Instant::now() < deadline,
                    "no call answered while the request taken before the loss still ran: {err:?}"
                );
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        }
    };
    assert_eq!(answered, b"new");
    assert_eq!(
        slow_done.load(Ordering::SeqCst),
        0,
        "the slow request was not held"
    );

    // At shutdown the request taken before the loss still runs to its end.
    release.cancel();
    shutdown.cancel();
    tokio::time::timeout(PATIENCE, server)
        .await
        .expect("serve returns")
        .expect("join")
        .expect("serve");
    assert_eq!(
        slow_done.load(Ordering::SeqCst),
        1,
        "the slow request ran to its end"
    );
    // Its caller saw its queue go (the request went with it).
    let _ = slow.await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn odd_inputs_are_errors_not_panics() {
    let Some(transport) = connect().await else {
        return;
    };
    let shutdown = CancellationToken::new();
    let server = serve(&transport, "c1", echo(), 4, &shutdown).await;

    let long_host = "h".repeat(300);
    let err = transport
        .call(&long_host, "req-1", Vec::new(), PATIENCE)
        .await
        .expect_err("no queue has such a name");
    assert!(matches!(err, TransportError::Unroutable(_)), "{err:?}");
    let err = transport
        .cast(&long_host, "req-1", Vec::new())
        .await
        .expect_err("no queue has such a name");
    assert!(matches!(err, TransportError::Unroutable(_)), "{err:?}");

    // A request id too long for a message id still travels, in the header.
    let long_request_id = "r".repeat(300);
    let reply = transport
        .call("c1", &long_request_id, b"ping".to_vec(), PATIENCE)
        .await
        .expect("call with a long request id");
    assert_eq!(reply, b"ping");

    // A timeout beyond RabbitMQ's largest TTL is capped rather than refused.
    let reply = transport
        .call("c1", "req-2", b"ping".to_vec(), Duration::MAX)
        .await
        .expect("call with a huge timeout");
    assert_eq!(reply, b"ping");

    let err = transport
        .call("c1", "req-3", vec![0; BROKER_MAX_BODY_BYTES + 1], PATIENCE)
        .await
        .expect_err("too large");
    assert!(matches!(err, TransportError::Unavailable(_)), "{err:?}");

    // None of that hurt the connection.
    let reply = transport
        .call("c1", "req-4", b"ping".to_vec(), PATIENCE)
        .await
        .expect("call");
    assert_eq!(reply, b"ping");

    shutdown.cancel();
    server.await.expect("join").expect("serve");
}

#[tokio::test]
async fn broker_down_at_connect_is_unavailable() {
    // Nothing listens on port 1.
    let err = AmqpTransport::connect("amqp://guest:guest@127.0.0.1:1/%2f", "test")
        .await
        .expect_err("nothing listens on port 1");
    assert!(matches!(err, TransportError::Unavailable(_)), "{err:?}");
}

#[test]
fn queue_names() {
    assert_eq!(conductor_queue("ferrum", "c1"), "ferrum.conductor.c1");
}

/// A real conductor that cannot decode a request (say, from a newer API) answers with an error at
/// once instead of leaving the caller to its timeout, and goes on serving.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_conductor_answers_a_request_it_cannot_decode_at_once() {
    let Some(cluster) = crate::util::Cluster::start(crate::util::ClusterOptions {
        conductors: 1,
        ..crate::util::ClusterOptions::default()
    })
    .await
    else {
        return;
    };
    let url = crate::util::amqp_url().expect("RabbitMQ was reachable a moment ago");
    let prefix = cluster.env_var("FERRUM_TRANSPORT_PREFIX").expect("prefix");
    let transport = AmqpTransport::connect(&url, prefix).await.expect("connect");
    let started = std::time::Instant::now();
    let reply = transport
        .call(
            &cluster.conductor_hosts[0],
            "req-garbage",
            b"\xc1 not MessagePack".to_vec(),
            Duration::from_secs(30),
        )
        .await
        .expect("an answer, not a timeout");
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "took {:?}",
        started.elapsed()
    );
    let answer: ferrum::rpc::RpcResult = ferrum::rpc::decode(&reply).expect("an RPC result");
    let err = answer.expect_err("an error");
    assert!(
        err.to_string().contains("cannot decode the request"),
        "{err}"
    );
    // The conductor still serves the API.
    let node = cluster
        .api
        .create_node(serde_json::json!({"driver": "fake-hardware"}))
        .await;
    assert_eq!(node["provision_state"], "enroll");
}

/// A transport whose conductor queues are quorum queues, with a prefix of its own; the broker's
/// URL and the prefix. Call [`delete_queues`] at the end: a quorum queue is durable.
async fn connect_quorum() -> Option<(Arc<AmqpTransport>, String, String)> {
    let url = crate::util::amqp_url()?;
    let prefix = format!("test-{}", Uuid::new_v4().simple());
    let transport = AmqpTransport::connect_with(&url, &prefix, QueueType::Quorum)
        .await
        .unwrap_or_else(|err| panic!("RabbitMQ answers on the network but not to AMQP: {err}"));
    Some((Arc::new(transport), url, prefix))
}

/// A channel of a connection of its own, to look at the broker beside the transport.
async fn raw_channel(url: &str) -> (lapin::Connection, lapin::Channel) {
    let connection = lapin::Connection::connect(url, lapin::ConnectionProperties::default())
        .await
        .expect("raw connection");
    let channel = connection.create_channel().await.expect("raw channel");
    (connection, channel)
}

async fn delete_queues(url: &str, names: &[String]) {
    let (_connection, channel) = raw_channel(url).await;
    for name in names {
        let _ = channel
            .queue_delete(name.as_str().into(), Default::default())
            .await;
    }
}

/// Quorum conductor queues serve calls like classic ones; what the server rejects, or loses
/// to a panic, is dead-lettered for an operator to read instead of dropped.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn quorum_queues_serve_and_dead_letter_what_is_rejected() {
    let Some((transport, url, prefix)) = connect_quorum().await else {
        return;
    };
    let shutdown = CancellationToken::new();
    let picky = handler(|body: Vec<u8>| async move {
        assert_ne!(body, b"boom", "the handler blew up");
        if body == b"garbage" {
            return Err(Rejection::silent("not MessagePack"));
        }
        Ok(body)
    });
    let server = serve(&transport, "c1", picky, 1, &shutdown).await;
    let reply = transport
        .call("c1", "req-1", b"ping".to_vec(), PATIENCE)
        .await
        .expect("call");
    assert_eq!(reply, b"ping");

    // It is a quorum queue: declaring it classic is refused.
    let queue = conductor_queue(&prefix, "c1");
    let (_connection, channel) = raw_channel(&url).await;
    let mut classic = lapin::types::FieldTable::default();
    classic.insert(
        "x-queue-type".into(),
        lapin::types::AMQPValue::LongString("classic".into()),
    );
    let refused = channel
        .queue_declare(
            queue.as_str().into(),
            lapin::options::QueueDeclareOptions {
                durable: true,
                ..Default::default()
            },
            classic,
        )
        .await;
    assert!(refused.is_err(), "{queue} is not a quorum queue");

    for body in [&b"garbage"[..], b"boom"] {
        let err = transport
            .call("c1", "req-2", body.to_vec(), Duration::from_millis(500))
            .await
            .expect_err("no reply");
        assert!(matches!(err, TransportError::Timeout { .. }), "{err:?}");
    }
    // The refused declare closed that channel: another one.
    let (_connection, channel) = raw_channel(&url).await;
    let dead_letters = dead_letter_queue(&prefix);
    let mut dead = Vec::new();
    let deadline = Instant::now() + PATIENCE;
    while dead.len() < 2 && Instant::now() < deadline {
        match channel
            .basic_get(
                dead_letters.as_str().into(),
                lapin::options::BasicGetOptions { no_ack: true },
            )
            .await
            .expect("basic.get on the dead-letter queue")
        {
            Some(message) => dead.push(message.delivery.data),
            None => tokio::time::sleep(Duration::from_millis(50)).await,
        }
    }
    assert_eq!(dead, [b"garbage".to_vec(), b"boom".to_vec()]);
    let reply = transport
        .call("c1", "req-3", b"ping".to_vec(), PATIENCE)
        .await
        .expect("the server still serves");
    assert_eq!(reply, b"ping");

    shutdown.cancel();
    server.await.expect("join").expect("serve");
    delete_queues(&url, &[queue, dead_letters]).await;
}

/// A quorum queue outlives its conductor: its callers are told at once (within two queue
/// checks) that the request is lost, as when a classic queue goes with its conductor, and what
/// they sent never runs when a conductor consumes the queue again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_quorum_queue_without_its_conductor_loses_its_calls_and_never_runs_them_later() {
    let Some((transport, url, prefix)) = connect_quorum().await else {
        return;
    };
    let (seen_tx, mut seen) = mpsc::unbounded_channel();
    let recording = handler(move |body: Vec<u8>| {
        let seen_tx = seen_tx.clone();
        async move {
            let _ = seen_tx.send(body.clone());
            Ok(body)
        }
    });
    let shutdown = CancellationToken::new();
    let server = serve(&transport, "c1", recording.clone(), 4, &shutdown).await;
    transport
        .call("c1", "req-1", b"first".to_vec(), PATIENCE)
        .await
        .expect("call");
    shutdown.cancel();
    server.await.expect("join").expect("serve");

    let started = Instant::now();
    let err = transport
        .call("c1", "req-2", b"late".to_vec(), Duration::from_secs(30))
        .await
        .expect_err("nobody consumes");
    assert!(matches!(err, TransportError::Lost(_)), "{err:?}");
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "told after {:?}",
        started.elapsed()
    );

    let shutdown = CancellationToken::new();
    let server = serve(&transport, "c1", recording, 4, &shutdown).await;
    let reply = transport
        .call("c1", "req-3", b"again".to_vec(), PATIENCE)
        .await
        .expect("served again");
    assert_eq!(reply, b"again");
    tokio::time::sleep(Duration::from_millis(500)).await;
    shutdown.cancel();
    server.await.expect("join").expect("serve");
    let mut handled = Vec::new();
    while let Ok(body) = seen.try_recv() {
        handled.push(String::from_utf8_lossy(&body).into_owned());
    }
    assert_eq!(handled, ["first", "again"], "the lost request ran");
    delete_queues(
        &url,
        &[conductor_queue(&prefix, "c1"), dead_letter_queue(&prefix)],
    )
    .await;
}

/// A request whose ack is lost with its consumer's connection (the broker node it was on died)
/// is delivered again to the consumer attached anew, and answered with the reply its first
/// handling made, not handled twice (a conductor would apply it twice had another request
/// changed its node in between: the node keeps only the key of the last request applied).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_delivered_again_after_its_ack_was_lost_is_not_handled_twice() {
    let Some(url) = crate::util::amqp_url() else {
        return;
    };
    let broker: lapin::uri::AMQPUri = url
        .parse()
        .expect("FERRUM_TEST_AMQP_URL is not an AMQP URL");
    let link = Arc::new(
        crate::util::link_proxy::LinkProxy::start(&broker.authority.host, broker.authority.port)
            .await,
    );
    let mut through_link = broker.clone();
    through_link.authority.host = "127.0.0.1".to_owned();
    through_link.authority.port = link.port;
    let prefix = format!("test-{}", Uuid::new_v4().simple());
    let server_side =
        AmqpTransport::connect_with(&through_link.to_string(), &prefix, QueueType::Quorum)
            .await
            .expect("server transport");
    let client = AmqpTransport::connect_with(&url, &prefix, QueueType::Quorum)
        .await
        .expect("client transport");
    let (seen_tx, mut seen) = mpsc::unbounded_channel();
    let (cut_tx, mut cut_done) = mpsc::unbounded_channel();
    let cutting = handler(move |body: Vec<u8>| {
        let (seen_tx, cut_tx, link) = (seen_tx.clone(), cut_tx.clone(), link.clone());
        async move {
            let _ = seen_tx.send(String::from_utf8_lossy(&body).into_owned());
            if body == b"cut" {
                // The connection dies while the request runs: its reply and ack are lost.
                link.cut_now();
                tokio::time::sleep(Duration::from_millis(300)).await;
                let _ = cut_tx.send(());
            }
            Ok([b"reply to ".as_slice(), &body].concat())
        }
    });
    let shutdown = CancellationToken::new();
    let server = serve(&server_side, "c1", cutting, 4, &shutdown).await;
    let cut = tokio::spawn(async move {
        client
            .call("c1", "req-cut", b"cut".to_vec(), Duration::from_secs(20))
            .await
            .map(|reply| (reply, client))
    });
    tokio::time::timeout(PATIENCE, cut_done.recv())
        .await
        .expect("the request reached the handler");
    let (reply, client) = cut
        .await
        .expect("join")
        .expect("answered by its delivery again (the first reply went with the connection)");
    assert_eq!(reply, b"reply to cut");
    let reply = client
        .call("c1", "req-other", b"other".to_vec(), PATIENCE)
        .await
        .expect("served after");
    assert_eq!(reply, b"reply to other");

    shutdown.cancel();
    server.await.expect("join").expect("serve");
    let mut handled = Vec::new();
    while let Ok(body) = seen.try_recv() {
        handled.push(body);
    }
    assert_eq!(handled, ["cut", "other"], "handled twice");
    delete_queues(
        &url,
        &[conductor_queue(&prefix, "c1"), dead_letter_queue(&prefix)],
    )
    .await;
}
