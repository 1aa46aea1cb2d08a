//! The conductor's own web server over `http_root` (`conductor.http_bind`): the deploy ramdisk
//! downloads from it the raw images the conductor published (`drivers::local_image`). Files
//! only, by GET (and HEAD); no listing, no path leaving the root. Ironic leaves this to a web
//! server the operator runs; with Ferrum that stays possible (leave `http_bind` unset).

use std::path::{Component, Path, PathBuf};
use std::time::Duration;

use anyhow::Context as _;
use axum::{
    Router,
    body::Body,
    extract::{Path as UrlPath, State},
    http::{StatusCode, header},
    response::{IntoResponse, Response},
    routing::get,
};
use tokio_util::sync::CancellationToken;

/// How long a client may take to send its request head.
const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(10);

/// The name of the server's own thread; its file readers are `ferrum-files-io`. The server runs
/// apart from the API and the conductor's work, on a runtime of its own: the bytes of ramdisks
/// and images it moves neither delay their answers nor hide among them in the process's CPU
/// time (`top -H`, the lab's figures tell the two apart by these names).
pub const THREAD_NAME: &str = "ferrum-files";

/// Listens on `bind` and serves `root` until `shutdown`, on a thread of its own.
pub fn start(
    bind: std::net::SocketAddr,
    root: PathBuf,
    shutdown: CancellationToken,
) -> anyhow::Result<()> {
    let listener = std::net::TcpListener::bind(bind)
        .and_then(|listener| listener.set_nonblocking(true).map(|()| listener))
        .with_context(|| format!("cannot serve http_root on {bind}"))?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .thread_name(format!("{THREAD_NAME}-io"))
        .build()
        .context("starting the http_root server's runtime")?;
    tracing::info!("Serving {} at http://{bind}/", root.display());
    std::thread::Builder::new()
        .name(THREAD_NAME.to_owned())
        .spawn(move || {
            runtime.block_on(async move {
                match tokio::net::TcpListener::from_std(listener) {
                    Ok(listener) => {
                        crate::http_server::serve(
                            listener,
                            None,
                            router(root),
                            HEADER_READ_TIMEOUT,
                            shutdown,
                        )
                        .await;
                    }
                    Err(e) => tracing::error!(error = %e, "cannot serve http_root on {bind}"),
                }
            });
        })
        .context("starting the http_root server's thread")?;
    Ok(())
}

fn router(root: PathBuf) -> Router {
    Router::new().route("/{*path}", get(file)).with_state(root)
}

/// How much of a file is read at a time. Each read is a trip to tokio's blocking pool and back
/// (two thread wake-ups), which the lab's profile showed costing as much as the bytes' copies at
/// 64 KiB; at 256 KiB there are a quarter as many, for 256 KiB of memory per download.
const READ_CHUNK: usize = 256 << 10;

/// The file at `path` under `root`, streamed; 404 for anything else.
async fn file(State(root): State<PathBuf>, UrlPath(path): UrlPath<String>) -> Response {
    let Some(path) = inside(&root, &path) else {
        return StatusCode::NOT_FOUND.into_response();
    };
    let file = match tokio::fs::File::open(&path).await {
        Ok(file) => file,
        Err(_) => return StatusCode::NOT_FOUND.into_response(),
    };
    let size = match file.metadata().await {
        Ok(meta) if meta.is_file() => meta.len(),
        _ => return StatusCode::NOT_FOUND.into_response(),
    };
    (
        [
            (header::CONTENT_TYPE, "application/octet-stream".to_owned()),
            (header::CONTENT_LENGTH, size.to_string()),
        ],
        Body::from_stream(tokio_util::io::ReaderStream::with_capacity(
            file, READ_CHUNK,
        )),
    )
        .into_response()
}

/// `url_path` as a path under `root`, if every part of it is a plain name.
fn inside(root: &Path, url_path: &str) -> Option<PathBuf> {
    let relative = Path::new(url_path);
    let plain = relative
        .components()
        .all(|c| matches!(c, Component::Normal(_)));
    (plain && !url_path.is_empty() && !url_path.contains('\0')).then(|| root.join(relative))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_plain_paths_under_the_root_are_served() {
        let root = Path::new("/srv/http");
        assert_eq!(
            inside(root, "agent_images/abc"),
            Some(PathBuf::from("/srv/http/agent_images/abc"))
        );
        for bad in [
            "../etc/passwd",
            "agent_images/../../x",
            "/etc/passwd",
            "",
            "./a",
        ] {
            assert_eq!(inside(root, bad), None, "{bad}");
        }
    }
}
