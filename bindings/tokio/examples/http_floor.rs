//! The floor of the end-to-end HTTP bench (`.ci/bench-e2e`): the same HTTP stack as
//! `mcpwire serve --http` (hyper's HTTP/1.1 server on tokio's multi-threaded runtime,
//! keep-alive, `TCP_NODELAY`), answering every POST with a fixed JSON-RPC result, with no MCP at all.
//! What an MCP server on this stack loses against it is the cost of its MCP work.
//!
//! ```sh
//! cargo run --release -p mcpwire-tokio --example http_floor -- 127.0.0.1:0
//! ```
//!
//! It prints `listening on http://ADDR/mcp` once bound and stops on Ctrl-C.

use std::convert::Infallible;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;

/// A real answer to the bench's calls: it carries the texts of both tools' answers.
const BODY: &str = r#"{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"hello, world"},{"type":"text","text":"5"}]}}"#;

async fn answer(request: Request<Incoming>) -> Result<Response<Full<Bytes>>, Infallible> {
    let post = request.method() == Method::POST;
    // Read the whole body, as any server must before it answers.
    let read = request.into_body().collect().await.is_ok();
    let (status, body) = match (post, read) {
        (true, true) => (StatusCode::OK, Bytes::from_static(BODY.as_bytes())),
        (false, _) => (StatusCode::METHOD_NOT_ALLOWED, Bytes::new()),
        (true, false) => (StatusCode::BAD_REQUEST, Bytes::new()),
    };
    let mut response = Response::new(Full::new(body));
    *response.status_mut() = status;
    response.headers_mut().insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static("application/json"),
    );
    Ok(response)
}

fn main() -> std::io::Result<()> {
    let addr = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "127.0.0.1:0".into());
    // One worker per core, or TOKIO_WORKER_THREADS (tokio reads it), as in `mcpwire serve`.
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async {
        let listener = tokio::net::TcpListener::bind(&addr).await?;
        println!("listening on http://{}/mcp", listener.local_addr()?);
        loop {
            let (stream, _) = tokio::select! {
                _ = tokio::signal::ctrl_c() => return Ok(()),
                accepted = listener.accept() => match accepted {
                    Ok(a) => a,
                    Err(_) => {
                        // Out of descriptors, or a connection gone before it was accepted:
                        // pause briefly rather than spin.
                        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
                        continue;
                    }
                },
            };
            let _ = stream.set_nodelay(true);
            tokio::spawn(async move {
                let _ = http1::Builder::new()
                    .keep_alive(true)
                    .serve_connection(TokioIo::new(stream), service_fn(answer))
                    .await;
            });
        }
    })
}
