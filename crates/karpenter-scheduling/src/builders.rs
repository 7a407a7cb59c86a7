//! Builders for test and benchmark objects: `PodBuilder::new("web").cpu("500m").zone("a")`.
//!
//! Builders never panic: an unparsable quantity is kept as written and reported by the solver
//! as a validation error of that pod.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    Affinity, Container, ContainerPort, NodeAffinity, NodeSelector, NodeSelectorRequirement,
    NodeSelectorTerm, PersistentVolumeClaimVolumeSource, Pod, PodAffinity, PodAffinityTerm,
    PodAntiAffinity, PodSpec, PreferredSchedulingTerm, ResourceRequirements, Taint, Toleration,
    TopologySpreadConstraint, Volume, WeightedPodAffinityTerm,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity as K8sQuantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{
    LabelSelector, ObjectMeta, OwnerReference, Time,
};

use crate::input::{InstanceType, Offering, Operator, Overhead, RequirementSpec};
use crate::resources::ResourceList;

/// Builds a pod with one container.
#[derive(Debug, Clone)]
pub struct PodBuilder {
    pod: Pod,
}

fn req(key: &str, op: &str, values: &[&str]) -> NodeSelectorRequirement {
    NodeSelectorRequirement {
        key: key.into(),
        operator: op.into(),
        values: if values.is_empty() && matches!(op, "Exists" | "DoesNotExist") {
            None
        } else {
            Some(values.iter().map(|v| v.to_string()).collect())
        },
    }
}

/// A selector matching these labels.
pub fn match_labels(labels: &[(&str, &str)]) -> LabelSelector {
    LabelSelector {
        match_labels: Some(
            labels
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        ),
        match_expressions: None,
    }
}

impl PodBuilder {
    pub fn new(name: &str) -> Self {
        PodBuilder {
            pod: Pod {
                metadata: ObjectMeta {
                    name: Some(name.into()),
                    namespace: Some("default".into()),
                    uid: Some(name.into()),
                    ..Default::default()
                },
                spec: Some(PodSpec {
                    containers: vec![Container {
                        name: "main".into(),
                        ..Default::default()
                    }],
                    ..Default::default()
                }),
                status: None,
            },
        }
    }

    fn spec(&mut self) -> &mut PodSpec {
        self.pod.spec.get_or_insert_with(Default::default)
    }

    fn affinity(&mut self) -> &mut Affinity {
        self.spec().affinity.get_or_insert_with(Default::default)
    }

    fn container(&mut self) -> &mut Container {
        let spec = self.spec();
        if spec.containers.is_empty() {
            spec.containers.push(Container::default());
        }
        &mut spec.containers[0]
    }

    /// `status.phase` (`Pending` for what the provisioner solves for).
    pub fn phase(mut self, phase: &str) -> Self {
        self.pod.status.get_or_insert_with(Default::default).phase = Some(phase.into());
        self
    }

    pub fn namespace(mut self, ns: &str) -> Self {
        self.pod.metadata.namespace = Some(ns.into());
        self
    }

    pub fn uid(mut self, uid: &str) -> Self {
        self.pod.metadata.uid = Some(uid.into());
        self
    }

    /// Creation time in nanoseconds since the epoch (queue tie-break).
    pub fn created_nanos(mut self, nanos: i64) -> Self {
        if let Ok(ts) = k8s_openapi::jiff::Timestamp::from_nanosecond(i128::from(nanos)) {
            self.pod.metadata.creation_timestamp = Some(Time(ts));
        }
        self
    }

    /// A container request.
    pub fn request(mut self, resource: &str, quantity: &str) -> Self {
        let c = self.container();
        c.resources
            .get_or_insert_with(ResourceRequirements::default)
            .requests
            .get_or_insert_with(BTreeMap::new)
            .insert(resource.into(), K8sQuantity(quantity.into()));
        self
    }

    /// A container limit.
    pub fn limit(mut self, resource: &str, quantity: &str) -> Self {
        let c = self.container();
        c.resources
            .get_or_insert_with(ResourceRequirements::default)
            .limits
            .get_or_insert_with(BTreeMap::new)
            .insert(resource.into(), K8sQuantity(quantity.into()));
        self
    }

