//! The HTTP/1.1 server under the router: the accept loop, optional TLS (rustls, `enable_ssl_api`),
//! the request limits every connection gets, and graceful shutdown (stop accepting, let the
//! requests in flight finish, close idle keep-alive connections). It knows nothing of Ironic:
//! the router answers every request, its errors included; only what hyper refuses before a
//! request exists (a head too large or too slow) is answered, or cut, here.

use std::{
    future::Future,
    io,
    pin::Pin,
    sync::Arc,
    task::{Context, Poll, ready},
    time::{Duration, Instant},
};

use anyhow::Context as _;
use axum::Router;
use hyper::server::conn::http1;
use hyper_util::{rt::TokioIo, service::TowerToHyperService};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, pem::PemObject as _};
use tokio::net::TcpListener;
use tokio_rustls::TlsAcceptor;
use tokio_util::{sync::CancellationToken, task::TaskTracker};
use tracing::{debug, error};

use crate::config::{ApiConfig, TlsVersion};

// The request limits, all in one place (README "Limits" states them).

/// The largest request body, declared (`Content-Length`, refused with 413 before the body is
/// read) or streamed (chunked, cut with 413 when it gets there). 2 MiB, axum's default: a node
/// document or a JSON patch is a few KiB.
pub const MAX_BODY_BYTES: usize = 2 << 20;

/// The largest request head: request line plus header fields. Beyond it hyper answers 431 and
/// closes the connection instead of buffering more. 64 KiB leaves room for large tokens.
/// (The number of header fields is capped too, at hyper's fixed 100, also with 431: setting
/// another count makes hyper allocate the field array on the heap for every request.)
pub const MAX_HEADER_BYTES: usize = 64 << 10;

/// How long to wait before accepting again after an error other than a failed handshake (out of
/// file descriptors, typically), as hyper and axum do.
const ACCEPT_ERROR_PAUSE: Duration = Duration::from_secs(1);

/// The TLS side of `enable_ssl_api`: the certificate chain of `cert_file` and the private key
/// of `key_file` (PEM), served from `tls_minimum_version` up. Errors name the file.
pub fn tls_acceptor(config: &ApiConfig) -> anyhow::Result<TlsAcceptor> {
    let (Some(cert_file), Some(key_file)) = (&config.cert_file, &config.key_file) else {
        anyhow::bail!("serving HTTPS (api.enable_ssl_api) needs api.cert_file and api.key_file");
    };
    let certs = CertificateDer::pem_file_iter(cert_file)
        .and_then(|certs| certs.collect::<Result<Vec<_>, _>>())
        .with_context(|| {
            format!(
                "cannot read a PEM certificate from api.cert_file {}",
                cert_file.display()
            )
        })?;
    if certs.is_empty() {
        anyhow::bail!(
            "api.cert_file {} holds no PEM certificate",
            cert_file.display()
        );
    }
    let key = PrivateKeyDer::from_pem_file(key_file).with_context(|| {
        format!(
            "cannot read a PEM private key from api.key_file {}",
            key_file.display()
        )
    })?;
    let versions: &[&rustls::SupportedProtocolVersion] = match config.tls_minimum_version {
        TlsVersion::V1_2 => &[&rustls::version::TLS13, &rustls::version::TLS12],
        TlsVersion::V1_3 => &[&rustls::version::TLS13],
    };
    let mut tls = rustls::ServerConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_protocol_versions(versions)
    .context("TLS protocol versions")?
    .with_no_client_auth()
    .with_single_cert(certs, key)
    .with_context(|| {
        format!(
            "the key of api.key_file {} does not fit the certificate of api.cert_file {}",
            key_file.display(),
            cert_file.display()
        )
    })?;
    // Clients speak HTTP/1.1 only here.
    tls.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(TlsAcceptor::from(Arc::new(tls)))
}

/// A request extension present on the requests of a TLS listener, so that the links the API
/// writes say `https` (`api::BaseUrl`), as Ironic's do behind its TLS-serving WSGI server.
#[derive(Debug, Clone, Copy)]
pub struct Https;

