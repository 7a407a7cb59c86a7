//! Records the AWS calls an SDK client makes, for checking them against the IAM contract.
//!
//! [`CallRecorder`] is an SDK interceptor (the same trait object works for every aws-sdk-*
//! client): attach [`CallRecorder::interceptor`] to a client's config builder, make calls, then
//! read [`CallRecorder::calls`] and run them through
//! [`karpenter_aws::iam::recorded::check`]. For each execution it records the service (as its
//! IAM prefix) and operation, the region, the request tags (TagSpecifications per resource type,
//! launch template data TagSpecifications, CreateTags / instance profile tags), the identifiers
//! an ARN can be built from, and whether AWS answered with success (with the error code when it
//! did not).
//!
//! This module owns the conversion from SDK inputs to
//! [`RecordedCall`]s. It must not change requests or responses (it implements read hooks only)
//! and must never fail a call: a hook that cannot read something records less and returns `Ok`.

use std::fmt::Debug;
use std::sync::{Arc, Mutex, MutexGuard};

use aws_sdk_ec2::types::{LaunchTemplateTagSpecificationRequest, TagSpecification};
use aws_smithy_runtime_api::box_error::BoxError;
use aws_smithy_runtime_api::client::interceptors::context::{
    BeforeSerializationInterceptorContextRef, FinalizerInterceptorContextRef, Input, Output,
};
use aws_smithy_runtime_api::client::interceptors::{Intercept, SharedInterceptor};
use aws_smithy_runtime_api::client::orchestrator::{HttpResponse, Metadata};
use aws_smithy_runtime_api::client::runtime_components::RuntimeComponents;
use aws_smithy_types::config_bag::{ConfigBag, Storable, StoreReplace};
use aws_types::region::{Region, SigningRegion};
use karpenter_aws::iam::recorded::{RecordedCall, TagSet, iam_service_prefix};

/// Records every call of the clients it is attached to. Clones share the record.
#[derive(Clone, Debug, Default)]
pub struct CallRecorder {
    calls: Arc<Mutex<Vec<RecordedCall>>>,
}

impl CallRecorder {
    /// An empty recorder.
    pub fn new() -> Self {
        Self::default()
    }

    /// The interceptor to attach: `aws_sdk_ec2::config::Builder::from(&sdk_config)
    /// .interceptor(recorder.interceptor())` (any aws-sdk-* config builder takes it).
    pub fn interceptor(&self) -> SharedInterceptor {
        SharedInterceptor::new(self.clone())
    }

    /// The calls recorded so far, in the order they completed.
    pub fn calls(&self) -> Vec<RecordedCall> {
        self.lock().clone()
    }

    /// Forgets the calls recorded so far.
    pub fn clear(&self) {
        self.lock().clear();
    }

    fn lock(&self) -> MutexGuard<'_, Vec<RecordedCall>> {
        // A panic elsewhere while holding the lock leaves the list intact: keep using it.
        self.calls
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// The call of the current execution, between serialization and completion.
#[derive(Debug)]
struct Pending(RecordedCall);

impl Storable for Pending {
    type Storer = StoreReplace<Self>;
}

impl Intercept for CallRecorder {
    fn name(&self) -> &'static str {
        "karpenter-testenv CallRecorder"
    }

    // Not `read_before_execution`: for an interceptor of the client's config it runs before
    // the operation's runtime plugin has put the operation's `Metadata` in the config bag.
    fn read_before_serialization(
        &self,
        context: &BeforeSerializationInterceptorContextRef<'_>,
        _runtime_components: &RuntimeComponents,
        cfg: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        let mut call = started(cfg);
        describe_input(context.input(), &mut call);
        cfg.interceptor_state().store_put(Pending(call));
        Ok(())
    }

    fn read_after_execution(
        &self,
        context: &FinalizerInterceptorContextRef<'_>,
        _runtime_components: &RuntimeComponents,
        cfg: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        let mut call = match cfg.load::<Pending>() {
            Some(Pending(call)) => call.clone(),
            // The execution failed before serialization: record what the config bag says.
            None => started(cfg),
        };
        finish(&mut call, context);
        self.lock().push(call);
        Ok(())
    }
}

