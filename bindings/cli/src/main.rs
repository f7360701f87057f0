//! The `mcpwire` command: probe any stdio MCP server, serve a demo server, watch a session.
//!
//! The library is sans-IO; this binary is one IO layer over it (std for stdio, hyper on tokio
//! for HTTP), with its command line parsed by clap.

// This binary is the IO layer: it reads the real clock and passes it to the engine as data.
#![allow(clippy::disallowed_methods)]

/// `eprintln!` that never panics: where stderr is gone (closed, a terminal that hung up,
/// `/dev/full`), the message is dropped and the command still exits with the code its docs
/// give; `eprintln!` panicked there, and the exit code became 101.
macro_rules! say {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr(), $($arg)*);
    }};
}

mod demo;
mod driver;
mod out;
mod probe;
mod serve;
mod signals;
mod tap;

use std::time::Duration;

use clap::error::ErrorKind;
use clap::{ArgGroup, Args, CommandFactory, Parser, Subcommand};

use mcpwire::mcp::ProtocolVersion;

/// What follows the generated help of `mcpwire` and `mcpwire probe`.
const EXIT_CODES: &str = "\
EXIT CODES (probe)
  0 success   2 bad command line   3 the server could not be started or reached
  4 the server broke the protocol (output that is not JSON-RPC, invalid answers)
  5 the server exited or closed its output before answering
  6 the server did not answer in time   7 the --call failed
  8 the server does not speak the protocol version or era asked for
  9 the server refused (an HTTP error status such as 401, 403 or 500, or a JSON-RPC
    error to the handshake)
  128+N  stopped by signal N (probe and tap pass SIGINT, SIGTERM and SIGHUP on to the server)
  1 the report could not be written to stdout   141 stdout's reader went away (as SIGPIPE)

EXIT CODES (tap)
  the server's own, or 128+N when signal N ended it   2 the log cannot be opened (a write
  that fails later stops the logging, says so, and the relay goes on)
  3 the server could not be started

EXAMPLES
  mcpwire demo
  mcpwire probe -- npx -y @modelcontextprotocol/server-everything
  mcpwire probe --json --call echo '{\"text\":\"hi\"}' --url http://127.0.0.1:8000/mcp
  mcpwire serve --http 127.0.0.1:8000
  mcpwire tap --log session.jsonl -- python3 my_server.py";

/// The command line, parsed by clap: its help, `--version`, `--opt=value` and error messages
/// are what users of other command-line tools expect, and usage errors exit with 2.
#[derive(Parser)]
#[command(name = "mcpwire", version, after_help = EXIT_CODES)]
#[command(about = "mcpwire: a sans-IO Model Context Protocol engine, and tools built on it")]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Subcommand)]
enum Command {
    /// A client session against this binary's own demo server over pipes, once per
    /// protocol era, with a transcript
    Demo,
    /// Start a stdio MCP server (the command after --), or reach a Streamable HTTP one
    /// (--url), and show what it offers, with latencies
    #[command(after_help = EXIT_CODES)]
    Probe(ProbeArgs),
    /// A demo MCP server (tools, resources, prompts; both protocol eras) on stdin/stdout,
    /// or over Streamable HTTP with --http
    Serve(ServeArgs),
    /// Relay stdio to the server command unchanged, logging the session as JSONL
    #[command(after_help = EXIT_CODES)]
    Tap(TapArgs),
}

#[derive(Args)]
#[command(group(ArgGroup::new("server").required(true).args(["url", "command"])))]
struct ProbeArgs {
    /// The protocol version to speak: a version such as 2025-11-25, or auto (probe the
    /// stateless era, then fall back to the handshake)
    #[arg(long, value_name = "V|auto", default_value = "auto", value_parser = protocol)]
    protocol: Protocol,
    /// Seconds to wait for each answer (at least 0.001, at most 86400)
    #[arg(long, value_name = "S", default_value = "10", value_parser = timeout)]
    timeout: Duration,
    /// Machine-readable output: one JSON object with protocolVersion, era, serverInfo,
    /// instructions, capabilities, tools, resources, resourceTemplates and prompts (the lists
    /// the server declares), ping, call, latencies, warnings, and error {exitCode, message} on
    /// failure
    #[arg(long)]
    json: bool,
    /// Call a tool with these arguments (a JSON object), checked before the server starts
    #[arg(long, num_args = 2, value_names = ["NAME", "JSON"], action = clap::ArgAction::Set)]
    call: Option<Vec<String>>,
    /// Probe the Streamable HTTP server at URL (http:// only; no credentials are sent)
    /// instead of starting a command
    #[arg(long, value_name = "URL")]
    url: Option<String>,
    /// The stdio server to start, after --
    #[arg(last = true, value_name = "CMD")]
    command: Vec<String>,
}

