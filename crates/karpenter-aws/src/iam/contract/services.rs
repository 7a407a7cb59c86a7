//! Non-EC2 calls: IAM (PassRole, instance profiles), EKS, SSM, pricing, SQS and ARC zonal shift.

use super::{Access, Call, Feature, PROFILE_TAGS, Sid, Tags};

const NONE: Tags = &[];

const PROFILE_PATTERN: &str = "arn:{partition}:iam::{account}:instance-profile/*";
const PROFILE_SAMPLE: &str = "arn:{partition}:iam::{account}:instance-profile/karpenter/{region}/{cluster}/6f1b0c4e-2b7a-4f3e-9a51-0d3c8e7b1a22/{cluster}_4817355417427345386";

fn call(
    action: &'static str,
    pattern: &'static str,
    sample: &'static str,
    sid: Sid,
    feature: Feature,
    access: Access,
    caller: &'static str,
) -> Call {
    Call {
        api: action,
        action,
        variant: "default".into(),
        resource_pattern: pattern,
        resource_sample: sample,
        request_tags: NONE,
        resource_tags: NONE,
        creates: false,
        context: NONE,
        sid,
        feature,
        access,
        caller,
    }
}

pub(super) fn calls() -> Vec<Call> {
    use Access::{Read, Write};
    use Feature::{Core, Interruption, ZonalShift};
    let mut out = Vec::new();

    let mut pass = call(
        "iam:PassRole",
        "{node_role_arn}",
        "{node_role_arn}",
        Sid::AllowPassingInstanceRole,
        Core,
        Write,
        "instance launch (the instance profile's role is passed to EC2); AddRoleToInstanceProfile",
    );
    pass.context = &[("iam:PassedToService", "{ec2_principal}")];
    out.push(pass);

    let mut create = call(
        "iam:CreateInstanceProfile",
        PROFILE_PATTERN,
        PROFILE_SAMPLE,
        Sid::AllowScopedInstanceProfileCreationActions,
        Core,
        Write,
        "EC2NodeClass instance profile reconciler (spec.role set): new profile under /karpenter/<region>/<cluster>/<uid>/",
    );
    create.request_tags = PROFILE_TAGS;
    create.creates = true;
    out.push(create);

    let mut tag = call(
        "iam:TagInstanceProfile",
        PROFILE_PATTERN,
        PROFILE_SAMPLE,
        Sid::AllowScopedInstanceProfileTagActions,
        Core,
        Write,
        "implicit: CreateInstanceProfile with Tags is also authorized as TagInstanceProfile",
    );
    tag.api = "iam:CreateInstanceProfile (with Tags)";
    tag.request_tags = PROFILE_TAGS;
    tag.resource_tags = PROFILE_TAGS;
    tag.creates = true;
    out.push(tag);

    for (action, caller) in [
        (
            "iam:AddRoleToInstanceProfile",
            "instance profile reconciler: attach spec.role (also needs iam:PassRole on it)",
        ),
        (
            "iam:RemoveRoleFromInstanceProfile",
            "instance profile reconciler: detach a previous role; profile deletion",
        ),
        (
            "iam:DeleteInstanceProfile",
            "instance profile GC (every 30m), EC2NodeClass finalizer, cleanup after a failed create",
        ),
    ] {
        let mut c = call(
            action,
            PROFILE_PATTERN,
            PROFILE_SAMPLE,
            Sid::AllowScopedInstanceProfileActions,
            Core,
            Write,
            caller,
        );
        c.resource_tags = PROFILE_TAGS;
        out.push(c);
    }

    out.push(call(
        "iam:GetInstanceProfile",
        PROFILE_PATTERN,
        PROFILE_SAMPLE,
        Sid::AllowInstanceProfileReadActions,
        Core,
        Read,
        "instance profile reconciler: current role of the status profile (cached 15m)",
    ));
    out.push(call(
        "iam:ListInstanceProfiles",
        "*",
        "arn:{partition}:iam::{account}:instance-profile/karpenter/{region}/{cluster}/",
        Sid::AllowUnscopedInstanceProfileListAction,
        Core,
        Read,
        "instance profile GC and EC2NodeClass finalizer (PathPrefix /karpenter/<region>/<cluster>/)",
    ));

    out.push(call(
        "eks:DescribeCluster",
        "arn:{partition}:eks:{region}:{account}:cluster/{cluster}",
        "arn:{partition}:eks:{region}:{account}:cluster/{cluster}",
        Sid::AllowAPIServerEndpointDiscovery,
        Core,
        Read,
        "cluster endpoint discovery (CLUSTER_ENDPOINT unset), cluster CIDR for AL2023 user data, EKS version",
    ));

    out.push(call(
        "ssm:GetParameter",
        "arn:{partition}:ssm:{region}::parameter/aws/service/*",
        "arn:{partition}:ssm:{region}::parameter/aws/service/eks/optimized-ami/1.32/amazon-linux-2023/x86_64/standard/recommended/image_id",
        Sid::AllowSSMReadActions,
        Core,
        Read,
        "AMI alias resolution through public SSM parameters (cached 24h)",
    ));

    out.push(call(
        "pricing:GetProducts",
        "*",
        "*",
        Sid::AllowPricingReadActions,
        Core,
        Read,
        "pricing controller: on-demand prices (every 12h; skipped in isolated VPCs and GovCloud)",
    ));

    for (action, access, caller) in [
        (
            "sqs:DeleteMessage",
            Write,
            "interruption controller: delete a handled message",
        ),
        (
            "sqs:GetQueueUrl",
            Read,
            "interruption controller: resolve INTERRUPTION_QUEUE",
        ),
        (
            "sqs:ReceiveMessage",
            Read,
            "interruption controller: long-poll the queue",
        ),
    ] {
        out.push(call(
            action,
            "{queue_arn}",
            "{queue_arn}",
            Sid::AllowInterruptionQueueActions,
            Interruption,
            access,
            caller,
        ));
    }

    let mut zonal = call(
        "arc-zonal-shift:GetManagedResource",
        "*",
        "arn:{partition}:eks:{region}:{account}:cluster/{cluster}",
        Sid::AllowZonalShiftStatusReadOnly,
        ZonalShift,
        Read,
        "zonal shift controller (every 30s) and its start-up validation",
    );
    zonal.context = &[(
        "arc-zonal-shift:ResourceIdentifier",
        "arn:{partition}:eks:{region}:{account}:cluster/{cluster}",
    )];
    out.push(zonal);
    out
}
