//! Shared session and resumable-event stores for mcpwire's Streamable HTTP server, on Redis.
//!
//! [`mcpwire::http::HttpServer`] keeps its sessions and the SSE events kept for resumption
//! (`Last-Event-ID`) in the memory of its process by default. Several server processes behind
//! one load balancer instead share them through the two store traits of the core:
//! [`RedisSessionStore`] implements [`SessionStore`] (a session opened on one replica is served
//! by any other, and a DELETE on any replica ends it everywhere) and [`RedisEventStore`]
//! implements [`EventStore`] (a stream dropped on one replica resumes on another, without loss
//! or duplicates).
//!
//! Use this crate when you run more than one mcpwire HTTP server process for the same
//! endpoint and already have (or can run) a Redis server next to them. A single process does
//! not need it: the core's in-memory defaults are faster and cannot fail.
//!
//! # Example
//!
//! Every replica connects both stores to the same Redis, and draws its SSE stream ids from
//! its own range (`first_stream_id`), since stream ids key the shared events:
//!
//! ```no_run
//! use mcpwire::http::{HttpServer, HttpServerConfig};
//! use mcpwire_redis::{RedisEventStore, RedisOptions, RedisSessionStore, StoreError};
//!
//! /// The HTTP engine of replica number `replica` (0, 1, 2, …) of a deployment.
//! fn replica(config: mcpwire::Config, replica: u64) -> Result<HttpServer, StoreError> {
//!     let url = "redis://127.0.0.1:6379/";
//!     let options = RedisOptions::default();
//!     let events = RedisEventStore::connect(url, options.clone())?;
//!     let sessions = RedisSessionStore::connect(url, options.clone())?;
//!     // Keep these to report the stores' failures (metrics, health checks).
//!     let (_events_health, _sessions_health) = (events.health(), sessions.health());
//!
//!     let mut http = HttpServerConfig::new(config);
//!     // The shared record of a session outlives each replica's idle copy.
//!     http.session_idle_timeout = options.ttl;
//!     http.events = Some(Box::new(events));
//!     http.sessions = Some(Box::new(sessions));
//!     http.first_stream_id = (replica << 48).max(1);
//!     Ok(HttpServer::new(http))
//! }
//! ```
//!
//! # Layout in Redis
//!
//! Every key starts with [`RedisOptions::prefix`] (`mcpw` by default); `{session}` is the
//! session id and `{stream}` the stream number in decimal.
//!
//! - `{prefix}:s:{session}`: a string, the JSON text of the `initialize` request that opened
//!   the session. It expires [`RedisOptions::ttl`] after the last
//!   [`create`](SessionStore::create), [`load`](SessionStore::load) or
//!   [`touch`](SessionStore::touch) from any replica.
//! - `{prefix}:e:{session}:{stream}`: a sorted set, the stream's stored events. Every member
//!   has score 0 and is the event number as 8 big-endian bytes followed by the event's bytes,
//!   so Redis orders the set by event number, members are unique even if two events had the
//!   same bytes, and every `u64` event number is exact (a score, a double, would be exact
//!   only up to 2<sup>53</sup>). It expires `ttl` after the stream's last append.
//! - `{prefix}:i:{session}`: a set of the session's stream numbers, so that
//!   [`forget`](EventStore::forget) finds all its streams. It expires `ttl` after the
//!   session's last append (so never before any of its streams).
//!
//! An append is one `MULTI`/`EXEC` transaction (one round trip): `ZADD`, `ZREMRANGEBYRANK`
//! (the bound), `PEXPIRE` of the stream, `SADD` and `PEXPIRE` of the index. A replay is one
//! `ZRANGEBYLEX` from just past the given event number. `load` is `GET` and `PEXPIRE` in one
//! pipeline, `touch` a `PEXPIRE`, `create` a `SET … PX`. [`RedisSessionStore`]'s `forget`
//! deletes the session key only, [`RedisEventStore`]'s the session's event keys and index
//! (`SMEMBERS`, then one `DEL`).
//!
//! # Guarantees
//!
//! - **Order and exactness.** A replay hands out the stream's events numbered above `after`
//!   in increasing number, each once, byte for byte, and only that stream's.
//! - **Durability before delivery.** An append returns once Redis has acknowledged the
//!   transaction. What survives a crash of Redis itself is Redis's business: its persistence
//!   settings (`appendonly`, `save`), and with replication, whether a failover to a replica
//!   may lose the last acknowledged writes.
//! - **Bounds.** Each stream keeps its newest [`RedisOptions::events_per_stream`] events (256
//!   by default); a resumption from before them replays only what is left. A stream's events
//!   go `ttl` after its last event. The number of streams of a session is not bounded here:
//!   each one costs at most `events_per_stream` events for at most `ttl`.
//! - **Cleanup.** After [`EventStore::forget`] the session's events are gone; after
//!   [`SessionStore::forget`] its record is. The server calls both when a client deletes a
//!   session. Sessions that just go idle are dropped by Redis after `ttl` without a touch,
//!   their events `ttl` after their last event. (An append racing with a `forget` on another
//!   replica may leave that one stream behind; it expires after `ttl`.)
//! - **Expiry.** Set `ttl` to at least the server's
//!   [`session_idle_timeout`](mcpwire::http::HttpServerConfig::session_idle_timeout). The
//!   server touches the store on each request for the session, and every half
//!   `session_idle_timeout` for a session whose client only holds a stream open, so a live
//!   session's record does not expire.
//!
//! # Failures
//!
//! The store traits cannot return errors, so each store handles them itself. Each store owns
//! one connection, driven by a thread of its own, and every call blocks its caller for one
//! round trip (two for [`EventStore::forget`]), and at most [`RedisOptions::timeout`] (2 s by
//! default) whatever Redis does: stop answering, answer a byte at a time, or hang after
//! accepting a connection. A call that finds an earlier one still waiting for Redis waits for
//! it within the same limit. When a call fails (Redis down or slow, the connection broken, an
//! error reply), the store drops the connection, connects again once and retries the call
//! once on the new connection, within the same limit. A call the caller gave up on may still
//! take effect later. A call that fails is counted in the store's [`StoreHealth`] (see
//! [`RedisEventStore::health`]) with its error message, and then:
//!
//! - [`append`](EventStore::append) drops the event. The client connected to this replica
//!   still gets it live; only a resumption (on any replica) misses it.
//! - [`replay`](EventStore::replay) replays nothing: the resumed stream continues with the
//!   events that come after.
//! - [`EventStore::forget`] leaves the events to expire after `ttl`.
//! - [`create`](SessionStore::create) leaves the session unrecorded: other replicas answer
//!   404 for it, and so does this one once a later `touch` finds it missing; the client then
//!   opens a new session.
//! - [`load`](SessionStore::load) returns `None`: the client gets 404 and opens a new session
//!   (safe: nothing is served from a session that cannot be checked).
//! - [`touch`](SessionStore::touch) returns `true` (fails open): a replica that holds the
//!   session keeps serving it through a Redis blip. A DELETE made on another replica during
//!   the blip takes effect here at the first successful touch after it.
//! - [`SessionStore::forget`] leaves the session to expire after `ttl`; until then another
//!   replica may still serve it.
//!
//! The next call reconnects, so a store recovers by itself once Redis is back. Nothing here
//! panics on a Redis failure. Redis itself is trusted: a server that claims a reply of
//! gigabytes gets its bytes read by the store's thread (the caller has long gone on), so run
//! it on a private network.
//!
//! # Limits
//!
//! One Redis server (or a Sentinel-managed primary behind a stable address), not Redis Cluster
//! (the transactions span several keys). `redis://` and `redis+unix://` URLs; TLS
//! (`rediss://`) is not compiled in.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, mpsc};
use std::time::{Duration, Instant};

