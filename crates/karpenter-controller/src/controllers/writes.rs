//! API writes more than one loop makes: the `karpenter.sh/disrupted` taint, NodeClaim status
//! conditions, NodeClaim annotations and deletion.
//!
//! Each write starts from the index's latest copy and puts the API server's answer back into
//! the index (read-your-writes). Writes that replace a whole list (taints, conditions) carry
//! that copy's `resourceVersion`, so a concurrent writer's change is never lost: the API
//! server answers 409 and the caller tries again on its next pass, from a fresher copy. A
//! NodeClaim or Node that is gone (404) needs nothing.

use chrono::{DateTime, Utc};
use k8s_openapi::api::core::v1::Node;
use karpenter_api::v1::NodeClaim;
use karpenter_lifecycle::lifecycle::set_condition;
use karpenter_lifecycle::termination::disrupted_taint;
use karpenter_state::Object;
use kube::Client;
use kube::api::{Api, DeleteParams, Patch, PatchParams};
use serde_json::json;

use super::cache::ClusterCache;
use super::nodeclaim::StepError;

fn is_not_found(error: &kube::Error) -> bool {
    matches!(error, kube::Error::Api(status) if status.code == 404)
}

/// Adds (`tainted`) or removes the `karpenter.sh/disrupted:NoSchedule` taint; nothing when the
/// Node already is as asked, or is gone.
pub async fn set_disrupted_taint(
    client: &Client,
    cache: &ClusterCache,
    node: &str,
    tainted: bool,
) -> Result<(), StepError> {
    let Some(current) = cache.lock().node(node).cloned() else {
        return Ok(());
    };
    let taint = disrupted_taint();
    let mut taints = current
        .spec
        .as_ref()
        .and_then(|s| s.taints.clone())
        .unwrap_or_default();
    let has = taints
        .iter()
        .any(|t| t.key == taint.key && t.effect == taint.effect);
    if has == tainted {
        return Ok(());
    }
    if tainted {
        taints.push(taint);
    } else {
        taints.retain(|t| !(t.key == taint.key && t.effect == taint.effect));
    }
    let patch = json!({
        "metadata": {"resourceVersion": current.metadata.resource_version},
        "spec": {"taints": taints},
    });
    let api: Api<Node> = Api::all(client.clone());
    match api
        .patch(node, &PatchParams::default(), &Patch::Merge(&patch))
        .await
    {
        Ok(patched) => {
            cache.apply(Object::Node(patched));
            Ok(())
        }
        Err(e) if is_not_found(&e) => Ok(()),
        Err(source) => Err(StepError::NodeApi {
            step: if tainted { "tainting" } else { "untainting" },
            node: node.to_owned(),
            source,
        }),
    }
}

/// Sets condition `type_` of NodeClaim `claim` to `Some((status, reason, message))`, or
/// removes it (`None`); writes only when the status, reason or message changes.
pub async fn set_claim_condition(
    client: &Client,
    cache: &ClusterCache,
    claim: &str,
    type_: &str,
    desired: Option<(&str, &str, &str)>,
    now: DateTime<Utc>,
) -> Result<(), StepError> {
    let Some(current) = cache.lock().node_claim(claim).cloned() else {
        return Ok(());
    };
    let existing = current
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|cs| cs.iter().find(|c| c.type_ == type_));
    let same = match (existing, desired) {
        (None, None) => true,
        (Some(c), Some((status, reason, message))) => {
            c.status == status && c.reason == reason && c.message == message
        }
        _ => false,
    };
    if same {
        return Ok(());
    }
    let mut updated = current.clone();
    match desired {
        Some((status, reason, message)) => {
            set_condition(&mut updated, type_, status, reason, message, now);
        }
        None => {
            if let Some(conditions) = updated.status.as_mut().and_then(|s| s.conditions.as_mut()) {
                conditions.retain(|c| c.type_ != type_);
            }
        }
    }
    let conditions = updated
        .status
        .as_ref()
        .and_then(|s| s.conditions.clone())
        .unwrap_or_default();
    let patch = json!({
        "metadata": {"resourceVersion": current.metadata.resource_version},
        "status": {"conditions": conditions},
    });
    let api: Api<NodeClaim> = Api::all(client.clone());
    match api
        .patch_status(claim, &PatchParams::default(), &Patch::Merge(&patch))
        .await
    {
        Ok(patched) => {
            cache.apply(Object::NodeClaim(patched));
            Ok(())
        }
        Err(e) if is_not_found(&e) => Ok(()),
        Err(source) => Err(StepError::Api {
            step: "writing a condition",
            claim: claim.to_owned(),
            source,
        }),
    }
}

/// Merges `patch` (a JSON merge patch) into NodeClaim `claim` or its status.
pub async fn patch_claim(
    client: &Client,
    cache: &ClusterCache,
    claim: &str,
    patch: &serde_json::Value,
    status: bool,
    step: &'static str,
) -> Result<(), StepError> {
    let api: Api<NodeClaim> = Api::all(client.clone());
    let params = PatchParams::default();
    let result = if status {
        api.patch_status(claim, &params, &Patch::Merge(patch)).await
    } else {
        api.patch(claim, &params, &Patch::Merge(patch)).await
    };
    match result {
        Ok(patched) => {
            cache.apply(Object::NodeClaim(patched));
            Ok(())
        }
        Err(e) if is_not_found(&e) => Ok(()),
        Err(source) => Err(StepError::Api {
            step,
            claim: claim.to_owned(),
            source,
        }),
    }
}

/// Deletes NodeClaim `claim` (its finalizer runs the termination); a NodeClaim already gone is
/// fine.
pub async fn delete_claim(client: &Client, claim: &str) -> Result<(), StepError> {
    let api: Api<NodeClaim> = Api::all(client.clone());
    match api.delete(claim, &DeleteParams::default()).await {
        Ok(_) => Ok(()),
        Err(e) if is_not_found(&e) => Ok(()),
        Err(source) => Err(StepError::Api {
            step: "deleting",
            claim: claim.to_owned(),
            source,
        }),
    }
}
