//! [`InstanceTypeInfo`]: one instance type with everything the scheduler needs: labels, capacity,
//! overhead and offerings.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::capacity;
use crate::instance_labels::instance_labels;
use crate::offering::{CapacityType, Offering, offerings};
use crate::options::CatalogOptions;
use crate::overhead::{Overhead, overhead};
use crate::pricing::PriceTable;
use crate::resources::Resources;
use crate::shape::InstanceShape;

/// One instance type, resolved for a region, zones and node-class settings.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct InstanceTypeInfo {
    pub name: String,
    /// Labels every node of this type carries (zone and capacity type are per offering).
    pub labels: BTreeMap<String, String>,
    pub capacity: Resources,
    pub overhead: Overhead,
    pub offerings: Vec<Offering>,
    /// Labels whose value is one of several, chosen when an instance launches (on EC2:
    /// `karpenter.k8s.aws/instance-tenancy` is `default` or `dedicated`, a partition placement
    /// group's `karpenter.k8s.aws/placement-group-partition` is `1`..`N`): upstream's
    /// multi-valued instance-type requirements. The scheduler sees `key In [values]`; a node
    /// carries the value its launch chose.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub label_choices: BTreeMap<String, Vec<String>>,
}

impl InstanceTypeInfo {
    /// The cheapest on-demand price among its offerings (what a reserved offering is priced
    /// from).
    pub fn cheapest_on_demand(&self) -> Option<f64> {
        self.offerings
            .iter()
            .filter(|o| o.capacity_type == crate::CapacityType::OnDemand)
            .map(|o| o.price_per_hour)
            .min_by(f64::total_cmp)
    }

    /// Builds the type from its shape; `None` when it has no offering (no price).
    pub fn resolve(
        shape: &InstanceShape,
        prices: &PriceTable,
        options: &CatalogOptions,
    ) -> Option<Self> {
        let offerings = offerings(shape, prices, options);
        if offerings.is_empty() {
            return None;
        }
        let capacity = capacity::capacity(shape, options);
        let overhead = overhead(shape, &capacity, options);
        Some(Self {
            name: shape.name.clone(),
            labels: instance_labels(shape, &options.region),
            capacity,
            overhead,
            offerings,
            label_choices: BTreeMap::new(),
        })
    }

    /// Capacity minus overhead: what pods can request.
    pub fn allocatable(&self) -> Resources {
        self.capacity.minus(&self.overhead.total())
    }

    /// The cheapest available offering, optionally of one capacity type.
    pub fn cheapest_offering(&self, capacity_type: Option<CapacityType>) -> Option<&Offering> {
        self.offerings
            .iter()
            .filter(|o| o.available && capacity_type.is_none_or(|ct| o.capacity_type == ct))
            .min_by(|a, b| a.price_per_hour.total_cmp(&b.price_per_hour))
    }
}