use mcpwire::http::{EventStore, HttpStreamId, SessionStore};
use redis::{Client, Connection, RedisResult};

/// Settings shared by [`RedisEventStore`] and [`RedisSessionStore`]; give both stores of a
/// deployment, on every replica, the same values. Start from [`RedisOptions::default`] and
/// change what your deployment needs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RedisOptions {
    /// The start of every key, so that several deployments (or other data) share one Redis.
    /// Default `mcpw`.
    pub prefix: String,
    /// How long a session's record lives without a touch from any replica, and a stream's
    /// events after its last event. Default 10 minutes, the server's default
    /// `session_idle_timeout`; use at least the server's value. Rounded up to whole
    /// milliseconds; zero is refused.
    pub ttl: Duration,
    /// How many of the newest events each stream keeps for resumption. Default 256. Zero
    /// stores no events (resumption then replays nothing).
    pub events_per_stream: usize,
    /// How long a call may take, all its round trips and a reconnect included, before it
    /// fails (the store gives up waiting; see the crate's "Failures"). Default 2 seconds;
    /// zero is refused.
    pub timeout: Duration,
    /// The largest `initialize` request a session's record keeps, in bytes. A session whose
    /// `initialize` is larger is not shared (as if Redis had failed: it ends at its next
    /// request), so that one client cannot store megabytes per session for the whole TTL.
    /// Default 64 KiB; clients send a few hundred bytes.
    pub max_record: usize,
}

