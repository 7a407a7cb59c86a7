//! Workload expansion: ordinary manifests into the pods their controllers would create.
//!
//! | kind        | pods                                                                          |
//! |-------------|-------------------------------------------------------------------------------|
//! | Deployment  | `spec.replicas` (default 1) copies of the template, named `NAME-0`, `NAME-1`... |
//! | ReplicaSet  | the same                                                                      |
//! | StatefulSet | `spec.replicas` pods `NAME-i`; each `volumeClaimTemplates` entry `T` becomes a  |
//! |             | PersistentVolumeClaim `T-NAME-i` and a pod volume `T` that uses it              |
//! | Job         | the pods running at once: `min(parallelism, completions)` (parallelism default 1) |
//! | CronJob     | one run of `spec.jobTemplate`, as a Job                                      |
//! | Pod         | itself (a pod with `spec.nodeName` is bound, not pending)                     |
//!
//! DaemonSets are not expanded here: the solver takes them as DaemonSets and reserves their
//! pods on every node they would run on (see [`crate::daemonsets`]).
//!
//! Pods get the template's labels and annotations, the object's namespace (default `default`),
//! an owner reference to the object, and `uid` `NAMESPACE/NAME`.

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet, StatefulSet};
use k8s_openapi::api::batch::v1::{CronJob, Job, JobSpec};
use k8s_openapi::api::core::v1::{
    PersistentVolumeClaim, PersistentVolumeClaimVolumeSource, Pod, PodStatus, PodTemplateSpec,
    Volume,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};

/// An object whose controller creates pods.
#[derive(Debug, Clone, PartialEq)]
pub enum Workload {
    Deployment(Box<Deployment>),
    StatefulSet(Box<StatefulSet>),
    ReplicaSet(Box<ReplicaSet>),
    Job(Box<Job>),
    CronJob(Box<CronJob>),
    Pod(Box<Pod>),
}

/// The pods (and StatefulSet volume claims) of a workload.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Expansion {
    pub pods: Vec<Pod>,
    pub persistent_volume_claims: Vec<PersistentVolumeClaim>,
}

