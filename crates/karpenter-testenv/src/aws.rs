//! AWS SDK clients for the moto emulator started by `scripts/moto up`.
//!
//! [`AwsEnv::connect`] finds the emulator (`$KARPENTER_TESTENV_MOTO_ENDPOINT`,
//! else the state file `$KARPENTER_TESTENV_MOTO_STATE` or
//! `.testenv/moto/state.json`) and builds aws-sdk-rust clients with its
//! endpoint, a region and the seeded administrator's static credentials.
//! IAM enforcement is on by default in the emulator, so a client for a
//! narrower identity is [`AwsEnv::with_credentials`].
//!
//! One moto server serves all tests of a run, and tests of one binary run in
//! parallel: use unique names and tags, filter by them, and hold
//! [`AwsEnv::shared`] while using the emulator. [`AwsEnv::exclusive`] waits
//! for all shared holders of this process and then resets moto (which
//! re-seeds the SSM parameters and images), for tests that need a clean slate
//! or flip global switches such as IAM enforcement.

use std::path::{Path, PathBuf};

use aws_config::{BehaviorVersion, Region, SdkConfig};
use aws_credential_types::Credentials;
use aws_credential_types::provider::SharedCredentialsProvider;
use aws_smithy_http_client::tls::{Provider, rustls_provider::CryptoMode};
use serde::Deserialize;
use tokio::sync::{RwLock, RwLockReadGuard, RwLockWriteGuard};

use crate::error::{Error, Result};
use crate::paths;

/// Overrides the emulator endpoint (then the admin credentials below are used).
pub const ENDPOINT_ENV: &str = "KARPENTER_TESTENV_MOTO_ENDPOINT";
/// Overrides the state file path.
pub const STATE_ENV: &str = "KARPENTER_TESTENV_MOTO_STATE";
/// Overrides the region (default [`DEFAULT_REGION`]).
pub const REGION_ENV: &str = "KARPENTER_TESTENV_AWS_REGION";
/// The region tests use unless told otherwise; the launcher seeds it.
pub const DEFAULT_REGION: &str = "us-west-2";
/// Access key of the administrator the launcher seeds (testenv/moto/launcher.py).
pub const ADMIN_ACCESS_KEY_ID: &str = "AKIAKARPENTERTESTENV";
/// Secret of that administrator. Not a secret: it only opens a moto server on loopback.
pub const ADMIN_SECRET_ACCESS_KEY: &str = "karpenter-testenv-admin-secret-key-000000";
/// moto's default account.
pub const ACCOUNT_ID: &str = "123456789012";

static EMULATOR: RwLock<()> = RwLock::const_new(());

/// What `scripts/moto up` records in `.testenv/moto/state.json`.
#[derive(Clone, Debug, Deserialize)]
pub struct MotoState {
    /// `http://127.0.0.1:<port>`.
    pub endpoint: String,
    /// The administrator's access key id.
    pub access_key_id: String,
    /// The administrator's secret.
    pub secret_access_key: String,
    /// moto's account id.
    #[serde(default = "default_account")]
    pub account_id: String,
    /// Regions whose SSM parameters and images are seeded.
    #[serde(default)]
    pub regions: Vec<String>,
    /// Kubernetes minors whose SSM parameters are seeded.
    #[serde(default)]
    pub k8s_versions: Vec<String>,
    /// Whether IAM enforcement was on at start.
    #[serde(default)]
    pub iam_enforcement: bool,
    /// The moto version.
    #[serde(default)]
    pub moto_version: String,
}

fn default_account() -> String {
    ACCOUNT_ID.to_string()
}

/// The emulator and the identity clients use.
#[derive(Clone, Debug)]
pub struct AwsEnv {
    endpoint: String,
    region: String,
    access_key_id: String,
    secret_access_key: String,
    state: Option<MotoState>,
}

