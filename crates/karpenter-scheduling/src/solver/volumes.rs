//! Volume topology: a pod's PersistentVolumeClaims restrict where its node may be. A bound claim
//! uses its PersistentVolume's node affinity (hostname terms of local/hostPath volumes are
//! ignored: the node will be new); an unbound claim uses its StorageClass's allowed topologies.
//! Several volumes combine as a cross product of alternatives, incompatible branches pruned.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim};
use k8s_openapi::api::storage::v1::StorageClass;

use crate::input::Operator;
use crate::intern::Interner;
use crate::requirements::Requirements;

/// The cluster's volume objects, indexed by name.
#[derive(Debug, Default)]
pub struct VolumeIndex<'a> {
    claims: BTreeMap<(String, String), &'a PersistentVolumeClaim>,
    volumes: BTreeMap<String, &'a PersistentVolume>,
    classes: BTreeMap<String, &'a StorageClass>,
}

impl<'a> VolumeIndex<'a> {
    pub fn new(
        claims: &'a [PersistentVolumeClaim],
        volumes: &'a [PersistentVolume],
        classes: &'a [StorageClass],
    ) -> Self {
        VolumeIndex {
            claims: claims
                .iter()
                .map(|c| {
                    (
                        (
                            c.metadata
                                .namespace
                                .clone()
                                .unwrap_or_else(|| "default".into()),
                            c.metadata.name.clone().unwrap_or_default(),
                        ),
                        c,
                    )
                })
                .collect(),
            volumes: volumes
                .iter()
                .map(|v| (v.metadata.name.clone().unwrap_or_default(), v))
                .collect(),
            classes: classes
                .iter()
                .map(|c| (c.metadata.name.clone().unwrap_or_default(), c))
                .collect(),
        }
    }

    /// Requirement alternatives for a pod's claims (empty when unconstrained), or why the pod's
    /// volumes cannot be scheduled.
    pub fn alternatives(
        &self,
        namespace: &str,
        claims: &[String],
        interner: &mut Interner,
    ) -> Result<Vec<Requirements>, String> {
        let mut alternatives: Vec<Requirements> = Vec::new();
        for name in claims {
            let pvc = self
                .claims
                .get(&(namespace.to_string(), name.clone()))
                .ok_or_else(|| format!("persistentvolumeclaim {namespace}/{name} not found"))?;
            if pvc.metadata.deletion_timestamp.is_some() {
                return Err(format!(
                    "persistentvolumeclaim {namespace}/{name} is being deleted"
                ));
            }
            if pvc.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Lost") {
                return Err(format!("persistentvolumeclaim {namespace}/{name} is lost"));
            }
            let spec = pvc.spec.as_ref();
            let mut terms: Vec<Requirements> = Vec::new();
            if let Some(pv_name) = spec
                .and_then(|s| s.volume_name.as_deref())
                .filter(|n| !n.is_empty())
            {
                let pv = self
                    .volumes
                    .get(pv_name)
                    .ok_or_else(|| format!("persistentvolume {pv_name} not found"))?;
                let pv_spec = pv.spec.as_ref();
                let local = pv_spec.is_some_and(|s| s.local.is_some() || s.host_path.is_some());
                let required = pv_spec
                    .and_then(|s| s.node_affinity.as_ref())
                    .and_then(|a| a.required.as_ref());
                for term in required
                    .map(|r| r.node_selector_terms.as_slice())
                    .unwrap_or(&[])
                {
                    let mut reqs = Requirements::new();
                    for e in term.match_expressions.iter().flatten() {
                        let key = karpenter_api::labels::normalize_label_key(&e.key);
                        if local && key == karpenter_api::labels::HOSTNAME {
                            continue;
                        }
                        reqs.add_node_selector(e, interner)
                            .map_err(|unknown| unknown.to_string())?;
                    }
                    terms.push(reqs);
                }
            } else {
                let class_name = spec
                    .and_then(|s| s.storage_class_name.as_deref())
                    .filter(|n| !n.is_empty());
                let Some(class_name) = class_name else {
                    continue;
                };
                let class = self
                    .classes
                    .get(class_name)
                    .ok_or_else(|| format!("storageclass {class_name} not found"))?;
                if class.volume_binding_mode.as_deref() != Some("WaitForFirstConsumer") {
                    return Err(format!(
                        "persistentvolumeclaim {namespace}/{name} is unbound and its storage class binds immediately"
                    ));
                }
                for term in class.allowed_topologies.iter().flatten() {
                    let mut reqs = Requirements::new();
                    for e in term.match_label_expressions.iter().flatten() {
                        reqs.add_expression(
                            &e.key,
                            Operator::In,
                            e.values.iter().map(String::as_str),
                            None,
                            interner,
                        );
                    }
                    terms.push(reqs);
                }
            }
            if terms.is_empty() {
                continue;
            }
            alternatives = if alternatives.is_empty() {
                terms
            } else {
                let mut next = Vec::new();
                for a in &alternatives {
                    for t in &terms {
                        if a.overlaps(t, interner) {
                            let mut merged = a.clone();
                            merged.add_all(t, interner);
                            next.push(merged);
                        }
                    }
                }
                if next.is_empty() {
                    return Err("volumes have incompatible topology requirements".into());
                }
                next
            };
        }
        Ok(alternatives)
    }
}
