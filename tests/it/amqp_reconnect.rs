//! Losing the broker connection: calls fail fast with `Unavailable`, then the client
//! reconnects and the server attaches to its queue again. The connection is cut by a TCP
//! proxy between the transports and the RabbitMQ at `FERRUM_TEST_AMQP_URL`. When the broker
//! is unreachable the test says so and returns (it fails under `FERRUM_REQUIRE_SERVICES=1`).
use std::{
    sync::{
        Arc, Mutex,
        atomic::{AtomicBool, AtomicUsize, Ordering},
    },
    time::{Duration, Instant},
};

use ferrum::rpc::{
    amqp::AmqpTransport,
    transport::{Rejection, RequestHandler, Transport, TransportError},
};
use lapin::uri::AMQPUri;
use tokio::{
    net::{TcpListener, TcpStream},
    task::AbortHandle,
};
use tokio_util::sync::CancellationToken;

/// Forwards connections to the broker until `cut`, then refuses them until `restore`.
struct Proxy {
    url: String,
    open: Arc<AtomicBool>,
    /// Connections refused while cut: reconnection attempts.
    refused: Arc<AtomicUsize>,
    links: Arc<Mutex<Vec<AbortHandle>>>,
    accept: AbortHandle,
}

impl Proxy {
    async fn start(broker: &AMQPUri) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let mut url = broker.clone();
        url.authority.host = "127.0.0.1".to_owned();
        url.authority.port = listener.local_addr().expect("addr").port();
        let upstream = (broker.authority.host.clone(), broker.authority.port);
        let open = Arc::new(AtomicBool::new(true));
        let refused = Arc::new(AtomicUsize::new(0));
        let links = Arc::new(Mutex::new(Vec::new()));
        let accept = tokio::spawn({
            let open = open.clone();
            let refused = refused.clone();
            let links = links.clone();
            async move {
                while let Ok((mut client, _)) = listener.accept().await {
                    if !open.load(Ordering::SeqCst) {
                        // Dropping it refuses the connection.
                        refused.fetch_add(1, Ordering::SeqCst);
                        continue;
                    }
                    let upstream = upstream.clone();
                    let link = tokio::spawn(async move {
                        if let Ok(mut broker) = TcpStream::connect(upstream).await {
                            let _ = tokio::io::copy_bidirectional(&mut client, &mut broker).await;
                        }
                    });
                    links.lock().expect("links").push(link.abort_handle());
                }
            }
        })
        .abort_handle();
        Self {
            url: url.to_string(),
            open,
            refused,
            links,
            accept,
        }
    }

    fn cut(&self) {
        self.open.store(false, Ordering::SeqCst);
        for link in self.links.lock().expect("links").drain(..) {
            link.abort();
        }
    }

    fn restore(&self) {
        self.open.store(true, Ordering::SeqCst);
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.accept.abort();
        self.cut();
    }
}

struct Echo;

