//! Time as data: the caller's clock, passed in.

use std::time::Duration;

/// A point in time on the caller's monotonic clock, in nanoseconds.
///
/// mcpwire never reads a clock. Pass the current time to every input and command that needs
/// it; deadlines come back as `Timestamp`s on the same clock. Any origin works (process start,
/// a simulation's zero) as long as it never goes backwards.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Timestamp(u64);

impl Timestamp {
    /// The clock's origin.
    pub const ZERO: Timestamp = Timestamp(0);

    /// From nanoseconds since the caller's origin.
    pub const fn from_nanos(nanos: u64) -> Self {
        Timestamp(nanos)
    }

    /// From milliseconds since the caller's origin.
    pub const fn from_millis(millis: u64) -> Self {
        Timestamp(millis.saturating_mul(1_000_000))
    }

    /// Nanoseconds since the caller's origin.
    pub const fn as_nanos(self) -> u64 {
        self.0
    }

    /// This time plus `d`, saturating at the far future.
    pub fn after(self, d: Duration) -> Timestamp {
        let nanos = u64::try_from(d.as_nanos()).unwrap_or(u64::MAX);
        Timestamp(self.0.saturating_add(nanos))
    }

    /// How long from `earlier` to this time (zero if `earlier` is later).
    pub fn since(self, earlier: Timestamp) -> Duration {
        Duration::from_nanos(self.0.saturating_sub(earlier.0))
    }
}
