//! URL-mode elicitation (2025-11-25): which `elicitationId`s a client knows, so that each
//! `notifications/elicitation/complete` is delivered once and an unknown or repeated one is
//! ignored ("Clients MUST ignore notifications referencing unknown or already-completed IDs"),
//! and the shape checks of `-32042` data.

use std::collections::{HashSet, VecDeque};

use crate::jsonrpc::RawJson;

/// The elicitation ids awaiting completion, oldest first; bounded (the oldest is forgotten).
/// Allocated on first use: a connection that never sees URL mode pays one pointer.
#[derive(Debug, Default)]
pub(crate) struct KnownElicitations(Option<Box<Known>>);

#[derive(Debug, Default)]
struct Known {
    order: VecDeque<String>,
    ids: HashSet<String>,
}

/// How many ids a connection remembers.
const KNOWN_MAX: usize = 256;

impl KnownElicitations {
    /// Remembers `id` (once).
    pub(crate) fn insert(&mut self, id: &str) {
        let known = self.0.get_or_insert_with(Box::default);
        if id.is_empty() || known.ids.contains(id) {
            return;
        }
        if known.order.len() >= KNOWN_MAX
            && let Some(old) = known.order.pop_front()
        {
            known.ids.remove(&old);
        }
        known.ids.insert(id.to_owned());
        known.order.push_back(id.to_owned());
    }

    /// Forgets `id`; whether it was known.
    pub(crate) fn complete(&mut self, id: &str) -> bool {
        let Some(known) = self.0.as_mut() else {
            return false;
        };
        if !known.ids.remove(id) {
            return false;
        }
        known.order.retain(|o| o != id);
        if known.order.is_empty() {
            self.0 = None;
        }
        true
    }
}

/// The string member `key` of `v`.
fn string<'a>(v: RawJson<'a>, key: &str) -> Option<std::borrow::Cow<'a, str>> {
    v.get_unique(key)
        .ok()
        .flatten()
        .and_then(|s| s.as_str())
        .map(|s| s.to_str())
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
