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
//! Every replica connects both stores to the same Redis, and draws its SSE stream ids from a
//! block no other process has had (`first_stream_id`), since stream ids key the shared
//! events and a session outlives the process that opened it:
//!
//! ```no_run
//! use mcpwire::http::{HttpServer, HttpServerConfig};
//! use mcpwire_redis::{RedisEventStore, RedisOptions, RedisSessionStore, StoreError};
//!
//! /// The HTTP engine of one replica of a deployment.
//! fn replica(config: mcpwire::Config) -> Result<HttpServer, StoreError> {
//!     let url = "redis://127.0.0.1:6379/";
//!     let options = RedisOptions::default();
//!     let mut events = RedisEventStore::connect(url, options.clone())?;
//!     let first_stream_id = events.first_stream_id()?;
//!     let sessions = RedisSessionStore::connect(url, options.clone())?;
//!     // Keep these to report the stores' failures (metrics, health checks).
//!     let (_events_health, _sessions_health) = (events.health(), sessions.health());
//!
//!     let mut http = HttpServerConfig::new(config);
//!     // The shared record of a session outlives each replica's idle copy.
//!     http.session_idle_timeout = options.ttl;
//!     http.events = Some(Box::new(events));
//!     http.sessions = Some(Box::new(sessions));
//!     http.first_stream_id = first_stream_id;
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
//! - `{prefix}:b:{session}`: a hash, the bytes of each live stream's stored members (field:
//!   the stream number) and of the whole session's (field `t`), for the byte bounds; field `c`
//!   says the session's total was counted again once (see the append script). It
//!   expires `ttl` after the session's last append, with the index. (An earlier layout kept a
//!   counter per stream, `{prefix}:n:{session}:{stream}`: such keys are no longer read, and
//!   expire by their own `ttl`.)
//! - `{prefix}:x:{session}`: a sorted set of the session's stream numbers, each scored by
//!   when its events' key expires (Unix milliseconds, Redis's clock), so that
//!   [`forget`](EventStore::forget) finds all its streams; every append drops the streams
//!   whose keys have expired, so it holds only live ones. It expires `ttl` after the
//!   session's last append (so never before any of its streams). (An earlier layout used
//!   `{prefix}:i:{session}`, a plain set: such keys are no longer read, and expire by their
//!   own `ttl`.)
//!
//! - `{prefix}:streams`: a counter (no expiry), one step per server process started:
//!   [`RedisEventStore::first_stream_id`] hands each process its own block of stream ids.
//!
//! An append is one script (atomic, one round trip and one reply once Redis knows the script;
//! sent as `EVALSHA`, by its hash, and loaded with `SCRIPT LOAD` when Redis does not know it
//! yet): `ZADD` of the event first (so that a Redis past `maxmemory` refuses the append
//! before anything is written), then the expired streams leave the index and the counts
//! (`ZRANGEBYSCORE`, `HDEL`, `ZREM`), `ZPOPMIN` of the oldest events while a bound is passed
//! (the stream's own, then the session's, from the stream appended to longest ago), `ZADD` to
//! the index, `HSET` of the counts and `PEXPIREAT` of the three keys.
//! A replay is one `ZRANGEBYLEX` from just past the given event number. `load` is a `GETEX …
//! PX`, `touch` a `PEXPIRE`, `create` a `SET … PX`. [`RedisSessionStore`]'s `forget`
//! deletes the session key only, [`RedisEventStore`]'s the session's event keys and index
//! (`ZRANGE`, then one `DEL`).
//!
//! # Guarantees
//!
//! - **Order and exactness.** A replay hands out the stream's events numbered above `after`
//!   in increasing number, each once, byte for byte, and only that stream's.
//! - **Durability before delivery.** An append returns once Redis has acknowledged the
//!   script. What survives a crash of Redis itself is Redis's business: its persistence
//!   settings (`appendonly`, `save`), and with replication, whether a failover to a replica
//!   may lose the last acknowledged writes.
//! - **Bounds.** Each stream keeps its newest [`RedisOptions::events_per_stream`] events (256
//!   by default) and at most [`RedisOptions::bytes_per_stream`] bytes of them (4 MiB by
//!   default; the newest event always stays, so a stream holds at most the larger of that
//!   and its largest event); a resumption from before them replays only what is left, and
//!   reads no more than that into memory. A session keeps at most
//!   [`RedisOptions::bytes_per_session`] bytes of events over all its streams (4 MiB by
//!   default; each stream also costs a key, an index entry and a counter): past
//!   it, the stream appended to longest ago loses its oldest events first, so however many
//!   streams a client opens, its session pins a bounded amount of Redis memory (the newest
//!   event of the stream being appended to always stays). A stream's events go `ttl` after
//!   its last event.
//! - **Cleanup.** After [`EventStore::forget`] the session's events are gone; after
//!   [`SessionStore::forget`] its record is. The server calls both when a client deletes a
//!   session. Sessions that just go idle are dropped by Redis after `ttl` without a touch,
//!   their events `ttl` after their last event. (An append racing with a `forget` on another
//!   replica may leave that one stream behind; it expires after `ttl`.)
//! - **Expiry.** Set `ttl` to at least the server's
//!   [`session_idle_timeout`](mcpwire::http::HttpServerConfig::session_idle_timeout). The
//!   server touches the store on each request for the session (with
//!   [`shared_touch_interval`](mcpwire::http::HttpServerConfig::shared_touch_interval), at most
//!   once per interval: a request within it is touched when the interval ends), and every half
//!   `session_idle_timeout` for a session whose client only holds a stream open, so a live
//!   session's record does not expire.
//!
//! # Failures
//!
//! Only [`EventStore::replay`], [`SessionStore::create`] and [`SessionStore::load`] can
//! report a failure (as
//! [`StoreUnavailable`]); the other calls handle theirs as the list below says. Each store owns
//! one synchronous connection, and every call is one command with one reply (two for
//! [`EventStore::forget`]; an append is one script, whose first call on a Redis that does not
//! know it takes three in turn, `EVALSHA`, `SCRIPT LOAD` and `EVALSHA`, the first that times
//! out ending it), so a Redis that stops answering costs a call one [`RedisOptions::timeout`] (2 s by default), the time connecting, each read and
//! each write may take. A host name in the URL is looked up at each connection, in a thread of
//! its own that the call waits for at most that long too (the system's resolver has no
//! timeout of its own); while a lookup that timed out still runs, a connection uses the
//! addresses found last, and fails at once if no lookup has found any yet. A connection to a
//! unix socket (`redis+unix://`) is made in a thread of its own too, waited for that long:
//! the system's `connect` on a unix socket has no timeout, and blocks once the queue of a
//! Redis that stopped accepting is full. While one that timed out still waits, connecting
//! fails at once.
//! When the connection fails otherwise (broken, say), the store drops
//! it, connects again once and retries the call once on the new connection; after a timeout
//! it does not retry, since Redis is slow, not gone. An error reply (`OOM` past
//! `maxmemory`, say) fails the call and keeps the connection, since another would get the
//! same answer, except `READONLY`, `MASTERDOWN` and `LOADING`, which reconnect and retry: a
//! new connection may reach the new primary after a failover. A call that
//! starts without a connection (the previous one failed) connects first and does not retry,
//! so during an outage a call costs at most one connection attempt and one timeout. After a
//! call timed out, the stores of this process leave that Redis alone for one timeout (the
//! event store and the session store alike): the calls in that time fail at once, without
//! trying, and the first after it tries again. So a frozen Redis costs a
//! host that calls the store under a lock (the tokio host does) one timeout per timeout, not
//! one per call, and the requests that need no Redis call keep being served. A call
//! that still fails is counted in the store's [`StoreHealth`] (see [`RedisEventStore::health`])
//! with its error message, and then:
//!
//! - [`append`](EventStore::append) drops the event. A client reading its stream live on
//!   this replica still gets it, and an answer is kept aside in this replica's memory for a
//!   resumption here; anything else resumed (on any replica) misses it, and so does an event
//!   of a stream no response holds (closed for polling, or whose client went away), whose
//!   only way to the client is the store.
//! - [`replay`](EventStore::replay) returns [`StoreUnavailable`]: the client's resumption
//!   gets 503 with `Retry-After`, and it comes back for what is stored (an empty replay
//!   would have ended a finished request's stream without its answer).
//! - [`EventStore::forget`] leaves the events to expire after `ttl`.
//! - [`create`](SessionStore::create) returns [`StoreUnavailable`]: the session does not
//!   open, and its `initialize` gets 503 with `Retry-After` (so does one over
//!   [`RedisOptions::max_record`] even without its `clientInfo.icons`, in vain).
//! - [`load`](SessionStore::load) returns [`StoreUnavailable`]: the client gets 503 with
//!   `Retry-After` and keeps its session (nothing is served from a session that cannot be
//!   checked, and a 404 would have made the client throw it away).
//! - [`touch`](SessionStore::touch) returns [`StoreUnavailable`]: a replica that holds the
//!   session keeps serving it through a Redis blip, and touches it again soon (an eighth of
//!   the idle timeout later, at most a second), so that its record does not lapse before the
//!   next regular touch. A DELETE made on another replica during the blip takes effect here
//!   at the first successful touch after it.
//! - [`SessionStore::forget`] returns [`StoreUnavailable`]: the DELETE gets 503 with
//!   `Retry-After`, and the session goes on everywhere until the client tries again (a 200
//!   would leave the record, and any replica would serve the session again).
//!
//! The next call reconnects, so a store recovers by itself once Redis is back. Nothing here
//! panics on a Redis failure. Redis itself is trusted: the timeout bounds each read, so a
//! server that sends a reply a byte at a time, or claims a reply of gigabytes, holds the call
//! as long as it keeps sending. Run it on a private network.
//!
//! # Limits
//!
//! One Redis server, 6.2 or later (or a Sentinel-managed primary behind a stable address), not
//! Redis Cluster (an append's script spans three keys and builds the other streams' keys itself). `redis://` and `redis+unix://` URLs; TLS
//! (`rediss://`) is not compiled in.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

