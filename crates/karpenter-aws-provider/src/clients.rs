//! The AWS clients the provider calls, built from one SDK configuration.
//!
//! In a cluster the configuration comes from the SDK's default chain (IRSA or EKS Pod
//! Identity web identity, environment, instance metadata), with `AWS_ENDPOINT_URL` (and the
//! per-service `AWS_ENDPOINT_URL_<SERVICE>`) honoured, so the controller runs unchanged
//! against an emulator. Tests give their own configuration and interceptors (e.g. one that
//! records every call for the IAM contract check).

use std::time::Duration;

use aws_config::timeout::TimeoutConfig;
use aws_config::{BehaviorVersion, SdkConfig};
use aws_sdk_ec2::config::SharedInterceptor;

/// The pricing endpoint region for a cluster region (upstream's mapping).
pub use karpenter_aws::pricing::pricing_endpoint_region;

/// EC2, SSM, IAM, EKS and Pricing clients for one region.
#[derive(Debug, Clone)]
pub struct AwsClients {
    pub region: String,
    pub ec2: aws_sdk_ec2::Client,
    pub ssm: aws_sdk_ssm::Client,
    pub iam: aws_sdk_iam::Client,
    pub eks: aws_sdk_eks::Client,
    /// In the pricing endpoint's region ([`pricing_endpoint_region`]).
    pub pricing: aws_sdk_pricing::Client,
}

/// Why the clients could not be built.
#[derive(Debug, thiserror::Error)]
pub enum ClientsError {
    #[error(
        "no AWS region: set AWS_REGION (or run where instance metadata answers) for --cloud-provider aws"
    )]
    NoRegion,
}

/// How long one attempt of an AWS call may take before it is abandoned (and retried by the
/// SDK's standard retry, 3 attempts), unless the SDK config names its own. Without it a call
/// the network or the service leaves unanswered holds its loop forever (the SDK sets no
/// attempt or operation timeout by default).
pub const ATTEMPT_TIMEOUT: Duration = Duration::from_secs(30);
/// How long an AWS call may take with its retries, unless the SDK config names its own.
pub const OPERATION_TIMEOUT: Duration = Duration::from_secs(120);

/// `given` with [`ATTEMPT_TIMEOUT`] and [`OPERATION_TIMEOUT`] where it has none.
fn timeouts(given: Option<&TimeoutConfig>) -> TimeoutConfig {
    let mut builder = TimeoutConfig::builder();
    if let Some(connect) = given.and_then(TimeoutConfig::connect_timeout) {
        builder = builder.connect_timeout(connect);
    }
    if let Some(read) = given.and_then(TimeoutConfig::read_timeout) {
        builder = builder.read_timeout(read);
    }
    builder
        .operation_attempt_timeout(
            given
                .and_then(TimeoutConfig::operation_attempt_timeout)
                .unwrap_or(ATTEMPT_TIMEOUT),
        )
        .operation_timeout(
            given
                .and_then(TimeoutConfig::operation_timeout)
                .unwrap_or(OPERATION_TIMEOUT),
        )
        .build()
}

impl AwsClients {
    /// Clients from the SDK's default chain, over rustls (ring).
    pub async fn from_env() -> Result<Self, ClientsError> {
        Self::from_env_with(&[]).await
    }

    /// [`AwsClients::from_env`], each client with `interceptors`.
    pub async fn from_env_with(interceptors: &[SharedInterceptor]) -> Result<Self, ClientsError> {
        use aws_smithy_http_client::tls::{Provider, rustls_provider::CryptoMode};
        let http = aws_smithy_http_client::Builder::new()
            .tls_provider(Provider::Rustls(CryptoMode::Ring))
            .build_https();
        let config = aws_config::defaults(BehaviorVersion::latest())
            .http_client(http)
            .load()
            .await;
        Self::new(&config, interceptors)
    }

    /// Clients from `config`, each with `interceptors`.
    pub fn new(
        config: &SdkConfig,
        interceptors: &[SharedInterceptor],
    ) -> Result<Self, ClientsError> {
        let region = config
            .region()
            .map(|r| r.as_ref().to_owned())
            .ok_or(ClientsError::NoRegion)?;
        let timeouts = timeouts(config.timeout_config());
        let mut ec2 = aws_sdk_ec2::config::Builder::from(config).timeout_config(timeouts.clone());
        let mut ssm = aws_sdk_ssm::config::Builder::from(config).timeout_config(timeouts.clone());
        let mut iam = aws_sdk_iam::config::Builder::from(config).timeout_config(timeouts.clone());
        let mut eks = aws_sdk_eks::config::Builder::from(config).timeout_config(timeouts.clone());
        let mut pricing = aws_sdk_pricing::config::Builder::from(config)
            .region(aws_sdk_pricing::config::Region::new(
                pricing_endpoint_region(&region),
            ))
            .timeout_config(timeouts);
        for interceptor in interceptors {
            ec2.push_interceptor(interceptor.clone());
            ssm.push_interceptor(interceptor.clone());
            iam.push_interceptor(interceptor.clone());
            eks.push_interceptor(interceptor.clone());
            pricing.push_interceptor(interceptor.clone());
        }
        Ok(AwsClients {
            region,
            ec2: aws_sdk_ec2::Client::from_conf(ec2.build()),
            ssm: aws_sdk_ssm::Client::from_conf(ssm.build()),
            iam: aws_sdk_iam::Client::from_conf(iam.build()),
            eks: aws_sdk_eks::Client::from_conf(eks.build()),
            pricing: aws_sdk_pricing::Client::from_conf(pricing.build()),
        })
    }
}

#[cfg(test)]
mod timeout_tests {
    use super::*;

    #[test]
    fn every_call_has_an_attempt_and_an_operation_timeout_unless_the_config_names_its_own() {
        let defaults = timeouts(None);
        assert_eq!(defaults.operation_attempt_timeout(), Some(ATTEMPT_TIMEOUT));
        assert_eq!(defaults.operation_timeout(), Some(OPERATION_TIMEOUT));
        let given = TimeoutConfig::builder()
            .connect_timeout(Duration::from_secs(1))
            .operation_attempt_timeout(Duration::from_secs(2))
            .build();
        let merged = timeouts(Some(&given));
        assert_eq!(merged.connect_timeout(), Some(Duration::from_secs(1)));
        assert_eq!(
            merged.operation_attempt_timeout(),
            Some(Duration::from_secs(2))
        );
        assert_eq!(merged.operation_timeout(), Some(OPERATION_TIMEOUT));
    }
}
