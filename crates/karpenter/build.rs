//! Lays the release binary's code out so that what the controller runs sits together.
//!
//! The kernel maps a binary's code into a process 64 KiB at a time around each page it
//! executes (fault-around), so resident code is set by how scattered the executed functions
//! are, not by how many there are: before this, the controller ran 5.6 MiB of functions spread
//! over 17.4 MiB of the 28 MiB `.text`, and that was a third of its peak RSS. `link/symbol-order.txt`
//! lists the functions a profiled run executed (made by `scripts/symbol-order`); the linker
//! places them first, in that order, and everything else after. A function missing from the
//! list (new since the profile) still links, just in the cold part.
//!
//! Only for release builds on x86_64 Linux, where rustc links with its bundled LLD (which has
//! `--symbol-ordering-file`; GNU ld does not). `KARPENTER_SYMBOL_ORDER=off` turns it off, for
//! a build that links with another linker.
//!
//! The same builds pack their relative relocations (`-z pack-relative-relocs`, DT_RELR): the
//! position-independent binary has ~45,000 pointers the loader fixes up at start, and as
//! `Elf64_Rela` entries that table was 1.07 MiB, all of it read at start and resident for the
//! process's life; packed it is a few KiB. The loader needs glibc 2.36 or newer (the image's
//! distroless cc-debian12 has 2.36), so it is on only when the building host's glibc is that
//! new (a binary built there runs there); `KARPENTER_SYMBOL_ORDER=off` turns it off too.

use std::path::Path;

fn main() {
    let order = Path::new("link/symbol-order.txt");
    println!("cargo:rerun-if-changed={}", order.display());
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-env-changed=KARPENTER_SYMBOL_ORDER");
    let release = std::env::var("PROFILE").is_ok_and(|p| p == "release");
    let lld_target = std::env::var("TARGET").is_ok_and(|t| t == "x86_64-unknown-linux-gnu");
    let enabled = std::env::var("KARPENTER_SYMBOL_ORDER").as_deref() != Ok("off");
    if release && lld_target && enabled && order.exists() {
        let manifest_dir = std::env::var("CARGO_MANIFEST_DIR").unwrap_or_default();
        let path = Path::new(&manifest_dir).join(order);
        println!(
            "cargo:rustc-link-arg-bins=-Wl,--symbol-ordering-file={}",
            path.display()
        );
        // Symbols of the profiled build that this one no longer has are expected, not news.
        println!("cargo:rustc-link-arg-bins=-Wl,--no-warn-symbol-ordering");
        if host_glibc().is_some_and(|version| version >= (2, 36)) {
            println!("cargo:rustc-link-arg-bins=-Wl,-z,pack-relative-relocs");
        }
    }
}

/// The building host's glibc version (`getconf GNU_LIBC_VERSION` prints `glibc 2.36`).
fn host_glibc() -> Option<(u32, u32)> {
    let out = std::process::Command::new("getconf")
        .arg("GNU_LIBC_VERSION")
        .output()
        .ok()?;
    let text = String::from_utf8(out.stdout).ok()?;
    let version = text.trim().strip_prefix("glibc ")?;
    let (major, minor) = version.split_once('.')?;
    let minor: String = minor.chars().take_while(char::is_ascii_digit).collect();
    Some((major.parse().ok()?, minor.parse().ok()?))
}
