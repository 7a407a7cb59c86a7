//! Windows user data (Windows2019/2022/2025): a `<powershell>` block running the EKS
//! bootstrap script (upstream `windows.go`).
//!
//! Owns: the block layout — the user's script, then `Start-EKSBootstrap.ps1` with cluster name,
//! endpoint, CA, `-KubeletExtraArgs` (same list as AL2) and `-DNSClusterIP`. Must not: parse
//! or change the user's script (it is inserted as written, inside the same block).

use super::al2::kubelet_extra_args;
use super::{BootstrapInput, UserDataError, single_quotable};

const FAMILY: &str = "Windows";

/// The PowerShell block.
pub fn render(input: &BootstrapInput) -> Result<String, UserDataError> {
    let cluster = &input.cluster;
    single_quotable(FAMILY, "cluster name", &cluster.name)?;
    single_quotable(FAMILY, "cluster endpoint", &cluster.endpoint)?;
    let mut out = String::from("<powershell>\n");
    if let Some(custom) = input.custom_user_data.as_deref().filter(|c| !c.is_empty()) {
        out.push_str(custom);
        out.push('\n');
    }
    out.push_str(
        "[string]$EKSBootstrapScriptFile = \"$env:ProgramFiles\\Amazon\\EKS\\Start-EKSBootstrap.ps1\"\n",
    );
    out.push_str(&format!(
        "& $EKSBootstrapScriptFile -EKSClusterName '{}' -APIServerEndpoint '{}'",
        cluster.name, cluster.endpoint
    ));
    if let Some(ca) = &cluster.ca_bundle {
        single_quotable(FAMILY, "cluster CA bundle", ca)?;
        out.push_str(&format!(" -Base64ClusterCA '{ca}'"));
    }
    let args = kubelet_extra_args(input).join(" ");
    if !args.is_empty() {
        single_quotable(FAMILY, "kubelet extra args", &args)?;
        out.push_str(&format!(" -KubeletExtraArgs '{args}'"));
    }
    if let Some(dns) = input.kubelet.cluster_dns.first() {
        single_quotable(FAMILY, "spec.kubelet.clusterDNS[0]", dns)?;
        out.push_str(&format!(" -DNSClusterIP '{dns}'"));
    }
    out.push_str("\n</powershell>");
    Ok(out)
}