impl Default for RedisOptions {
    fn default() -> Self {
        RedisOptions {
            prefix: "mcpw".to_owned(),
            ttl: Duration::from_secs(600),
            events_per_stream: 256,
            timeout: Duration::from_secs(2),
            max_record: 64 * 1024,
        }
    }
}

/// Why a store could not be created: a malformed URL, invalid [`RedisOptions`], or no Redis
/// answering at the address. Returned by [`RedisEventStore::connect`] and
/// [`RedisSessionStore::connect`]; report it and retry or stop at startup.
#[derive(Debug)]
pub struct StoreError {
    message: String,
    source: Option<redis::RedisError>,
}

impl StoreError {
    fn invalid(message: &str) -> Self {
        StoreError {
            message: message.to_owned(),
            source: None,
        }
    }

    fn redis(message: &str, source: redis::RedisError) -> Self {
        StoreError {
            message: message.to_owned(),
            source: Some(source),
        }
    }
}

impl fmt::Display for StoreError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.source {
            Some(source) => write!(f, "{}: {source}", self.message),
            None => f.write_str(&self.message),
        }
    }
}

impl std::error::Error for StoreError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.source
            .as_ref()
            .map(|e| e as &(dyn std::error::Error + 'static))
    }
}

/// The failures of a store that its callers never see (the store traits return no errors):
/// how many calls failed even after a reconnect and retry, and the last error. Get it from
/// [`RedisEventStore::health`] or [`RedisSessionStore::health`] before handing the store to
/// the server, and read it from anywhere (clones share the same counts) to report the stores'
/// state in metrics, logs or a health check.
#[derive(Clone, Debug, Default)]
pub struct StoreHealth {
    inner: Arc<HealthInner>,
}

#[derive(Debug, Default)]
struct HealthInner {
    errors: AtomicU64,
    last_error: Mutex<Option<String>>,
}

impl StoreHealth {
    /// How many calls have failed so far (each after its retry). Compare two readings to see
    /// whether the store is failing now.
    pub fn errors(&self) -> u64 {
        self.inner.errors.load(Ordering::Relaxed)
    }

    /// The message of the last failure (which call, and Redis's or the connection's error),
    /// or `None` if no call has failed yet. It stays after the store recovers.
    pub fn last_error(&self) -> Option<String> {
        self.inner
            .last_error
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .clone()
    }

    fn record_message(&self, what: &str, message: &str) {
        *self
            .inner
            .last_error
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner()) = Some(format!("{what}: {message}"));
        self.inner.errors.fetch_add(1, Ordering::Relaxed);
    }
}

/// The connection, owned by the link's thread, re-established on failure.
struct Wire {
    client: Client,
    conn: Option<Connection>,
    timeout: Duration,
}

impl Wire {
    fn connect(&self) -> RedisResult<Connection> {
        let conn = self.client.get_connection_with_timeout(self.timeout)?;
        conn.set_read_timeout(Some(self.timeout))?;
        conn.set_write_timeout(Some(self.timeout))?;
        Ok(conn)
    }

    /// Runs `call`; on failure reconnects once and runs it once more (at most one connection
    /// attempt per call).
    fn run<T>(
        &mut self,
        call: &mut impl FnMut(&mut Connection) -> RedisResult<T>,
    ) -> RedisResult<T> {
        if let Some(conn) = self.conn.as_mut() {
            match call(conn) {
                Ok(value) => return Ok(value),
                // After an error (a timeout in particular) the connection may be out of step
                // with its replies: never reuse it.
                Err(_) => self.conn = None,
            }
        }
        let mut conn = self.connect()?;
        let value = call(&mut conn)?;
        self.conn = Some(conn);
        Ok(value)
    }
}

/// A call for the link's thread: runs on its connection and sends its outcome back.
type Job = Box<dyn FnOnce(&mut Wire) + Send>;

/// Whether the link's thread is running a call, possibly one its caller gave up on.
#[derive(Default)]
struct Busy {
    running: Mutex<bool>,
    done: Condvar,
}

