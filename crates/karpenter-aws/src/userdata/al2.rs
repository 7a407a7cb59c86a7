//! AL2 user data: `/etc/eks/bootstrap.sh` in a MIME multipart archive (upstream
//! `eksbootstrap.go`).
//!
//! Owns: the bootstrap script (flags in upstream's order) and the merge: the user's user data
//! first (kept part by part with all its headers when it is MIME, else wrapped as one
//! `text/x-shellscript` part), Karpenter's script last. Must not: change the user's parts.

use std::net::IpAddr;

use super::mime::{self, CONTENT_TYPE_SHELL, Part};
use super::{BootstrapInput, UserDataError, go_quote, single_quotable, taint_string};

const FAMILY: &str = "AL2";

/// The merged archive.
pub fn render(input: &BootstrapInput) -> Result<String, UserDataError> {
    let mut parts = match input.custom_user_data.as_deref() {
        None | Some("") => Vec::new(),
        Some(user_data) if mime::looks_like_mime(user_data) => {
            mime::parse(user_data).map_err(|error| invalid(error.to_string()))?
        }
        Some(user_data) => vec![Part::new(CONTENT_TYPE_SHELL, user_data)],
    };
    parts.push(Part::new(CONTENT_TYPE_SHELL, script(input)?));
    mime::serialize(&parts).map_err(|error| invalid(error.to_string()))
}

fn invalid(reason: String) -> UserDataError {
    UserDataError::InvalidUserData {
        family: FAMILY,
        reason,
    }
}

/// The `--kubelet-extra-args` list AL2 and Windows share: node labels (sorted), taints, then
/// the kubelet settings.
pub(crate) fn kubelet_extra_args(input: &BootstrapInput) -> Vec<String> {
    let mut args = Vec::new();
    if !input.labels.is_empty() {
        let labels: Vec<String> = input
            .labels
            .iter()
            .map(|(key, value)| format!("{key}={value}"))
            .collect();
        args.push(format!("--node-labels={}", go_quote(&labels.join(","))));
    }
    let taints: Vec<String> = input.taints.iter().map(taint_string).collect();
    args.push(format!(
        "--register-with-taints={}",
        go_quote(&taints.join(","))
    ));
    args.extend(input.kubelet.extra_args());
    args
}

/// Whether the first cluster DNS address is IPv6 (an IPv4-mapped address counts as IPv4).
pub(crate) fn ipv6_cluster(input: &BootstrapInput) -> bool {
    match input
        .kubelet
        .cluster_dns
        .first()
        .and_then(|ip| ip.parse::<IpAddr>().ok())
    {
        Some(IpAddr::V6(v6)) => v6.to_ipv4_mapped().is_none(),
        _ => false,
    }
}

/// The shell part: log redirection, then `bootstrap.sh` with one flag per continuation line.
pub fn script(input: &BootstrapInput) -> Result<String, UserDataError> {
    let cluster = &input.cluster;
    single_quotable(FAMILY, "cluster name", &cluster.name)?;
    single_quotable(FAMILY, "cluster endpoint", &cluster.endpoint)?;
    let mut out = String::from("#!/bin/bash -xe\n");
    out.push_str(
        "exec > >(tee /var/log/user-data.log|logger -t user-data -s 2>/dev/console) 2>&1\n",
    );
    out.push_str(&format!(
        "/etc/eks/bootstrap.sh '{}' --apiserver-endpoint '{}' ",
        cluster.name, cluster.endpoint
    ));
    if let Some(ca) = &cluster.ca_bundle {
        single_quotable(FAMILY, "cluster CA bundle", ca)?;
        out.push_str(&format!("--b64-cluster-ca '{ca}'"));
    }
    if ipv6_cluster(input) {
        out.push_str(" \\\n--ip-family ipv6");
    }
    if let Some(dns) = input.kubelet.cluster_dns.first() {
        single_quotable(FAMILY, "spec.kubelet.clusterDNS[0]", dns)?;
        out.push_str(&format!(" \\\n--dns-cluster-ip '{dns}'"));
    }
    if input.kubelet.max_pods.is_some() {
        out.push_str(" \\\n--use-max-pods false");
    }
    let args = kubelet_extra_args(input).join(" ");
    if !args.is_empty() {
        single_quotable(FAMILY, "kubelet extra args", &args)?;
        out.push_str(&format!(" \\\n--kubelet-extra-args '{args}'"));
    }
    if input.raid0() {
        out.push_str(" \\\n--local-disks raid0");
    }
    Ok(out)
}
