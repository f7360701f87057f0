//! The `mcpwire` command: probe any stdio MCP server, serve a demo server, watch a session.
//!
//! The library is sans-IO; this binary is one IO layer over it, using std only.

// This binary is the IO layer: it reads the real clock and passes it to the engine as data.
#![allow(clippy::disallowed_methods)]

mod demo;
mod driver;
mod probe;
mod serve;
mod signals;
mod tap;

use std::time::Duration;

use mcpwire::mcp::ProtocolVersion;

const HELP: &str = "\
mcpwire: a sans-IO Model Context Protocol engine, and tools built on it

USAGE
  mcpwire demo                       run probe against this binary's own demo server, with a transcript
  mcpwire probe [OPTIONS] -- CMD...  start a stdio MCP server and show what it offers
  mcpwire probe [OPTIONS] --url URL  the same for a Streamable HTTP server
  mcpwire serve [--legacy]           a demo MCP server on stdin/stdout (both protocol eras)
      [--tokio]                      the same, driven by mcpwire-tokio on a tokio runtime
  mcpwire serve --http ADDR          the demo server over Streamable HTTP on ADDR (port 0: any);
                                     prints the URL it serves once bound
      [--redis URL --replica N]      one of several replicas sharing sessions and resumable
      [--touch-interval MS]          streams through Redis (each with its own N); touch a
                                     session in Redis at most every MS (default: each request)
  mcpwire tap --log FILE -- CMD...   relay stdio to CMD unchanged, logging the session as JSONL
  mcpwire help                       this text

PROBE OPTIONS
  --protocol V|auto   the protocol version to speak (default auto: probe, then fall back)
  --timeout S         seconds to wait for each answer (default 10, at most 86400)
  --json              machine-readable output: one JSON object with protocolVersion, era,
                      serverInfo, instructions, capabilities, tools, resources,
                      resourceTemplates and prompts (the lists the server declares), ping,
                      call, latencies, warnings, and error {exitCode, message} on failure
  --call NAME JSON    call a tool with these arguments (a JSON object)
  --url URL           probe the Streamable HTTP server at URL (http:// only; no credentials
                      are sent) instead of starting a command

EXIT CODES (probe)
  0 success   2 bad command line   3 the server could not be started or reached
  4 the server broke the protocol (output that is not JSON-RPC, invalid answers)
  5 the server exited or closed its output before answering
  6 the server did not answer in time   7 the --call failed
  8 the server does not speak the protocol version or era asked for
  128+N  stopped by signal N (probe and tap pass SIGINT, SIGTERM and SIGHUP on to the server)
";

/// The longest `--timeout` taken: a day (longer waits are better ended by the user).
const MAX_TIMEOUT_SECS: f64 = 86_400.0;

fn usage(message: &str) -> i32 {
    eprintln!("mcpwire: {message}\n\n{HELP}");
    probe::EXIT_USAGE
}

/// Splits `args` at `--` into options and the server command.
fn split_command(args: &[String]) -> (&[String], &[String]) {
    match args.iter().position(|a| a == "--") {
        Some(i) => (&args[..i], &args[i + 1..]),
        None => (args, &[]),
    }
}

