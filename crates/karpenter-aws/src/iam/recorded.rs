//! AWS calls as a client really made them, checked against the IAM call contract and a policy.
//!
//! A [`RecordedCall`] is what an SDK interceptor saw (`karpenter-testenv`'s `CallRecorder`
//! records them against the AWS emulator): the service and operation, the region, whether it
//! succeeded, the tags the request carried and the identifiers it named. [`check`] proves that
//! every recorded call stays inside the contract ([`contract::calls`]) and is granted by a
//! policy for a [`Scope`]:
//!
//! * an operation no contract entry belongs to is a [`Problem::NotInContract`] finding;
//! * every authorization request the operation causes (its contract entries: CreateFleet is
//!   `ec2:CreateFleet` on the fleet and the launch inputs, `ec2:RunInstances` on every resource,
//!   `ec2:CreateTags` with `ec2:CreateAction=CreateFleet` on what it tags, `iam:PassRole` on the
//!   node role) is rebuilt from the entry ([`Call::request`]) with the **request tags the call
//!   really carried** (per TagSpecification resource type where that applies), the **region it
//!   was sent to**, and, where the recorded identifiers allow, the **real resource ARN**; a
//!   request the policy denies is a [`Problem::Denied`] finding naming the statement that should
//!   have granted it. A real ARN outside the entry's resource pattern is
//!   [`Problem::OutsideContract`] even when the policy allows it.
//!
//! Resource tags are the contract's: the provider tags what it creates with the launch tags,
//! and that is what the creating call's request tags prove.
//!
//! This module owns the mapping from an SDK operation to the contract entries it causes and
//! from recorded identifiers to ARNs. It must not talk to AWS or know the SDK's types (the
//! recorder converts them), and it never changes the contract: a finding means the provider, the
//! contract or the policy is wrong, and which one is a human's call.

use std::collections::BTreeMap;
use std::fmt;

use serde::Serialize;

use super::contract::{self, Call, Sid};
use super::eval::wildcard::Pattern;
use super::eval::{CompileError, CompiledPolicy, Decision, Evaluation, Outcome, Request};
use super::policy::{Effect, PolicyDocument};
use super::scope::Scope;

/// Tags by key.
pub type TagSet = BTreeMap<String, String>;

/// Operations that pass the node role to EC2 besides their own entries: the contract lists
/// `iam:PassRole` under its own api (its caller text names these).
const PASSES_ROLE: &[&str] = &[
    "ec2:CreateFleet",
    "ec2:RunInstances",
    "iam:AddRoleToInstanceProfile",
];

/// EC2 operations whose request tags are TagSpecifications per resource type.
const TAG_SPECIFICATION_OPERATIONS: &[&str] =
    &["CreateFleet", "RunInstances", "CreateLaunchTemplate"];

/// Resource types a launch tags through the launch template's TagSpecifications rather than
/// the request's (the contract's `on-create:CreateFleet` caller text). When the recorded calls
/// do not include that template's creation their tags are unknown, and the contract's stand.
const TAGGED_BY_TEMPLATE: &[&str] = &["network-interface", "spot-instances-request"];

/// One AWS call a client made.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct RecordedCall {
    /// The IAM service prefix: `ec2`, `iam`, `ssm`, `eks`, `pricing`, `sqs`
    /// ([`iam_service_prefix`] converts the SDK's service names).
    pub service: String,
    /// The operation as the SDK names it: `CreateFleet`.
    pub operation: String,
    /// The region the request was sent to, when known.
    pub region: Option<String>,
    /// Whether AWS answered with success.
    pub succeeded: bool,
    /// The error code AWS answered with (`InvalidVpcID.NotFound`), when it failed and said so.
    pub error_code: Option<String>,
    /// CreateFleet, RunInstances, CreateLaunchTemplate: the request's TagSpecifications, tags by
    /// resource type (`instance`, `volume`, `fleet`, `launch-template`, ...).
    pub tag_specifications: BTreeMap<String, TagSet>,
    /// CreateLaunchTemplate: `LaunchTemplateData.TagSpecifications` by resource type, the tags
    /// later launches from the template apply.
    pub template_tag_specifications: BTreeMap<String, TagSet>,
    /// The tags of a request that carries one set (ec2 CreateTags, iam CreateInstanceProfile,
    /// iam TagInstanceProfile).
    pub tags: TagSet,
    /// What the request named.
    pub ids: Identifiers,
}

/// The identifiers a recorded request named (only those a real ARN can be built from).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Identifiers {
    /// EC2 resource ids: instances (TerminateInstances, CreateTags), launch templates (`lt-`:
    /// CreateFleet, DeleteLaunchTemplate, the one CreateLaunchTemplate created), subnets and
    /// images (CreateFleet overrides, RunInstances), security groups. The kind comes from the
    /// id's prefix.
    pub ec2_ids: Vec<String>,
    /// Launch template names: created (CreateLaunchTemplate), deleted, or launched from.
    pub launch_template_names: Vec<String>,
    /// IAM instance profile name.
    pub instance_profile: Option<String>,
    /// IAM instance profile path (CreateInstanceProfile) or path prefix (ListInstanceProfiles).
    pub instance_profile_path: Option<String>,
    /// IAM role name (AddRoleToInstanceProfile, RemoveRoleFromInstanceProfile).
    pub role_name: Option<String>,
    /// SSM parameter name (or ARN).
    pub parameter_name: Option<String>,
    /// EKS cluster name.
    pub cluster_name: Option<String>,
    /// SQS queue URL, or name (GetQueueUrl).
    pub queue: Option<String>,
}

