//! EC2NodeClass placement groups as EC2 describes them (`DescribePlacementGroups`), kept in
//! memory as upstream's placement group provider keeps them (a placement group has no status
//! field): an answer is reused for [`FRESH_FOR`], and a group found once stands in for
//! [`KNOWN_FOR`] when asking again fails.
//!
//! The EC2NodeClass controller asks on every resolution ([`PlacementGroups::describe`]) and
//! writes the `PlacementGroupReady` condition; instance types, launches, node labels and drift
//! read through [`PlacementGroups::get`]. What an answer means is `karpenter_aws::placement_group`'s.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use aws_sdk_ec2::types::Filter;
use karpenter_api::v1::ec2nodeclass::PlacementGroupSelector;
use karpenter_aws::placement_group::{self, PlacementGroup, Strategy};

use crate::clients::AwsClients;
use crate::error::AwsError;

/// How long an answer is used without asking again (upstream's `DefaultTTL`).
pub const FRESH_FOR: Duration = Duration::from_secs(60);
/// How long a group found once stands in when asking fails (upstream's
/// `PlacementGroupAvailabilityTTL`).
pub const KNOWN_FOR: Duration = Duration::from_secs(24 * 3600);

#[derive(Debug, Clone)]
struct Entry {
    asked: Instant,
    group: Option<PlacementGroup>,
    /// The last group found, and when.
    known: Option<(Instant, PlacementGroup)>,
}

/// The placement groups of the classes' selectors.
#[derive(Debug, Default)]
pub struct PlacementGroups {
    entries: Mutex<HashMap<String, Entry>>,
    version: AtomicU64,
}

fn key(selector: &PlacementGroupSelector) -> String {
    match (&selector.id, &selector.name) {
        (Some(id), _) if !id.is_empty() => format!("id:{id}"),
        (_, name) => format!("name:{}", name.as_deref().unwrap_or_default()),
    }
}

fn convert(group: &aws_sdk_ec2::types::PlacementGroup) -> Option<PlacementGroup> {
    Some(PlacementGroup {
        id: group.group_id()?.to_owned(),
        name: group.group_name().unwrap_or_default().to_owned(),
        strategy: Strategy::parse(group.strategy()?.as_str())?,
        partition_count: group
            .partition_count()
            .and_then(|n| u32::try_from(n).ok())
            .unwrap_or_default(),
        spread_level: group.spread_level().map(|l| l.as_str().to_owned()),
    })
}

impl PlacementGroups {
    pub fn new() -> Self {
        Self::default()
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<String, Entry>> {
        self.entries.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Changes whenever a selector's group changes (found, gone, another one).
    pub fn version(&self) -> u64 {
        self.version.load(Ordering::Relaxed)
    }

    /// Asks EC2 for the selector's group (available groups only); `None` when there is none.
    /// A name or id EC2 says it does not know is `None` too. The answer is remembered.
    pub async fn describe(
        &self,
        clients: &AwsClients,
        selector: &PlacementGroupSelector,
    ) -> Result<Option<PlacementGroup>, AwsError> {
        let query = placement_group::query(selector);
        let filters = query
            .filters
            .iter()
            .map(|(name, values)| {
                Filter::builder()
                    .name(name)
                    .set_values(Some(values.clone()))
                    .build()
            })
            .collect();
        let answer = clients
            .ec2
            .describe_placement_groups()
            .set_group_ids((!query.group_ids.is_empty()).then_some(query.group_ids))
            .set_group_names((!query.group_names.is_empty()).then_some(query.group_names))
            .set_filters(Some(filters))
            .send()
            .await;
        let group = match answer {
            Ok(out) => out.placement_groups().iter().find_map(convert),
            Err(error) => {
                let error = AwsError::from_sdk("ec2:DescribePlacementGroups", &error);
                // EC2 answers an unknown name with InvalidPlacementGroup.Unknown.
                if !(error.is_not_found() || error.code.ends_with(".Unknown")) {
                    return Err(error);
                }
                None
            }
        };
        let now = Instant::now();
        let mut entries = self.lock();
        let previous = entries.remove(&key(selector));
        let known = match (&group, previous.as_ref()) {
            (Some(found), _) => Some((now, found.clone())),
            (None, Some(before)) => before.known.clone(),
            (None, None) => None,
        };
        if previous.as_ref().map(|p| &p.group) != Some(&group) {
            self.version.fetch_add(1, Ordering::Relaxed);
        }
        entries.insert(
            key(selector),
            Entry {
                asked: now,
                group: group.clone(),
                known,
            },
        );
        Ok(group)
    }

    /// The selector's group, asked again when the last answer is older than [`FRESH_FOR`]. When
    /// asking fails, the group last found (within [`KNOWN_FOR`]) stands in; without one, the
    /// error is returned.
    pub async fn get(
        &self,
        clients: &AwsClients,
        selector: &PlacementGroupSelector,
    ) -> Result<Option<PlacementGroup>, AwsError> {
        if let Some(entry) = self.lock().get(&key(selector))
            && entry.asked.elapsed() < FRESH_FOR
        {
            return Ok(entry.group.clone());
        }
        match self.describe(clients, selector).await {
            Ok(group) => Ok(group),
            Err(error) => {
                let known = self
                    .lock()
                    .get(&key(selector))
                    .and_then(|e| e.known.clone())
                    .filter(|(at, _)| at.elapsed() < KNOWN_FOR);
                match known {
                    Some((_, group)) => {
                        tracing::warn!(placement_group = %group.id, %error, "describing the placement group failed; using the one found before");
                        Ok(Some(group))
                    }
                    None => Err(error),
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn selectors_are_keyed_by_id_first_then_name() {
        let by_id = PlacementGroupSelector {
            name: None,
            id: Some("pg-1".into()),
        };
        let by_name = PlacementGroupSelector {
            name: Some("kafka".into()),
            id: None,
        };
        assert_eq!(key(&by_id), "id:pg-1");
        assert_eq!(key(&by_name), "name:kafka");
    }

    #[test]
    fn an_ec2_group_converts_with_its_strategy_and_partitions() {
        let sdk = aws_sdk_ec2::types::PlacementGroup::builder()
            .group_id("pg-1")
            .group_name("kafka")
            .strategy(aws_sdk_ec2::types::PlacementStrategy::Partition)
            .partition_count(3)
            .build();
        assert_eq!(
            convert(&sdk),
            Some(PlacementGroup {
                id: "pg-1".into(),
                name: "kafka".into(),
                strategy: Strategy::Partition,
                partition_count: 3,
                spread_level: None,
            })
        );
        let unknown = aws_sdk_ec2::types::PlacementGroup::builder()
            .group_id("pg-2")
            .build();
        assert_eq!(
            convert(&unknown),
            None,
            "no strategy, nothing to launch into"
        );
    }
}