impl Busy {
    fn lock(&self) -> std::sync::MutexGuard<'_, bool> {
        self.running
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn finish(&self) {
        *self.lock() = false;
        self.done.notify_all();
    }
}

/// One connection to Redis, driven by a thread of its own, so that every call returns within
/// the timeout whatever Redis does: a Redis that stops answering, answers one byte at a time,
/// or takes a reply apart costs the caller the timeout at most. The redis client's socket
/// timeouts bound each read, not a whole call (a transaction reads seven replies).
struct Link {
    jobs: mpsc::Sender<Job>,
    busy: Arc<Busy>,
    /// The thread holds a connection (for `Debug`).
    connected: Arc<AtomicBool>,
    timeout: Duration,
    health: StoreHealth,
}

impl Link {
    fn open(url: &str, timeout: Duration) -> Result<Self, StoreError> {
        if timeout.is_zero() {
            return Err(StoreError::invalid("the Redis timeout must not be zero"));
        }
        let client =
            Client::open(url).map_err(|e| StoreError::redis("invalid Redis address", e))?;
        let mut wire = Wire {
            client,
            conn: None,
            timeout,
        };
        let conn = wire
            .connect()
            .map_err(|e| StoreError::redis("cannot connect to Redis", e))?;
        wire.conn = Some(conn);
        let (jobs, queue) = mpsc::channel::<Job>();
        let connected = Arc::new(AtomicBool::new(true));
        let seen = connected.clone();
        std::thread::Builder::new()
            .name("mcpwire-redis".to_owned())
            .spawn(move || {
                // Ends when the store is dropped (and the call it runs, if any, has ended).
                while let Ok(job) = queue.recv() {
                    job(&mut wire);
                    seen.store(wire.conn.is_some(), Ordering::Relaxed);
                }
            })
            .map_err(|_| StoreError::invalid("cannot start the Redis connection's thread"))?;
        Ok(Link {
            jobs,
            busy: Arc::new(Busy::default()),
            connected,
            timeout,
            health: StoreHealth::default(),
        })
    }

    /// Runs `call` on the connection (reconnecting and retrying once on failure) and waits
    /// for it at most the timeout, counting the wait for an earlier call that is still
    /// running. `None` when it failed or did not end in time, recorded under `what`; a call
    /// given up on may still take effect later.
    // The store does the IO, so it reads the clock for its own deadline.
    #[allow(clippy::disallowed_methods)]
    fn run<T: Send + 'static>(
        &mut self,
        what: &str,
        mut call: impl FnMut(&mut Connection) -> RedisResult<T> + Send + 'static,
    ) -> Option<T> {
        let deadline = Instant::now() + self.timeout;
        {
            let running = self.busy.lock();
            let (mut running, _) = self
                .busy
                .done
                .wait_timeout_while(running, self.timeout, |running| *running)
                .unwrap_or_else(|poisoned| poisoned.into_inner());
            if *running {
                drop(running);
                self.health
                    .record_message(what, "Redis has not answered an earlier call in time");
                return None;
            }
            *running = true;
        }
        let (reply, outcome) = mpsc::sync_channel(1);
        let busy = self.busy.clone();
        let job: Job = Box::new(move |wire: &mut Wire| {
            let result = wire.run(&mut call).map_err(|e| e.to_string());
            busy.finish();
            let _ = reply.send(result); // (nobody waits for a call given up on)
        });
        if self.jobs.send(job).is_err() {
            self.busy.finish();
            self.health
                .record_message(what, "the Redis connection's thread has ended");
            return None;
        }
        let left = deadline.saturating_duration_since(Instant::now());
        match outcome.recv_timeout(left) {
            Ok(Ok(value)) => Some(value),
            Ok(Err(message)) => {
                self.health.record_message(what, &message);
                None
            }
            Err(_) => {
                self.health
                    .record_message(what, "no answer from Redis within the timeout");
                None
            }
        }
    }
}

/// Key names under the prefix.
#[derive(Clone, Debug)]
struct Keys {
    prefix: String,
}

impl Keys {
    fn session(&self, session: &str) -> String {
        format!("{}:s:{session}", self.prefix)
    }

    fn stream(&self, session: &str, stream: impl fmt::Display) -> String {
        format!("{}:e:{session}:{stream}", self.prefix)
    }

