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
}

impl InstanceTypeInfo {
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
