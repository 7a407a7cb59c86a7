//! v1beta1 NodeClaim -> v1 NodeClaim. NodeClaims are created and owned by Karpenter, so the
//! result is for reference; the kubelet settings are dropped (they live on the EC2NodeClass).

use crate::duration::NillableDuration;
use crate::legacy::v1beta1;
use crate::v1::nodepool::DEFAULT_EXPIRE_AFTER;
use crate::v1::{NodeClaim, NodeClaimSpec};

use super::nodepool::node_class_ref;
use super::{FieldError, Notes, Produced, metadata, to_json};

pub(crate) fn to_v1(nc: &v1beta1::NodeClaim) -> Result<Produced, FieldError> {
    let mut notes = Notes::default();
    let spec = &nc.spec;
    notes.dropped_unknown("spec", &spec.unknown);
    notes.warn(
        "",
        "NodeClaims are created and owned by Karpenter from their NodePool: convert the NodePool instead of applying this",
    );
    if spec.kubelet.is_some() {
        notes.warn(
            "spec.kubelet",
            "dropped: v1 kubelet settings live on the EC2NodeClass",
        );
    }
    let v1_spec = NodeClaimSpec {
        taints: spec.taints.clone(),
        startup_taints: spec.startup_taints.clone(),
        requirements: spec.requirements.clone(),
        resources: spec.resources.clone(),
        node_class_ref: node_class_ref(spec.node_class_ref.as_ref(), "spec.nodeClassRef")?,
        termination_grace_period: None,
        expire_after: NillableDuration::parse(DEFAULT_EXPIRE_AFTER)
            .map_err(|e| FieldError::new("spec.expireAfter", e.to_string()))?,
    };
    let mut out = NodeClaim::new(nc.name(), v1_spec);
    out.metadata = metadata::clean(&nc.metadata);
    Ok(Produced {
        value: to_json(&out)?,
        notes,
        kubelet: None,
    })
}