    fn index(&self, session: &str) -> String {
        format!("{}:i:{session}", self.prefix)
    }
}

/// The TTL in whole milliseconds (rounded up, at least 1, at most what Redis accepts).
fn ttl_millis(ttl: Duration) -> Result<i64, StoreError> {
    if ttl.is_zero() {
        return Err(StoreError::invalid("the Redis TTL must not be zero"));
    }
    let millis = ttl.as_nanos().div_ceil(1_000_000);
    // Redis refuses expiry times that overflow when added to its clock: stay far below.
    Ok(i64::try_from(millis).unwrap_or(i64::MAX).min(i64::MAX / 4))
}

/// An [`EventStore`] in Redis, so that an SSE stream dropped on one server replica resumes
/// on any other: use it as [`HttpServerConfig::events`](mcpwire::http::HttpServerConfig::events)
/// on every replica, together with a [`RedisSessionStore`]. The [crate documentation](crate)
/// describes the keys, the guarantees and what happens when Redis fails.
pub struct RedisEventStore {
    link: Link,
    keys: Keys,
    ttl_ms: i64,
    per_stream: usize,
}

impl RedisEventStore {
    /// Connects to the Redis at `url` (`redis://[user:password@]host[:port][/db]`, or
    /// `redis+unix:///path`). Call it once per server process at startup; fails if the URL
    /// or the options are invalid or if Redis does not answer within `options.timeout`.
    pub fn connect(url: &str, options: RedisOptions) -> Result<Self, StoreError> {
        let ttl_ms = ttl_millis(options.ttl)?;
        Ok(RedisEventStore {
            link: Link::open(url, options.timeout)?,
            keys: Keys {
                prefix: options.prefix,
            },
            ttl_ms,
            per_stream: options.events_per_stream,
        })
    }

    /// This store's failure counts, shared with every clone of the handle. Take it before
    /// moving the store into the server's configuration, to report failures the server
    /// cannot see.
    pub fn health(&self) -> StoreHealth {
        self.link.health.clone()
    }
}

impl fmt::Debug for RedisEventStore {
    // Without the client: its address may hold a password.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RedisEventStore")
            .field("prefix", &self.keys.prefix)
            .field("ttl_ms", &self.ttl_ms)
            .field("events_per_stream", &self.per_stream)
            .field("connected", &self.link.connected.load(Ordering::Relaxed))
            .field("health", &self.link.health)
            .finish()
    }
}

impl EventStore for RedisEventStore {
    fn append(&mut self, session: &str, stream: HttpStreamId, event: u64, bytes: &[u8]) {
        if self.per_stream == 0 {
            return;
        }
        let key = self.keys.stream(session, stream.0);
        let index = self.keys.index(session);
        let mut member = Vec::with_capacity(8 + bytes.len());
        member.extend_from_slice(&event.to_be_bytes());
        member.extend_from_slice(bytes);
        // Keep ranks 0 ..= -(N + 1) out: the newest N stay.
        let keep = i64::try_from(self.per_stream).unwrap_or(i64::MAX);
        let mut pipe = redis::pipe();
        pipe.atomic()
            .cmd("ZADD")
            .arg(&key)
            .arg(0)
            .arg(&member)
            .ignore()
            .cmd("ZREMRANGEBYRANK")
            .arg(&key)
            .arg(0)
            .arg(-1 - keep)
            .ignore()
            .cmd("PEXPIRE")
            .arg(&key)
            .arg(self.ttl_ms)
            .ignore()
            .cmd("SADD")
            .arg(&index)
            .arg(stream.0)
            .ignore()
            .cmd("PEXPIRE")
            .arg(&index)
            .arg(self.ttl_ms)
            .ignore();
        // A retry after a lost reply adds the same member again: no duplicate.
        self.link.run("append", move |conn| pipe.exec(conn));
    }

    fn replay(
        &mut self,
        session: &str,
        stream: HttpStreamId,
        after: u64,
        out: &mut dyn FnMut(&[u8]),
    ) {
        let Some(first) = after.checked_add(1) else {
            return;
        };
        let key = self.keys.stream(session, stream.0);
        let mut from = Vec::with_capacity(9);
        from.push(b'[');
        from.extend_from_slice(&first.to_be_bytes());
        let mut cmd = redis::cmd("ZRANGEBYLEX");
        cmd.arg(&key).arg(&from).arg("+");
        // Everything is read before `out` sees any of it, so a retry never repeats an event.
        let Some(members) = self
            .link
            .run("replay", move |conn| cmd.query::<Vec<Vec<u8>>>(conn))
        else {
            return;
        };
        for member in &members {
            let Some((number, bytes)) = member.split_first_chunk::<8>() else {
                continue;
            };
            if u64::from_be_bytes(*number) > after {
                out(bytes);
            }
        }
    }

