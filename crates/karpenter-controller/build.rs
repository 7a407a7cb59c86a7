//! Records the compiler version and the build commit for `karpenter_build_info`.

use std::process::Command;

fn main() {
    let rustc = std::env::var("RUSTC").unwrap_or_else(|_| "rustc".to_string());
    // `rustc 1.91.0 (f8297e351 2025-10-28)` -> `rust1.91.0`, the analogue of Go's `go1.24.2`.
    let version = Command::new(rustc)
        .arg("--version")
        .output()
        .ok()
        .and_then(|out| String::from_utf8(out.stdout).ok())
        .and_then(|text| text.split_whitespace().nth(1).map(|v| format!("rust{v}")))
        .unwrap_or_else(|| "unknown".to_string());
    println!("cargo:rustc-env=KARPENTER_RUSTC_VERSION={version}");
    // The commit comes from the build environment (CI sets it); "unknown" otherwise.
    let commit = std::env::var("KARPENTER_BUILD_COMMIT").unwrap_or_else(|_| "unknown".to_string());
    println!("cargo:rustc-env=KARPENTER_BUILD_COMMIT={commit}");
    println!("cargo:rerun-if-env-changed=KARPENTER_BUILD_COMMIT");
    println!("cargo:rerun-if-changed=build.rs");
}
