//! The controller on EC2 (`--cloud-provider aws`) against the AWS emulator, with the real
//! control plane and KWOK standing in for the kubelet.
//!
//! Each test builds its own cluster in the emulator (a VPC, three subnets and a security group
//! tagged for discovery, the node role, an EKS cluster record) and runs the controller as an
//! IAM user holding the controller policy `karpenter iam policy` prints. The emulator only
//! evaluates actions (a statement scoped to ARNs or conditioned on tags never matches there),
//! so the user gets the policy's actions on `*`; resources, tags and conditions are checked
//! on every call the provider made, recorded by an SDK interceptor, with karpenter-aws's own
//! evaluator against the exact policy.
//!
//! The emulator boots no instance: once an instance is launched the test registers its Node as
//! a kubelet would (provider id `aws:///<zone>/<id>`, the NodeClaim's labels and taints, the
//! `karpenter.sh/unregistered` taint), annotated for KWOK, which keeps it Ready and runs its
//! pods.

use std::collections::BTreeMap;
use std::time::Duration;

use aws_sdk_ec2::types::{Filter, ResourceType, Tag, TagSpecification};
use k8s_openapi::api::core::v1::{Event, Node, NodeSpec, NodeStatus, Taint};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use karpenter_api::v1::{EC2NodeClass, NodeClaim};
use karpenter_aws::iam::policy::PolicyDocument;
use karpenter_aws::iam::scope::Scope;
use karpenter_kwok_provider::KwokOptions;
use karpenter_testenv::{AwsEnv, aws_calls::CallRecorder, wait_for};
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};

use super::{Harness, prepare, spawn_controller};

mod batching;
mod health;
mod reservations;

/// A Kubernetes error inside a wait, named.
fn kube_error(action: &'static str) -> impl FnOnce(kube::Error) -> karpenter_testenv::Error {
    move |source| karpenter_testenv::Error::Kube {
        action: action.to_owned(),
        source,
    }
}

/// What the emulator holds for one test's cluster.
struct Cloud {
    cluster: String,
    subnets: Vec<(String, String)>,
    security_group: String,
    role: String,
    account: String,
    /// The access key the controller's clients sign with (faults are injected per key).
    controller_key: String,
}

/// The emulator's account and region as the policy names them.
fn scope(cloud: &Cloud, region: &str) -> Scope {
    Scope::new(&cloud.cluster, region, None)
        .and_then(|s| s.with_account(&cloud.account))
        .expect("a policy scope for the test cluster")
}

/// The controller policy as the emulator can enforce it: the same actions, on `*`, without
/// conditions (it would deny every ARN-scoped grant and ignore conditions anyway). `without`
/// names statements left out, to prove a missing permission is reported.
fn enforceable(policy: &PolicyDocument, without: &[&str]) -> String {
    let mut value = serde_json::to_value(policy).expect("the policy serializes");
    let statements = value["Statement"].as_array_mut().expect("a statement list");
    statements.retain(|s| {
        !without
            .iter()
            .any(|sid| s.get("Sid").and_then(|v| v.as_str()) == Some(sid))
    });
    for statement in statements.iter_mut() {
        if let Some(object) = statement.as_object_mut() {
            object.remove("Condition");
            object.insert("Resource".into(), serde_json::json!("*"));
        }
    }
    value.to_string()
}

/// The Kubernetes version of the emulator's EKS cluster records.
const EKS_VERSION: &str = "1.33";

async fn build_cloud(aws: &AwsEnv, id: &str) -> Cloud {
    let cluster = format!("testenv-{id}");
    let ec2 = aws.ec2();
    let discovery = |kind: ResourceType| {
        TagSpecification::builder()
            .resource_type(kind)
            .tags(
                Tag::builder()
                    .key("karpenter.sh/discovery")
                    .value(&cluster)
                    .build(),
            )
            .build()
    };
    let vpc = ec2
        .create_vpc()
        .cidr_block("10.20.0.0/16")
        .tag_specifications(discovery(ResourceType::Vpc))
        .send()
        .await
        .expect("creating the VPC")
        .vpc
        .and_then(|v| v.vpc_id)
        .expect("a VPC id");
    let mut subnets = Vec::new();
    for (i, zone) in ["us-west-2a", "us-west-2b", "us-west-2c"]
        .iter()
        .enumerate()
    {
        let subnet = ec2
            .create_subnet()
            .vpc_id(&vpc)
            .cidr_block(format!("10.20.{i}.0/24"))
            .availability_zone(*zone)
            .tag_specifications(discovery(ResourceType::Subnet))
            .send()
            .await
            .expect("creating a subnet")
            .subnet
            .and_then(|s| s.subnet_id)
            .expect("a subnet id");
        subnets.push((subnet, (*zone).to_owned()));
    }
    let security_group = ec2
        .create_security_group()
        .group_name(format!("{cluster}-nodes"))
        .description("karpenter-rs test nodes")
        .vpc_id(&vpc)
        .tag_specifications(discovery(ResourceType::SecurityGroup))
        .send()
        .await
        .expect("creating the security group")
        .group_id
        .expect("a group id");
    let role = format!("KarpenterNodeRole-{cluster}");
    let trust = serde_json::json!({"Version": "2012-10-17", "Statement": [{
        "Effect": "Allow", "Principal": {"Service": "ec2.amazonaws.com"}, "Action": "sts:AssumeRole"}]});
    let role_arn = aws
        .iam()
        .create_role()
        .role_name(&role)
        .assume_role_policy_document(trust.to_string())
        .send()
        .await
        .expect("creating the node role")
        .role
        .map(|r| r.arn)
        .expect("a role");
    // The EKS record's minor differs from the API server's (v1.36), so a test can tell which
    // of the two the controller read (EKS_CONTROL_PLANE).
    aws.eks()
        .create_cluster()
        .name(&cluster)
        .version(EKS_VERSION)
        .role_arn(&role_arn)
        .resources_vpc_config(
            aws_sdk_eks::types::VpcConfigRequest::builder()
                .set_subnet_ids(Some(subnets.iter().map(|(s, _)| s.clone()).collect()))
                .build(),
        )
        .kubernetes_network_config(
            aws_sdk_eks::types::KubernetesNetworkConfigRequest::builder()
                .service_ipv4_cidr("10.100.0.0/16")
                .build(),
        )
        .send()
        .await
        .expect("creating the EKS cluster record");
    let account = role_arn
        .split(':')
        .nth(4)
        .unwrap_or(karpenter_testenv::aws::ACCOUNT_ID)
        .to_owned();
    Cloud {
        cluster,
        subnets,
        security_group,
        role,
        account,
        controller_key: String::new(),
    }
}

/// SQS as the controller's IAM user (made by [`controller_clients`]), recorded.
async fn controller_sqs(
    aws: &AwsEnv,
    cloud: &Cloud,
    recorder: &CallRecorder,
) -> aws_sdk_sqs::Client {
    let user = format!("{}-controller", cloud.cluster);
    let key = aws
        .iam()
        .create_access_key()
        .user_name(&user)
        .send()
        .await
        .expect("an access key")
        .access_key
        .expect("an access key");
    let config = aws
        .with_credentials(&key.access_key_id, &key.secret_access_key)
        .sdk_config();
    aws_sdk_sqs::Client::from_conf(
        aws_sdk_sqs::config::Builder::from(&config)
            .interceptor(recorder.interceptor())
            .build(),
    )
}

/// An IAM user holding `policy` (as the emulator enforces it), and clients as that user with
/// `recorder` on every call.
async fn controller_clients(
    aws: &AwsEnv,
    cloud: &mut Cloud,
    policy: &str,
    recorder: &CallRecorder,
    attempt_timeout: Option<Duration>,
) -> karpenter_aws_provider::AwsClients {
    let user = format!("{}-controller", cloud.cluster);
    let iam = aws.iam();
    iam.create_user()
        .user_name(&user)
        .send()
        .await
        .expect("creating the controller's IAM user");
    iam.put_user_policy()
        .user_name(&user)
        .policy_name("KarpenterControllerPolicy")
        .policy_document(policy)
        .send()
        .await
        .expect("attaching the controller policy");
    let key = iam
        .create_access_key()
        .user_name(&user)
        .send()
        .await
        .expect("an access key")
        .access_key
        .expect("an access key");
    cloud.controller_key = key.access_key_id.clone();
    let mut config = aws
        .with_credentials(&key.access_key_id, &key.secret_access_key)
        .sdk_config();
    if let Some(timeout) = attempt_timeout {
        config = config
            .to_builder()
            .timeout_config(
                aws_config::timeout::TimeoutConfig::builder()
                    .operation_attempt_timeout(timeout)
                    .build(),
            )
            .build();
    }
    karpenter_aws_provider::AwsClients::new(&config, &[recorder.interceptor()])
        .expect("AWS clients for the controller")
}

fn api_server(h: &Harness) -> String {
    let kubeconfig = kube::config::Kubeconfig::read_from(h.env.kubeconfig_path())
        .expect("reading the kubeconfig");
    kubeconfig
        .clusters
        .first()
        .and_then(|c| c.cluster.as_ref())
        .and_then(|c| c.server.clone())
        .expect("the kubeconfig names the API server")
}

