//! The AWS clients the provider calls, built from one SDK configuration.
//!
//! In a cluster the configuration comes from the SDK's default chain (IRSA or EKS Pod
//! Identity web identity, environment, instance metadata), with `AWS_ENDPOINT_URL` (and the
//! per-service `AWS_ENDPOINT_URL_<SERVICE>`) honoured, so the controller runs unchanged
//! against an emulator. Tests give their own configuration and interceptors (e.g. one that
//! records every call for the IAM contract check).

use std::time::{Duration, Instant};

use aws_config::timeout::TimeoutConfig;
use aws_config::{BehaviorVersion, SdkConfig};
use aws_sdk_ec2::config::SharedInterceptor;
use aws_smithy_runtime_api::box_error::BoxError;
use aws_smithy_runtime_api::client::interceptors::Intercept;
use aws_smithy_runtime_api::client::interceptors::context::{
    BeforeDeserializationInterceptorContextRef, BeforeSerializationInterceptorContextRef,
    BeforeTransmitInterceptorContextRef, FinalizerInterceptorContextRef,
};
use aws_smithy_runtime_api::client::orchestrator::Metadata;
use aws_smithy_runtime_api::client::runtime_components::RuntimeComponents;
use aws_smithy_types::config_bag::{ConfigBag, Storable, StoreReplace};

use crate::metrics::{SdkRequest, metrics};

/// The pricing endpoint region for a cluster region (upstream's mapping).
pub use karpenter_aws::pricing::pricing_endpoint_region;

/// EC2, SSM, IAM, EKS, Pricing and ARC zonal shift clients for one region.
#[derive(Debug, Clone)]
pub struct AwsClients {
    pub region: String,
    pub ec2: aws_sdk_ec2::Client,
    pub ssm: aws_sdk_ssm::Client,
    pub iam: aws_sdk_iam::Client,
    pub eks: aws_sdk_eks::Client,
    /// In the pricing endpoint's region ([`pricing_endpoint_region`]).
    pub pricing: aws_sdk_pricing::Client,
    /// Amazon Application Recovery Controller zonal shift (only with `ENABLE_ZONAL_SHIFT`).
    pub arc: aws_sdk_arczonalshift::Client,
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

/// The SDK's default chain (credentials, region, endpoints from the environment) over rustls
/// (ring); `region` overrides the chain's region.
pub async fn sdk_config(region: Option<String>) -> SdkConfig {
    use aws_smithy_http_client::tls::{Provider, rustls_provider::CryptoMode};
    let http = aws_smithy_http_client::Builder::new()
        .tls_provider(Provider::Rustls(CryptoMode::Ring))
        .build_https();
    let mut loader = aws_config::defaults(BehaviorVersion::latest()).http_client(http);
    if let Some(region) = region {
        loader = loader.region(aws_config::Region::new(region));
    }
    loader.load().await
}

impl AwsClients {
    /// Clients from the SDK's default chain, over rustls (ring).
    pub async fn from_env() -> Result<Self, ClientsError> {
        Self::from_env_with(&[]).await
    }

    /// [`AwsClients::from_env`], each client with `interceptors`.
    pub async fn from_env_with(interceptors: &[SharedInterceptor]) -> Result<Self, ClientsError> {
        Self::new(&sdk_config(None).await, interceptors)
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
            .timeout_config(timeouts.clone());
        let mut arc = aws_sdk_arczonalshift::config::Builder::from(config).timeout_config(timeouts);
        // Every request is counted and timed (`aws_sdk_go_request_*`).
        let interceptors =
            std::iter::once(SdkMetrics::interceptor()).chain(interceptors.iter().cloned());
        for interceptor in interceptors {
            ec2.push_interceptor(interceptor.clone());
            ssm.push_interceptor(interceptor.clone());
            iam.push_interceptor(interceptor.clone());
            eks.push_interceptor(interceptor.clone());
            pricing.push_interceptor(interceptor.clone());
            arc.push_interceptor(interceptor.clone());
        }
        Ok(AwsClients {
            region,
            ec2: aws_sdk_ec2::Client::from_conf(ec2.build()),
            ssm: aws_sdk_ssm::Client::from_conf(ssm.build()),
            iam: aws_sdk_iam::Client::from_conf(iam.build()),
            eks: aws_sdk_eks::Client::from_conf(eks.build()),
            pricing: aws_sdk_pricing::Client::from_conf(pricing.build()),
            arc: aws_sdk_arczonalshift::Client::from_conf(arc.build()),
        })
    }
}

/// Counts and times every request of the client it is attached to, in
/// [`crate::metrics::metrics`] (upstream's aws-sdk-go-prometheus: per request its service id,
/// action, attempts with their HTTP status, `-1` when no response came, and time on the wire,
/// and the whole request's time). Read hooks only: it never changes or fails a call.
#[derive(Debug, Clone, Copy, Default)]
pub struct SdkMetrics;

/// One request in flight: when it started, its attempts so far, the current attempt's send.
#[derive(Debug, Clone)]
struct InFlight {
    started: Instant,
    attempts: Vec<(i32, f64)>,
    sent: Option<Instant>,
    answered: Option<f64>,
}

impl Storable for InFlight {
    type Storer = StoreReplace<Self>;
}

impl SdkMetrics {
    /// The interceptor to attach to a client's config (any aws-sdk-* client).
    pub fn interceptor() -> SharedInterceptor {
        SharedInterceptor::new(SdkMetrics)
    }