use std::fmt;
use std::io;
use std::net::{IpAddr, SocketAddr, ToSocketAddrs};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, LazyLock, Mutex, mpsc};
use std::time::Duration;

use mcpwire::http::{EventStore, HttpStreamId, SessionStore, StoreUnavailable};
use redis::{
    Client, Connection, ConnectionAddr, ConnectionInfo, IntoConnectionInfo, RedisResult, Script,
};

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
    /// milliseconds; zero is refused; at most about 31,700 years (longer is taken as that).
    pub ttl: Duration,
    /// How many of the newest events each stream keeps for resumption. Default 256. Zero
    /// stores no events (resumption then replays nothing).
    pub events_per_stream: usize,
    /// How many bytes of events each stream keeps at most: past it the oldest go first, but
    /// the newest event always stays. It bounds what one resumption reads from Redis into
    /// the server's memory, however large the application's answers. Default 4 MiB, the
    /// memory store's bound per session ([`HttpServerConfig::event_store_bytes`]).
    ///
    /// [`HttpServerConfig::event_store_bytes`]: mcpwire::http::HttpServerConfig::event_store_bytes
    pub bytes_per_stream: usize,
    /// How many bytes of events a session keeps at most, over all its streams: past it the
    /// stream appended to longest ago loses its oldest events first (and, once it has none,
    /// is forgotten), and the stream being appended to keeps at least its newest event. With
    /// it, the Redis memory one client can pin is bounded per session, however many streams
    /// it opens. Default 4 MiB, the memory store's bound per session
    /// ([`HttpServerConfig::event_store_bytes`]), to which `mcpwire serve` sets both byte
    /// bounds.
    ///
    /// [`HttpServerConfig::event_store_bytes`]: mcpwire::http::HttpServerConfig::event_store_bytes
    pub bytes_per_session: usize,
    /// How long connecting, and each read and write on the connection, may take before the
    /// call fails; since every call reads one reply, a Redis that stops answering costs a call
    /// about this long. Default 2 seconds; zero is refused.
    pub timeout: Duration,
    /// The largest `initialize` request a session's record keeps, in bytes, so that one
    /// client cannot store megabytes per session for the whole TTL. A larger one is kept
    /// without its `clientInfo.icons` (which the specification lets be `data:` URIs, easily
    /// tens of KiB; a replica that restores the session does not see them); one that is
    /// still larger is refused as Redis failing would be: its client gets `503` with
    /// `Retry-After` each time it tries, in vain (raise the bound for such clients).
    /// Default 64 KiB; clients send a few hundred bytes.
    pub max_record: usize,
}