impl Workload {
    pub fn kind(&self) -> &'static str {
        match self {
            Workload::Deployment(_) => "Deployment",
            Workload::StatefulSet(_) => "StatefulSet",
            Workload::ReplicaSet(_) => "ReplicaSet",
            Workload::Job(_) => "Job",
            Workload::CronJob(_) => "CronJob",
            Workload::Pod(_) => "Pod",
        }
    }

    fn metadata(&self) -> &ObjectMeta {
        match self {
            Workload::Deployment(o) => &o.metadata,
            Workload::StatefulSet(o) => &o.metadata,
            Workload::ReplicaSet(o) => &o.metadata,
            Workload::Job(o) => &o.metadata,
            Workload::CronJob(o) => &o.metadata,
            Workload::Pod(o) => &o.metadata,
        }
    }

    pub fn name(&self) -> &str {
        self.metadata().name.as_deref().unwrap_or_default()
    }

    pub fn namespace(&self) -> &str {
        self.metadata().namespace.as_deref().unwrap_or("default")
    }

    /// `Kind/name`, how events and output name the workload.
    pub fn reference(&self) -> String {
        format!("{}/{}", self.kind(), self.name())
    }

    /// The number of pods the workload runs.
    pub fn replicas(&self) -> usize {
        let count = |n: Option<i32>| usize::try_from(n.unwrap_or(1)).unwrap_or(0);
        match self {
            Workload::Deployment(o) => count(o.spec.replicas),
            Workload::StatefulSet(o) => count(o.spec.replicas),
            Workload::ReplicaSet(o) => count(o.spec.replicas),
            Workload::Job(o) => o.spec.as_ref().map_or(1, job_pods),
            Workload::CronJob(o) => o.spec.job_template.spec.as_ref().map_or(1, job_pods),
            Workload::Pod(_) => 1,
        }
    }

    /// The same workload with another replica count (parallelism for Jobs and CronJobs).
    /// A bare Pod has one replica whatever is asked.
    pub fn with_replicas(&self, replicas: usize) -> Workload {
        let n = i32::try_from(replicas).unwrap_or(i32::MAX);
        let mut out = self.clone();
        match &mut out {
            Workload::Deployment(o) => o.spec.replicas = Some(n),
            Workload::StatefulSet(o) => o.spec.replicas = Some(n),
            Workload::ReplicaSet(o) => o.spec.replicas = Some(n),
            Workload::Job(o) => set_job_pods(o.spec.get_or_insert_with(Default::default), n),
            Workload::CronJob(o) => {
                let spec = o
                    .spec
                    .job_template
                    .spec
                    .get_or_insert_with(Default::default);
                set_job_pods(spec, n);
            }
            Workload::Pod(_) => {}
        }
        out
    }

    /// The pods the workload's controller creates.
    pub fn expand(&self) -> Expansion {
        let replicas = self.replicas();
        let namespace = self.namespace();
        let name = self.name();
        let owner = |kind: &str| OwnerReference {
            api_version: match kind {
                "Job" => "batch/v1".to_string(),
                _ => "apps/v1".to_string(),
            },
            kind: kind.to_string(),
            name: name.to_string(),
            uid: format!("{namespace}/{kind}/{name}"),
            controller: Some(true),
            block_owner_deletion: Some(true),
        };
        let from_template = |template: &PodTemplateSpec, kind: &str| -> Vec<Pod> {
            let template = &lean(template);
            (0..replicas)
                .map(|i| {
                    pod_from_template(namespace, &format!("{name}-{i}"), template, owner(kind))
                })
                .collect()
        };
        match self {
            Workload::Deployment(o) => Expansion {
                pods: from_template(&o.spec.template, "ReplicaSet"),
                persistent_volume_claims: Vec::new(),
            },
            Workload::ReplicaSet(o) => Expansion {
                pods: o
                    .spec
                    .template
                    .as_ref()
                    .map(|t| from_template(t, "ReplicaSet"))
                    .unwrap_or_default(),
                persistent_volume_claims: Vec::new(),
            },
            Workload::Job(o) => Expansion {
                pods: o
                    .spec
                    .as_ref()
                    .map(|s| from_template(&s.template, "Job"))
                    .unwrap_or_default(),
                persistent_volume_claims: Vec::new(),
            },
            Workload::CronJob(o) => Expansion {
                pods: o
                    .spec
                    .job_template
                    .spec
                    .as_ref()
                    .map(|s| from_template(&s.template, "Job"))
                    .unwrap_or_default(),
                persistent_volume_claims: Vec::new(),
            },
            Workload::StatefulSet(o) => self.expand_statefulset(o, owner("StatefulSet")),
            Workload::Pod(pod) => {
                let mut pod = Pod::clone(pod);
                pod.metadata.namespace = Some(namespace.to_string());
                if pod.metadata.uid.is_none() {
                    pod.metadata.uid = Some(format!("{namespace}/{name}"));
                }
                Expansion {
                    pods: vec![pod],
                    persistent_volume_claims: Vec::new(),
                }
            }
        }
    }

    fn expand_statefulset(&self, sts: &StatefulSet, owner: OwnerReference) -> Expansion {
        let mut out = Expansion::default();
        let spec = &sts.spec;
        let namespace = self.namespace();
        let name = self.name();
        for i in 0..self.replicas() {
            let pod_name = format!("{name}-{i}");
            let mut pod = pod_from_template(namespace, &pod_name, &spec.template, owner.clone());
            for template in spec.volume_claim_templates.iter().flatten() {
                let template_name = template.metadata.name.clone().unwrap_or_default();
                let claim_name = format!("{template_name}-{name}-{i}");
                out.persistent_volume_claims.push(PersistentVolumeClaim {
                    metadata: ObjectMeta {
                        name: Some(claim_name.clone()),
                        namespace: Some(namespace.to_string()),
                        labels: template.metadata.labels.clone(),
                        ..ObjectMeta::default()
                    },
                    spec: template.spec.clone(),
                    status: None,
                });
                let pod_spec = pod.spec.get_or_insert_with(Default::default);
                let volumes = pod_spec.volumes.get_or_insert_with(Vec::new);
                volumes.retain(|v| v.name != template_name);
                volumes.push(Volume {
                    name: template_name,
                    persistent_volume_claim: Some(PersistentVolumeClaimVolumeSource {
                        claim_name,
                        read_only: None,
                    }),
                    ..Volume::default()
                });
            }
            out.pods.push(pod);
        }
        out
    }
}

