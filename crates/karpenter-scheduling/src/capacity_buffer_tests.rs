use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::core::v1::{
    Container, PersistentVolumeClaimVolumeSource, PodSpec, PodTemplateSpec, ResourceRequirements,
    Volume, VolumeMount,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity as K8sQuantity;
use karpenter_api::autoscaling::v1beta1::CapacityBufferSpec;

use super::*;

fn chunk(cpu: &str, memory: &str) -> PodSpec {
    PodSpec {
        containers: vec![Container {
            name: "c".into(),
            resources: Some(ResourceRequirements {
                requests: Some(BTreeMap::from([
                    ("cpu".into(), K8sQuantity(cpu.into())),
                    ("memory".into(), K8sQuantity(memory.into())),
                ])),
                ..ResourceRequirements::default()
            }),
            ..Container::default()
        }],
        ..PodSpec::default()
    }
}

fn limits(pairs: &[(&str, &str)]) -> Option<BTreeMap<String, K8sQuantity>> {
    Some(
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), K8sQuantity((*v).to_owned())))
            .collect(),
    )
}

#[test]
fn replicas_alone_are_the_desired_count() {
    let spec = CapacityBufferSpec {
        replicas: Some(4),
        ..CapacityBufferSpec::default()
    };
    assert_eq!(
        desired_replicas(&spec, Some(&chunk("500m", "1Gi")), None),
        4
    );
}

#[test]
fn a_percentage_of_the_scalable_rounds_up_and_is_at_least_one() {
    assert_eq!(percentage_replicas(10, 20), 2);
    assert_eq!(percentage_replicas(10, 25), 3);
    assert_eq!(percentage_replicas(3, 1), 1);
    assert_eq!(percentage_replicas(0, 50), 0);
    assert_eq!(percentage_replicas(5, 0), 0);
}

#[test]
fn replicas_and_percentage_together_take_the_larger_as_upstream_does() {
    let spec = CapacityBufferSpec {
        replicas: Some(1),
        percentage: Some(50),
        ..CapacityBufferSpec::default()
    };
    assert_eq!(desired_replicas(&spec, None, Some(10)), 5);
}

#[test]
fn a_scalable_with_no_replicas_gives_no_percentage_candidate() {
    let spec = CapacityBufferSpec {
        percentage: Some(50),
        ..CapacityBufferSpec::default()
    };
    assert_eq!(desired_replicas(&spec, None, Some(0)), 0);
}

#[test]
fn limits_cap_the_count_by_the_scarcest_requested_resource() {
    let spec = CapacityBufferSpec {
        replicas: Some(10),
        limits: limits(&[("cpu", "2"), ("memory", "10Gi")]),
        ..CapacityBufferSpec::default()
    };
    assert_eq!(
        desired_replicas(&spec, Some(&chunk("500m", "1Gi")), None),
        4
    );
}

#[test]
fn limits_alone_fill_as_many_chunks_as_fit() {
    let spec = CapacityBufferSpec {
        limits: limits(&[("cpu", "1750m")]),
        ..CapacityBufferSpec::default()
    };
    assert_eq!(
        desired_replicas(&spec, Some(&chunk("500m", "1Gi")), None),
        3
    );
}

#[test]
fn limits_on_resources_the_chunk_does_not_request_do_not_cap() {
    let spec = CapacityBufferSpec {
        replicas: Some(6),
        limits: limits(&[("nvidia.com/gpu", "1")]),
        ..CapacityBufferSpec::default()
    };
    assert_eq!(
        desired_replicas(&spec, Some(&chunk("500m", "1Gi")), None),
        6
    );
}

fn buffer(replicas: i32, spec: PodSpec) -> ResolvedBuffer {
    ResolvedBuffer {
        namespace: "team".into(),
        name: "headroom".into(),
        uid: "u".into(),
        replicas,
        template: PodTemplateSpec {
            metadata: Some(ObjectMeta {
                labels: Some(BTreeMap::from([("app".into(), "web".into())])),
                ..ObjectMeta::default()
            }),
            spec: Some(spec),
        },
    }
}

#[test]
fn virtual_pods_are_named_annotated_unbound_and_lowest_priority() {
    let mut spec = chunk("500m", "1Gi");
    spec.node_name = Some("somewhere".into());
    let pods = virtual_pods(&buffer(2, spec));
    assert_eq!(pods.len(), 2);
    assert_eq!(pods[1].key(), "team/capacity-buffer-headroom-2");
    assert_eq!(pods[1].metadata.uid.as_deref(), Some("u-2"));
    assert!(pods.iter().all(is_virtual));
    assert_eq!(buffer_of(&pods[0]).as_deref(), Some("team/headroom"));
    assert_eq!(pods[0].node_name(), None);
    let spec = pods[0].spec.as_deref().expect("spec");
    assert_eq!(spec.priority, Some(i32::MIN));
    assert_eq!(
        pods[0]
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get("app"))
            .map(String::as_str),
        Some("web")
    );
}