/// Serves `app` on `listener` (over TLS with `tls`) until `shutdown`; then stops accepting, tells
/// every connection to close once its request in flight is answered, and returns when all have
/// closed.
pub async fn serve(
    listener: TcpListener,
    tls: Option<TlsAcceptor>,
    app: Router,
    header_read_timeout: Duration,
    shutdown: CancellationToken,
) {
    let app = if tls.is_some() {
        app.layer(axum::Extension(Https))
    } else {
        app
    };
    let mut http = http1::Builder::new();
    http.timer(SettledTimer)
        .header_read_timeout(header_read_timeout)
        .max_header_size(MAX_HEADER_BYTES);
    let connections = TaskTracker::new();
    loop {
        let accepted = tokio::select! {
            biased;
            () = shutdown.cancelled() => break,
            accepted = listener.accept() => accepted,
        };
        let stream = match accepted {
            Ok((stream, _peer)) => stream,
            Err(e) => {
                if !is_connection_error(&e) {
                    error!(error = %e, "cannot accept a connection");
                    tokio::select! {
                        () = shutdown.cancelled() => break,
                        () = tokio::time::sleep(ACCEPT_ERROR_PAUSE) => {}
                    }
                }
                continue;
            }
        };
        // Responses are written whole: do not hold their last segment back (Nagle).
        if let Err(e) = stream.set_nodelay(true) {
            debug!(error = %e, "cannot set TCP_NODELAY");
        }
        let (http, app, shutdown) = (http.clone(), app.clone(), shutdown.clone());
        let tls = tls.clone();
        connections.spawn(async move {
            match tls {
                None => serve_connection(&http, stream, app, shutdown).await,
                Some(tls) => {
                    // The handshake gets the time a request head gets: a client that stalls in
                    // it holds a connection no longer than one that stalls in its headers.
                    let stream = tokio::select! {
                        () = shutdown.cancelled() => return,
                        handshake = tokio::time::timeout(header_read_timeout, tls.accept(stream)) => {
                            match handshake {
                                Ok(Ok(stream)) => stream,
                                Ok(Err(e)) => {
                                    debug!(error = %e, "TLS handshake failed");
                                    return;
                                }
                                Err(_) => {
                                    debug!("TLS handshake timed out");
                                    return;
                                }
                            }
                        }
                    };
                    serve_connection(&http, stream, app, shutdown).await;
                }
            }
        });
    }
    drop(listener);
    connections.close();
    connections.wait().await;
}

/// hyper's timer (it times the reading of request heads), whose sleeps end only after the
/// sockets were looked at once more past their deadline. A process paused past a deadline
/// (SIGSTOP, a frozen VM) wakes with its wait for socket events interrupted (EINTR), and the
/// runtime then fires the timers that ran out before it learns which sockets are readable: a
/// keep-alive connection whose next request arrived during the pause would be closed without
/// an answer, the client's request timed out for the server's own pause. A further millisecond
/// puts one look at the sockets between the deadline and the sleep's end.
#[derive(Clone, Copy, Debug)]
struct SettledTimer;

/// How long a [`SettledTimer`] sleep lasts past its deadline: the next timer tick, which the
/// runtime reaches only after polling the sockets again.
const SETTLE: Duration = Duration::from_millis(1);

impl hyper::rt::Timer for SettledTimer {
    fn sleep(&self, duration: Duration) -> Pin<Box<dyn hyper::rt::Sleep>> {
        self.sleep_until(Instant::now() + duration)
    }

    fn sleep_until(&self, deadline: Instant) -> Pin<Box<dyn hyper::rt::Sleep>> {
        Box::pin(SettledSleep {
            sleep: Box::pin(tokio::time::sleep_until(deadline.into())),
            settling: false,
        })
    }
}

struct SettledSleep {
    sleep: Pin<Box<tokio::time::Sleep>>,
    /// The deadline passed; now sleeping [`SETTLE`].
    settling: bool,
}

impl Future for SettledSleep {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        loop {
            ready!(self.sleep.as_mut().poll(cx));
            if self.settling {
                return Poll::Ready(());
            }
            self.settling = true;
            let settled = tokio::time::Instant::now() + SETTLE;
            self.sleep.as_mut().reset(settled);
        }
    }
}

impl hyper::rt::Sleep for SettledSleep {}

