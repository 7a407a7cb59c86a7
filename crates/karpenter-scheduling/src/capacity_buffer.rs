//! CapacityBuffers as decisions read them (upstream `controllers/capacitybuffer/helpers.go`,
//! `state/virtualpods` and `controllers/provisioning/buffers.go`), values in, values out:
//!
//! - [`desired_replicas`]: how many chunks a buffer asks for (`replicas`, `percentage` of its
//!   scalable's replicas rounded up to at least 1, capped by `limits` over one chunk's requests);
//! - [`virtual_pods`]: the never-bound pods that stand for those chunks in a provisioning batch;
//! - [`is_virtual`] and [`buffer_of`]: which pods are virtual and whose;
//! - [`placements`]: where a batch put each buffer's virtual pods, and the nodes holding them;
//!   [`without_virtual`]: the batch's decisions about real pods only (events, metrics);
//! - [`provisioning_condition`]: the `Provisioning` condition a batch's outcome gives a buffer.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use k8s_openapi::api::core::v1::{PodCondition, PodSpec, PodStatus, PodTemplateSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use karpenter_api::autoscaling::v1beta1::{
    BUFFER_NAME_ANNOTATION, BUFFER_NAMESPACE_ANNOTATION, CapacityBufferSpec,
    FAKE_POD_ANNOTATION_KEY, FAKE_POD_ANNOTATION_VALUE, VIRTUAL_POD_PRIORITY, reasons,
};

use crate::pod::pod_requests;
use crate::resources::ResourceList;
use crate::{PodRecord, SolveResult};

/// Chunks of `percentage` percent of `scalable_replicas`: rounded up, at least 1 when both are
/// positive (upstream `calculatePercentageReplicas`).
pub fn percentage_replicas(scalable_replicas: i32, percentage: i32) -> i32 {
    let product = i64::from(scalable_replicas) * i64::from(percentage);
    let replicas = i32::try_from(product.div_euclid(100) + i64::from(product.rem_euclid(100) != 0))
        .unwrap_or(i32::MAX);
    if replicas < 1 && percentage > 0 && scalable_replicas > 0 {
        1
    } else {
        replicas
    }
}

/// Chunks of `requests` that fit in `limits`: the fewest over the limited resources one chunk
/// requests (rounded down); `None` when no limited resource is requested (upstream
/// `calculateLimitReplicas`).
pub fn limit_replicas(limits: &ResourceList, requests: &ResourceList) -> Option<i32> {
    limits
        .iter()
        .filter_map(|(name, limit)| {
            let request = requests.get(name);
            (!request.is_zero()).then(|| {
                let n = limit.millis().div_euclid(request.millis()).max(0);
                i32::try_from(n).unwrap_or(i32::MAX)
            })
        })
        .min()
}

/// The number of chunks a buffer asks for (upstream `computeReplicas`): the larger of
/// `spec.replicas` and the percentage of `scalable_replicas` (a scalable with no replicas gives
/// no percentage candidate), capped by `spec.limits` over one chunk's requests; with neither
/// `replicas` nor a percentage, as many chunks as the limits hold (0 without limits).
pub fn desired_replicas(
    spec: &CapacityBufferSpec,
    pod_spec: Option<&PodSpec>,
    scalable_replicas: Option<i32>,
) -> i32 {
    let mut candidates = Vec::new();
    if let (Some(percentage), Some(scalable)) = (spec.percentage, scalable_replicas)
        && scalable > 0
    {
        candidates.push(percentage_replicas(scalable, percentage));
    }
    candidates.extend(spec.replicas);
    let desired = candidates.iter().copied().max().unwrap_or(0);
    let limited = spec.limits.as_ref().and_then(|limits| {
        let limits = ResourceList::from_k8s(limits).ok()?;
        let requests = pod_requests(pod_spec).ok()?;
        limit_replicas(&limits, &requests)
    });
    match limited {
        Some(limit) if candidates.is_empty() => limit,
        Some(limit) => desired.min(limit),
        None => desired,
    }
}