impl RecordedCall {
    /// A successful call of `service:operation` (service as its IAM prefix, e.g. `ec2`).
    pub fn new(service: &str, operation: &str) -> Self {
        RecordedCall {
            service: service.to_string(),
            operation: operation.to_string(),
            succeeded: true,
            ..RecordedCall::default()
        }
    }

    /// `ec2:CreateFleet`.
    pub fn api(&self) -> String {
        format!("{}:{}", self.service, self.operation)
    }

    /// Sets the region the call was sent to.
    pub fn in_region(mut self, region: &str) -> Self {
        self.region = Some(region.to_string());
        self
    }

    /// Marks the call failed, with AWS's error code when known.
    pub fn failed(mut self, code: Option<&str>) -> Self {
        self.succeeded = false;
        self.error_code = code.map(str::to_string);
        self
    }

    /// Adds tags to the request's TagSpecification for a resource type.
    pub fn with_tag_specification(mut self, resource_type: &str, tags: &[(&str, &str)]) -> Self {
        extend(
            self.tag_specifications
                .entry(resource_type.to_string())
                .or_default(),
            tags,
        );
        self
    }

    /// Adds tags to the launch template data's TagSpecification for a resource type.
    pub fn with_template_tag_specification(
        mut self,
        resource_type: &str,
        tags: &[(&str, &str)],
    ) -> Self {
        let set = self
            .template_tag_specifications
            .entry(resource_type.to_string())
            .or_default();
        extend(set, tags);
        self
    }

    /// Adds request tags (CreateTags, CreateInstanceProfile, TagInstanceProfile).
    pub fn with_tags(mut self, tags: &[(&str, &str)]) -> Self {
        extend(&mut self.tags, tags);
        self
    }

    /// Sets what the request named.
    pub fn with_ids(mut self, ids: Identifiers) -> Self {
        self.ids = ids;
        self
    }

    fn is_ec2(&self, operations: &[&str]) -> bool {
        self.service == "ec2" && operations.contains(&self.operation.as_str())
    }
}

fn extend(set: &mut TagSet, tags: &[(&str, &str)]) {
    set.extend(tags.iter().map(|(k, v)| (k.to_string(), v.to_string())));
}

/// The IAM service prefix of an SDK service name (`EC2` → `ec2`, `ARC Zonal Shift` →
/// `arc-zonal-shift`): lower case, spaces as dashes.
pub fn iam_service_prefix(sdk_service: &str) -> String {
    sdk_service.trim().to_ascii_lowercase().replace(' ', "-")
}

/// What is wrong with one recorded call.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Finding {
    /// The call's position in the recorded list.
    pub call: usize,
    /// `ec2:CreateFleet`.
    pub api: String,
    /// Whether AWS accepted the call.
    pub succeeded: bool,
    pub problem: Problem,
}

/// The kinds of findings.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum Problem {
    /// No contract entry belongs to the operation.
    NotInContract,
    /// The policy denies an authorization request the call causes.
    Denied(Denial),
    /// The policy allows it, but the call named a resource outside the entry's pattern.
    OutsideContract {
        action: String,
        resource: String,
        pattern: String,
    },
}

/// A denied authorization request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Denial {
    /// The contract entry (`ec2:RunInstances/instance`).
    pub entry: String,
    pub action: String,
    pub resource: String,
    /// The request tags evaluated (those the call carried, where the recording has them).
    pub request_tags: TagSet,
    /// The statement of the generated policy that grants the entry.
    pub sid: Sid,
    pub decision: Decision,
    /// Why the policy's statements did not allow it (explicit denies, failed conditions).
    pub why: Vec<String>,
    /// The entry's resource pattern, when the resource lies outside it.
    pub outside_pattern: Option<String>,
}

impl Finding {
    /// One line for people.
    pub fn message(&self) -> String {
        let outcome = if self.succeeded {
            "succeeded"
        } else {
            "failed"
        };
        let head = format!("call {} {} ({outcome})", self.call, self.api);
        match &self.problem {
            Problem::NotInContract => format!(
                "{head}: not in the contract: no entry of iam::contract::calls() belongs to {}, \
                 so the generated policy does not grant it",
                self.api
            ),
            Problem::Denied(d) => format!("{head}: {}", d.message()),
            Problem::OutsideContract {
                action,
                resource,
                pattern,
            } => format!(
                "{head}: {action} on {resource} is outside the contract's resource pattern \
                 {pattern} (the policy allows it)"
            ),
        }
    }
}

impl fmt::Display for Finding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message())
    }
}

