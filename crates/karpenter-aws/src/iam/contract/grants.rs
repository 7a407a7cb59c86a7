//! The conditions of each generated statement.
//!
//! Actions and resources come from the calls that name the statement; the guards below say which
//! of the things those calls carry the statement insists on. Two guards take their values from
//! the calls themselves: [`Guard::CreateActions`] (the `ec2:CreateAction` values the calls carry)
//! and [`Guard::TagKeys`] (the tag keys the calls write).

use super::Sid;

/// One condition of a statement. Keys and values are templates (`{cluster}`, `{region}`, ...).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Guard {
    /// `StringEquals` (rendered as `StringLike` when the value contains a wildcard, e.g. an
    /// account of `*`).
    Equals(&'static str, &'static str),
    /// `StringLike`.
    Like(&'static str, &'static str),
    /// `StringEqualsIfExists`.
    EqualsIfExists(&'static str, &'static str),
    /// `StringEquals` with several allowed values.
    AnyOf(&'static str, &'static [&'static str]),
    /// `StringEquals ec2:CreateAction` = the create actions of the statement's calls.
    CreateActions,
    /// `ForAllValues:StringEquals aws:TagKeys` = the tag keys the statement's calls write.
    TagKeys,
}

const REQ_CLUSTER_OWNED: Guard =
    Guard::Equals("aws:RequestTag/kubernetes.io/cluster/{cluster}", "owned");
const REQ_CLUSTER_NAME: Guard = Guard::Equals("aws:RequestTag/eks:eks-cluster-name", "{cluster}");
const REQ_NODEPOOL: Guard = Guard::Like("aws:RequestTag/karpenter.sh/nodepool", "*");
const RES_CLUSTER_OWNED: Guard =
    Guard::Equals("aws:ResourceTag/kubernetes.io/cluster/{cluster}", "owned");
const RES_NODEPOOL: Guard = Guard::Like("aws:ResourceTag/karpenter.sh/nodepool", "*");
const REQ_REGION: Guard = Guard::Equals("aws:RequestTag/topology.kubernetes.io/region", "{region}");
const REQ_NODECLASS: Guard = Guard::Like("aws:RequestTag/karpenter.k8s.aws/ec2nodeclass", "*");
const RES_REGION: Guard =
    Guard::Equals("aws:ResourceTag/topology.kubernetes.io/region", "{region}");
const RES_NODECLASS: Guard = Guard::Like("aws:ResourceTag/karpenter.k8s.aws/ec2nodeclass", "*");

/// The guards of a statement.
pub fn guards(sid: Sid) -> &'static [Guard] {
    match sid {
        Sid::AllowScopedEC2InstanceAccessActions => &[],
        Sid::AllowScopedEC2LaunchTemplateAccessActions => &[RES_CLUSTER_OWNED, RES_NODEPOOL],
        Sid::AllowScopedEC2InstanceActionsWithTags => {
            &[REQ_CLUSTER_OWNED, REQ_CLUSTER_NAME, REQ_NODEPOOL]
        }
        Sid::AllowScopedResourceCreationTagging => &[
            REQ_CLUSTER_OWNED,
            REQ_CLUSTER_NAME,
            Guard::CreateActions,
            REQ_NODEPOOL,
        ],
        Sid::AllowScopedResourceTagging => &[
            RES_CLUSTER_OWNED,
            RES_NODEPOOL,
            Guard::EqualsIfExists("aws:RequestTag/eks:eks-cluster-name", "{cluster}"),
            Guard::TagKeys,
        ],
        Sid::AllowScopedDeletion => &[RES_CLUSTER_OWNED, RES_NODEPOOL],
        Sid::AllowPassingInstanceRole => &[Guard::AnyOf(
            "iam:PassedToService",
            &["ec2.amazonaws.com", "ec2.amazonaws.com.cn"],
        )],
        Sid::AllowScopedInstanceProfileCreationActions => &[
            REQ_CLUSTER_OWNED,
            REQ_CLUSTER_NAME,
            REQ_REGION,
            REQ_NODECLASS,
        ],
        Sid::AllowScopedInstanceProfileTagActions => &[
            RES_CLUSTER_OWNED,
            RES_REGION,
            REQ_CLUSTER_OWNED,
            REQ_CLUSTER_NAME,
            REQ_REGION,
            RES_NODECLASS,
            REQ_NODECLASS,
        ],
        Sid::AllowScopedInstanceProfileActions => &[RES_CLUSTER_OWNED, RES_REGION, RES_NODECLASS],
        Sid::AllowInstanceProfileReadActions => &[],
        Sid::AllowUnscopedInstanceProfileListAction => &[],
        Sid::AllowAPIServerEndpointDiscovery => &[],
        Sid::AllowInterruptionQueueActions => &[],
        Sid::AllowRegionalReadActions => &[Guard::Equals("aws:RequestedRegion", "{region}")],
        Sid::AllowSSMReadActions => &[],
        Sid::AllowPricingReadActions => &[],
        Sid::AllowZonalShiftStatusReadOnly => &[Guard::Equals(
            "arc-zonal-shift:ResourceIdentifier",
            "arn:{partition}:eks:{region}:{account}:cluster/{cluster}",
        )],
    }
}
