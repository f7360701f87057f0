//! What the first bytes of a message that was too long to decode still tell: its id, whether
//! it is a response, and its method. The engine uses it to answer an over-long request with an
//! error naming the request (JSON-RPC wants every request answered) and to end our own request
//! whose answer was too long, instead of leaving it to time out; `mcpwire tap` uses it to
//! match an answer it does not decode with its request.

use super::{JsonStr, OwnedId, RawJson};

/// What [`scan_head`] found in the first bytes of a message.
#[derive(Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct HeadFacts {
    /// The top-level `id`, when it lies wholly inside the head and is a valid id (and is
    /// written once).
    pub id: Option<OwnedId>,
    /// A top-level `result` or `error` member was seen: the message is a response.
    pub response: bool,
    /// The top-level `method`, when it lies wholly inside the head and is a string (escapes
    /// decoded), written once.
    pub method: Option<String>,
}

/// Reads the top-level members of a JSON object from its first bytes, as far as they go,
/// without checking the rest. Use it on [`LineDecoder::too_long_head`] to tell which message
/// a frame over the cap was: to answer a request with an error naming its id, or to match an
/// answer you will not decode with your request. A message that does decode is better read
/// with [`Decoder`](super::Decoder).
///
/// [`LineDecoder::too_long_head`]: crate::frame::line::LineDecoder::too_long_head
pub fn scan_head(head: &[u8]) -> HeadFacts {
    let mut facts = HeadFacts::default();
    let mut i = skip_ws(head, 0);
    if head.get(i) != Some(&b'{') {
        return facts;
    }
    i += 1;
    let (mut seen_id, mut seen_method) = (false, false);
    loop {
        i = skip_ws(head, i);
        if head.get(i) != Some(&b'"') {
            return facts;
        }
        let Some(key_end) = string_end(head, i) else {
            return facts;
        };
        let key = &head[i + 1..key_end - 1];
        i = skip_ws(head, key_end);
        if head.get(i) != Some(&b':') {
            return facts;
        }
        i = skip_ws(head, i + 1);
        // Keys are compared as the decoder compares them, escapes decoded (`"r\u0065sult"`
        // is `result`).
        let is = |name: &str| {
            if key.contains(&b'\\') {
                (std::str::from_utf8(key).ok())
                    .and_then(JsonStr::from_raw)
                    .is_some_and(|k| k.eq_str(name))
            } else {
                key == name.as_bytes()
            }
        };
        if is("result") || is("error") {
            // A response, however much of its value the head holds.
            facts.response = true;
        }
        let Some(value_end) = value_end(head, i) else {
            return facts;
        };
        if is("id") {
            // Written twice, as for the decoder, the message has no id it can be told by.
            facts.id = (!seen_id)
                .then(|| std::str::from_utf8(&head[i..value_end]).ok())
                .flatten()
                .and_then(|text| RawJson::new(text).ok())
                .and_then(|value| value.as_id())
                .map(OwnedId::from);
            seen_id = true;
        }
        if is("method") {
            // Written twice, as for the id, it names nothing.
            facts.method = (!seen_method && head[i] == b'"')
                .then(|| std::str::from_utf8(&head[i..value_end]).ok())
                .flatten()
                .and_then(|text| RawJson::new(text).ok())
                .and_then(|value| value.as_str())
                .map(|text| text.to_str().into_owned());
            seen_method = true;
        }
        i = skip_ws(head, value_end);
        match head.get(i) {
            Some(b',') => i += 1,
            _ => return facts,
        }
    }
}

fn skip_ws(b: &[u8], mut i: usize) -> usize {
    while matches!(b.get(i), Some(b' ' | b'\t' | b'\r' | b'\n')) {
        i += 1;
    }
    i
}

/// The index just past the string starting at `start` (a `"`), if it ends inside `b`.
fn string_end(b: &[u8], start: usize) -> Option<usize> {
    let mut i = start + 1;
    while i < b.len() {
        match b[i] {
            b'\\' => i += 2,
            b'"' => return Some(i + 1),
            _ => i += 1,
        }
    }
    None
}