#[test]
fn virtual_pods_drop_persistent_volumes_and_their_mounts() {
    let mut spec = chunk("500m", "1Gi");
    spec.volumes = Some(vec![Volume {
        name: "data".into(),
        persistent_volume_claim: Some(PersistentVolumeClaimVolumeSource {
            claim_name: "data".into(),
            ..PersistentVolumeClaimVolumeSource::default()
        }),
        ..Volume::default()
    }]);
    spec.containers[0].volume_mounts = Some(vec![VolumeMount {
        name: "data".into(),
        mount_path: "/data".into(),
        ..VolumeMount::default()
    }]);
    let pods = virtual_pods(&buffer(1, spec));
    let spec = pods[0].spec.as_deref().expect("spec");
    assert_eq!(spec.volumes.as_deref(), Some(&[][..]));
    assert_eq!(spec.containers[0].volume_mounts.as_deref(), Some(&[][..]));
}

#[test]
fn a_buffer_of_zero_chunks_has_no_virtual_pods() {
    assert!(virtual_pods(&buffer(0, chunk("1", "1Gi"))).is_empty());
}

#[test]
fn a_real_pod_is_not_virtual() {
    assert!(!is_virtual(&PodRecord::default()));
    assert_eq!(buffer_of(&PodRecord::default()), None);
}

#[test]
fn the_provisioning_condition_follows_where_the_virtual_pods_went() {
    let reason = |ready, replicas, placement| {
        provisioning_condition(ready, replicas, placement).map(|c| (c.status, c.reason))
    };
    let fits = BufferPlacement {
        existing: 4,
        ..BufferPlacement::default()
    };
    let needs = BufferPlacement {
        existing: 3,
        new_capacity: 1,
        failed: 0,
    };
    assert_eq!(
        reason(false, Some(4), Some(fits)),
        Some(("False", "NotReadyForProvisioning"))
    );
    assert_eq!(reason(true, Some(0), None), Some(("False", "BufferEmpty")));
    assert_eq!(reason(true, Some(4), None), None);
    assert_eq!(
        reason(true, Some(4), Some(needs)),
        Some(("False", "RequiresNewCapacity"))
    );
    assert_eq!(
        reason(true, Some(4), Some(fits)),
        Some(("True", "FitsExistingCapacity"))
    );
    let partial = BufferPlacement {
        existing: 2,
        ..BufferPlacement::default()
    };
    assert_eq!(reason(true, Some(4), Some(partial)), None);
}

#[test]
fn a_batch_counts_each_buffers_virtual_pods_by_where_they_went_and_names_their_nodes() {
    use crate::{ExistingPlacement, PodRef, Unschedulable};
    let pods = virtual_pods(&buffer(3, chunk("500m", "1Gi")));
    let refs: Vec<PodRef> = pods.iter().map(PodRef::of).collect();
    let real = PodRef {
        namespace: "team".into(),
        name: "web-1".into(),
        uid: "w".into(),
    };
    let result = SolveResult {
        existing_placements: vec![
            ExistingPlacement {
                pod: refs[0].clone(),
                node: "n1".into(),
            },
            ExistingPlacement {
                pod: real.clone(),
                node: "n2".into(),
            },
        ],
        unschedulable: vec![Unschedulable {
            pod: refs[2].clone(),
            reason: String::new(),
            reasons: Vec::new(),
            deferred: false,
        }],
        ..SolveResult::default()
    };
    let keys: BTreeMap<String, String> = pods
        .iter()
        .filter_map(|p| Some((p.key(), buffer_of(p)?)))
        .collect();
    let (by_buffer, nodes) = placements(&result, &keys);
    assert_eq!(
        by_buffer.get("team/headroom"),
        Some(&BufferPlacement {
            existing: 1,
            new_capacity: 0,
            failed: 1
        })
    );
    assert_eq!(nodes, BTreeSet::from(["n1".to_owned()]));
    let real_only = without_virtual(&result, &keys);
    assert_eq!(real_only.existing_placements.len(), 1);
    assert_eq!(real_only.existing_placements[0].pod, real);
    assert!(real_only.unschedulable.is_empty());
}