/// Serves one connection's requests until it closes, or until `shutdown` and its request in
/// flight is answered.
async fn serve_connection<IO>(
    http: &http1::Builder,
    stream: IO,
    app: Router,
    shutdown: CancellationToken,
) where
    IO: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let connection = http.serve_connection(TokioIo::new(stream), TowerToHyperService::new(app));
    let mut connection = std::pin::pin!(connection);
    let ended = tokio::select! {
        ended = connection.as_mut() => ended,
        () = shutdown.cancelled() => {
            connection.as_mut().graceful_shutdown();
            connection.await
        }
    };
    // A client gone, a head too large or too slow: the client's problem, not ours.
    if let Err(e) = ended {
        debug!(error = %e, "connection closed with an error");
    }
}

/// An error of one connection's handshake, not of the listener: accept the next one at once.
fn is_connection_error(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::ConnectionRefused
            | io::ErrorKind::ConnectionAborted
            | io::ErrorKind::ConnectionReset
    )
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use axum::routing::get;
    use tokio::{
        io::{AsyncReadExt as _, AsyncWriteExt as _},
        net::TcpStream,
        sync::{Notify, oneshot},
    };

    use super::*;

    /// Shutdown lets a request in flight finish and be answered, closes idle keep-alive
    /// connections, stops accepting, and then `serve` returns.
    #[tokio::test]
    async fn shutdown_finishes_requests_in_flight() {
        let entered = Arc::new(Notify::new());
        let (release, released) = oneshot::channel::<()>();
        let released = Arc::new(tokio::sync::Mutex::new(Some(released)));
        let app = Router::new().route("/", get(|| async { "idle" })).route(
            "/slow",
            get({
                let entered = entered.clone();
                move || {
                    let (entered, released) = (entered.clone(), released.clone());
                    async move {
                        entered.notify_one();
                        let released = released.lock().await.take();
                        if let Some(released) = released {
                            let _ = released.await;
                        }
                        "done"
                    }
                }
            }),
        );
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let shutdown = CancellationToken::new();
        let server = tokio::spawn(serve(
            listener,
            None,
            app,
            crate::config::ApiConfig::default().header_read_timeout,
            shutdown.clone(),
        ));

        // An idle keep-alive connection, after one answered request.
        let mut idle = TcpStream::connect(addr).await.unwrap();
        idle.write_all(b"GET / HTTP/1.1\r\nHost: t\r\n\r\n")
            .await
            .unwrap();
        let mut buf = vec![0; 1024];
        let n = idle.read(&mut buf).await.unwrap();
        assert!(buf[..n].starts_with(b"HTTP/1.1 200"));

        let mut busy = TcpStream::connect(addr).await.unwrap();
        busy.write_all(b"GET /slow HTTP/1.1\r\nHost: t\r\n\r\n")
            .await
            .unwrap();
        entered.notified().await;
        shutdown.cancel();
        // The idle connection is closed; the busy one still gets its answer.
        let n = tokio::time::timeout(Duration::from_secs(5), idle.read(&mut buf))
            .await
            .expect("idle connection closed")
            .unwrap();
        assert_eq!(n, 0);
        assert!(!server.is_finished());
        release.send(()).unwrap();
        let mut answer = Vec::new();
        tokio::time::timeout(Duration::from_secs(5), busy.read_to_end(&mut answer))
            .await
            .expect("answered, then closed")
            .unwrap();
        let answer = String::from_utf8(answer).unwrap();
        assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
        assert!(answer.ends_with("done"), "{answer}");
        tokio::time::timeout(Duration::from_secs(5), server)
            .await
            .expect("serve returns")
            .unwrap();
        // Nothing of this server answers there any more. (The port is free again: a test
        // running beside this one may have been given it, so a connection alone proves nothing.)
        if let Ok(mut again) = TcpStream::connect(addr).await {
            let _ = again.write_all(b"GET / HTTP/1.1\r\nHost: t\r\n\r\n").await;
            let n = tokio::time::timeout(Duration::from_secs(2), again.read(&mut buf))
                .await
                .ok()
                .and_then(Result::ok)
                .unwrap_or(0);
            let reply = String::from_utf8_lossy(&buf[..n]);
            assert!(
                !reply.ends_with("idle"),
                "the server answers after it returned: {reply}"
            );
        }
    }
}