/// One buffer, resolved: its identity, chunk count and the pod template of one chunk.
#[derive(Debug, Clone, PartialEq)]
pub struct ResolvedBuffer {
    pub namespace: String,
    pub name: String,
    pub uid: String,
    pub replicas: i32,
    pub template: PodTemplateSpec,
}

/// The virtual pods of `buffer` (upstream `BuildVirtualPods`): `replicas` pods named
/// `capacity-buffer-<name>-<i>`, with the template's labels, the buffer annotations, the
/// lowest priority, no node, no persistent or ephemeral volumes (and no mounts of them), and
/// `PodScheduled=False/Unschedulable`.
pub fn virtual_pods(buffer: &ResolvedBuffer) -> Vec<PodRecord> {
    if buffer.replicas <= 0 {
        return Vec::new();
    }
    let spec = Arc::new(sanitized(buffer.template.spec.clone().unwrap_or_default()));
    let labels = buffer
        .template
        .metadata
        .as_ref()
        .and_then(|m| m.labels.clone());
    let annotations: BTreeMap<String, String> = [
        (FAKE_POD_ANNOTATION_KEY, FAKE_POD_ANNOTATION_VALUE),
        (BUFFER_NAME_ANNOTATION, buffer.name.as_str()),
        (BUFFER_NAMESPACE_ANNOTATION, buffer.namespace.as_str()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v.to_owned()))
    .collect();
    (1..=buffer.replicas)
        .map(|i| PodRecord {
            metadata: ObjectMeta {
                name: Some(format!("capacity-buffer-{}-{i}", buffer.name)),
                namespace: Some(buffer.namespace.clone()),
                uid: Some(format!("{}-{i}", buffer.uid)),
                labels: labels.clone(),
                annotations: Some(annotations.clone()),
                ..ObjectMeta::default()
            },
            spec: Some(spec.clone()),
            status: Some(PodStatus {
                conditions: Some(vec![PodCondition {
                    type_: "PodScheduled".into(),
                    status: "False".into(),
                    reason: Some("Unschedulable".into()),
                    ..PodCondition::default()
                }]),
                ..PodStatus::default()
            }),
            node_name: None,
        })
        .collect()
}

fn sanitized(mut spec: PodSpec) -> PodSpec {
    spec.node_name = None;
    spec.priority = Some(VIRTUAL_POD_PRIORITY);
    let mut dropped = Vec::new();
    if let Some(volumes) = spec.volumes.as_mut() {
        volumes.retain(|v| {
            let keep = v.persistent_volume_claim.is_none() && v.ephemeral.is_none();
            if !keep {
                dropped.push(v.name.clone());
            }
            keep
        });
    }
    if !dropped.is_empty() {
        let containers = spec
            .containers
            .iter_mut()
            .chain(spec.init_containers.iter_mut().flatten());
        for c in containers {
            if let Some(mounts) = c.volume_mounts.as_mut() {
                mounts.retain(|m| !dropped.contains(&m.name));
            }
        }
    }
    spec
}

/// Whether `pod` is a CapacityBuffer's virtual pod.
pub fn is_virtual(pod: &PodRecord) -> bool {
    pod.annotation(FAKE_POD_ANNOTATION_KEY) == Some(FAKE_POD_ANNOTATION_VALUE)
}

/// `namespace/name` of the buffer a virtual pod stands for.
pub fn buffer_of(pod: &PodRecord) -> Option<String> {
    if !is_virtual(pod) {
        return None;
    }
    let namespace = pod.annotation(BUFFER_NAMESPACE_ANNOTATION)?;
    let name = pod.annotation(BUFFER_NAME_ANNOTATION)?;
    (!namespace.is_empty() && !name.is_empty()).then(|| format!("{namespace}/{name}"))
}

/// Where one batch put a buffer's virtual pods.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct BufferPlacement {
    pub existing: usize,
    pub new_capacity: usize,
    pub failed: usize,
}

