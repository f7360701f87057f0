//! The Redis stores against a real `redis-server` (one per test, on a free port), including
//! what they do while it is down and after it comes back.

// Tests wait for real time to pass (TTLs, startup).
#![allow(clippy::disallowed_methods)]

use std::io::{BufRead, BufReader};
use std::net::TcpListener;
use std::process::{Child, Command, Stdio};
use std::thread::sleep;
use std::time::{Duration, Instant};

use mcpwire::http::{EventStore, HttpStreamId, SessionStore, StoreUnavailable};
use mcpwire_redis::{RedisEventStore, RedisOptions, RedisSessionStore};

/// A `redis-server` of this test's own, killed on drop.
struct RedisServer {
    port: u16,
    child: Option<Child>,
    /// Extra command-line options, kept for restarts.
    extra: &'static [&'static str],
}

impl RedisServer {
    /// Starts one on a free port. A port found free may be taken before `redis-server` binds
    /// it (by another test's listener or connection): then another port is tried.
    fn start() -> Self {
        Self::start_with(&[])
    }

    /// Starts one with extra command-line options.
    fn start_with(extra: &'static [&'static str]) -> Self {
        for _ in 0..5 {
            let port = {
                let listener = TcpListener::bind("127.0.0.1:0").expect("bind a free port");
                listener.local_addr().unwrap().port()
            };
            let mut server = RedisServer {
                port,
                child: None,
                extra,
            };
            match server.try_restart() {
                Ok(()) => return server,
                Err(log) => {
                    eprintln!("redis-server on port {port} did not start, retrying:\n{log}")
                }
            }
        }
        panic!("redis-server did not start on any of five free ports");
    }

    /// Starts it (again) on the same port, and waits until it accepts connections.
    fn restart(&mut self) {
        if let Err(log) = self.try_restart() {
            panic!("redis-server on port {} did not start:\n{log}", self.port);
        }
    }

    /// Starts it on its port and waits for its own "ready" line: a successful connection alone
    /// could reach another process that holds the port while this one failed to bind it.
    /// Err carries its log.
    fn try_restart(&mut self) -> Result<(), String> {
        self.stop();
        let mut child = Command::new("redis-server")
            .args(["--port", &self.port.to_string()])
            .args(["--bind", "127.0.0.1", "--save", "", "--appendonly", "no"])
            .args(self.extra)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| {
                panic!(
                    "these tests need a real Redis: cannot run `redis-server` ({e}); \
                     install it (e.g. `apt-get install redis-server`) and put it on PATH"
                )
            });
        let ready = wait_ready(child.stdout.take().expect("piped"));
        self.child = Some(child);
        ready
    }
    /// Kills it and waits until it is gone.
    fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Sends it `signal` (`STOP` freezes it: connections stay open, nothing is answered;
    /// `CONT` thaws it).
    fn signal(&self, signal: &str) {
        let pid = self.child.as_ref().expect("running").id();
        let status = Command::new("kill")
            .args([&format!("-{signal}"), &pid.to_string()])
            .status()
            .expect("run kill");
        assert!(status.success(), "kill -{signal} {pid}");
    }

    fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.port)
    }

    /// A plain connection, to look at the keys.
    fn inspect(&self) -> redis::Connection {
        redis::Client::open(self.url())
            .unwrap()
            .get_connection_with_timeout(Duration::from_secs(2))
            .unwrap()
    }

    fn keys(&self) -> Vec<String> {
        let mut keys: Vec<String> = redis::cmd("KEYS")
            .arg("*")
            .query(&mut self.inspect())
            .unwrap();
        keys.sort();
        keys
    }
}

/// Reads a `redis-server`'s log until it is ready (Ok) or exits (Err, with the log), within
/// 10 s; the rest of the log is drained on a thread, so the server never blocks on it.
fn wait_ready(stdout: std::process::ChildStdout) -> Result<(), String> {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut log = String::new();
        let mut lines = BufReader::new(stdout).lines();
        for line in lines.by_ref().map_while(Result::ok) {
            let ready = line.contains("Ready to accept connections");
            log.push_str(&line);
            log.push('\n');
            if ready {
                let _ = tx.send(Ok(()));
                lines.for_each(drop);
                return;
            }
        }
        let _ = tx.send(Err(log));
    });
    rx.recv_timeout(Duration::from_secs(10))
        .unwrap_or_else(|_| Err("no ready line within 10 s".into()))
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Short timeouts, so the failure tests stay fast.
fn options() -> RedisOptions {
    RedisOptions {
        timeout: Duration::from_millis(500),
        ..RedisOptions::default()
    }
}

fn events(redis: &RedisServer, options: RedisOptions) -> RedisEventStore {
    RedisEventStore::connect(&redis.url(), options).expect("connect the event store")
}

/// An event store whose sessions keep at most `bytes` over all their streams.
fn session_bounded(redis: &RedisServer, bytes: usize) -> RedisEventStore {
    events(
        redis,
        RedisOptions {
            bytes_per_session: bytes,
            ..options()
        },
    )
}

fn sessions(redis: &RedisServer, options: RedisOptions) -> RedisSessionStore {
    RedisSessionStore::connect(&redis.url(), options).expect("connect the session store")
}

fn replay(store: &mut dyn EventStore, session: &str, stream: u64, after: u64) -> Vec<Vec<u8>> {
    try_replay(store, session, stream, after).expect("the store answered")
}

/// [`replay`], or what a store that could not be read says.
fn try_replay(
    store: &mut dyn EventStore,
    session: &str,
    stream: u64,
    after: u64,
) -> Result<Vec<Vec<u8>>, StoreUnavailable> {
    let mut seen = Vec::new();
    store.replay(session, HttpStreamId(stream), after, &mut |e| {
        seen.push(e.to_vec())
    })?;
    Ok(seen)
}

/// The bytes a stream's members count in its session's hash of counts (`stream` 0: the
/// session's total); 0 when not counted.
fn counted(redis: &RedisServer, prefix: &str, session: &str, stream: u64) -> i64 {
    let field = if stream == 0 {
        "t".to_owned()
    } else {
        stream.to_string()
    };
    let got: Option<i64> = redis::cmd("HGET")
        .arg(format!("{prefix}:b:{session}"))
        .arg(field)
        .query(&mut redis.inspect())
        .expect("the byte count");
    got.unwrap_or(0)
}

/// How many connections Redis has taken so far (`INFO stats`).
fn connections(admin: &mut redis::Connection) -> String {
    let info: String = redis::cmd("INFO").arg("stats").query(admin).expect("INFO");
    info.lines()
        .find(|l| l.starts_with("total_connections_received:"))
        .expect("the connection count")
        .to_owned()
}

/// An event of `len` bytes, numbered `n`.
fn sized(n: u64, len: usize) -> Vec<u8> {
    let mut e = format!("id: {n}\n").into_bytes();
    e.resize(len, b'x');
    e
}

fn event(stream: u64, n: u64) -> Vec<u8> {
    format!("id: {stream}-{n}\ndata: {{\"n\":{n}}}\n\n").into_bytes()
}

#[test]
fn replay_hands_out_one_streams_later_events_in_order() {
    let redis = RedisServer::start();
    let mut store = events(&redis, options());
    // Interleaved streams and sessions, appended out of numeric order within none.
    store.append("s", HttpStreamId(1), 1, &event(1, 1));
    store.append("s", HttpStreamId(2), 2, &event(2, 2));
    store.append("s", HttpStreamId(1), 3, &event(1, 3));
    store.append("t", HttpStreamId(1), 4, &event(1, 4));
    store.append("s", HttpStreamId(1), 10, &event(1, 10));
    // 10 after 9: the order is numeric, not textual.
    store.append("s", HttpStreamId(1), 9, &event(1, 9));

    assert_eq!(
        replay(&mut store, "s", 1, 0),
        vec![event(1, 1), event(1, 3), event(1, 9), event(1, 10)]
    );
    // `after` itself is excluded.
    assert_eq!(
        replay(&mut store, "s", 1, 3),
        vec![event(1, 9), event(1, 10)]
    );
    // A number the stream does not have (4 is another session's) works as well.
    assert_eq!(replay(&mut store, "s", 1, 4), replay(&mut store, "s", 1, 3));
    assert!(replay(&mut store, "s", 1, 10).is_empty());
    assert!(replay(&mut store, "s", 1, u64::MAX).is_empty());
    assert_eq!(replay(&mut store, "s", 2, 0), vec![event(2, 2)]);
    assert_eq!(replay(&mut store, "t", 1, 0), vec![event(1, 4)]);
    assert!(replay(&mut store, "t", 2, 0).is_empty());
    assert!(replay(&mut store, "nobody", 1, 0).is_empty());
}