    pub fn cpu(self, q: &str) -> Self {
        self.request("cpu", q)
    }

    pub fn memory(self, q: &str) -> Self {
        self.request("memory", q)
    }

    /// An extra container with these requests.
    pub fn container_requests(mut self, requests: &[(&str, &str)]) -> Self {
        let c = Container {
            name: format!("c{}", self.spec().containers.len()),
            resources: Some(ResourceRequirements {
                requests: Some(
                    requests
                        .iter()
                        .map(|(k, v)| (k.to_string(), K8sQuantity(v.to_string())))
                        .collect(),
                ),
                ..Default::default()
            }),
            ..Default::default()
        };
        self.spec().containers.push(c);
        self
    }

    /// An init container; `sidecar` makes it restartable (`restartPolicy: Always`).
    pub fn init_container(mut self, requests: &[(&str, &str)], sidecar: bool) -> Self {
        let spec = self.spec();
        let n = spec.init_containers.as_ref().map_or(0, Vec::len);
        spec.init_containers
            .get_or_insert_with(Vec::new)
            .push(Container {
                name: format!("init{n}"),
                restart_policy: sidecar.then(|| "Always".to_string()),
                resources: Some(ResourceRequirements {
                    requests: Some(
                        requests
                            .iter()
                            .map(|(k, v)| (k.to_string(), K8sQuantity(v.to_string())))
                            .collect(),
                    ),
                    ..Default::default()
                }),
                ..Default::default()
            });
        self
    }

    pub fn overhead(mut self, overhead: &[(&str, &str)]) -> Self {
        self.spec().overhead = Some(
            overhead
                .iter()
                .map(|(k, v)| (k.to_string(), K8sQuantity(v.to_string())))
                .collect(),
        );
        self
    }

    pub fn label(mut self, key: &str, value: &str) -> Self {
        self.pod
            .metadata
            .labels
            .get_or_insert_with(BTreeMap::new)
            .insert(key.into(), value.into());
        self
    }

    pub fn node_selector(mut self, key: &str, value: &str) -> Self {
        self.spec()
            .node_selector
            .get_or_insert_with(BTreeMap::new)
            .insert(key.into(), value.into());
        self
    }

    /// `topology.kubernetes.io/zone` node selector.
    pub fn zone(self, zone: &str) -> Self {
        self.node_selector(karpenter_api::labels::ZONE, zone)
    }

    /// Adds a required node-affinity term (terms are ORed).
    pub fn required_term(mut self, exprs: &[(&str, &str, &[&str])]) -> Self {
        let term = NodeSelectorTerm {
            match_expressions: Some(exprs.iter().map(|(k, op, v)| req(k, op, v)).collect()),
            match_fields: None,
        };
        let na = self
            .affinity()
            .node_affinity
            .get_or_insert_with(NodeAffinity::default);
        na.required_during_scheduling_ignored_during_execution
            .get_or_insert_with(|| NodeSelector {
                node_selector_terms: Vec::new(),
            })
            .node_selector_terms
            .push(term);
        self
    }

    /// Adds a preferred node-affinity term.
    pub fn preferred_term(mut self, weight: i32, exprs: &[(&str, &str, &[&str])]) -> Self {
        let term = PreferredSchedulingTerm {
            weight,
            preference: NodeSelectorTerm {
                match_expressions: Some(exprs.iter().map(|(k, op, v)| req(k, op, v)).collect()),
                match_fields: None,
            },
        };
        let na = self
            .affinity()
            .node_affinity
            .get_or_insert_with(NodeAffinity::default);
        na.preferred_during_scheduling_ignored_during_execution
            .get_or_insert_with(Vec::new)
            .push(term);
        self
    }

    pub fn toleration(mut self, t: Toleration) -> Self {
        self.spec().tolerations.get_or_insert_with(Vec::new).push(t);
        self
    }