/// Removes every EC2NodeClass (finalizers included) left by an earlier run: the test holds
/// [`crate::NODE_CLASSES`] exclusively, and the controller would otherwise act on classes of
/// other clusters (other node roles, outside this test's policy).
async fn clear_node_classes(client: &kube::Client) {
    let api = Api::<EC2NodeClass>::all(client.clone());
    let leftovers = api
        .list(&kube::api::ListParams::default())
        .await
        .expect("listing EC2NodeClasses");
    for class in leftovers.items {
        let name = class.metadata.name.clone().unwrap_or_default();
        let _ = api
            .patch(
                &name,
                &PatchParams::default(),
                &Patch::Merge(serde_json::json!({"metadata": {"finalizers": null}})),
            )
            .await;
        let _ = api.delete(&name, &DeleteParams::default()).await;
    }
}

/// Starts the harness and the controller on EC2 as a user with the controller policy
/// (without the statements `without` names); with an interruption queue named after the
/// cluster (as `karpenter iam cloudformation` makes it) when `interruption`.
async fn start_on_aws(
    test: &str,
    aws: &AwsEnv,
    without: &[&str],
) -> (Harness, Cloud, CallRecorder) {
    start_on_aws_with(test, aws, without, false).await
}

async fn start_on_aws_with(
    test: &str,
    aws: &AwsEnv,
    without: &[&str],
    interruption: bool,
) -> (Harness, Cloud, CallRecorder) {
    start_on_aws_faulty(test, aws, without, interruption, None, &[]).await
}

/// [`start_on_aws_with`], and with `faults` (the emulator's fault spec without its key) the
/// controller's requests fail as it says from its first call on; its clients then give up
/// an attempt after 2 s.
async fn start_on_aws_faulty(
    test: &str,
    aws: &AwsEnv,
    without: &[&str],
    interruption: bool,
    faults: Option<serde_json::Value>,
    extra_args: &[&str],
) -> (Harness, Cloud, CallRecorder) {
    let (mut h, cloud, recorder) =
        prepare_on_aws(test, aws, without, interruption, faults, extra_args).await;
    spawn_on_aws(&mut h).await;
    (h, cloud, recorder)
}

/// [`start_on_aws_faulty`] without starting the controller (the test arranges the emulator
/// first, then calls [`spawn_on_aws`]).
async fn prepare_on_aws(
    test: &str,
    aws: &AwsEnv,
    without: &[&str],
    interruption: bool,
    faults: Option<serde_json::Value>,
    extra_args: &[&str],
) -> (Harness, Cloud, CallRecorder) {
    let mut h = prepare(test, &[], KwokOptions::default()).await;
    clear_node_classes(&h.client).await;
    let mut cloud = build_cloud(aws, h.scope.id()).await;
    let policy = karpenter_aws::iam::generate::controller_policy(&scope(&cloud, aws.region()));
    let recorder = CallRecorder::new();
    let clients = controller_clients(
        aws,
        &mut cloud,
        &enforceable(&policy, without),
        &recorder,
        // Shorter than an injected `timeout` (12 s), so the client abandons it, and longer than
        // the emulator's slowest honest answer on a loaded 2-core machine (a page of
        // DescribeInstanceTypes took over 2 s, every attempt, in a full run).
        faults.as_ref().map(|_| Duration::from_secs(8)),
    )
    .await;
    if let Some(mut spec) = faults {
        spec["access_key_id"] = serde_json::json!(cloud.controller_key);
        aws.inject_faults(&spec)
            .await
            .expect("injecting the faults");
    }
    h.spec.args = vec![
        "--cloud-provider=aws".into(),
        format!("--cluster-name={}", cloud.cluster),
        format!("--cluster-endpoint={}", api_server(&h)),
    ];
    h.spec
        .args
        .extend(extra_args.iter().map(|a| (*a).to_owned()));
    h.spec.aws = Some(clients);
    if interruption {
        aws.sqs()
            .create_queue()
            .queue_name(&cloud.cluster)
            .send()
            .await
            .expect("creating the interruption queue");
        h.spec
            .args
            .push(format!("--interruption-queue={}", cloud.cluster));
        h.spec.sqs = Some(controller_sqs(aws, &cloud, &recorder).await);
    }
    h.node_class = h.scope.name("class");
    (h, cloud, recorder)
}

/// Starts the controller [`prepare_on_aws`] prepared.
async fn spawn_on_aws(h: &mut Harness) {
    let controller = spawn_controller(&h.env, &h.scope, &h.spec, None).await;
    h.controllers.push(controller);
}

async fn create_node_class(h: &Harness, cloud: &Cloud, alias: &str) {
    create_node_class_with(h, cloud, alias, serde_json::json!({})).await;
}

/// [`create_node_class`] with `extra` fields in its spec.
async fn create_node_class_with(h: &Harness, cloud: &Cloud, alias: &str, extra: serde_json::Value) {
    let mut spec = serde_json::json!({
        "role": cloud.role,
        "amiSelectorTerms": [{"alias": alias}],
        "subnetSelectorTerms": [{"tags": {"karpenter.sh/discovery": cloud.cluster}}],
        "securityGroupSelectorTerms": [{"tags": {"karpenter.sh/discovery": cloud.cluster}}],
        "tags": {"team": "testenv"}
    });
    if let (Some(spec), Some(extra)) = (spec.as_object_mut(), extra.as_object()) {
        spec.extend(extra.clone());
    }
    let class: EC2NodeClass = serde_json::from_value(serde_json::json!({
        "apiVersion": "karpenter.k8s.aws/v1",
        "kind": "EC2NodeClass",
        "metadata": {"name": h.node_class, "labels": h.scope.labels()},
        "spec": spec
    }))
    .expect("the test EC2NodeClass parses");
    Api::<EC2NodeClass>::all(h.client.clone())
        .create(&PostParams::default(), &class)
        .await
        .expect("creating the EC2NodeClass");
}

fn condition<'a>(
    conditions: Option<&'a [k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition]>,
    type_: &str,
) -> Option<&'a k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition> {
    conditions.into_iter().flatten().find(|c| c.type_ == type_)
}

async fn wait_class_ready(h: &Harness) -> EC2NodeClass {
    let api = Api::<EC2NodeClass>::all(h.client.clone());
    wait_for(
        "the EC2NodeClass Ready",
        Duration::from_secs(90),
        || async {
            let class = api
                .get(&h.node_class)
                .await
                .map_err(kube_error("reading the EC2NodeClass"))?;
            let ready = condition(
                class.status.as_ref().and_then(|s| s.conditions.as_deref()),
                "Ready",
            )
            .is_some_and(|c| c.status == "True");
            Ok(ready.then_some(class))
        },
    )
    .await
    .expect("the EC2NodeClass resolves in the emulator")
}

fn requirements() -> serde_json::Value {
    serde_json::json!([
        {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]},
        {"key": "karpenter.k8s.aws/instance-category", "operator": "In", "values": ["c", "m"]},
        {"key": "karpenter.k8s.aws/instance-cpu", "operator": "Lt", "values": ["5"]},
        {"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]}
    ])
}

fn provider_id(claim: &NodeClaim) -> Option<String> {
    claim.status.as_ref()?.provider_id.clone()
}

/// Waits for one launched NodeClaim of the test's pool.
async fn wait_launched(h: &Harness) -> NodeClaim {
    wait_for(
        "a NodeClaim launched on EC2",
        Duration::from_secs(120),
        || async {
            Ok(h.node_claims()
                .await
                .into_iter()
                .find(|c| provider_id(c).is_some_and(|p| p.starts_with("aws:///"))))
        },
    )
    .await
    .expect("the pending pod gets an EC2 instance")
}

async fn instance(aws: &AwsEnv, id: &str) -> Option<aws_sdk_ec2::types::Instance> {
    aws.ec2()
        .describe_instances()
        .instance_ids(id)
        .send()
        .await
        .ok()?
        .reservations()
        .iter()
        .flat_map(|r| r.instances())
        .find(|i| i.instance_id() == Some(id))
        .cloned()
}

fn instance_state(instance: &aws_sdk_ec2::types::Instance) -> String {
    instance
        .state()
        .and_then(|s| s.name())
        .map(|n| n.as_str().to_owned())
        .unwrap_or_default()
}

fn tags(instance: &aws_sdk_ec2::types::Instance) -> BTreeMap<String, String> {
    instance
        .tags()
        .iter()
        .filter_map(|t| Some((t.key()?.to_owned(), t.value()?.to_owned())))
        .collect()
}

/// Registers the instance's Node as its kubelet would (KWOK keeps it Ready).
async fn register_node(h: &Harness, claim: &NodeClaim) -> String {
    register_node_with(&h.client, claim).await
}

async fn register_node_with(client: &kube::Client, claim: &NodeClaim) -> String {
    let provider = provider_id(claim).expect("launched");
    let id = provider.rsplit('/').next().unwrap_or_default();
    let name = format!("ip-{id}.us-west-2.compute.internal");
    let mut labels = claim.metadata.labels.clone().unwrap_or_default();
    labels.insert("kubernetes.io/hostname".into(), name.clone());
    labels.insert("kwok.x-k8s.io/node".into(), "fake".into());
    let mut taints: Vec<Taint> = claim
        .spec
        .taints
        .iter()
        .map(|t| Taint {
            key: t.key.clone(),
            value: t.value.clone(),
            effect: t.effect.as_str().to_owned(),
            time_added: None,
        })
        .collect();
    taints.push(Taint {
        key: "karpenter.sh/unregistered".into(),
        effect: "NoExecute".into(),
        ..Taint::default()
    });
    let status = claim.status.clone().unwrap_or_default();
    let node = Node {
        metadata: ObjectMeta {
            name: Some(name.clone()),
            labels: Some(labels),
            annotations: Some(BTreeMap::from([(
                "kwok.x-k8s.io/node".to_owned(),
                "fake".to_owned(),
            )])),
            ..ObjectMeta::default()
        },
        spec: Some(NodeSpec {
            provider_id: Some(provider),
            taints: Some(taints),
            ..NodeSpec::default()
        }),
        status: Some(NodeStatus {
            capacity: status.capacity,
            allocatable: status.allocatable,
            ..NodeStatus::default()
        }),
    };
    Api::<Node>::all(client.clone())
        .create(&PostParams::default(), &node)
        .await
        .expect("registering the Node as its kubelet would");
    name
}