#[test]
fn events_come_back_byte_for_byte_at_any_number() {
    let redis = RedisServer::start();
    let mut store = events(&redis, options());
    let binary: Vec<u8> = (0..=255).collect();
    // Equal bytes under different numbers are two events; numbers past 2^53 stay exact.
    let big = u64::MAX - 1;
    store.append("s", HttpStreamId(u64::MAX), 5, b"same");
    store.append("s", HttpStreamId(u64::MAX), 6, b"same");
    store.append("s", HttpStreamId(u64::MAX), big - 1, &binary);
    store.append("s", HttpStreamId(u64::MAX), big, b"");
    store.append("s", HttpStreamId(u64::MAX), u64::MAX, b"last");
    assert_eq!(
        replay(&mut store, "s", u64::MAX, 0),
        vec![
            b"same".to_vec(),
            b"same".to_vec(),
            binary.clone(),
            Vec::new(),
            b"last".to_vec()
        ]
    );
    assert_eq!(
        replay(&mut store, "s", u64::MAX, big - 1),
        vec![Vec::new(), b"last".to_vec()]
    );
    assert_eq!(
        replay(&mut store, "s", u64::MAX, big),
        vec![b"last".to_vec()]
    );
    // Appending the same event twice (a retry) stores it once.
    store.append("s", HttpStreamId(7), 1, b"once");
    store.append("s", HttpStreamId(7), 1, b"once");
    assert_eq!(replay(&mut store, "s", 7, 0), vec![b"once".to_vec()]);
}

/// The calls of `cmdstat_{command}` in `INFO commandstats` (0 when never called).
fn calls(redis: &RedisServer, command: &str) -> u64 {
    let info: String = redis::cmd("INFO")
        .arg("commandstats")
        .query(&mut redis.inspect())
        .expect("INFO commandstats");
    let prefix = format!("cmdstat_{command}:calls=");
    info.lines()
        .find_map(|l| l.strip_prefix(&prefix))
        .and_then(|rest| rest.split(',').next())
        .map_or(0, |n| n.parse().expect("a count"))
}

#[test]
fn scripts_go_by_their_hash_and_are_loaded_again_after_a_flush() {
    let redis = RedisServer::start();
    let mut store = events(&redis, options());
    let first = store.first_stream_id().expect("stream ids");
    for n in 1..=10 {
        store.append("h", HttpStreamId(first), n, &event(first, n));
    }
    // Each script's text crossed once (loaded on its first call), then only its hash.
    assert_eq!(calls(&redis, "eval"), 0);
    assert_eq!(calls(&redis, "script|load"), 2);
    assert!(calls(&redis, "evalsha") >= 11);
    // A Redis that forgot its scripts (flushed, restarted, failed over) gets them again.
    redis::cmd("SCRIPT")
        .arg("FLUSH")
        .exec(&mut redis.inspect())
        .expect("SCRIPT FLUSH");
    store.append("h", HttpStreamId(first), 11, &event(first, 11));
    let all: Vec<Vec<u8>> = (1..=11).map(|n| event(first, n)).collect();
    assert_eq!(replay(&mut store, "h", first, 0), all);
    assert_eq!(calls(&redis, "script|load"), 3);
    assert_eq!(
        store.health().errors(),
        0,
        "{:?}",
        store.health().last_error()
    );
}

#[test]
fn each_stream_keeps_its_newest_events() {
    let redis = RedisServer::start();
    let mut store = events(
        &redis,
        RedisOptions {
            events_per_stream: 3,
            ..options()
        },
    );
    for n in 1..=5 {
        store.append("s", HttpStreamId(1), n, &event(1, n));
    }
    store.append("s", HttpStreamId(2), 6, &event(2, 6));
    assert_eq!(
        replay(&mut store, "s", 1, 0),
        vec![event(1, 3), event(1, 4), event(1, 5)]
    );
    // A resumption from before the kept ones gets what is left.
    assert_eq!(replay(&mut store, "s", 1, 1), replay(&mut store, "s", 1, 0));
    // Another stream has a bound of its own.
    assert_eq!(replay(&mut store, "s", 2, 0), vec![event(2, 6)]);

    let mut none = events(
        &redis,
        RedisOptions {
            events_per_stream: 0,
            prefix: "none".into(),
            ..options()
        },
    );
    none.append("s", HttpStreamId(1), 1, b"x");
    assert!(replay(&mut none, "s", 1, 0).is_empty());
    assert!(redis.keys().iter().all(|k| !k.starts_with("none:")));
}

#[test]
fn each_stream_keeps_at_most_its_bytes_and_always_its_newest_event() {
    let redis = RedisServer::start();
    // A member is the 8-byte event number and the event: 108 bytes for 100 bytes of event,
    // so three fit in 350 and a fourth does not.
    let mut store = events(
        &redis,
        RedisOptions {
            bytes_per_stream: 350,
            ..options()
        },
    );
    let stored = |redis: &RedisServer, stream: u64| counted(redis, "mcpw", "s", stream);
    for n in 1..=5 {
        store.append("s", HttpStreamId(1), n, &sized(n, 100));
    }
    assert_eq!(
        replay(&mut store, "s", 1, 0),
        vec![sized(3, 100), sized(4, 100), sized(5, 100)]
    );
    assert_eq!(stored(&redis, 1), 324);
    // A retried append (the same event again) counts nothing twice.
    store.append("s", HttpStreamId(1), 5, &sized(5, 100));
    assert_eq!(stored(&redis, 1), 324);
    // An event over the bound by itself pushes out the rest and stays, alone.
    store.append("s", HttpStreamId(1), 6, &sized(6, 1000));
    assert_eq!(replay(&mut store, "s", 1, 0), vec![sized(6, 1000)]);
    assert_eq!(stored(&redis, 1), 1008);
    // Until the next one.
    store.append("s", HttpStreamId(1), 7, &sized(7, 100));
    assert_eq!(replay(&mut store, "s", 1, 0), vec![sized(7, 100)]);
    assert_eq!(stored(&redis, 1), 108);
    // Another stream has a bound of its own, and the count bound still holds beside it.
    let mut both = events(
        &redis,
        RedisOptions {
            events_per_stream: 2,
            bytes_per_stream: 350,
            prefix: "both".into(),
            ..options()
        },
    );
    for n in 1..=3 {
        both.append("s", HttpStreamId(2), n, &sized(n, 10));
    }
    assert_eq!(
        replay(&mut both, "s", 2, 0),
        vec![sized(2, 10), sized(3, 10)]
    );
    // The count goes with the stream's events.
    store.forget("s");
    assert!(redis.keys().iter().all(|k| !k.starts_with("mcpw:")));
}

/// A session's streams share one byte bound: a client opening stream after stream pinned
/// `bytes_per_stream` per stream for the whole TTL, without limit.
#[test]
fn a_session_keeps_at_most_its_bytes_over_all_its_streams() {
    let redis = RedisServer::start();
    // Members are 108 bytes (8 for the number, 100 of event): nine fit in 1,000, not ten.
    let mut store = session_bounded(&redis, 1000);
    let mut next = 0;
    let mut append = |store: &mut RedisEventStore, stream: u64, len: usize| {
        next += 1;
        store.append("s", HttpStreamId(stream), next, &sized(next, len));
        // The index orders streams by their last append, to the millisecond.
        sleep(Duration::from_millis(3));
        next
    };
    let numbers = |store: &mut RedisEventStore, stream: u64| -> Vec<u64> {
        replay(store, "s", stream, 0)
            .iter()
            .map(|e| {
                let line = std::str::from_utf8(&e[4..])
                    .unwrap()
                    .split('\n')
                    .next()
                    .unwrap();
                line.parse().unwrap()
            })
            .collect()
    };
    // What the counts say agrees with what the streams hold.
    let consistent = |redis: &RedisServer| {
        let mut inspect = redis.inspect();
        let streams: Vec<u64> = redis::cmd("ZRANGE")
            .arg("mcpw:x:s")
            .arg(0)
            .arg(-1)
            .query(&mut inspect)
            .unwrap();
        let mut sum = 0;
        for stream in streams {
            let members: Vec<Vec<u8>> = redis::cmd("ZRANGE")
                .arg(format!("mcpw:e:s:{stream}"))
                .arg(0)
                .arg(-1)
                .query(&mut inspect)
                .unwrap();
            let bytes: i64 = members.iter().map(|m| m.len() as i64).sum();
            assert_eq!(
                counted(redis, "mcpw", "s", stream),
                bytes,
                "stream {stream}"
            );
            sum += bytes;
        }
        assert_eq!(counted(redis, "mcpw", "s", 0), sum, "the session's total");
        sum
    };
    for stream in [1, 1, 1, 1, 2, 2, 2, 2, 3] {
        append(&mut store, stream, 100);
    }
    assert_eq!(consistent(&redis), 972);
    // The tenth goes past the bound: the oldest event of the stream appended to longest ago
    // goes, not one of the stream being appended to.
    append(&mut store, 3, 100);
    assert_eq!(numbers(&mut store, 1), [2, 3, 4]);
    assert_eq!(numbers(&mut store, 3), [9, 10]);
    assert_eq!(consistent(&redis), 972);
    // A retried append counts nothing twice.
    store.append("s", HttpStreamId(3), 10, &sized(10, 100));
    assert_eq!(consistent(&redis), 972);
    // Once stream 1 has no events left, it leaves the index and the counts.
    for _ in 0..3 {
        append(&mut store, 4, 100);
    }
    assert!(numbers(&mut store, 1).is_empty());
    assert!(!redis.keys().contains(&"mcpw:e:s:1".to_owned()));
    assert_eq!(counted(&redis, "mcpw", "s", 1), 0);
    assert_eq!(consistent(&redis), 972);
    // The order is by last append, not by opening: stream 2 was opened before stream 3 but
    // is appended to now, so stream 3 loses its oldest.
    append(&mut store, 2, 100);
    assert_eq!(numbers(&mut store, 3), [10]);
    assert_eq!(numbers(&mut store, 2), [5, 6, 7, 8, 14]);
    assert_eq!(consistent(&redis), 972);
    // One event over the bound by itself pushes out every other and stays, alone...
    let big = append(&mut store, 5, 2000);
    assert_eq!(numbers(&mut store, 5), [big]);
    for stream in 1..=4 {
        assert!(numbers(&mut store, stream).is_empty(), "stream {stream}");
    }
    assert_eq!(consistent(&redis), 2008);
    // ...until the session's next event, on any stream.
    let small = append(&mut store, 6, 100);
    assert!(numbers(&mut store, 5).is_empty());
    assert_eq!(numbers(&mut store, 6), [small]);
    assert_eq!(consistent(&redis), 108);
    // Another session is counted apart.
    store.append("other", HttpStreamId(1), 1, &sized(1, 500));
    assert_eq!(counted(&redis, "mcpw", "other", 0), 508);
    assert_eq!(consistent(&redis), 108);
    store.forget("s");
    store.forget("other");
    assert!(redis.keys().iter().all(|k| !k.starts_with("mcpw:")));
}