#[async_trait::async_trait]
impl RequestHandler for Echo {
    async fn handle(&self, body: Vec<u8>) -> Result<Vec<u8>, Rejection> {
        Ok(body)
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calls_fail_fast_while_the_broker_is_away_then_recover() {
    let Some(url) = crate::util::amqp_url() else {
        return;
    };
    let broker: AMQPUri = url
        .parse()
        .expect("FERRUM_TEST_AMQP_URL is not an AMQP URL");
    let proxy = Proxy::start(&broker).await;
    let prefix = format!("test-{}", uuid::Uuid::new_v4().simple());
    let connect = || async {
        AmqpTransport::connect(&proxy.url, &prefix)
            .await
            .unwrap_or_else(|err| {
                panic!("RabbitMQ answers on the network but not to AMQP through the proxy: {err}")
            })
    };
    let server = connect().await;
    let client = connect().await;
    let shutdown = CancellationToken::new();
    let listener = server
        .listen("c1", Arc::new(Echo), 4, shutdown.clone())
        .await
        .expect("listen");
    let attached = listener.attached();
    assert!(*attached.borrow(), "attached once listening");
    let serving = tokio::spawn(listener.run());
    // A conductor keeps only its listener: the server's reconnection must not depend on the
    // transport handle (dropping it once stopped the reconnecting supervisor for good).
    drop(server);
    let timeout = Duration::from_secs(5);
    let reply = client
        .call("c1", "req-1", b"ping".to_vec(), timeout)
        .await
        .expect("call before the cut");
    assert_eq!(reply, b"ping");

    proxy.cut();
    // A call already on the wire may fail either way; the next ones must not wait.
    let deadline = Instant::now() + timeout;
    loop {
        let started = Instant::now();
        match client.call("c1", "req-2", b"ping".to_vec(), timeout).await {
            Err(TransportError::Unavailable(_)) if started.elapsed() < timeout / 5 => break,
            outcome => assert!(
                Instant::now() < deadline,
                "calls still do not fail fast: {outcome:?}"
            ),
        }
    }

    // Both transports keep trying, backing off, while the broker is away.
    let deadline = Instant::now() + Duration::from_secs(10);
    while proxy.refused.load(Ordering::SeqCst) < 4 {
        assert!(Instant::now() < deadline, "no reconnection attempts");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let err = client
        .call("c1", "req-3", b"ping".to_vec(), timeout)
        .await
        .expect_err("the broker is still away");
    assert!(matches!(err, TransportError::Unavailable(_)), "{err:?}");
    assert!(
        !*attached.borrow(),
        "the consumer reports it is not attached"
    );

    proxy.restore();
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        match client.call("c1", "req-4", b"ping".to_vec(), timeout).await {
            Ok(reply) => {
                assert_eq!(reply, b"ping");
                break;
            }
            Err(err) => assert!(Instant::now() < deadline, "no recovery: {err}"),
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    assert!(
        *attached.borrow(),
        "the consumer reports it is attached again"
    );

    shutdown.cancel();
    tokio::time::timeout(timeout, serving)
        .await
        .expect("serve returns")
        .expect("join")
        .expect("serve");
}

/// Whether the queue `name` exists, asked on a connection of the test's own.
async fn queue_exists(connection: &lapin::Connection, name: &str) -> bool {
    let channel = connection.create_channel().await.expect("channel");
    let options = lapin::options::QueueDeclareOptions {
        passive: true,
        ..Default::default()
    };
    match channel
        .queue_declare(name.into(), options, lapin::types::FieldTable::default())
        .await
    {
        Ok(_) => {
            let _ = channel.close(200, "OK".into()).await;
            true
        }
        Err(err) if matches!(err.kind(), lapin::ErrorKind::ProtocolError(e) if e.get_id() == 404) => {
            false
        }
        Err(err) => panic!("checking the queue {name}: {err}"),
    }
}

/// The fault schedule's lost request: a conductor's broker link goes silent (held, not cut) until
/// the broker drops it for missed heartbeats, taking its auto-delete queue and the request in it;
/// the link comes back at that moment, and the conductor re-attaches at once. Had it declared its
/// queue again at once, the caller's next check would have found a queue and it would have waited
/// for its whole timeout: it learns its request is lost (`Lost`), and the next call is served.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_that_went_with_a_dropped_queue_is_lost_not_left_waiting() {
    let Some(url) = crate::util::amqp_url() else {
        return;
    };
    let broker: AMQPUri = url
        .parse()
        .expect("FERRUM_TEST_AMQP_URL is not an AMQP URL");
    let link =
        crate::util::link_proxy::LinkProxy::start(&broker.authority.host, broker.authority.port)
            .await;
    let mut through_link = broker.clone();
    through_link.authority.host = "127.0.0.1".to_owned();
    through_link.authority.port = link.port;
    let prefix = format!("test-{}", uuid::Uuid::new_v4().simple());
    let server = AmqpTransport::connect(&through_link.to_string(), &prefix)
        .await
        .expect("server transport");
    let client = Arc::new(
        AmqpTransport::connect(&url, &prefix)
            .await
            .expect("client transport"),
    );
    let watcher = lapin::Connection::connect(&url, lapin::ConnectionProperties::default())
        .await
        .expect("watching connection");
    let queue = ferrum::rpc::amqp::conductor_queue(&prefix, "c1");
    let shutdown = CancellationToken::new();
    let listener = server
        .listen("c1", Arc::new(Echo), 4, shutdown.clone())
        .await
        .expect("listen");
    let serving = tokio::spawn(listener.run());
    drop(server);
    let timeout = Duration::from_secs(30);
    let reply = client
        .call("c1", "req-1", b"ping".to_vec(), timeout)
        .await
        .expect("call before the link goes silent");
    assert_eq!(reply, b"ping");

    link.blackhole(true);
    tokio::time::sleep(Duration::from_millis(300)).await;
    let held = tokio::spawn({
        let client = client.clone();
        async move { client.call("c1", "req-2", b"held".to_vec(), timeout).await }
    });
    // The broker drops the silent connection after a few missed heartbeats.
    let deadline = Instant::now() + Duration::from_secs(20);
    while queue_exists(&watcher, &queue).await {
        assert!(
            Instant::now() < deadline,
            "the broker kept the silent connection's queue"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    link.blackhole(false);
    let restored = Instant::now();

    let outcome = tokio::time::timeout(Duration::from_secs(10), held)
        .await
        .expect(
            "the call whose request went with the queue still waits 10 s after the link is back",
        )
        .expect("join");
    match outcome {
        Err(TransportError::Lost(host)) => assert_eq!(host, "c1"),
        // Answered after all: the request reached the conductor before its queue went.
        Ok(reply) => assert_eq!(reply, b"held"),
        Err(err) => panic!("the held call ended as {err:?}"),
    }
    eprintln!(
        "the held call ended {:?} after the link came back",
        restored.elapsed()
    );

    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        match client.call("c1", "req-3", b"again".to_vec(), timeout).await {
            Ok(reply) => {
                assert_eq!(reply, b"again");
                break;
            }
            Err(err) => assert!(Instant::now() < deadline, "not served again: {err}"),
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    shutdown.cancel();
    tokio::time::timeout(Duration::from_secs(10), serving)
        .await
        .expect("serve returns")
        .expect("join")
        .expect("serve");
}