/// Service, operation and region from the config bag.
fn started(cfg: &ConfigBag) -> RecordedCall {
    let (service, operation) = cfg
        .load::<Metadata>()
        .map(|m| (iam_service_prefix(m.service()), m.name().to_string()))
        .unwrap_or_default();
    let mut call = RecordedCall::new(&service, &operation);
    call.succeeded = false;
    call.region = cfg
        .load::<Region>()
        .map(|r| r.as_ref().to_string())
        .or_else(|| cfg.load::<SigningRegion>().map(|r| r.as_ref().to_string()));
    call
}

/// Outcome: success when the operation produced its output (and the HTTP status, if any, is a
/// success); otherwise the error code AWS answered with.
fn finish(call: &mut RecordedCall, context: &FinalizerInterceptorContextRef<'_>) {
    let output = context.output_or_error().and_then(Result::ok);
    let status_ok = context.response().is_none_or(|r| r.status().is_success());
    call.succeeded = output.is_some() && status_ok;
    if let Some(output) = output {
        describe_output(output, call);
    }
    if !call.succeeded {
        call.error_code = context.response().and_then(error_code);
    }
}

/// Runs `describe` when the input is a `T`.
fn with<T: Debug + Send + Sync + 'static>(
    input: &Input,
    call: &mut RecordedCall,
    describe: fn(&T, &mut RecordedCall),
) -> bool {
    match input.downcast_ref::<T>() {
        Some(typed) => {
            describe(typed, call);
            true
        }
        None => false,
    }
}

/// Tags and identifiers of the inputs the contract check uses; other inputs record nothing.
fn describe_input(input: &Input, call: &mut RecordedCall) {
    use aws_sdk_ec2::operation as ec2;
    use aws_sdk_iam::operation as iam;
    let _ = with::<ec2::create_fleet::CreateFleetInput>(input, call, create_fleet)
        || with::<ec2::run_instances::RunInstancesInput>(input, call, run_instances)
        || with::<ec2::create_launch_template::CreateLaunchTemplateInput>(
            input,
            call,
            create_launch_template,
        )
        || with::<ec2::delete_launch_template::DeleteLaunchTemplateInput>(
            input,
            call,
            delete_launch_template,
        )
        || with::<ec2::create_tags::CreateTagsInput>(input, call, create_tags)
        || with::<ec2::terminate_instances::TerminateInstancesInput>(input, call, |i, c| {
            c.ids.ec2_ids.extend(i.instance_ids().iter().cloned());
        })
        || with::<iam::create_instance_profile::CreateInstanceProfileInput>(input, call, |i, c| {
            c.ids.instance_profile = i.instance_profile_name().map(str::to_string);
            c.ids.instance_profile_path = i.path().map(str::to_string);
            c.tags.extend(iam_tags(i.tags()));
        })
        || with::<iam::tag_instance_profile::TagInstanceProfileInput>(input, call, |i, c| {
            c.ids.instance_profile = i.instance_profile_name().map(str::to_string);
            c.tags.extend(iam_tags(i.tags()));
        })
        || describe_profile_input(input, call)
        || describe_other_input(input, call);
}

fn describe_profile_input(input: &Input, call: &mut RecordedCall) -> bool {
    use aws_sdk_iam::operation as iam;
    with::<iam::add_role_to_instance_profile::AddRoleToInstanceProfileInput>(input, call, |i, c| {
        c.ids.instance_profile = i.instance_profile_name().map(str::to_string);
        c.ids.role_name = i.role_name().map(str::to_string);
    }) || with::<iam::remove_role_from_instance_profile::RemoveRoleFromInstanceProfileInput>(
        input,
        call,
        |i, c| {
            c.ids.instance_profile = i.instance_profile_name().map(str::to_string);
            c.ids.role_name = i.role_name().map(str::to_string);
        },
    ) || with::<iam::delete_instance_profile::DeleteInstanceProfileInput>(input, call, |i, c| {
        c.ids.instance_profile = i.instance_profile_name().map(str::to_string);
    }) || with::<iam::get_instance_profile::GetInstanceProfileInput>(input, call, |i, c| {
        c.ids.instance_profile = i.instance_profile_name().map(str::to_string);
    }) || with::<iam::list_instance_profiles::ListInstanceProfilesInput>(input, call, |i, c| {
        c.ids.instance_profile_path = i.path_prefix().map(str::to_string);
    })
}