/// A session total that drifted from what the streams hold (here: an index entry dropped
/// without its count, as an older version's append prunes expired streams) is counted again
/// before any live event is evicted for it.
#[test]
fn a_drifted_session_total_is_mended_before_it_costs_live_events() {
    let redis = RedisServer::start();
    let mut store = session_bounded(&redis, 1000);
    store.append("s", HttpStreamId(1), 1, &sized(1, 500));
    assert_eq!(counted(&redis, "mcpw", "s", 0), 508);
    // Stream 1 leaves the index and its key goes, but its count stays.
    let mut inspect = redis.inspect();
    redis::cmd("ZREM")
        .arg("mcpw:x:s")
        .arg("1")
        .exec(&mut inspect)
        .unwrap();
    redis::cmd("DEL")
        .arg("mcpw:e:s:1")
        .exec(&mut inspect)
        .unwrap();
    for n in 2..=4 {
        store.append("s", HttpStreamId(2), n, &sized(n, 200));
    }
    // 508 + 624 counted, 624 held: nothing of stream 2 goes, and the count is right again.
    assert_eq!(
        replay(&mut store, "s", 2, 0),
        vec![sized(2, 200), sized(3, 200), sized(4, 200)]
    );
    assert_eq!(counted(&redis, "mcpw", "s", 0), 624);
    assert_eq!(
        counted(&redis, "mcpw", "s", 1),
        0,
        "the stale count is gone"
    );
}

/// The session's index lost a stream (a Redis under `maxmemory` evicting it) after the
/// session's one recount: its count stayed in the total, which stayed too high, and every
/// append then trimmed the live stream's own events. The counts naming more streams than the
/// index holds make the session count again (found by a review of the store).
#[test]
fn a_total_that_drifts_after_the_recount_is_mended_again() {
    let redis = RedisServer::start();
    let mut store = session_bounded(&redis, 1000);
    // Past the bound once: counted again (field c), stream 1 trimmed away.
    store.append("s", HttpStreamId(1), 1, &sized(1, 500));
    store.append("s", HttpStreamId(2), 1, &sized(1, 600));
    store.append("s", HttpStreamId(3), 1, &sized(1, 300));
    // (Each event counts its bytes and 8 more, its number.)
    assert_eq!(counted(&redis, "mcpw", "s", 0), 608 + 308);
    // Stream 2 leaves the index, its count stays.
    redis::cmd("ZREM")
        .arg("mcpw:x:s")
        .arg("2")
        .exec(&mut redis.inspect())
        .unwrap();
    store.append("s", HttpStreamId(3), 2, &sized(2, 300));
    assert_eq!(
        replay(&mut store, "s", 3, 0),
        vec![sized(1, 300), sized(2, 300)],
        "the live stream lost its own events to a stale count"
    );
    assert_eq!(counted(&redis, "mcpw", "s", 0), 616);
}

/// Another program's data where the store keeps a session's counts (or its index): the
/// append fails, counted, before anything is written. It used to write the event first and
/// fail after, leaving a stream key with no TTL that grew with every append and was never
/// trimmed (found by a review of the store).
#[test]
fn a_foreign_key_fails_the_append_before_anything_is_written() {
    let redis = RedisServer::start();
    let mut store = events(&redis, options());
    let health = store.health();
    for key in ["mcpw:b:s", "mcpw:x:s", "mcpw:e:s:1"] {
        let mut admin = redis.inspect();
        redis::cmd("SET")
            .arg(key)
            .arg("x")
            .exec(&mut admin)
            .unwrap();
        for n in 1..=300 {
            store.append("s", HttpStreamId(1), n, &event(1, n));
        }
        let kind: String = redis::cmd("TYPE")
            .arg("mcpw:e:s:1")
            .query(&mut admin)
            .unwrap();
        let index: i64 = redis::cmd("EXISTS")
            .arg("mcpw:x:s")
            .query(&mut admin)
            .unwrap();
        assert!(
            kind != "zset" && (index == 0 || key == "mcpw:x:s"),
            "{key}: written ({kind}, index {index})"
        );
        redis::cmd("DEL").arg(key).exec(&mut admin).unwrap();
    }
    assert_eq!(health.errors(), 900);
    let last = health.last_error().expect("the error");
    assert!(last.contains("WRONGTYPE"), "{last}");
    // The store serves once the key is gone.
    store.append("s", HttpStreamId(1), 301, &event(1, 301));
    assert_eq!(replay(&mut store, "s", 1, 0), vec![event(1, 301)]);
}

/// Another stream's key of another type, met while the session is trimmed, leaves the
/// session's index and counts, and the trim goes on with the next stream: it would have
/// been picked again and again.
#[test]
fn a_foreign_stream_key_leaves_the_session_while_it_is_trimmed() {
    let redis = RedisServer::start();
    let mut store = session_bounded(&redis, 1000);
    store.append("s", HttpStreamId(1), 1, &sized(1, 400));
    store.append("s", HttpStreamId(2), 1, &sized(1, 400));
    let mut admin = redis.inspect();
    redis::cmd("DEL")
        .arg("mcpw:e:s:1")
        .exec(&mut admin)
        .unwrap();
    redis::cmd("SET")
        .arg("mcpw:e:s:1")
        .arg("x")
        .exec(&mut admin)
        .unwrap();
    store.append("s", HttpStreamId(3), 1, &sized(1, 400));
    assert_eq!(replay(&mut store, "s", 2, 0), vec![sized(1, 400)]);
    assert_eq!(replay(&mut store, "s", 3, 0), vec![sized(1, 400)]);
    assert_eq!(counted(&redis, "mcpw", "s", 1), 0);
    assert_eq!(counted(&redis, "mcpw", "s", 0), 816);
    assert_eq!(store.health().errors(), 0);
}

/// A session at its byte bound is counted again once, not at every append: each count looks
/// up every stream of the session, and a long session of small streams (one per answered
/// call) made every append cost tens of thousands of look-ups on Redis's one thread.
#[test]
fn a_session_at_its_bound_is_not_counted_again_at_every_append() {
    let redis = RedisServer::start();
    let mut store = session_bounded(&redis, 4000);
    // 400 streams of one 108-byte event: past the bound from the 38th on.
    for n in 1..=400u64 {
        store.append("s", HttpStreamId(n), 1, &sized(1, 100));
    }
    let before = calls(&redis, "zscore");
    for n in 401..=500u64 {
        store.append("s", HttpStreamId(n), 1, &sized(1, 100));
    }
    let looked = calls(&redis, "zscore") - before;
    assert!(looked < 100, "{looked} look-ups for 100 appends");
    assert!(counted(&redis, "mcpw", "s", 0) <= 4000);
    assert_eq!(replay(&mut store, "s", 500, 0), vec![sized(1, 100)]);
}

