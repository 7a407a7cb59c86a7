//! The EC2 instance id inside a Kubernetes providerID (`aws:///us-east-1a/i-0123456789abcdef0`),
//! the key interruption messages are matched on.
//!
//! Owns: that one string rule, as upstream's `utils.ParseInstanceID` (`aws:///<zone>/<id>`, both
//! parts non-empty, nothing after the id). Must not: check that the id exists or is ours.

/// The instance id of an AWS providerID, or `None` when it is not one.
pub fn instance_id(provider_id: &str) -> Option<&str> {
    let rest = provider_id.strip_prefix("aws:///")?;
    let (zone, id) = rest.split_once('/')?;
    if zone.is_empty() || id.is_empty() || id.contains('/') {
        return None;
    }
    Some(id)
}

#[cfg(test)]
mod tests {
    use super::instance_id;

    #[test]
    fn the_instance_id_is_the_part_after_the_zone() {
        assert_eq!(
            instance_id("aws:///us-east-1a/i-0123456789abcdef0"),
            Some("i-0123456789abcdef0")
        );
    }

    #[test]
    fn strings_that_are_not_aws_provider_ids_have_no_instance_id() {
        for bad in [
            "",
            "aws:///",
            "aws:///us-east-1a",
            "aws:///us-east-1a/",
            "aws:////i-0123",
            "aws:///us-east-1a/i-0123/extra",
            "kwok://node-1",
            "gce:///us-east-1a/i-0123",
            "aws://us-east-1a/i-0123",
        ] {
            assert_eq!(instance_id(bad), None, "{bad:?}");
        }
    }
}
