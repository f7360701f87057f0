//! URL-mode elicitation (2025-11-25): which `elicitationId`s a client knows, so that each
//! `notifications/elicitation/complete` is delivered once and an unknown or repeated one is
//! ignored ("Clients MUST ignore notifications referencing unknown or already-completed IDs"),
//! and the shape checks of `-32042` data.

use std::collections::{HashSet, VecDeque};
use std::sync::Arc;

use crate::jsonrpc::RawJson;

/// The elicitation ids awaiting completion, oldest first; bounded (the oldest is forgotten).
/// Allocated on first use: a connection that never sees URL mode pays one pointer.
#[derive(Debug, Default)]
pub(crate) struct KnownElicitations(Option<Box<Known>>);

#[derive(Debug, Default)]
struct Known {
    /// Each id once, shared by the order and the set.
    order: VecDeque<Arc<str>>,
    ids: HashSet<Arc<str>>,
    /// The bytes of the ids held.
    bytes: usize,
}

/// How many ids a connection remembers.
const KNOWN_MAX: usize = 256;

/// How many bytes of ids a connection remembers: a server's ids are short (a UUID is 36), and
/// a few long ones fit; past it the oldest are forgotten, and an id longer than this is not
/// remembered at all (its completion is then ignored, as an unknown id's).
const KNOWN_BYTES: usize = 64 * 1024;

impl KnownElicitations {
    /// Remembers `id` (once).
    pub(crate) fn insert(&mut self, id: &str) {
        if id.is_empty() || id.len() > KNOWN_BYTES {
            return;
        }
        let known = self.0.get_or_insert_with(Box::default);
        if known.ids.contains(id) {
            return;
        }
        while known.order.len() >= KNOWN_MAX || known.bytes + id.len() > KNOWN_BYTES {
            let Some(old) = known.order.pop_front() else {
                break;
            };
            known.bytes -= old.len();
            known.ids.remove(&old);
        }
        let id: Arc<str> = Arc::from(id);
        known.bytes += id.len();
        known.ids.insert(Arc::clone(&id));
        known.order.push_back(id);
    }

    /// Forgets `id`; whether it was known.
    pub(crate) fn complete(&mut self, id: &str) -> bool {
        let Some(known) = self.0.as_mut() else {
            return false;
        };
        if !known.ids.remove(id) {
            return false;
        }
        known.bytes -= id.len();
        known.order.retain(|o| &**o != id);
        if known.order.is_empty() {
            self.0 = None;
        }
        true
    }
}

/// The string member `key` of `v`.
fn string<'a>(v: RawJson<'a>, key: &str) -> Option<std::borrow::Cow<'a, str>> {
    v.unique_str(key).map(|s| s.to_str())
}

/// Whether `params` are those of a URL-mode `elicitation/create` that lacks one string each of
/// `elicitationId`, `url` and `message` (a member written twice counts as missing). URL mode
/// exists only in 2025-11-25, which requires all three ("URL mode elicitation requests MUST
/// specify `mode: "url"`, a `message`, and include these additional parameters"): without a
/// single id, the completion the server sends later could never be matched to it.
pub(crate) fn incomplete_url_request(params: Option<RawJson<'_>>) -> bool {
    let Some(p) = params else {
        return false;
    };
    if string(p, "mode").is_none_or(|m| m != "url") {
        return false;
    }
    string(p, "elicitationId").is_none()
        || string(p, "url").is_none()
        || string(p, "message").is_none()
}

/// Whether `v` is one URL-mode elicitation: `mode` `"url"`, and `elicitationId`, `url` and
/// `message` strings (an `elicitation/create`'s params, or an entry of `-32042` data).
pub(crate) fn url_elicitation_id(v: RawJson<'_>) -> Option<String> {
    if !v.is_object() || string(v, "mode")? != "url" {
        return None;
    }
    string(v, "url")?;
    string(v, "message")?;
    let id = string(v, "elicitationId")?;
    (!id.is_empty()).then(|| id.into_owned())
}

/// The ids of a `-32042` error's `elicitations` (a non-empty array of URL-mode
/// elicitations), or `None` when it is anything else.
pub(crate) fn required_elicitations(elicitations: RawJson<'_>) -> Option<Vec<String>> {
    let mut ids = Vec::new();
    for item in elicitations.items() {
        ids.push(url_elicitation_id(item)?);
    }
    (!ids.is_empty()).then_some(ids)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_delivered_once_and_bounded() {
        let mut known = KnownElicitations::default();
        known.insert("a");
        known.insert("a");
        assert!(known.complete("a"));
        assert!(!known.complete("a"), "already completed");
        assert!(!known.complete("b"), "never known");
        for i in 0..KNOWN_MAX + 10 {
            known.insert(&i.to_string());
        }
        assert!(!known.complete("0"), "the oldest were forgotten");
        assert!(known.complete(&(KNOWN_MAX + 9).to_string()));
    }

    #[test]
    fn url_elicitations_are_checked_whole() {
        let ok = r#"[{"mode":"url","elicitationId":"e1","url":"https://x/","message":"m"}]"#;
        assert_eq!(
            required_elicitations(RawJson::new(ok).unwrap()),
            Some(vec!["e1".to_owned()])
        );
        for bad in [
            "[]",
            "{}",
            r#"[{"mode":"form","elicitationId":"e1","url":"u","message":"m"}]"#,
            r#"[{"mode":"url","url":"u","message":"m"}]"#,
            r#"[{"mode":"url","elicitationId":"e1","message":"m"}]"#,
            r#"[{"mode":"url","elicitationId":"","url":"u","message":"m"}]"#,
        ] {
            assert_eq!(
                required_elicitations(RawJson::new(bad).unwrap()),
                None,
                "{bad}"
            );
        }
    }
}
