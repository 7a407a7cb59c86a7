//! EC2 calls: discovery, launch templates, fleet launches, tagging and deletion.

use super::{Access, Call, Feature, LAUNCH_TAGS, Sid, Tags};

/// An EC2 resource type: policy pattern and a concrete sample ARN.
struct Res {
    kind: &'static str,
    pattern: &'static str,
    sample: &'static str,
}

const IMAGE: Res = Res {
    kind: "image",
    pattern: "arn:{partition}:ec2:{region}::image/*",
    sample: "arn:{partition}:ec2:{region}::image/ami-0123456789abcdef0",
};
const SNAPSHOT: Res = Res {
    kind: "snapshot",
    pattern: "arn:{partition}:ec2:{region}::snapshot/*",
    sample: "arn:{partition}:ec2:{region}::snapshot/snap-0123456789abcdef0",
};
const SECURITY_GROUP: Res = Res {
    kind: "security-group",
    pattern: "arn:{partition}:ec2:{region}:*:security-group/*",
    sample: "arn:{partition}:ec2:{region}:{account}:security-group/sg-0123456789abcdef0",
};
const SUBNET: Res = Res {
    kind: "subnet",
    pattern: "arn:{partition}:ec2:{region}:*:subnet/*",
    sample: "arn:{partition}:ec2:{region}:{account}:subnet/subnet-0123456789abcdef0",
};
const CAPACITY_RESERVATION: Res = Res {
    kind: "capacity-reservation",
    pattern: "arn:{partition}:ec2:{region}:*:capacity-reservation/*",
    sample: "arn:{partition}:ec2:{region}:{account}:capacity-reservation/cr-0123456789abcdef0",
};
const PLACEMENT_GROUP: Res = Res {
    kind: "placement-group",
    pattern: "arn:{partition}:ec2:{region}:*:placement-group/*",
    sample: "arn:{partition}:ec2:{region}:{account}:placement-group/karpenter-pg",
};
const LAUNCH_TEMPLATE: Res = Res {
    kind: "launch-template",
    pattern: "arn:{partition}:ec2:{region}:*:launch-template/*",
    sample: "arn:{partition}:ec2:{region}:{account}:launch-template/lt-0123456789abcdef0",
};
const FLEET: Res = Res {
    kind: "fleet",
    pattern: "arn:{partition}:ec2:{region}:*:fleet/*",
    sample: "arn:{partition}:ec2:{region}:{account}:fleet/fleet-01234567-89ab-cdef-0123-456789abcdef",
};
const INSTANCE: Res = Res {
    kind: "instance",
    pattern: "arn:{partition}:ec2:{region}:*:instance/*",
    sample: "arn:{partition}:ec2:{region}:{account}:instance/i-0123456789abcdef0",
};
const VOLUME: Res = Res {
    kind: "volume",
    pattern: "arn:{partition}:ec2:{region}:*:volume/*",
    sample: "arn:{partition}:ec2:{region}:{account}:volume/vol-0123456789abcdef0",
};
const NETWORK_INTERFACE: Res = Res {
    kind: "network-interface",
    pattern: "arn:{partition}:ec2:{region}:*:network-interface/*",
    sample: "arn:{partition}:ec2:{region}:{account}:network-interface/eni-0123456789abcdef0",
};
const SPOT_REQUEST: Res = Res {
    kind: "spot-instances-request",
    pattern: "arn:{partition}:ec2:{region}:*:spot-instances-request/*",
    sample: "arn:{partition}:ec2:{region}:{account}:spot-instances-request/sir-0123abcd",
};

/// EC2 resource types in the order the generated statements list them.
pub(crate) const RESOURCE_ORDER: &[&str] = &[
    "image",
    "snapshot",
    "security-group",
    "subnet",
    "capacity-reservation",
    "placement-group",
    "fleet",
    "instance",
    "volume",
    "network-interface",
    "launch-template",
    "spot-instances-request",
];