impl Denial {
    fn message(&self) -> String {
        let decision = match self.decision {
            Decision::ExplicitDeny => "explicitly denied",
            _ => "denied (no statement allows it)",
        };
        let mut text = format!(
            "{} on {} with request tags {} is {decision}; the contract grants it ({}) in {}",
            self.action,
            self.resource,
            show_tags(&self.request_tags),
            self.entry,
            self.sid
        );
        if let Some(pattern) = &self.outside_pattern {
            text.push_str(&format!(
                "; the resource is outside the contract's pattern {pattern}"
            ));
        }
        for why in &self.why {
            text.push_str("; ");
            text.push_str(why);
        }
        text
    }
}

fn show_tags(tags: &TagSet) -> String {
    let pairs: Vec<String> = tags.iter().map(|(k, v)| format!("{k}={v}")).collect();
    format!("{{{}}}", pairs.join(", "))
}

/// A policy the recorded calls cannot be checked against.
#[derive(Debug, thiserror::Error)]
pub enum CheckError {
    #[error("the policy to check the recorded calls against does not compile: {0}")]
    Policy(#[from] CompileError),
}

/// Checks recorded calls against the contract and a policy document (see the module docs).
pub fn check(
    recorded: &[RecordedCall],
    scope: &Scope,
    policy: &PolicyDocument,
) -> Result<Vec<Finding>, CheckError> {
    let compiled = CompiledPolicy::compile("policy", policy)?;
    Ok(check_compiled(
        recorded,
        &contract::calls(),
        scope,
        &compiled,
    ))
}

/// [`check`] with a given contract and an already compiled policy.
pub fn check_compiled(
    recorded: &[RecordedCall],
    contract: &[Call],
    scope: &Scope,
    policy: &CompiledPolicy,
) -> Vec<Finding> {
    let checker = Checker {
        recorded,
        contract,
        scope,
        policy,
    };
    recorded
        .iter()
        .enumerate()
        .flat_map(|(index, call)| checker.call(index, call))
        .collect()
}

/// The contract entries (authorization requests) a call of `api` causes.
pub fn entries_for<'a>(contract: &'a [Call], api: &str) -> Vec<&'a Call> {
    contract.iter().filter(|e| belongs(e, api)).collect()
}

fn belongs(entry: &Call, api: &str) -> bool {
    if let Some(action) = create_action(entry) {
        // Tag-on-create belongs to the creating operation, not to a CreateTags call.
        return api.eq_ignore_ascii_case(&format!("ec2:{action}"));
    }
    let named = entry
        .api
        .split(',')
        .map(|part| part.split(" (").next().unwrap_or(part).trim())
        .any(|name| name.eq_ignore_ascii_case(api));
    let passes_role = entry.action.eq_ignore_ascii_case("iam:PassRole")
        && PASSES_ROLE.iter().any(|a| a.eq_ignore_ascii_case(api));
    named || passes_role
}

fn create_action(entry: &Call) -> Option<&'static str> {
    entry
        .context
        .iter()
        .find(|(k, _)| k.eq_ignore_ascii_case("ec2:CreateAction"))
        .map(|(_, v)| *v)
}

/// Entries that are alternatives for one authorization (same action, resource pattern and
/// create action, e.g. the two after-launch CreateTags variants): one of them must allow.
fn alternatives<'a>(entries: &[&'a Call]) -> Vec<Vec<&'a Call>> {
    let mut groups: Vec<Vec<&'a Call>> = Vec::new();
    for entry in entries {
        let same = |g: &&mut Vec<&'a Call>| {
            g.first().is_some_and(|f| {
                f.action == entry.action
                    && f.resource_pattern == entry.resource_pattern
                    && create_action(f) == create_action(entry)
            })
        };
        match groups.iter_mut().find(same) {
            Some(group) => group.push(entry),
            None => groups.push(vec![entry]),
        }
    }
    groups
}

struct Checker<'a> {
    recorded: &'a [RecordedCall],
    contract: &'a [Call],
    scope: &'a Scope,
    policy: &'a CompiledPolicy,
}

