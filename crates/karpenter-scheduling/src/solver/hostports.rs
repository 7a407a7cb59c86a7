//! Host-port usage: two pods conflict on a node when they bind the same port and protocol on
//! the same IP, or either binds the wildcard address.

/// One host port a pod binds.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct HostPort {
    pub ip: String,
    pub port: i32,
    pub protocol: String,
}

impl HostPort {
    pub fn new(ip: &str, port: i32, protocol: &str) -> Self {
        let ip = if ip == "0.0.0.0" || ip == "::" {
            ""
        } else {
            ip
        };
        HostPort {
            ip: ip.to_string(),
            port,
            protocol: if protocol.is_empty() { "TCP" } else { protocol }.to_string(),
        }
    }

    pub fn conflicts(&self, other: &HostPort) -> bool {
        self.port == other.port
            && self.protocol == other.protocol
            && (self.ip.is_empty() || other.ip.is_empty() || self.ip == other.ip)
    }
}

/// The first port in `wanted` that conflicts with one in `used`.
pub fn conflict<'a>(used: &[HostPort], wanted: &'a [HostPort]) -> Option<&'a HostPort> {
    wanted.iter().find(|w| used.iter().any(|u| u.conflicts(w)))
}

impl std::fmt::Display for HostPort {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let ip = if self.ip.is_empty() {
            "0.0.0.0"
        } else {
            &self.ip
        };
        write!(f, "{ip}:{}/{}", self.port, self.protocol)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wildcard_addresses_conflict_with_every_ip_on_the_same_port() {
        let any = HostPort::new("0.0.0.0", 80, "TCP");
        let one = HostPort::new("10.0.0.1", 80, "TCP");
        let two = HostPort::new("10.0.0.2", 80, "TCP");
        assert!(any.conflicts(&one));
        assert!(!one.conflicts(&two));
        assert!(!one.conflicts(&HostPort::new("10.0.0.1", 80, "UDP")));
        assert!(!one.conflicts(&HostPort::new("10.0.0.1", 81, "TCP")));
    }
}
