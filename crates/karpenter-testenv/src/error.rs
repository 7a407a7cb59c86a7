//! Errors of the test helpers, named after the step that failed.

use std::path::PathBuf;

/// Everything that can go wrong while reaching or driving the test environments.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Neither `KUBECONFIG` nor `.testenv/kube/kubeconfig` points at a control plane.
    #[error("no Kubernetes test environment: {hint}")]
    KubeNotRunning {
        /// What to run to get one.
        hint: String,
    },
    /// `KUBECONFIG` points somewhere that does not look like the test environment.
    #[error(
        "refusing to run tests against {path}: {reason} (set KARPENTER_TESTENV_ALLOW_ANY_CLUSTER=1 to override)"
    )]
    ForeignCluster {
        /// The kubeconfig file.
        path: PathBuf,
        /// Why it was refused.
        reason: String,
    },
    /// The kubeconfig could not be read or turned into a client configuration.
    #[error("loading kubeconfig {path}")]
    Kubeconfig {
        /// The kubeconfig file.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: kube::config::KubeconfigError,
    },
    /// Bearer-token credentials could not be built.
    #[error("building bearer-token credentials")]
    TokenCredentials(#[source] serde_json::Error),
    /// Building a `kube::Client` failed.
    #[error("building the Kubernetes client")]
    Client(#[source] kube::Error),
    /// A call to the API server failed.
    #[error("{action}")]
    Kube {
        /// What we were doing, e.g. "creating Node sim-1".
        action: String,
        /// The underlying error.
        #[source]
        source: kube::Error,
    },
    /// Discovery could not resolve a manifest's kind.
    #[error("resolving {gvk} through API discovery")]
    Discovery {
        /// group/version/kind.
        gvk: String,
        /// The underlying error.
        #[source]
        source: kube::Error,
    },
    /// A file could not be read.
    #[error("reading {path}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// A YAML manifest did not parse.
    #[error("parsing YAML {path}")]
    Yaml {
        /// The file.
        path: PathBuf,
        /// The underlying error (boxed: it carries a source snippet).
        #[source]
        source: Box<serde_saphyr::Error>,
    },
    /// A manifest parsed but is not a usable Kubernetes object.
    #[error("{path}: {reason}")]
    Manifest {
        /// The file.
        path: PathBuf,
        /// What is wrong with it.
        reason: String,
    },
    /// Something did not happen in time.
    #[error("timed out after {secs}s waiting for {what}")]
    Timeout {
        /// What we waited for.
        what: String,
        /// How long we waited.
        secs: u64,
    },
    /// A helper was asked for something its configuration cannot do.
    #[error("{what} is not supported {why}")]
    Unsupported {
        /// The operation.
        what: String,
        /// Why not, and what to use instead.
        why: String,
    },
    /// No moto server is configured or its state file is unreadable.
    #[error("no AWS emulator: {hint}")]
    MotoNotRunning {
        /// What to run to get one.
        hint: String,
    },
    /// The moto state file is not valid JSON of the expected shape.
    #[error("parsing the moto state file {path}")]
    MotoState {
        /// The state file.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: serde_json::Error,
    },
    /// A call to moto's control API (`/moto-api/...`) failed.
    #[error("moto control call {what} at {endpoint}: {reason}")]
    MotoApi {
        /// The endpoint.
        endpoint: String,
        /// The call, e.g. "POST /moto-api/reset".
        what: String,
        /// What went wrong.
        reason: String,
    },
}

/// Result with this crate's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// `Ok` for a call whose object was already gone (404): deleting or updating what no longer
/// exists is done.
pub(crate) fn ignore_not_found(result: Result<(), kube::Error>) -> Result<(), kube::Error> {
    match result {
        Err(kube::Error::Api(status)) if status.code == 404 => Ok(()),
        other => other,
    }
}

pub(crate) fn kube_err(action: impl Into<String>) -> impl FnOnce(kube::Error) -> Error {
    let action = action.into();
    move |source| Error::Kube { action, source }
}
