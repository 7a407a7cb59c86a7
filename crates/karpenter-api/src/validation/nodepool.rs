//! NodePool and NodeClaim rules.

use std::collections::HashSet;

use super::rules::{
    RequirementContext, is_hms_duration, is_nillable_duration, validate_annotations, validate_cron,
    validate_requirements, validate_resource_list, validate_taints, validate_template_labels,
};
use super::{FieldError, Path, Problems};
use crate::v1::nodepool::{BUDGET_DURATION_PATTERN, BUDGET_NODES_PATTERN};
use crate::v1::{Budget, NodeClaim, NodeClassReference, NodePool};

/// Validates a NodePool against the CRD rules and upstream's runtime validation.
pub fn validate_nodepool(nodepool: &NodePool) -> Vec<FieldError> {
    let mut problems = Problems::default();
    let spec = &nodepool.spec;
    let spec_path = Path::root().field("spec");
    let template = spec_path.field("template");
    let meta = template.field("metadata");
    if let Some(labels) = &spec.template.metadata.labels {
        validate_template_labels(labels, &meta.field("labels"), &mut problems);
    }
    if let Some(annotations) = &spec.template.metadata.annotations {
        validate_annotations(annotations, &meta.field("annotations"), &mut problems);
    }
    let tspec = &spec.template.spec;
    let tspec_path = template.field("spec");
    validate_taints(
        &tspec.taints,
        &tspec.startup_taints,
        &tspec_path,
        &mut problems,
    );
    validate_requirements(
        &tspec.requirements,
        RequirementContext::NodePool,
        &tspec_path.field("requirements"),
        &mut problems,
    );
    validate_node_class_ref(
        &tspec.node_class_ref,
        &tspec_path.field("nodeClassRef"),
        &mut problems,
    );
    if let Some(tgp) = &tspec.termination_grace_period
        && !is_hms_duration(tgp.as_str())
    {
        problems.push(
            &tspec_path.field("terminationGracePeriod"),
            format!(
                "{:?} must be a duration of hours, minutes and seconds such as 48h or 1h30m",
                tgp.as_str()
            ),
        );
    }
    if !is_nillable_duration(tspec.expire_after.as_str()) {
        problems.push(
            &tspec_path.field("expireAfter"),
            format!(
                "{:?} must be a duration such as 720h or 'Never'",
                tspec.expire_after.as_str()
            ),
        );
    }

    let disruption = spec_path.field("disruption");
    if !is_nillable_duration(spec.disruption.consolidate_after.as_str()) {
        problems.push(
            &disruption.field("consolidateAfter"),
            format!(
                "{:?} must be a duration such as 30s, 5m or 'Never'",
                spec.disruption.consolidate_after.as_str()
            ),
        );
    }
    validate_budgets(
        &spec.disruption.budgets,
        &disruption.field("budgets"),
        &mut problems,
    );

    if let Some(limits) = &spec.limits {
        validate_resource_list(limits, &spec_path.field("limits"), &mut problems);
    }
    if let Some(weight) = spec.weight
        && !(1..=100).contains(&weight)
    {
        problems.push(
            &spec_path.field("weight"),
            format!("must be between 1 and 100, found {weight}"),
        );
    }
    if let Some(replicas) = spec.replicas {
        if replicas < 0 {
            problems.push(
                &spec_path.field("replicas"),
                format!("must be non-negative, found {replicas}"),
            );
        }
        if spec.weight.is_some() {
            problems.push(
                &spec_path.field("weight"),
                "'weight' is not supported on static NodePools (replicas set)",
            );
        }
        if let Some(limits) = &spec.limits {
            for key in limits
                .keys()
                .filter(|k| k.as_str() != crate::labels::RESOURCE_NODES)
            {
                problems.push(
                    &spec_path.field("limits").key(key),
                    "only 'limits.nodes' is supported on static NodePools (replicas set)",
                );
            }
        }
    }
    problems.into_vec()
}

