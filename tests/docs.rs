//! The user docs stay true: every test `docs/rules.md` names exists, every home it names holds
//! the function, and every relative link in the Markdown files resolves inside the repository.

use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Whether `source` defines a function `name` (as `fn name(` or `fn name<`).
fn defines(source: &str, name: &str) -> bool {
    source.contains(&format!("fn {name}(")) || source.contains(&format!("fn {name}<"))
}

/// The backticked spans of a Markdown text.
fn code_spans(text: &str) -> Vec<&str> {
    text.split('`').skip(1).step_by(2).collect()
}

/// `text` without its parenthesised parts.
fn without_asides(text: &str) -> String {
    let mut depth = 0usize;
    text.chars()
        .filter(|&c| {
            match c {
                '(' => depth += 1,
                ')' => depth = depth.saturating_sub(1),
                _ => return depth == 0,
            }
            false
        })
        .collect()
}

#[test]
fn every_test_named_in_rules_md_exists() {
    let rules = read(&root().join("docs/rules.md"));
    let mut checked = 0;
    let mut missing = Vec::new();
    for span in code_spans(&rules) {
        // `file::test` for tests/file.rs, `src/x/y.rs::tests::test` for unit tests.
        let (file, name) = if let Some((path, name)) = span.split_once("::tests::") {
            (root().join(path), name)
        } else if let Some((file, name)) = span.split_once("::") {
            let path = root().join("tests").join(format!("{file}.rs"));
            if !path.exists()
                || name.contains("::")
                || !name.chars().all(|c| c == '_' || c.is_ascii_alphanumeric())
            {
                continue;
            }
            (path, name)
        } else {
            continue;
        };
        checked += 1;
        if !file.exists() || !defines(&read(&file), name) {
            missing.push(span.to_owned());
        }
    }
    assert!(
        checked > 100,
        "only {checked} tests named: the format of docs/rules.md changed"
    );
    assert!(
        missing.is_empty(),
        "docs/rules.md names tests that do not exist: {missing:#?}"
    );
}

#[test]
fn every_home_named_in_rules_md_holds_its_function() {
    let rules = read(&root().join("docs/rules.md"));
    let mut checked = 0;
    let mut missing = Vec::new();
    for line in rules.lines().filter(|l| l.starts_with('|')) {
        // A home cell reads `conn/x.rs` `Type::function`, `more` …; several may share a cell,
        // separated by ";".
        let cells: Vec<&str> = line.split('|').collect();
        for cell in cells {
            for part in cell.split(';') {
                // Parenthesised names are asides (the fields a rule keeps its state in).
                let part = without_asides(part);
                let spans = code_spans(&part);
                let Some(file) = spans
                    .first()
                    .filter(|f| f.ends_with(".rs") && !f.contains("::"))
                else {
                    continue;
                };
                let path = if file.starts_with("src/") || file.starts_with("bindings/") {
                    root().join(file)
                } else {
                    root().join("src").join(file)
                };
                let Ok(source) = std::fs::read_to_string(&path) else {
                    missing.push(format!("{file} (no such file)"));
                    continue;
                };
                for function in &spans[1..] {
                    let name = function.rsplit("::").next().unwrap_or(function);
                    let name = name.trim_end_matches("()");
                    if !name.chars().all(|c| c == '_' || c.is_ascii_alphanumeric())
                        || name.chars().next().is_some_and(|c| c.is_ascii_uppercase())
                    {
                        continue; // a type, constant or expression, not a function
                    }
                    checked += 1;
                    if !defines(&source, name) {
                        missing.push(format!("{file} {function}"));
                    }
                }
            }
        }
    }
    assert!(
        checked > 50,
        "only {checked} homes named: the format of docs/rules.md changed"
    );
    assert!(
        missing.is_empty(),
        "docs/rules.md names homes that do not hold the function: {missing:#?}"
    );
}

#[test]
fn relative_links_in_the_docs_resolve() {
    let mut files = vec![root().join("README.md"), root().join("benches/README.md")];
    for dir in ["docs", "bindings/go"] {
        for entry in std::fs::read_dir(root().join(dir)).unwrap() {
            let path = entry.unwrap().path();
            if path.extension().is_some_and(|e| e == "md") {
                files.push(path);
            }
        }
    }
    let mut broken = Vec::new();
    for file in &files {
        let text = read(file);
        for (i, _) in text.match_indices("](") {
            let rest = &text[i + 2..];
            let Some(end) = rest.find(')') else { continue };
            let target = rest[..end].split('#').next().unwrap_or("");
            if target.is_empty() || target.contains("://") || target.starts_with("mailto:") {
                continue;
            }
            let resolved = file.parent().unwrap().join(target);
            if !resolved.exists() {
                broken.push(format!("{}: {target}", file.display()));
            } else if !resolved
                .canonicalize()
                .unwrap()
                .starts_with(root().canonicalize().unwrap())
            {
                broken.push(format!(
                    "{}: {target} (outside the repository)",
                    file.display()
                ));
            }
        }
    }
    assert!(broken.is_empty(), "links that do not resolve: {broken:#?}");
}

#[test]
fn the_readme_stays_short() {
    let size = read(&root().join("README.md")).len();
    assert!(
        size <= 10_000,
        "README.md is {size} bytes; the limit is 10 KB (10,000 bytes)"
    );
}