impl Default for RedisOptions {
    fn default() -> Self {
        RedisOptions {
            prefix: "mcpw".to_owned(),
            ttl: Duration::from_secs(600),
            events_per_stream: 256,
            bytes_per_stream: mcpwire::http::MemoryEventStore::DEFAULT_BYTES_PER_SESSION,
            bytes_per_session: mcpwire::http::MemoryEventStore::DEFAULT_BYTES_PER_SESSION,
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

    /// A call not tried while the link rests after a timeout: it counts as failed; the last
    /// error stays the timeout's.
    fn skipped(&self) {
        self.inner.errors.fetch_add(1, Ordering::Relaxed);
    }

    fn record(&self, what: &str, error: &dyn fmt::Display) {
        *self
            .inner
            .last_error
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner()) = Some(format!("{what}: {error}"));
        self.inner.errors.fetch_add(1, Ordering::Relaxed);
    }
}

/// One synchronous connection, re-established on failure.
struct Link {
    client: Client,
    /// Where `client` connects, for connecting to a host name's addresses one by one.
    info: ConnectionInfo,
    conn: Option<Connection>,
    timeout: Duration,
    health: StoreHealth,
    /// The lookups of the host name (one at a time, in a thread of its own).
    lookups: Arc<Mutex<Lookups>>,
    /// A connection to a unix socket is under way in a thread of its own (one at a time).
    connecting: Arc<AtomicBool>,
    /// After a call timed out, Redis is left alone until then: the calls that come fail at
    /// once, and the first one after it tries again. Each call waited out the timeout in
    /// turn, and a host that calls the stores under one lock (the tokio host does) served
    /// about one request per timeout for as long as Redis stayed frozen. Shared by every
    /// store of this process on the same Redis (an event store and a session store: resting
    /// one at a time, they took turns timing out).
    resting_until: Arc<Mutex<Option<std::time::Instant>>>,
}

/// The rest of the Redis at `addr`, shared by the links of this process to it (see
/// `Link::resting_until`).
fn rest_of(addr: &str) -> Arc<Mutex<Option<std::time::Instant>>> {
    type Rests =
        std::collections::HashMap<String, std::sync::Weak<Mutex<Option<std::time::Instant>>>>;
    static RESTS: std::sync::OnceLock<Mutex<Rests>> = std::sync::OnceLock::new();
    let mut rests =
        (RESTS.get_or_init(Mutex::default).lock()).unwrap_or_else(|poisoned| poisoned.into_inner());
    if let Some(rest) = rests.get(addr).and_then(std::sync::Weak::upgrade) {
        return rest;
    }
    // (The entries of Redis servers no store uses any more go as a new one comes.)
    rests.retain(|_, rest| rest.strong_count() > 0);
    let rest = Arc::new(Mutex::new(None));
    rests.insert(addr.to_owned(), Arc::downgrade(&rest));
    rest
}

impl Link {
    fn open(url: &str, timeout: Duration) -> Result<Self, StoreError> {
        if timeout.is_zero() {
            return Err(StoreError::invalid("the Redis timeout must not be zero"));
        }
        // No `CLIENT SETINFO` after connecting: a reconnect to a Redis that accepts and then
        // answers nothing would wait on its replies before the call's own.
        let info = url
            .into_connection_info()
            .map_err(|e| StoreError::redis("invalid Redis address", e))?;
        let settings = info.redis_settings().clone().set_skip_set_lib_name();
        let info = info.set_redis_settings(settings);
        let client = Client::open(info.clone())
            .map_err(|e| StoreError::redis("invalid Redis address", e))?;
        let resting_until = rest_of(&info.addr().to_string());
        let mut link = Link {
            client,
            info,
            conn: None,
            timeout,
            health: StoreHealth::default(),
            lookups: Arc::new(Mutex::new(Lookups::default())),
            connecting: Arc::new(AtomicBool::new(false)),
            resting_until,
        };
        let mut conn = link
            .connect()
            .map_err(|e| StoreError::redis("cannot connect to Redis", e))?;
        // A connection alone proves little: something else may listen there, or Redis may
        // want a password the URL lacks (every later call would then fail with NOAUTH while
        // the server ran on as if alone). One PING says whether Redis serves us.
        redis::cmd("PING")
            .query::<String>(&mut conn)
            .map_err(|e| StoreError::redis("Redis did not answer PING", e))?;
        link.conn = Some(conn);
        Ok(link)
    }

    /// A new connection, within the timeout: a host name's lookup and the attempts on its
    /// addresses share it.
    // (A blocking connection's timeout is wall-clock time.)
    #[allow(clippy::disallowed_methods)]
    fn connect(&self) -> RedisResult<Connection> {
        let conn = match self.info.addr() {
            ConnectionAddr::Tcp(host, port) if host.parse::<IpAddr>().is_err() => {
                let deadline = std::time::Instant::now().checked_add(self.timeout);
                let addrs = resolve_bounded(host, *port, self.timeout, &self.lookups)?;
                each_address(addrs, deadline, self.timeout, |addr, timeout| {
                    let at = ConnectionAddr::Tcp(addr.ip().to_string(), addr.port());
                    Client::open(self.info.clone().set_addr(at))
                        .and_then(|c| c.get_connection_with_timeout(timeout))
                })?
            }
            ConnectionAddr::Unix(_) => {
                connect_bounded(self.client.clone(), self.timeout, &self.connecting)?
            }
            _ => self.client.get_connection_with_timeout(self.timeout)?,
        };
        conn.set_read_timeout(Some(self.timeout))?;
        conn.set_write_timeout(Some(self.timeout))?;
        Ok(conn)
    }

    /// Runs `call` (one command with one reply, so that a Redis that stops answering costs
    /// one timeout; a script's first call on a Redis that does not know it takes three in
    /// turn, `EVALSHA`, `SCRIPT LOAD` and `EVALSHA`, and the first that times out ends it); on a failure of the connection (one Redis closed, say) reconnects once
    /// and runs it once more (at most one connection attempt per call). `None` once that
    /// failed too, or after a timeout or an error reply, recorded under `what`; and, without
    /// trying, for one timeout after a call timed out (see `resting_until`).
    // (The rest is wall-clock time, as the timeout is.)
    #[allow(clippy::disallowed_methods)]
    fn run<T>(
        &mut self,
        what: &str,
        mut call: impl FnMut(&mut Connection) -> RedisResult<T>,
    ) -> Option<T> {
        {
            let mut rest =
                (self.resting_until.lock()).unwrap_or_else(|poisoned| poisoned.into_inner());
            if let Some(until) = *rest {
                if std::time::Instant::now() < until {
                    self.health.skipped();
                    return None;
                }
                *rest = None;
            }
        }
        self.try_run(what, &mut call)
    }

    /// A call that timed out: recorded, and Redis is left alone for one timeout.
    #[allow(clippy::disallowed_methods)]
    fn timed_out(&mut self, what: &str, error: &redis::RedisError) {
        self.health.record(what, error);
        *(self.resting_until.lock()).unwrap_or_else(|poisoned| poisoned.into_inner()) =
            std::time::Instant::now().checked_add(self.timeout);
    }

