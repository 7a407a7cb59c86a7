//! The cluster DNS address nodes get (`--cloud-provider aws`, upstream's `KubeDNSIP`): the
//! `kube-system/kube-dns` Service's cluster IP, read once at start. Nodes get it as their
//! `clusterDNS` unless `spec.kubelet.clusterDNS` says otherwise, and an IPv6 address makes the
//! cluster IPv6 (IPv6 network interfaces and bootstrap flags: `karpenter_aws::launch_template`
//! and `karpenter_aws::userdata`). Without the Service (a custom DNS setup) or an address in it,
//! nothing is set, as upstream: a warning, and each bootstrap's own default.

use std::net::IpAddr;

use k8s_openapi::api::core::v1::Service;
use kube::Api;

/// Where the Service is.
pub const NAMESPACE: &str = "kube-system";
pub const NAME: &str = "kube-dns";

/// The Service's cluster IP, or why there is none to use.
pub fn cluster_ip(service: &Service) -> Result<IpAddr, String> {
    let ip = service
        .spec
        .as_ref()
        .and_then(|s| s.cluster_ip.as_deref())
        .unwrap_or_default();
    ip.parse::<IpAddr>()
        .map_err(|_| format!("spec.clusterIP {ip:?} is not an IP address"))
}

/// Reads the address; `None` (with a warning) when the Service cannot be read or has none.
pub async fn discover(client: &kube::Client) -> Option<String> {
    let services: Api<Service> = Api::namespaced(client.clone(), NAMESPACE);
    let service = match services.get_opt(NAME).await {
        Ok(Some(service)) => service,
        Ok(None) => {
            tracing::warn!(service = %format!("{NAMESPACE}/{NAME}"), "unable to detect the IP of the kube-dns service: it does not exist; nodes use their bootstrap's default cluster DNS");
            return None;
        }
        Err(error) => {
            tracing::warn!(service = %format!("{NAMESPACE}/{NAME}"), %error, "unable to detect the IP of the kube-dns service; nodes use their bootstrap's default cluster DNS");
            return None;
        }
    };
    match cluster_ip(&service) {
        Ok(ip) => {
            tracing::info!(kube_dns_ip = %ip, ipv6 = ip.is_ipv6(), "discovered kube dns");
            Some(ip.to_string())
        }
        Err(reason) => {
            tracing::warn!(service = %format!("{NAMESPACE}/{NAME}"), %reason, "unable to detect the IP of the kube-dns service; nodes use their bootstrap's default cluster DNS");
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn service(cluster_ip: Option<&str>) -> Service {
        serde_json::from_value(serde_json::json!({
            "apiVersion": "v1", "kind": "Service",
            "metadata": {"name": NAME, "namespace": NAMESPACE},
            "spec": {"clusterIP": cluster_ip}
        }))
        .unwrap_or_else(|e| panic!("{e}"))
    }

    #[test]
    fn the_kube_dns_cluster_ip_is_read_in_either_family() {
        assert_eq!(
            cluster_ip(&service(Some("10.100.0.10"))),
            Ok("10.100.0.10"
                .parse::<IpAddr>()
                .unwrap_or_else(|e| panic!("{e}")))
        );
        let v6 = cluster_ip(&service(Some("fd00:10:96::a")));
        assert!(v6.is_ok_and(|ip| ip.is_ipv6()));
    }

    #[test]
    fn a_headless_or_empty_service_gives_no_address() {
        assert!(cluster_ip(&service(Some("None"))).is_err());
        assert!(cluster_ip(&service(None)).is_err());
    }
}