fn describe_other_input(input: &Input, call: &mut RecordedCall) -> bool {
    use aws_sdk_sqs::operation as sqs;
    with::<aws_sdk_ssm::operation::get_parameter::GetParameterInput>(input, call, |i, c| {
        c.ids.parameter_name = i.name().map(str::to_string);
    }) || with::<aws_sdk_eks::operation::describe_cluster::DescribeClusterInput>(
        input,
        call,
        |i, c| c.ids.cluster_name = i.name().map(str::to_string),
    ) || with::<sqs::receive_message::ReceiveMessageInput>(input, call, |i, c| {
        c.ids.queue = i.queue_url().map(str::to_string);
    }) || with::<sqs::delete_message::DeleteMessageInput>(input, call, |i, c| {
        c.ids.queue = i.queue_url().map(str::to_string);
    }) || with::<sqs::get_queue_url::GetQueueUrlInput>(input, call, |i, c| {
        c.ids.queue = i.queue_name().map(str::to_string);
    })
}

fn create_fleet(
    input: &aws_sdk_ec2::operation::create_fleet::CreateFleetInput,
    call: &mut RecordedCall,
) {
    add_tag_specifications(call, input.tag_specifications());
    for config in input.launch_template_configs() {
        if let Some(spec) = config.launch_template_specification() {
            push(
                &mut call.ids.launch_template_names,
                spec.launch_template_name(),
            );
            push(&mut call.ids.ec2_ids, spec.launch_template_id());
        }
        for o in config.overrides() {
            push(&mut call.ids.ec2_ids, o.subnet_id());
            push(&mut call.ids.ec2_ids, o.image_id());
        }
    }
}

fn run_instances(
    input: &aws_sdk_ec2::operation::run_instances::RunInstancesInput,
    call: &mut RecordedCall,
) {
    add_tag_specifications(call, input.tag_specifications());
    if let Some(spec) = input.launch_template() {
        push(
            &mut call.ids.launch_template_names,
            spec.launch_template_name(),
        );
        push(&mut call.ids.ec2_ids, spec.launch_template_id());
    }
    push(&mut call.ids.ec2_ids, input.image_id());
    push(&mut call.ids.ec2_ids, input.subnet_id());
    call.ids
        .ec2_ids
        .extend(input.security_group_ids().iter().cloned());
}

fn create_launch_template(
    input: &aws_sdk_ec2::operation::create_launch_template::CreateLaunchTemplateInput,
    call: &mut RecordedCall,
) {
    push(
        &mut call.ids.launch_template_names,
        input.launch_template_name(),
    );
    add_tag_specifications(call, input.tag_specifications());
    let data = input
        .launch_template_data()
        .map(|d| d.tag_specifications())
        .unwrap_or_default();
    for spec in data {
        add_template_tag_specification(call, spec);
    }
}

fn delete_launch_template(
    input: &aws_sdk_ec2::operation::delete_launch_template::DeleteLaunchTemplateInput,
    call: &mut RecordedCall,
) {
    push(
        &mut call.ids.launch_template_names,
        input.launch_template_name(),
    );
    push(&mut call.ids.ec2_ids, input.launch_template_id());
}

fn create_tags(
    input: &aws_sdk_ec2::operation::create_tags::CreateTagsInput,
    call: &mut RecordedCall,
) {
    call.ids.ec2_ids.extend(input.resources().iter().cloned());
    call.tags.extend(ec2_tags(input.tags()));
}