/// The stream appended to now sorts first in the index while another stream is there (the
/// two appended in one millisecond, their scores tied, the other's id sorting after it as
/// text: "10" after "9"; here the other's score is raised to force it): the other stream
/// loses its oldest events. The stream appended to lost its own, and the session stayed
/// over its bound.
#[test]
fn a_stream_tied_with_the_one_appended_to_is_trimmed_first() {
    let redis = RedisServer::start();
    let mut store = session_bounded(&redis, 1000);
    for n in 1..=2 {
        store.append("s", HttpStreamId(10), n, &sized(n, 200));
    }
    for n in 1..=5 {
        store.append("s", HttpStreamId(9), n, &sized(n, 100));
    }
    // Stream 10 sorts after stream 9 from now on.
    redis::cmd("ZADD")
        .arg("mcpw:x:s")
        .arg(9_000_000_000_000_000u64)
        .arg("10")
        .exec(&mut redis.inspect())
        .unwrap();
    store.append("s", HttpStreamId(9), 6, &sized(6, 200));
    // 956 + 208 counted: stream 10 gives its oldest event, stream 9 keeps all of its.
    assert_eq!(replay(&mut store, "s", 10, 0), vec![sized(2, 200)]);
    assert_eq!(replay(&mut store, "s", 9, 0).len(), 6);
    assert!(counted(&redis, "mcpw", "s", 0) <= 1000);
}

/// A drifted total is counted again before another stream loses events for it, not only
/// before the stream appended to does: the other stream was emptied first.
#[test]
fn a_drifted_total_is_mended_before_another_stream_loses_events() {
    let redis = RedisServer::start();
    let mut store = session_bounded(&redis, 1000);
    store.append("s", HttpStreamId(1), 1, &sized(1, 500));
    store.append("s", HttpStreamId(3), 1, &sized(1, 292));
    // Stream 1 leaves the index and its key goes, but its count stays (508 stale bytes).
    let mut inspect = redis.inspect();
    redis::cmd("ZREM")
        .arg("mcpw:x:s")
        .arg("1")
        .exec(&mut inspect)
        .unwrap();
    redis::cmd("DEL")
        .arg("mcpw:e:s:1")
        .exec(&mut inspect)
        .unwrap();
    store.append("s", HttpStreamId(2), 1, &sized(1, 200));
    // 300 + 208 held, within the bound: stream 3 keeps its event.
    assert_eq!(replay(&mut store, "s", 3, 0), vec![sized(1, 292)]);
    assert_eq!(counted(&redis, "mcpw", "s", 0), 508);
}

#[test]
fn two_replicas_see_each_others_writes() {
    let redis = RedisServer::start();
    let (mut events_a, mut events_b) = (events(&redis, options()), events(&redis, options()));
    let (mut sessions_a, mut sessions_b) =
        (sessions(&redis, options()), sessions(&redis, options()));

    sessions_a
        .create("s", r#"{"method":"initialize"}"#)
        .unwrap();
    assert_eq!(
        sessions_b.load("s").unwrap().as_deref(),
        Some(r#"{"method":"initialize"}"#)
    );
    assert_eq!(sessions_b.touch("s"), Ok(true));

    events_a.append("s", HttpStreamId(1 << 48), 1, &event(1 << 48, 1));
    events_b.append("s", HttpStreamId(2 << 48), 2, &event(2 << 48, 2));
    events_a.append("s", HttpStreamId(1 << 48), 3, &event(1 << 48, 3));
    assert_eq!(
        replay(&mut events_b, "s", 1 << 48, 1),
        vec![event(1 << 48, 3)]
    );
    assert_eq!(
        replay(&mut events_a, "s", 2 << 48, 0),
        vec![event(2 << 48, 2)]
    );

    // A DELETE on B ends the session on A too, with the events of both replicas' streams.
    sessions_b.forget("s").unwrap();
    events_b.forget("s");
    assert_eq!(sessions_a.touch("s"), Ok(false));
    assert_eq!(sessions_a.load("s").unwrap(), None);
    assert!(replay(&mut events_a, "s", 1 << 48, 0).is_empty());
    assert!(redis.keys().is_empty(), "{:?}", redis.keys());
}

#[test]
fn sessions_are_created_loaded_touched_and_forgotten() {
    let redis = RedisServer::start();
    let mut store = sessions(&redis, options());
    assert_eq!(store.load("unknown").unwrap(), None);
    assert_eq!(store.touch("unknown"), Ok(false));
    assert!(redis.keys().is_empty(), "load and touch create nothing");

    let init =
        r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"clientInfo":{"name":"ü"}}}"#;
    store.create("a", init).unwrap();
    store.create("b", "other").unwrap();
    assert_eq!(store.load("a").unwrap().as_deref(), Some(init));
    assert_eq!(store.touch("a"), Ok(true));
    assert_eq!(redis.keys(), vec!["mcpw:s:a", "mcpw:s:b"]);
    let ttl: i64 = redis::cmd("PTTL")
        .arg("mcpw:s:a")
        .query(&mut redis.inspect())
        .unwrap();
    assert!(ttl > 590_000 && ttl <= 600_000, "the default TTL: {ttl}");

    store.forget("a").unwrap();
    assert_eq!(store.touch("a"), Ok(false));
    assert_eq!(store.load("a").unwrap(), None);
    assert_eq!(store.load("b").unwrap().as_deref(), Some("other"));
    // Forgetting twice, or a session never created, is harmless.
    store.forget("a").unwrap();
    store.forget("never").unwrap();
    assert_eq!(store.health().errors(), 0);
}

/// A store's failures are reported without the session's id, which is its client's
/// credential: `mcpwire serve` prints the last one every second. The key of a foreign value
/// in the index and a record that is not text named it (found by a review of the store).
#[test]
fn failures_are_reported_without_the_session_id() {
    let redis = RedisServer::start();
    let (mut events, mut sessions) = (events(&redis, options()), sessions(&redis, options()));
    let mut admin = redis.inspect();
    let secret = "secret-7f3a";
    redis::cmd("SET")
        .arg(format!("mcpw:x:{secret}"))
        .arg("foreign")
        .exec(&mut admin)
        .unwrap();
    events.append(secret, HttpStreamId(1), 1, &event(1, 1));
    let last = events.health().last_error().expect("the append failed");
    assert!(last.contains("index of streams"), "{last}");
    assert!(!last.contains(secret), "{last}");
    redis::cmd("SET")
        .arg(format!("mcpw:s:{secret}"))
        .arg(&b"\xff{"[..])
        .exec(&mut admin)
        .unwrap();
    assert_eq!(sessions.load(secret).unwrap(), None);
    let last = sessions
        .health()
        .last_error()
        .expect("the record was refused");
    assert!(
        last.contains("not UTF-8") && !last.contains(secret),
        "{last}"
    );
}

/// A session record that is not UTF-8 (another program's, or damaged) is an unknown session,
/// its client starting afresh: it was taken for a connection out of step, so every load
/// reconnected, renewed the record and answered 503, for as long as the client retried
/// (found by a review of the store).
#[test]
fn a_record_that_is_not_text_is_an_unknown_session() {
    let redis = RedisServer::start();
    let mut store = sessions(&redis, options());
    let mut admin = redis.inspect();
    redis::cmd("SET")
        .arg("mcpw:s:x")
        .arg(&b"\xff{"[..])
        .exec(&mut admin)
        .unwrap();
    store.create("ok", "fine").unwrap();
    let before = connections(&mut admin);
    for _ in 0..3 {
        assert_eq!(store.load("x").unwrap(), None);
    }
    assert_eq!(connections(&mut admin), before, "a reconnect at each load");
    assert_eq!(store.health().errors(), 3);
    assert!(store.health().last_error().unwrap().contains("not UTF-8"));
    assert_eq!(store.load("ok").unwrap().as_deref(), Some("fine"));
}

#[test]
fn the_two_forgets_delete_only_their_own_keys() {
    let redis = RedisServer::start();
    let (mut events, mut sessions) = (events(&redis, options()), sessions(&redis, options()));
    sessions.create("s", "init").unwrap();
    sessions.create("t", "init").unwrap();
    for stream in [1, 2, 3] {
        events.append("s", HttpStreamId(stream), stream, &event(stream, stream));
    }
    events.append("t", HttpStreamId(1), 1, &event(1, 1));
    assert_eq!(
        redis.keys(),
        vec![
            "mcpw:b:s",
            "mcpw:b:t",
            "mcpw:e:s:1",
            "mcpw:e:s:2",
            "mcpw:e:s:3",
            "mcpw:e:t:1",
            "mcpw:s:s",
            "mcpw:s:t",
            "mcpw:x:s",
            "mcpw:x:t"
        ]
    );
    events.forget("s");
    for stream in [1, 2, 3] {
        assert!(replay(&mut events, "s", stream, 0).is_empty());
    }
    assert_eq!(replay(&mut events, "t", 1, 0), vec![event(1, 1)]);
    assert_eq!(
        sessions.touch("s"),
        Ok(true),
        "the events store leaves sessions alone"
    );
    sessions.forget("s").unwrap();
    assert_eq!(
        redis.keys(),
        vec!["mcpw:b:t", "mcpw:e:t:1", "mcpw:s:t", "mcpw:x:t"],
        "and the session store leaves events alone"
    );
}