impl Checker<'_> {
    fn call(&self, index: usize, call: &RecordedCall) -> Vec<Finding> {
        let api = call.api();
        let entries = entries_for(self.contract, &api);
        let finding = |problem| Finding {
            call: index,
            api: api.clone(),
            succeeded: call.succeeded,
            problem,
        };
        if entries.is_empty() {
            return vec![finding(Problem::NotInContract)];
        }
        alternatives(&entries)
            .iter()
            .flat_map(|group| self.group(call, group))
            .map(finding)
            .collect()
    }

    /// The problems of one authorization: every resource it touches must be allowed by one of
    /// the alternatives.
    fn group(&self, call: &RecordedCall, group: &[&Call]) -> Vec<Problem> {
        let Some(first) = group.first() else {
            return Vec::new();
        };
        let scope = call_scope(call, first, self.scope);
        resources(first, call, &scope)
            .into_iter()
            .filter_map(|resource| self.resource(call, group, &scope, &resource))
            .collect()
    }

    fn resource(
        &self,
        call: &RecordedCall,
        group: &[&Call],
        scope: &Scope,
        resource: &str,
    ) -> Option<Problem> {
        let outside = outside_pattern(group, scope, resource);
        let mut denied = None;
        for entry in group {
            let request = self.request(entry, call, scope, resource);
            let evaluation = self.policy.evaluate(&request);
            if evaluation.decision == Decision::Allow {
                return outside.map(|pattern| Problem::OutsideContract {
                    action: request.action,
                    resource: request.resource,
                    pattern,
                });
            }
            denied.get_or_insert((entry, request, evaluation));
        }
        let (entry, request, evaluation) = denied?;
        Some(Problem::Denied(Denial {
            entry: entry.id(),
            request_tags: request_tags(&request),
            action: request.action,
            resource: request.resource,
            sid: entry.sid,
            decision: evaluation.decision,
            why: why(&evaluation),
            outside_pattern: outside,
        }))
    }

    fn request(&self, entry: &Call, call: &RecordedCall, scope: &Scope, resource: &str) -> Request {
        let mut request = entry.request(scope);
        request.resource = resource.to_string();
        match self.actual_tags(entry, call) {
            Some(tags) => replace_request_tags(request, &tags),
            None => request,
        }
    }

    /// The request tags the call carried for this entry; `None` keeps the contract's (the entry
    /// carries none, or the recording cannot know them).
    fn actual_tags(&self, entry: &Call, call: &RecordedCall) -> Option<TagSet> {
        if entry.request_tags.is_empty() {
            return None;
        }
        if !call.is_ec2(TAG_SPECIFICATION_OPERATIONS) {
            return Some(call.tags.clone());
        }
        if !entry.creates {
            // TagSpecifications are request-wide for the resources a launch only uses.
            return Some(
                call.tag_specifications
                    .values()
                    .flatten()
                    .map(pair)
                    .collect(),
            );
        }
        let kind = resource_kind(entry.resource_sample);
        if let Some(tags) = call.tag_specifications.get(kind) {
            return Some(tags.clone());
        }
        if let Some(tags) = self.template_tags(call, kind) {
            return Some(tags);
        }
        let from_template = call.operation != "CreateLaunchTemplate";
        if from_template && TAGGED_BY_TEMPLATE.contains(&kind) {
            None
        } else {
            Some(TagSet::new())
        }
    }

    /// A launch's tags for a resource type from the TagSpecifications of the launch template it
    /// named, when that template's creation was recorded too (the latest one wins).
    fn template_tags(&self, call: &RecordedCall, kind: &str) -> Option<TagSet> {
        if !call.is_ec2(&["CreateFleet", "RunInstances"]) {
            return None;
        }
        let names = &call.ids.launch_template_names;
        let ids = &call.ids.ec2_ids;
        self.recorded
            .iter()
            .rev()
            .filter(|c| c.is_ec2(&["CreateLaunchTemplate"]))
            .find(|c| {
                c.ids
                    .launch_template_names
                    .iter()
                    .any(|n| names.contains(n))
                    || c.ids.ec2_ids.iter().any(|i| ids.contains(i))
            })
            .and_then(|c| c.template_tag_specifications.get(kind).cloned())
    }
}

fn pair((k, v): (&String, &String)) -> (String, String) {
    (k.clone(), v.clone())
}

/// The scope a call's requests are evaluated in: the region it was sent to (IAM's endpoint is
/// global, so IAM calls keep the cluster's region for their ARNs and tags).
fn call_scope(call: &RecordedCall, entry: &Call, scope: &Scope) -> Scope {
    let mut scope = scope.clone();
    let global = entry.action.starts_with("iam:");
    if let Some(region) = call.region.as_deref().filter(|_| !global) {
        scope.region = region.to_string();
    }
    scope
}

/// The entry's resource pattern, when a resource lies outside every alternative's.
fn outside_pattern(group: &[&Call], scope: &Scope, resource: &str) -> Option<String> {
    let patterns: Vec<String> = group
        .iter()
        .map(|e| scope.render(e.resource_pattern))
        .collect();
    let inside = patterns
        .iter()
        .any(|p| Pattern::glob(p).matches(resource, false));
    if inside {
        None
    } else {
        patterns.into_iter().next()
    }
}

fn replace_request_tags(mut request: Request, tags: &TagSet) -> Request {
    let keys: Vec<String> = request
        .context
        .iter()
        .map(|(k, _)| k.to_string())
        .filter(|k| request_tag_key(k).is_some())
        .collect();
    for key in keys {
        request.context.remove(&key);
    }
    request.context.remove("aws:TagKeys");
    tags.iter()
        .fold(request, |r, (k, v)| r.with_request_tag(k, v))
}

const REQUEST_TAG: &str = "aws:requesttag/";

fn request_tag_key(context_key: &str) -> Option<&str> {
    let prefix = context_key.get(..REQUEST_TAG.len())?;
    if prefix.eq_ignore_ascii_case(REQUEST_TAG) {
        context_key.get(REQUEST_TAG.len()..)
    } else {
        None
    }
}

