//! An MCP client on tokio that starts a server command and talks to it over its stdio, in
//! about 100 lines: the handshake (a `server/discover` probe, or `initialize`), `tools/list`,
//! then a typed `tools/call` of `echo`. Prints `TOKIO_CLIENT_OK <version>` on success; a
//! result with `isError` (the tool failed, a wrong argument name, say) is a failure too.
//!
//! `cargo run -p mcpwire-tokio --example tokio_child_client -- ECHO_ARG -- SERVER COMMAND...`

use std::time::Duration;

use mcpwire::conn::RequestOptions;
use mcpwire::{Config, OwnedEvent};
use mcpwire_tokio::stdio::{spawn, stop};
use serde::Serialize;
use tokio::process::Command;

#[derive(Serialize)]
struct Call<'a> {
    name: &'a str,
    arguments: serde_json::Value,
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (arg, command) = match args.split_first() {
        Some((arg, rest)) if rest.first().map(String::as_str) == Some("--") && rest.len() > 1 => {
            (arg.clone(), rest[1..].to_vec())
        }
        _ => return Err("usage: tokio_child_client ECHO_ARG -- SERVER COMMAND...".into()),
    };
    let (mut io, child) = spawn(
        Command::new(&command[0]).args(&command[1..]),
        Config::client("tokio-child-client", "1.0"),
    )
    .map_err(|e| format!("cannot run {}: {e}", command[0]))?;
    let mut version = String::new();
    // The session, whatever its outcome: the server is stopped after it on every way out
    // (stdin closed, then SIGTERM, then SIGKILL), not killed with the client.
    let session = async {
        let timeout = tokio::time::sleep(Duration::from_secs(30));
        tokio::pin!(timeout);
        let (mut listed, mut called) = (None, None);
        loop {
            let event = tokio::select! {
                e = io.next_event() => e?.ok_or("the server closed the connection")?,
                () = &mut timeout => return Err("no answer within 30 s".into()),
            };
            let now = io.now();
            match event {
                OwnedEvent::Ready { version: v } => {
                    version = v.as_str().to_owned();
                    println!("ready: {version}");
                    listed = Some(io.connection().request(now, "tools/list", None)?);
                }
                OwnedEvent::Response { request, .. } if Some(request) == listed => {
                    let call = Call {
                        name: "echo",
                        arguments: serde_json::json!({ arg.as_str(): "hello from tokio" }),
                    };
                    called = Some(io.connection().request_typed(
                        now,
                        "tools/call",
                        &call,
                        RequestOptions::default(),
                    )?);
                }
                OwnedEvent::Response { request, result } if Some(request) == called => {
                    println!("echo: {result}");
                    let result: serde_json::Value = serde_json::from_str(&result)?;
                    return Ok(result["isError"] == true);
                }
                // Whatever else ends one of our requests ends the session, with its reason: not a
                // wait for the timeout.
                OwnedEvent::Error { code, message, .. } => {
                    return Err(format!("error {code}: {message}").into());
                }
                OwnedEvent::InvalidResponse { .. } => {
                    return Err(
                        "the server's answer is not a valid result (larger than the frame \
                            limit, or both a result and an error)"
                            .into(),
                    );
                }
                OwnedEvent::TimedOut { .. } => {
                    return Err("the server did not answer in time".into());
                }
                OwnedEvent::Failed { reason, .. } => {
                    return Err(format!("failed: {reason:?}").into());
                }
                OwnedEvent::UrlElicitationRequired { elicitations, .. } => {
                    return Err(
                        format!("the server needs a URL visited first: {elicitations}").into(),
                    );
                }
                OwnedEvent::InputRequired { .. } | OwnedEvent::TaskCreated { .. } => {
                    return Err("the server answered in a way this client does not follow".into());
                }
                OwnedEvent::Violation { kind, .. } => {
                    return Err(format!("the server broke the protocol: {kind:?}").into());
                }
                OwnedEvent::Closed { reason } => return Err(format!("closed: {reason:?}").into()),
                // A request of the server's this client has nothing for is answered, not left
                // to the server's timeout.
                OwnedEvent::Request { id, method, .. } => {
                    let text = format!("{method} is not handled by this client");
                    io.connection()
                        .respond_error(id.as_id(), -32601, &text, None)?;
                }
                _ => {}
            }
        }
    };
    let outcome: Result<bool, Box<dyn std::error::Error>> = session.await;
    stop(io, child, Duration::from_secs(2)).await?;
    if outcome? {
        return Err("the echo tool reported an error".into());
    }
    println!("TOKIO_CLIENT_OK {version}");
    Ok(())
}
