//! What one resumable event costs on the Redis event store, next to the least any store could
//! pay: one `ZADD` round trip carrying the same bytes, on the same Redis, in the same run.
//!
//! ```sh
//! cargo bench -p mcpwire-redis --bench append
//! ```
//!
//! Needs `redis-server` on PATH (`.ci/setup-debian` installs it); started here on a free port
//! of loopback and stopped at the end. Results: benches/README.md ("The Redis event store").

// A bench starts its own Redis and waits for it on the wall clock.
#![allow(clippy::disallowed_methods)]

use std::io::{BufRead, BufReader};
use std::net::TcpListener;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use mcpwire::http::{EventStore, HttpStreamId};
use mcpwire_redis::{RedisEventStore, RedisOptions};

/// A `redis-server` of the bench's own, killed on drop.
struct Redis(Child, u16);

impl Redis {
    fn start() -> Redis {
        let port = TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free port")
            .port();
        let mut child = Command::new("redis-server")
            .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
            .args(["--save", "", "--appendonly", "no"])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("this bench needs redis-server on PATH (.ci/setup-debian installs it)");
        let out = BufReader::new(child.stdout.take().expect("piped"));
        // Owned before the wait, so that a failure below still kills and reaps it.
        let redis = Redis(child, port);
        for line in out.lines() {
            let line = line.expect("redis-server's output");
            if line.contains("Ready to accept connections") {
                return redis;
            }
        }
        panic!("redis-server on port {port} ended before it was ready");
    }

    fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.1)
    }
}

impl Drop for Redis {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// An SSE event of the size a small `tools/call` answer makes.
fn event() -> Vec<u8> {
    let mut e = b"event: message\nid: 0000000000000001/17\ndata: ".to_vec();
    e.extend_from_slice(
        br#"{"jsonrpc":"2.0","id":17,"result":{"content":[{"type":"text","text":""#,
    );
    e.resize(e.len() + 160, b'x');
    e.extend_from_slice(b"\"}]}}\n\n");
    e
}

fn append(c: &mut Criterion) {
    let redis = Redis::start();
    let bytes = event();
    let options = RedisOptions {
        timeout: Duration::from_secs(5),
        ..RedisOptions::default()
    };
    let mut store = RedisEventStore::connect(&redis.url(), options).expect("connect");
    let mut group = c.benchmark_group("redis_append");
    group.throughput(Throughput::Elements(1));
    let mut n = 0u64;
    group.bench_function("mcpwire_redis", |b| {
        b.iter(|| {
            n += 1;
            store.append("bench-session", HttpStreamId(1), n, &bytes);
        })
    });
    assert_eq!(
        store.health().errors(),
        0,
        "the store failed during the bench: {:?}",
        store.health().last_error()
    );
    // The floor: one round trip that stores the same bytes, with nothing else.
    let client = redis::Client::open(redis.url()).expect("url");
    let mut conn = client.get_connection().expect("connect");
    let mut m = 0u64;
    group.bench_function("zadd_floor", |b| {
        b.iter(|| {
            m += 1;
            let mut member = m.to_be_bytes().to_vec();
            member.extend_from_slice(&bytes);
            let mut cmd = redis::cmd("ZADD");
            cmd.arg("floor").arg(0).arg(member);
            let _: i64 = cmd.query(&mut conn).expect("ZADD");
            if m.is_multiple_of(256) {
                let _: i64 = redis::cmd("DEL")
                    .arg("floor")
                    .query(&mut conn)
                    .expect("DEL");
            }
        })
    });
    group.finish();
}

criterion_group!(benches, append);
criterion_main!(benches);
