//! `karpenter-bench ec2`: the EC2 provider against an EC2 endpoint (the AWS emulator:
//! `AWS_ENDPOINT_URL`, credentials allowed to make a VPC, subnets, a security group and a
//! role). Two measurements, each with the AWS calls it made:
//!
//! * **refresh**: the region's instance types (`DescribeInstanceTypes`,
//!   `DescribeInstanceTypeOfferings`) and their resolution for an AL2023 EC2NodeClass in three
//!   zones, as the provider does at start and every 12 hours;
//! * **launch**: `--launches` NodeClaims launched through the provider's `create` (plan,
//!   launch templates, `CreateFleet`), `--concurrency` at a time (1: one after another; more:
//!   a burst, whose equal launches the provider batches), each naming every c/m/r type of up
//!   to 8 vCPUs as a provisioner's NodeClaim would; then terminated the same way (not timed,
//!   its calls counted).
//!
//! Never run it against a real account: it launches instances.

use std::process::ExitCode;
use std::time::Instant;

use aws_sdk_ec2::types::{ResourceType, Tag, TagSpecification};
use chrono::Utc;
use karpenter_api::v1::{EC2NodeClass, NodeClaim};
use karpenter_aws::nodeclass::status;
use karpenter_aws_provider::calls::CallCounter;
use karpenter_aws_provider::nodeclass::NodeClassResolver;
use karpenter_aws_provider::{AwsClients, AwsCloud, AwsSettings, NodeClasses};
use karpenter_cloud::CloudProvider;
use serde_json::json;

#[derive(Debug, clap::Args)]
pub struct Ec2Args {
    /// Number of NodeClaims to launch.
    #[arg(long, default_value_t = 100)]
    launches: usize,
    /// NodeClaims launched (and deleted) at once; 1: one after another.
    #[arg(long, default_value_t = 1)]
    concurrency: usize,
    /// The Kubernetes version AMI aliases resolve for.
    #[arg(long, default_value = "v1.36.0")]
    kubernetes_version: String,
    /// Print one JSON object instead of a table.
    #[arg(long)]
    json: bool,
}

/// The benchmark's one EC2NodeClass.
#[derive(Debug)]
struct OneClass(EC2NodeClass);

impl NodeClasses for OneClass {
    fn node_class(&self, name: &str) -> Option<EC2NodeClass> {
        (self.0.metadata.name.as_deref() == Some(name)).then(|| self.0.clone())
    }

    fn version(&self) -> u64 {
        0
    }
}

const CLUSTER: &str = "bench";
const ZONES: [&str; 3] = ["a", "b", "c"];

async fn network(clients: &AwsClients) -> anyhow::Result<()> {
    let tags = |kind: ResourceType| {
        TagSpecification::builder()
            .resource_type(kind)
            .tags(
                Tag::builder()
                    .key("karpenter.sh/discovery")
                    .value(CLUSTER)
                    .build(),
            )
            .build()
    };
    let ec2 = &clients.ec2;
    let vpc = ec2
        .create_vpc()
        .cidr_block("10.30.0.0/16")
        .tag_specifications(tags(ResourceType::Vpc))
        .send()
        .await?
        .vpc
        .and_then(|v| v.vpc_id)
        .ok_or_else(|| anyhow::anyhow!("CreateVpc returned no VPC"))?;
    for (i, zone) in ZONES.iter().enumerate() {
        ec2.create_subnet()
            .vpc_id(&vpc)
            .cidr_block(format!("10.30.{i}.0/24"))
            .availability_zone(format!("{}{zone}", clients.region))
            .tag_specifications(tags(ResourceType::Subnet))
            .send()
            .await?;
    }
    let subnet_ids: Vec<String> = ec2
        .describe_subnets()
        .filters(
            aws_sdk_ec2::types::Filter::builder()
                .name("vpc-id")
                .values(&vpc)
                .build(),
        )
        .send()
        .await?
        .subnets()
        .iter()
        .filter_map(|s| s.subnet_id().map(str::to_owned))
        .collect();
    ec2.create_security_group()
        .group_name(format!("bench-{}", std::process::id()))
        .description("karpenter-bench")
        .vpc_id(&vpc)
        .tag_specifications(tags(ResourceType::SecurityGroup))
        .send()
        .await?;
    let role = "KarpenterNodeRole-bench";
    let trust = json!({"Version": "2012-10-17", "Statement": [{"Effect": "Allow",
        "Principal": {"Service": "ec2.amazonaws.com"}, "Action": "sts:AssumeRole"}]});
    let created = clients
        .iam
        .create_role()
        .role_name(role)
        .assume_role_policy_document(trust.to_string())
        .send()
        .await;
    if let Err(error) = created {
        let text = aws_sdk_iam::error::DisplayErrorContext(&error).to_string();
        if !text.contains("EntityAlreadyExists") {
            anyhow::bail!("creating the node role: {text}");
        }
    }
    // The cluster's record: AL2023 nodes need its service CIDR.
    let cluster = clients
        .eks
        .create_cluster()
        .name(CLUSTER)
        .role_arn(format!("arn:aws:iam::123456789012:role/{role}"))
        .resources_vpc_config(
            aws_sdk_eks::types::VpcConfigRequest::builder()
                .set_subnet_ids(Some(subnet_ids))
                .build(),
        )
        .send()
        .await;
    if let Err(error) = cluster {
        let text = aws_sdk_eks::error::DisplayErrorContext(&error).to_string();
        if !text.contains("ResourceInUse") {
            anyhow::bail!("creating the EKS cluster record: {text}");
        }
    }
    Ok(())
}