#[derive(Args)]
struct ServeArgs {
    /// Speak the handshake era only (2024-11-05 to 2025-11-25)
    #[arg(long)]
    legacy: bool,
    /// Drive the stdio server with mcpwire-tokio on a tokio runtime
    #[arg(long, conflicts_with = "http")]
    tokio: bool,
    /// Serve Streamable HTTP on ADDR (port 0: any); the URL is printed once bound
    #[arg(long, value_name = "ADDR")]
    http: Option<String>,
    /// Also accept requests whose Host (and Origin) name NAME, besides loopback names and, on
    /// an address beyond loopback, IP addresses; any other name gets 403 (DNS rebinding
    /// protection). Repeat it for several names. A name only: the port a request names is
    /// not compared
    #[arg(long, value_name = "NAME", requires = "http", value_parser = host_name)]
    allow_host: Vec<String>,
    /// TCP connections served at once (default 1024). At the cap a new connection takes the
    /// place of the one idle longest; when every one is in a request, it gets 503
    #[arg(long, value_name = "N", requires = "http",
          value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
    max_connections: Option<u32>,
    /// Share sessions and resumable streams with other replicas through Redis at URL. With
    /// --replica and without --redis, the URL in MCPWIRE_REDIS_URL is used: a password in it
    /// is then not on the command line, where every local user can read it
    #[arg(long, value_name = "URL", requires_all = ["replica", "http"])]
    redis: Option<String>,
    /// This replica's number among those sharing the Redis (0 to 65535)
    #[arg(long, value_name = "N", requires = "http")]
    replica: Option<u16>,
    /// Touch a session in Redis at most every MS milliseconds (default: each request; at
    /// most half the session idle timeout)
    #[arg(long, value_name = "MS", requires = "replica")]
    touch_interval: Option<u64>,
}

#[derive(Args)]
struct TapArgs {
    /// The JSONL file the session is logged to
    #[arg(long, value_name = "FILE")]
    log: String,
    /// The stdio server to run, after --
    #[arg(last = true, required = true, value_name = "CMD")]
    command: Vec<String>,
}

/// `--protocol`: `None` is auto.
#[derive(Clone, Copy)]
struct Protocol(Option<ProtocolVersion>);

fn protocol(v: &str) -> Result<Protocol, String> {
    match v {
        "auto" => Ok(Protocol(None)),
        v => ProtocolVersion::parse(v)
            .map(|v| Protocol(Some(v)))
            .ok_or_else(|| "not a protocol version this build knows (nor auto)".to_string()),
    }
}

/// The longest `--timeout` taken: a day (longer waits are better ended by the user).
const MAX_TIMEOUT_SECS: f64 = 86_400.0;

fn timeout(v: &str) -> Result<Duration, String> {
    // (At least a millisecond: a tinier one was taken, and every request timed out at once.)
    match v.parse::<f64>() {
        Ok(s) if (0.001..=MAX_TIMEOUT_SECS).contains(&s) => Ok(Duration::from_secs_f64(s)),
        _ => Err(format!(
            "needs a number of seconds, at least 0.001 and at most {MAX_TIMEOUT_SECS}"
        )),
    }
}

/// An `--allow-host` value: a host name or an IP address, without a port (the Host header's
/// port is not compared, so `NAME:PORT` matched nothing, silently), scheme or path.
fn host_name(value: &str) -> Result<String, String> {
    let bracketed = value.starts_with('[') && value.ends_with(']');
    let bad = value.is_empty()
        || value.contains(['/', '@', ' '])
        || (!bracketed && value.contains(':') && value.parse::<std::net::Ipv6Addr>().is_err());
    if bad {
        return Err(format!(
            "{value:?} is not a host name: give the name alone, without a port, scheme or path"
        ));
    }
    Ok(value.to_owned())
}

