//! aws-sdk-rust against the moto emulator: the calls karpenter makes work end to end.

use aws_sdk_ec2::types::{
    DefaultTargetCapacityType, Filter, FleetLaunchTemplateConfigRequest,
    FleetLaunchTemplateOverridesRequest, FleetLaunchTemplateSpecificationRequest, FleetType,
    InstanceType, RequestLaunchTemplateData, ResourceType, Tag, TagSpecification,
    TargetCapacitySpecificationRequest,
};
use karpenter_aws::iam::Scope;
use karpenter_aws::iam::generate::controller_policy;
use karpenter_aws::iam::recorded::{Problem, check};
use karpenter_testenv::{AwsEnv, CallRecorder, dns_name};

fn unique(name: &str) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or_default();
    dns_name(&format!("{name}-{}-{nanos:08x}", std::process::id()))
}

async fn al2023_image(aws: &AwsEnv) -> String {
    aws.ssm()
        .get_parameter()
        .name("/aws/service/eks/optimized-ami/1.36/amazon-linux-2023/x86_64/standard/recommended/image_id")
        .send()
        .await
        .expect("reading the seeded AL2023 parameter")
        .parameter
        .and_then(|p| p.value)
        .expect("a parameter value")
}

#[tokio::test]
#[ignore = "needs the AWS emulator: run scripts/test-integration"]
async fn describe_instance_types_returns_the_ec2_catalog() {
    let (aws, _shared) = AwsEnv::shared().await.expect("finding the emulator");
    let mut pages = aws.ec2().describe_instance_types().into_paginator().send();
    let mut types = Vec::new();
    while let Some(page) = pages.next().await {
        let page = page.expect("a DescribeInstanceTypes page");
        types.extend(page.instance_types.unwrap_or_default());
    }
    assert!(
        types.len() > 500,
        "expected the full catalog, got {} types",
        types.len()
    );
    let m5 = types
        .iter()
        .find(|t| t.instance_type == Some(InstanceType::M5Large))
        .expect("m5.large is in the catalog");
    assert_eq!(
        m5.v_cpu_info.as_ref().and_then(|v| v.default_v_cpus),
        Some(2)
    );
    assert_eq!(
        m5.memory_info.as_ref().and_then(|m| m.size_in_mib),
        Some(8192)
    );
}

#[tokio::test]
#[ignore = "needs the AWS emulator: run scripts/test-integration"]
async fn ssm_serves_the_seeded_ami_parameters_and_they_resolve_to_images() {
    let (aws, _shared) = AwsEnv::shared().await.expect("finding the emulator");
    let parameters = [
        "/aws/service/eks/optimized-ami/1.36/amazon-linux-2023/x86_64/standard/recommended/image_id",
        "/aws/service/eks/optimized-ami/1.36/amazon-linux-2023/x86_64/nvidia/recommended/image_id",
        "/aws/service/eks/optimized-ami/1.36/amazon-linux-2023/x86_64/neuron/recommended/image_id",
        "/aws/service/eks/optimized-ami/1.36/amazon-linux-2023/arm64/standard/recommended/image_id",
        "/aws/service/eks/optimized-ami/1.36/amazon-linux-2023/arm64/nvidia/recommended/image_id",
        "/aws/service/eks/optimized-ami/1.32/amazon-linux-2/recommended/image_id",
        "/aws/service/eks/optimized-ami/1.32/amazon-linux-2-arm64/recommended/image_id",
        "/aws/service/eks/optimized-ami/1.32/amazon-linux-2-gpu/recommended/image_id",
        "/aws/service/bottlerocket/aws-k8s-1.36/x86_64/latest/image_id",
        "/aws/service/bottlerocket/aws-k8s-1.36/arm64/latest/image_id",
        "/aws/service/bottlerocket/aws-k8s-1.36-nvidia/x86_64/latest/image_id",
        "/aws/service/ami-windows-latest/Windows_Server-2022-English-Core-EKS_Optimized-1.36/image_id",
    ];
    let ssm = aws.ssm();
    let mut images = Vec::new();
    for name in parameters {
        let value = ssm
            .get_parameter()
            .name(name)
            .send()
            .await
            .unwrap_or_else(|e| panic!("reading {name}: {e:?}"))
            .parameter
            .and_then(|p| p.value)
            .unwrap_or_default();
        assert!(value.starts_with("ami-"), "{name} = {value:?}");
        images.push(value);
    }
    let described = aws
        .ec2()
        .describe_images()
        .set_image_ids(Some(images.clone()))
        .send()
        .await
        .expect("describing the seeded images")
        .images
        .unwrap_or_default();
    let mut found: Vec<String> = described
        .iter()
        .filter_map(|i| i.image_id.clone())
        .collect();
    found.sort();
    images.sort();
    images.dedup();
    assert_eq!(found, images);
    let arm = described
        .iter()
        .find(|i| {
            i.name
                .as_deref()
                .is_some_and(|n| n.contains("al2023-arm64-standard"))
        })
        .expect("the AL2023 arm64 image");
    assert_eq!(arm.architecture.as_ref().map(|a| a.as_str()), Some("arm64"));
}