    /// [`run`](Self::run) without the rest.
    fn try_run<T>(
        &mut self,
        what: &str,
        call: &mut impl FnMut(&mut Connection) -> RedisResult<T>,
    ) -> Option<T> {
        if let Some(conn) = self.conn.as_mut() {
            match call(conn) {
                Ok(value) => return Some(value),
                // An error reply (OOM past `maxmemory`, say) was read whole: the connection
                // is in step and a retry would get the same answer, so neither a new
                // connection nor a second try. Except from a Redis that no longer serves
                // writes (a replica after a failover, one still loading): a new connection
                // may reach the new primary.
                Err(e) if answered_in_step(&e) => {
                    self.health.record(what, &e);
                    return None;
                }
                // After another error (a timeout in particular) the connection may be out of
                // step with its replies: never reuse it. After a timeout, Redis is slow:
                // trying again at once would only double the wait.
                Err(e) => {
                    self.conn = None;
                    if e.is_timeout() {
                        self.timed_out(what, &e);
                        return None;
                    }
                }
            }
        }
        let result = self.connect().and_then(|mut conn| {
            let result = call(&mut conn);
            // Kept when in step with its replies, an error reply's too (as above).
            if result.as_ref().is_ok() || result.as_ref().is_err_and(answered_in_step) {
                self.conn = Some(conn);
            }
            result
        });
        match result {
            Ok(value) => Some(value),
            Err(e) if e.is_timeout() => {
                self.timed_out(what, &e);
                None
            }
            Err(e) => {
                self.health.record(what, &e);
                None
            }
        }
    }
}

/// The lookups of one store's host name: whether one runs, and the addresses the last one
/// that succeeded found (kept even when it finished after its call stopped waiting).
#[derive(Debug, Default)]
struct Lookups {
    running: bool,
    found: Option<Vec<SocketAddr>>,
}

/// A connection by `client` to its unix socket, made in a thread of its own that the call waits
/// for at most `timeout`: `UnixStream::connect` takes no timeout, and blocks for as long as a
/// Redis that stopped accepting (frozen, swapping) leaves its listen queue full. A connection
/// that outlives its wait finishes in the background and is dropped; while it waits, the
/// calls that come fail at once (at most one such thread).
fn connect_bounded(
    client: Client,
    timeout: Duration,
    connecting: &Arc<AtomicBool>,
) -> RedisResult<Connection> {
    if connecting.swap(true, Ordering::AcqRel) {
        return Err(io::Error::new(
            io::ErrorKind::TimedOut,
            "an earlier connection to the Redis socket still waits",
        )
        .into());
    }
    let (tx, rx) = mpsc::channel();
    let done = Arc::clone(connecting);
    let spawned = std::thread::Builder::new()
        .name("mcpwire-redis-connect".into())
        .spawn(move || {
            let conn = client.get_connection_with_timeout(timeout);
            done.store(false, Ordering::Release);
            let _ = tx.send(conn); // (nobody waits once the call timed out)
        });
    if let Err(e) = spawned {
        connecting.store(false, Ordering::Release);
        return Err(e.into());
    }
    match rx.recv_timeout(timeout) {
        Ok(conn) => conn,
        Err(_) => Err(io::Error::new(
            io::ErrorKind::TimedOut,
            "connecting to the Redis socket timed out",
        )
        .into()),
    }
}

/// The addresses of `host`, looked up in a thread of its own that the call waits for at most
/// `timeout`: the system's resolver takes no timeout, and a DNS server that stops answering
/// would hold the call (and the server's loop that made it) for the resolver's own retries,
/// tens of seconds. See [`wait_for_lookup`] for what a slow lookup gives.
fn resolve_bounded(
    host: &str,
    port: u16,
    timeout: Duration,
    lookups: &Arc<Mutex<Lookups>>,
) -> io::Result<Vec<SocketAddr>> {
    let host = host.to_owned();
    wait_for_lookup(
        move || {
            (host.as_str(), port)
                .to_socket_addrs()
                .map(Iterator::collect)
        },
        timeout,
        lookups,
    )
}

/// Runs `lookup` in a thread of its own and waits for it at most `timeout`. A lookup that
/// outlives its wait finishes in the background and its addresses are kept: the calls that
/// come meanwhile, and any later one whose own lookup is slow again, use the last addresses
/// found (so a resolver always slower than `timeout` still leads to a connection, one lookup
/// behind), and fail at once only when no lookup has ever succeeded. At most one lookup runs
/// at a time.
fn wait_for_lookup(
    lookup: impl FnOnce() -> io::Result<Vec<SocketAddr>> + Send + 'static,
    timeout: Duration,
    lookups: &Arc<Mutex<Lookups>>,
) -> io::Result<Vec<SocketAddr>> {
    let last = |lookups: &Arc<Mutex<Lookups>>, why: &str| {
        let state = lookups.lock().unwrap_or_else(|p| p.into_inner());
        state
            .found
            .clone()
            .ok_or_else(|| io::Error::new(io::ErrorKind::TimedOut, why.to_owned()))
    };
    {
        let mut state = lookups.lock().unwrap_or_else(|p| p.into_inner());
        if state.running {
            drop(state);
            return last(
                lookups,
                "an earlier lookup of the Redis host name still runs",
            );
        }
        state.running = true;
    }
    let (tx, rx) = mpsc::channel();
    let shared = Arc::clone(lookups);
    let spawned = std::thread::Builder::new()
        .name("mcpwire-redis-dns".into())
        .spawn(move || {
            let found = lookup();
            let mut state = shared.lock().unwrap_or_else(|p| p.into_inner());
            state.running = false;
            if let Ok(addrs) = &found
                && !addrs.is_empty()
            {
                state.found = Some(addrs.clone());
            }
            drop(state);
            let _ = tx.send(found);
        });
    if let Err(e) = spawned {
        lookups.lock().unwrap_or_else(|p| p.into_inner()).running = false;
        return Err(e);
    }
    match rx.recv_timeout(timeout) {
        Ok(found) => found,
        Err(_) => last(lookups, "the lookup of the Redis host name timed out"),
    }
}

/// Tries `connect` on each address in turn, each attempt given what is left until `deadline`
/// (`timeout` each when there is none: a timeout too long for the clock); the first that
/// succeeds, else the last failure. A host name with several addresses that all stall (an
/// IPv6 path that drops packets, say) then costs one timeout, not one per address.
#[allow(clippy::disallowed_methods)] // (as `connect`)
fn each_address<T>(
    addrs: Vec<SocketAddr>,
    deadline: Option<std::time::Instant>,
    timeout: Duration,
    mut connect: impl FnMut(SocketAddr, Duration) -> RedisResult<T>,
) -> RedisResult<T> {
    let mut failed = None;
    for addr in addrs {
        let left = match deadline {
            Some(at) => at.saturating_duration_since(std::time::Instant::now()),
            None => timeout,
        };
        if left < Duration::from_millis(1) {
            let timed_out =
                io::Error::new(io::ErrorKind::TimedOut, "connecting to Redis timed out");
            return Err(failed.unwrap_or_else(|| timed_out.into()));
        }
        match connect(addr, left) {
            Ok(conn) => return Ok(conn),
            Err(e) => failed = Some(e),
        }
    }
    let no_address = io::Error::new(
        io::ErrorKind::NotFound,
        "the Redis host name has no address",
    );
    Err(failed.unwrap_or_else(|| no_address.into()))
}

/// Whether `e` is an error reply that leaves the connection usable and that another
/// connection would get as well: every error reply but those of a Redis that cannot take
/// writes now (`READONLY`, `MASTERDOWN`, `LOADING`), including one that a script's write
/// met: Redis before 7.0 wraps it in `ERR Error running script ... -READONLY ...`.
fn answered_in_step(e: &redis::RedisError) -> bool {
    match e.kind() {
        redis::ErrorKind::Server(
            redis::ServerErrorKind::ReadOnly
            | redis::ServerErrorKind::MasterDown
            | redis::ServerErrorKind::BusyLoading,
        ) => false,
        redis::ErrorKind::Server(_) | redis::ErrorKind::Extension => {
            let detail = e.detail().unwrap_or("");
            !["-READONLY ", "-MASTERDOWN ", "-LOADING "]
                .iter()
                .any(|code| detail.contains(code))
        }
        _ => false,
    }
}

/// An append, as one script so that it is atomic and costs one reply: a Redis that stops
/// answering then costs the call one timeout, not one per command.
///
/// The event's `ZADD` is the first write: past `maxmemory` it is refused and nothing is
/// written (Redis checks a script's memory at its first write, and lets the rest through).
/// Before it, the script checks that the session's index and counts are of their types or
/// absent (the stream's own key of another type fails the `ZADD` itself): another program's
/// data under the prefix fails the append before anything is written (a write before the
/// failure would have left a stream key that no bound trims and no TTL ends).
/// Another stream's key found of another type while the session is trimmed leaves its
/// index and counts; counts that are not numbers count as 0.
///
/// KEYS: the stream's events, the session's index of streams, the session's byte counts.
/// ARGV: the member, the most events a stream keeps, the TTL in milliseconds, the stream id,
/// the most bytes a stream keeps, the most bytes a session keeps, the start of the session's
/// stream keys (the stream id completes one).
///
/// - The counts grow only when the member is new (a retried append adds nothing); a stream
///   whose key had expired (the event is its only member) starts its count again.
/// - The stream's oldest members go while one of its bounds is passed, the newest always
///   staying (all scores are 0, so `ZPOPMIN` takes the lowest event number).
/// - The index scores each stream by when its key expires, on Redis's own clock, so its
///   lowest is the stream appended to longest ago. The streams already expired leave it, and
///   their bytes leave the session's total (`t` in the hash of counts).
/// - When the session is past its byte bound, the total is first counted again from the
///   indexed streams' counts (dropping the counts of streams no longer indexed), so a total
///   that drifted (an older version's append pruned the index without the counts) mends
///   itself instead of costing live events. That happens the first time a session passes its
///   bound (field `c` of the counts says it did), and again whenever the counts name more
///   other streams than the index holds (a Redis under `maxmemory` that evicted the index,
///   say; `HLEN` and `ZCARD` tell at no cost): this script keeps the counts exact otherwise,
///   and counting again at every append of a session at its bound cost a look-up per stream
///   of the session each time (tens of thousands for a long session of small streams, on
///   Redis's one thread). Then, while it is still past, the stream
///   appended to longest ago other than this one loses its oldest events, and leaves the
///   index once it has none (this one may sort first among streams tied with it: appended
///   in the same millisecond, its id sorting first as text); the stream appended to now
///   comes last, and keeps its newest event.
/// - Every key expires at the time its index score names (`PEXPIREAT`, the same clock
///   reading), so a stream's key and its index entry expire together.
///
/// The other streams' keys are made here from ARGV[7], not passed in KEYS: one Redis server
/// only (the crate's limits say so).
static APPEND: LazyLock<Script> = LazyLock::new(|| Script::new(APPEND_LUA));
const APPEND_LUA: &str = "local kinds = {'zset', 'zset', 'hash'} \
local names = {'events', 'index of streams', 'byte counts'} \
for i = 2, 3 do \
local kind = redis.call('TYPE', KEYS[i])['ok'] \
if kind ~= 'none' and kind ~= kinds[i] then \
return redis.error_reply('mcpwire: a session\\'s ' .. names[i] .. ' key holds a ' .. kind .. ', not a ' .. kinds[i]) end end \
local added = redis.call('ZADD', KEYS[1], 0, ARGV[1]) \
local t = redis.call('TIME') \
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000) \
local ttl = tonumber(ARGV[3]) \
local total = tonumber(redis.call('HGET', KEYS[3], 't')) or 0 \
for _, s in ipairs(redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', '(' .. now)) do \
if s ~= ARGV[4] then \
total = total - (tonumber(redis.call('HGET', KEYS[3], s)) or 0) \
redis.call('HDEL', KEYS[3], s) \
redis.call('ZREM', KEYS[2], s) end end \
local bytes = tonumber(redis.call('HGET', KEYS[3], ARGV[4])) or 0 \
local n = redis.call('ZCARD', KEYS[1]) \
if added == 1 then \
if n == 1 then \
total = total - bytes \
bytes = 0 end \
bytes = bytes + string.len(ARGV[1]) \
total = total + string.len(ARGV[1]) end \
while n > 1 and (n > tonumber(ARGV[2]) or bytes > tonumber(ARGV[5])) do \
local len = string.len(redis.call('ZPOPMIN', KEYS[1])[1]) \
bytes = bytes - len \
total = total - len \
n = n - 1 end \
redis.call('ZADD', KEYS[2], now + ttl, ARGV[4]) \
local bound = tonumber(ARGV[6]) \
local recount = total > bound and not redis.call('HGET', KEYS[3], 'c') \
if total > bound and not recount then \
recount = redis.call('HLEN', KEYS[3]) - redis.call('HEXISTS', KEYS[3], 't') - 1 \
- redis.call('HEXISTS', KEYS[3], ARGV[4]) > redis.call('ZCARD', KEYS[2]) - 1 end \
if recount then \
local counted = bytes \
local fields = redis.call('HGETALL', KEYS[3]) \
for i = 1, #fields, 2 do \
local f = fields[i] \
if f ~= 't' and f ~= 'c' and f ~= ARGV[4] then \
if redis.call('ZSCORE', KEYS[2], f) then counted = counted + (tonumber(fields[i + 1]) or 0) \
else redis.call('HDEL', KEYS[3], f) end end end \
total = counted \
redis.call('HSET', KEYS[3], 'c', 1) end \
while total > bound do \
local first = redis.call('ZRANGE', KEYS[2], 0, 1) \
local oldest = first[1] \
if oldest == ARGV[4] then oldest = first[2] end \
if not oldest then \
while n > 1 and total > bound do \
local len = string.len(redis.call('ZPOPMIN', KEYS[1])[1]) \
bytes = bytes - len \
total = total - len \
n = n - 1 end \
break end \
local key = ARGV[7] .. oldest \
local left = tonumber(redis.call('HGET', KEYS[3], oldest)) or 0 \
if redis.call('TYPE', key)['ok'] == 'zset' then \
while total > bound do \
local gone = redis.call('ZPOPMIN', key) \
if #gone == 0 then break end \
left = left - string.len(gone[1]) \
total = total - string.len(gone[1]) end end \
if redis.call('TYPE', key)['ok'] ~= 'zset' then \
total = total - math.max(left, 0) \
redis.call('HDEL', KEYS[3], oldest) \
redis.call('ZREM', KEYS[2], oldest) \
else redis.call('HSET', KEYS[3], oldest, left) end end \
if bytes < 0 then bytes = 0 end \
if total < bytes then total = bytes end \
redis.call('HSET', KEYS[3], ARGV[4], bytes, 't', total) \
redis.call('PEXPIREAT', KEYS[1], now + ttl) \
redis.call('PEXPIREAT', KEYS[2], now + ttl) \
redis.call('PEXPIREAT', KEYS[3], now + ttl) \
return 1";

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