fn node_class() -> anyhow::Result<EC2NodeClass> {
    Ok(serde_json::from_value(json!({
        "apiVersion": "karpenter.k8s.aws/v1",
        "kind": "EC2NodeClass",
        "metadata": {"name": "bench", "uid": "6f1b0c4e-2b7a-4f3e-9a51-0d3c8e7b1a22", "generation": 1},
        "spec": {
            "role": "KarpenterNodeRole-bench",
            "amiSelectorTerms": [{"alias": "al2023@latest"}],
            "subnetSelectorTerms": [{"tags": {"karpenter.sh/discovery": CLUSTER}}],
            "securityGroupSelectorTerms": [{"tags": {"karpenter.sh/discovery": CLUSTER}}]
        }
    }))?)
}

fn claim(i: usize, types: &[String]) -> anyhow::Result<NodeClaim> {
    Ok(serde_json::from_value(json!({
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodeClaim",
        "metadata": {"name": format!("bench-{i:05}"), "labels": {"karpenter.sh/nodepool": "bench"}},
        "spec": {
            "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "bench"},
            "requirements": [
                {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]},
                {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": types}
            ],
            "resources": {"requests": {"cpu": "1", "memory": "1Gi", "pods": "5"}}
        }
    }))?)
}

fn per_node(calls: &std::collections::BTreeMap<String, u64>, nodes: usize) -> f64 {
    if nodes == 0 {
        return 0.0;
    }
    calls.values().sum::<u64>() as f64 / nodes as f64
}

pub fn run(a: Ec2Args, peak_rss_mb: fn() -> f64) -> anyhow::Result<ExitCode> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    runtime.block_on(bench(a, peak_rss_mb))
}

