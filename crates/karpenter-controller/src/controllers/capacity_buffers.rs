//! CapacityBuffers (feature gate `CapacityBuffer`; upstream `controllers/capacitybuffer` and
//! `state/virtualpods`): every [`INTERVAL`] each buffer is resolved against the API server (its
//! PodTemplate, or the pod template and replicas of its `apps` Deployment, StatefulSet or
//! ReplicaSet), its status written as upstream writes it (`ReadyForProvisioning`,
//! `replicas`, `podTemplateRef`, `podTemplateGeneration`, `provisioningStrategy`, and the
//! `Provisioning` condition from where the provisioner's last batch put its virtual pods), and
//! the virtual pods of the buffers ready for provisioning handed to the index, where the
//! provisioner adds them to every batch and disruption simulates them as pending pods.
//!
//! The counting rules are pure: [`karpenter_scheduling::capacity_buffer`].

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet, StatefulSet};
use k8s_openapi::api::core::v1::{PodTemplate, PodTemplateSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use kube::Api;
use kube::api::{ListParams, Patch, PatchParams};
use serde_json::json;

use karpenter_api::autoscaling::v1beta1::{
    CapacityBuffer, CapacityBufferStatus, KIND_DEPLOYMENT, KIND_REPLICA_SET, KIND_STATEFUL_SET,
    LocalObjectRef, conditions, reasons,
};
use karpenter_scheduling::PodRecord;
use karpenter_scheduling::capacity_buffer::{
    ResolvedBuffer, desired_replicas, provisioning_condition, virtual_pods,
};
use karpenter_state::Cluster;
use karpenter_state::conditions::api_time;

use crate::cluster::writes::is_not_found;
use crate::reconcile::{Action, Busy, Context, Reconciler, Retry, Scan, Shape};

/// How often buffers are resolved (upstream requeues each buffer every 30 s and on changes of
/// what it references; here one list every 5 s covers both).
pub const INTERVAL: Duration = Duration::from_secs(5);

/// The capacity-buffer loop.
#[derive(Debug)]
pub struct CapacityBuffers<C> {
    pub ctx: Context<C>,
}

/// The one step: resolve every buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ResolveAll;

/// Buffers could not be listed or a status not written.
#[derive(Debug, thiserror::Error)]
pub enum BufferError {
    #[error("listing CapacityBuffers")]
    List(#[source] kube::Error),
    #[error("writing the status of CapacityBuffer {key}")]
    Status {
        key: String,
        #[source]
        source: kube::Error,
    },
    #[error("writing the status of CapacityBuffer {key}: {reason}")]
    Fenced { key: String, reason: String },
}

/// What a buffer's references resolved to.
#[derive(Debug, Clone)]
struct Resolution {
    template: PodTemplateSpec,
    /// `Some` for a PodTemplate: its name and generation.
    pod_template: Option<(String, i64)>,
    /// `Some` for a scalable: its replicas (unset counts as 1, as upstream).
    scalable_replicas: Option<i32>,
}

/// Why a buffer's references did not resolve: the condition reason and message.
#[derive(Debug, Clone)]
struct Unresolved {
    reason: &'static str,
    message: String,
}

impl<C: Send + Sync + 'static> CapacityBuffers<C> {
    async fn resolve(&self, buffer: &CapacityBuffer) -> Result<Resolution, Unresolved> {
        let namespace = buffer.metadata.namespace.as_deref().unwrap_or("default");
        let client = self.ctx.client.clone();
        let failed = |not_found: &'static str| {
            move |e: kube::Error| Unresolved {
                reason: if is_not_found(&e) {
                    not_found
                } else {
                    reasons::RESOLUTION_FAILED
                },
                message: e.to_string(),
            }
        };
        if let Some(reference) = &buffer.spec.pod_template_ref {
            let api: Api<PodTemplate> = Api::namespaced(client, namespace);
            let template = api
                .get(&reference.name)
                .await
                .map_err(failed(reasons::POD_TEMPLATE_NOT_FOUND))?;
            return Ok(Resolution {
                template: template.template.unwrap_or_default(),
                pod_template: Some((
                    reference.name.clone(),
                    template.metadata.generation.unwrap_or_default(),
                )),
                scalable_replicas: None,
            });
        }
        let Some(reference) = &buffer.spec.scalable_ref else {
            return Err(Unresolved {
                reason: reasons::RESOLUTION_FAILED,
                message: "Neither podTemplateRef nor scalableRef is set".into(),
            });
        };
        if !reference.api_group.is_empty() && reference.api_group != "apps" {
            return Err(Unresolved {
                reason: reasons::RESOLUTION_FAILED,
                message: format!(
                    "unsupported scalableRef API group {:?}",
                    reference.api_group
                ),
            });
        }
        let not_found = failed(reasons::SCALABLE_REF_NOT_FOUND);
        let (template, replicas) = match reference.kind.as_str() {
            KIND_DEPLOYMENT => {
                let o = Api::<Deployment>::namespaced(client, namespace)
                    .get(&reference.name)
                    .await
                    .map_err(not_found)?;
                (o.spec.template, o.spec.replicas)
            }
            KIND_STATEFUL_SET => {
                let o = Api::<StatefulSet>::namespaced(client, namespace)
                    .get(&reference.name)
                    .await
                    .map_err(not_found)?;
                (o.spec.template, o.spec.replicas)
            }
            KIND_REPLICA_SET => {
                let o = Api::<ReplicaSet>::namespaced(client, namespace)
                    .get(&reference.name)
                    .await
                    .map_err(not_found)?;
                (o.spec.template.unwrap_or_default(), o.spec.replicas)
            }
            other => {
                return Err(Unresolved {
                    reason: reasons::RESOLUTION_FAILED,
                    message: format!("unsupported kind {other:?}"),
                });
            }
        };
        Ok(Resolution {
            template,
            pod_template: None,
            scalable_replicas: Some(replicas.unwrap_or(1)),
        })
    }

    async fn write_status(
        &self,
        buffer: &CapacityBuffer,
        status: &CapacityBufferStatus,
    ) -> Result<(), BufferError> {
        let key = buffer.key();
        self.ctx
            .fence
            .check()
            .map_err(|fenced| BufferError::Fenced {
                key: key.clone(),
                reason: fenced.to_string(),
            })?;
        let namespace = buffer.metadata.namespace.as_deref().unwrap_or("default");
        let name = buffer.metadata.name.as_deref().unwrap_or_default();
        let api: Api<CapacityBuffer> = Api::namespaced(self.ctx.client.clone(), namespace);
        let patch = json!({
            "metadata": {"resourceVersion": buffer.metadata.resource_version},
            "status": status,
        });
        match api
            .patch_status(name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
        {
            Ok(_) => Ok(()),
            Err(e) if is_not_found(&e) => Ok(()),
            Err(source) => Err(BufferError::Status { key, source }),
        }
    }
}

/// The status upstream writes for `buffer` given what its references resolved to and where
/// the last batch put its virtual pods; the resolved buffer when ready for provisioning.
fn status_of(
    buffer: &CapacityBuffer,
    resolution: Result<Resolution, Unresolved>,
    cluster: &Cluster,
    now: Time,
) -> (CapacityBufferStatus, Option<ResolvedBuffer>) {
    let mut status = buffer.status.clone().unwrap_or_default();
    let mut conds: Vec<Condition> = status.conditions.take().unwrap_or_default();
    let generation = buffer.metadata.generation;
    let mut resolved = None;
    match resolution {
        Err(why) => karpenter_api::conditions::set(
            &mut conds,
            generation,
            conditions::READY_FOR_PROVISIONING,
            "False",
            why.reason,
            &why.message,
            now.clone(),
        ),
        Ok(r) => {
            match &r.pod_template {
                Some((name, template_generation)) => {
                    status.pod_template_ref = Some(LocalObjectRef { name: name.clone() });
                    status.pod_template_generation = Some(*template_generation);
                }
                None => {
                    status.pod_template_ref = None;
                    status.pod_template_generation = None;
                }
            }
            let replicas =
                desired_replicas(&buffer.spec, r.template.spec.as_ref(), r.scalable_replicas);
            status.replicas = Some(replicas);
            karpenter_api::conditions::set(
                &mut conds,
                generation,
                conditions::READY_FOR_PROVISIONING,
                "True",
                reasons::RESOLVED,
                "Pod template resolved successfully",
                now.clone(),
            );
            if replicas > 0 {
                resolved = Some(ResolvedBuffer {
                    namespace: buffer.metadata.namespace.clone().unwrap_or_default(),
                    name: buffer.metadata.name.clone().unwrap_or_default(),
                    uid: buffer.metadata.uid.clone().unwrap_or_default(),
                    replicas,
                    template: r.template,
                });
            }
        }
    }
    status.provisioning_strategy = buffer.spec.provisioning_strategy.clone();
    let ready =
        karpenter_api::conditions::is_true(Some(&conds), conditions::READY_FOR_PROVISIONING);
    if let Some(update) = provisioning_condition(
        ready,
        status.replicas,
        cluster.buffer_placement(&buffer.key()),
    ) {
        karpenter_api::conditions::set(
            &mut conds,
            generation,
            conditions::PROVISIONING,
            update.status,
            update.reason,
            &update.message,
            now,
        );
    }
    status.conditions = Some(conds);
    (status, resolved)
}

impl<C: Send + Sync + 'static> Reconciler for CapacityBuffers<C> {
    type Step = ResolveAll;
    type Error = BufferError;
    const NAME: &'static str = "capacitybuffer";

    fn shape(&self) -> Shape {
        Shape::periodic(INTERVAL)
    }

    fn scan(&self, _: &Cluster, _: DateTime<Utc>, busy: Busy<'_>) -> Scan<ResolveAll> {
        let mut scan = Scan::new();
        if !busy.contains(Self::NAME) {
            scan.step(Self::NAME, ResolveAll);
        }
        scan
    }

    async fn execute(&self, _: ResolveAll) -> Result<Action, BufferError> {
        let api: Api<CapacityBuffer> = Api::all(self.ctx.client.clone());
        let buffers = api
            .list(&ListParams::default())
            .await
            .map_err(BufferError::List)?;
        let mut pods: BTreeMap<String, Vec<Arc<PodRecord>>> = BTreeMap::new();
        let mut failure = None;
        for buffer in &buffers.items {
            let resolution = self.resolve(buffer).await;
            let Some(now) = api_time(Utc::now()) else {
                continue;
            };
            let (status, resolved) = {
                let cluster = self.ctx.cache.lock();
                status_of(buffer, resolution, &cluster, now)
            };
            if let Some(resolved) = &resolved {
                pods.insert(
                    buffer.key(),
                    virtual_pods(resolved).into_iter().map(Arc::new).collect(),
                );
            }
            if buffer.status.as_ref() != Some(&status)
                && let Err(error) = self.write_status(buffer, &status).await
            {
                failure = Some(error);
            }
        }
        let changed = {
            let mut cluster = self.ctx.cache.lock();
            let before: Vec<_> = cluster.buffer_pods().cloned().collect();
            cluster.set_buffer_pods(pods);
            let after: Vec<_> = cluster.buffer_pods().cloned().collect();
            before != after
        };
        if changed {
            self.ctx.cache.changed();
        }
        match failure {
            Some(error) => Err(error),
            None => Ok(Action::AwaitChange),
        }
    }

    fn error_policy(&self, _: &BufferError) -> Retry {
        Retry::Backoff
    }

    fn step_name(_: &ResolveAll) -> &'static str {
        "resolve"
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use karpenter_api::autoscaling::v1beta1::CapacityBufferSpec;
    use karpenter_scheduling::capacity_buffer::BufferPlacement;

    fn buffer(spec: CapacityBufferSpec) -> CapacityBuffer {
        let mut b = CapacityBuffer::new("headroom", spec);
        b.metadata.namespace = Some("team".into());
        b.metadata.generation = Some(3);
        b
    }

    fn at() -> Time {
        api_time(Utc::now()).expect("now is a valid API time")
    }

    fn condition<'a>(status: &'a CapacityBufferStatus, type_: &str) -> Option<&'a Condition> {
        karpenter_api::conditions::get(status.conditions.as_deref(), type_)
    }

    #[test]
    fn a_missing_pod_template_makes_the_buffer_not_ready_and_gives_no_virtual_pods() {
        let b = buffer(CapacityBufferSpec {
            replicas: Some(2),
            ..CapacityBufferSpec::default()
        });
        let (status, resolved) = status_of(
            &b,
            Err(Unresolved {
                reason: reasons::POD_TEMPLATE_NOT_FOUND,
                message: "not found".into(),
            }),
            &Cluster::new(),
            at(),
        );
        assert!(resolved.is_none());
        let ready = condition(&status, conditions::READY_FOR_PROVISIONING).expect("ready");
        assert_eq!(
            (ready.status.as_str(), ready.reason.as_str()),
            ("False", "PodTemplateNotFound")
        );
        let provisioning = condition(&status, conditions::PROVISIONING).expect("provisioning");
        assert_eq!(provisioning.reason, "NotReadyForProvisioning");
    }

    #[test]
    fn a_resolved_pod_template_sets_replicas_the_reference_and_its_generation() {
        let b = buffer(CapacityBufferSpec {
            replicas: Some(4),
            ..CapacityBufferSpec::default()
        });
        let resolution = Resolution {
            template: PodTemplateSpec::default(),
            pod_template: Some(("chunk".into(), 7)),
            scalable_replicas: None,
        };
        let (status, resolved) = status_of(&b, Ok(resolution), &Cluster::new(), at());
        assert_eq!(status.replicas, Some(4));
        assert_eq!(status.pod_template_generation, Some(7));
        assert_eq!(
            status.pod_template_ref.as_ref().map(|r| r.name.as_str()),
            Some("chunk")
        );
        assert_eq!(resolved.map(|r| r.replicas), Some(4));
        let ready = condition(&status, conditions::READY_FOR_PROVISIONING).expect("ready");
        assert_eq!(
            (ready.status.as_str(), ready.observed_generation),
            ("True", Some(3))
        );
    }

    #[test]
    fn the_provisioning_condition_follows_the_last_batch() {
        let b = buffer(CapacityBufferSpec {
            replicas: Some(2),
            ..CapacityBufferSpec::default()
        });
        let mut cluster = Cluster::new();
        cluster.set_buffer_placements(
            BTreeMap::from([(
                "team/headroom".to_owned(),
                BufferPlacement {
                    existing: 2,
                    ..BufferPlacement::default()
                },
            )]),
            Default::default(),
        );
        let resolution = Resolution {
            template: PodTemplateSpec::default(),
            pod_template: Some(("chunk".into(), 1)),
            scalable_replicas: None,
        };
        let (status, _) = status_of(&b, Ok(resolution), &cluster, at());
        let provisioning = condition(&status, conditions::PROVISIONING).expect("provisioning");
        assert_eq!(
            (provisioning.status.as_str(), provisioning.reason.as_str()),
            ("True", "FitsExistingCapacity")
        );
    }
}