    fn forget(&mut self, session: &str) {
        let index = self.keys.index(session);
        let keys = self.keys.clone();
        let session = session.to_owned();
        self.link.run("forget events", move |conn| {
            let streams: Vec<String> = redis::cmd("SMEMBERS").arg(&index).query(conn)?;
            let mut del = redis::cmd("DEL");
            del.arg(&index);
            for stream in &streams {
                del.arg(keys.stream(&session, stream));
            }
            del.exec(conn)
        });
    }
}

/// A [`SessionStore`] in Redis, so that a session opened on one server replica is served by
/// any other and a DELETE on any replica ends it everywhere: use it as
/// [`HttpServerConfig::sessions`](mcpwire::http::HttpServerConfig::sessions) on every replica,
/// together with a [`RedisEventStore`]. The [crate documentation](crate) describes the keys,
/// the guarantees and what happens when Redis fails.
pub struct RedisSessionStore {
    link: Link,
    keys: Keys,
    ttl_ms: i64,
    max_record: usize,
}

impl RedisSessionStore {
    /// Connects to the Redis at `url` (`redis://[user:password@]host[:port][/db]`, or
    /// `redis+unix:///path`). Call it once per server process at startup; fails if the URL
    /// or the options are invalid or if Redis does not answer within `options.timeout`.
    /// Only `prefix`, `ttl`, `timeout` and `max_record` of `options` apply.
    pub fn connect(url: &str, options: RedisOptions) -> Result<Self, StoreError> {
        let ttl_ms = ttl_millis(options.ttl)?;
        Ok(RedisSessionStore {
            link: Link::open(url, options.timeout)?,
            keys: Keys {
                prefix: options.prefix,
            },
            ttl_ms,
            max_record: options.max_record,
        })
    }

    /// This store's failure counts, shared with every clone of the handle. Take it before
    /// moving the store into the server's configuration, to report failures the server
    /// cannot see.
    pub fn health(&self) -> StoreHealth {
        self.link.health.clone()
    }
}

impl fmt::Debug for RedisSessionStore {
    // Without the client: its address may hold a password.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RedisSessionStore")
            .field("prefix", &self.keys.prefix)
            .field("ttl_ms", &self.ttl_ms)
            .field("connected", &self.link.connected.load(Ordering::Relaxed))
            .field("health", &self.link.health)
            .finish()
    }
}

impl SessionStore for RedisSessionStore {
    fn create(&mut self, session: &str, initialize: &str) {
        if initialize.len() > self.max_record {
            self.link.health.record_message(
                "create session",
                &format!(
                    "the initialize request ({} bytes) is over max_record ({}): not shared",
                    initialize.len(),
                    self.max_record
                ),
            );
            return;
        }
        let mut cmd = redis::cmd("SET");
        cmd.arg(self.keys.session(session))
            .arg(initialize)
            .arg("PX")
            .arg(self.ttl_ms);
        self.link.run("create session", move |conn| cmd.exec(conn));
    }

    fn load(&mut self, session: &str) -> Option<String> {
        let key = self.keys.session(session);
        let mut pipe = redis::pipe();
        pipe.cmd("GET")
            .arg(&key)
            .cmd("PEXPIRE")
            .arg(&key)
            .arg(self.ttl_ms)
            .ignore();
        self.link
            .run("load session", move |conn| {
                pipe.query::<(Option<String>,)>(conn)
            })
            .and_then(|(initialize,)| initialize)
    }

    fn touch(&mut self, session: &str) -> bool {
        let mut cmd = redis::cmd("PEXPIRE");
        cmd.arg(self.keys.session(session)).arg(self.ttl_ms);
        // Fails open: a Redis blip must not end the sessions this replica serves.
        self.link
            .run("touch session", move |conn| cmd.query::<i64>(conn))
            .is_none_or(|refreshed| refreshed == 1)
    }

    fn forget(&mut self, session: &str) {
        let mut cmd = redis::cmd("DEL");
        cmd.arg(self.keys.session(session));
        self.link.run("forget session", move |conn| cmd.exec(conn));
    }
}