    /// Tolerates `key` with any value and effect.
    pub fn tolerate(self, key: &str) -> Self {
        self.toleration(Toleration {
            key: Some(key.into()),
            operator: Some("Exists".into()),
            ..Default::default()
        })
    }

    fn term(selector: &[(&str, &str)], key: &str) -> PodAffinityTerm {
        PodAffinityTerm {
            label_selector: Some(match_labels(selector)),
            topology_key: key.into(),
            ..Default::default()
        }
    }

    /// A pod-affinity or anti-affinity term; `weight: None` means required.
    pub fn pod_affinity_term(
        mut self,
        anti: bool,
        term: PodAffinityTerm,
        weight: Option<i32>,
    ) -> Self {
        let aff = self.affinity();
        match (anti, weight) {
            (false, None) => aff
                .pod_affinity
                .get_or_insert_with(PodAffinity::default)
                .required_during_scheduling_ignored_during_execution
                .get_or_insert_with(Vec::new)
                .push(term),
            (false, Some(w)) => aff
                .pod_affinity
                .get_or_insert_with(PodAffinity::default)
                .preferred_during_scheduling_ignored_during_execution
                .get_or_insert_with(Vec::new)
                .push(WeightedPodAffinityTerm {
                    weight: w,
                    pod_affinity_term: term,
                }),
            (true, None) => aff
                .pod_anti_affinity
                .get_or_insert_with(PodAntiAffinity::default)
                .required_during_scheduling_ignored_during_execution
                .get_or_insert_with(Vec::new)
                .push(term),
            (true, Some(w)) => aff
                .pod_anti_affinity
                .get_or_insert_with(PodAntiAffinity::default)
                .preferred_during_scheduling_ignored_during_execution
                .get_or_insert_with(Vec::new)
                .push(WeightedPodAffinityTerm {
                    weight: w,
                    pod_affinity_term: term,
                }),
        }
        self
    }

    /// Required pod affinity to pods matching `selector` over `key`.
    pub fn affinity_to(self, selector: &[(&str, &str)], key: &str) -> Self {
        self.pod_affinity_term(false, Self::term(selector, key), None)
    }

    /// Required pod anti-affinity to pods matching `selector` over `key`.
    pub fn anti_affinity_to(self, selector: &[(&str, &str)], key: &str) -> Self {
        self.pod_affinity_term(true, Self::term(selector, key), None)
    }

    pub fn preferred_affinity_to(self, weight: i32, selector: &[(&str, &str)], key: &str) -> Self {
        self.pod_affinity_term(false, Self::term(selector, key), Some(weight))
    }

    pub fn preferred_anti_affinity_to(
        self,
        weight: i32,
        selector: &[(&str, &str)],
        key: &str,
    ) -> Self {
        self.pod_affinity_term(true, Self::term(selector, key), Some(weight))
    }

    pub fn spread(mut self, tsc: TopologySpreadConstraint) -> Self {
        self.spec()
            .topology_spread_constraints
            .get_or_insert_with(Vec::new)
            .push(tsc);
        self
    }

    /// A `DoNotSchedule` spread over `key` with `maxSkew`, selecting `selector`.
    pub fn spread_over(self, key: &str, max_skew: i32, selector: &[(&str, &str)]) -> Self {
        self.spread(TopologySpreadConstraint {
            topology_key: key.into(),
            max_skew,
            when_unsatisfiable: "DoNotSchedule".into(),
            label_selector: Some(match_labels(selector)),
            ..Default::default()
        })
    }

    pub fn host_port(mut self, port: i32) -> Self {
        self.container()
            .ports
            .get_or_insert_with(Vec::new)
            .push(ContainerPort {
                container_port: port,
                host_port: Some(port),
                ..Default::default()
            });
        self
    }

    pub fn pvc(mut self, claim: &str) -> Self {
        let n = self.spec().volumes.as_ref().map_or(0, Vec::len);
        self.spec()
            .volumes
            .get_or_insert_with(Vec::new)
            .push(Volume {
                name: format!("v{n}"),
                persistent_volume_claim: Some(PersistentVolumeClaimVolumeSource {
                    claim_name: claim.into(),
                    read_only: None,
                }),
                ..Default::default()
            });
        self
    }