#[tokio::test]
#[ignore = "needs the AWS emulator: run scripts/test-integration"]
async fn create_fleet_instant_launches_tagged_instances_that_terminate() {
    let (aws, _shared) = AwsEnv::shared().await.expect("finding the emulator");
    let ec2 = aws.ec2();
    let run = unique("fleet");
    let image = al2023_image(&aws).await;

    let subnet = ec2
        .describe_subnets()
        .filters(
            Filter::builder()
                .name("default-for-az")
                .values("true")
                .build(),
        )
        .send()
        .await
        .expect("describing subnets")
        .subnets
        .unwrap_or_default()
        .into_iter()
        .next()
        .expect("moto has default subnets");
    let subnet_id = subnet.subnet_id.clone().expect("subnet id");

    let template = ec2
        .create_launch_template()
        .launch_template_name(format!("karpenter.k8s.aws/{run}"))
        .launch_template_data(
            RequestLaunchTemplateData::builder()
                .image_id(&image)
                .user_data("IyEvYmluL2Jhc2gK")
                .build(),
        )
        .tag_specifications(
            TagSpecification::builder()
                .resource_type(ResourceType::LaunchTemplate)
                .tags(Tag::builder().key("testenv/run").value(&run).build())
                .build(),
        )
        .send()
        .await
        .expect("creating a launch template")
        .launch_template
        .expect("the launch template");
    let template_id = template.launch_template_id.expect("launch template id");

    let fleet = ec2
        .create_fleet()
        .r#type(FleetType::Instant)
        .launch_template_configs(
            FleetLaunchTemplateConfigRequest::builder()
                .launch_template_specification(
                    FleetLaunchTemplateSpecificationRequest::builder()
                        .launch_template_id(&template_id)
                        .version("$Latest")
                        .build(),
                )
                .overrides(
                    FleetLaunchTemplateOverridesRequest::builder()
                        .instance_type(InstanceType::M5Large)
                        .subnet_id(&subnet_id)
                        .build(),
                )
                .overrides(
                    FleetLaunchTemplateOverridesRequest::builder()
                        .instance_type(InstanceType::M5Xlarge)
                        .subnet_id(&subnet_id)
                        .build(),
                )
                .build(),
        )
        .target_capacity_specification(
            TargetCapacitySpecificationRequest::builder()
                .total_target_capacity(2)
                .default_target_capacity_type(DefaultTargetCapacityType::OnDemand)
                .build(),
        )
        .tag_specifications(
            TagSpecification::builder()
                .resource_type(ResourceType::Instance)
                .tags(Tag::builder().key("testenv/run").value(&run).build())
                .tags(
                    Tag::builder()
                        .key("karpenter.sh/nodepool")
                        .value("default")
                        .build(),
                )
                .build(),
        )
        .send()
        .await
        .expect("CreateFleet instant");
    let mut launched: Vec<String> = fleet
        .instances
        .unwrap_or_default()
        .into_iter()
        .flat_map(|i| i.instance_ids.unwrap_or_default())
        .collect();
    launched.sort();
    assert_eq!(launched.len(), 2, "fleet errors: {:?}", fleet.errors);

    let described: Vec<_> = ec2
        .describe_instances()
        .filters(
            Filter::builder()
                .name("tag:testenv/run")
                .values(&run)
                .build(),
        )
        .send()
        .await
        .expect("describing instances by tag")
        .reservations
        .unwrap_or_default()
        .into_iter()
        .flat_map(|r| r.instances.unwrap_or_default())
        .collect();
    let mut tagged: Vec<String> = described
        .iter()
        .filter_map(|i| i.instance_id.clone())
        .collect();
    tagged.sort();
    assert_eq!(
        tagged, launched,
        "the fleet's tag specification tags the instances"
    );
    for instance in &described {
        // A documented moto limit: the whole fleet comes from the first override.
        assert_eq!(instance.instance_type, Some(InstanceType::M5Large));
        assert_eq!(instance.image_id.as_deref(), Some(image.as_str()));
        assert_eq!(instance.subnet_id.as_deref(), Some(subnet_id.as_str()));
        let tags = instance.tags.clone().unwrap_or_default();
        assert!(
            tags.iter()
                .any(|t| t.key.as_deref() == Some("karpenter.sh/nodepool"))
        );
    }

    let terminated = ec2
        .terminate_instances()
        .set_instance_ids(Some(launched.clone()))
        .send()
        .await
        .expect("terminating the instances")
        .terminating_instances
        .unwrap_or_default();
    assert_eq!(terminated.len(), 2);
    for change in terminated {
        let state = change
            .current_state
            .and_then(|s| s.name)
            .map(|n| n.as_str().to_string());
        assert!(
            matches!(state.as_deref(), Some("shutting-down" | "terminated")),
            "state after TerminateInstances: {state:?}"
        );
    }
    ec2.delete_launch_template()
        .launch_template_id(&template_id)
        .send()
        .await
        .expect("deleting the launch template");
}

