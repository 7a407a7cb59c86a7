//! The NodeClaim tagging controller (`--cloud-provider aws`, upstream `nodeclaim.tagging`):
//! once a NodeClaim's Node has registered, its EC2 instance is tagged with the Node's name
//! (`Name`), the NodeClaim's (`karpenter.sh/nodeclaim`) and the cluster's
//! (`eks:eks-cluster-name`), and the NodeClaim is annotated `karpenter.k8s.aws/tagged: "true"`
//! and `compatibility.karpenter.k8s.aws/cluster-name-tagged: "true"` so it is done once.
//! One instance at a time (upstream: at most one call a second).

use std::time::Duration;

use karpenter_api::labels;
use karpenter_api::v1::NodeClaim;
use karpenter_aws_provider::AwsClients;
use kube::Client;
use serde_json::json;
use tokio_util::sync::CancellationToken;

use super::cache::ClusterCache;

/// How often the loop looks again without a change.
const RESYNC: Duration = Duration::from_secs(30);

/// The tagging loop.
pub struct Tagging {
    pub cache: ClusterCache,
    pub client: Client,
    pub clients: AwsClients,
    pub cluster: String,
}

/// A NodeClaim to tag: name, instance id, node name.
fn to_tag(claim: &NodeClaim) -> Option<(String, String, String)> {
    if claim.metadata.deletion_timestamp.is_some() {
        return None;
    }
    let annotations = claim.metadata.annotations.as_ref();
    if annotations
        .and_then(|a| a.get(labels::TAGGED))
        .is_some_and(|v| v == "true")
    {
        return None;
    }
    let status = claim.status.as_ref()?;
    let registered = karpenter_api::conditions::is_true(
        status.conditions.as_deref(),
        karpenter_api::v1::nodeclaim::conditions::REGISTERED,
    );
    if !registered {
        return None;
    }
    let id = karpenter_aws::interruption::provider_id::instance_id(status.provider_id.as_deref()?)?;
    Some((
        claim.metadata.name.clone()?,
        id.to_owned(),
        status.node_name.clone()?,
    ))
}

impl std::fmt::Debug for Tagging {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tagging")
            .field("cluster", &self.cluster)
            .finish_non_exhaustive()
    }
}

impl Tagging {
    pub async fn run(self, cancel: CancellationToken) {
        let mut changes = self.cache.changes(Duration::from_secs(1));
        loop {
            let pending: Vec<(String, String, String)> =
                self.cache.lock().node_claims().filter_map(to_tag).collect();
            for (claim, id, node) in pending {
                if cancel.is_cancelled() {
                    return;
                }
                match karpenter_aws_provider::tagging::tag_instance(
                    &self.clients,
                    &id,
                    &node,
                    &claim,
                    &self.cluster,
                )
                .await
                {
                    Ok(true) => {
                        let patch = json!({"metadata": {"annotations": {
                            labels::TAGGED: "true",
                            labels::CLUSTER_NAME_TAGGED: "true",
                        }}});
                        if let Err(error) = super::writes::patch_claim(
                            &self.client,
                            &self.cache,
                            &claim,
                            &patch,
                            false,
                            "annotating the tagged NodeClaim",
                        )
                        .await
                        {
                            tracing::warn!(%error, "retried next pass");
                        } else {
                            tracing::debug!(nodeclaim = %claim, instance = %id, "tagged the instance");
                        }
                    }
                    Ok(false) => {}
                    Err(error) => {
                        tracing::warn!(nodeclaim = %claim, instance = %id, %error, "tagging the instance failed; retried");
                    }
                }
            }
            tokio::select! {
                () = cancel.cancelled() => return,
                _ = changes.changed() => {}
                () = tokio::time::sleep(RESYNC) => {}
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn claim(registered: bool, tagged: bool) -> NodeClaim {
        let mut annotations = serde_json::Map::new();
        if tagged {
            annotations.insert(labels::TAGGED.into(), "true".into());
        }
        serde_json::from_value(json!({
            "apiVersion": "karpenter.sh/v1", "kind": "NodeClaim",
            "metadata": {"name": "c", "annotations": annotations},
            "spec": {"nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "d"},
                     "requirements": []},
            "status": {"providerID": "aws:///us-west-2a/i-0abc", "nodeName": "ip-10-0-0-1",
                       "conditions": [{"type": "Registered", "status": if registered {"True"} else {"Unknown"},
                                       "reason": "R", "message": "", "lastTransitionTime": "2026-01-01T00:00:00Z"}]}
        }))
        .unwrap_or_else(|e| panic!("{e}"))
    }

    #[test]
    fn a_registered_untagged_nodeclaim_is_tagged_once() {
        assert_eq!(
            to_tag(&claim(true, false)),
            Some(("c".into(), "i-0abc".into(), "ip-10-0-0-1".into()))
        );
        assert_eq!(to_tag(&claim(false, false)), None, "not registered yet");
        assert_eq!(to_tag(&claim(true, true)), None, "tagged already");
    }
}
