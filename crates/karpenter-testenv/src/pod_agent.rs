//! The kubelet's part for pods on simulated nodes of the builtin agent
//! ([`crate::NodeAgent::Builtin`]; KWOK plays the pods of its own nodes).
//!
//! Watches all pods; for those bound to one of our nodes it
//! * marks pending pods Running with every container started and Ready, so
//!   Deployments become available and PDBs count them healthy;
//! * completes graceful deletion (a pod with `deletionTimestamp` is deleted
//!   with grace period 0, as a kubelet does once containers stopped), so
//!   drains and evictions finish.
//!
//! No container runs anywhere, pods get no IP, probes and hooks are ignored.

use std::collections::HashSet;
use std::sync::{Arc, Mutex, PoisonError};

use futures::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, DeleteParams, Patch, PatchParams};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Client, ResourceExt};

use crate::error::ignore_not_found;

/// Runs until aborted, playing the pods bound to `nodes`, whose address is `host_ip`.
pub(crate) async fn run(client: Client, nodes: Arc<Mutex<HashSet<String>>>, host_ip: &'static str) {
    let pods: Api<Pod> = Api::all(client.clone());
    let mut events = std::pin::pin!(
        watcher(pods, watcher::Config::default())
            .default_backoff()
            .applied_objects()
    );
    while let Some(event) = events.next().await {
        match event {
            Ok(pod) => {
                let Some(node) = pod.spec.as_ref().and_then(|s| s.node_name.clone()) else {
                    continue;
                };
                let ours = nodes
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .contains(&node);
                if ours && let Err(e) = reconcile(&client, &pod, host_ip).await {
                    tracing::warn!(pod = %pod.name_any(), error = %e, "pod agent step failed");
                }
            }
            Err(e) => tracing::warn!(error = %e, "pod agent watch error"),
        }
    }
}

async fn reconcile(client: &Client, pod: &Pod, host_ip: &str) -> Result<(), kube::Error> {
    let namespace = pod.namespace().unwrap_or_default();
    let name = pod.name_any();
    let api: Api<Pod> = Api::namespaced(client.clone(), &namespace);
    if pod.metadata.deletion_timestamp.is_some() {
        let params = DeleteParams {
            grace_period_seconds: Some(0),
            ..DeleteParams::default()
        };
        return ignore_not_found(api.delete(&name, &params).await.map(|_| ()));
    }
    let phase = pod.status.as_ref().and_then(|s| s.phase.as_deref());
    if matches!(phase, Some("Running" | "Succeeded" | "Failed")) {
        return Ok(());
    }
    let status = serde_json::json!({ "status": running_status(pod, host_ip, Timestamp::now()) });
    ignore_not_found(
        api.patch_status(&name, &PatchParams::default(), &Patch::Merge(&status))
            .await
            .map(|_| ()),
    )
}

fn running_status(pod: &Pod, host_ip: &str, at: Timestamp) -> serde_json::Value {
    let started = Time(at);
    let condition = |type_: &str| serde_json::json!({ "type": type_, "status": "True", "lastTransitionTime": started });
    let containers: Vec<serde_json::Value> = pod
        .spec
        .iter()
        .flat_map(|s| s.containers.iter())
        .map(|c| {
            serde_json::json!({
                "name": c.name,
                "image": c.image.clone().unwrap_or_default(),
                "imageID": "",
                "ready": true,
                "started": true,
                "restartCount": 0,
                "state": { "running": { "startedAt": started } },
            })
        })
        .collect();
    serde_json::json!({
        "phase": "Running",
        "hostIP": host_ip,
        "hostIPs": [{ "ip": host_ip }],
        "startTime": started,
        "conditions": [
            condition("PodReadyToStartContainers"),
            condition("Initialized"),
            condition("ContainersReady"),
            condition("Ready"),
            condition("PodScheduled"),
        ],
        "containerStatuses": containers,
    })
}