#[tokio::test]
#[ignore = "needs the AWS emulator: run scripts/test-integration"]
async fn an_sqs_message_round_trips() {
    let (aws, _shared) = AwsEnv::shared().await.expect("finding the emulator");
    let sqs = aws.sqs();
    let queue = sqs
        .create_queue()
        .queue_name(unique("interruption"))
        .send()
        .await
        .expect("creating a queue")
        .queue_url
        .expect("queue url");
    let body = r#"{"version":"0","detail-type":"EC2 Spot Instance Interruption Warning","source":"aws.ec2","detail":{"instance-id":"i-0123456789abcdef0","instance-action":"terminate"}}"#;
    sqs.send_message()
        .queue_url(&queue)
        .message_body(body)
        .send()
        .await
        .expect("sending");
    let messages = sqs
        .receive_message()
        .queue_url(&queue)
        .max_number_of_messages(10)
        .wait_time_seconds(1)
        .send()
        .await
        .expect("receiving")
        .messages
        .unwrap_or_default();
    assert_eq!(messages.len(), 1);
    assert_eq!(messages[0].body.as_deref(), Some(body));
    let receipt = messages[0].receipt_handle.clone().expect("receipt handle");
    sqs.delete_message()
        .queue_url(&queue)
        .receipt_handle(receipt)
        .send()
        .await
        .expect("deleting the message");
    let again = sqs
        .receive_message()
        .queue_url(&queue)
        .wait_time_seconds(0)
        .send()
        .await
        .expect("receiving again")
        .messages
        .unwrap_or_default();
    assert!(again.is_empty(), "the deleted message came back");
    sqs.delete_queue()
        .queue_url(&queue)
        .send()
        .await
        .expect("deleting the queue");
}