/// Where `result` put the virtual pods of `virtual_pods` (pod key -> buffer key): per buffer
/// (upstream `classifyBufferPods`), and the existing nodes that hold any (upstream
/// `bufferPodCountsFromResults`).
pub fn placements(
    result: &SolveResult,
    virtual_pods: &BTreeMap<String, String>,
) -> (BTreeMap<String, BufferPlacement>, BTreeSet<String>) {
    let mut by_buffer: BTreeMap<String, BufferPlacement> = BTreeMap::new();
    let mut nodes = BTreeSet::new();
    for p in &result.existing_placements {
        if let Some(buffer) = virtual_pods.get(&p.pod.to_string()) {
            by_buffer.entry(buffer.clone()).or_default().existing += 1;
            nodes.insert(p.node.clone());
        }
    }
    for pod in result.new_node_claims.iter().flat_map(|c| &c.pods) {
        if let Some(buffer) = virtual_pods.get(&pod.to_string()) {
            by_buffer.entry(buffer.clone()).or_default().new_capacity += 1;
        }
    }
    for u in &result.unschedulable {
        if let Some(buffer) = virtual_pods.get(&u.pod.to_string()) {
            by_buffer.entry(buffer.clone()).or_default().failed += 1;
        }
    }
    (by_buffer, nodes)
}

/// `result` without the pods of `virtual_pods` (their keys): what the batch decided about real
/// pods (upstream `filterVirtualPodErrors`, `filterVirtualPodMapping`). NodeClaims launched for
/// virtual pods only stay, with no pods.
pub fn without_virtual(
    result: &SolveResult,
    virtual_pods: &BTreeMap<String, String>,
) -> SolveResult {
    let real = |key: String| !virtual_pods.contains_key(&key);
    let mut out = result.clone();
    for claim in &mut out.new_node_claims {
        claim.pods.retain(|p| real(p.to_string()));
    }
    out.existing_placements.retain(|p| real(p.pod.to_string()));
    out.unschedulable.retain(|u| real(u.pod.to_string()));
    out
}

/// A condition to set: status, reason, message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConditionUpdate {
    pub status: &'static str,
    pub reason: &'static str,
    pub message: String,
}

/// The `Provisioning` condition a batch gives a buffer (upstream `computeProvisioningCondition`):
/// `False/NotReadyForProvisioning` when not ready, `False/BufferEmpty` with no chunks,
/// `False/RequiresNewCapacity` when any virtual pod needed a new NodeClaim or failed,
/// `True/FitsExistingCapacity` when all fit existing nodes; `None` (leave it) otherwise.
pub fn provisioning_condition(
    ready: bool,
    replicas: Option<i32>,
    placement: Option<BufferPlacement>,
) -> Option<ConditionUpdate> {
    if !ready {
        return Some(ConditionUpdate {
            status: "False",
            reason: reasons::NOT_READY_FOR_PROVISIONING,
            message: "Buffer is not ReadyForProvisioning".into(),
        });
    }
    let desired = usize::try_from(replicas.unwrap_or(0)).unwrap_or(0);
    if desired == 0 {
        return Some(ConditionUpdate {
            status: "False",
            reason: reasons::BUFFER_EMPTY,
            message: "Buffer has zero desired replicas".into(),
        });
    }
    let p = placement?;
    if p.new_capacity > 0 || p.failed > 0 {
        return Some(ConditionUpdate {
            status: "False",
            reason: reasons::REQUIRES_NEW_CAPACITY,
            message: format!(
                "{}/{desired} virtual pods required new capacity, {} failed",
                p.new_capacity, p.failed
            ),
        });
    }
    (p.existing == desired).then(|| ConditionUpdate {
        status: "True",
        reason: reasons::FITS_EXISTING_CAPACITY,
        message: format!("All {desired} virtual pods fit on existing capacity"),
    })
}

#[cfg(test)]
#[path = "capacity_buffer_tests.rs"]
mod tests;
