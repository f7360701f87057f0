//! Gives the shared library its SONAME. The promise it carries: within one 0.MINOR series
//! (0.1.x) the C ABI only grows; a change that breaks it moves to the next minor version and
//! so to a new SONAME (`libmcpwire.so.0.2`), as cargo-c does for 0.x crates.

fn main() {
    let major: u32 = env!("CARGO_PKG_VERSION_MAJOR").parse().unwrap_or(0);
    let minor: u32 = env!("CARGO_PKG_VERSION_MINOR").parse().unwrap_or(0);
    let soname = if major == 0 {
        format!("libmcpwire.so.0.{minor}")
    } else {
        format!("libmcpwire.so.{major}")
    };
    let target_os = std::env::var("CARGO_CFG_TARGET_OS").unwrap_or_default();
    if target_os == "linux" || target_os == "freebsd" || target_os == "android" {
        println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,{soname}");
    }
    println!("cargo:rerun-if-changed=build.rs");
}
