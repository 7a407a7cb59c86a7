//! v1beta1 NodePool -> v1 NodePool (the rules of upstream's v1 conversion webhook).
//!
//! - `WhenUnderutilized` (also the v1beta1 default) -> `WhenEmptyOrUnderutilized`.
//! - `consolidateAfter` absent -> `0s` (v1 requires it; v1beta1 consolidated at once).
//! - `disruption.expireAfter` -> `template.spec.expireAfter` (v1beta1 default 720h).
//! - `nodeClassRef.apiVersion` -> `group` (`karpenter.k8s.aws/v1beta1` -> `karpenter.k8s.aws`).
//! - `template.spec.kubelet` leaves the NodePool: [`super::kubelet`] moves it to the
//!   referenced EC2NodeClass.

use crate::duration::NillableDuration;
use crate::labels::AWS_GROUP;
use crate::legacy::v1beta1::{self, ConsolidationPolicy as BetaPolicy};
use crate::v1::nodepool::DEFAULT_EXPIRE_AFTER;
use crate::v1::{
    Budget, ConsolidationPolicy, Disruption, NodeClaimTemplate, NodeClaimTemplateSpec,
    NodeClassReference, NodePool, NodePoolSpec,
};

use super::kubelet::KubeletMove;
use super::{FieldError, Notes, Produced, metadata, to_json};

fn duration(raw: &str, field: &str) -> Result<NillableDuration, FieldError> {
    NillableDuration::parse(raw).map_err(|e| FieldError::new(field, e.to_string()))
}

/// The v1 reference for a v1beta1 one: the group of `apiVersion`, kind defaulting to EC2NodeClass.
pub(crate) fn node_class_ref(
    old: Option<&v1beta1::NodeClassReference>,
    field: &str,
) -> Result<NodeClassReference, FieldError> {
    let old =
        old.ok_or_else(|| FieldError::new(field, "required: the EC2NodeClass to launch with"))?;
    let group = old
        .api_version
        .as_deref()
        .and_then(|v| v.split('/').next())
        .filter(|g| !g.is_empty())
        .unwrap_or(AWS_GROUP);
    Ok(NodeClassReference {
        group: group.to_owned(),
        kind: old
            .kind
            .clone()
            .unwrap_or_else(|| "EC2NodeClass".to_owned()),
        name: old.name.clone(),
    })
}

/// Moves notes written against v1beta1 paths to where the field lives in v1.
fn relocate(notes: &mut Notes) {
    for note in &mut notes.0 {
        if note.field == "spec.disruption.expireAfter" {
            note.field = "spec.template.spec.expireAfter".to_owned();
        }
    }
}

pub(crate) fn to_v1(np: &v1beta1::NodePool, mut notes: Notes) -> Result<Produced, FieldError> {
    let spec = &np.spec;
    relocate(&mut notes);
    notes.dropped_unknown("spec", &spec.unknown);
    notes.dropped_unknown("spec.template.spec", &spec.template.spec.unknown);
    let old = spec.disruption.clone().unwrap_or_default();
    notes.dropped_unknown("spec.disruption", &old.unknown);
    let tspec = &spec.template.spec;
    if tspec.resources.is_some() {
        notes.warn(
            "spec.template.spec.resources",
            "dropped: NodePool templates take resources from pods",
        );
    }

    let policy = match old.consolidation_policy {
        Some(BetaPolicy::WhenEmpty) => ConsolidationPolicy::WhenEmpty,
        Some(BetaPolicy::WhenUnderutilized) | None => ConsolidationPolicy::WhenEmptyOrUnderutilized,
    };
    let consolidate_after = match &old.consolidate_after {
        Some(raw) => duration(raw, "spec.disruption.consolidateAfter")?,
        None => duration("0s", "spec.disruption.consolidateAfter")?,
    };
    let expire_after = match &old.expire_after {
        Some(raw) => {
            let d = duration(raw, "spec.disruption.expireAfter")?;
            if !notes
                .0
                .iter()
                .any(|n| n.field == "spec.template.spec.expireAfter")
            {
                notes.info("spec.template.spec.expireAfter", "moved from spec.disruption.expireAfter; in v1 changing it drifts existing nodes");
            }
            d
        }
        None => duration(DEFAULT_EXPIRE_AFTER, "spec.disruption.expireAfter")?,
    };
    let kubelet = tspec.kubelet.clone().filter(|k| !k.is_empty());
    let node_class_ref = node_class_ref(
        tspec.node_class_ref.as_ref(),
        "spec.template.spec.nodeClassRef",
    )?;

    let v1_spec = NodePoolSpec {
        template: NodeClaimTemplate {
            metadata: spec.template.metadata.clone(),
            spec: NodeClaimTemplateSpec {
                taints: tspec.taints.clone(),
                startup_taints: tspec.startup_taints.clone(),
                requirements: tspec.requirements.clone(),
                node_class_ref: node_class_ref.clone(),
                termination_grace_period: None,
                expire_after,
            },
        },
        disruption: Disruption {
            consolidate_after,
            consolidation_policy: policy,
            budgets: old
                .budgets
                .clone()
                .unwrap_or_else(|| vec![Budget::default()]),
        },
        limits: spec.limits.clone(),
        weight: spec.weight,
        replicas: None,
    };
    let mut out = NodePool::new(np.name(), v1_spec);
    out.metadata = metadata::clean(&np.metadata);
    let mut value = to_json(&out)?;
    if let Some(template) = value
        .pointer_mut("/spec/template")
        .and_then(|t| t.as_object_mut())
        && template
            .get("metadata")
            .is_some_and(|m| m.as_object().is_some_and(|m| m.is_empty()))
    {
        template.remove("metadata");
    }
    Ok(Produced {
        value,
        notes,
        kubelet: kubelet.map(|kubelet| KubeletMove {
            node_class: node_class_ref,
            kubelet,
        }),
    })
}
