//! Tags a registered instance with its Node's and NodeClaim's names (upstream's
//! `nodeclaim.tagging`): `Name`, `karpenter.sh/nodeclaim` and `eks:eks-cluster-name`, the
//! only keys the policy lets Karpenter add to a running instance.

use aws_sdk_ec2::types::Tag;

use crate::clients::AwsClients;
use crate::error::AwsError;

/// The tags a registered instance gets.
pub fn tags(node: &str, node_claim: &str, cluster: &str) -> [(&'static str, String); 3] {
    [
        ("Name", node.to_owned()),
        ("karpenter.sh/nodeclaim", node_claim.to_owned()),
        ("eks:eks-cluster-name", cluster.to_owned()),
    ]
}

/// Tags instance `id`; `Ok(false)` when the instance is gone.
pub async fn tag_instance(
    clients: &AwsClients,
    id: &str,
    node: &str,
    node_claim: &str,
    cluster: &str,
) -> Result<bool, AwsError> {
    let tags = tags(node, node_claim, cluster)
        .into_iter()
        .map(|(k, v)| Tag::builder().key(k).value(v).build())
        .collect();
    match clients
        .ec2
        .create_tags()
        .resources(id)
        .set_tags(Some(tags))
        .send()
        .await
    {
        Ok(_) => Ok(true),
        Err(error) => {
            let error = AwsError::from_sdk("ec2:CreateTags", &error);
            if error.is_not_found() {
                Ok(false)
            } else {
                Err(error)
            }
        }
    }
}
