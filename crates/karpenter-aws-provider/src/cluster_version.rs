//! The cluster's Kubernetes version as EKS reports it (`EKS_CONTROL_PLANE=true`): upstream's
//! version provider asks `eks:DescribeCluster` instead of the API server, for clusters whose
//! API server's version string is not the EKS version (a proxy, a managed control plane that
//! reports its own build). The answer picks the AMI aliases' SSM parameters.

use crate::clients::AwsClients;
use crate::error::AwsError;

const DESCRIBE_CLUSTER: &str = "eks:DescribeCluster";

/// `cluster.version` of `cluster_name` (`1.33`). A cluster without a version is an error
/// naming the call: nothing can resolve an AMI alias without one.
pub async fn eks_kubernetes_version(
    clients: &AwsClients,
    cluster_name: &str,
) -> Result<String, AwsError> {
    let out = clients
        .eks
        .describe_cluster()
        .name(cluster_name)
        .send()
        .await
        .map_err(|e| AwsError::from_sdk(DESCRIBE_CLUSTER, &e))?;
    out.cluster()
        .and_then(|c| c.version())
        .filter(|v| !v.is_empty())
        .map(str::to_owned)
        .ok_or_else(|| {
            AwsError::new(
                DESCRIBE_CLUSTER,
                "NoVersion",
                format!("cluster {cluster_name} has no Kubernetes version"),
            )
        })
}