/// The index just past the value starting at `start`, if it ends inside `b` (a scalar ends
/// where a delimiter follows it, so one that runs to the end of the head is incomplete).
fn value_end(b: &[u8], start: usize) -> Option<usize> {
    match b.get(start)? {
        b'"' => string_end(b, start),
        b'{' | b'[' => {
            let mut depth = 0usize;
            let mut i = start;
            while i < b.len() {
                match b[i] {
                    b'"' => {
                        i = string_end(b, i)?;
                        continue;
                    }
                    b'{' | b'[' => depth += 1,
                    b'}' | b']' => {
                        depth -= 1;
                        if depth == 0 {
                            return Some(i + 1);
                        }
                    }
                    _ => {}
                }
                i += 1;
            }
            None
        }
        _ => {
            let len = b[start..]
                .iter()
                .position(|c| matches!(c, b',' | b'}' | b']' | b' ' | b'\t' | b'\r' | b'\n'))?;
            Some(start + len)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::jsonrpc::Id;

    fn id_of(head: &str) -> Option<String> {
        scan_head(head.as_bytes())
            .id
            .map(|id| id.as_id().to_string())
    }

    #[test]
    fn finds_the_id_wherever_it_sits_in_the_head() {
        assert_eq!(
            id_of(r#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"a":"xx"#),
            Some("7".into())
        );
        assert_eq!(
            id_of(r#"{"method":"x","params":{"id":1,"s":"}"},"id":"a\"b","x"#),
            Some(r#""a\"b""#.into())
        );
        assert_eq!(id_of(r#"{ "id" : -12 , "method""#), Some("-12".into()));
        // Cut inside the id, or before it: unknown.
        assert_eq!(id_of(r#"{"jsonrpc":"2.0","id":12"#), None);
        assert_eq!(
            id_of(r#"{"jsonrpc":"2.0","method":"x","params":{"big":"#),
            None
        );
        assert_eq!(id_of(r#"{"id":1.5,"#), None);
        assert_eq!(id_of("not json"), None);
        assert_eq!(id_of(""), None);
    }

    #[test]
    fn tells_responses_apart() {
        let f = scan_head(br#"{"jsonrpc":"2.0","id":3,"result":{"content":[{"text":"#);
        assert_eq!(f.id.map(|i| i.as_id() == Id::Int(3)), Some(true));
        assert!(f.response);
        assert!(scan_head(br#"{"id":3,"error":{"code":1},"#).response);
        assert!(!scan_head(br#"{"id":3,"method":"m","params":{"#).response);
    }

    #[test]
    fn reads_the_method_when_it_is_whole_in_the_head() {
        let f = scan_head(br#"{"jsonrpc":"2.0","id":3,"method":"tools/c\u0061ll","params":{"a"#);
        assert_eq!(f.method.as_deref(), Some("tools/call"));
        assert!(!f.response);
        assert_eq!(scan_head(br#"{"id":3,"method":"tools/ca"#).method, None);
        assert_eq!(scan_head(br#"{"id":3,"method":7,"params":{"#).method, None);
        assert_eq!(
            scan_head(br#"{"id":3,"result":{"method":"x"}}"#).method,
            None
        );
        assert_eq!(
            scan_head(br#"{"id":3,"method":"a","method":"b","#).method,
            None
        );
    }

    /// Keys as the decoder reads them: escapes decoded (an over-long answer spelled
    /// `"r\u0065sult"` was taken for a request and answered), and an `id` written twice
    /// names nothing (the scan took the last one; the decoder refuses the message).
    #[test]
    fn keys_are_read_with_their_escapes_decoded_and_a_repeated_id_names_nothing() {
        let f = scan_head(br#"{"jsonrpc":"2.0","\u0069d":7,"r\u0065sult":{"content":"#);
        assert!(f.response);
        assert_eq!(f.id.map(|i| i.as_id() == Id::Int(7)), Some(true));
        assert!(scan_head(br#"{"id":7,"\u0065rror":{"code":1},"#).response);
        assert!(!scan_head(br#"{"id":7,"r\u0065sults":{"#).response);
        assert_eq!(id_of(r#"{"id":1,"id":2,"method":"m","params":{"#), None);
        assert_eq!(
            id_of(r#"{"id":1,"\u0069d":2,"method":"m","params":{"#),
            None
        );
    }
}
