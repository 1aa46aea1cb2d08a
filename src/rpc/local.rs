//! The in-process transport of the all-in-one form: the same [`Transport`] contract as AMQP, with
//! the same envelope bytes, dispatch, timeouts and errors, but a map of handlers instead of a broker.

use std::{
    collections::HashMap,
    sync::{Arc, RwLock},
    time::Duration,
};

use tokio::sync::Semaphore;
use tokio_util::{sync::CancellationToken, task::TaskTracker};
use tracing::warn;

use super::transport::{Listener, RequestHandler, Transport, TransportError};

/// A server registered under a host name.
#[derive(Clone)]
struct Server {
    handler: Arc<dyn RequestHandler>,
    /// At most `max_in_flight` requests at once, as the AMQP prefetch does.
    slots: Arc<Semaphore>,
    /// The requests being handled, so that shutdown can wait for them.
    tracker: TaskTracker,
}

#[derive(Clone, Default)]
pub struct LocalTransport {
    servers: Arc<RwLock<HashMap<String, Server>>>,
}

impl LocalTransport {
    pub fn new() -> Self {
        LocalTransport::default()
    }

    fn server(&self, host: &str) -> Result<Server, TransportError> {
        self.servers
            .read()
            .map_err(|_| TransportError::Unavailable("local transport poisoned".to_owned()))?
            .get(host)
            .cloned()
            .ok_or_else(|| TransportError::Unroutable(host.to_owned()))
    }

    /// Hands `body` to `host`'s handler on a task of its own (so a caller that times out does not
    /// cancel the work, as with a broker) and returns the reply channel.
    fn deliver(
        &self,
        host: &str,
        body: Vec<u8>,
    ) -> Result<tokio::sync::oneshot::Receiver<Vec<u8>>, TransportError> {
        let server = self.server(host)?;
        let (reply, replied) = tokio::sync::oneshot::channel();
        server.tracker.clone().spawn(async move {
            let Ok(_slot) = server.slots.acquire().await else {
                return;
            };
            match server.handler.handle(body).await {
                Ok(bytes) => {
                    // The caller may have stopped waiting; that is its business.
                    let _ = reply.send(bytes);
                }
                Err(rejection) => {
                    warn!(reason = %rejection.reason, "rejected an undecodable request");
                    if let Some(bytes) = rejection.reply {
                        let _ = reply.send(bytes);
                    }
                }
            }
        });
        Ok(replied)
    }
}

#[async_trait::async_trait]
impl Transport for LocalTransport {
    async fn call(
        &self,
        host: &str,
        _request_id: &str,
        body: Vec<u8>,
        timeout: Duration,
    ) -> Result<Vec<u8>, TransportError> {
        let replied = self.deliver(host, body)?;
        match tokio::time::timeout(timeout, replied).await {
            Ok(Ok(bytes)) => Ok(bytes),
            // The handler rejected the request: no reply will come, as over AMQP.
            Ok(Err(_)) | Err(_) => Err(TransportError::Timeout {
                host: host.to_owned(),
                after: timeout,
            }),
        }
    }

    async fn cast(
        &self,
        host: &str,
        _request_id: &str,
        body: Vec<u8>,
    ) -> Result<(), TransportError> {
        self.deliver(host, body).map(|_| ())
    }

    async fn listen(
        &self,
        host: &str,
        handler: Arc<dyn RequestHandler>,
        max_in_flight: usize,
        shutdown: CancellationToken,
    ) -> Result<Listener, TransportError> {
        let server = Server {
            handler,
            slots: Arc::new(Semaphore::new(max_in_flight.max(1))),
            tracker: TaskTracker::new(),
        };
        self.servers
            .write()
            .map_err(|_| TransportError::Unavailable("local transport poisoned".to_owned()))?
            .insert(host.to_owned(), server.clone());
        let servers = self.servers.clone();
        let host = host.to_owned();
        // In-process: attached from the start until shutdown, and never lost.
        let (_, attached) = tokio::sync::watch::channel(true);
        Ok(Listener::new(
            async move {
                shutdown.cancelled().await;
                // Stop routing here, then let the requests already taken finish.
                if let Ok(mut map) = servers.write() {
                    map.remove(&host);
                }
                server.tracker.close();
                server.tracker.wait().await;
                Ok(())
            },
            attached,
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rpc::transport::Rejection;

    struct Echo(Duration);

    #[async_trait::async_trait]
    impl RequestHandler for Echo {
        async fn handle(&self, body: Vec<u8>) -> Result<Vec<u8>, Rejection> {
            tokio::time::sleep(self.0).await;
            if body == b"garbage" {
                return Err(Rejection::silent("undecodable"));
            }
            Ok(body)
        }
    }

    #[tokio::test]
    async fn round_trip_unroutable_timeout_and_shutdown() {
        let t = LocalTransport::new();
        let stop = CancellationToken::new();
        let listener = t
            .listen(
                "c1",
                Arc::new(Echo(Duration::from_millis(50))),
                4,
                stop.clone(),
            )
            .await
            .unwrap();
        let serving = tokio::spawn(listener.run());

        let reply = t
            .call("c1", "req-1", b"hi".to_vec(), Duration::from_secs(5))
            .await
            .unwrap();
        assert_eq!(reply, b"hi");
        assert!(matches!(
            t.call("nobody", "req-2", vec![], Duration::from_secs(5))
                .await,
            Err(TransportError::Unroutable(_))
        ));
        assert!(matches!(
            t.call("c1", "req-3", b"x".to_vec(), Duration::from_millis(5))
                .await,
            Err(TransportError::Timeout { .. })
        ));
        assert!(matches!(
            t.call("c1", "req-4", b"garbage".to_vec(), Duration::from_secs(5))
                .await,
            Err(TransportError::Timeout { .. })
        ));

        // A request in flight at shutdown still gets its reply; later ones are unroutable.
        let in_flight = {
            let t = t.clone();
            tokio::spawn(async move {
                t.call("c1", "req-5", b"late".to_vec(), Duration::from_secs(5))
                    .await
            })
        };
        tokio::time::sleep(Duration::from_millis(10)).await;
        stop.cancel();
        serving.await.unwrap().unwrap();
        assert_eq!(in_flight.await.unwrap().unwrap(), b"late");
        assert!(matches!(
            t.call("c1", "req-6", vec![], Duration::from_secs(5)).await,
            Err(TransportError::Unroutable(_))
        ));
    }
}