#[test]
fn sessions_and_events_expire_after_the_ttl_unless_touched() {
    let redis = RedisServer::start();
    let short = RedisOptions {
        ttl: Duration::from_millis(1000),
        ..options()
    };
    let (mut events, mut sessions) = (events(&redis, short.clone()), sessions(&redis, short));
    sessions.create("idle", "init").unwrap();
    sessions.create("busy", "init").unwrap();
    sessions.create("loaded", "init").unwrap();
    events.append("idle", HttpStreamId(1), 1, b"e");
    // (Touched every 400 ms against a TTL of a second: a stall of 600 ms is tolerated.)
    for _ in 0..3 {
        sleep(Duration::from_millis(400));
        assert_eq!(sessions.touch("busy"), Ok(true));
        assert!(
            sessions.load("loaded").unwrap().is_some(),
            "load counts as a touch"
        );
    }
    // 1,200 ms later (sleeps only overshoot): the idle session and its events are gone, the
    // touched ones are not.
    assert_eq!(sessions.touch("idle"), Ok(false));
    assert_eq!(sessions.load("idle").unwrap(), None);
    assert!(replay(&mut events, "idle", 1, 0).is_empty());
    assert_eq!(sessions.touch("busy"), Ok(true));
    assert_eq!(redis.keys(), vec!["mcpw:s:busy", "mcpw:s:loaded"]);
    sleep(Duration::from_millis(1100));
    assert!(redis.keys().is_empty());
}

/// A long session's index of streams holds its live streams only: it kept every stream the
/// session ever had (60,000 streams made 3.9 MB and a 98 ms `forget`).
#[test]
fn a_sessions_index_forgets_expired_streams() {
    let redis = RedisServer::start();
    let short = RedisOptions {
        ttl: Duration::from_millis(300),
        ..options()
    };
    let mut events = events(&redis, short);
    for stream in 1..=50 {
        events.append("long", HttpStreamId(stream), 1, b"e");
    }
    let count = |redis: &RedisServer| -> usize {
        redis::cmd("ZCARD")
            .arg("mcpw:x:long")
            .query(&mut redis.inspect())
            .unwrap()
    };
    assert_eq!(count(&redis), 50);
    sleep(Duration::from_millis(400));
    // The 50 streams' keys have expired; the next append drops them from the index.
    events.append("long", HttpStreamId(51), 1, b"e");
    assert_eq!(count(&redis), 1);
    assert_eq!(replay(&mut events, "long", 51, 0), vec![b"e".to_vec()]);
    // Their bytes left the session's total with them.
    assert_eq!(counted(&redis, "mcpw", "long", 0), 9);
    events.forget("long");
    assert!(redis.keys().is_empty());
}

/// A TTL of `Duration::MAX` ("keep for good") still gives every key an expiry and every
/// append succeeds: the expiry time went past what Redis 7.0's scripts print as an integer,
/// and each append failed after its writes, leaving keys that never expired.
#[test]
fn a_ttl_of_duration_max_still_expires_every_key() {
    let redis = RedisServer::start();
    let mut events = events(
        &redis,
        RedisOptions {
            ttl: Duration::MAX,
            ..options()
        },
    );
    events.append("s", HttpStreamId(1), 1, b"e");
    assert_eq!(replay(&mut events, "s", 1, 0), vec![b"e".to_vec()]);
    let keys = redis.keys();
    assert!(!keys.is_empty());
    for key in keys {
        let ttl: i64 = redis::cmd("PTTL")
            .arg(&key)
            .query(&mut redis.inspect())
            .unwrap();
        assert!(ttl > 0, "{key}: PTTL {ttl}");
    }
}

#[test]
fn the_prefix_separates_deployments() {
    let redis = RedisServer::start();
    let mut one = sessions(&redis, options());
    let mut two = sessions(
        &redis,
        RedisOptions {
            prefix: "other".into(),
            ..options()
        },
    );
    one.create("s", "one").unwrap();
    assert_eq!(two.load("s").unwrap(), None);
    two.create("s", "two").unwrap();
    assert_eq!(one.load("s").unwrap().as_deref(), Some("one"));
    assert_eq!(redis.keys(), vec!["mcpw:s:s", "other:s:s"]);
}

#[test]
fn failures_are_counted_and_fail_safe_and_the_stores_recover() {
    let mut redis = RedisServer::start();
    let (mut events, mut sessions) = (events(&redis, options()), sessions(&redis, options()));
    let (events_health, sessions_health) = (events.health(), sessions.health());
    sessions.create("s", "init").unwrap();
    events.append("s", HttpStreamId(1), 1, b"before");
    assert_eq!((events_health.errors(), sessions_health.errors()), (0, 0));
    assert_eq!(events_health.last_error(), None);

    redis.stop();
    let started = Instant::now();
    events.append("s", HttpStreamId(1), 2, b"lost");
    assert_eq!(
        try_replay(&mut events, "s", 1, 0),
        Err(StoreUnavailable),
        "says it could not be read"
    );
    events.forget("s");
    assert_eq!(events_health.errors(), 3);
    assert_eq!(
        sessions.touch("s"),
        Err(StoreUnavailable),
        "touch fails open"
    );
    assert_eq!(
        sessions.load("s"),
        Err(StoreUnavailable),
        "load fails closed, and says so"
    );
    assert_eq!(
        sessions.create("t", "init"),
        Err(StoreUnavailable),
        "create says so: the session does not open"
    );
    assert_eq!(
        sessions.forget("s"),
        Err(StoreUnavailable),
        "forget says so"
    );
    assert_eq!(sessions_health.errors(), 4);
    let last = sessions_health.last_error().expect("the last error");
    assert!(last.starts_with("forget session: "), "{last}");
    assert!(
        events_health
            .last_error()
            .unwrap()
            .starts_with("forget events: "),
        "{:?}",
        events_health.last_error()
    );
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "a refused connection fails fast"
    );
    // Clones of the handle see the same counts.
    assert_eq!(events_health.clone().errors(), events.health().errors());

    // Redis comes back on the same address (empty: it kept nothing); the same stores work.
    redis.restart();
    assert_eq!(
        sessions.touch("s"),
        Ok(false),
        "the session did not survive"
    );
    sessions.create("s", "init").unwrap();
    assert_eq!(sessions.touch("s"), Ok(true));
    assert_eq!(sessions.load("s").unwrap().as_deref(), Some("init"));
    events.append("s", HttpStreamId(1), 3, b"after");
    assert_eq!(replay(&mut events, "s", 1, 0), vec![b"after".to_vec()]);
    assert_eq!((events_health.errors(), sessions_health.errors()), (3, 4));

    // A restart between two calls costs nothing: the broken connection is replaced and the
    // call retried on the new one.
    redis.restart();
    sessions.create("s", "again").unwrap();
    events.append("s", HttpStreamId(1), 4, b"again");
    assert_eq!(sessions.load("s").unwrap().as_deref(), Some("again"));
    assert_eq!(replay(&mut events, "s", 1, 0), vec![b"again".to_vec()]);
    assert_eq!((events_health.errors(), sessions_health.errors()), (3, 4));
}

#[test]
fn an_error_reply_is_counted_and_keeps_the_connection() {
    let redis = RedisServer::start();
    let mut store = events(&redis, options());
    let health = store.health();
    let mut admin = redis.inspect();
    let before = connections(&mut admin);
    // Past maxmemory, every write gets an OOM error reply.
    for (name, value) in [("maxmemory-policy", "noeviction"), ("maxmemory", "1")] {
        redis::cmd("CONFIG")
            .arg("SET")
            .arg(name)
            .arg(value)
            .exec(&mut admin)
            .expect("CONFIG SET");
    }
    store.append("s", HttpStreamId(1), 1, b"refused");
    store.append("s", HttpStreamId(1), 2, b"refused");
    assert_eq!(health.errors(), 2, "each call failed once");
    let last = health.last_error().expect("the error");
    assert!(
        last.starts_with("append: ") && last.contains("OOM"),
        "{last}"
    );
    assert_eq!(
        connections(&mut admin),
        before,
        "neither a reconnect nor a retry for an error reply"
    );
    // Once Redis takes writes again, the same connection serves.
    redis::cmd("CONFIG")
        .arg("SET")
        .arg("maxmemory")
        .arg("0")
        .exec(&mut admin)
        .expect("CONFIG SET");
    store.append("s", HttpStreamId(1), 3, b"kept");
    assert_eq!(replay(&mut store, "s", 1, 0), vec![b"kept".to_vec()]);
    assert_eq!(health.errors(), 2);
    assert_eq!(connections(&mut admin), before);
}