/// Kubelets for the test's instances: every launched NodeClaim of the test's pool gets its
/// Node registered (once), until the task is aborted.
fn spawn_kubelets(h: &Harness) -> tokio::task::JoinHandle<()> {
    let client = h.client.clone();
    let selector = h.pool_selector();
    tokio::spawn(async move {
        let mut registered = std::collections::BTreeSet::new();
        loop {
            let claims = Api::<NodeClaim>::all(client.clone())
                .list(&selector)
                .await
                .map(|l| l.items)
                .unwrap_or_default();
            for claim in claims {
                let Some(provider) = provider_id(&claim).filter(|p| p.starts_with("aws:///"))
                else {
                    continue;
                };
                if claim.metadata.deletion_timestamp.is_none() && registered.insert(provider) {
                    register_node_with(&client, &claim).await;
                }
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    })
}

/// The recorded calls against the exact policy: every one inside the contract and allowed.
fn assert_inside_the_contract(recorder: &CallRecorder, cloud: &Cloud, region: &str) {
    let scope = scope(cloud, region);
    let policy = karpenter_aws::iam::generate::controller_policy(&scope);
    let calls = recorder.calls();
    assert!(!calls.is_empty(), "the recorder saw the provider's calls");
    let findings = karpenter_aws::iam::recorded::check(&calls, &scope, &policy)
        .expect("the generated policy compiles");
    assert!(
        findings.is_empty(),
        "calls outside the IAM contract or denied by the policy:\n{}",
        findings
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join("\n")
    );
}

/// How many launch templates carry every one of the (key, value) tags.
async fn launch_templates_tagged(aws: &AwsEnv, tags: &[(&str, &str)]) -> usize {
    let mut request = aws.ec2().describe_launch_templates();
    for (key, value) in tags {
        request = request.filters(
            Filter::builder()
                .name(format!("tag:{key}"))
                .values(*value)
                .build(),
        );
    }
    let found = request.send().await.expect("listing launch templates");
    found.launch_templates().len()
}

/// Deletes the test's NodePool, NodeClaims and EC2NodeClass while the controller runs (it
/// finalizes them: the class's instance profile and launch templates go with it), then the
/// rest of the harness.
async fn finish_on_aws(h: Harness, aws: &AwsEnv, cloud: &Cloud) {
    let class = h.node_class.clone();
    let client = h.client.clone();
    let profile = Api::<EC2NodeClass>::all(client.clone())
        .get_opt(&class)
        .await
        .ok()
        .flatten()
        .and_then(|c| c.status)
        .and_then(|s| s.instance_profile);
    let _ = Api::<karpenter_api::v1::NodePool>::all(client.clone())
        .delete(&h.pool, &DeleteParams::default())
        .await;
    let _ = Api::<NodeClaim>::all(client.clone())
        .delete_collection(&DeleteParams::default(), &h.pool_selector())
        .await;
    let _ = Api::<EC2NodeClass>::all(client.clone())
        .delete(&class, &DeleteParams::default())
        .await;
    wait_for(
        "the EC2NodeClass finalized (its NodeClaims gone first)",
        Duration::from_secs(120),
        || async {
            let gone = Api::<EC2NodeClass>::all(client.clone())
                .get_opt(&class)
                .await
                .map_err(kube_error("reading the EC2NodeClass"))?
                .is_none();
            Ok(gone.then_some(()))
        },
    )
    .await
    .expect("the controller finalizes the EC2NodeClass");
    if let Some(profile) = profile {
        let found = aws
            .iam()
            .get_instance_profile()
            .instance_profile_name(&profile)
            .send()
            .await;
        assert!(
            found.is_err(),
            "the class's instance profile {profile} is deleted with it"
        );
    }
    let templates = launch_templates_tagged(
        aws,
        &[
            ("karpenter.k8s.aws/ec2nodeclass", &class),
            ("eks:eks-cluster-name", &cloud.cluster),
        ],
    )
    .await;
    assert!(
        templates == 0,
        "the class's launch templates are deleted with it"
    );
    h.finish().await;
}

#[tokio::test]
#[ignore = "needs the Kubernetes test environment with KWOK and the AWS emulator: run scripts/test-integration"]
async fn a_pending_pod_gets_an_ec2_instance_that_registers_runs_it_and_ends_with_its_nodeclaim() {
    let _classes = crate::NODE_CLASSES.write().await;
    let (aws, _shared) = AwsEnv::shared().await.expect("finding the emulator");
    let (h, cloud, recorder) = start_on_aws("aws-launch", &aws, &[]).await;
    // The NodePool and its pod come before the class: the pool is not Ready, says why, and
    // nothing launches.
    h.node_pool(None, requirements()).await;
    h.create_deployment("web", 1, "500m").await;
    let not_found = h
        .wait_pool_condition(
            &h.pool,
            "NodeClassReady",
            "False",
            Some("NodeClassNotFound"),
        )
        .await;
    assert_eq!(not_found.message, "NodeClass not found on cluster");
    h.wait_pool_condition(&h.pool, "Ready", "False", Some("UnhealthyDependents"))
        .await;
    h.wait_pod_event(
        "FailedScheduling",
        &[
            &format!("nodepool {}: not ready", h.pool),
            "NodeClassNotFound",
        ],
    )
    .await;
    assert!(
        h.node_claims().await.is_empty(),
        "nothing launches for a pool that is not Ready"
    );

    create_node_class(&h, &cloud, "al2023@latest").await;
    let class = wait_class_ready(&h).await;
    h.wait_pool_condition(&h.pool, "Ready", "True", Some("Ready"))
        .await;
    let status = class.status.clone().unwrap_or_default();
    let subnets: Vec<String> = status
        .subnets
        .iter()
        .flatten()
        .map(|s| s.id.clone())
        .collect();
    assert_eq!(subnets.len(), 3, "the three tagged subnets: {status:?}");
    assert_eq!(
        status
            .security_groups
            .iter()
            .flatten()
            .map(|g| g.id.clone())
            .collect::<Vec<_>>(),
        std::slice::from_ref(&cloud.security_group)
    );
    let amis = status.amis.clone().unwrap_or_default();
    assert_eq!(amis.len(), 5, "AL2023's five variants: {amis:?}");
    let profile = status
        .instance_profile
        .clone()
        .expect("an instance profile");
    let described = aws
        .iam()
        .get_instance_profile()
        .instance_profile_name(&profile)
        .send()
        .await
        .expect("the instance profile exists")
        .instance_profile
        .expect("a profile");
    assert_eq!(
        described.path(),
        format!(
            "/karpenter/us-west-2/{}/{}/",
            cloud.cluster,
            class.metadata.uid.clone().unwrap_or_default()
        )
    );
    assert_eq!(
        described
            .roles()
            .iter()
            .map(|r| r.role_name().to_owned())
            .collect::<Vec<_>>(),
        std::slice::from_ref(&cloud.role)
    );
    assert!(
        class
            .metadata
            .finalizers
            .iter()
            .flatten()
            .any(|f| f == "karpenter.k8s.aws/termination"),
        "the class carries its finalizer"
    );
    let annotations = class.metadata.annotations.clone().unwrap_or_default();
    assert!(annotations.contains_key("karpenter.k8s.aws/ec2nodeclass-hash"));

    let claim = wait_launched(&h).await;
    let provider = provider_id(&claim).expect("launched");
    let id = provider.rsplit('/').next().unwrap_or_default().to_owned();
    let launched = instance(&aws, &id)
        .await
        .expect("the instance exists in EC2");
    let instance_tags = tags(&launched);
    for (key, value) in [
        (
            format!("kubernetes.io/cluster/{}", cloud.cluster),
            "owned".to_owned(),
        ),
        ("eks:eks-cluster-name".to_owned(), cloud.cluster.clone()),
        ("karpenter.sh/nodepool".to_owned(), h.pool.clone()),
        (
            "karpenter.k8s.aws/ec2nodeclass".to_owned(),
            h.node_class.clone(),
        ),
        ("team".to_owned(), "testenv".to_owned()),
    ] {
        assert_eq!(
            instance_tags.get(&key),
            Some(&value),
            "instance tag {key}: {instance_tags:?}"
        );
    }
    assert!(
        subnets
            .iter()
            .any(|s| Some(s.as_str()) == launched.subnet_id()),
        "launched into a selected subnet: {:?}",
        launched.subnet_id()
    );
    let image = claim.status.as_ref().and_then(|s| s.image_id.clone());
    assert_eq!(
        launched.image_id().map(str::to_owned),
        image,
        "the image the NodeClaim reports"
    );
    assert!(
        amis.iter().any(|a| Some(&a.id) == image.as_ref()),
        "an AMI of the class: {image:?}"
    );
    let claim_annotations = claim.metadata.annotations.clone().unwrap_or_default();
    assert_eq!(
        claim_annotations.get("karpenter.k8s.aws/ec2nodeclass-hash"),
        annotations.get("karpenter.k8s.aws/ec2nodeclass-hash")
    );
    assert_eq!(
        claim_annotations.get("karpenter.k8s.aws/instance-profile-name"),
        Some(&profile)
    );
    let templates = aws
        .ec2()
        .describe_launch_templates()
        .filters(
            Filter::builder()
                .name("tag:eks:eks-cluster-name")
                .values(&cloud.cluster)
                .build(),
        )
        .send()
        .await
        .expect("listing launch templates");
    let names: Vec<String> = templates
        .launch_templates()
        .iter()
        .filter_map(|t| t.launch_template_name().map(str::to_owned))
        .collect();
    assert!(
        !names.is_empty() && names.iter().all(|n| n.starts_with("karpenter.k8s.aws/")),
        "launch templates named as upstream: {names:?}"
    );

    register_node(&h, &claim).await;
    h.wait_running(1, Duration::from_secs(120)).await;
    wait_for(
        "the NodeClaim registered and initialized",
        Duration::from_secs(60),
        || async {
            let claims = h.node_claims().await;
            let done = claims.iter().any(|c| {
                let conditions = c.status.as_ref().and_then(|s| s.conditions.as_deref());
                ["Registered", "Initialized"]
                    .iter()
                    .all(|t| condition(conditions, t).is_some_and(|c| c.status == "True"))
            });
            Ok(done.then_some(()))
        },
    )
    .await
    .expect("the node registers and initializes");
    h.wait_pool_condition(&h.pool, "NodeRegistrationHealthy", "True", None)
        .await;
    let node_name = wait_for(
        "the instance tagged with its Node and NodeClaim, the NodeClaim annotated",
        Duration::from_secs(60),
        || async {
            let claim = Api::<NodeClaim>::all(h.client.clone())
                .get(claim.metadata.name.as_deref().unwrap_or_default())
                .await
                .map_err(kube_error("reading the NodeClaim"))?;
            let annotated = claim
                .metadata
                .annotations
                .as_ref()
                .and_then(|a| a.get("karpenter.k8s.aws/tagged"))
                .is_some_and(|v| v == "true");
            let node = claim.status.as_ref().and_then(|s| s.node_name.clone());
            let tags = instance(&aws, &id)
                .await
                .map(|i| tags(&i))
                .unwrap_or_default();
            let tagged = node.is_some()
                && tags.get("Name") == node.as_ref()
                && tags.get("karpenter.sh/nodeclaim") == claim.metadata.name.as_ref();
            Ok((annotated && tagged).then_some(node))
        },
    )
    .await
    .expect("the tagging controller tags the registered instance");
    assert!(node_name.is_some());

    // Deleting the NodeClaim (the workload gone first, so nothing asks for a new one)
    // terminates the instance.
    h.scale("web", 0).await;
    let name = claim.metadata.name.clone().unwrap_or_default();
    Api::<NodeClaim>::all(h.client.clone())
        .delete(&name, &DeleteParams::default())
        .await
        .expect("deleting the NodeClaim");
    wait_for(
        "the instance terminated and the NodeClaim gone",
        Duration::from_secs(120),
        || async {
            let state = instance(&aws, &id).await.map(|i| instance_state(&i));
            let claim_gone = Api::<NodeClaim>::all(h.client.clone())
                .get_opt(&name)
                .await
                .map_err(kube_error("reading the NodeClaim"))?
                .is_none();
            Ok((claim_gone
                && matches!(
                    state.as_deref(),
                    Some("shutting-down" | "terminated") | None
                ))
            .then_some(()))
        },
    )
    .await
    .expect("the instance goes with its NodeClaim");

    assert_inside_the_contract(&recorder, &cloud, aws.region());
    finish_on_aws(h, &aws, &cloud).await;
}

#[tokio::test]
#[ignore = "needs the Kubernetes test environment with KWOK and the AWS emulator: run scripts/test-integration"]
async fn a_leaked_instance_is_collected_and_a_changed_ami_alias_drifts_the_node() {
    let _classes = crate::NODE_CLASSES.write().await;
    let (aws, _shared) = AwsEnv::shared().await.expect("finding the emulator");
    let (h, cloud, recorder) = start_on_aws("aws-gc-drift", &aws, &[]).await;
    create_node_class(&h, &cloud, "al2023@latest").await;
    let class = wait_class_ready(&h).await;
    // Budgets of zero: drift is observed, nothing is replaced.
    h.node_pool_disrupting(
        serde_json::json!({"consolidateAfter": "Never", "budgets": [{"nodes": "0"}]}),
        requirements(),
    )
    .await;
    h.create_deployment("web", 1, "500m").await;
    let claim = wait_launched(&h).await;
    register_node(&h, &claim).await;
    h.wait_running(1, Duration::from_secs(120)).await;

    // An instance tagged as ours that no NodeClaim claims.
    let image = class
        .status
        .as_ref()
        .and_then(|s| s.amis.as_ref())
        .and_then(|a| a.first())
        .map(|a| a.id.clone())
        .expect("an AMI");
    let ours = |key: &str, value: &str| Tag::builder().key(key).value(value).build();
    let leaked = aws
        .ec2()
        .run_instances()
        .image_id(&image)
        .instance_type(aws_sdk_ec2::types::InstanceType::M5Large)
        .min_count(1)
        .max_count(1)
        .subnet_id(&cloud.subnets[0].0)
        .tag_specifications(
            TagSpecification::builder()
                .resource_type(ResourceType::Instance)
                .tags(ours(
                    &format!("kubernetes.io/cluster/{}", cloud.cluster),
                    "owned",
                ))
                .tags(ours("eks:eks-cluster-name", &cloud.cluster))
                .tags(ours("karpenter.sh/nodepool", &h.pool))
                .tags(ours("karpenter.k8s.aws/ec2nodeclass", &h.node_class))
                .build(),
        )
        .send()
        .await
        .expect("launching a leaked instance")
        .instances()
        .first()
        .and_then(|i| i.instance_id().map(str::to_owned))
        .expect("an instance id");
    wait_for(
        "the leaked instance terminated by garbage collection",
        Duration::from_secs(150),
        || async {
            let state = instance(&aws, &leaked).await.map(|i| instance_state(&i));
            Ok(matches!(
                state.as_deref(),
                Some("shutting-down" | "terminated") | None
            )
            .then_some(()))
        },
    )
    .await
    .expect("garbage collection terminates instances no NodeClaim claims");
    let launched_id = provider_id(&claim).unwrap_or_default();
    let launched_id = launched_id.rsplit('/').next().unwrap_or_default();
    assert_eq!(
        instance(&aws, launched_id)
            .await
            .map(|i| instance_state(&i))
            .as_deref(),
        Some("running"),
        "the claimed instance stays"
    );

    // A new alias: the node is drifted (the AMI family is part of the class hash, and every
    // AMI changes).
    Api::<EC2NodeClass>::all(h.client.clone())
        .patch(
            &h.node_class,
            &PatchParams::default(),
            &Patch::Merge(serde_json::json!({"spec": {"amiSelectorTerms": [{"alias": "bottlerocket@latest"}]}})),
        )
        .await
        .expect("changing the alias");
    let name = claim.metadata.name.clone().unwrap_or_default();
    let drifted = wait_for(
        "the NodeClaim Drifted",
        Duration::from_secs(120),
        || async {
            let claim = Api::<NodeClaim>::all(h.client.clone())
                .get(&name)
                .await
                .map_err(kube_error("reading the NodeClaim"))?;
            let drifted = condition(
                claim.status.as_ref().and_then(|s| s.conditions.as_deref()),
                "Drifted",
            )
            .filter(|c| c.status == "True")
            .cloned();
            Ok(drifted)
        },
    )
    .await
    .expect("a changed alias drifts the node");
    assert!(
        ["NodeClassDrift", "AMIDrift"].contains(&drifted.reason.as_str()),
        "{drifted:?}"
    );
    assert_inside_the_contract(&recorder, &cloud, aws.region());
    finish_on_aws(h, &aws, &cloud).await;
}

#[tokio::test]
#[ignore = "needs the Kubernetes test environment with KWOK and the AWS emulator: run scripts/test-integration"]
async fn a_missing_permission_is_named_on_the_class_before_any_launch_and_nothing_is_half_created()
{
    let _classes = crate::NODE_CLASSES.write().await;
    let (aws, _shared) = AwsEnv::shared().await.expect("finding the emulator");
    // The statement that allows creating launch templates (and launching) is left out.
    let (h, cloud, _recorder) = start_on_aws(
        "aws-denied",
        &aws,
        &["AllowScopedEC2InstanceActionsWithTags"],
    )
    .await;
    create_node_class(&h, &cloud, "al2023@latest").await;
    // Upstream's validation: the class's authorization checks find the refused call, so the
    // class is not Ready and no NodeClaim is made for it.
    let api = Api::<EC2NodeClass>::all(h.client.clone());
    let validation = wait_for(
        "ValidationSucceeded False naming ec2:CreateLaunchTemplate",
        Duration::from_secs(120),
        || async {
            let class = api
                .get(&h.node_class)
                .await
                .map_err(kube_error("reading the EC2NodeClass"))?;
            Ok(condition(
                class.status.as_ref().and_then(|s| s.conditions.as_deref()),
                "ValidationSucceeded",
            )
            .filter(|c| c.status == "False")
            .cloned())
        },
    )
    .await
    .expect("the class says what it may not do");
    assert_eq!(validation.reason, "CreateLaunchTemplateAuthCheckFailed");
    assert!(
        validation
            .message
            .starts_with("Controller isn't authorized to call ec2:CreateLaunchTemplate")
            && validation.message.contains("karpenter iam policy"),
        "the message names the call and where the policy comes from: {}",
        validation.message
    );
    h.node_pool(None, requirements()).await;
    h.create_deployment("web", 1, "500m").await;
    h.wait_pool_condition(&h.pool, "Ready", "False", Some("UnhealthyDependents"))
        .await;
    assert!(
        h.node_claims().await.is_empty(),
        "no NodeClaim is made for a class that is not Ready"
    );
    let instances = aws
        .ec2()
        .describe_instances()
        .filters(
            Filter::builder()
                .name("tag:eks:eks-cluster-name")
                .values(&cloud.cluster)
                .build(),
        )
        .send()
        .await
        .expect("listing instances");
    let count = instances
        .reservations()
        .iter()
        .flat_map(|r| r.instances())
        .count();
    assert_eq!(count, 0, "no instance was launched");
    let templates =
        launch_templates_tagged(&aws, &[("eks:eks-cluster-name", &cloud.cluster)]).await;
    assert!(templates == 0, "no launch template was made");
    let _ = Api::<k8s_openapi::api::apps::v1::Deployment>::namespaced(
        h.client.clone(),
        h.scope.namespace(),
    )
    .delete("web", &DeleteParams::default())
    .await;
    finish_on_aws(h, &aws, &cloud).await;
}

#[tokio::test]
#[ignore = "needs the Kubernetes test environment with KWOK and the AWS emulator: run scripts/test-integration"]
async fn calls_denied_while_resolving_a_node_class_are_named_in_its_conditions_and_an_event() {
    let _classes = crate::NODE_CLASSES.write().await;
    let (aws, _shared) = AwsEnv::shared().await.expect("finding the emulator");
    // The statements that allow reading AMI aliases from SSM and reading instance profiles.
    let (h, cloud, _recorder) = start_on_aws(
        "aws-denied-resolve",
        &aws,
        &["AllowSSMReadActions", "AllowInstanceProfileReadActions"],
    )
    .await;
    create_node_class(&h, &cloud, "al2023@latest").await;
    let api = Api::<EC2NodeClass>::all(h.client.clone());
    let (amis, profile) = wait_for(
        "AMIsReady and InstanceProfileReady Unknown, each naming its denied call",
        Duration::from_secs(90),
        || async {
            let class = api
                .get(&h.node_class)
                .await
                .map_err(kube_error("reading the EC2NodeClass"))?;
            let list = class.status.as_ref().and_then(|s| s.conditions.as_deref());
            let named = |type_: &str, call: &str| {
                condition(list, type_)
                    .filter(|c| c.status == "Unknown" && c.message.contains(call))
                    .map(|c| (c.reason.clone(), c.message.clone()))
            };
            Ok(named("AMIsReady", "ssm:GetParameter")
                .zip(named("InstanceProfileReady", "iam:GetInstanceProfile")))
        },
    )
    .await
    .expect("the denied calls show in the class's conditions");
    assert_eq!(amis.0, "AMIsResolutionFailed", "{amis:?}");
    assert_eq!(profile.0, "InstanceProfileCreationFailed", "{profile:?}");
    for (_, message) in [&amis, &profile] {
        assert!(
            message.contains("access denied") && message.contains("karpenter iam policy"),
            "the message says the call was denied and where the policy comes from: {message}"
        );
    }
    let event = wait_for(
        "a NodeClassNotReady event on the class naming both calls",
        Duration::from_secs(30),
        || async {
            let events = Api::<Event>::namespaced(h.client.clone(), "default")
                .list(
                    &ListParams::default().fields(&format!("involvedObject.name={}", h.node_class)),
                )
                .await
                .map_err(kube_error("listing events"))?;
            Ok(events.items.into_iter().find(|e| {
                e.reason.as_deref() == Some("NodeClassNotReady")
                    && e.message.as_deref().is_some_and(|m| {
                        m.contains("ssm:GetParameter") && m.contains("iam:GetInstanceProfile")
                    })
            }))
        },
    )
    .await
    .expect("the class has an event naming the denied calls");
    assert_eq!(event.type_.as_deref(), Some("Warning"));
    // A NodePool of the class is not Ready and says why, as the class does.
    h.node_pool(None, requirements()).await;
    let class = api
        .get(&h.node_class)
        .await
        .expect("reading the EC2NodeClass");
    let class_ready = condition(
        class.status.as_ref().and_then(|s| s.conditions.as_deref()),
        "Ready",
    )
    .cloned()
    .expect("the class reports Ready");
    let expected = if class_ready.status == "False" {
        class_ready.reason.clone()
    } else {
        "NodeClassReadinessUnknown".to_owned()
    };
    h.wait_pool_condition(&h.pool, "NodeClassReady", "False", Some(&expected))
        .await;
    h.wait_pool_condition(&h.pool, "Ready", "False", Some("UnhealthyDependents"))
        .await;
    // The whole policy again, so the class can be finalized (its finalizer must read the
    // instance profile it may have made).
    let policy = karpenter_aws::iam::generate::controller_policy(&scope(&cloud, aws.region()));
    aws.iam()
        .put_user_policy()
        .user_name(format!("{}-controller", cloud.cluster))
        .policy_name("KarpenterControllerPolicy")
        .policy_document(enforceable(&policy, &[]))
        .send()
        .await
        .expect("restoring the controller policy");
    finish_on_aws(h, &aws, &cloud).await;
}

/// The instances of `cluster` that are pending or running, by id.
async fn live_instances(aws: &AwsEnv, cluster: &str) -> BTreeMap<String, String> {
    let out = aws
        .ec2()
        .describe_instances()
        .filters(
            Filter::builder()
                .name("tag:eks:eks-cluster-name")
                .values(cluster)
                .build(),
        )
        .send()
        .await
        .expect("listing instances");
    out.reservations()
        .iter()
        .flat_map(|r| r.instances())
        .filter(|i| matches!(instance_state(i).as_str(), "pending" | "running"))
        .filter_map(|i| Some((i.instance_id()?.to_owned(), instance_state(i))))
        .collect()
}

/// The ceiling of EC2 requests (retries and the start-up listings included) per launched
/// node when a fifth of them fail, documented in docs/testing.md#faults (measured: 6.2).
const EC2_REQUESTS_PER_NODE_CEILING: f64 = 15.0;

#[tokio::test]
#[ignore = "needs the Kubernetes test environment with KWOK and the AWS emulator: run scripts/test-integration"]
async fn with_a_fifth_of_ec2_calls_failing_every_pod_is_placed_nothing_leaks_and_retries_are_bounded()
 {
    let _classes = crate::NODE_CLASSES.write().await;
    let (aws, _shared) = AwsEnv::shared().await.expect("finding the emulator");
    let seed: u64 = std::env::var("FAULTS_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(20_261_127);
    tracing::info!(seed, "failing cloud: FAULTS_SEED={seed} repeats this run");
    let (h, cloud, _recorder) = start_on_aws_faulty(
        "aws-faults",
        &aws,
        &[],
        false,
        Some(serde_json::json!({
            "rate": 0.2, "seed": seed, "services": ["ec2"],
            "kinds": ["throttle", "unavailable", "timeout", "lost"], "timeout_seconds": 12
        })),
        &[],
    )
    .await;
    create_node_class(&h, &cloud, "al2023@latest").await;
    wait_class_ready(&h).await;
    h.node_pool(None, super::only(&["c5.large"])).await;
    let kubelets = spawn_kubelets(&h);
    // Every NodeClaim whose launch failed must say why: watched until the pods run.
    let failures = std::sync::Arc::new(std::sync::Mutex::new(BTreeMap::<String, String>::new()));
    let watcher = {
        let (client, selector, failures) = (
            h.client.clone(),
            h.pool_selector(),
            std::sync::Arc::clone(&failures),
        );
        tokio::spawn(async move {
            loop {
                let claims = Api::<NodeClaim>::all(client.clone())
                    .list(&selector)
                    .await
                    .map(|l| l.items)
                    .unwrap_or_default();
                for claim in claims {
                    let launched = condition(
                        claim.status.as_ref().and_then(|s| s.conditions.as_deref()),
                        "Launched",
                    );
                    if let Some(c) = launched.filter(|c| c.status == "False")
                        && let Ok(mut seen) = failures.lock()
                    {
                        seen.insert(
                            claim.metadata.name.clone().unwrap_or_default(),
                            format!("{}: {}", c.reason, c.message),
                        );
                    }
                }
                tokio::time::sleep(Duration::from_millis(300)).await;
            }
        })
    };
    // c5.large holds one 1500m pod: 6 pods, 6 launches.
    h.create_deployment("web", 6, "1500m").await;
    h.wait_running(6, Duration::from_secs(300)).await;
    watcher.abort();
    // Nothing leaked: once the collector has had its turn (30 s grace, 30 s interval), the
    // live instances are exactly the NodeClaims' (a launch whose answer was lost made one
    // nobody claims).
    let claimed = wait_for(
        "the live instances exactly those of the NodeClaims",
        Duration::from_secs(150),
        || async {
            let claims = h.node_claims().await;
            let ids: std::collections::BTreeSet<String> = claims
                .iter()
                .filter_map(provider_id)
                .filter_map(|p| p.rsplit('/').next().map(str::to_owned))
                .collect();
            let live = live_instances(&aws, &cloud.cluster).await;
            let live: std::collections::BTreeSet<String> = live.into_keys().collect();
            Ok((claims.len() == 6 && ids == live).then_some(ids))
        },
    )
    .await
    .expect("every pod placed, no instance leaked");
    kubelets.abort();
    let report = aws
        .fault_report(&cloud.controller_key)
        .await
        .expect("the emulator's fault report");
    let counts = report["counts"].as_object().cloned().unwrap_or_default();
    let (mut ec2_requests, mut faults) = (0u64, 0u64);
    for (action, count) in &counts {
        if action.starts_with("ec2:") {
            ec2_requests += count["requests"].as_u64().unwrap_or_default();
            faults += count["faults"]
                .as_object()
                .map(|f| {
                    f.values()
                        .filter_map(serde_json::Value::as_u64)
                        .sum::<u64>()
                })
                .unwrap_or_default();
        }
    }
    let per_node = ec2_requests as f64 / claimed.len() as f64;
    tracing::info!(
        ec2_requests,
        faults,
        nodes = claimed.len(),
        per_node,
        report = %serde_json::to_string(&report).unwrap_or_default(),
        "failing cloud: EC2 requests per launched node"
    );
    assert!(faults > 0, "faults were injected: {report}");
    assert!(
        per_node <= EC2_REQUESTS_PER_NODE_CEILING,
        "{per_node:.1} EC2 requests per launched node (ceiling {EC2_REQUESTS_PER_NODE_CEILING}): {report}"
    );
    let failures = failures.lock().map(|f| f.clone()).unwrap_or_default();
    for (claim, why) in &failures {
        assert!(
            why.contains("ec2:"),
            "NodeClaim {claim}'s failed launch names the EC2 call and its error: {why}"
        );
    }
    tracing::info!(
        failed_launches = failures.len(),
        ?failures,
        "failing cloud: failed launches said why"
    );
    aws.inject_faults(&serde_json::json!({"access_key_id": cloud.controller_key, "rate": 0.0}))
        .await
        .expect("clearing the faults");
    finish_on_aws(h, &aws, &cloud).await;
}

#[tokio::test]
#[ignore = "needs the Kubernetes test environment with KWOK and the AWS emulator: run scripts/test-integration"]
async fn ec2_failing_while_the_controller_starts_delays_it_and_does_not_stop_it() {
    let _classes = crate::NODE_CLASSES.write().await;
    let (aws, _shared) = AwsEnv::shared().await.expect("finding the emulator");
    let (mut h, cloud, _recorder) = start_on_aws_faulty(
        "aws-start-faults",
        &aws,
        &[],
        false,
        Some(serde_json::json!({
            "rate": 1.0, "seed": 1, "services": ["ec2"], "kinds": ["unavailable"]
        })),
        &[],
    )
    .await;
    // Each start lists the instance types (the SDK tries 3 times): two starts' worth of
    // requests means the first failed start was tried again.
    let report = wait_for(
        "the controller's start tried again after EC2 failed it",
        Duration::from_secs(60),
        || async {
            let report = aws.fault_report(&cloud.controller_key).await?;
            let listed = report["counts"]["ec2:DescribeInstanceTypes"]["requests"]
                .as_u64()
                .unwrap_or_default();
            Ok((listed >= 6).then_some(report))
        },
    )
    .await
    .expect("the start is tried again");
    assert!(
        h.controllers[0].done.try_recv().is_err(),
        "the controller still runs after its start failed twice: {report}"
    );
    aws.inject_faults(&serde_json::json!({"access_key_id": cloud.controller_key, "rate": 0.0}))
        .await
        .expect("clearing the faults");
    create_node_class(&h, &cloud, "al2023@latest").await;
    wait_class_ready(&h).await;
    h.node_pool(None, super::only(&["c5.large"])).await;
    let kubelets = spawn_kubelets(&h);
    h.create_deployment("web", 1, "1500m").await;
    h.wait_running(1, Duration::from_secs(120)).await;
    kubelets.abort();
    finish_on_aws(h, &aws, &cloud).await;
}

fn spot_interruption(instance_id: &str, zone: &str) -> String {
    serde_json::json!({
        "version": "0",
        "id": "7e5527d7-bb36-4607-3370-4164db56a40e",
        "detail-type": "EC2 Spot Instance Interruption Warning",
        "source": "aws.ec2",
        "account": "123456789012",
        "time": "2026-11-26T03:50:00Z",
        "region": "us-west-2",
        "resources": [format!("arn:aws:ec2:{zone}:instance/{instance_id}")],
        "detail": {"instance-id": instance_id, "instance-action": "terminate"}
    })
    .to_string()
}

#[tokio::test]
#[ignore = "needs the Kubernetes test environment with KWOK and the AWS emulator: run scripts/test-integration"]
async fn a_spot_interruption_of_an_ec2_instance_replaces_it_and_terminates_it() {
    let _classes = crate::NODE_CLASSES.write().await;
    let (aws, _shared) = AwsEnv::shared().await.expect("finding the emulator");
    let (h, cloud, recorder) = start_on_aws_with("aws-interruption", &aws, &[], true).await;
    create_node_class(&h, &cloud, "al2023@latest").await;
    wait_class_ready(&h).await;
    h.node_pool(
        None,
        serde_json::json!([
            {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["spot"]},
            {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": ["c5.large"]}
        ]),
    )
    .await;
    let kubelets = spawn_kubelets(&h);
    h.create_deployment("web", 1, "1500m").await;
    h.wait_running(1, Duration::from_secs(120)).await;
    let claim = wait_launched(&h).await;
    let old = claim.metadata.name.clone().unwrap_or_default();
    let zone = super::claim_label(&claim, "topology.kubernetes.io/zone");
    assert_eq!(
        super::claim_label(&claim, "karpenter.sh/capacity-type"),
        "spot"
    );
    let provider = provider_id(&claim).unwrap_or_default();
    let id = provider.rsplit('/').next().unwrap_or_default().to_owned();
    top_prices_the_spot_node_from_aws(&h, &aws, &claim).await;
    aws.sqs()
        .send_message()
        .queue_url(
            aws.sqs()
                .get_queue_url()
                .queue_name(&cloud.cluster)
                .send()
                .await
                .expect("the queue URL")
                .queue_url
                .unwrap_or_default(),
        )
        .message_body(spot_interruption(&id, &zone))
        .send()
        .await
        .expect("sending the interruption");
    let replacement = wait_for(
        "a replacement in another zone, the pod running there, the interrupted instance terminated",
        Duration::from_secs(180),
        || async {
            let claims = h.node_claims().await;
            let fresh: Vec<&NodeClaim> = claims
                .iter()
                .filter(|c| c.metadata.name.as_deref() != Some(old.as_str()))
                .collect();
            let home = fresh
                .first()
                .and_then(|c| c.status.as_ref()?.node_name.clone());
            let running = home.is_some()
                && h.pods().await.iter().any(|p| {
                    p.spec.as_ref().and_then(|s| s.node_name.clone()) == home
                        && p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running")
                });
            let state = instance(&aws, &id).await.map(|i| instance_state(&i));
            let terminated = matches!(
                state.as_deref(),
                Some("shutting-down" | "terminated") | None
            );
            Ok(
                (claims.len() == 1 && fresh.len() == 1 && running && terminated)
                    .then(|| fresh[0].clone()),
            )
        },
    )
    .await
    .expect("the interruption is handled on EC2");
    assert_ne!(
        super::claim_label(&replacement, "topology.kubernetes.io/zone"),
        zone,
        "the interrupted offering is avoided for a while"
    );
    kubelets.abort();
    assert_inside_the_contract(&recorder, &cloud, aws.region());
    finish_on_aws(h, &aws, &cloud).await;
}

/// `karpenter top --pricing aws`, with the emulator's credentials, prices the spot node at
/// EC2's spot price history (the emulator answers 0.00001 for every type and zone, far from
/// any embedded price) and tells where each price came from; the emulator serves no Pricing
/// API, so on-demand prices fall back to the embedded catalog, saying why.
async fn top_prices_the_spot_node_from_aws(h: &Harness, aws: &AwsEnv, claim: &NodeClaim) {
    let selector = format!("karpenter.sh/nodepool={}", h.pool);
    let out = std::process::Command::new(super::top::karpenter_binary())
        .args([
            "top",
            "--once",
            "-o",
            "json",
            "--no-controller",
            "--pricing",
            "aws",
            "--node-selector",
            &selector,
            "--kubeconfig",
        ])
        .arg(h.env.kubeconfig_path())
        .envs(aws.process_env())
        .output()
        .expect("running karpenter top");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "karpenter top --pricing aws: {stderr}"
    );
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).expect("top's JSON");
    let rows = json["nodes"].as_array().cloned().unwrap_or_default();
    assert_eq!(
        rows.len(),
        1,
        "the pool's one node (or its NodeClaim): {json}"
    );
    let row = &rows[0];
    assert_eq!(
        row["instanceType"],
        super::claim_label(claim, "node.kubernetes.io/instance-type"),
        "{row}"
    );
    assert_eq!(row["capacityType"], "spot", "{row}");
    assert_eq!(
        row["price"].as_f64(),
        Some(0.00001),
        "the spot price history's price: {row}"
    );
    let pricing = json["pricing"].as_str().unwrap_or_default();
    assert!(
        pricing.starts_with("on-demand: embedded catalog (Pricing API: ")
            && pricing.contains("; spot: EC2 spot price history ("),
        "{pricing}"
    );
}

/// The `kube-system/kube-dns` Service (made when the control plane has none, as the test
/// environment runs no cluster DNS): its cluster IP, and whether this test made it.
async fn ensure_kube_dns(client: &kube::Client) -> (String, bool) {
    let services =
        Api::<k8s_openapi::api::core::v1::Service>::namespaced(client.clone(), "kube-system");
    let existing = services
        .get_opt("kube-dns")
        .await
        .expect("reading kube-system/kube-dns");
    let (service, made) = match existing {
        Some(service) => (service, false),
        None => {
            let service: k8s_openapi::api::core::v1::Service =
                serde_json::from_value(serde_json::json!({
                    "apiVersion": "v1", "kind": "Service",
                    "metadata": {"name": "kube-dns", "namespace": "kube-system",
                                 "labels": {"k8s-app": "kube-dns"}},
                    "spec": {"selector": {"k8s-app": "kube-dns"},
                             "ports": [{"name": "dns", "port": 53, "protocol": "UDP"}]}
                }))
                .expect("the kube-dns Service parses");
            (
                services
                    .create(&PostParams::default(), &service)
                    .await
                    .expect("creating kube-system/kube-dns"),
                true,
            )
        }
    };
    let ip = service
        .spec
        .and_then(|s| s.cluster_ip)
        .expect("the API server gives kube-dns a cluster IP");
    (ip, made)
}

#[tokio::test]
#[ignore = "needs the Kubernetes test environment with KWOK and the AWS emulator: run scripts/test-integration"]
async fn a_class_with_a_placement_group_launches_dedicated_into_it_with_the_kube_dns_address() {
    let _classes = crate::NODE_CLASSES.write().await;
    let (aws, _shared) = AwsEnv::shared().await.expect("finding the emulator");
    // The controller reads kube-dns once, at start: it must exist first.
    let env = karpenter_testenv::KubeEnv::connect()
        .await
        .expect("connecting to the test environment");
    let (dns_ip, made_dns) = ensure_kube_dns(&env.client()).await;
    let (h, cloud, recorder) = start_on_aws("aws-placement", &aws, &[]).await;
    // A partition placement group (the emulator's extension: testenv/README.md).
    let group_name = format!("{}-pg", cloud.cluster);
    aws.ec2()
        .create_placement_group()
        .group_name(&group_name)
        .strategy(aws_sdk_ec2::types::PlacementStrategy::Partition)
        .partition_count(3)
        .send()
        .await
        .expect("creating the placement group");
    let group_id = aws
        .ec2()
        .describe_placement_groups()
        .group_names(&group_name)
        .send()
        .await
        .expect("describing the placement group")
        .placement_groups()
        .first()
        .and_then(|g| g.group_id().map(str::to_owned))
        .expect("a placement group id");
    create_node_class_with(
        &h,
        &cloud,
        "al2023@latest",
        serde_json::json!({"placementGroupSelector": {"name": group_name}}),
    )
    .await;
    let class = wait_class_ready(&h).await;
    let pg_ready = condition(
        class.status.as_ref().and_then(|s| s.conditions.as_deref()),
        "PlacementGroupReady",
    )
    .cloned()
    .expect("a PlacementGroupReady condition");
    assert_eq!(pg_ready.status, "True", "{pg_ready:?}");
    // Dedicated tenancy, required by the pool (a well-known label since upstream v1.15).
    let mut wanted = requirements();
    if let Some(list) = wanted.as_array_mut() {
        list.push(serde_json::json!(
            {"key": "karpenter.k8s.aws/instance-tenancy", "operator": "In", "values": ["dedicated"]}
        ));
    }
    h.node_pool(None, wanted).await;
    h.create_deployment("web", 1, "500m").await;
    let claim = wait_launched(&h).await;
    let label = |key: &str| super::claim_label(&claim, key);
    assert_eq!(label("karpenter.k8s.aws/placement-group-id"), group_id);
    assert_eq!(label("karpenter.k8s.aws/instance-tenancy"), "dedicated");
    assert_eq!(
        label("karpenter.k8s.aws/placement-group-partition"),
        "",
        "EC2 chooses the partition: upstream's sentinel until registration"
    );

    // CreateFleet launched from a template that carries the group, the tenancy and the
    // cluster DNS.
    let calls = recorder.calls();
    assert!(
        calls
            .iter()
            .any(|c| c.operation == "DescribePlacementGroups" && c.succeeded),
        "the class's placement group was described"
    );
    let fleet_templates: Vec<String> = calls
        .iter()
        .filter(|c| c.operation == "CreateFleet" && c.succeeded)
        .flat_map(|c| c.ids.launch_template_names.clone())
        .collect();
    assert!(
        !fleet_templates.is_empty(),
        "a CreateFleet named its templates"
    );
    for name in &fleet_templates {
        let versions = aws
            .ec2()
            .describe_launch_template_versions()
            .launch_template_name(name)
            .versions("$Latest")
            .send()
            .await
            .expect("describing the launch template");
        let data = versions
            .launch_template_versions()
            .first()
            .and_then(|v| v.launch_template_data())
            .cloned()
            .expect("launch template data");
        let placement = data.placement().cloned().expect("a placement");
        assert_eq!(placement.group_id(), Some(group_id.as_str()), "{name}");
        assert_eq!(placement.tenancy().map(|t| t.as_str()), Some("dedicated"));
        let user_data = aws_smithy_types::base64::decode(data.user_data().unwrap_or_default())
            .expect("base64 user data");
        let user_data = String::from_utf8_lossy(&user_data);
        assert!(
            user_data.contains("clusterDNS:") && user_data.contains(&dns_ip),
            "the kube-dns address {dns_ip} is the nodes' cluster DNS:\n{user_data}"
        );
    }
    // The instance is in the group, dedicated; registration labels its NodeClaim and Node with
    // the partition EC2 chose (upstream's registration hook).
    let provider = provider_id(&claim).expect("launched");
    let id = provider.rsplit('/').next().unwrap_or_default().to_owned();
    let launched = instance(&aws, &id).await.expect("the instance exists");
    let placement = launched.placement().cloned().expect("a placement");
    assert_eq!(placement.group_id(), Some(group_id.as_str()));
    assert_eq!(placement.tenancy().map(|t| t.as_str()), Some("dedicated"));
    let partition = placement
        .partition_number()
        .map(|p| p.to_string())
        .expect("a partition");
    let node_name = register_node(&h, &claim).await;
    h.wait_running(1, Duration::from_secs(120)).await;
    let name = claim.metadata.name.clone().unwrap_or_default();
    let registered = Api::<NodeClaim>::all(h.client.clone())
        .get(&name)
        .await
        .expect("the NodeClaim");
    assert_eq!(
        super::claim_label(&registered, "karpenter.k8s.aws/placement-group-partition"),
        partition
    );
    let node = Api::<Node>::all(h.client.clone())
        .get(&node_name)
        .await
        .expect("the Node");
    assert_eq!(
        node.metadata
            .labels
            .as_ref()
            .and_then(|l| l.get("karpenter.k8s.aws/placement-group-partition"))
            .cloned(),
        Some(partition),
        "the Node carries the partition"
    );
    assert_inside_the_contract(&recorder, &cloud, aws.region());
    finish_on_aws(h, &aws, &cloud).await;
    let _ = aws
        .ec2()
        .delete_placement_group()
        .group_name(&group_name)
        .send()
        .await;
    if made_dns {
        let _ = Api::<k8s_openapi::api::core::v1::Service>::namespaced(env.client(), "kube-system")
            .delete("kube-dns", &DeleteParams::default())
            .await;
    }
}

#[tokio::test]
#[ignore = "needs the Kubernetes test environment with KWOK and the AWS emulator: run scripts/test-integration"]
async fn a_placement_group_that_does_not_exist_keeps_its_class_not_ready_naming_it() {
    let _classes = crate::NODE_CLASSES.write().await;
    let (aws, _shared) = AwsEnv::shared().await.expect("finding the emulator");
    let (h, cloud, _recorder) = start_on_aws("aws-placement-missing", &aws, &[]).await;
    create_node_class_with(
        &h,
        &cloud,
        "al2023@latest",
        serde_json::json!({"placementGroupSelector": {"name": "no-such-group"}}),
    )
    .await;
    let api = Api::<EC2NodeClass>::all(h.client.clone());
    let pg = wait_for(
        "PlacementGroupReady=False",
        Duration::from_secs(90),
        || async {
            let class = api
                .get(&h.node_class)
                .await
                .map_err(kube_error("reading the EC2NodeClass"))?;
            Ok(condition(
                class.status.as_ref().and_then(|s| s.conditions.as_deref()),
                "PlacementGroupReady",
            )
            .filter(|c| c.status == "False")
            .cloned())
        },
    )
    .await
    .expect("the missing group is reported");
    assert_eq!(pg.reason, "PlacementGroupNotFound");
    assert_eq!(pg.message, "Placement group \"no-such-group\" not found");
    let class = api.get(&h.node_class).await.expect("the class");
    let ready = condition(
        class.status.as_ref().and_then(|s| s.conditions.as_deref()),
        "Ready",
    )
    .cloned()
    .expect("a Ready condition");
    assert_eq!(ready.status, "False");
    finish_on_aws(h, &aws, &cloud).await;
}

#[tokio::test]
#[ignore = "needs the Kubernetes test environment with KWOK and the AWS emulator: run scripts/test-integration"]
async fn an_ipv6_clusters_launch_templates_address_interfaces_by_ipv6_and_nodes_use_its_dns() {
    let _classes = crate::NODE_CLASSES.write().await;
    let (aws, _shared) = AwsEnv::shared().await.expect("finding the emulator");
    let env = karpenter_testenv::KubeEnv::connect()
        .await
        .expect("connecting to the test environment");
    // An IPv6 cluster's kube-dns (the test control plane is dual-stack: scripts/testenv). The
    // controller reads it once, at start; an IPv4 one another test made is replaced, and the
    // IPv6 one removed at the end (tests needing one make their own).
    let services =
        Api::<k8s_openapi::api::core::v1::Service>::namespaced(env.client(), "kube-system");
    if services
        .get_opt("kube-dns")
        .await
        .expect("reading kube-system/kube-dns")
        .is_some()
    {
        services
            .delete("kube-dns", &DeleteParams::default())
            .await
            .expect("removing the IPv4 kube-dns");
    }
    let service: k8s_openapi::api::core::v1::Service = serde_json::from_value(serde_json::json!({
        "apiVersion": "v1", "kind": "Service",
        "metadata": {"name": "kube-dns", "namespace": "kube-system", "labels": {"k8s-app": "kube-dns"}},
        "spec": {"selector": {"k8s-app": "kube-dns"}, "ipFamilies": ["IPv6"],
                 "ipFamilyPolicy": "SingleStack",
                 "ports": [{"name": "dns", "port": 53, "protocol": "UDP"}]}
    }))
    .expect("the kube-dns Service parses");
    let dns_ip = services
        .create(&PostParams::default(), &service)
        .await
        .expect("creating an IPv6 kube-system/kube-dns")
        .spec
        .and_then(|s| s.cluster_ip)
        .expect("an IPv6 cluster IP");
    assert!(dns_ip.contains(':'), "an IPv6 address: {dns_ip}");

    let (h, cloud, recorder) = start_on_aws("aws-ipv6", &aws, &[]).await;
    create_node_class_with(
        &h,
        &cloud,
        "al2023@latest",
        serde_json::json!({"ipPrefixCount": 2}),
    )
    .await;
    wait_class_ready(&h).await;
    h.node_pool(None, requirements()).await;
    h.create_deployment("web", 1, "500m").await;
    wait_launched(&h).await;

    let fleet_templates: Vec<String> = recorder
        .calls()
        .iter()
        .filter(|c| c.operation == "CreateFleet" && c.succeeded)
        .flat_map(|c| c.ids.launch_template_names.clone())
        .collect();
    assert!(
        !fleet_templates.is_empty(),
        "a CreateFleet named its templates"
    );
    for name in &fleet_templates {
        let data = aws
            .ec2()
            .describe_launch_template_versions()
            .launch_template_name(name)
            .versions("$Latest")
            .send()
            .await
            .expect("describing the launch template")
            .launch_template_versions()
            .first()
            .and_then(|v| v.launch_template_data())
            .cloned()
            .expect("launch template data");
        let interfaces = data.network_interfaces();
        assert!(!interfaces.is_empty(), "{name}: network interfaces");
        for interface in interfaces {
            assert_eq!(
                interface.ipv6_address_count(),
                Some(1),
                "{name}: {interface:?}"
            );
            assert_eq!(
                interface.primary_ipv6(),
                Some(true),
                "{name}: {interface:?}"
            );
            assert_eq!(
                (interface.ipv6_prefix_count(), interface.ipv4_prefix_count()),
                (Some(2), None),
                "{name}: ipPrefixCount as IPv6 prefixes: {interface:?}"
            );
        }
        let user_data = aws_smithy_types::base64::decode(data.user_data().unwrap_or_default())
            .expect("base64 user data");
        let user_data = String::from_utf8_lossy(&user_data);
        assert!(
            user_data.contains("clusterDNS:") && user_data.contains(&dns_ip),
            "the IPv6 kube-dns address {dns_ip} is the nodes' cluster DNS:\n{user_data}"
        );
    }
    assert_inside_the_contract(&recorder, &cloud, aws.region());
    finish_on_aws(h, &aws, &cloud).await;
    let _ = services.delete("kube-dns", &DeleteParams::default()).await;
}

/// The image an AL2023 x86_64 alias resolves to for Kubernetes `minor`, as the emulator's SSM
/// parameters say.
async fn al2023_image(aws: &AwsEnv, minor: &str) -> String {
    aws.ssm()
        .get_parameter()
        .name(format!(
            "/aws/service/eks/optimized-ami/{minor}/amazon-linux-2023/x86_64/standard/recommended/image_id"
        ))
        .send()
        .await
        .expect("reading the seeded SSM parameter")
        .parameter
        .and_then(|p| p.value)
        .expect("a parameter value")
}

#[tokio::test]
#[ignore = "needs the control plane, KWOK and the AWS emulator: run scripts/test-integration"]
async fn with_eks_control_plane_the_ami_alias_follows_the_version_eks_reports() {
    let _classes = crate::NODE_CLASSES.write().await;
    let (aws, _shared) = AwsEnv::shared().await.expect("finding the emulator");
    let (h, cloud, recorder) = start_on_aws_faulty(
        "aws-eks-version",
        &aws,
        &[],
        false,
        None,
        &["--eks-control-plane"],
    )
    .await;
    create_node_class(&h, &cloud, "al2023@latest").await;
    let class = wait_class_ready(&h).await;
    let (eks, api_server) = (
        al2023_image(&aws, EKS_VERSION).await,
        al2023_image(&aws, "1.36").await,
    );
    assert_ne!(eks, api_server, "the emulator seeds one image per minor");
    let amis: Vec<String> = class
        .status
        .as_ref()
        .and_then(|s| s.amis.as_ref())
        .into_iter()
        .flatten()
        .map(|a| a.id.clone())
        .collect();
    assert!(
        amis.contains(&eks) && !amis.contains(&api_server),
        "the class resolves EKS's {EKS_VERSION} image {eks}, not the API server's 1.36 {api_server}: {amis:?}"
    );
    assert_inside_the_contract(&recorder, &cloud, aws.region());
    finish_on_aws(h, &aws, &cloud).await;
}

/// Bytes of a memory quantity as the controller writes them (`<n>`, `<n>Ki`, `<n>Mi`, `<n>Gi`).
fn memory_bytes(quantity: &str) -> i64 {
    let (digits, unit) = quantity
        .find(|c: char| !c.is_ascii_digit())
        .map_or((quantity, ""), |at| quantity.split_at(at));
    let n: i64 = digits.parse().unwrap_or_else(|e| panic!("{quantity}: {e}"));
    n * match unit {
        "" => 1,
        "Ki" => 1 << 10,
        "Mi" => 1 << 20,
        "Gi" => 1 << 30,
        other => panic!("{quantity}: unit {other}"),
    }
}

fn claim_memory(claim: &NodeClaim) -> i64 {
    let capacity = claim
        .status
        .as_ref()
        .and_then(|s| s.capacity.as_ref())
        .and_then(|c| c.get("memory"))
        .map(|q| q.0.clone())
        .expect("a memory capacity");
    memory_bytes(&capacity)
}

#[tokio::test]
#[ignore = "needs the Kubernetes test environment with KWOK and the AWS emulator: run scripts/test-integration"]
async fn the_memory_a_registered_node_reports_is_its_instance_types_memory_from_then_on() {
    let _classes = crate::NODE_CLASSES.write().await;
    let (aws, _shared) = AwsEnv::shared().await.expect("finding the emulator");
    let (h, cloud, recorder) = start_on_aws("aws-memory", &aws, &[]).await;
    create_node_class(&h, &cloud, "al2023@latest").await;
    wait_class_ready(&h).await;
    // One instance type, and pods that need a node each.
    h.node_pool(
        None,
        serde_json::json!([
            {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]},
            {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": ["m5.large"]}
        ]),
    )
    .await;
    h.create_deployment("web", 1, "1200m").await;
    let first = wait_launched(&h).await;
    let estimated = claim_memory(&first);
    // Its kubelet reports 300 MiB less than the VM_MEMORY_OVERHEAD_PERCENT estimate.
    let reported = estimated - (300 << 20);
    let mut as_reported = first.clone();
    if let Some(capacity) = as_reported
        .status
        .as_mut()
        .and_then(|s| s.capacity.as_mut())
    {
        capacity.insert(
            "memory".into(),
            k8s_openapi::apimachinery::pkg::api::resource::Quantity(format!(
                "{}Ki",
                reported >> 10
            )),
        );
    }
    register_node(&h, &as_reported).await;
    h.wait_running(1, Duration::from_secs(120)).await;
    // The next m5.large is listed, and launched, with the memory the node reported.
    h.scale("web", 2).await;
    let first_name = first.metadata.name.clone().unwrap_or_default();
    let second = wait_for(
        "a second NodeClaim launched",
        Duration::from_secs(120),
        || async {
            Ok(h.node_claims().await.into_iter().find(|c| {
                c.metadata.name.as_deref() != Some(first_name.as_str())
                    && provider_id(c).is_some_and(|p| p.starts_with("aws:///"))
            }))
        },
    )
    .await
    .expect("the second pod gets its own instance");
    assert_eq!(
        super::claim_label(&second, "node.kubernetes.io/instance-type"),
        "m5.large"
    );
    assert_eq!(
        claim_memory(&second),
        reported,
        "learned from the registered node (estimate {estimated})"
    );
    h.scale("web", 0).await;
    assert_inside_the_contract(&recorder, &cloud, aws.region());
    finish_on_aws(h, &aws, &cloud).await;
}