fn validate_budgets(budgets: &[Budget], path: &Path, problems: &mut Problems) {
    if budgets.len() > 50 {
        problems.push(
            path,
            format!("at most 50 budgets are allowed, found {}", budgets.len()),
        );
    }
    let nodes_pattern = regex::Regex::new(BUDGET_NODES_PATTERN).ok();
    let duration_pattern = regex::Regex::new(BUDGET_DURATION_PATTERN).ok();
    for (i, budget) in budgets.iter().enumerate() {
        let at = path.index(i);
        if !nodes_pattern
            .as_ref()
            .is_some_and(|re| re.is_match(&budget.nodes))
        {
            problems.push(
                &at.field("nodes"),
                format!(
                    "{:?} must be a non-negative integer or a percentage from 0% to 100%",
                    budget.nodes
                ),
            );
        }
        match (&budget.schedule, &budget.duration) {
            (Some(schedule), Some(_)) => {
                if let Err(message) = validate_cron(schedule) {
                    problems.push(&at.field("schedule"), message);
                }
            }
            (Some(_), None) => problems.push(
                &at.field("duration"),
                "'schedule' must be set with 'duration'",
            ),
            (None, Some(_)) => problems.push(
                &at.field("schedule"),
                "'duration' must be set with 'schedule'",
            ),
            (None, None) => {}
        }
        if let Some(duration) = &budget.duration
            && !duration_pattern
                .as_ref()
                .is_some_and(|re| re.is_match(duration.as_str()))
        {
            problems.push(
                &at.field("duration"),
                format!(
                    "{:?} must be hours and/or minutes, such as 8h, 30m or 1h30m",
                    duration.as_str()
                ),
            );
        }
        if let Some(reasons) = &budget.reasons {
            let mut seen = HashSet::new();
            for (j, reason) in reasons.iter().enumerate() {
                if !seen.insert(reason) {
                    problems.push(
                        &at.field("reasons").index(j),
                        format!("duplicate reason {:?}", reason.as_str()),
                    );
                }
            }
        }
    }
}

fn validate_node_class_ref(r: &NodeClassReference, path: &Path, problems: &mut Problems) {
    for (field, value) in [("group", &r.group), ("kind", &r.kind), ("name", &r.name)] {
        if value.is_empty() {
            problems.push(&path.field(field), format!("{field} may not be empty"));
        }
    }
    if r.group.contains('/') {
        problems.push(
            &path.field("group"),
            format!(
                "{:?} must be an API group without a version (e.g. karpenter.k8s.aws)",
                r.group
            ),
        );
    }
}

/// Validates a NodeClaim (the same requirement, taint and reference rules as its template).
pub fn validate_nodeclaim(nodeclaim: &NodeClaim) -> Vec<FieldError> {
    let mut problems = Problems::default();
    let spec = &nodeclaim.spec;
    let path = Path::root().field("spec");
    validate_taints(&spec.taints, &spec.startup_taints, &path, &mut problems);
    validate_requirements(
        &spec.requirements,
        RequirementContext::NodeClaim,
        &path.field("requirements"),
        &mut problems,
    );
    validate_node_class_ref(
        &spec.node_class_ref,
        &path.field("nodeClassRef"),
        &mut problems,
    );
    if let Some(requests) = spec.resources.as_ref().and_then(|r| r.requests.as_ref()) {
        validate_resource_list(
            requests,
            &path.field("resources").field("requests"),
            &mut problems,
        );
    }
    if let Some(tgp) = &spec.termination_grace_period
        && !is_hms_duration(tgp.as_str())
    {
        problems.push(
            &path.field("terminationGracePeriod"),
            format!("{:?} must be a duration such as 48h", tgp.as_str()),
        );
    }
    if !is_nillable_duration(spec.expire_after.as_str()) {
        problems.push(
            &path.field("expireAfter"),
            format!(
                "{:?} must be a duration such as 720h or 'Never'",
                spec.expire_after.as_str()
            ),
        );
    }
    problems.into_vec()
}