    /// What [`stream`](Self::stream) puts before the stream number.
    fn streams(&self, session: &str) -> String {
        format!("{}:e:{session}:", self.prefix)
    }

    fn counts(&self, session: &str) -> String {
        format!("{}:b:{session}", self.prefix)
    }

    fn index(&self, session: &str) -> String {
        format!("{}:x:{session}", self.prefix)
    }
}

/// A replica's hold on its number in a deployment, for deployments that name their replicas
/// (in logs and metrics, say) and want two running servers never to share a name. Stream ids
/// do not depend on it ([`RedisEventStore::first_stream_id`]). Take it at startup with
/// [`ReplicaClaim::acquire`] before serving, [`renew`](Self::renew) it more often than
/// [`CLAIM_TTL`], and drop it at the end (that releases the number at once).
pub struct ReplicaClaim {
    link: Link,
    key: String,
    token: String,
}

/// How long a claim lives without a renewal: a replica that stopped without releasing its
/// number (killed, crashed) leaves it taken this long.
pub const CLAIM_TTL: Duration = Duration::from_secs(15);

/// Releases a claim if it is still ours (KEYS: the claim; ARGV: our token).
static RELEASE: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end \
         return 0",
    )
});
/// Renews a claim if it is still ours, or takes it again if it expired meanwhile (KEYS: the
/// claim; ARGV: our token, the TTL in milliseconds). 1 when it is ours.
static RENEW: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        "local v = redis.call('GET', KEYS[1]) \
if v == ARGV[1] then redis.call('PEXPIRE', KEYS[1], ARGV[2]) return 1 end \
if v == false then redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2]) return 1 end \
return 0",
    )
});

