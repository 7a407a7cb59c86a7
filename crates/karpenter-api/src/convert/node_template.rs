//! v1alpha1 AWSNodeTemplate (or a Provisioner's inline `provider`) -> v1beta1 EC2NodeClass.
//!
//! Selector maps become selector terms ([`super::selectors`]), `amiFamily` defaults to AL2,
//! and the node IAM identity becomes `role` (`--node-role`, else the `$KARPENTER_NODE_ROLE`
//! placeholder) unless the template named an `instanceProfile`, which v1beta1 and v1 still
//! accept. `launchTemplateName` is an error: Karpenter builds its own launch templates.

use crate::legacy::v1alpha1_aws::{AwsNodeTemplate, AwsNodeTemplateSpec};
use crate::legacy::{Object, v1beta1_aws};

use super::{FieldError, NODE_ROLE_PLACEHOLDER, Notes, Options, Target, metadata, selectors};

pub(crate) fn to_v1beta1(
    template: &AwsNodeTemplate,
    options: &Options,
) -> Result<(v1beta1_aws::EC2NodeClass, Notes), FieldError> {
    let mut notes = Notes::default();
    let spec = spec_to_v1beta1(&template.spec, options, &mut notes, "spec")?;
    let nodeclass = Object {
        api_version: "karpenter.k8s.aws/v1beta1".to_owned(),
        kind: "EC2NodeClass".to_owned(),
        metadata: metadata::clean(&template.metadata),
        spec,
    };
    Ok((nodeclass, notes))
}

pub(crate) fn spec_to_v1beta1(
    spec: &AwsNodeTemplateSpec,
    options: &Options,
    notes: &mut Notes,
    prefix: &str,
) -> Result<v1beta1_aws::EC2NodeClassSpec, FieldError> {
    let launch_template_field = if spec.launch_template_name.is_some() {
        Some("launchTemplateName")
    } else if spec.launch_template.is_some() {
        Some("launchTemplate")
    } else {
        None
    };
    if let Some(field) = launch_template_field {
        return Err(FieldError::new(
            format!("{prefix}.{field}"),
            "launchTemplateName is not supported since v1beta1: Karpenter builds its own launch templates. Move the template's settings into the node class (amiSelector, userData, blockDeviceMappings, securityGroupSelector, metadataOptions, tags), remove launchTemplateName and convert again",
        ));
    }
    notes.dropped_unknown(prefix, &spec.unknown);
    let subnet = spec.subnet_selector.clone().unwrap_or_default();
    let subnet_terms = selectors::subnet_terms(&subnet, &format!("{prefix}.subnetSelector"), notes);
    if subnet_terms.is_empty() {
        return Err(FieldError::new(
            format!("{prefix}.subnetSelector"),
            "required: select the subnets by tag (e.g. karpenter.sh/discovery: <cluster>) or by aws-ids",
        ));
    }
    let sg = spec.security_group_selector.clone().unwrap_or_default();
    let sg_terms =
        selectors::security_group_terms(&sg, &format!("{prefix}.securityGroupSelector"), notes);
    if sg_terms.is_empty() {
        return Err(FieldError::new(
            format!("{prefix}.securityGroupSelector"),
            "required: select the security groups by tag (e.g. karpenter.sh/discovery: <cluster>) or by aws-ids",
        ));
    }
    let ami = spec.ami_selector.clone().unwrap_or_default();
    let ami_terms = selectors::ami_terms(&ami, &format!("{prefix}.amiSelector"), notes);
    let ami_family = match &spec.ami_family {
        Some(family) => family.clone(),
        None => {
            notes.info("spec.amiFamily", "unset: AL2, the v1alpha1 default");
            "AL2".to_owned()
        }
    };
    let (role, instance_profile) = match (&options.node_role, &spec.instance_profile) {
        (Some(role), Some(profile)) => {
            notes.warn(
                "spec.role",
                format!("--node-role {role} replaces the template's instanceProfile {profile}"),
            );
            (Some(role.clone()), None)
        }
        (Some(role), None) => (Some(role.clone()), None),
        (None, Some(profile)) => {
            notes.info(
                "spec.instanceProfile",
                "kept: an unmanaged instance profile; use role instead to let Karpenter manage the profile",
            );
            (None, Some(profile.clone()))
        }
        (None, None) => (Some(NODE_ROLE_PLACEHOLDER.to_owned()), None),
    };
    if options.target == Target::V1beta1 {
        super::nodeclass::role_placeholder_note(role.as_deref(), notes);
    }
    Ok(v1beta1_aws::EC2NodeClassSpec {
        subnet_selector_terms: subnet_terms,
        security_group_selector_terms: sg_terms,
        ami_selector_terms: ami_terms,
        ami_family: Some(ami_family),
        user_data: spec.user_data.clone(),
        role,
        instance_profile,
        tags: spec.tags.clone(),
        block_device_mappings: spec.block_device_mappings.clone(),
        instance_store_policy: None,
        detailed_monitoring: spec.detailed_monitoring,
        associate_public_ip_address: None,
        metadata_options: spec.metadata_options.clone(),
        context: spec.context.clone(),
        unknown: Default::default(),
    })
}