/// Regional reads: no resource-level permissions, scoped by `aws:RequestedRegion`.
const READS: &[(&str, &str)] = &[
    (
        "ec2:DescribeCapacityReservations",
        "capacityreservation.List (EC2NodeClass capacityReservationSelectorTerms)",
    ),
    (
        "ec2:DescribeImages",
        "amifamily AMI resolution for EC2NodeClass amiSelectorTerms",
    ),
    (
        "ec2:DescribeInstances",
        "instance Get/List (batched), nodeclaim tagging, placement-group registration hook, GC",
    ),
    (
        "ec2:DescribeInstanceStatus",
        "interruption instance-status poller (UnauthorizedOperation tolerated)",
    ),
    (
        "ec2:DescribeInstanceTypeOfferings",
        "instance type catalog: offerings per zone",
    ),
    (
        "ec2:DescribeInstanceTypes",
        "instance type catalog; EC2 connectivity check at start-up (DryRun)",
    ),
    (
        "ec2:DescribeLaunchTemplates",
        "launch template cache: ensure, hydrate at leader election, delete all (finalizer)",
    ),
    (
        "ec2:DescribePlacementGroups",
        "placement group resolution for EC2NodeClass placementGroupSelector",
    ),
    (
        "ec2:DescribeSecurityGroups",
        "securitygroup.List for EC2NodeClass securityGroupSelectorTerms",
    ),
    (
        "ec2:DescribeSpotPriceHistory",
        "pricing controller: spot prices (every 12h)",
    ),
    (
        "ec2:DescribeSubnets",
        "subnet.List for EC2NodeClass subnetSelectorTerms; available IP counts",
    ),
];

const REGION: Tags = &[("aws:RequestedRegion", "{region}")];
const NONE: Tags = &[];

fn call(
    api: &'static str,
    action: &'static str,
    variant: String,
    res: &Res,
    sid: Sid,
    access: Access,
    caller: &'static str,
) -> Call {
    Call {
        api,
        action,
        variant,
        resource_pattern: res.pattern,
        resource_sample: res.sample,
        request_tags: NONE,
        resource_tags: NONE,
        creates: false,
        context: NONE,
        sid,
        feature: Feature::Core,
        access,
        caller,
    }
}

