//! The shared Kubernetes control plane: finding it and connecting to it.
//!
//! One control plane serves a whole test run (`scripts/testenv up`, or
//! `scripts/test-integration` which starts and stops it). Each test gets its
//! own [`kube::Client`] (clients are tied to the tokio runtime that created
//! their connections, and every `#[tokio::test]` has its own runtime) and its
//! own [`TestScope`](crate::TestScope) for isolation.

use std::path::{Path, PathBuf};

use kube::config::{AuthInfo, KubeConfigOptions, Kubeconfig};
use kube::{Client, Config};

use crate::error::{Error, Result};
use crate::paths;
use crate::scope::TestScope;

/// The kubeconfig context name written by `scripts/testenv`.
pub const CONTEXT: &str = "karpenter-testenv";

/// Set to `1` to let the helpers use a kubeconfig that is not the test environment's.
pub const ALLOW_ANY_CLUSTER_ENV: &str = "KARPENTER_TESTENV_ALLOW_ANY_CLUSTER";

/// A connection to the shared control plane.
#[derive(Clone)]
pub struct KubeEnv {
    kubeconfig_path: PathBuf,
    kubeconfig: Kubeconfig,
    client: Client,
}

impl std::fmt::Debug for KubeEnv {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KubeEnv")
            .field("kubeconfig", &self.kubeconfig_path)
            .finish_non_exhaustive()
    }
}

impl KubeEnv {
    /// Connects to the running test environment.
    ///
    /// Uses `$KUBECONFIG` when it is set (it must be the test environment's:
    /// context `karpenter-testenv`, server on loopback), else
    /// `.testenv/kube/kubeconfig` from `scripts/testenv up`.
    pub async fn connect() -> Result<Self> {
        let path = locate_kubeconfig()?;
        Self::from_kubeconfig(&path).await
    }

    /// Connects through an explicit kubeconfig file (no safety checks).
    pub async fn from_kubeconfig(path: &Path) -> Result<Self> {
        let kubeconfig = Kubeconfig::read_from(path).map_err(|source| Error::Kubeconfig {
            path: path.to_path_buf(),
            source,
        })?;
        let config =
            Config::from_custom_kubeconfig(kubeconfig.clone(), &KubeConfigOptions::default())
                .await
                .map_err(|source| Error::Kubeconfig {
                    path: path.to_path_buf(),
                    source,
                })?;
        let client = Client::try_from(config).map_err(Error::Client)?;
        Ok(Self {
            kubeconfig_path: path.to_path_buf(),
            kubeconfig,
            client,
        })
    }

    /// A client with the environment's admin identity (`system:masters`).
    pub fn client(&self) -> Client {
        self.client.clone()
    }

    /// The kubeconfig file in use.
    pub fn kubeconfig_path(&self) -> &Path {
        &self.kubeconfig_path
    }

    /// A client that authenticates with a bearer token instead of the admin
    /// identity (e.g. a ServiceAccount token from the TokenRequest API).
    pub async fn client_with_token(&self, token: &str) -> Result<Client> {
        let mut config =
            Config::from_custom_kubeconfig(self.kubeconfig.clone(), &KubeConfigOptions::default())
                .await
                .map_err(|source| Error::Kubeconfig {
                    path: self.kubeconfig_path.clone(),
                    source,
                })?;
        // AuthInfo keeps its token in a SecretString; build it through serde.
        config.auth_info =
            serde_json::from_value::<AuthInfo>(serde_json::json!({ "token": token }))
                .map_err(Error::TokenCredentials)?;
        Client::try_from(config).map_err(Error::Client)
    }

    /// A fresh isolation scope for one test: a unique id, a namespace, labels.
    pub async fn scope(&self, test_name: &str) -> Result<TestScope> {
        TestScope::create(self.client(), test_name).await
    }
}

/// A `kube::Client` for the shared test environment (see [`KubeEnv::connect`]).
pub async fn test_client() -> Result<Client> {
    Ok(KubeEnv::connect().await?.client())
}

fn locate_kubeconfig() -> Result<PathBuf> {
    if let Some(value) = std::env::var_os("KUBECONFIG").filter(|v| !v.is_empty()) {
        // Only the first file of a list is considered.
        let path = std::env::split_paths(&value)
            .next()
            .unwrap_or_else(|| PathBuf::from(&value));
        check_is_testenv(&path)?;
        return Ok(path);
    }
    let path = paths::default_kubeconfig();
    if path.is_file() {
        return Ok(path);
    }
    Err(Error::KubeNotRunning {
        hint: format!(
            "KUBECONFIG is unset and {} does not exist; run `scripts/testenv up` and export the \
             KUBECONFIG it prints, or run everything with `scripts/test-integration`",
            path.display()
        ),
    })
}

fn check_is_testenv(path: &Path) -> Result<()> {
    if std::env::var(ALLOW_ANY_CLUSTER_ENV).is_ok_and(|v| v == "1") {
        return Ok(());
    }
    let refuse = |reason: String| Error::ForeignCluster {
        path: path.to_path_buf(),
        reason,
    };
    let kubeconfig = Kubeconfig::read_from(path).map_err(|source| Error::Kubeconfig {
        path: path.to_path_buf(),
        source,
    })?;
    let context = kubeconfig.current_context.clone().unwrap_or_default();
    if context != CONTEXT {
        return Err(refuse(format!(
            "current context is {context:?}, not {CONTEXT:?} (written by scripts/testenv)"
        )));
    }
    let server = kubeconfig
        .contexts
        .iter()
        .find(|c| c.name == context)
        .and_then(|c| c.context.as_ref())
        .and_then(|c| kubeconfig.clusters.iter().find(|cl| cl.name == c.cluster))
        .and_then(|cl| cl.cluster.as_ref())
        .and_then(|cl| cl.server.clone())
        .unwrap_or_default();
    let loopback = ["https://127.0.0.1:", "https://localhost:", "https://[::1]:"];
    if !loopback.iter().any(|prefix| server.starts_with(prefix)) {
        return Err(refuse(format!("server {server:?} is not on loopback")));
    }
    Ok(())
}
