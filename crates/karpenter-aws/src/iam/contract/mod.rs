//! The IAM call contract: every AWS operation the controller performs, as data.
//!
//! One [`Call`] is one authorization request AWS makes when the controller calls an API: an
//! action on one resource ARN, with the request tags, resource tags and other context keys it
//! carries. An API that IAM authorizes on several resources (CreateFleet touches the fleet, the
//! instances, volumes, ENIs, the launch template, the image, subnets, ...) or that the policy
//! treats differently by context (CreateTags while creating vs. after launch) has one entry per
//! variant. Each call names the statement ([`Sid`]) of the generated policy that grants it, and
//! each statement's conditions live in [`grants`]: the generator builds Action and Resource
//! lists from the calls and derived condition values (`ec2:CreateAction`, `aws:TagKeys`) from
//! what the calls carry, so nothing is typed twice.
//!
//! Source: `karpenter-aws.md` sections 1.9, 2, 4, 5 and 7 (upstream v1.14 behaviour).
//! Deliberately absent: `ec2:DescribeAvailabilityZones` (upstream stopped calling it; the current
//! template does not grant it), `iam:GetRole`, `sqs:SendMessage`, `iam:CreateServiceLinkedRole`
//! (the spot service-linked role must pre-exist).

mod ec2;
pub mod grants;
mod services;

use std::fmt;

use serde::Serialize;

use super::eval::Request;
use super::scope::Scope;

/// When the controller makes a call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Feature {
    /// Always (launch, termination, discovery, instance profiles, pricing).
    Core,
    /// Only with `INTERRUPTION_QUEUE` set (`settings.interruptionQueue`).
    Interruption,
    /// Only with `ENABLE_ZONAL_SHIFT=true`.
    ZonalShift,
}

impl Feature {
    pub const ALL: &'static [Feature] =
        &[Feature::Core, Feature::Interruption, Feature::ZonalShift];

    pub fn name(self) -> &'static str {
        match self {
            Feature::Core => "core",
            Feature::Interruption => "interruption",
            Feature::ZonalShift => "zonal-shift",
        }
    }

    /// The setting that turns the feature on, for messages.
    pub fn setting(self) -> Option<&'static str> {
        match self {
            Feature::Core => None,
            Feature::Interruption => Some("INTERRUPTION_QUEUE is set"),
            Feature::ZonalShift => Some("ENABLE_ZONAL_SHIFT=true"),
        }
    }
}

impl fmt::Display for Feature {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The managed policies upstream's template splits the controller policy into (since v1.9).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub enum PolicyGroup {
    NodeLifecycle,
    IamIntegration,
    EksIntegration,
    Interruption,
    ResourceDiscovery,
    ZonalShift,
}

impl PolicyGroup {
    pub const ALL: &'static [PolicyGroup] = &[
        PolicyGroup::NodeLifecycle,
        PolicyGroup::IamIntegration,
        PolicyGroup::EksIntegration,
        PolicyGroup::Interruption,
        PolicyGroup::ResourceDiscovery,
        PolicyGroup::ZonalShift,
    ];

    /// `KarpenterController<Group>Policy`; the template appends `-<cluster>`.
    pub fn policy_name(self) -> &'static str {
        match self {
            PolicyGroup::NodeLifecycle => "KarpenterControllerNodeLifecyclePolicy",
            PolicyGroup::IamIntegration => "KarpenterControllerIAMIntegrationPolicy",
            PolicyGroup::EksIntegration => "KarpenterControllerEKSIntegrationPolicy",
            PolicyGroup::Interruption => "KarpenterControllerInterruptionPolicy",
            PolicyGroup::ResourceDiscovery => "KarpenterControllerResourceDiscoveryPolicy",
            PolicyGroup::ZonalShift => "KarpenterControllerZonalShiftPolicy",
        }
    }
}

