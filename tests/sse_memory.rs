//! What one large read of many tiny SSE events costs the HTTP client's stream reader: the
//! events it makes wait to be handed out, and a whole read's worth of them at once took many
//! times the read's size (found by a review of the framers). One test in this binary: the
//! allocator counts process-wide.

#[path = "common/counting.rs"]
mod counting;

#[global_allocator]
static GLOBAL: counting::Counting = counting::Counting;

use mcpwire::http::client::StreamReader;

#[test]
fn a_large_read_of_tiny_events_is_handed_out_without_queueing_it_whole() {
    // 1 MiB of events of 6 bytes each (an empty data line and the blank line that ends it),
    // and a message every so often, which must still come through.
    let mut body = Vec::with_capacity(1 << 20);
    let message = b"data: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\"}\n\n";
    let mut sent = 0;
    while body.len() < 1 << 20 {
        for _ in 0..1000 {
            body.extend_from_slice(b"data\n\n");
        }
        body.extend_from_slice(message);
        sent += 1;
    }
    let mut reader = StreamReader::new();
    let mut got = 0;
    counting::reset_peak();
    let before = counting::live();
    reader.feed(&body, |_| got += 1);
    let peak = counting::peak() - before;
    assert_eq!(got, sent, "every message came through");
    assert!(
        peak < 512 * 1024,
        "{peak} bytes at the peak for a read of {} bytes",
        body.len()
    );
}