pub(super) fn calls() -> Vec<Call> {
    let mut out = Vec::new();

    for (action, caller) in READS {
        out.push(Call {
            api: action,
            action,
            variant: "regional".into(),
            resource_pattern: "*",
            resource_sample: "*",
            request_tags: NONE,
            resource_tags: NONE,
            creates: false,
            context: REGION,
            sid: Sid::AllowRegionalReadActions,
            feature: Feature::Core,
            access: Access::Read,
            caller,
        });
    }

    // CreateFleet is authorized as ec2:CreateFleet and, because the fleet launches the instances
    // on the caller's behalf, as ec2:RunInstances on every resource. RunInstances is also called
    // directly, with DryRun, by EC2NodeClass validation.
    for (action, api, caller) in [
        (
            "ec2:RunInstances",
            "ec2:CreateFleet, ec2:RunInstances (DryRun)",
            "instance launch (CreateFleet launches on the caller's behalf); EC2NodeClass validation (RunInstances DryRun)",
        ),
        (
            "ec2:CreateFleet",
            "ec2:CreateFleet",
            "instance launch (instant CreateFleet, batched); EC2NodeClass validation (CreateFleet DryRun)",
        ),
    ] {
        for res in [
            &IMAGE,
            &SNAPSHOT,
            &SECURITY_GROUP,
            &SUBNET,
            &CAPACITY_RESERVATION,
            &PLACEMENT_GROUP,
        ] {
            // TagSpecifications are request-wide: every resource of the launch sees them.
            let mut c = call(
                api,
                action,
                res.kind.into(),
                res,
                Sid::AllowScopedEC2InstanceAccessActions,
                Access::Write,
                caller,
            );
            c.request_tags = LAUNCH_TAGS;
            out.push(c);
        }
        let mut lt = call(
            api,
            action,
            LAUNCH_TEMPLATE.kind.into(),
            &LAUNCH_TEMPLATE,
            Sid::AllowScopedEC2LaunchTemplateAccessActions,
            Access::Write,
            caller,
        );
        lt.resource_tags = LAUNCH_TAGS;
        lt.request_tags = LAUNCH_TAGS;
        out.push(lt);
        let created: &[&Res] = if action == "ec2:CreateFleet" {
            &[
                &FLEET,
                &INSTANCE,
                &VOLUME,
                &NETWORK_INTERFACE,
                &SPOT_REQUEST,
            ]
        } else {
            &[&INSTANCE, &VOLUME, &NETWORK_INTERFACE, &SPOT_REQUEST]
        };
        for res in created {
            let mut c = call(
                api,
                action,
                res.kind.into(),
                res,
                Sid::AllowScopedEC2InstanceActionsWithTags,
                Access::Write,
                caller,
            );
            c.request_tags = LAUNCH_TAGS;
            c.creates = true;
            out.push(c);
        }
    }

    let mut create_lt = call(
        "ec2:CreateLaunchTemplate",
        "ec2:CreateLaunchTemplate",
        LAUNCH_TEMPLATE.kind.into(),
        &LAUNCH_TEMPLATE,
        Sid::AllowScopedEC2InstanceActionsWithTags,
        Access::Write,
        "launch template provider (one per AMI/kubelet/network group; also EC2NodeClass validation)",
    );
    create_lt.request_tags = LAUNCH_TAGS;
    create_lt.creates = true;
    out.push(create_lt);

    // Tag-on-create: TagSpecifications are authorized as ec2:CreateTags with ec2:CreateAction.
    for (create_action, context, resources, caller) in [
        (
            "RunInstances",
            &[("ec2:CreateAction", "RunInstances")] as Tags,
            &[&INSTANCE, &VOLUME, &NETWORK_INTERFACE] as &[&Res],
            "EC2NodeClass validation (RunInstances DryRun with TagSpecifications)",
        ),
        (
            "CreateFleet",
            &[("ec2:CreateAction", "CreateFleet")],
            &[
                &FLEET,
                &INSTANCE,
                &VOLUME,
                &NETWORK_INTERFACE,
                &SPOT_REQUEST,
            ],
            "instance launch: CreateFleet TagSpecifications (instance, volume, fleet) and launch template TagSpecifications (network-interface, spot-instances-request)",
        ),
        (
            "CreateLaunchTemplate",
            &[("ec2:CreateAction", "CreateLaunchTemplate")],
            &[&LAUNCH_TEMPLATE],
            "launch template provider: TagSpecifications of the launch template",
        ),
    ] {
        for res in resources {
            let mut c = call(
                "ec2:CreateTags (tag on create)",
                "ec2:CreateTags",
                format!("on-create:{create_action}:{}", res.kind),
                res,
                Sid::AllowScopedResourceCreationTagging,
                Access::Write,
                caller,
            );
            c.request_tags = LAUNCH_TAGS;
            c.creates = true;
            c.context = context;
            out.push(c);
        }
    }

    // Tagging after launch (nodeclaim.tagging controller): only missing keys are written.
    let mut after = call(
        "ec2:CreateTags",
        "ec2:CreateTags",
        "after-launch".into(),
        &INSTANCE,
        Sid::AllowScopedResourceTagging,
        Access::Write,
        "nodeclaim tagging controller: Name and karpenter.sh/nodeclaim once the node name is known",
    );
    after.resource_tags = LAUNCH_TAGS;
    after.request_tags = &[
        ("Name", "ip-192-168-10-20.{region}.compute.internal"),
        ("karpenter.sh/nodeclaim", "default-x7k2p"),
    ];
    out.push(after);
    let mut backfill = call(
        "ec2:CreateTags",
        "ec2:CreateTags",
        "after-launch:eks-cluster-name".into(),
        &INSTANCE,
        Sid::AllowScopedResourceTagging,
        Access::Write,
        "nodeclaim tagging controller: backfills eks:eks-cluster-name on instances launched before it was a launch tag",
    );
    backfill.resource_tags = &[
        ("kubernetes.io/cluster/{cluster}", "owned"),
        ("karpenter.sh/nodepool", "default"),
        ("karpenter.k8s.aws/ec2nodeclass", "default"),
    ];
    backfill.request_tags = &[("eks:eks-cluster-name", "{cluster}")];
    out.push(backfill);

    for (action, res, caller) in [
        (
            "ec2:TerminateInstances",
            &INSTANCE,
            "CloudProvider.Delete (NodeClaim termination, batched); instance GC",
        ),
        (
            "ec2:RebootInstances",
            &INSTANCE,
            "CloudProvider.Reboot (node repair's in-place reboot, AWS gate RebootForRepair)",
        ),
        (
            "ec2:DeleteLaunchTemplate",
            &LAUNCH_TEMPLATE,
            "launch template cache eviction; EC2NodeClass finalizer",
        ),
    ] {
        let mut c = call(
            action,
            action,
            res.kind.into(),
            res,
            Sid::AllowScopedDeletion,
            Access::Write,
            caller,
        );
        c.resource_tags = LAUNCH_TAGS;
        out.push(c);
    }
    out
}