impl ReplicaClaim {
    /// Claims replica number `replica` under `options.prefix` for this process, `token`
    /// naming it (unique: host name, process id and start time, say). Waits up to `wait`
    /// for a claim left by a replica that stopped without releasing it (it expires within
    /// [`CLAIM_TTL`], so a restarted replica passes `CLAIM_TTL` plus a second); fails if the
    /// number is still held then, or if Redis cannot be reached.
    // Startup waits on the wall clock.
    #[allow(clippy::disallowed_methods)]
    pub fn acquire(
        url: &str,
        options: &RedisOptions,
        replica: u64,
        token: &str,
        wait: Duration,
    ) -> Result<Self, StoreError> {
        let mut claim = ReplicaClaim {
            link: Link::open(url, options.timeout)?,
            key: format!("{}:replica:{replica}", options.prefix),
            token: token.to_owned(),
        };
        // (`Duration::MAX`: wait as long as it takes, not an overflow.)
        let now = std::time::Instant::now();
        let deadline = now
            .checked_add(wait)
            .unwrap_or_else(|| now + Duration::from_secs(86_400 * 365 * 30));
        loop {
            let mut cmd = redis::cmd("SET");
            cmd.arg(&claim.key)
                .arg(&claim.token)
                .arg("NX")
                .arg("PX")
                .arg(claim_ttl_ms());
            let taken = claim
                .link
                .run("claim replica", |conn| cmd.query::<Option<String>>(conn));
            // Held already: by us when the reply to our own SET was lost (the connection
            // broke after Redis took it, and `run` tried again).
            let taken = match taken {
                Some(None) => {
                    let mut get = redis::cmd("GET");
                    get.arg(&claim.key);
                    (claim.link)
                        .run("claim replica", |conn| get.query::<Option<String>>(conn))
                        .map(|holder| holder.filter(|h| *h == claim.token))
                }
                taken => taken,
            };
            match taken {
                Some(Some(_)) => return Ok(claim),
                Some(None) if std::time::Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(100));
                }
                Some(None) => {
                    return Err(StoreError::invalid(&format!(
                        "replica number {replica} is held by another running server (keys \
                         under {:?}): give each replica its own number",
                        options.prefix
                    )));
                }
                None => {
                    return Err(StoreError::invalid(&format!(
                        "cannot claim replica number {replica}: {}",
                        claim.link.health.last_error().unwrap_or_default()
                    )));
                }
            }
        }
    }

    /// Renews the claim for another [`CLAIM_TTL`] (or takes the number again if the claim
    /// expired meanwhile). `false` when another process holds the number now, or Redis could
    /// not be reached: report it, since two running servers may then share the name (stream
    /// ids do not depend on it).
    pub fn renew(&mut self) -> bool {
        let mut cmd = RENEW.prepare_invoke();
        cmd.key(&self.key).arg(&self.token).arg(claim_ttl_ms());
        self.link
            .run("renew replica claim", |conn| cmd.invoke::<i64>(conn))
            == Some(1)
    }
}

impl Drop for ReplicaClaim {
    fn drop(&mut self) {
        let mut cmd = RELEASE.prepare_invoke();
        cmd.key(&self.key).arg(&self.token);
        self.link
            .run("release replica claim", |conn| cmd.invoke::<i64>(conn));
    }
}

impl fmt::Debug for ReplicaClaim {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ReplicaClaim")
            .field("key", &self.key)
            .finish()
    }
}

fn claim_ttl_ms() -> i64 {
    i64::try_from(CLAIM_TTL.as_millis()).unwrap_or(i64::MAX)
}

/// The longest TTL, in milliseconds (about 31,700 years): the append script adds it to the
/// clock in Lua, whose numbers Redis before 7.2 prints with `%.17g`, so an expiry time from
/// 1e17 on reached `PEXPIREAT` in exponent form, which it refuses.
const MAX_TTL_MILLIS: i64 = 1_000_000_000_000_000;

/// The TTL in whole milliseconds (rounded up, at least 1, at most [`MAX_TTL_MILLIS`]).
fn ttl_millis(ttl: Duration) -> Result<i64, StoreError> {
    if ttl.is_zero() {
        return Err(StoreError::invalid("the Redis TTL must not be zero"));
    }
    let millis = ttl.as_nanos().div_ceil(1_000_000);
    Ok(i64::try_from(millis)
        .unwrap_or(i64::MAX)
        .min(MAX_TTL_MILLIS))
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
    bytes_per_stream: usize,
    bytes_per_session: usize,
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
            bytes_per_stream: options.bytes_per_stream,
            bytes_per_session: options.bytes_per_session,
        })
    }

    /// This store's failure counts, shared with every clone of the handle. Take it before
    /// moving the store into the server's configuration, to report failures the server
    /// cannot see.
    pub fn health(&self) -> StoreHealth {
        self.link.health.clone()
    }

    /// The first SSE stream id for this server process: set it as
    /// [`HttpServerConfig::first_stream_id`](mcpwire::http::HttpServerConfig::first_stream_id)
    /// once at startup. Stream ids key the shared events, and a session outlives the process
    /// that opened it: a replica restarted with the ids it had before would add its new
    /// streams' events to the old ones, and a resumption would replay both. Each call takes
    /// the next of 2<sup>24</sup> blocks of 2<sup>40</sup> ids from a counter in Redis, so no
    /// two processes of a deployment share one (the counter wraps after 16 million process
    /// starts, by when the sessions of the first are long gone). A counter that is not there
    /// (a new deployment, or a Redis that lost its data while servers ran on) starts from
    /// the clock's milliseconds (modulo the 2<sup>24</sup> blocks), not from zero: after such
    /// a loss, new processes draw blocks past those of the processes still running unless
    /// more than one process a millisecond started since the counter was made, or the clock
    /// came round to their blocks again (about one chance in 2<sup>24</sup> per process
    /// started). A Redis that comes back with older data (restarted from a snapshot taken
    /// before, or a replica promoted without the last writes) has the counter as it was then,
    /// and hands out again the blocks it handed out since: restart the replicas after such a
    /// loss. Fails if Redis cannot be reached.
    // (The clock only seeds a counter, once per process.)
    #[allow(clippy::disallowed_methods)]
    pub fn first_stream_id(&mut self) -> Result<u64, StoreError> {
        let since_epoch = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as u64);
        let mut cmd = NEXT_BLOCK.prepare_invoke();
        cmd.key(format!("{}:streams", self.keys.prefix))
            .arg(since_epoch & STREAM_BLOCKS_MASK);
        let Some(n) = self
            .link
            .run("allocate stream ids", |conn| cmd.invoke::<u64>(conn))
        else {
            return Err(StoreError::invalid(&format!(
                "cannot allocate stream ids: {}",
                self.link.health.last_error().unwrap_or_default()
            )));
        };
        Ok(((n & STREAM_BLOCKS_MASK) << STREAM_BLOCK_BITS) | 1)
    }
}

