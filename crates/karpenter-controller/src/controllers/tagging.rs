//! The NodeClaim tagging controller (`--cloud-provider aws`, upstream `nodeclaim.tagging`):
//! once a NodeClaim's Node has registered, its EC2 instance is tagged with the Node's name
//! (`Name`), the NodeClaim's (`karpenter.sh/nodeclaim`) and the cluster's
//! (`eks:eks-cluster-name`), and the NodeClaim is annotated `karpenter.k8s.aws/tagged: "true"`
//! and `compatibility.karpenter.k8s.aws/cluster-name-tagged: "true"` so it is done once.
//! One instance at a time (upstream: at most one call a second).

use std::time::Duration;

use chrono::{DateTime, Utc};
use karpenter_api::labels;
use karpenter_api::v1::NodeClaim;
use karpenter_aws_provider::AwsClients;
use karpenter_state::Cluster;
use serde_json::json;

use crate::cluster::writes::WriteError;
use crate::reconcile::{Action, Busy, Context, Reconciler, Retry, Scan, Shape};

/// How often the loop looks again without a change.
const RESYNC: Duration = Duration::from_secs(30);

/// The tagging loop.
#[derive(Debug)]
pub struct Tagging<C> {
    pub ctx: Context<C>,
    pub clients: AwsClients,
}

/// Tag the instance of a NodeClaim.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tag {
    pub claim: String,
    pub instance: String,
    pub node: String,
}

/// Tagging failed.
#[derive(Debug, thiserror::Error)]
pub enum TagError {
    #[error("tagging instance {instance} of nodeclaim {claim}: {source}")]
    Ec2 {
        claim: String,
        instance: String,
        #[source]
        source: karpenter_aws_provider::AwsError,
    },
    #[error(transparent)]
    Write(#[from] WriteError),
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

impl<C: Send + Sync + 'static> Reconciler for Tagging<C> {
    type Step = Tag;
    type Error = TagError;
    const NAME: &'static str = "nodeclaim.tagging";

    fn shape(&self) -> Shape {
        Shape::new(Duration::from_secs(1), RESYNC)
    }

    fn scan(&self, cluster: &Cluster, _: DateTime<Utc>, busy: Busy<'_>) -> Scan<Tag> {
        let mut scan = Scan::new();
        for (claim, instance, node) in cluster.node_claims().filter_map(to_tag) {
            if !busy.contains(&claim) {
                scan.step(
                    claim.clone(),
                    Tag {
                        claim,
                        instance,
                        node,
                    },
                );
            }
        }
        scan
    }

    async fn execute(&self, tag: Tag) -> Result<Action, TagError> {
        let tagged = karpenter_aws_provider::tagging::tag_instance(
            &self.clients,
            &tag.instance,
            &tag.node,
            &tag.claim,
            &self.ctx.settings.cluster_name,
        )
        .await
        .map_err(|source| TagError::Ec2 {
            claim: tag.claim.clone(),
            instance: tag.instance.clone(),
            source,
        })?;
        if tagged {
            self.ctx
                .writer()
                .merge_metadata::<NodeClaim>(
                    &tag.claim,
                    json!({"annotations": {
                        labels::TAGGED: "true",
                        labels::CLUSTER_NAME_TAGGED: "true",
                    }}),
                    "annotating the tagged NodeClaim",
                )
                .await?;
            tracing::debug!(nodeclaim = %tag.claim, instance = %tag.instance, "tagged the instance");
        }
        Ok(Action::AwaitChange)
    }

    fn error_policy(&self, error: &TagError) -> Retry {
        match error {
            TagError::Write(error) => error.retry(),
            TagError::Ec2 { .. } => Retry::Backoff,
        }
    }

    fn step_name(_: &Tag) -> &'static str {
        "tag"
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