impl AwsEnv {
    /// Finds the running emulator (see the module docs).
    pub fn connect() -> Result<Self> {
        let region = std::env::var(REGION_ENV).unwrap_or_else(|_| DEFAULT_REGION.to_string());
        if let Ok(endpoint) = std::env::var(ENDPOINT_ENV)
            && !endpoint.is_empty()
        {
            return Ok(Self {
                endpoint,
                region,
                access_key_id: ADMIN_ACCESS_KEY_ID.into(),
                secret_access_key: ADMIN_SECRET_ACCESS_KEY.into(),
                state: None,
            });
        }
        let path = std::env::var_os(STATE_ENV)
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
            .unwrap_or_else(paths::default_moto_state);
        let state = read_state(&path)?;
        Ok(Self {
            endpoint: state.endpoint.clone(),
            region,
            access_key_id: state.access_key_id.clone(),
            secret_access_key: state.secret_access_key.clone(),
            state: Some(state),
        })
    }

    /// [`connect`](Self::connect), holding the process-wide shared lock on the
    /// emulator (so no [`exclusive`](Self::exclusive) reset happens meanwhile).
    pub async fn shared() -> Result<(Self, RwLockReadGuard<'static, ()>)> {
        let guard = EMULATOR.read().await;
        Ok((Self::connect()?, guard))
    }

    /// [`connect`](Self::connect), waiting for every other user of the
    /// emulator in this process, then [`reset`](Self::reset).
    pub async fn exclusive() -> Result<(Self, RwLockWriteGuard<'static, ()>)> {
        let guard = EMULATOR.write().await;
        let env = Self::connect()?;
        env.reset().await?;
        Ok((env, guard))
    }

    /// The endpoint URL.
    pub fn endpoint(&self) -> &str {
        &self.endpoint
    }

    /// The region clients use.
    pub fn region(&self) -> &str {
        &self.region
    }

    /// The state file contents, when the emulator was found through it.
    pub fn state(&self) -> Option<&MotoState> {
        self.state.as_ref()
    }

    /// The environment a process (e.g. the `karpenter` binary) reaches the emulator with, as
    /// this identity, through the AWS SDK's default chain.
    pub fn process_env(&self) -> Vec<(&'static str, String)> {
        vec![
            ("AWS_ENDPOINT_URL", self.endpoint.clone()),
            ("AWS_REGION", self.region.clone()),
            ("AWS_ACCESS_KEY_ID", self.access_key_id.clone()),
            ("AWS_SECRET_ACCESS_KEY", self.secret_access_key.clone()),
            ("AWS_EC2_METADATA_DISABLED", "true".to_owned()),
        ]
    }

    /// The same emulator with another identity (e.g. an IAM user's access key).
    pub fn with_credentials(&self, access_key_id: &str, secret_access_key: &str) -> Self {
        Self {
            access_key_id: access_key_id.into(),
            secret_access_key: secret_access_key.into(),
            ..self.clone()
        }
    }

    /// The same emulator in another region.
    pub fn with_region(&self, region: &str) -> Self {
        Self {
            region: region.into(),
            ..self.clone()
        }
    }

    /// Shared SDK configuration: endpoint, region, static credentials and a
    /// rustls (ring) HTTP client that also speaks plain HTTP.
    pub fn sdk_config(&self) -> SdkConfig {
        let credentials = Credentials::from_keys(
            self.access_key_id.clone(),
            self.secret_access_key.clone(),
            None,
        );
        let http_client = aws_smithy_http_client::Builder::new()
            .tls_provider(Provider::Rustls(CryptoMode::Ring))
            .build_https();
        SdkConfig::builder()
            .behavior_version(BehaviorVersion::latest())
            .region(Region::new(self.region.clone()))
            .endpoint_url(self.endpoint.clone())
            .credentials_provider(SharedCredentialsProvider::new(credentials))
            .http_client(http_client)
            .build()
    }

    /// An EC2 client.
    pub fn ec2(&self) -> aws_sdk_ec2::Client {
        aws_sdk_ec2::Client::new(&self.sdk_config())
    }

    /// An SQS client.
    pub fn sqs(&self) -> aws_sdk_sqs::Client {
        aws_sdk_sqs::Client::new(&self.sdk_config())
    }

    /// An SSM client.
    pub fn ssm(&self) -> aws_sdk_ssm::Client {
        aws_sdk_ssm::Client::new(&self.sdk_config())
    }

    /// An IAM client.
    pub fn iam(&self) -> aws_sdk_iam::Client {
        aws_sdk_iam::Client::new(&self.sdk_config())
    }

