//! The hand-written method table agrees with the official schemas of every version.

use std::collections::BTreeSet;

use mcpwire::mcp::{Direction, MethodKind, ProtocolVersion, lookup, methods_of};
use serde_json::Value;

fn schema(version: ProtocolVersion) -> Value {
    let path = format!(
        "{}/tests/data/spec/{}/schema.json",
        env!("CARGO_MANIFEST_DIR"),
        version.as_str()
    );
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// The method names of a union type (`ClientRequest`, …): its `anyOf` members, or the type
/// itself when the union has a single member.
fn union_methods(schema: &Value, union: &str) -> BTreeSet<String> {
    let defs = schema.get("definitions").or(schema.get("$defs")).unwrap();
    let Some(u) = defs.get(union) else {
        return BTreeSet::new();
    };
    let method_of = |def: &Value| -> Option<String> {
        let m = def.pointer("/properties/method")?;
        m.get("const").and_then(Value::as_str).map(str::to_owned)
    };
    let resolve = |v: &Value| -> Value {
        match v.get("$ref").and_then(Value::as_str) {
            Some(r) => defs[r.rsplit('/').next().unwrap()].clone(),
            None => v.clone(),
        }
    };
    match u.get("anyOf").and_then(Value::as_array) {
        Some(members) => members
            .iter()
            .filter_map(|m| method_of(&resolve(m)))
            .collect(),
        None => method_of(&resolve(u)).into_iter().collect(),
    }
}

/// The methods of the tasks extension (SEP-2663), which the table carries for 2026-07-28 but
/// the core schema does not define.
const TASKS_EXTENSION: [&str; 4] = [
    "tasks/get",
    "tasks/update",
    "tasks/cancel",
    "notifications/tasks",
];

/// The table's core methods (without the extension's).
fn table(version: ProtocolVersion, kind: MethodKind, from_client: bool) -> BTreeSet<String> {
    methods_of(version)
        .filter(|m| m.kind == kind && m.direction.allows(from_client))
        .filter(|m| version != ProtocolVersion::V2026_07_28 || !TASKS_EXTENSION.contains(&m.name))
        .map(|m| m.name.to_owned())
        .collect()
}

#[test]
fn the_tasks_extension_methods_exist_in_2026_07_28_only_and_lose_result_and_list() {
    use ProtocolVersion::*;
    for name in TASKS_EXTENSION {
        let row = lookup(name, V2026_07_28).expect(name);
        assert_eq!(
            format!("{:?}", row.gate),
            format!(
                "{:?}",
                mcpwire::mcp::Gate::Cap(mcpwire::mcp::Caps::TASKS_EXTENSION)
            ),
            "{name}"
        );
    }
    assert!(lookup("tasks/update", V2025_11_25).is_none());
    assert!(lookup("tasks/result", V2026_07_28).is_none());
    assert!(lookup("tasks/list", V2026_07_28).is_none());
    assert!(lookup("tasks/result", V2025_11_25).is_some());
}

#[test]
fn table_matches_the_schemas_of_every_version() {
    for version in ProtocolVersion::ALL {
        let s = schema(version);
        let cases = [
            ("ClientRequest", MethodKind::Request, true),
            ("ServerRequest", MethodKind::Request, false),
            ("ClientNotification", MethodKind::Notification, true),
            ("ServerNotification", MethodKind::Notification, false),
        ];
        for (union, kind, from_client) in cases {
            let expected = union_methods(&s, union);
            let ours = table(version, kind, from_client);
            assert_eq!(ours, expected, "{version} {union}");
        }
    }
}

#[test]
fn removed_and_added_methods_by_version() {
    use ProtocolVersion::*;
    assert!(lookup("ping", V2025_11_25).is_some());
    assert!(lookup("ping", V2026_07_28).is_none());
    assert!(lookup("initialize", V2026_07_28).is_none());
    assert!(lookup("server/discover", V2025_11_25).is_none());
    assert!(lookup("elicitation/create", V2025_03_26).is_none());
    assert!(lookup("elicitation/create", V2025_06_18).is_some());
    assert!(lookup("tasks/get", V2025_11_25).is_some());
    assert!(lookup("tasks/get", V2025_06_18).is_none());
    assert!(lookup("logging/setLevel", V2026_07_28).is_none());
    assert!(lookup("resources/subscribe", V2026_07_28).is_none());
    assert!(lookup("notifications/roots/list_changed", V2026_07_28).is_none());
    assert_eq!(
        lookup("notifications/progress", V2026_07_28)
            .unwrap()
            .direction,
        Direction::ServerToClient
    );
    assert!(V2025_03_26.has_batches() && !V2025_06_18.has_batches());
    assert_eq!(ProtocolVersion::parse("2025-06-18"), Some(V2025_06_18));
    assert_eq!(ProtocolVersion::parse("2025-6-18"), None);
}

#[test]
fn every_version_in_the_test_data_is_known() {
    let dir = format!("{}/tests/data/spec", env!("CARGO_MANIFEST_DIR"));
    let mut found: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    found.sort();
    let ours: Vec<String> = ProtocolVersion::ALL
        .iter()
        .map(|v| v.as_str().to_owned())
        .collect();
    assert_eq!(found, ours);
}
