//! Every call the loops make to the cloud provider, timed and counted in one place (upstream's
//! `cloudprovider/metrics` decorator): `karpenter_cloudprovider_duration_seconds{controller,
//! method,provider}` and `karpenter_cloudprovider_errors_total{controller,method,provider,error,
//! nodepool}`, with upstream's method names (`Create`, `Delete`, `Get`, `List`,
//! `GetInstanceTypes`, `IsDrifted`) and error categories. `controller` is the loop whose step
//! made the call ([`super::context::current_controller`]).
//!
//! [`MeteredCloud`] wraps the cloud the loops share (the controllers' [`super::Context`]); it
//! dereferences to the provider, so a loop that needs the provider's own methods (the EC2NodeClass
//! resolution, the simulated cloud's registrations) still reaches them.

use std::future::Future;
use std::ops::Deref;
use std::sync::Arc;
use std::time::Instant;

use karpenter_api::labels;
use karpenter_api::v1::{NodeClaim, NodePool};
use karpenter_cloud::{
    CloudError, CloudProvider, DriftReason, InstanceTypeInfo, NodeClasses, OfferingRef,
};

use super::context::current_controller;
use crate::report::metrics::ControllerMetrics;

/// A cloud provider whose calls are timed and counted.
#[derive(Debug)]
pub struct MeteredCloud<C> {
    inner: Arc<C>,
    metrics: ControllerMetrics,
}

impl<C> MeteredCloud<C> {
    pub fn new(inner: Arc<C>, metrics: ControllerMetrics) -> Self {
        MeteredCloud { inner, metrics }
    }

    /// The provider itself (its calls are not counted).
    pub fn inner(&self) -> &Arc<C> {
        &self.inner
    }
}

impl<C> Deref for MeteredCloud<C> {
    type Target = C;

    fn deref(&self) -> &C {
        &self.inner
    }
}

/// Upstream's `error` label of a failed call (`GetErrorTypeLabelValue`).
pub fn error_label(error: &CloudError) -> &'static str {
    match error {
        CloudError::InsufficientCapacity { .. } => "InsufficientCapacityError",
        CloudError::NodeClaimNotFound { .. } => "NodeClaimNotFoundError",
        CloudError::NodeClassNotReady { .. } => "NodeClassNotReadyError",
        _ => "unknown",
    }
}

fn nodepool_of(claim: Option<&NodeClaim>) -> &str {
    claim
        .and_then(|c| c.metadata.labels.as_ref())
        .and_then(|l| l.get(labels::NODEPOOL))
        .map_or("", String::as_str)
}

impl<C: CloudProvider> MeteredCloud<C> {
    /// Times `call` as `method`; a failure is counted against `nodepool` (computed only then).
    async fn measure<T>(
        &self,
        method: &'static str,
        call: impl Future<Output = Result<T, CloudError>>,
        nodepool: impl FnOnce(&Result<T, CloudError>) -> String,
    ) -> Result<T, CloudError> {
        let controller = current_controller();
        let started = Instant::now();
        let result = call.await;
        let provider = self.inner.name();
        self.metrics.cloudprovider_call(
            controller,
            method,
            provider,
            started.elapsed().as_secs_f64(),
        );
        if let Err(error) = &result {
            let pool = nodepool(&result);
            self.metrics.cloudprovider_error(
                controller,
                method,
                provider,
                error_label(error),
                &pool,
            );
        }
        result
    }
}

