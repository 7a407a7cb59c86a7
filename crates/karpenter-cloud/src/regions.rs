//! The AWS regions a simulation may be placed in, and what is known about their prices.
//!
//! The embedded catalog carries us-east-1 list prices only; another region is accepted (its
//! zones and labels are right) but its prices are not embedded, which
//! [`price_note`] says in words so that no one reads us-east-1's prices as theirs.

/// Every AWS region (commercial, China, GovCloud, European Sovereign Cloud), as of 2026.
pub const KNOWN_REGIONS: &[&str] = &[
    "af-south-1",
    "ap-east-1",
    "ap-east-2",
    "ap-northeast-1",
    "ap-northeast-2",
    "ap-northeast-3",
    "ap-south-1",
    "ap-south-2",
    "ap-southeast-1",
    "ap-southeast-2",
    "ap-southeast-3",
    "ap-southeast-4",
    "ap-southeast-5",
    "ap-southeast-6",
    "ap-southeast-7",
    "ca-central-1",
    "ca-west-1",
    "cn-north-1",
    "cn-northwest-1",
    "eu-central-1",
    "eu-central-2",
    "eu-north-1",
    "eu-south-1",
    "eu-south-2",
    "eu-west-1",
    "eu-west-2",
    "eu-west-3",
    "eusc-de-east-1",
    "il-central-1",
    "me-central-1",
    "me-south-1",
    "mx-central-1",
    "sa-east-1",
    "us-east-1",
    "us-east-2",
    "us-gov-east-1",
    "us-gov-west-1",
    "us-west-1",
    "us-west-2",
];

/// A region that is not an AWS region.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown region {region:?}{hint}")]
pub struct UnknownRegion {
    pub region: String,
    /// ` (did you mean "eu-west-1"?)` or the list of known regions.
    pub hint: String,
}

/// Accepts a known AWS region; anything else is an error naming the closest known one.
pub fn check_region(region: &str) -> Result<(), UnknownRegion> {
    if KNOWN_REGIONS.contains(&region) {
        return Ok(());
    }
    let hint = match karpenter_api::validation::did_you_mean(region, KNOWN_REGIONS) {
        Some(close) => format!(" (did you mean {close:?}?)"),
        None => format!("; known regions: {}", KNOWN_REGIONS.join(", ")),
    };
    Err(UnknownRegion {
        region: region.to_string(),
        hint,
    })
}

/// A sentence for users when the prices in use are not the region's own: `None` when
/// `price_region` is `region`.
pub fn price_note(region: &str, price_region: &str) -> Option<String> {
    (region != price_region).then(|| {
        format!(
            "no {region} prices are embedded: costs use {price_region} list prices (marked as \
             estimates); give {region} prices with --prices FILE"
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn regions_are_checked_and_close_misspellings_get_a_hint() {
        for (region, expected) in [
            ("us-east-1", None),
            ("eu-west-1", None),
            ("us-gov-west-1", None),
            (
                "eu-west1",
                Some("unknown region \"eu-west1\" (did you mean \"eu-west-1\"?)"),
            ),
            (
                "us-east-7",
                Some("unknown region \"us-east-7\" (did you mean \"us-east-1\"?)"),
            ),
            (
                "mars-1",
                Some("unknown region \"mars-1\"; known regions: af-south-1, "),
            ),
        ] {
            match (check_region(region), expected) {
                (Ok(()), None) => {}
                (Err(err), Some(text)) => {
                    assert!(err.to_string().starts_with(text), "{region}: {err}")
                }
                (got, want) => panic!("{region}: got {got:?}, want {want:?}"),
            }
        }
    }

    #[test]
    fn prices_of_another_region_are_said_to_be_so() {
        assert_eq!(price_note("us-east-1", "us-east-1"), None);
        let note = price_note("eu-west-1", "us-east-1").expect("a note");
        assert!(
            note.starts_with("no eu-west-1 prices are embedded: costs use us-east-1 list prices")
        );
    }
}