    pub fn owned_by(mut self, kind: &str, name: &str) -> Self {
        self.pod
            .metadata
            .owner_references
            .get_or_insert_with(Vec::new)
            .push(OwnerReference {
                api_version: "apps/v1".into(),
                kind: kind.into(),
                name: name.into(),
                uid: name.into(),
                ..Default::default()
            });
        self
    }

    pub fn build(self) -> Pod {
        self.pod
    }
}

/// A taint.
pub fn taint(key: &str, value: Option<&str>, effect: &str) -> Taint {
    Taint {
        key: key.into(),
        value: value.map(Into::into),
        effect: effect.into(),
        time_added: None,
    }
}

/// Builds an instance type.
#[derive(Debug, Clone)]
pub struct InstanceTypeBuilder {
    it: InstanceType,
}

impl InstanceTypeBuilder {
    /// `cpu` cores and `memory` (a quantity), `pods` 110, amd64/linux, on-demand + spot offerings
    /// in the given zones at `price`.
    pub fn new(name: &str) -> Self {
        InstanceTypeBuilder {
            it: InstanceType {
                name: name.into(),
                requirements: vec![RequirementSpec::is_in(
                    karpenter_api::labels::INSTANCE_TYPE,
                    &[name],
                )],
                offerings: Vec::new(),
                capacity: ResourceList::new(),
                overhead: Overhead::default(),
            },
        }
    }

    pub fn resource(mut self, name: &str, q: &str) -> Self {
        if let Ok(q) = crate::Quantity::parse(q) {
            self.it.capacity.set(name, q);
        }
        self
    }

    pub fn requirement(mut self, key: &str, op: Operator, values: &[&str]) -> Self {
        self.it.requirements.retain(|r| r.key != key);
        self.it
            .requirements
            .push(RequirementSpec::new(key, op, values));
        self
    }

    pub fn offering(
        mut self,
        zone: &str,
        capacity_type: &str,
        price: f64,
        available: bool,
    ) -> Self {
        self.it.offerings.push(Offering {
            zone: zone.into(),
            capacity_type: capacity_type.into(),
            price,
            available,
            requirements: Vec::new(),
            reservation_capacity: 0,
        });
        self
    }

    /// A `reserved` offering of capacity reservation `id` with `slots` free slots.
    pub fn reserved_offering(mut self, zone: &str, price: f64, id: &str, slots: u32) -> Self {
        self.it.offerings.push(Offering {
            zone: zone.into(),
            capacity_type: "reserved".into(),
            price,
            available: true,
            requirements: vec![RequirementSpec::is_in(
                karpenter_api::labels::CAPACITY_RESERVATION_ID,
                &[id],
            )],
            reservation_capacity: slots,
        });
        self
    }

    pub fn kube_reserved(mut self, name: &str, q: &str) -> Self {
        if let Ok(q) = crate::Quantity::parse(q) {
            self.it.overhead.kube_reserved.set(name, q);
        }
        self
    }

    /// Sets zone and capacity-type requirements from the offerings.
    pub fn build(mut self) -> InstanceType {
        let mut zones: Vec<&str> = self.it.offerings.iter().map(|o| o.zone.as_str()).collect();
        zones.sort_unstable();
        zones.dedup();
        let mut cts: Vec<&str> = self
            .it
            .offerings
            .iter()
            .map(|o| o.capacity_type.as_str())
            .collect();
        cts.sort_unstable();
        cts.dedup();
        let mut extra = Vec::new();
        use karpenter_api::labels as l;
        if !self.it.requirements.iter().any(|r| r.key == l::ZONE) && !zones.is_empty() {
            extra.push(RequirementSpec::is_in(l::ZONE, &zones));
        }
        if !self
            .it
            .requirements
            .iter()
            .any(|r| r.key == l::CAPACITY_TYPE)
            && !cts.is_empty()
        {
            extra.push(RequirementSpec::is_in(l::CAPACITY_TYPE, &cts));
        }
        self.it.requirements.extend(extra);
        self.it
    }
}
