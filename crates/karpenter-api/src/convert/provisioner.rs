//! v1alpha5 Provisioner -> v1beta1 NodePool (+ an EC2NodeClass for an inline `provider`).
//!
//! Disruption choices, made so that the converted NodePool behaves like the Provisioner did:
//! - `consolidation.enabled: true` -> `WhenUnderutilized` (v1: `WhenEmptyOrUnderutilized`).
//! - `ttlSecondsAfterEmpty: N` -> `WhenEmpty` + `consolidateAfter: Ns`.
//! - neither -> `WhenEmpty` + `consolidateAfter: Never`. A v1alpha5 Provisioner with neither
//!   never removed empty nodes; `WhenEmpty` with `Never` is the only v1 spelling of "no
//!   consolidation at all" (v1's default would start consolidating underutilized nodes at once).
//! - `ttlSecondsUntilExpired: N` -> `expireAfter: Ns`; unset -> `expireAfter: Never`, because
//!   v1alpha5 nodes without it never expired while v1beta1 and v1 default to 720h.

use std::time::Duration;

use crate::duration::format_go_duration;
use crate::legacy::v1alpha1_aws::AwsNodeTemplateSpec;
use crate::legacy::v1alpha5::Provisioner;
use crate::legacy::v1beta1::{self, ConsolidationPolicy, Disruption, NodeClassReference};
use crate::legacy::{Object, v1beta1_aws};
use crate::v1::TemplateMetadata;
use crate::yaml::from_value;

use super::{FieldError, Notes, Options, Produced, metadata, node_template, requirements, to_json};

/// v1alpha5 kubelet keys that v1beta1 dropped.
const DROPPED_KUBELET_KEYS: &[(&str, &str)] = &[(
    "containerRuntime",
    "dropped: containerd is the only runtime since v1beta1",
)];

/// A v1beta1 object produced from an alpha one, with the notes gathered on the way.
pub(crate) enum Beta {
    NodePool(v1beta1::NodePool, Notes),
    NodeClass(v1beta1_aws::EC2NodeClass, Notes),
}

impl Beta {
    /// The object as v1beta1 output (`--to v1beta1`).
    pub(crate) fn serialize(self) -> Result<Produced, FieldError> {
        let (value, notes) = match self {
            Beta::NodePool(np, notes) => (to_json(&np)?, notes),
            Beta::NodeClass(nc, notes) => (to_json(&nc)?, notes),
        };
        Ok(Produced {
            value,
            notes,
            kubelet: None,
        })
    }
}

fn seconds(value: i64, field: &str) -> Result<String, FieldError> {
    let secs = u64::try_from(value)
        .map_err(|_| FieldError::new(field, format!("must be non-negative, found {value}")))?;
    Ok(format_go_duration(Duration::from_secs(secs)))
}