#[tokio::test]
#[ignore = "needs the AWS emulator: run scripts/test-integration"]
async fn with_iam_enforcement_a_user_allowed_only_describe_instances_is_denied_run_instances() {
    let (aws, _exclusive) = AwsEnv::exclusive().await.expect("resetting the emulator");
    aws.set_iam_enforcement(true)
        .await
        .expect("turning IAM enforcement on");
    let iam = aws.iam();
    let user = unique("describe-only");
    iam.create_user()
        .user_name(&user)
        .send()
        .await
        .expect("creating a user");
    let policy = r#"{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Action":"ec2:DescribeInstances","Resource":"*"}]}"#;
    iam.put_user_policy()
        .user_name(&user)
        .policy_name("describe-only")
        .policy_document(policy)
        .send()
        .await
        .expect("attaching the policy");
    let key = iam
        .create_access_key()
        .user_name(&user)
        .send()
        .await
        .expect("creating an access key")
        .access_key
        .expect("the access key");
    let limited = aws.with_credentials(&key.access_key_id, &key.secret_access_key);

    limited
        .ec2()
        .describe_instances()
        .send()
        .await
        .expect("DescribeInstances is allowed");
    let image = al2023_image(&aws).await;
    let denied = limited
        .ec2()
        .run_instances()
        .image_id(image)
        .instance_type(InstanceType::M5Large)
        .min_count(1)
        .max_count(1)
        .send()
        .await
        .expect_err("RunInstances must be denied");
    let service_error = denied
        .as_service_error()
        .expect("a service error, not a transport error");
    let code = aws_sdk_ec2::error::ProvideErrorMetadata::code(service_error);
    let message =
        aws_sdk_ec2::error::ProvideErrorMetadata::message(service_error).unwrap_or_default();
    // moto answers AccessDenied where EC2 answers UnauthorizedOperation (see testenv/README.md).
    assert!(
        matches!(code, Some("AccessDenied" | "UnauthorizedOperation")),
        "code {code:?}: {message}"
    );
    assert!(message.contains("ec2:RunInstances"), "{message}");

    // Unknown credentials are refused outright.
    let stranger = aws.with_credentials("AKIAUNKNOWNUNKNOWN00", "not-a-secret");
    let refused = stranger
        .ec2()
        .describe_instances()
        .send()
        .await
        .expect_err("unknown keys are refused");
    let code = refused
        .as_service_error()
        .and_then(|e| aws_sdk_ec2::error::ProvideErrorMetadata::code(e));
    assert_eq!(code, Some("AuthFailure"));

    // Leave the switch as the launcher set it.
    let initial = aws.state().is_none_or(|s| s.iam_enforcement);
    aws.set_iam_enforcement(initial)
        .await
        .expect("restoring IAM enforcement");
}

#[tokio::test]
#[ignore = "needs the AWS emulator: run scripts/test-integration"]
async fn a_reset_wipes_resources_and_keeps_the_seeded_parameters() {
    let (aws, _exclusive) = AwsEnv::exclusive().await.expect("resetting the emulator");
    let sqs = aws.sqs();
    let name = unique("before-reset");
    sqs.create_queue()
        .queue_name(&name)
        .send()
        .await
        .expect("creating a queue");
    aws.reset().await.expect("resetting");
    let queues = sqs
        .list_queues()
        .queue_name_prefix(&name)
        .send()
        .await
        .expect("listing queues")
        .queue_urls
        .unwrap_or_default();
    assert!(queues.is_empty(), "queues survived the reset: {queues:?}");
    let image = al2023_image(&aws).await;
    assert!(
        image.starts_with("ami-"),
        "seeded parameters are back after the reset"
    );
}