fn request_tags(request: &Request) -> TagSet {
    request
        .context
        .iter()
        .filter_map(|(k, v)| Some((request_tag_key(k)?.to_string(), v.single()?.to_string())))
        .collect()
}

/// Why no statement allowed a request: explicit denies, failed conditions, or unmatched
/// resources (at most three).
fn why(evaluation: &Evaluation) -> Vec<String> {
    let mut out: Vec<String> = evaluation
        .applying(Effect::Deny)
        .map(|t| format!("{} denies it", t.label))
        .collect();
    out.extend(evaluation.near_misses().filter_map(|t| match &t.outcome {
        Outcome::ConditionNotMet { operator, key } => {
            Some(format!("{}: {operator} {key} is not met", t.label))
        }
        _ => None,
    }));
    if out.is_empty() {
        out.extend(
            evaluation
                .trace
                .iter()
                .filter(|t| t.effect == Effect::Allow && t.outcome == Outcome::ResourceNotMatched)
                .map(|t| format!("{}: the action matches, no Resource covers it", t.label)),
        );
    }
    out.truncate(3);
    out
}

/// The resource type of a (templated) ARN: `instance` in `arn:...:instance/i-0...`.
fn resource_kind(arn: &str) -> &str {
    let resource = arn.splitn(6, ':').nth(5).unwrap_or_default();
    resource.split('/').next().unwrap_or_default()
}

/// The resources one entry's request is evaluated on: the real ARNs of what the call named, or
/// the contract's sample (for creates, whose ARN does not exist yet, and when nothing was named).
fn resources(entry: &Call, call: &RecordedCall, scope: &Scope) -> Vec<String> {
    let sample = scope.render(entry.resource_sample);
    let real = if entry.creates {
        Vec::new()
    } else {
        real_arns(&sample, call, scope)
    };
    if real.is_empty() { vec![sample] } else { real }
}

fn real_arns(sample: &str, call: &RecordedCall, scope: &Scope) -> Vec<String> {
    let service = sample.split(':').nth(2).unwrap_or_default();
    let kind = resource_kind(sample);
    let ids = &call.ids;
    let one = |arn: Option<String>| arn.into_iter().collect();
    match (service, kind) {
        ("ec2", kind) => ids
            .ec2_ids
            .iter()
            .filter(|id| ec2_kind(id) == Some(kind))
            .map(|id| ec2_arn(scope, kind, id))
            .collect(),
        ("iam", "instance-profile") => one(profile_arn(ids, scope)),
        ("iam", "role") => one(ids.role_name.as_deref().map(|n| role_arn(n, scope))),
        ("ssm", "parameter") => one(ids
            .parameter_name
            .as_deref()
            .map(|n| parameter_arn(n, scope))),
        ("eks", "cluster") => one(ids
            .cluster_name
            .as_deref()
            .map(|n| arn(scope, "eks", &scope.account, &format!("cluster/{n}")))),
        ("sqs", _) => one(ids.queue.as_deref().map(|q| queue_arn(q, scope))),
        _ => Vec::new(),
    }
}

fn arn(scope: &Scope, service: &str, account: &str, resource: &str) -> String {
    format!(
        "arn:{}:{service}:{}:{account}:{resource}",
        scope.partition, scope.region
    )
}

/// The resource type of an EC2 id, from its prefix.
fn ec2_kind(id: &str) -> Option<&'static str> {
    const PREFIXES: &[(&str, &str)] = &[
        ("i-", "instance"),
        ("lt-", "launch-template"),
        ("subnet-", "subnet"),
        ("sg-", "security-group"),
        ("ami-", "image"),
        ("snap-", "snapshot"),
        ("vol-", "volume"),
        ("eni-", "network-interface"),
        ("fleet-", "fleet"),
        ("sir-", "spot-instances-request"),
        ("cr-", "capacity-reservation"),
        ("pg-", "placement-group"),
    ];
    PREFIXES
        .iter()
        .find(|(prefix, _)| id.starts_with(prefix))
        .map(|(_, kind)| *kind)
}

fn ec2_arn(scope: &Scope, kind: &str, id: &str) -> String {
    // Images and snapshots are named without an account.
    let account = if matches!(kind, "image" | "snapshot") {
        ""
    } else {
        &scope.account
    };
    arn(scope, "ec2", account, &format!("{kind}/{id}"))
}

fn profile_arn(ids: &Identifiers, scope: &Scope) -> Option<String> {
    let path = ids.instance_profile_path.as_deref().map(iam_path);
    let path = path.as_deref().unwrap_or("/");
    if ids.instance_profile.is_none() && ids.instance_profile_path.is_none() {
        return None;
    }
    let name = ids.instance_profile.as_deref().unwrap_or_default();
    Some(format!(
        "arn:{}:iam::{}:instance-profile{path}{name}",
        scope.partition, scope.account
    ))
}

/// An IAM path with its leading and trailing slashes.
fn iam_path(path: &str) -> String {
    let trimmed = path.trim_matches('/');
    if trimmed.is_empty() {
        "/".to_string()
    } else {
        format!("/{trimmed}/")
    }
}