async fn bench(a: Ec2Args, peak_rss_mb: fn() -> f64) -> anyhow::Result<ExitCode> {
    let counter = CallCounter::default();
    let clients = AwsClients::from_env_with(&[counter.interceptor()]).await?;
    network(&clients).await?;

    // The class, resolved as the EC2NodeClass controller would.
    let mut class = node_class()?;
    let resolver = NodeClassResolver::new(clients.clone(), CLUSTER);
    let (resolution, _) = resolver
        .resolve(&class, &a.kubernetes_version, Utc::now())
        .await;
    let at = karpenter_state::conditions::api_time(Utc::now())
        .ok_or_else(|| anyhow::anyhow!("the clock is outside the API's time range"))?;
    class.status = Some(status::status(None, Some(1), &resolution, at));
    if let Err(reason) = status::launchable(class.status.as_ref(), Some(1)) {
        anyhow::bail!("the benchmark's EC2NodeClass is not ready: {reason}");
    }

    counter.reset();
    let started = Instant::now();
    let cloud = AwsCloud::start(
        clients.clone(),
        AwsSettings {
            cluster_name: CLUSTER.into(),
            cluster_endpoint: Some("https://bench.invalid".into()),
            cluster_ca_bundle: Some("Q0E=".into()),
            vm_memory_overhead_percent: 0.075,
            ..AwsSettings::default()
        },
        OneClass(class.clone()),
    )
    .await?;
    let pool: karpenter_api::v1::NodePool = serde_json::from_value(json!({
        "apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": "bench"},
        "spec": {"template": {"spec": {
            "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "bench"},
            "requirements": []}}}
    }))?;
    let infos = cloud.instance_types(&pool).await?;
    let refresh_seconds = started.elapsed().as_secs_f64();
    let refresh_calls = counter.counts();
    let rss_after_refresh = peak_rss_mb();
    let types: Vec<String> = infos
        .iter()
        .filter(|i| {
            let category = i.labels.get(karpenter_api::labels::INSTANCE_CATEGORY);
            let cpu = i.capacity.cpu_millis;
            matches!(category.map(String::as_str), Some("c" | "m" | "r")) && cpu <= 8000
        })
        .map(|i| i.name.clone())
        .collect();

    counter.reset();
    let started = Instant::now();
    let cloud = std::sync::Arc::new(cloud);
    let claims = (0..a.launches)
        .map(|i| claim(i, &types))
        .collect::<anyhow::Result<Vec<_>>>()?;
    let mut launched = Vec::new();
    for wave in claims.chunks(a.concurrency.max(1)) {
        let mut launches = tokio::task::JoinSet::new();
        for claim in wave {
            let (cloud, claim) = (cloud.clone(), claim.clone());
            launches.spawn(async move { cloud.create(&claim).await });
        }
        while let Some(result) = launches.join_next().await {
            launched.push(result??);
        }
    }
    let launch_seconds = started.elapsed().as_secs_f64();
    let launch_calls = counter.counts();
    counter.reset();
    for wave in launched.chunks(a.concurrency.max(1)) {
        let mut deletes = tokio::task::JoinSet::new();
        for claim in wave {
            let (cloud, claim) = (cloud.clone(), claim.clone());
            deletes.spawn(async move { cloud.delete(&claim).await });
        }
        while deletes.join_next().await.is_some() {}
    }
    let delete_calls = counter.counts();
    let rss = peak_rss_mb();
    let per_sec = if launch_seconds > 0.0 {
        a.launches as f64 / launch_seconds
    } else {
        0.0
    };
    if a.json {
        println!(
            "{}",
            json!({
                "region": clients.region,
                "refresh": {
                    "seconds": refresh_seconds,
                    "instance_types_described": infos.len(),
                    "calls": refresh_calls,
                    "peak_rss_mb": rss_after_refresh,
                },
                "launch": {
                    "nodeclaims": a.launches,
                    "concurrency": a.concurrency.max(1),
                    "instance_type_options": types.len(),
                    "seconds": launch_seconds,
                    "nodeclaims_per_sec": per_sec,
                    "calls": launch_calls,
                    "calls_per_node": per_node(&launch_calls, a.launches),
                },
                "delete": {"calls": delete_calls},
                "peak_rss_mb": rss,
            })
        );
    } else {
        println!("region                         {}", clients.region);
        println!("refresh seconds                {refresh_seconds:.3}");
        println!("instance types (AL2023, 3 AZ)  {}", infos.len());
        println!("refresh calls                  {refresh_calls:?}");
        println!("peak RSS after refresh (MiB)   {rss_after_refresh:.1}");
        println!("nodeclaims launched            {}", a.launches);
        println!("at once                        {}", a.concurrency.max(1));
        println!("instance-type options each     {}", types.len());
        println!("launch seconds                 {launch_seconds:.3}");
        println!("nodeclaims/s                   {per_sec:.1}");
        println!("launch calls                   {launch_calls:?}");
        println!(
            "calls per node                 {:.2}",
            per_node(&launch_calls, a.launches)
        );
        println!("delete calls                   {delete_calls:?}");
        println!("peak RSS (MiB)                 {rss:.1}");
    }
    Ok(ExitCode::SUCCESS)
}