    fn update(cfg: &mut ConfigBag, f: impl FnOnce(&mut InFlight)) {
        if let Some(mut in_flight) = cfg.load::<InFlight>().cloned() {
            f(&mut in_flight);
            cfg.interceptor_state().store_put(in_flight);
        }
    }
}

impl Intercept for SdkMetrics {
    fn name(&self) -> &'static str {
        "karpenter-aws-provider SdkMetrics"
    }

    fn read_before_execution(
        &self,
        _context: &BeforeSerializationInterceptorContextRef<'_>,
        cfg: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        cfg.interceptor_state().store_put(InFlight {
            started: Instant::now(),
            attempts: Vec::new(),
            sent: None,
            answered: None,
        });
        Ok(())
    }

    fn read_before_transmit(
        &self,
        _context: &BeforeTransmitInterceptorContextRef<'_>,
        _components: &RuntimeComponents,
        cfg: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        Self::update(cfg, |f| {
            f.sent = Some(Instant::now());
            f.answered = None;
        });
        Ok(())
    }

    fn read_after_transmit(
        &self,
        _context: &BeforeDeserializationInterceptorContextRef<'_>,
        _components: &RuntimeComponents,
        cfg: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        Self::update(cfg, |f| {
            f.answered = f.sent.map(|sent| sent.elapsed().as_secs_f64());
        });
        Ok(())
    }

    fn read_after_attempt(
        &self,
        context: &FinalizerInterceptorContextRef<'_>,
        _components: &RuntimeComponents,
        cfg: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        let status = context
            .response()
            .map_or(-1, |r| i32::from(r.status().as_u16()));
        Self::update(cfg, |f| {
            // On the wire from the send to the answer (or to the attempt's end, without one).
            let seconds = f.answered.take().unwrap_or_else(|| {
                f.sent
                    .take()
                    .map_or(0.0, |sent| sent.elapsed().as_secs_f64())
            });
            f.sent = None;
            f.attempts.push((status, seconds));
        });
        Ok(())
    }

    fn read_after_execution(
        &self,
        _context: &FinalizerInterceptorContextRef<'_>,
        _components: &RuntimeComponents,
        cfg: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        let Some(in_flight) = cfg.load::<InFlight>().cloned() else {
            return Ok(());
        };
        let (service, action) = cfg
            .load::<Metadata>()
            .map(|m| (m.service().to_owned(), m.name().to_owned()))
            .unwrap_or_default();
        metrics().sdk_request(&SdkRequest {
            service,
            action,
            attempts: in_flight.attempts,
            seconds: in_flight.started.elapsed().as_secs_f64(),
        });
        Ok(())
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

#[cfg(test)]
mod sdk_metrics_tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use aws_config::retry::RetryConfig;
    use aws_sdk_ec2::config::{Credentials, Region, SharedCredentialsProvider};
    use aws_smithy_runtime_api::client::http::{
        HttpConnector, HttpConnectorFuture, SharedHttpConnector, http_client_fn,
    };
    use aws_smithy_runtime_api::client::orchestrator::{HttpRequest, HttpResponse};
    use aws_smithy_types::body::SdkBody;
    use prometheus_client::encoding::text::encode;
    use prometheus_client::registry::Registry;

    use super::*;

    /// Answers 500 first, then an empty `DescribeAvailabilityZones`.
    #[derive(Debug, Default)]
    struct FlakyEc2(AtomicUsize);

    impl HttpConnector for FlakyEc2 {
        fn call(&self, _: HttpRequest) -> HttpConnectorFuture {
            let (status, body) = if self.0.fetch_add(1, Ordering::SeqCst) == 0 {
                (
                    500,
                    "<Response><Errors><Error><Code>InternalError</Code></Error></Errors></Response>",
                )
            } else {
                (
                    200,
                    "<DescribeAvailabilityZonesResponse><availabilityZoneInfo/></DescribeAvailabilityZonesResponse>",
                )
            };
            let response =
                HttpResponse::new(status.try_into().expect("a status"), SdkBody::from(body));
            HttpConnectorFuture::ready(Ok(response))
        }
    }

    #[tokio::test]
    async fn every_request_is_counted_with_its_attempts_under_the_sdks_service_id() {
        let connector = SharedHttpConnector::new(FlakyEc2::default());
        let config = SdkConfig::builder()
            .behavior_version(BehaviorVersion::latest())
            .region(Region::new("eu-north-7"))
            .credentials_provider(SharedCredentialsProvider::new(Credentials::for_tests()))
            .retry_config(RetryConfig::standard().with_initial_backoff(Duration::from_millis(1)))
            .http_client(http_client_fn(move |_, _| connector.clone()))
            .build();
        let clients = AwsClients::new(&config, &[]).expect("clients");
        clients
            .ec2
            .describe_availability_zones()
            .send()
            .await
            .expect("answered after a retry");
        let mut registry = Registry::default();
        metrics().register(&mut registry);
        let mut text = String::new();
        encode(&mut text, &registry).expect("encodes");
        let series = |name: &str, code: &str| {
            format!(
                "{name}{{service=\"EC2\",action=\"DescribeAvailabilityZones\",code=\"{code}\"}}"
            )
        };
        for line in [
            series("aws_sdk_go_request_total", "200"),
            series("aws_sdk_go_request_attempt_total", "500"),
            series("aws_sdk_go_request_attempt_total", "200"),
            series("aws_sdk_go_request_retry_count_sum", "200"),
            series("aws_sdk_go_request_attempt_duration_seconds_count", "200"),
        ] {
            assert!(text.contains(&line), "{line} in\n{text}");
        }
        assert!(
            text.contains(&format!(
                "{} 2",
                series("aws_sdk_go_request_attempt_duration_seconds_count", "200")
            )),
            "both attempts are timed under the request's status:\n{text}"
        );
    }
}
