//! A TCP proxy on loopback in front of a server (MariaDB, RabbitMQ): one process's link to it,
//! which a test can blackhole as a dead link or a stuck middlebox does, and restore, cut right
//! after a given request went through, so that its answer is lost, or cut at once.

use std::{
    sync::{Arc, Mutex, PoisonError},
    time::Duration,
};

use tokio::{
    io::{AsyncReadExt as _, AsyncWriteExt as _},
    net::{
        TcpListener, TcpStream,
        tcp::{OwnedReadHalf, OwnedWriteHalf},
    },
    sync::watch,
    task::JoinHandle,
};
use tokio_util::sync::CancellationToken;

/// How long a cut connection stays open after the marked request went through, answering
/// nothing: time for the server to carry the request out (a statement to commit).
const CUT_AFTER: Duration = Duration::from_millis(300);

/// A TCP proxy on loopback in front of a server: one process's link to it. Blackholed, it
/// holds every connection open and forwards nothing either way, not even a close, and holds
/// new connections unconnected; restored, what it held goes through. Its tasks end when it is
/// dropped.
pub struct LinkProxy {
    pub port: u16,
    open: watch::Sender<bool>,
    /// The bytes whose next passage towards the server cuts its connection (see
    /// [`LinkProxy::cut_after`]).
    marker: Marker,
    /// Bumped by [`LinkProxy::cut_now`]: every connection open then closes.
    cuts: watch::Sender<u64>,
    accept: JoinHandle<()>,
}

type Marker = Arc<Mutex<Option<Vec<u8>>>>;

impl LinkProxy {
    /// A proxy to `host:port`, open.
    pub async fn start(host: &str, port: u16) -> LinkProxy {
        let target = (host.to_owned(), port);
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .expect("proxy listener");
        let port = listener.local_addr().expect("proxy port").port();
        let (open, watching) = watch::channel(true);
        let marker = Marker::default();
        let armed = marker.clone();
        let (cuts, cut_seen) = watch::channel(0);
        let accept = tokio::spawn(async move {
            let mut connections = tokio::task::JoinSet::new();
            loop {
                match listener.accept().await {
                    Ok((inbound, _)) => {
                        while connections.try_join_next().is_some() {}
                        connections.spawn(forward(
                            inbound,
                            target.clone(),
                            watching.clone(),
                            armed.clone(),
                            cut_seen.clone(),
                        ));
                    }
                    Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
                }
            }
        });
        LinkProxy {
            port,
            open,
            marker,
            cuts,
            accept,
        }
    }

    /// Blackholes the link (true), or restores it (false).
    pub fn blackhole(&self, on: bool) {
        self.open.send_replace(!on);
    }

    /// Arms a cut: the next chunk a client sends that contains `marker` reaches the server,
    /// but nothing the server sends on that connection afterwards reaches the client, and the
    /// connection is closed [`CUT_AFTER`] later, as when a server dies right after carrying a
    /// request out. Once; other connections and new ones go on as before.
    pub fn cut_after(&self, marker: &[u8]) {
        *self.marker.lock().unwrap_or_else(PoisonError::into_inner) = Some(marker.to_owned());
    }

    /// Closes every connection open now, both ways, as when the server died; new ones go on as
    /// before.
    pub fn cut_now(&self) {
        self.cuts.send_modify(|n| *n += 1);
    }
}

impl Drop for LinkProxy {
    fn drop(&mut self) {
        // Drops the connections' JoinSet, which aborts them.
        self.accept.abort();
    }
}

async fn forward(
    inbound: TcpStream,
    target: (String, u16),
    mut open: watch::Receiver<bool>,
    marker: Marker,
    mut cuts: watch::Receiver<u64>,
) {
    cuts.borrow_and_update();
    if open.wait_for(|open| *open).await.is_err() {
        return;
    }
    let Ok(outbound) = TcpStream::connect(target).await else {
        return;
    };
    let _ = inbound.set_nodelay(true);
    let _ = outbound.set_nodelay(true);
    let (from_client, to_client) = inbound.into_split();
    let (from_server, to_server) = outbound.into_split();
    let cut = CancellationToken::new();
    // Returning drops both sockets: a cut closes the connection both ways.
    tokio::select! {
        _ = async {
            tokio::join!(
                pump(from_client, to_server, open.clone(), &cut, Some(marker)),
                pump(from_server, to_client, open, &cut, None)
            )
        } => {}
        _ = cuts.changed() => {}
    }
}

/// Copies one direction until its end, each chunk (and the end) waiting while blackholed. The
/// client's direction looks for the armed `marker`: once a chunk holds it, `cut` stops both
/// directions (the answer's at once), and the connection closes when both have returned.
async fn pump(
    mut from: OwnedReadHalf,
    mut to: OwnedWriteHalf,
    mut open: watch::Receiver<bool>,
    cut: &CancellationToken,
    marker: Option<Marker>,
) {
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        let n = tokio::select! {
            read = from.read(&mut buf) => read.unwrap_or(0),
            () = cut.cancelled() => return,
        };
        if open.wait_for(|open| *open).await.is_err() || cut.is_cancelled() {
            return;
        }
        let marked = marker.as_ref().is_some_and(|m| take_if_in(m, &buf[..n]));
        if marked {
            // Before the request goes: its answer must not get through.
            cut.cancel();
        }
        if n == 0 || to.write_all(&buf[..n]).await.is_err() {
            break;
        }
        if marked {
            tokio::time::sleep(CUT_AFTER).await;
            return;
        }
    }
    let _ = to.shutdown().await;
}

/// Whether `chunk` holds the armed marker, disarming it if so.
fn take_if_in(marker: &Marker, chunk: &[u8]) -> bool {
    let mut armed = marker.lock().unwrap_or_else(PoisonError::into_inner);
    let found = armed
        .as_deref()
        .is_some_and(|m| !m.is_empty() && chunk.windows(m.len()).any(|w| w == m));
    if found {
        *armed = None;
    }
    found
}