macro_rules! sids {
    ($($name:ident => $group:ident),* $(,)?) => {
        /// The statements of the generated controller policy, in output order (the Sids of
        /// upstream's current getting-started template).
        #[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
        pub enum Sid { $($name),* }

        impl Sid {
            pub const ALL: &'static [Sid] = &[$(Sid::$name),*];

            pub fn name(self) -> &'static str {
                match self { $(Sid::$name => stringify!($name)),* }
            }

            pub fn group(self) -> PolicyGroup {
                match self { $(Sid::$name => PolicyGroup::$group),* }
            }
        }
    };
}

sids!(
    AllowScopedEC2InstanceAccessActions => NodeLifecycle,
    AllowScopedEC2LaunchTemplateAccessActions => NodeLifecycle,
    AllowScopedEC2InstanceActionsWithTags => NodeLifecycle,
    AllowScopedResourceCreationTagging => NodeLifecycle,
    AllowScopedResourceTagging => NodeLifecycle,
    AllowScopedDeletion => NodeLifecycle,
    AllowPassingInstanceRole => IamIntegration,
    AllowScopedInstanceProfileCreationActions => IamIntegration,
    AllowScopedInstanceProfileTagActions => IamIntegration,
    AllowScopedInstanceProfileActions => IamIntegration,
    AllowInstanceProfileReadActions => IamIntegration,
    AllowUnscopedInstanceProfileListAction => IamIntegration,
    AllowAPIServerEndpointDiscovery => EksIntegration,
    AllowInterruptionQueueActions => Interruption,
    AllowRegionalReadActions => ResourceDiscovery,
    AllowSSMReadActions => ResourceDiscovery,
    AllowPricingReadActions => ResourceDiscovery,
    AllowZonalShiftStatusReadOnly => ZonalShift,
);

impl fmt::Display for Sid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Whether a call only reads or changes something (probes and notes use it).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Access {
    Read,
    Write,
}

/// Tags as `(key, value)` templates.
pub type Tags = &'static [(&'static str, &'static str)];

/// One authorization request the controller causes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Call {
    /// The API operation the controller calls (`ec2:CreateFleet`).
    pub api: &'static str,
    /// The IAM action authorized (`ec2:RunInstances` when CreateFleet launches on our behalf).
    pub action: &'static str,
    /// What distinguishes this entry from others with the same action (`instance`,
    /// `on-create:CreateFleet:fleet`, `after-launch`); unique per action.
    pub variant: String,
    /// The resource pattern the generated policy grants (templated).
    pub resource_pattern: &'static str,
    /// A concrete resource ARN of the kind the call touches (templated), for evaluation.
    pub resource_sample: &'static str,
    /// Tags the request creates (`aws:RequestTag/<k>`, `aws:TagKeys`).
    pub request_tags: Tags,
    /// Tags the target resource already carries (`aws:ResourceTag/<k>`).
    pub resource_tags: Tags,
    /// Whether the call creates the resource (the request tags become its tags), as opposed to
    /// using or changing an existing one.
    pub creates: bool,
    /// Other single-valued context keys (`ec2:CreateAction`, `aws:RequestedRegion`, ...).
    pub context: Tags,
    pub sid: Sid,
    pub feature: Feature,
    pub access: Access,
    /// Which controller makes the call, and why.
    pub caller: &'static str,
}

impl Call {
    /// `ec2:CreateFleet/instance`.
    pub fn id(&self) -> String {
        format!("{}/{}", self.action, self.variant)
    }

    /// The request this call makes in a scope (the scope's account must be concrete for the
    /// ARNs to be realistic).
    pub fn request(&self, scope: &Scope) -> Request {
        let mut req = ambient(
            Request::new(self.action, scope.render(self.resource_sample)),
            scope,
        );
        for (k, v) in self.request_tags {
            req = req.with_request_tag(&scope.render(k), &scope.render(v));
        }
        for (k, v) in self.resource_tags {
            req = req.with_resource_tag(&scope.render(k), &scope.render(v));
        }
        for (k, v) in self.context {
            req = req.with(scope.render(k), scope.render(v));
        }
        req
    }
}