/// The next block of stream ids (KEYS: the counter; ARGV: the clock's milliseconds, where a
/// counter that is not there starts).
static NEXT_BLOCK: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        "if redis.call('EXISTS', KEYS[1]) == 0 then \
redis.call('SET', KEYS[1], ARGV[1]) end return redis.call('INCR', KEYS[1])",
    )
});

/// The stream ids of one block ([`RedisEventStore::first_stream_id`]): 2<sup>40</sup>, a
/// million new streams a second for twelve days.
const STREAM_BLOCK_BITS: u32 = 40;
const STREAM_BLOCKS_MASK: u64 = (1 << (64 - STREAM_BLOCK_BITS)) - 1;

impl fmt::Debug for RedisEventStore {
    // Without the client: its address may hold a password.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RedisEventStore")
            .field("prefix", &self.keys.prefix)
            .field("ttl_ms", &self.ttl_ms)
            .field("events_per_stream", &self.per_stream)
            .field("bytes_per_stream", &self.bytes_per_stream)
            .field("bytes_per_session", &self.bytes_per_session)
            .field("connected", &self.link.conn.is_some())
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
        let counts = self.keys.counts(session);
        let mut member = Vec::with_capacity(8 + bytes.len());
        member.extend_from_slice(&event.to_be_bytes());
        member.extend_from_slice(bytes);
        // (Lua numbers are doubles: exact far beyond any real bound.)
        let keep = i64::try_from(self.per_stream).unwrap_or(i64::MAX);
        let keep_bytes = i64::try_from(self.bytes_per_stream).unwrap_or(i64::MAX);
        let session_bytes = i64::try_from(self.bytes_per_session).unwrap_or(i64::MAX);
        let mut cmd = APPEND.prepare_invoke();
        cmd.key(&key)
            .key(&index)
            .key(&counts)
            .arg(&member)
            .arg(keep)
            .arg(self.ttl_ms)
            .arg(stream.0)
            .arg(keep_bytes)
            .arg(session_bytes)
            .arg(self.keys.streams(session));
        // A retry after a lost reply adds the same member again: no duplicate.
        self.link.run("append", move |conn| cmd.invoke::<()>(conn));
    }

    fn replay(
        &mut self,
        session: &str,
        stream: HttpStreamId,
        after: u64,
        out: &mut dyn FnMut(&[u8]),
    ) -> Result<(), StoreUnavailable> {
        let Some(first) = after.checked_add(1) else {
            return Ok(());
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
            // (Not "nothing stored": the client comes back for what is.)
            return Err(StoreUnavailable);
        };
        for member in &members {
            let Some((number, bytes)) = member.split_first_chunk::<8>() else {
                continue;
            };
            if u64::from_be_bytes(*number) > after {
                out(bytes);
            }
        }
        Ok(())
    }

    fn forget(&mut self, session: &str) {
        let index = self.keys.index(session);
        let keys = self.keys.clone();
        let session = session.to_owned();
        self.link.run("forget events", move |conn| {
            let streams: Vec<String> = redis::cmd("ZRANGE")
                .arg(&index)
                .arg(0)
                .arg(-1)
                .query(conn)?;
            let mut del = redis::cmd("DEL");
            del.arg(&index).arg(keys.counts(&session));
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
            .field("connected", &self.link.conn.is_some())
            .field("health", &self.link.health)
            .finish()
    }
}

/// An object's JSON text with each member's value as `edit` gives it (`None` leaves the
/// member out); keys keep their escapes.
fn rebuild(
    object: mcpwire::jsonrpc::RawJson<'_>,
    edit: &mut dyn FnMut(&str, mcpwire::jsonrpc::RawJson<'_>) -> Option<String>,
) -> String {
    let mut out = String::from("{");
    for (key, value) in object.members() {
        let Some(value) = edit(&key.to_str(), value) else {
            continue;
        };
        if out.len() > 1 {
            out.push(',');
        }
        out.push('"');
        out.push_str(key.raw());
        out.push_str("\":");
        out.push_str(&value);
    }
    out.push('}');
    out
}

/// `initialize` without its `params.clientInfo.icons`: nothing a restore needs, and what a
/// client may make large within the specification (an icon's `src` may be a `data:` URI).
fn without_icons(initialize: &str) -> Option<String> {
    let top = mcpwire::jsonrpc::RawJson::new(initialize).ok()?;
    let keep = |v: mcpwire::jsonrpc::RawJson<'_>| Some(v.get().to_owned());
    Some(rebuild(top, &mut |k, v| match k {
        "params" => Some(rebuild(v, &mut |k, v| match k {
            "clientInfo" => Some(rebuild(v, &mut |k, v| {
                (k != "icons").then(|| v.get().to_owned())
            })),
            _ => keep(v),
        })),
        _ => keep(v),
    }))
}

impl SessionStore for RedisSessionStore {
    fn create(&mut self, session: &str, initialize: &str) -> Result<(), StoreUnavailable> {
        let compact;
        let mut initialize = initialize;
        if initialize.len() > self.max_record {
            // A client's icons as data: URIs: the record keeps the rest.
            compact = without_icons(initialize).filter(|c| c.len() <= self.max_record);
            match &compact {
                Some(c) => initialize = c,
                None => {
                    self.link.health.record(
                        "create session",
                        &format_args!(
                            "the initialize request ({} bytes) is over max_record ({}), also \
                             without its clientInfo.icons: not shared",
                            initialize.len(),
                            self.max_record
                        ),
                    );
                    return Err(StoreUnavailable);
                }
            }
        }
        let mut cmd = redis::cmd("SET");
        cmd.arg(self.keys.session(session))
            .arg(initialize)
            .arg("PX")
            .arg(self.ttl_ms);
        (self.link.run("create session", move |conn| cmd.exec(conn))).ok_or(StoreUnavailable)
    }

    fn load(&mut self, session: &str) -> Result<Option<String>, StoreUnavailable> {
        let mut cmd = redis::cmd("GETEX");
        cmd.arg(self.keys.session(session))
            .arg("PX")
            .arg(self.ttl_ms);
        // (A Redis that did not answer is no "unknown session": the client keeps it.)
        let record = (self.link)
            .run("load session", move |conn| {
                cmd.query::<Option<Vec<u8>>>(conn)
            })
            .ok_or(StoreUnavailable)?;
        match record.map(String::from_utf8) {
            None => Ok(None),
            Some(Ok(text)) => Ok(Some(text)),
            // Not a record this store wrote (another program's, or damaged): no session can
            // be made of it, so it is an unknown one, and its client starts afresh. Read as
            // a failure of Redis, it got 503 at every try, each renewing it and reconnecting.
            Some(Err(_)) => {
                self.link.health.record(
                    "load session",
                    // (Not naming the session: its id is its client's credential.)
                    &"a session's record is not UTF-8: taken as unknown",
                );
                Ok(None)
            }
        }
    }

    fn touch(&mut self, session: &str) -> Result<bool, StoreUnavailable> {
        let mut cmd = redis::cmd("PEXPIRE");
        cmd.arg(self.keys.session(session)).arg(self.ttl_ms);
        // A failure is no verdict: the server keeps the session and tries again soon.
        self.link
            .run("touch session", move |conn| cmd.query::<i64>(conn))
            .map(|refreshed| refreshed == 1)
            .ok_or(StoreUnavailable)
    }

    fn forget(&mut self, session: &str) -> Result<(), StoreUnavailable> {
        let mut cmd = redis::cmd("DEL");
        cmd.arg(self.keys.session(session));
        self.link
            .run("forget session", move |conn| cmd.exec(conn))
            .ok_or(StoreUnavailable)
    }
}

#[cfg(test)]
mod tests {
    // The lookups run on the real clock.
    #![allow(clippy::disallowed_methods)]

    use super::*;
    use std::time::Instant;

    /// A lookup that hangs costs the call its timeout, not the resolver's; while it runs, the
    /// next calls fail at once instead of piling up threads; once it has ended, its addresses
    /// serve the calls whose own lookups are slow again (a resolver always slower than the
    /// timeout still leads to a connection).
    #[test]
    fn a_slow_lookup_costs_one_timeout_and_its_late_answer_is_kept() {
        let lookups = Arc::new(Mutex::new(Lookups::default()));
        let first = SocketAddr::from(([127, 0, 0, 1], 6379));
        let slow = move || {
            std::thread::sleep(Duration::from_millis(600));
            Ok(vec![first])
        };
        let started = Instant::now();
        let e = wait_for_lookup(slow, Duration::from_millis(100), &lookups).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::TimedOut);
        assert!(
            started.elapsed() < Duration::from_millis(500),
            "{:?}",
            started.elapsed()
        );
        // While it runs: no second thread, and nothing found yet to fall back on.
        let started = Instant::now();
        let ran = Arc::new(AtomicU64::new(0));
        let count = Arc::clone(&ran);
        let second = move || {
            count.fetch_add(1, Ordering::SeqCst);
            Ok(Vec::new())
        };
        let e = wait_for_lookup(second, Duration::from_secs(5), &lookups).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::TimedOut);
        assert!(started.elapsed() < Duration::from_millis(100));
        assert_eq!(
            ran.load(Ordering::SeqCst),
            0,
            "no second lookup while the first runs"
        );
        std::thread::sleep(Duration::from_millis(800));
        // Slow again: the late answer of the first serves.
        let other = SocketAddr::from(([127, 0, 0, 2], 6379));
        let slow_again = move || {
            std::thread::sleep(Duration::from_millis(600));
            Ok(vec![other])
        };
        let found = wait_for_lookup(slow_again, Duration::from_millis(100), &lookups).unwrap();
        assert_eq!(found, vec![first]);
        // A fast one answers for itself.
        std::thread::sleep(Duration::from_millis(800));
        let fast = move || Ok(vec![other]);
        let found = wait_for_lookup(fast, Duration::from_secs(5), &lookups).unwrap();
        assert_eq!(found, vec![other]);
        assert!(!lookups.lock().unwrap().running);
    }

    /// The error reply a script's write gets from a Redis that no longer takes writes means
    /// "connect again" (the new primary may be elsewhere), as the bare reply does: Redis 6.2
    /// wraps it in `ERR Error running script`, which was taken for an answer in step, so the
    /// event store stayed on the demoted node and every append failed.
    #[test]
    fn a_script_that_met_a_read_only_redis_is_no_answer_in_step() {
        let error = |reply: &[u8]| {
            redis::parse_redis_value(reply)
                .unwrap()
                .extract_error()
                .unwrap_err()
        };
        for (reply, in_step) in [
            (&b"-READONLY You can't write against a read only replica.\r\n"[..], false),
            (b"-ERR Error running script (call to f_0123): @user_script:1: @user_script: 1: -READONLY You can't write against a read only replica.\r\n", false),
            (b"-ERR Error running script (call to f_0123): @user_script:1: @user_script: 1: -LOADING Redis is loading the dataset in memory\r\n", false),
            (b"-OOM command not allowed when used memory > 'maxmemory'.\r\n", true),
            (b"-ERR Error running script (call to f_0123): @user_script:1: user_script:1: Script attempted to access nonexistent global variable 'x'\r\n", true),
            (b"-WRONGTYPE Operation against a key holding the wrong kind of value\r\n", true),
        ] {
            let e = error(reply);
            assert_eq!(answered_in_step(&e), in_step, "{e:?}");
        }
    }

    /// The addresses of a host name share one timeout: each attempt gets what is left. Each
    /// got the whole timeout, so a name whose two addresses both stalled cost twice as much.
    #[test]
    fn the_addresses_of_a_host_name_share_one_timeout() {
        let addrs = vec![
            SocketAddr::from(([127, 0, 0, 1], 1)),
            SocketAddr::from(([127, 0, 0, 2], 1)),
            SocketAddr::from(([127, 0, 0, 3], 1)),
        ];
        let timeout = Duration::from_millis(200);
        let mut given = Vec::new();
        let started = Instant::now();
        let failed = each_address(
            addrs.clone(),
            Instant::now().checked_add(timeout),
            timeout,
            |addr, left| -> RedisResult<()> {
                given.push((addr, left));
                std::thread::sleep(left.min(Duration::from_millis(120))); // it stalls
                Err(io::Error::new(io::ErrorKind::TimedOut, "stalled").into())
            },
        )
        .unwrap_err();
        assert!(failed.to_string().contains("stalled"), "{failed}");
        assert!(
            started.elapsed() < Duration::from_millis(300),
            "{:?}",
            started.elapsed()
        );
        assert_eq!(given.len(), 2, "the third had no time left: {given:?}");
        assert!(given[1].1 <= Duration::from_millis(80), "{given:?}");
        // The first that answers is taken; with no deadline each gets the timeout.
        let took = each_address(addrs.clone(), None, timeout, |addr, left| {
            assert_eq!(left, timeout);
            if addr == addrs[1] {
                Ok(addr)
            } else {
                Err(io::Error::from(io::ErrorKind::ConnectionRefused).into())
            }
        });
        assert_eq!(took.unwrap(), addrs[1]);
        // No address at all.
        let none = each_address(Vec::new(), None, timeout, |_, _| -> RedisResult<()> {
            Ok(())
        });
        assert!(none.unwrap_err().to_string().contains("no address"));
    }

    #[test]
    fn a_host_name_resolves_through_the_bounded_lookup() {
        let lookups = Arc::new(Mutex::new(Lookups::default()));
        let found = resolve_bounded("localhost", 6379, Duration::from_secs(5), &lookups).unwrap();
        assert!(
            found
                .iter()
                .any(|a| a.ip().is_loopback() && a.port() == 6379),
            "{found:?}"
        );
        assert!(!lookups.lock().unwrap().running);
    }
}