fn probe_command(args: &[String]) -> i32 {
    let (opts, command) = split_command(args);
    let mut url = None;
    let mut protocol = None;
    let mut timeout = Duration::from_secs(10);
    let mut json = false;
    let mut call = None;
    let mut i = 0;
    while i < opts.len() {
        match opts[i].as_str() {
            "--protocol" => {
                let Some(v) = opts.get(i + 1) else {
                    return usage("--protocol needs a value");
                };
                protocol = match v.as_str() {
                    "auto" => None,
                    v => match ProtocolVersion::parse(v) {
                        Some(v) => Some(v),
                        None => return usage(&format!("unknown protocol version {v}")),
                    },
                };
                i += 2;
            }
            "--timeout" => {
                let secs = opts.get(i + 1).and_then(|s| s.parse::<f64>().ok());
                match secs {
                    Some(s) if s > 0.0 && s <= MAX_TIMEOUT_SECS => {
                        timeout = Duration::from_secs_f64(s);
                    }
                    _ => {
                        return usage(&format!(
                            "--timeout needs a number of seconds above 0 and at most {MAX_TIMEOUT_SECS}"
                        ));
                    }
                }
                i += 2;
            }
            "--json" => {
                json = true;
                i += 1;
            }
            "--url" => {
                let Some(u) = opts.get(i + 1) else {
                    return usage("--url needs a URL");
                };
                url = Some(u.clone());
                i += 2;
            }
            "--call" => {
                let (Some(name), Some(args)) = (opts.get(i + 1), opts.get(i + 2)) else {
                    return usage("--call needs a tool name and a JSON object");
                };
                // Checked before the server starts: MCP's arguments are an object.
                match serde_json::from_str::<serde_json::Value>(args) {
                    Ok(serde_json::Value::Object(_)) => {}
                    Ok(_) => return usage("--call's arguments must be a JSON object"),
                    Err(e) => return usage(&format!("--call's arguments are not JSON: {e}")),
                }
                call = Some((name.clone(), args.clone()));
                i += 3;
            }
            other => return usage(&format!("unknown probe option {other}")),
        }
    }
    match (&url, command.is_empty()) {
        (None, true) => return usage("probe needs a server command after --, or --url"),
        (Some(_), false) => return usage("probe takes a server command or --url, not both"),
        _ => {}
    }
    probe::run(probe::Options {
        protocol,
        timeout,
        json,
        call,
        command: command.to_vec(),
        url,
    })
}

fn serve_command(args: &[String]) -> i32 {
    let mut legacy = false;
    let mut on_tokio = false;
    let mut http = None;
    let mut redis = None;
    let mut replica = None;
    let mut touch = None;
    let mut i = 0;
    while i < args.len() {
        match args[i].as_str() {
            "--legacy" => {
                legacy = true;
                i += 1;
            }
            "--tokio" => {
                on_tokio = true;
                i += 1;
            }
            "--http" => {
                let Some(addr) = args.get(i + 1) else {
                    return usage("--http needs an address, such as 127.0.0.1:0");
                };
                http = Some(addr.clone());
                i += 2;
            }
            "--redis" => {
                let Some(url) = args.get(i + 1) else {
                    return usage("--redis needs a URL, such as redis://127.0.0.1:6379/");
                };
                redis = Some(url.clone());
                i += 2;
            }
            "--touch-interval" => {
                let Some(ms) = args.get(i + 1).and_then(|n| n.parse::<u64>().ok()) else {
                    return usage("--touch-interval needs milliseconds");
                };
                touch = Some(ms);
                i += 2;
            }
            "--replica" => {
                let Some(n) = args.get(i + 1).and_then(|n| n.parse::<u16>().ok()) else {
                    return usage("--replica needs a number from 0 to 65535");
                };
                replica = Some(n);
                i += 2;
            }
            other => return usage(&format!("unknown serve option {other}")),
        }
    }
    let scale_out = match (redis, replica) {
        (Some(url), Some(replica)) => Some(serve::ScaleOut {
            url,
            replica,
            touch_interval: std::time::Duration::from_millis(touch.unwrap_or(0)),
        }),
        (None, None) if touch.is_none() => None,
        _ => return usage("--redis and --replica go together (and --touch-interval with them)"),
    };
    match http {
        Some(_) if on_tokio => usage("--tokio is for stdio (--http always runs on tokio)"),
        Some(addr) => serve::run_http(&addr, legacy, scale_out),
        None if scale_out.is_some() => usage("--redis and --replica need --http"),
        None if on_tokio => serve::run_tokio(legacy),
        None => serve::run(legacy),
    }
}

fn tap_command(args: &[String]) -> i32 {
    let (opts, command) = split_command(args);
    let log = match opts {
        [flag, path] if flag == "--log" => path,
        _ => return usage("tap needs --log FILE"),
    };
    if command.is_empty() {
        return usage("tap needs a server command after --");
    }
    tap::run(log, command)
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let code = match args.first().map(String::as_str) {
        Some("demo") => demo::run(),
        Some("probe") => probe_command(&args[1..]),
        Some("serve") => serve_command(&args[1..]),
        Some("tap") => tap_command(&args[1..]),
        Some("help" | "--help" | "-h") | None => {
            print!("{HELP}");
            0
        }
        Some(other) => usage(&format!("unknown command {other}")),
    };
    std::process::exit(code);
}