/// What an output adds: the id of a launch template just created (launches name it by id).
fn describe_output(output: &Output, call: &mut RecordedCall) {
    use aws_sdk_ec2::operation::create_launch_template::CreateLaunchTemplateOutput;
    if let Some(out) = output.downcast_ref::<CreateLaunchTemplateOutput>() {
        let id = out.launch_template().and_then(|t| t.launch_template_id());
        push(&mut call.ids.ec2_ids, id);
    }
}

fn push(list: &mut Vec<String>, value: Option<&str>) {
    if let Some(value) = value.filter(|v| !v.is_empty())
        && !list.iter().any(|v| v == value)
    {
        list.push(value.to_string());
    }
}

fn add_tag_specifications(call: &mut RecordedCall, specs: &[TagSpecification]) {
    for spec in specs {
        let kind = spec.resource_type().map(|r| r.as_str().to_string());
        let set = call
            .tag_specifications
            .entry(kind.unwrap_or_default())
            .or_default();
        set.extend(ec2_tags(spec.tags()));
    }
}

fn add_template_tag_specification(
    call: &mut RecordedCall,
    spec: &LaunchTemplateTagSpecificationRequest,
) {
    let kind = spec.resource_type().map(|r| r.as_str().to_string());
    let set = call
        .template_tag_specifications
        .entry(kind.unwrap_or_default())
        .or_default();
    set.extend(ec2_tags(spec.tags()));
}

fn ec2_tags(tags: &[aws_sdk_ec2::types::Tag]) -> TagSet {
    tags.iter()
        .filter_map(|t| {
            let key = t.key()?.to_string();
            Some((key, t.value().unwrap_or_default().to_string()))
        })
        .collect()
}

fn iam_tags(tags: &[aws_sdk_iam::types::Tag]) -> TagSet {
    tags.iter()
        .map(|t| (t.key().to_string(), t.value().to_string()))
        .collect()
}

/// The error code of a failed answer: the `x-amzn-ErrorType` header (REST/JSON protocols),
/// else the body's `<Code>` (EC2, IAM and other query protocols) or `__type` (JSON).
fn error_code(response: &HttpResponse) -> Option<String> {
    if let Some(header) = response.headers().get("x-amzn-errortype") {
        return Some(header.split(':').next().unwrap_or(header).to_string());
    }
    let body = std::str::from_utf8(response.body().bytes()?).ok()?;
    code_in_body(body)
}

fn code_in_body(body: &str) -> Option<String> {
    if let Some(code) = between(body, "<Code>", "</Code>") {
        return Some(code.trim().to_string());
    }
    let after = body.split("\"__type\"").nth(1)?;
    let value = between(after, "\"", "\"")?;
    Some(value.rsplit('#').next().unwrap_or(value).to_string())
}

fn between<'a>(text: &'a str, open: &str, close: &str) -> Option<&'a str> {
    let start = text.find(open)? + open.len();
    let len = text.get(start..)?.find(close)?;
    text.get(start..start + len)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_codes_are_read_from_query_and_json_bodies() {
        let ec2 = "<Response><Errors><Error><Code>InvalidVpcID.NotFound</Code><Message>x</Message></Error></Errors></Response>";
        assert_eq!(code_in_body(ec2).as_deref(), Some("InvalidVpcID.NotFound"));
        let json = r#"{"__type":"com.amazonaws.ssm#ParameterNotFound","message":"x"}"#;
        assert_eq!(code_in_body(json).as_deref(), Some("ParameterNotFound"));
        assert_eq!(code_in_body("not an error"), None);
    }

    #[test]
    fn clones_share_one_record_and_clear_empties_it() {
        let recorder = CallRecorder::new();
        let clone = recorder.clone();
        clone
            .lock()
            .push(RecordedCall::new("ec2", "DescribeSubnets"));
        assert_eq!(recorder.calls().len(), 1);
        recorder.clear();
        assert!(clone.calls().is_empty());
    }
}
