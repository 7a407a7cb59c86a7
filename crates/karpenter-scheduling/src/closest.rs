//! The closest instance type for requests no instance type can hold: the type with the smallest
//! shortfall, and what it lacks (`m5.xlarge: needs 6 cpu, has 3.92 allocatable`). For the
//! explanation of a pod that fits no instance type of a NodePool for resources.
//!
//! The shortfall of a type is the sum, over the requested resources it lacks, of the missing
//! fraction of the request (so 1 cpu missing of 6 weighs as much as 1 GiB missing of 6 GiB);
//! ties go to the cheaper type (its cheapest offering), then to the name.

use crate::input::InstanceType;
use crate::quantity::{Quantity, format_millis};
use crate::resources::ResourceList;

/// One resource a type lacks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lack {
    pub resource: String,
    pub needs: Quantity,
    pub has: Quantity,
}

/// The type closest to holding the requests, and what it lacks.
#[derive(Debug, Clone, PartialEq)]
pub struct Closest {
    pub instance_type: String,
    pub lacks: Vec<Lack>,
}

impl std::fmt::Display for Closest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let lacks: Vec<String> = self
            .lacks
            .iter()
            .map(|l| {
                format!(
                    "needs {} {}, has {} allocatable",
                    amount(l.needs),
                    l.resource,
                    amount(l.has)
                )
            })
            .collect();
        write!(f, "{}: {}", self.instance_type, lacks.join("; "))
    }
}

/// A quantity as people read it: whole units as `format_millis` writes them (`4`, `16Gi`), a
/// fraction as a decimal (`3.92`, not `3920m`).
fn amount(q: Quantity) -> String {
    let millis = q.millis();
    if millis % 1000 == 0 {
        return format_millis(millis);
    }
    let text = format!("{}.{:03}", millis / 1000, (millis % 1000).abs());
    text.trim_end_matches('0').to_owned()
}

/// The type of `types` with the smallest shortfall for `requests` (each type's allocatable,
/// less `overhead`: the DaemonSets' requests); `None` when there is no type, or one holds them.
pub fn closest_instance_type(
    types: &[InstanceType],
    requests: &ResourceList,
    overhead: &ResourceList,
) -> Option<Closest> {
    let mut best: Option<(f64, f64, &str, Vec<Lack>)> = None;
    for it in types {
        let mut available = it.allocatable();
        available.sub(overhead);
        let mut shortfall = 0.0;
        let mut lacks = Vec::new();
        for (resource, needs) in requests.iter() {
            let has = available.get(resource);
            if *needs <= has || needs.millis() <= 0 {
                continue;
            }
            let missing = (needs.millis() - has.millis().max(0)) as f64;
            shortfall += missing / needs.millis() as f64;
            lacks.push(Lack {
                resource: resource.clone(),
                needs: *needs,
                has: if has.millis() < 0 {
                    Quantity::ZERO
                } else {
                    has
                },
            });
        }
        if lacks.is_empty() {
            return None;
        }
        let price = it
            .offerings
            .iter()
            .map(|o| o.price)
            .fold(f64::INFINITY, f64::min);
        let better = best.as_ref().is_none_or(|(s, p, name, _)| {
            shortfall
                .total_cmp(s)
                .then(price.total_cmp(p))
                .then(it.name.as_str().cmp(name))
                .is_lt()
        });
        if better {
            best = Some((shortfall, price, it.name.as_str(), lacks));
        }
    }
    best.map(|(_, _, name, lacks)| Closest {
        instance_type: name.to_owned(),
        lacks,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::builders::InstanceTypeBuilder;

    fn it(name: &str, cpu: &str, memory: &str) -> InstanceType {
        InstanceTypeBuilder::new(name)
            .resource("cpu", cpu)
            .resource("memory", memory)
            .build()
    }

    fn requests(cpu: &str, memory: &str) -> ResourceList {
        let mut r = ResourceList::new();
        r.set("cpu", Quantity::parse(cpu).unwrap_or_default());
        r.set("memory", Quantity::parse(memory).unwrap_or_default());
        r
    }

    #[test]
    fn the_type_with_the_smallest_shortfall_is_named_with_what_it_lacks() {
        let types = [
            it("m5.large", "2", "8Gi"),
            it("m5.xlarge", "4", "16Gi"),
            it("r5.large", "2", "16Gi"),
        ];
        let closest = closest_instance_type(&types, &requests("6", "4Gi"), &ResourceList::new())
            .expect("no type holds 6 cpu");
        assert_eq!(closest.instance_type, "m5.xlarge");
        assert_eq!(
            closest.to_string(),
            "m5.xlarge: needs 6 cpu, has 4 allocatable"
        );
    }

    #[test]
    fn the_daemonsets_overhead_counts_against_each_type() {
        let types = [it("m5.xlarge", "4", "16Gi")];
        let closest = closest_instance_type(&types, &requests("3", "1Gi"), &requests("1500m", "0"))
            .expect("3 cpu do not fit beside 1.5 cpu of DaemonSets");
        assert_eq!(
            closest.to_string(),
            "m5.xlarge: needs 3 cpu, has 2.5 allocatable"
        );
        assert_eq!(amount(Quantity::from_millis(3920)), "3.92");
        assert_eq!(amount(Quantity::from_millis(250)), "0.25");
    }

    #[test]
    fn nothing_is_closest_when_a_type_holds_the_requests_or_there_is_none() {
        let types = [it("m5.large", "2", "8Gi"), it("m5.xlarge", "4", "16Gi")];
        assert_eq!(
            closest_instance_type(&types, &requests("3", "1Gi"), &ResourceList::new()),
            None
        );
        assert_eq!(
            closest_instance_type(&[], &requests("3", "1Gi"), &ResourceList::new()),
            None
        );
    }
}