#[tokio::test]
#[ignore = "needs the AWS emulator: run scripts/test-integration"]
async fn recorded_calls_stay_inside_the_iam_contract_and_the_generated_policy() {
    let (aws, _shared) = AwsEnv::shared().await.expect("finding the emulator");
    let recorder = CallRecorder::new();
    let config = aws_sdk_ec2::config::Builder::from(&aws.sdk_config())
        .interceptor(recorder.interceptor())
        .build();
    let ec2 = aws_sdk_ec2::Client::from_conf(config);
    let run = unique("recorded");
    let cluster = "testenv-recorder";
    let owned = format!("kubernetes.io/cluster/{cluster}");
    let launch_tags = [
        (owned.as_str(), "owned"),
        ("eks:eks-cluster-name", cluster),
        ("karpenter.sh/nodepool", run.as_str()),
        ("karpenter.k8s.aws/ec2nodeclass", "default"),
    ];
    let image = al2023_image(&aws).await;

    ec2.describe_subnets()
        .send()
        .await
        .expect("describing subnets");
    let mut tag_specification =
        TagSpecification::builder().resource_type(ResourceType::LaunchTemplate);
    for (key, value) in launch_tags {
        tag_specification = tag_specification.tags(Tag::builder().key(key).value(value).build());
    }
    let template_id = ec2
        .create_launch_template()
        .launch_template_name(format!("karpenter.k8s.aws/{run}"))
        .launch_template_data(
            RequestLaunchTemplateData::builder()
                .image_id(&image)
                .build(),
        )
        .tag_specifications(tag_specification.build())
        .send()
        .await
        .expect("creating a launch template")
        .launch_template
        .and_then(|t| t.launch_template_id)
        .expect("the launch template id");
    let rejected = ec2
        .describe_vpcs()
        .vpc_ids("vpc-0000000000000dead")
        .send()
        .await
        .expect_err("moto rejects an unknown VPC id");
    ec2.delete_launch_template()
        .launch_template_id(&template_id)
        .send()
        .await
        .expect("deleting the launch template");

    let calls = recorder.calls();
    let operations: Vec<(&str, &str, bool)> = calls
        .iter()
        .map(|c| (c.service.as_str(), c.operation.as_str(), c.succeeded))
        .collect();
    assert_eq!(
        operations,
        vec![
            ("ec2", "DescribeSubnets", true),
            ("ec2", "CreateLaunchTemplate", true),
            ("ec2", "DescribeVpcs", false),
            ("ec2", "DeleteLaunchTemplate", true),
        ]
    );
    assert!(
        calls
            .iter()
            .all(|c| c.region.as_deref() == Some(aws.region()))
    );
    let template_tags = calls[1]
        .tag_specifications
        .get("launch-template")
        .expect("the launch template's TagSpecification");
    for (key, value) in launch_tags {
        assert_eq!(
            template_tags.get(key).map(String::as_str),
            Some(value),
            "{key}"
        );
    }
    assert_eq!(
        calls[1].ids.launch_template_names,
        vec![format!("karpenter.k8s.aws/{run}")]
    );
    assert_eq!(
        calls[1].ids.ec2_ids,
        vec![template_id.clone()],
        "the id EC2 answered"
    );
    assert_eq!(calls[3].ids.ec2_ids, vec![template_id]);
    let code = rejected
        .as_service_error()
        .and_then(|e| aws_sdk_ec2::error::ProvideErrorMetadata::code(e))
        .map(str::to_string);
    assert!(code.is_some(), "{rejected:?}");
    assert_eq!(
        calls[2].error_code, code,
        "the recorded failure carries EC2's code"
    );

    // The policy `karpenter iam policy --cluster-name <c> --region <r> --account-id <a>` prints.
    let account = aws
        .state()
        .map(|s| s.account_id.clone())
        .unwrap_or_else(|| karpenter_testenv::aws::ACCOUNT_ID.to_string());
    let scope = Scope::new(cluster, aws.region(), None)
        .and_then(|s| s.with_account(&account))
        .expect("a scope for the emulator");
    let findings = check(&calls, &scope, &controller_policy(&scope)).expect("checking the calls");
    let messages: Vec<String> = findings.iter().map(|f| f.message()).collect();
    assert_eq!(findings.len(), 1, "{messages:#?}");
    assert_eq!(findings[0].call, 2, "{messages:#?}");
    assert_eq!(findings[0].problem, Problem::NotInContract, "{messages:#?}");
    assert!(messages[0].contains("ec2:DescribeVpcs"), "{}", messages[0]);
}

#[tokio::test]
#[ignore = "needs the AWS emulator: run scripts/test-integration"]
async fn without_a_pricing_api_the_embedded_prices_stay_and_spot_prices_come_from_ec2() {
    let (aws, _shared) = AwsEnv::shared().await.expect("finding the emulator");
    let clients =
        karpenter_aws_provider::AwsClients::new(&aws.sdk_config(), &[]).expect("AWS clients");
    let book = karpenter_aws_provider::pricing::PriceBook::new(aws.region(), false)
        .expect("the embedded prices");
    let before = book.with(|p| p.on_demand("m5.large"));
    // The emulator has no Pricing API: the refresh fails, names the call, and changes nothing.
    let error = book
        .refresh_on_demand(&clients)
        .await
        .expect_err("the emulator has no Pricing API");
    assert_eq!(error.operation, "pricing:GetProducts", "{error}");
    assert_eq!(book.with(|p| p.on_demand("m5.large")), before);
    assert_eq!(
        before.map(|q| q.source),
        Some(karpenter_aws::pricing::PriceSource::Fallback),
        "the embedded catalog answers"
    );
    assert_eq!(book.version(), 0, "nothing changed");
    // Spot prices come from DescribeSpotPriceHistory, per zone.
    let count = book.refresh_spot(&clients).await.expect("spot prices");
    assert!(count > 100, "{count} spot prices");
    let spot = book
        .with(|p| p.spot("m5.large", &format!("{}a", aws.region())))
        .expect("a spot price for m5.large");
    assert_eq!(
        spot.source,
        karpenter_aws::pricing::PriceSource::SpotPriceHistory
    );
    assert_eq!(book.version(), 1);
    // An isolated VPC asks no Pricing API at all.
    let isolated = karpenter_aws_provider::pricing::PriceBook::new(aws.region(), true)
        .expect("the embedded prices");
    assert_eq!(isolated.refresh_on_demand(&clients).await.ok(), Some(0));
}
