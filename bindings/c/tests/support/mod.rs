//! What the C ABI's test targets share: building C and C++ programs against the static
//! library under test, and running them under the sanitizers or valgrind.
#![allow(dead_code)]

use std::path::PathBuf;
use std::process::{Command, Output};

pub use crate::common::stdio::root;

pub const C_FLAGS: &[&str] = &["-std=c11", "-Wall", "-Wextra", "-Werror", "-pedantic", "-g"];
pub const CXX_FLAGS: &[&str] = &[
    "-std=c++17",
    "-Wall",
    "-Wextra",
    "-Werror",
    "-pedantic",
    "-g",
];
/// What the static library needs besides itself (`--print native-static-libs`; .ci/packaging
/// keeps the Makefile, mcpwire.pc and README.md equal to it).
pub const NATIVE_LIBS: &[&str] = &[
    "-lgcc_s",
    "-lutil",
    "-lrt",
    "-lpthread",
    "-lm",
    "-ldl",
    "-lc",
];
pub const SANITIZE: &[&str] = &["-fsanitize=address,undefined", "-fno-omit-frame-pointer"];
pub const VALGRIND: &[&str] = &[
    "--error-exitcode=1",
    "--leak-check=full",
    "--errors-for-leak-kinds=definite,indirect",
    "--quiet",
];

/// The directory of this test binary (`target/<profile>/deps`).
pub fn deps_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("the test binary's path");
    exe.parent().expect("target/<profile>/deps").to_path_buf()
}

/// The static library this `cargo test` run built. Cargo writes the library's `staticlib`
/// into `deps/`, next to the test binaries; only `cargo build` copies it up to
/// `target/<profile>/`, where it may be stale, so the copy in `deps/` is the one to test.
pub fn static_lib() -> PathBuf {
    let lib = deps_dir().join("libmcpwire_ffi.a");
    assert!(
        lib.exists(),
        "{} is missing: cargo builds the crate's staticlib next to the test binaries",
        lib.display()
    );
    lib
}

pub fn out_dir() -> PathBuf {
    let dir = deps_dir()
        .parent()
        .expect("target/<profile>")
        .join("c-abi-tests");
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

#[derive(Clone, Copy, PartialEq)]
pub enum Lang {
    C,
    Cxx,
}

/// Compiles one source file into a program linked with the static library.
pub fn build(source: &str, name: &str, lang: Lang, sanitize: bool) -> PathBuf {
    build_with(source, name, lang, sanitize, &[])
}

/// [`build`], linking `libs` too (`-lcurl`, say) after the static library.
pub fn build_with(source: &str, name: &str, lang: Lang, sanitize: bool, libs: &[&str]) -> PathBuf {
    let out = out_dir().join(name);
    let (compiler, flags) = match lang {
        Lang::C => (std::env::var("CC").unwrap_or_else(|_| "cc".into()), C_FLAGS),
        Lang::Cxx => (
            std::env::var("CXX").unwrap_or_else(|_| "c++".into()),
            CXX_FLAGS,
        ),
    };
    let mut cmd = Command::new(compiler);
    cmd.args(flags)
        .arg("-I")
        .arg(root().join("include"))
        .arg("-I")
        .arg(root().join("bindings/cpp"));
    if sanitize {
        cmd.args(SANITIZE);
    }
    cmd.arg(root().join(source))
        .arg(static_lib())
        .args(NATIVE_LIBS)
        .args(libs)
        .arg("-o")
        .arg(&out);
    let result = cmd.output().expect("run the C compiler");
    assert!(
        result.status.success(),
        "building {source} failed:\n{}",
        String::from_utf8_lossy(&result.stderr)
    );
    out
}

/// Each program is built once per test process, whichever test asks first.
#[macro_export]
macro_rules! program {
    ($fn_name:ident, $source:expr, $name:expr, $lang:expr, $sanitize:expr) => {
        $crate::program!($fn_name, $source, $name, $lang, $sanitize, &[]);
    };
    ($fn_name:ident, $source:expr, $name:expr, $lang:expr, $sanitize:expr, $libs:expr) => {
        fn $fn_name() -> &'static std::path::Path {
            static PATH: std::sync::OnceLock<std::path::PathBuf> = std::sync::OnceLock::new();
            PATH.get_or_init(|| {
                $crate::support::build_with($source, $name, $lang, $sanitize, $libs)
            })
        }
    };
}

/// Runs a sanitized program: any sanitizer report fails it.
pub fn run_sanitized(mut cmd: Command) -> Output {
    cmd.env(
        "ASAN_OPTIONS",
        "detect_leaks=1:abort_on_error=0:exitcode=23",
    )
    .env(
        "UBSAN_OPTIONS",
        "halt_on_error=1:print_stacktrace=1:exitcode=24",
    )
    .output()
    .expect("run the program")
}

pub fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

pub fn assert_test_program_passed(out: &Output) {
    let all = text(out);
    assert!(out.status.success(), "{all}");
    let summary = String::from_utf8_lossy(&out.stdout)
        .lines()
        .last()
        .unwrap_or_default()
        .to_owned();
    assert!(
        summary.starts_with("test result: ok.") && summary.ends_with("; 0 failed"),
        "{all}"
    );
}

pub fn valgrind() -> Command {
    let mut cmd = Command::new("valgrind");
    cmd.args(VALGRIND);
    cmd
}