/// Adds the global context keys every request carries: `aws:RequestedRegion` (the endpoint's
/// region: the scope's region, IAM's global region, or the pricing endpoint), `aws:SecureTransport`
/// and, when the account is concrete, `aws:PrincipalAccount`.
pub fn ambient(req: Request, scope: &Scope) -> Request {
    let service = req.action.split(':').next().unwrap_or_default();
    let region = match service {
        "iam" => match scope.partition.as_str() {
            "aws-cn" => "cn-north-1".to_string(),
            "aws-us-gov" => "us-gov-west-1".to_string(),
            _ => "us-east-1".to_string(),
        },
        "pricing" => pricing_endpoint_region(&scope.region).to_string(),
        _ => scope.region.clone(),
    };
    let mut req = req
        .with("aws:RequestedRegion", region)
        .with("aws:SecureTransport", "true");
    if scope.account.len() == 12 && scope.account.bytes().all(|b| b.is_ascii_digit()) {
        req = req.with("aws:PrincipalAccount", scope.account.clone());
    }
    req
}

/// The region of the pricing endpoint the controller uses for a cluster region.
pub fn pricing_endpoint_region(region: &str) -> &'static str {
    if region.starts_with("ap-") {
        "ap-south-1"
    } else if region.starts_with("cn-") {
        "cn-northwest-1"
    } else if region.starts_with("eu-") {
        "eu-central-1"
    } else {
        "us-east-1"
    }
}

/// Tags every launched resource carries (launch template, instance, volume, ENI, fleet, spot
/// request): `utils.GetTags` without the user's `spec.tags`.
pub const LAUNCH_TAGS: Tags = &[
    ("kubernetes.io/cluster/{cluster}", "owned"),
    ("karpenter.sh/nodepool", "default"),
    ("eks:eks-cluster-name", "{cluster}"),
    ("karpenter.k8s.aws/ec2nodeclass", "default"),
];

/// Tags of the instance profiles the controller creates.
pub const PROFILE_TAGS: Tags = &[
    ("kubernetes.io/cluster/{cluster}", "owned"),
    ("eks:eks-cluster-name", "{cluster}"),
    ("karpenter.k8s.aws/ec2nodeclass", "default"),
    ("topology.kubernetes.io/region", "{region}"),
];

/// EC2 resource types in the order generated statements list them.
pub fn ec2_resource_order() -> &'static [&'static str] {
    ec2::RESOURCE_ORDER
}

/// The whole contract, in a stable order (EC2, then IAM, EKS, SSM, pricing, SQS, ARC).
pub fn calls() -> Vec<Call> {
    let mut out = ec2::calls();
    out.extend(services::calls());
    out
}

/// The contract entry a recorded request belongs to: same action and a resource inside the
/// entry's pattern. For checking a provider's real calls against the contract.
pub fn find<'a>(
    calls: &'a [Call],
    scope: &Scope,
    action: &str,
    resource: &str,
) -> Option<&'a Call> {
    calls.iter().find(|c| {
        c.action.eq_ignore_ascii_case(action)
            && super::eval::wildcard::Pattern::glob(&scope.render(c.resource_pattern))
                .matches(resource, false)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    #[test]
    fn call_ids_are_unique() {
        let calls = calls();
        let ids: BTreeSet<String> = calls.iter().map(Call::id).collect();
        assert_eq!(ids.len(), calls.len());
    }

    #[test]
    fn every_sid_grants_at_least_one_call() {
        let calls = calls();
        for sid in Sid::ALL {
            assert!(calls.iter().any(|c| c.sid == *sid), "{sid} grants nothing");
        }
    }

    #[test]
    fn every_sample_resource_lies_inside_its_pattern() {
        let scope = Scope::new("demo", "us-west-2", None)
            .unwrap()
            .with_account("111122223333")
            .unwrap();
        for c in calls() {
            let req = c.request(&scope);
            assert_eq!(
                find(std::slice::from_ref(&c), &scope, c.action, &req.resource).map(Call::id),
                Some(c.id()),
                "{}",
                req.resource
            );
        }
    }
}