/// The template without what no scheduling decision reads (environment, commands, probes,
/// images, mounts), so that each of a workload's many pods is small: 100,000 pods are planned
/// in about 1 GB.
fn lean(template: &PodTemplateSpec) -> PodTemplateSpec {
    let mut template = template.clone();
    if let Some(spec) = template.spec.as_mut() {
        let containers = spec
            .containers
            .iter_mut()
            .chain(spec.init_containers.iter_mut().flatten());
        for container in containers {
            container.env = None;
            container.env_from = None;
            container.command = None;
            container.args = None;
            container.image = None;
            container.liveness_probe = None;
            container.readiness_probe = None;
            container.startup_probe = None;
            container.lifecycle = None;
            container.volume_mounts = None;
            container.volume_devices = None;
            container.working_dir = None;
            container.termination_message_path = None;
            container.termination_message_policy = None;
        }
    }
    template
}

fn job_pods(spec: &JobSpec) -> usize {
    let parallelism = spec.parallelism.unwrap_or(1);
    let running = spec
        .completions
        .map_or(parallelism, |completions| parallelism.min(completions));
    usize::try_from(running).unwrap_or(0)
}

fn set_job_pods(spec: &mut JobSpec, n: i32) {
    spec.parallelism = Some(n);
    if spec.completions.is_some_and(|c| c < n) {
        spec.completions = Some(n);
    }
}

/// A pending pod stamped from a template.
pub fn pod_from_template(
    namespace: &str,
    name: &str,
    template: &PodTemplateSpec,
    owner: OwnerReference,
) -> Pod {
    let meta = template.metadata.clone().unwrap_or_default();
    Pod {
        metadata: ObjectMeta {
            name: Some(name.to_string()),
            namespace: Some(namespace.to_string()),
            uid: Some(format!("{namespace}/{name}")),
            labels: meta.labels,
            annotations: meta.annotations,
            owner_references: Some(vec![owner]),
            ..ObjectMeta::default()
        },
        spec: template.spec.clone(),
        status: Some(PodStatus {
            phase: Some("Pending".to_string()),
            ..PodStatus::default()
        }),
    }
}

/// Every pod and claim of a list of workloads, pending pods separated from pods bound to a
/// node (`spec.nodeName`).
#[derive(Debug, Clone, Default)]
pub struct Expanded {
    pub pending: Vec<Pod>,
    /// Bound pods by node name.
    pub bound: BTreeMap<String, Vec<Pod>>,
    pub persistent_volume_claims: Vec<PersistentVolumeClaim>,
}

/// Expands every workload.
pub fn expand_all(workloads: &[Workload]) -> Expanded {
    let mut out = Expanded::default();
    for workload in workloads {
        let expansion = workload.expand();
        out.persistent_volume_claims
            .extend(expansion.persistent_volume_claims);
        for pod in expansion.pods {
            match pod
                .spec
                .as_ref()
                .and_then(|s| s.node_name.clone())
                .filter(|n| !n.is_empty())
            {
                Some(node) => out.bound.entry(node).or_default().push(pod),
                None => out.pending.push(pod),
            }
        }
    }
    out
}