/// A stream whose key expired while its session's counts lived on (another of the
/// session's streams was appended to later) counts from nothing when appended to again: its
/// old bytes leave the session's total. Kept, they would have made the total drift upward,
/// and the session's newer events would have been trimmed early.
#[test]
fn a_stream_that_expired_counts_from_nothing_again() {
    let redis = RedisServer::start();
    let mut store = events(
        &redis,
        RedisOptions {
            ttl: Duration::from_millis(1000),
            ..options()
        },
    );
    store.append("s", HttpStreamId(1), 1, &sized(1, 500));
    sleep(Duration::from_millis(600));
    store.append("s", HttpStreamId(2), 1, &sized(1, 100));
    // Stream 1's key has expired (1 s after its append); stream 2 and the counts live on.
    sleep(Duration::from_millis(500));
    store.append("s", HttpStreamId(1), 2, &sized(2, 100));
    let (one, two) = (
        counted(&redis, "mcpw", "s", 1),
        counted(&redis, "mcpw", "s", 2),
    );
    assert!(two > 100, "{two}");
    assert_eq!(one, two, "stream 1 counts its new event alone");
    assert_eq!(
        counted(&redis, "mcpw", "s", 0),
        one + two,
        "the session's total"
    );
    assert_eq!(replay(&mut store, "s", 1, 0).len(), 1);
}

/// (A timeout of a second, and Redis paused far longer than the test needs, with an explicit
/// end: the calls that must fall within one rest do so with a second to spare, not 200 ms,
/// on a loaded machine.)
#[test]
fn a_redis_that_stops_answering_costs_bounded_time() {
    let redis = RedisServer::start();
    let mut sessions = sessions(
        &redis,
        RedisOptions {
            timeout: Duration::from_secs(1),
            ..options()
        },
    );
    sessions.create("s", "init").unwrap();
    let mut events = events(
        &redis,
        RedisOptions {
            timeout: Duration::from_secs(1),
            ..options()
        },
    );
    // Another client pauses every client's commands: reads time out.
    let mut admin = redis.inspect();
    redis::cmd("CLIENT")
        .arg("PAUSE")
        .arg(6_000)
        .arg("ALL")
        .exec(&mut admin)
        .unwrap();
    let started = Instant::now();
    assert_eq!(sessions.touch("s"), Err(StoreUnavailable));
    let took = started.elapsed();
    assert!(took < Duration::from_secs(3), "{took:?}");
    assert_eq!(sessions.health().errors(), 1);
    // For one timeout after that, calls fail at once without trying: each waited out the
    // timeout in turn, and a host calling the stores under one lock (the tokio host) served
    // about one request per timeout while Redis stayed frozen.
    // (And for the other stores of this process on that Redis: resting one at a time, an
    // event store and a session store took turns timing out.)
    let started = Instant::now();
    for _ in 0..20 {
        assert_eq!(sessions.touch("s"), Err(StoreUnavailable), "fails open");
    }
    assert!(sessions.load("s").is_err());
    events.append("s", HttpStreamId(1), 1, b"data: x\n\n");
    let took = started.elapsed();
    // (Waiting out the timeout even once would take a second.)
    assert!(took < Duration::from_millis(500), "{took:?}");
    assert_eq!(sessions.health().errors(), 22, "each counts");
    assert_eq!(events.health().errors(), 1);
    let last = sessions.health().last_error().unwrap_or_default();
    assert!(
        last.contains("touch"),
        "the last error stays the timeout's: {last}"
    );
    // Then one call tries again (and waits out the timeout while Redis is still paused).
    std::thread::sleep(Duration::from_millis(1200));
    let started = Instant::now();
    assert!(sessions.load("s").is_err());
    assert!(started.elapsed() >= Duration::from_millis(800), "it tried");
    redis::cmd("CLIENT")
        .arg("UNPAUSE")
        .exec(&mut admin)
        .unwrap();
    // Once it rested, the store works again.
    std::thread::sleep(Duration::from_millis(1200));
    let errors = sessions.health().errors();
    assert_eq!(sessions.load("s").unwrap().as_deref(), Some("init"));
    assert_eq!(sessions.health().errors(), errors);
}

#[test]
fn connect_reports_what_is_wrong() {
    let free = {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap().port()
    };
    let err = RedisSessionStore::connect(&format!("redis://127.0.0.1:{free}/"), options())
        .expect_err("nothing listens there");
    assert!(
        err.to_string().starts_with("cannot connect to Redis: "),
        "{err}"
    );
    assert!(std::error::Error::source(&err).is_some());
    // Something that accepts connections but is not Redis (it never answers): refused
    // within the timeout, not accepted to fail every later call.
    let silent = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("redis://127.0.0.1:{}/", silent.local_addr().unwrap().port());
    let err = RedisSessionStore::connect(&url, options()).expect_err("nothing answers there");
    assert!(err.to_string().contains("did not answer PING"), "{err}");
    let err = RedisEventStore::connect("nonsense://", options()).expect_err("a bad URL");
    assert!(
        err.to_string().starts_with("invalid Redis address"),
        "{err}"
    );

    let redis = RedisServer::start();
    for bad in [
        RedisOptions {
            ttl: Duration::ZERO,
            ..options()
        },
        RedisOptions {
            timeout: Duration::ZERO,
            ..options()
        },
    ] {
        let err = RedisEventStore::connect(&redis.url(), bad.clone()).expect_err("refused");
        assert!(err.to_string().contains("must not be zero"), "{err}");
        RedisSessionStore::connect(&redis.url(), bad).expect_err("refused");
    }
    // A Redis that wants a password the URL lacks: NOAUTH at once, not on every later call.
    let mut locked = RedisServer::start_with(&["--requirepass", "sekrit"]);
    let err = RedisEventStore::connect(&locked.url(), options()).expect_err("no password");
    assert!(err.to_string().contains("NOAUTH"), "{err}");
    let with = format!("redis://:sekrit@127.0.0.1:{}/", locked.port);
    RedisSessionStore::connect(&with, options()).expect("the password given");
    locked.stop();
}

/// A host name is looked up (in a thread of its own, within the timeout) at every connection,
/// so a reconnect follows the name after a restart or failover.
#[test]
fn a_host_name_connects_and_reconnects() {
    let mut redis = RedisServer::start();
    let url = format!("redis://localhost:{}/", redis.port);
    let mut store = RedisEventStore::connect(&url, options()).expect("connect by name");
    store.append("s", HttpStreamId(1), 1, b"one");
    assert_eq!(replay(&mut store, "s", 1, 0), vec![b"one".to_vec()]);
    redis.restart();
    // The first call finds the old connection broken and connects again, by name.
    store.append("s", HttpStreamId(1), 2, b"two");
    assert_eq!(replay(&mut store, "s", 1, 1), vec![b"two".to_vec()]);
    assert_eq!(
        store.health().errors(),
        0,
        "{:?}",
        store.health().last_error()
    );
}

#[test]
fn the_defaults_match_the_server() {
    let options = RedisOptions::default();
    let config = mcpwire::http::HttpServerConfig::new(mcpwire::Config::server("t", "1"));
    assert_eq!(options.ttl, config.session_idle_timeout);
    assert_eq!(options.events_per_stream, config.event_store);
    assert_eq!(options.bytes_per_stream, config.event_store_bytes);
    assert_eq!(options.bytes_per_session, config.event_store_bytes);
    assert_eq!(options.prefix, "mcpw");
    assert_eq!(options.timeout, Duration::from_secs(2));
}

// ---- Two HTTP engines sharing one Redis, as two replicas behind a load balancer ----

mod replicas {
    use super::*;
    use mcpwire::Timestamp;
    use mcpwire::http::client::StreamReader;
    use mcpwire::http::{Body, ConnKey, HttpRequest, HttpResponse, HttpServer, HttpServerConfig};
    use mcpwire::jsonrpc::{OwnedId, RawJson};