impl<C: CloudProvider> CloudProvider for MeteredCloud<C> {
    fn name(&self) -> &'static str {
        self.inner.name()
    }

    async fn create(&self, node_claim: &NodeClaim) -> Result<NodeClaim, CloudError> {
        self.measure("Create", self.inner.create(node_claim), |_| {
            nodepool_of(Some(node_claim)).to_owned()
        })
        .await
    }

    async fn delete(&self, node_claim: &NodeClaim) -> Result<(), CloudError> {
        self.measure("Delete", self.inner.delete(node_claim), |_| {
            nodepool_of(Some(node_claim)).to_owned()
        })
        .await
    }

    async fn reboot(&self, node_claim: &NodeClaim, operation_id: &str) -> Result<(), CloudError> {
        self.measure(
            "Reboot",
            self.inner.reboot(node_claim, operation_id),
            |_| nodepool_of(Some(node_claim)).to_owned(),
        )
        .await
    }

    async fn get(&self, provider_id: &str) -> Result<NodeClaim, CloudError> {
        // Upstream labels a failed Get with the NodeClaim it returned: none.
        self.measure("Get", self.inner.get(provider_id), |result| {
            nodepool_of(result.as_ref().ok()).to_owned()
        })
        .await
    }

    async fn list(&self) -> Result<Vec<NodeClaim>, CloudError> {
        // A listing covers every NodePool: no one NodePool to label.
        self.measure("List", self.inner.list(), |_| String::new())
            .await
    }

    async fn instance_types(
        &self,
        node_pool: &NodePool,
    ) -> Result<Vec<InstanceTypeInfo>, CloudError> {
        self.measure(
            "GetInstanceTypes",
            self.inner.instance_types(node_pool),
            |_| node_pool.metadata.name.clone().unwrap_or_default(),
        )
        .await
    }

    async fn is_drifted(&self, node_claim: &NodeClaim) -> Result<Option<DriftReason>, CloudError> {
        self.measure("IsDrifted", self.inner.is_drifted(node_claim), |_| {
            nodepool_of(Some(node_claim)).to_owned()
        })
        .await
    }

    fn mark_unavailable(&self, offerings: &[OfferingRef]) {
        self.inner.mark_unavailable(offerings);
    }

    fn mark_reservation_unavailable(&self, reservation_id: &str) {
        self.inner.mark_reservation_unavailable(reservation_id);
    }

    fn unavailable_offerings(&self) -> Vec<(OfferingRef, std::time::Duration)> {
        self.inner.unavailable_offerings()
    }

    fn catalog_version(&self) -> u64 {
        self.inner.catalog_version()
    }

    fn node_classes(&self) -> NodeClasses {
        self.inner.node_classes()
    }

    fn repair_policies(&self) -> Vec<karpenter_cloud::RepairPolicy> {
        self.inner.repair_policies()
    }

    async fn registration(
        &self,
        node_claim: &NodeClaim,
    ) -> Result<karpenter_cloud::Registration, CloudError> {
        self.inner.registration(node_claim).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http::Metrics;
    use crate::reconcile::context::CONTROLLER;

    /// A cloud whose every call fails as configured.
    #[derive(Debug)]
    struct Failing(CloudError);

    impl CloudProvider for Failing {
        fn name(&self) -> &'static str {
            "test"
        }
        async fn create(&self, _: &NodeClaim) -> Result<NodeClaim, CloudError> {
            Err(self.0.clone())
        }
        async fn delete(&self, _: &NodeClaim) -> Result<(), CloudError> {
            Err(self.0.clone())
        }
        async fn get(&self, _: &str) -> Result<NodeClaim, CloudError> {
            Err(self.0.clone())
        }
        async fn list(&self) -> Result<Vec<NodeClaim>, CloudError> {
            Ok(Vec::new())
        }
        async fn instance_types(&self, _: &NodePool) -> Result<Vec<InstanceTypeInfo>, CloudError> {
            Err(self.0.clone())
        }
        async fn is_drifted(&self, _: &NodeClaim) -> Result<Option<DriftReason>, CloudError> {
            Ok(None)
        }
        fn mark_unavailable(&self, _: &[OfferingRef]) {}
        fn repair_policies(&self) -> Vec<karpenter_cloud::RepairPolicy> {
            vec![karpenter_cloud::RepairPolicy::replace(
                "Ready",
                karpenter_cloud::ConditionStatus::False,
                "",
                std::time::Duration::from_secs(60),
            )]
        }
        fn catalog_version(&self) -> u64 {
            0
        }
    }

    fn claim() -> NodeClaim {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": "c", "labels": {"karpenter.sh/nodepool": "general"}},
            "spec": {"nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"}, "requirements": []}
        }))
        .expect("a NodeClaim")
    }

    #[tokio::test]
    async fn each_call_is_timed_and_each_failure_counted_under_the_calling_loop() {
        let registry = Metrics::new();
        let metrics = ControllerMetrics::register(&registry);
        let cloud = MeteredCloud::new(
            Arc::new(Failing(CloudError::InsufficientCapacity {
                node_claim: "c".into(),
                offerings: Vec::new(),
                message: "none".into(),
            })),
            metrics,
        );
        let created = CONTROLLER
            .scope("nodeclaim.lifecycle", cloud.create(&claim()))
            .await;
        assert!(created.is_err());
        assert!(cloud.list().await.is_ok());
        let text = registry.encode().expect("encodes");
        assert!(
            text.contains("karpenter_cloudprovider_duration_seconds_count{controller=\"nodeclaim.lifecycle\",method=\"Create\",provider=\"test\"} 1"),
            "{text}"
        );
        assert!(
            text.contains("karpenter_cloudprovider_duration_seconds_count{controller=\"\",method=\"List\",provider=\"test\"} 1"),
            "{text}"
        );
        assert!(
            text.contains("karpenter_cloudprovider_errors_total{controller=\"nodeclaim.lifecycle\",method=\"Create\",provider=\"test\",error=\"InsufficientCapacityError\",nodepool=\"general\"} 1"),
            "{text}"
        );
        assert!(
            !text.contains("method=\"List\",provider=\"test\",error"),
            "{text}"
        );
    }

    #[test]
    fn the_metered_cloud_passes_the_providers_repair_policies_through() {
        let registry = Metrics::new();
        let cloud = MeteredCloud::new(
            Arc::new(Failing(CloudError::NodeClaimNotFound { what: "x".into() })),
            ControllerMetrics::register(&registry),
        );
        let policies = cloud.repair_policies();
        assert_eq!(policies.len(), 1, "not the trait's default (none)");
        assert_eq!(policies[0].condition_type, "Ready");
    }

    #[test]
    fn errors_are_labelled_with_upstreams_categories() {
        assert_eq!(
            error_label(&CloudError::NodeClaimNotFound { what: "i".into() }),
            "NodeClaimNotFoundError"
        );
        assert_eq!(
            error_label(&CloudError::NodeClassNotReady {
                node_class: "d".into(),
                reason: "r".into()
            }),
            "NodeClassNotReadyError"
        );
        assert_eq!(
            error_label(&CloudError::Provider {
                operation: "x",
                message: "y".into(),
                retryable: true
            }),
            "unknown"
        );
    }
}