pub(crate) fn to_v1beta1(p: &Provisioner, options: &Options) -> Result<Vec<Beta>, FieldError> {
    let name = p.name().to_owned();
    let spec = &p.spec;
    let mut notes = Notes::default();
    notes.dropped_unknown("spec", &spec.unknown);

    let mut reqs = requirements::requirements(&spec.requirements, &mut notes);
    requirements::add_v1alpha5_defaults(&mut reqs, &mut notes);

    let kubelet = spec.kubelet_configuration.as_ref().map(|k| {
        let mut k = k.clone();
        for (key, why) in DROPPED_KUBELET_KEYS {
            if k.remove(*key).is_some() {
                notes.warn(format!("spec.kubeletConfiguration.{key}"), *why);
            }
        }
        k
    });

    let (node_class_ref, generated) = match (&spec.provider_ref, &spec.provider) {
        (Some(_), Some(_)) => {
            return Err(FieldError::new(
                "spec.provider",
                "set both provider and providerRef: use only one",
            ));
        }
        (None, None) => {
            return Err(FieldError::new(
                "spec.providerRef",
                "required: a NodePool needs a node class (set providerRef or provider)",
            ));
        }
        (Some(r), None) => {
            if let Some(kind) = r.kind.as_deref().filter(|k| *k != "AWSNodeTemplate") {
                notes.warn(
                    "spec.template.spec.nodeClassRef.kind",
                    format!(
                        "providerRef.kind was {kind}; converted as a reference to an EC2NodeClass"
                    ),
                );
            }
            (r.name.clone(), None)
        }
        (None, Some(raw)) => {
            let mut provider: AwsNodeTemplateSpec = from_value(raw).map_err(|e| {
                FieldError::new(
                    format!("spec.provider.{}", e.path)
                        .trim_end_matches('.')
                        .to_owned(),
                    e.message,
                )
            })?;
            // Inline providers carried their own type meta (`extensions.karpenter.sh/v1alpha1 AWS`).
            provider.unknown.remove("apiVersion");
            provider.unknown.remove("kind");
            let mut nc_notes = Notes::default();
            nc_notes.info(
                "",
                format!("generated from the inline spec.provider of Provisioner/{name}"),
            );
            let nc_spec =
                node_template::spec_to_v1beta1(&provider, options, &mut nc_notes, "spec.provider")?;
            notes.info(
                "spec.template.spec.nodeClassRef.name",
                format!("the inline spec.provider became EC2NodeClass/{name}"),
            );
            let nc = Object {
                api_version: "karpenter.k8s.aws/v1beta1".to_owned(),
                kind: "EC2NodeClass".to_owned(),
                metadata: k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
                    name: Some(name.clone()),
                    ..Default::default()
                },
                spec: nc_spec,
            };
            (name.clone(), Some(Beta::NodeClass(nc, nc_notes)))
        }
    };

    let mut disruption = Disruption::default();
    let consolidation = spec.consolidation.as_ref().and_then(|c| c.enabled) == Some(true);
    if consolidation {
        disruption.consolidation_policy = Some(ConsolidationPolicy::WhenUnderutilized);
        if spec.ttl_seconds_after_empty.is_some() {
            notes.warn(
                "spec.ttlSecondsAfterEmpty",
                "dropped: consolidation already removes empty nodes (v1alpha5 rejected both together)",
            );
        }
    } else if let Some(ttl) = spec.ttl_seconds_after_empty {
        disruption.consolidation_policy = Some(ConsolidationPolicy::WhenEmpty);
        disruption.consolidate_after = Some(seconds(ttl, "spec.ttlSecondsAfterEmpty")?);
        notes.info(
            "spec.disruption.consolidateAfter",
            format!("from ttlSecondsAfterEmpty: {ttl}"),
        );
    } else {
        disruption.consolidation_policy = Some(ConsolidationPolicy::WhenEmpty);
        disruption.consolidate_after = Some("Never".to_owned());
        notes.info(
            "spec.disruption.consolidateAfter",
            "the Provisioner had neither consolidation nor ttlSecondsAfterEmpty, so it never removed empty or underutilized nodes; set a duration to remove empty nodes, or WhenEmptyOrUnderutilized to consolidate",
        );
    }
    match spec.ttl_seconds_until_expired {
        Some(ttl) => {
            disruption.expire_after = Some(seconds(ttl, "spec.ttlSecondsUntilExpired")?);
            notes.info(
                "spec.disruption.expireAfter",
                format!("from ttlSecondsUntilExpired: {ttl}"),
            );
        }
        None => {
            disruption.expire_after = Some("Never".to_owned());
            notes.info(
                "spec.disruption.expireAfter",
                "without ttlSecondsUntilExpired v1alpha5 nodes never expired, while NodePools default to 720h",
            );
        }
    }

    let nodepool = Object {
        api_version: "karpenter.sh/v1beta1".to_owned(),
        kind: "NodePool".to_owned(),
        metadata: metadata::clean(&p.metadata),
        spec: v1beta1::NodePoolSpec {
            template: v1beta1::NodeClaimTemplate {
                metadata: TemplateMetadata {
                    labels: requirements::labels(spec.labels.as_ref(), &mut notes),
                    annotations: requirements::annotations(spec.annotations.as_ref(), &mut notes),
                },
                spec: v1beta1::NodeClaimSpec {
                    taints: spec.taints.clone(),
                    startup_taints: spec.startup_taints.clone(),
                    requirements: reqs,
                    resources: None,
                    kubelet: kubelet.filter(|k| !k.is_empty()),
                    node_class_ref: Some(NodeClassReference {
                        api_version: Some("karpenter.k8s.aws/v1beta1".to_owned()),
                        kind: Some("EC2NodeClass".to_owned()),
                        name: node_class_ref,
                    }),
                    unknown: Default::default(),
                },
            },
            disruption: Some(disruption),
            limits: spec.limits.as_ref().and_then(|l| l.resources.clone()),
            weight: spec.weight,
            unknown: Default::default(),
        },
    };
    let mut out = vec![Beta::NodePool(nodepool, notes)];
    out.extend(generated);
    Ok(out)
}