    /// An EKS client.
    pub fn eks(&self) -> aws_sdk_eks::Client {
        aws_sdk_eks::Client::new(&self.sdk_config())
    }

    /// An ARC zonal shift client (served by the launcher's extension: GetManagedResource,
    /// StartZonalShift, ListZonalShifts, CancelZonalShift).
    pub fn arc(&self) -> aws_sdk_arczonalshift::Client {
        aws_sdk_arczonalshift::Client::new(&self.sdk_config())
    }

    /// Sets what `DescribeInstanceStatus` reports of an instance (the launcher's
    /// `POST /testenv/instance-status`): `spec` is `{"region", "instance_id",
    /// "instance_status", "system_status", "impaired_since", "events"}` as
    /// `testenv/moto/launcher.py` documents; only the ids makes it healthy again.
    pub async fn set_instance_status(&self, spec: &serde_json::Value) -> Result<()> {
        self.moto_api("POST", "/testenv/instance-status", &spec.to_string())
            .await
            .map(drop)
    }

    /// `POST /moto-api/reset`: wipes every backend; the launcher re-seeds the
    /// administrator, SSM parameters and images. Prefer [`exclusive`](Self::exclusive),
    /// which also keeps parallel tests of this process out of the way.
    pub async fn reset(&self) -> Result<()> {
        self.moto_api("POST", "/moto-api/reset", "").await.map(drop)
    }

    /// Turns IAM enforcement on or off (`POST /moto-api/reset-auth` with `0` or `inf`).
    /// Global to the server: hold [`exclusive`](Self::exclusive) while it is changed.
    pub async fn set_iam_enforcement(&self, enabled: bool) -> Result<()> {
        let body = if enabled { "0" } else { "inf" };
        self.moto_api("POST", "/moto-api/reset-auth", body)
            .await
            .map(drop)
    }

    /// Makes a share of the requests signed with one access key fail (the launcher's
    /// `POST /testenv/faults`, seeded, so a run repeats): `spec` is
    /// `{"access_key_id", "rate", "seed", "services", "kinds", "timeout_seconds"}` as
    /// `testenv/moto/launcher.py` documents. Other keys, so other tests, see no fault.
    pub async fn inject_faults(&self, spec: &serde_json::Value) -> Result<()> {
        self.moto_api("POST", "/testenv/faults", &spec.to_string())
            .await
            .map(drop)
    }

    /// What the requests signed with `access_key_id` met since [`inject_faults`](Self::inject_faults):
    /// `{"counts": {"ec2:CreateFleet": {"requests": N, "faults": {"throttle": M}}}}`.
    pub async fn fault_report(&self, access_key_id: &str) -> Result<serde_json::Value> {
        let path = format!("/testenv/faults?access_key_id={access_key_id}");
        let text = self.moto_api("GET", &path, "").await?;
        serde_json::from_str(&text).map_err(|e| Error::MotoApi {
            endpoint: self.endpoint.clone(),
            what: format!("GET {path}"),
            reason: format!("not JSON: {e}: {text}"),
        })
    }

    async fn moto_api(&self, method: &str, path: &str, body: &str) -> Result<String> {
        let failed = |reason: String| Error::MotoApi {
            endpoint: self.endpoint.clone(),
            what: format!("{method} {path}"),
            reason,
        };
        let (status, text) = crate::http::request(&self.endpoint, method, path, body)
            .await
            .map_err(failed)?;
        if status == 200 {
            Ok(text)
        } else {
            Err(failed(format!("HTTP {status}: {}", text.trim())))
        }
    }
}

fn read_state(path: &Path) -> Result<MotoState> {
    let text = match std::fs::read_to_string(path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(Error::MotoNotRunning {
                hint: format!(
                    "{} does not exist and {ENDPOINT_ENV} is unset; run `scripts/moto up`, or \
                     everything with `scripts/test-integration`",
                    path.display()
                ),
            });
        }
        Err(source) => {
            return Err(Error::Io {
                path: path.to_path_buf(),
                source,
            });
        }
    };
    serde_json::from_str(&text).map_err(|source| Error::MotoState {
        path: path.to_path_buf(),
        source,
    })
}
