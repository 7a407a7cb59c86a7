//! EC2 instance-type data for the catalog generator, read from the pinned moto wheel: where the
//! wheel is cached, how it is fetched and verified, how its EC2 data is read.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, bail};
use sha2::{Digest, Sha256};

/// The pinned moto version (PyPI, Apache-2.0).
pub const MOTO_VERSION: &str = "5.2.5";
/// SHA-256 of `moto-5.2.5-py3-none-any.whl`.
pub const MOTO_WHEEL_SHA256: &str =
    "eef62cdcf3bfe73e0863743511ba042dfaba04ba3d5ecdcb896a196c693ad528";
/// The wheel's file name.
pub const MOTO_WHEEL: &str = "moto-5.2.5-py3-none-any.whl";
/// The EC2 instance-type data inside the wheel.
pub const INSTANCE_TYPES_PATH: &str = "moto/ec2/resources/instance_types.json.gz";
/// How the source is recorded in the catalog header.
pub const SOURCE: &str = "moto==5.2.5 moto/ec2/resources/instance_types.json.gz";
/// The data's license.
pub const LICENSE: &str = "Apache-2.0 (moto)";
/// Where the wheel is cached, relative to the workspace root (git-ignored).
const CACHE_DIR: &str = ".cache/xtask";

/// The cached wheel, fetched with pip first when it is not there.
pub fn cached_wheel(root: &Path) -> anyhow::Result<PathBuf> {
    let dir = root.join(CACHE_DIR);
    let wheel = dir.join(MOTO_WHEEL);
    if !wheel.is_file() {
        fetch(&dir)?;
    }
    if !wheel.is_file() {
        bail!("pip finished but {} is not there", wheel.display());
    }
    Ok(wheel)
}

/// `pip download` of the pinned wheel, verified by hash, into `dir`.
fn fetch(dir: &Path) -> anyhow::Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let requirements = dir.join("requirements.txt");
    std::fs::write(
        &requirements,
        format!("moto=={MOTO_VERSION} --hash=sha256:{MOTO_WHEEL_SHA256}\n"),
    )
    .with_context(|| format!("writing {}", requirements.display()))?;
    eprintln!(
        "xtask: fetching {MOTO_WHEEL} with pip into {}",
        dir.display()
    );
    let pip_args = [
        "download",
        "--quiet",
        "--no-deps",
        "--only-binary=:all:",
        "--require-hashes",
        "--dest",
    ];
    let mut last_error = None;
    for (program, prefix) in [
        ("python3", &["-m", "pip"][..]),
        ("pip3", &[][..]),
        ("pip", &[][..]),
    ] {
        let status = Command::new(program)
            .args(prefix)
            .args(pip_args)
            .arg(dir)
            .arg("--requirement")
            .arg(&requirements)
            .status();
        match status {
            Ok(status) if status.success() => return Ok(()),
            Ok(status) => last_error = Some(format!("{program} exited with {status}")),
            Err(error) => last_error = Some(format!("{program}: {error}")),
        }
    }
    bail!(
        "cannot fetch {MOTO_WHEEL} with pip ({}); download it by hand into {}",
        last_error.unwrap_or_default(),
        dir.display()
    )
}

/// The decompressed `instance_types.json` from the wheel, after checking the wheel's hash.
pub fn read_instance_types(wheel: &Path) -> anyhow::Result<serde_json::Value> {
    let bytes = std::fs::read(wheel).with_context(|| format!("reading {}", wheel.display()))?;
    let digest = hex(&Sha256::digest(&bytes));
    if digest != MOTO_WHEEL_SHA256 {
        bail!(
            "{} has SHA-256 {digest}, not the pinned {MOTO_WHEEL_SHA256} of {MOTO_WHEEL}; \
             (a cached wheel: delete it and the pinned one is fetched again)",
            wheel.display()
        );
    }
    let mut archive = zip::ZipArchive::new(std::io::Cursor::new(bytes))
        .with_context(|| format!("{} is not a zip archive", wheel.display()))?;
    let mut gzipped = Vec::new();
    archive
        .by_name(INSTANCE_TYPES_PATH)
        .with_context(|| format!("{} has no {INSTANCE_TYPES_PATH}", wheel.display()))?
        .read_to_end(&mut gzipped)
        .with_context(|| format!("reading {INSTANCE_TYPES_PATH} from {}", wheel.display()))?;
    let mut json = String::new();
    flate2::read::GzDecoder::new(gzipped.as_slice())
        .read_to_string(&mut json)
        .with_context(|| format!("decompressing {INSTANCE_TYPES_PATH}"))?;
    serde_json::from_str(&json).with_context(|| format!("parsing {INSTANCE_TYPES_PATH}"))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|byte| format!("{byte:02x}")).collect()
}
