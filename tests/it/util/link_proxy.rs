//! A TCP proxy on loopback in front of a server (MariaDB, RabbitMQ): one process's link to it,
//! which a test can blackhole as a dead link or a stuck middlebox does, and restore.

use std::time::Duration;

use tokio::{
    io::{AsyncReadExt as _, AsyncWriteExt as _},
    net::{
        TcpListener, TcpStream,
        tcp::{OwnedReadHalf, OwnedWriteHalf},
    },
    sync::watch,
    task::JoinHandle,
};

/// A TCP proxy on loopback in front of a server: one process's link to it. Blackholed, it
/// holds every connection open and forwards nothing either way, not even a close, and holds
/// new connections unconnected; restored, what it held goes through. Its tasks end when it is
/// dropped.
pub struct LinkProxy {
    pub port: u16,
    open: watch::Sender<bool>,
    accept: JoinHandle<()>,
}

impl LinkProxy {
    /// A proxy to `host:port`, open.
    pub async fn start(host: &str, port: u16) -> LinkProxy {
        let target = (host.to_owned(), port);
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .expect("proxy listener");
        let port = listener.local_addr().expect("proxy port").port();
        let (open, watching) = watch::channel(true);
        let accept = tokio::spawn(async move {
            let mut connections = tokio::task::JoinSet::new();
            loop {
                match listener.accept().await {
                    Ok((inbound, _)) => {
                        while connections.try_join_next().is_some() {}
                        connections.spawn(forward(inbound, target.clone(), watching.clone()));
                    }
                    Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
                }
            }
        });
        LinkProxy { port, open, accept }
    }

    /// Blackholes the link (true), or restores it (false).
    pub fn blackhole(&self, on: bool) {
        self.open.send_replace(!on);
    }
}

impl Drop for LinkProxy {
    fn drop(&mut self) {
        // Drops the connections' JoinSet, which aborts them.
        self.accept.abort();
    }
}

async fn forward(inbound: TcpStream, target: (String, u16), mut open: watch::Receiver<bool>) {
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
    tokio::join!(
        pump(from_client, to_server, open.clone()),
        pump(from_server, to_client, open)
    );
}

/// Copies one direction until its end, each chunk (and the end) waiting while blackholed.
async fn pump(mut from: OwnedReadHalf, mut to: OwnedWriteHalf, mut open: watch::Receiver<bool>) {
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        let n = from.read(&mut buf).await.unwrap_or(0);
        if open.wait_for(|open| *open).await.is_err() {
            return;
        }
        if n == 0 || to.write_all(&buf[..n]).await.is_err() {
            break;
        }
    }
    let _ = to.shutdown().await;
}