fn probe_command(args: ProbeArgs) -> i32 {
    let call = match args.call {
        Some(call) => {
            let [name, arguments] = <[String; 2]>::try_from(call).expect("clap takes two values");
            // Checked before the server starts: MCP's arguments are an object.
            let bad = match serde_json::from_str::<serde_json::Value>(&arguments) {
                Ok(serde_json::Value::Object(_)) => None,
                Ok(_) => Some("must be a JSON object".to_string()),
                Err(e) => Some(format!("are not JSON: {e}")),
            };
            if let Some(bad) = bad {
                let mut cli = Cli::command();
                cli.build();
                let probe = cli.find_subcommand_mut("probe").expect("a command");
                let message = format!("--call's arguments {bad}");
                usage_error(probe.error(ErrorKind::ValueValidation, message), args.json);
            }
            Some((name, arguments))
        }
        None => None,
    };
    probe::run(probe::Options {
        protocol: args.protocol.0,
        timeout: args.timeout,
        json: args.json,
        call,
        command: args.command,
        url: args.url,
    })
}

fn serve_command(args: ServeArgs) -> i32 {
    // The URL from the environment only for a replica (the variable may be set for every
    // command of a shell or a container).
    let redis = args.redis.or_else(|| {
        (args.replica.is_some())
            .then(|| std::env::var("MCPWIRE_REDIS_URL").ok())
            .flatten()
            .filter(|url| !url.is_empty())
    });
    let scale_out = match (redis, args.replica) {
        (Some(url), Some(replica)) => Some(serve::ScaleOut {
            url,
            replica,
            touch_interval: Duration::from_millis(args.touch_interval.unwrap_or(0)),
        }),
        (None, Some(_)) => {
            let e = <Cli as clap::CommandFactory>::command().error(
                clap::error::ErrorKind::MissingRequiredArgument,
                "--replica needs --redis <URL> (or the URL in MCPWIRE_REDIS_URL)",
            );
            usage_error(e, false)
        }
        _ => None, // (clap requires --replica with --redis, and --touch-interval with it)
    };
    match args.http {
        Some(addr) => serve::run_http(
            &addr,
            args.legacy,
            scale_out,
            args.allow_host,
            args.max_connections,
        ),
        None if args.tokio => serve::run_tokio(args.legacy),
        None => serve::run(args.legacy),
    }
}

/// Exits for a bad command line (2), as clap does: its message on stderr, and, for
/// `probe --json`, the same message in the report's `error` on stdout, so a script reading
/// the JSON learns why there is no report.
fn usage_error(e: clap::Error, json: bool) -> ! {
    if json && e.use_stderr() {
        let rendered = e.render().to_string();
        let first = rendered.lines().next().unwrap_or("bad command line");
        let failure = probe::Failure {
            code: probe::EXIT_USAGE,
            message: first.strip_prefix("error: ").unwrap_or(first).to_owned(),
        };
        let report = probe::to_json(&probe::Report::default(), Some(&failure));
        out::line(format_args!(
            "{}",
            serde_json::to_string_pretty(&report).unwrap_or_default()
        ));
    }
    e.exit()
}

/// Whether the command line asks for `probe --json` (before any `--`). Read as OS strings: an
/// argument that is not UTF-8 is clap's error to report, not a panic here.
fn wants_json() -> bool {
    let args: Vec<std::ffi::OsString> = (std::env::args_os().skip(1))
        .take_while(|a| a != "--")
        .collect();
    args.iter().any(|a| a == "probe") && args.iter().any(|a| a == "--json")
}

fn main() {
    let cli = Cli::try_parse().unwrap_or_else(|e| usage_error(e, wants_json()));
    let code = match cli.command {
        Some(Command::Demo) => demo::run(),
        Some(Command::Probe(args)) => probe_command(args),
        Some(Command::Serve(args)) => serve_command(args),
        Some(Command::Tap(args)) => tap::run(&args.log, &args.command),
        None => {
            // No command: the help, as `mcpwire help` prints it.
            let _ = Cli::command().print_help();
            0
        }
    };
    std::process::exit(code);
}
