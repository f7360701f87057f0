//! A client engine and a server engine wired together in memory, with simulated time.
#![allow(dead_code)]

use std::time::Duration;

use mcpwire::Timestamp;
use mcpwire::conn::{Config, Connection, Event};
use mcpwire::mcp::ProtocolVersion;

/// Events as the tests keep and compare them: the library's own owned copy.
pub use mcpwire::OwnedEvent as Ev;

pub fn own(e: Event<'_>) -> Ev {
    e.to_owned_event()
}

/// Drains every event of `conn`.
pub fn drain(conn: &mut Connection) -> Vec<Ev> {
    let mut out = Vec::new();
    while let Some(e) = conn.poll_event() {
        out.push(own(e));
    }
    out
}

/// Takes everything `conn` wants to write.
pub fn take_output(conn: &mut Connection) -> Vec<u8> {
    let mut out = Vec::new();
    while let Some(t) = conn.poll_transmit() {
        out.extend_from_slice(t.bytes);
        let n = t.bytes.len();
        conn.consume_transmit(n);
    }
    out
}

pub struct Pair {
    pub client: Connection,
    pub server: Connection,
    pub now: Timestamp,
    pub client_events: Vec<Ev>,
    pub server_events: Vec<Ev>,
    /// Every byte that crossed, in order, for inspection: (from_client, bytes).
    pub wire: Vec<(bool, Vec<u8>)>,
}

impl Pair {
    /// Builds both engines at time zero (the client queues `initialize`).
    pub fn new(client: Config, server: Config) -> Pair {
        let now = Timestamp::ZERO;
        Pair {
            client: Connection::new(client, now).unwrap(),
            server: Connection::new(server, now).unwrap(),
            now,
            client_events: Vec::new(),
            server_events: Vec::new(),
            wire: Vec::new(),
        }
    }

    /// A pair that has completed the handshake on `version` (both offer only it).
    pub fn ready(version: ProtocolVersion, client: Config, server: Config) -> Pair {
        let mut client = client;
        client.versions = vec![version];
        let mut p = Pair::new(client, server);
        p.step();
        assert_eq!(
            p.client_events,
            vec![Ev::Ready { version }],
            "client handshake"
        );
        assert_eq!(
            p.server_events,
            vec![Ev::Ready { version }],
            "server handshake"
        );
        p.client_events.clear();
        p.server_events.clear();
        p.wire.clear();
        p
    }

    /// Moves bytes both ways and collects events until nothing moves.
    pub fn step(&mut self) {
        loop {
            let mut moved = false;
            let c = take_output(&mut self.client);
            if !c.is_empty() {
                moved = true;
                self.wire.push((true, c.clone()));
                self.server.handle_input(self.now, &c);
            }
            let s = take_output(&mut self.server);
            if !s.is_empty() {
                moved = true;
                self.wire.push((false, s.clone()));
                self.client.handle_input(self.now, &s);
            }
            let ce = drain(&mut self.client);
            let se = drain(&mut self.server);
            moved |= !ce.is_empty() || !se.is_empty();
            self.client_events.extend(ce);
            self.server_events.extend(se);
            if !moved {
                break;
            }
        }
    }

    /// Advances time by `d`, fires due timers, and steps.
    pub fn advance(&mut self, d: Duration) {
        self.now = self.now.after(d);
        self.client.handle_timeout(self.now);
        self.server.handle_timeout(self.now);
        self.step();
    }

    /// Jumps to the earliest deadline of either side (if any), fires it, and steps.
    pub fn drive(&mut self) -> bool {
        let next = [self.client.poll_timeout(), self.server.poll_timeout()]
            .into_iter()
            .flatten()
            .min();
        let Some(at) = next else { return false };
        if at > self.now {
            self.now = at;
        }
        self.client.handle_timeout(self.now);
        self.server.handle_timeout(self.now);
        self.step();
        true
    }

    pub fn take_client_events(&mut self) -> Vec<Ev> {
        std::mem::take(&mut self.client_events)
    }

    pub fn take_server_events(&mut self) -> Vec<Ev> {
        std::mem::take(&mut self.server_events)
    }

    /// The wire text sent by one side since the last clear, as lines.
    pub fn lines(&self, from_client: bool) -> Vec<String> {
        self.wire
            .iter()
            .filter(|(c, _)| *c == from_client)
            .flat_map(|(_, b)| {
                String::from_utf8_lossy(b)
                    .lines()
                    .map(str::to_owned)
                    .collect::<Vec<_>>()
            })
            .collect()
    }
}

/// `config` restricted to the handshake-era versions.
pub fn legacy(mut config: Config) -> Config {
    config.versions = ProtocolVersion::LEGACY.to_vec();
    config
}

/// `config` restricted to the stateless era.
pub fn modern(mut config: Config) -> Config {
    config.versions = vec![ProtocolVersion::V2026_07_28];
    config
}

/// A client that declares roots, sampling and elicitation.
pub fn client_config() -> Config {
    Config::client("test-client", "1.0.0")
        .with_capabilities(r#"{"roots":{"listChanged":true},"sampling":{},"elicitation":{}}"#)
        .unwrap()
}

/// A server with tools, resources (subscribe), prompts, logging and completions.
pub fn server_config() -> Config {
    let mut c = Config::server("test-server", "2.0.0")
        .with_capabilities(
            r#"{"tools":{"listChanged":true},"resources":{"subscribe":true,"listChanged":true},"prompts":{},"logging":{},"completions":{}}"#,
        )
        .unwrap();
    c.instructions = Some("be nice".to_owned());
    c
}