    const INIT: &str = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{"sampling":{}},"clientInfo":{"name":"moving-client","version":"7"}}}"#;

    /// A replica's engine on the shared Redis, as a server process starts it.
    fn replica(redis: &RedisServer) -> HttpServer {
        let server = mcpwire::Config::server("redis-test", "1")
            .with_capabilities(r#"{"tools":{},"logging":{}}"#)
            .unwrap();
        let mut config = HttpServerConfig::new(server);
        let mut events = events(redis, options());
        config.first_stream_id = events.first_stream_id().expect("a block of stream ids");
        config.events = Some(Box::new(events));
        config.sessions = Some(Box::new(sessions(redis, options())));
        HttpServer::new(config)
    }

    fn send(s: &mut HttpServer, method: &str, extra: &[(&str, &str)], body: &str) -> HttpResponse {
        let mut headers = vec![
            ("Host", "127.0.0.1:3000"),
            ("Content-Type", "application/json"),
            ("Accept", "application/json, text/event-stream"),
        ];
        headers.extend_from_slice(extra);
        let req = HttpRequest {
            method,
            headers: &headers,
            body: body.as_bytes(),
        };
        // Each call its own bytes: every session gets its own id.
        static SEED: std::sync::atomic::AtomicU8 = std::sync::atomic::AtomicU8::new(0);
        let mut counter = SEED.fetch_add(37, std::sync::atomic::Ordering::Relaxed);
        s.handle_request(Timestamp::ZERO, &req, &mut |buf: &mut [u8]| {
            for b in buf {
                counter = counter.wrapping_add(1);
                *b = counter ^ 0x5a;
            }
        })
    }

    fn header<'r>(r: &'r HttpResponse, name: &str) -> &'r str {
        r.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
            .unwrap_or_else(|| panic!("no {name} in {r:?}"))
    }

    /// POSTs a request on the session; the stream it gets, and where it reached the app.
    fn post(s: &mut HttpServer, sid: &str, body: &str) -> (HttpStreamId, ConnKey, OwnedId) {
        let r = send(s, "POST", &[("Mcp-Session-Id", sid)], body);
        let Body::Stream(stream) = r.body else {
            panic!("a request on a session gets a stream: {r:?}")
        };
        while let Some((key, event)) = s.poll_event() {
            if let mcpwire::Event::Request { id, .. } = event {
                return (stream, key, OwnedId::from(id));
            }
        }
        panic!("the request did not reach the application")
    }

    /// The messages waiting on a stream, and whether it finished.
    fn read(
        s: &mut HttpServer,
        stream: HttpStreamId,
        reader: &mut StreamReader,
    ) -> (Vec<String>, bool) {
        let (mut out, mut finished) = (Vec::new(), false);
        while let Some(o) = s.poll_stream(stream) {
            let bytes = o.bytes.to_vec();
            finished = o.finished;
            reader.feed(&bytes, |m| out.push(String::from_utf8(m.to_vec()).unwrap()));
            s.consume_stream(stream, bytes.len());
            if bytes.is_empty() {
                break;
            }
        }
        (out, finished)
    }

    /// A replica restarted (its process replaced) serves the sessions Redis still holds with
    /// stream ids no earlier process had: the restarted replica reused its ids, so a new
    /// request's events went into an old stream's key and one resumption replayed two
    /// requests' messages (found by a helper's audit).
    #[test]
    fn a_restarted_replica_never_mixes_its_streams_with_the_old_ones() {
        let redis = RedisServer::start();
        let mut a = replica(&redis);
        let r = send(&mut a, "POST", &[], INIT);
        let sid = header(&r, "Mcp-Session-Id").to_owned();
        let initialized = r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#;
        send(&mut a, "POST", &[("Mcp-Session-Id", &sid)], initialized);
        let mut old_streams = Vec::new();
        for life in ["OLD", "NEW"] {
            if life == "NEW" {
                a = replica(&redis); // the process restarts
            }
            let call = r#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"x"}}"#;
            let (stream, key, id) = post(&mut a, &sid, call);
            let text = format!(r#"{{"content":[{{"type":"text","text":"{life}"}}]}}"#);
            a.connection(key)
                .unwrap()
                .respond(id.as_id(), RawJson::new(&text).unwrap())
                .unwrap();
            a.pump();
            let (msgs, finished) = read(&mut a, stream, &mut StreamReader::new());
            assert!(finished && msgs.len() == 1, "{msgs:?}");
            assert!(!old_streams.contains(&stream), "{stream:?} again");
            old_streams.push(stream);
        }
        // Each stream resumes (on another replica) with its own answer only.
        let mut b = replica(&redis);
        for (stream, life) in old_streams.iter().zip(["OLD", "NEW"]) {
            let from = format!("{}-0", stream.0);
            let r = send(
                &mut b,
                "GET",
                &[("Mcp-Session-Id", &sid), ("Last-Event-ID", &from)],
                "",
            );
            let Body::Stream(resumed) = r.body else {
                panic!("{r:?}")
            };
            let (msgs, _) = read(&mut b, resumed, &mut StreamReader::new());
            assert!(
                msgs.len() == 1 && msgs[0].contains(life),
                "{life}: {msgs:?}"
            );
        }
    }

    #[test]
    fn a_session_moves_between_replicas_and_its_stream_resumes_on_the_other() {
        let redis = RedisServer::start();
        let (mut a, mut b) = (replica(&redis), replica(&redis));
        let r = send(&mut a, "POST", &[], INIT);
        assert_eq!(r.status, 200, "{r:?}");
        let sid = header(&r, "Mcp-Session-Id").to_owned();
        let initialized = r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#;
        assert_eq!(
            send(&mut a, "POST", &[("Mcp-Session-Id", &sid)], initialized).status,
            202
        );

        // B never saw the handshake: it takes the session over from Redis.
        assert_eq!(b.sessions(), 0);
        let call = r#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"x"}}"#;
        let (stream, key, id) = post(&mut b, &sid, call);
        let last_block: u64 = redis::cmd("GET")
            .arg("mcpw:streams")
            .query(&mut redis.inspect())
            .unwrap();
        assert_eq!(
            stream.0 >> 40,
            last_block & ((1 << 24) - 1),
            "B's stream ids come from the second block drawn"
        );
        assert_eq!(b.sessions(), 1);
        let conn = b.connection(key).unwrap();
        assert!(conn.peer_info().unwrap().get().contains("moving-client"));
        conn.respond(id.as_id(), RawJson::new(r#"{"content":[]}"#).unwrap())
            .unwrap();
        b.pump();
        let (msgs, finished) = read(&mut b, stream, &mut StreamReader::new());
        assert!(
            finished && msgs.len() == 1 && msgs[0].contains(r#""id":2"#),
            "{msgs:?}"
        );

        // A stream on A: the client sees one message, drops, and resumes on B.
        let call = r#"{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"x"}}"#;
        let (stream, key, id) = post(&mut a, &sid, call);
        let log = |s: &mut HttpServer, text: &str| {
            s.connection(key)
                .unwrap()
                .log(
                    id.as_id(),
                    mcpwire::mcp::LogLevel::Info,
                    None,
                    RawJson::new(text).unwrap(),
                )
                .unwrap();
            s.pump();
        };
        log(&mut a, r#""one""#);
        let mut reader = StreamReader::new();
        let (seen, _) = read(&mut a, stream, &mut reader);
        assert!(seen.len() == 1 && seen[0].contains("one"), "{seen:?}");
        a.stream_closed(Timestamp::ZERO, stream);
        log(&mut a, r#""two""#);
        a.connection(key)
            .unwrap()
            .respond(id.as_id(), RawJson::new(r#"{"content":[]}"#).unwrap())
            .unwrap();
        a.pump();
        let last = reader.last_event_id().expect("an event id").to_owned();
        let r = send(
            &mut b,
            "GET",
            &[("Mcp-Session-Id", &sid), ("Last-Event-ID", &last)],
            "",
        );
        let Body::Stream(resumed) = r.body else {
            panic!("{r:?}")
        };
        let (rest, finished) = read(&mut b, resumed, &mut reader);
        assert_eq!(rest.len(), 2, "what the client missed, once: {rest:?}");
        assert!(
            rest[0].contains("two") && rest[1].contains(r#""id":4"#),
            "{rest:?}"
        );
        assert!(finished);

        // A DELETE on B ends the session on A too, and its events go.
        assert_eq!(
            send(&mut b, "DELETE", &[("Mcp-Session-Id", &sid)], "").status,
            200
        );
        let ping = r#"{"jsonrpc":"2.0","id":5,"method":"ping"}"#;
        assert_eq!(
            send(&mut a, "POST", &[("Mcp-Session-Id", &sid)], ping).status,
            404
        );
        assert_eq!(
            redis.keys(),
            vec!["mcpw:streams"],
            "only the id counter stays"
        );
    }
}

#[test]
fn a_frozen_redis_costs_each_call_the_timeout_at_most() {
    // A Redis that keeps its connections open and answers nothing (stopped, or a network
    // that drops packets): the client's socket timeouts bound each reply, and an append
    // reads seven; a reconnect waits on the handshake's replies too. Each call must still
    // return within the timeout, or the server's loop stalls for many times it.
    let redis = RedisServer::start();
    let timeout = Duration::from_millis(200);
    let short = RedisOptions {
        timeout,
        ..options()
    };
    let mut events = events(&redis, short.clone());
    let mut sessions = sessions(&redis, short);
    sessions.create("s", "init").unwrap();
    events.append("s", HttpStreamId(1), 1, b"one");
    redis.signal("STOP");
    for round in 0..4 {
        let started = Instant::now();
        events.append("s", HttpStreamId(1), 2, b"two");
        let appended = started.elapsed();
        assert_eq!(
            sessions.touch("s"),
            Err(StoreUnavailable),
            "touch fails open"
        );
        assert_eq!(sessions.load("s"), Err(StoreUnavailable));
        let took = started.elapsed();
        // (Waiting the timeout per reply would take seven times it for the append.)
        assert!(
            appended < 2 * timeout && took < 3 * timeout + Duration::from_millis(600),
            "round {round}: the append took {appended:?}, the three calls {took:?}"
        );
    }
    redis.signal("CONT");
    // The stores find their way back by themselves.
    let deadline = Instant::now() + Duration::from_secs(10);
    while sessions.load("s") != Ok(Some("init".into())) {
        assert!(
            Instant::now() < deadline,
            "the session store did not recover"
        );
        sleep(Duration::from_millis(50));
    }
    while try_replay(&mut events, "s", 1, 0).is_ok_and(|e| e.is_empty()) {
        assert!(Instant::now() < deadline, "the event store did not recover");
        sleep(Duration::from_millis(50));
    }
    assert_eq!(replay(&mut events, "s", 1, 0)[0], b"one".to_vec());
}

#[test]
fn a_frozen_redis_on_a_unix_socket_costs_each_call_the_timeout_at_most() {
    // Over a unix socket, `connect` has no timeout: once a frozen Redis's listen queue is
    // full (a backlog of one here), a reconnect blocked until Redis woke up, and with it the
    // server's loop. (Each timed-out call drops its connection; the next reconnects.)
    let path = std::env::temp_dir().join(format!("mcpwire-redis-{}.sock", std::process::id()));
    let _ = std::fs::remove_file(&path);
    let extra: &'static [&'static str] = Box::leak(Box::new([
        "--unixsocket",
        Box::leak(path.to_str().unwrap().to_owned().into_boxed_str()),
        "--tcp-backlog",
        "1",
    ]));
    let redis = RedisServer::start_with(extra);
    let timeout = Duration::from_millis(200);
    let url = format!("redis+unix://{}", path.display());
    let mut sessions = RedisSessionStore::connect(
        &url,
        RedisOptions {
            timeout,
            ..options()
        },
    )
    .expect("connect over the socket");
    sessions.create("s", "init").unwrap();
    assert_eq!(sessions.load("s"), Ok(Some("init".into())));
    redis.signal("STOP");
    let (tx, rx) = std::sync::mpsc::channel();
    let calls = std::thread::spawn(move || {
        for _ in 0..6 {
            let started = Instant::now();
            let loaded = sessions.load("s");
            tx.send((loaded, started.elapsed())).unwrap();
        }
        sessions
    });
    for call in 0..6 {
        let (loaded, took) = rx
            .recv_timeout(Duration::from_secs(5))
            .unwrap_or_else(|_| panic!("call {call} blocked past 5 s with a 200 ms timeout"));
        assert_eq!(loaded, Err(StoreUnavailable), "call {call}");
        assert!(
            took < 2 * timeout + Duration::from_millis(300),
            "call {call} took {took:?}"
        );
    }
    redis.signal("CONT");
    let mut sessions = calls.join().unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while sessions.load("s") != Ok(Some("init".into())) {
        assert!(Instant::now() < deadline, "the store did not recover");
        sleep(Duration::from_millis(50));
    }
    let _ = std::fs::remove_file(&path);
}

#[test]
fn an_initialize_over_max_record_is_not_shared() {
    // A session record keeps its `initialize` for the whole TTL: a client that pads it to
    // megabytes must not get that much of Redis per session.
    let redis = RedisServer::start();
    let mut sessions = sessions(
        &redis,
        RedisOptions {
            max_record: 1024,
            ..options()
        },
    );
    let health = sessions.health();
    sessions.create("small", &"x".repeat(1024)).unwrap();
    sessions
        .create("big", &"x".repeat(1025))
        .expect_err("over max_record");
    assert_eq!(sessions.load("small").unwrap().map(|s| s.len()), Some(1024));
    assert_eq!(sessions.load("big").unwrap(), None);
    assert_eq!(redis.keys(), ["mcpw:s:small"]);
    assert_eq!(health.errors(), 1);
    assert!(
        health
            .last_error()
            .is_some_and(|e| e.contains("max_record")),
        "{:?}",
        health.last_error()
    );
}

/// A spec-valid `initialize` over `max_record` because of its client's icons (`data:` URIs)
/// is shared without them, the rest kept byte for byte: it was refused, and its client got
/// 503 "try again" for good.
#[test]
fn an_initialize_over_max_record_for_its_icons_is_shared_without_them() {
    let redis = RedisServer::start();
    let mut sessions = sessions(
        &redis,
        RedisOptions {
            max_record: 1024,
            ..options()
        },
    );
    let icon = format!(r#"{{"src":"data:image/png;base64,{}"}}"#, "A".repeat(2000));
    let initialize = format!(
        r#"{{"jsonrpc":"2.0","id":1,"method":"initialize","params":{{"protocolVersion":"2025-11-25","capabilities":{{"roots":{{}}}},"clientInfo":{{"name":"c","icons":[{icon}],"version":"1"}}}}}}"#
    );
    assert!(initialize.len() > 1024);
    sessions.create("iconic", &initialize).expect("shared");
    assert_eq!(
        sessions.load("iconic").unwrap().as_deref(),
        Some(
            r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{"roots":{}},"clientInfo":{"name":"c","version":"1"}}}"#
        )
    );
    // Padded elsewhere, it is still refused.
    let padded = initialize.replace(
        r#"{"roots":{}}"#,
        &format!(r#"{{"x":"{}"}}"#, "y".repeat(2000)),
    );
    sessions
        .create("padded", &padded)
        .expect_err("over max_record");
}

#[test]
fn a_replica_number_is_held_by_one_server_at_a_time() {
    use mcpwire_redis::{CLAIM_TTL, ReplicaClaim};
    let redis = RedisServer::start();
    let url = redis.url();
    let claim =
        |token: &str, wait: Duration| ReplicaClaim::acquire(&url, &options(), 3, token, wait);
    let mut first = claim("first", Duration::ZERO).expect("a free number");
    let value: String = redis::cmd("GET")
        .arg("mcpw:replica:3")
        .query(&mut redis.inspect())
        .unwrap();
    assert_eq!(value, "first");
    let ttl: i64 = redis::cmd("PTTL")
        .arg("mcpw:replica:3")
        .query(&mut redis.inspect())
        .unwrap();
    assert!(ttl > 0 && ttl <= CLAIM_TTL.as_millis() as i64, "{ttl}");
    // A second server given the same number is refused, after its wait.
    let started = Instant::now();
    let refused = claim("second", Duration::from_millis(300)).unwrap_err();
    assert!(started.elapsed() >= Duration::from_millis(300));
    assert!(refused.to_string().contains("held by another"), "{refused}");
    // Other numbers are free.
    ReplicaClaim::acquire(&url, &options(), 4, "other", Duration::ZERO).expect("number 4");
    assert!(first.renew());
    // A claim that expired meanwhile is taken again; one taken by another is lost.
    redis::cmd("DEL")
        .arg("mcpw:replica:3")
        .exec(&mut redis.inspect())
        .unwrap();
    assert!(first.renew());
    redis::cmd("SET")
        .arg("mcpw:replica:3")
        .arg("intruder")
        .exec(&mut redis.inspect())
        .unwrap();
    assert!(!first.renew());
    // Dropping a claim releases only its own.
    drop(first);
    assert_eq!(redis.keys(), ["mcpw:replica:3"]);
    redis::cmd("DEL")
        .arg("mcpw:replica:3")
        .exec(&mut redis.inspect())
        .unwrap();
    let second = claim("second", Duration::ZERO).expect("free again");
    drop(second);
    assert!(redis.keys().is_empty(), "released: {:?}", redis.keys());
    // (`Duration::MAX`: wait as long as it takes. It overflowed the clock; the number is free,
    // so a regression panics rather than waits.)
    let third = claim("third", Duration::MAX).expect("free");
    drop(third);
}

/// A claim already held under our own token is ours: what Redis holds after it took our
/// `SET NX` and the connection broke before its reply came (the retry then found the number
/// held). It was refused as held by another running server, after the wait.
#[test]
fn a_claim_held_under_our_own_token_is_ours() {
    use mcpwire_redis::ReplicaClaim;
    let redis = RedisServer::start();
    redis::cmd("SET")
        .arg("mcpw:replica:5")
        .arg("ours")
        .exec(&mut redis.inspect())
        .unwrap();
    let mut claim = ReplicaClaim::acquire(&redis.url(), &options(), 5, "ours", Duration::ZERO)
        .expect("our own claim");
    assert!(claim.renew());
    let refused =
        ReplicaClaim::acquire(&redis.url(), &options(), 5, "theirs", Duration::ZERO).unwrap_err();
    assert!(refused.to_string().contains("held by another"), "{refused}");
}

/// A Redis that lost its data (restarted without persistence, say) while servers ran on does
/// not hand a new process the block of stream ids a running one holds: the counter starts
/// again from the clock, not from zero. It started from zero, and the next process shared
/// the first one's ids (their sessions' resumptions would replay each other's events).
#[test]
fn stream_id_blocks_stay_apart_after_redis_lost_its_data() {
    let redis = RedisServer::start();
    let running = events(&redis, options()).first_stream_id().unwrap();
    let next = events(&redis, options()).first_stream_id().unwrap();
    assert_eq!(next >> 40, (running >> 40) + 1, "consecutive blocks");
    sleep(Duration::from_millis(20)); // (the servers ran on a while)
    redis::cmd("FLUSHALL").exec(&mut redis.inspect()).unwrap();
    let after = events(&redis, options()).first_stream_id().unwrap();
    assert!(
        after != running && after != next,
        "{after:#x} is {running:#x} or {next:#x} again"
    );
}