/// The scope's node role when the call names it (its ARN may carry a path), else a role of
/// that name at the root path.
fn role_arn(name: &str, scope: &Scope) -> String {
    if scope.node_role_arn.ends_with(&format!("/{name}")) {
        scope.node_role_arn.clone()
    } else {
        format!("arn:{}:iam::{}:role/{name}", scope.partition, scope.account)
    }
}

/// Public parameters (`/aws/service/...`) have no account in their ARN; the account's own do.
fn parameter_arn(name: &str, scope: &Scope) -> String {
    if name.starts_with("arn:") {
        return name.to_string();
    }
    let account = if name.starts_with("/aws/service/") {
        ""
    } else {
        &scope.account
    };
    let slash = if name.starts_with('/') { "" } else { "/" };
    arn(scope, "ssm", account, &format!("parameter{slash}{name}"))
}

/// A queue URL (`https://sqs.<region>.amazonaws.com/<account>/<name>`) or a name in the scope's
/// account.
fn queue_arn(queue: &str, scope: &Scope) -> String {
    if !queue.contains("://") {
        return arn(scope, "sqs", &scope.account, queue);
    }
    let mut segments = queue.trim_end_matches('/').rsplit('/');
    let name = segments.next().unwrap_or_default();
    let account = segments.next().unwrap_or(&scope.account);
    arn(scope, "sqs", account, name)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::iam::generate::controller_policy;

    const CLUSTER: &str = "demo";
    const ACCOUNT: &str = "111122223333";

    fn scope() -> Scope {
        Scope::new(CLUSTER, "us-west-2", None)
            .unwrap()
            .with_account(ACCOUNT)
            .unwrap()
    }

    fn launch_tags() -> Vec<(&'static str, &'static str)> {
        vec![
            ("kubernetes.io/cluster/demo", "owned"),
            ("eks:eks-cluster-name", "demo"),
            ("karpenter.sh/nodepool", "general"),
            ("karpenter.k8s.aws/ec2nodeclass", "default"),
        ]
    }

    fn without(key: &str) -> Vec<(&'static str, &'static str)> {
        launch_tags()
            .into_iter()
            .filter(|(k, _)| *k != key)
            .collect()
    }

    fn create_fleet(tags: &[(&str, &str)]) -> RecordedCall {
        RecordedCall::new("ec2", "CreateFleet")
            .in_region("us-west-2")
            .with_tag_specification("instance", tags)
            .with_tag_specification("volume", tags)
            .with_tag_specification("fleet", tags)
            .with_ids(Identifiers {
                ec2_ids: vec!["subnet-0aaa1111".into()],
                launch_template_names: vec!["karpenter.k8s.aws/123".into()],
                ..Identifiers::default()
            })
    }

    fn terminate() -> RecordedCall {
        RecordedCall::new("ec2", "TerminateInstances")
            .in_region("us-west-2")
            .with_ids(Identifiers {
                ec2_ids: vec!["i-0123456789abcdef1".into(), "i-0123456789abcdef2".into()],
                ..Identifiers::default()
            })
    }

    fn findings(calls: &[RecordedCall], policy: &PolicyDocument) -> Vec<Finding> {
        check(calls, &scope(), policy).unwrap()
    }

    fn generated(calls: &[RecordedCall]) -> Vec<Finding> {
        findings(calls, &controller_policy(&scope()))
    }

    fn messages(found: &[Finding]) -> Vec<String> {
        found.iter().map(Finding::message).collect()
    }

    fn denied_sids(found: &[Finding]) -> Vec<Sid> {
        found
            .iter()
            .filter_map(|f| match &f.problem {
                Problem::Denied(d) => Some(d.sid),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn a_create_fleet_carrying_the_launch_tags_on_instance_volume_and_fleet_passes() {
        let found = generated(&[create_fleet(&launch_tags())]);
        assert!(found.is_empty(), "{:#?}", messages(&found));
    }

    #[test]
    fn a_create_fleet_is_checked_as_every_authorization_it_causes() {
        let contract = contract::calls();
        let ids: Vec<String> = entries_for(&contract, "ec2:CreateFleet")
            .iter()
            .map(|c| c.id())
            .collect();
        for id in [
            "ec2:CreateFleet/fleet",
            "ec2:RunInstances/instance",
            "ec2:RunInstances/volume",
            "ec2:CreateTags/on-create:CreateFleet:instance",
            "iam:PassRole/default",
        ] {
            assert!(ids.contains(&id.to_string()), "{id} missing from {ids:?}");
        }
        assert!(!ids.iter().any(|i| i.contains("on-create:RunInstances")));
        assert!(!ids.iter().any(|i| i.contains("after-launch")));
    }

    #[test]
    fn a_create_fleet_without_the_nodepool_tag_is_denied_and_names_the_instance_statement() {
        let found = generated(&[create_fleet(&without("karpenter.sh/nodepool"))]);
        let sids = denied_sids(&found);
        assert!(
            sids.contains(&Sid::AllowScopedEC2InstanceActionsWithTags),
            "{:#?}",
            messages(&found)
        );
        let instance = found
            .iter()
            .find(|f| matches!(&f.problem, Problem::Denied(d) if d.entry == "ec2:RunInstances/instance"))
            .expect("the instance launch is denied");
        let message = instance.message();
        assert!(message.contains("ec2:CreateFleet"), "{message}");
        assert!(
            message.contains("AllowScopedEC2InstanceActionsWithTags"),
            "{message}"
        );
        assert!(message.contains("instance/"), "{message}");
        assert!(message.contains("eks:eks-cluster-name=demo"), "{message}");
        assert!(!message.contains("karpenter.sh/nodepool="), "{message}");
        assert!(
            message.contains("aws:RequestTag/karpenter.sh/nodepool"),
            "{message}"
        );
    }

    #[test]
    fn a_create_launch_template_whose_tags_lack_the_cluster_ownership_tag_is_denied() {
        let good = RecordedCall::new("ec2", "CreateLaunchTemplate")
            .in_region("us-west-2")
            .with_tag_specification("launch-template", &launch_tags())
            .with_template_tag_specification("network-interface", &launch_tags());
        assert!(generated(std::slice::from_ref(&good)).is_empty());

        let mut bad = good;
        bad.tag_specifications = BTreeMap::new();
        let bad =
            bad.with_tag_specification("launch-template", &without("kubernetes.io/cluster/demo"));
        let found = generated(&[bad]);
        assert_eq!(
            denied_sids(&found),
            vec![
                Sid::AllowScopedEC2InstanceActionsWithTags,
                Sid::AllowScopedResourceCreationTagging
            ],
            "{:#?}",
            messages(&found)
        );
        assert!(found[0].message().contains("ec2:CreateLaunchTemplate"));
    }

    #[test]
    fn describe_availability_zones_is_not_in_the_contract() {
        let call = RecordedCall::new("ec2", "DescribeAvailabilityZones").in_region("us-west-2");
        let found = generated(&[call]);
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].problem, Problem::NotInContract);
        assert!(
            found[0].message().contains("not in the contract"),
            "{}",
            found[0]
        );
        assert!(found[0].message().contains("ec2:DescribeAvailabilityZones"));
    }

    #[test]
    fn describe_subnets_a_public_ami_parameter_and_terminate_instances_pass() {
        let parameter = RecordedCall::new("ssm", "GetParameter")
            .in_region("us-west-2")
            .with_ids(Identifiers {
                parameter_name: Some(
                    "/aws/service/eks/optimized-ami/1.36/amazon-linux-2023/x86_64/standard/recommended/image_id"
                        .into(),
                ),
                ..Identifiers::default()
            });
        let calls = [
            RecordedCall::new("ec2", "DescribeSubnets").in_region("us-west-2"),
            parameter,
            terminate(),
        ];
        let found = generated(&calls);
        assert!(found.is_empty(), "{:#?}", messages(&found));
    }

    #[test]
    fn reboot_instances_of_an_owned_instance_passes_and_is_scoped_like_its_termination() {
        let reboot = RecordedCall::new("ec2", "RebootInstances")
            .in_region("us-west-2")
            .with_ids(Identifiers {
                ec2_ids: vec!["i-0123456789abcdef1".into()],
                ..Identifiers::default()
            });
        assert!(generated(std::slice::from_ref(&reboot)).is_empty());
        let full = controller_policy(&scope());
        let statements = full
            .statements()
            .iter()
            .filter(|s| s.sid.as_deref() != Some("AllowScopedDeletion"))
            .cloned()
            .collect();
        let found = findings(&[reboot], &PolicyDocument::new(statements));
        assert_eq!(denied_sids(&found), vec![Sid::AllowScopedDeletion]);
    }

    #[test]
    fn without_allow_scoped_deletion_terminate_instances_is_a_finding() {
        let full = controller_policy(&scope());
        let statements = full
            .statements()
            .iter()
            .filter(|s| s.sid.as_deref() != Some("AllowScopedDeletion"))
            .cloned()
            .collect();
        let found = findings(&[terminate()], &PolicyDocument::new(statements));
        assert_eq!(found.len(), 2, "one per instance: {:#?}", messages(&found));
        assert_eq!(
            denied_sids(&found),
            vec![Sid::AllowScopedDeletion, Sid::AllowScopedDeletion]
        );
        let message = found[0].message();
        assert!(
            message.contains("ec2:TerminateInstances on arn:aws:ec2:us-west-2:111122223333:instance/i-0123456789abcdef1"),
            "{message}"
        );
    }

    #[test]
    fn a_private_ssm_parameter_is_evaluated_by_its_own_arn_and_denied() {
        let call = RecordedCall::new("ssm", "GetParameter")
            .in_region("us-west-2")
            .with_ids(Identifiers {
                parameter_name: Some("/prod/database/password".into()),
                ..Identifiers::default()
            });
        let found = generated(&[call]);
        assert_eq!(denied_sids(&found), vec![Sid::AllowSSMReadActions]);
        let message = found[0].message();
        assert!(
            message.contains("arn:aws:ssm:us-west-2:111122223333:parameter/prod/database/password"),
            "{message}"
        );
        assert!(
            message.contains("outside the contract's pattern"),
            "{message}"
        );
    }

    #[test]
    fn a_regional_read_sent_to_another_region_is_denied() {
        let call = RecordedCall::new("ec2", "DescribeSubnets").in_region("eu-west-1");
        let found = generated(&[call]);
        assert_eq!(denied_sids(&found), vec![Sid::AllowRegionalReadActions]);
        assert!(
            found[0].message().contains("aws:RequestedRegion"),
            "{}",
            found[0]
        );
    }

    #[test]
    fn tagging_after_launch_may_add_the_name_and_nodeclaim_but_not_rewrite_the_nodepool() {
        let tag = |tags: &[(&str, &str)]| {
            RecordedCall::new("ec2", "CreateTags")
                .in_region("us-west-2")
                .with_tags(tags)
                .with_ids(Identifiers {
                    ec2_ids: vec!["i-0123456789abcdef1".into()],
                    ..Identifiers::default()
                })
        };
        let ok = tag(&[
            ("Name", "ip-10-0-0-1.us-west-2.compute.internal"),
            ("karpenter.sh/nodeclaim", "general-abcde"),
        ]);
        let backfill = tag(&[("eks:eks-cluster-name", "demo")]);
        let found = generated(&[ok, backfill]);
        assert!(found.is_empty(), "{:#?}", messages(&found));

        let rewrite = tag(&[("karpenter.sh/nodepool", "other")]);
        let found = generated(&[rewrite]);
        assert_eq!(denied_sids(&found), vec![Sid::AllowScopedResourceTagging]);
    }

    #[test]
    fn a_fleet_takes_network_interface_tags_from_the_recorded_launch_template() {
        let template = |eni: &[(&str, &str)]| {
            RecordedCall::new("ec2", "CreateLaunchTemplate")
                .in_region("us-west-2")
                .with_tag_specification("launch-template", &launch_tags())
                .with_template_tag_specification("network-interface", eni)
                .with_ids(Identifiers {
                    launch_template_names: vec!["karpenter.k8s.aws/123".into()],
                    ..Identifiers::default()
                })
        };
        let fleet = create_fleet(&launch_tags());
        let found = generated(&[template(&launch_tags()), fleet.clone()]);
        assert!(found.is_empty(), "{:#?}", messages(&found));

        let found = generated(&[template(&without("karpenter.sh/nodepool")), fleet]);
        let entries: Vec<&str> = found
            .iter()
            .filter_map(|f| match &f.problem {
                Problem::Denied(d) => Some(d.entry.as_str()),
                _ => None,
            })
            .collect();
        assert_eq!(
            entries,
            vec![
                "ec2:RunInstances/network-interface",
                "ec2:CreateFleet/network-interface",
                "ec2:CreateTags/on-create:CreateFleet:network-interface"
            ]
        );
    }

    #[test]
    fn an_instance_profile_is_checked_by_its_path_tags_and_role() {
        let profile = Identifiers {
            instance_profile: Some("demo_123".into()),
            instance_profile_path: Some("/karpenter/us-west-2/demo/uid-1/".into()),
            ..Identifiers::default()
        };
        let tags = [
            ("kubernetes.io/cluster/demo", "owned"),
            ("eks:eks-cluster-name", "demo"),
            ("karpenter.k8s.aws/ec2nodeclass", "default"),
            ("topology.kubernetes.io/region", "us-west-2"),
        ];
        let create = RecordedCall::new("iam", "CreateInstanceProfile")
            .in_region("us-west-2")
            .with_tags(&tags)
            .with_ids(profile.clone());
        let add_role = RecordedCall::new("iam", "AddRoleToInstanceProfile")
            .in_region("us-west-2")
            .with_ids(Identifiers {
                role_name: Some("KarpenterNodeRole-demo".into()),
                ..profile.clone()
            });
        let found = generated(&[create.clone(), add_role]);
        assert!(found.is_empty(), "{:#?}", messages(&found));

        let mut wrong_region = create;
        wrong_region
            .tags
            .insert("topology.kubernetes.io/region".into(), "eu-west-1".into());
        let other_role =
            RecordedCall::new("iam", "AddRoleToInstanceProfile").with_ids(Identifiers {
                role_name: Some("Admin".into()),
                ..profile
            });
        let found = generated(&[wrong_region, other_role]);
        assert_eq!(
            denied_sids(&found),
            vec![
                Sid::AllowScopedInstanceProfileCreationActions,
                Sid::AllowScopedInstanceProfileTagActions,
                Sid::AllowPassingInstanceRole
            ],
            "{:#?}",
            messages(&found)
        );
    }

    #[test]
    fn sdk_service_names_become_iam_prefixes() {
        assert_eq!(iam_service_prefix("EC2"), "ec2");
        assert_eq!(iam_service_prefix("Pricing"), "pricing");
        assert_eq!(iam_service_prefix("ARC Zonal Shift"), "arc-zonal-shift");
    }
}
