//! Turning solver state into a [`SolveResult`]: NodeClaims with their instance-type options
//! ordered by price and truncated, the daemon overhead added to their requests, placements on
//! existing nodes and reasons for unschedulable pods.

use std::collections::BTreeMap;

use crate::input::MinValuesPolicy;
use crate::output::{
    ExistingPlacement, InstanceTypeOption, NewNodeClaim, SolveResult, Unschedulable,
};
use crate::requirement::Requirement;
use crate::solver::bitset::Bitset;
use crate::solver::dims;
use crate::solver::scheduler::{Solver, format_reasons};
use crate::solver::state::Reasons;

/// Per (pool, compatible offering signatures): instance types and prices, cheapest first.
type PriceOrder = (usize, Vec<bool>, Vec<(usize, f64)>);

impl Solver<'_> {
    /// The decisions of the solve.
    pub fn result(&self) -> SolveResult {
        let mut result = SolveResult {
            stats: self.stats.clone(),
            ..SolveResult::default()
        };
        // Pods of claims dropped because truncation broke their minValues.
        let mut truncated: Vec<(usize, Reasons)> = Vec::new();
        // Per (pool, compatible offering signatures): instance types with their cheapest price,
        // cheapest first. Claims then only filter this list by their own viable set.
        let mut orders: Vec<PriceOrder> = Vec::new();
        for claim in &self.claims {
            let pool = &self.pools[claim.pool];
            let catalog = &pool.catalog;
            let mut reqs = claim.requirements.clone();
            reqs.remove(self.keys.hostname);
            let reserved = self
                .interner
                .get(karpenter_api::labels::CAPACITY_TYPE_RESERVED);
            if let Some(reserved) = reserved {
                if !claim.reserved.is_empty() {
                    // Upstream's `FinalizeScheduling`: a claim holding reservation slots
                    // launches into one of them.
                    reqs.set(self.keys.capacity_type, Requirement::is_in([reserved]));
                    reqs.set(
                        self.keys.reservation_id,
                        Requirement::is_in(claim.reserved.iter().copied()),
                    );
                } else if !catalog.reserved.is_empty() {
                    // Better than upstream, which lists `reserved` whenever a reservation had
                    // a slot when the solve began: a claim the solve counted no slot for is
                    // not sent to a reservation other claims have filled.
                    reqs.add(
                        self.keys.capacity_type,
                        Requirement::not_in([reserved]),
                        &self.interner,
                    );
                }
            }
            let mask = catalog.compatible_signatures(&reqs, &self.interner);
            let order_index = match orders
                .iter()
                .position(|(p, m, _)| *p == claim.pool && *m == mask)
            {
                Some(i) => i,
                None => {
                    let mut order: Vec<(usize, f64)> = (0..catalog.len())
                        .filter_map(|i| catalog.cheapest_price_in(i, &mask).map(|p| (i, p)))
                        .collect();
                    order.sort_by(|a, b| a.1.total_cmp(&b.1));
                    orders.push((claim.pool, mask.clone(), order));
                    orders.len() - 1
                }
            };
            let viable = orders[order_index]
                .2
                .iter()
                .filter(|(i, _)| claim.its.contains(*i));
            let options: Vec<(usize, f64)> = viable
                .clone()
                .take(self.input.options.max_instance_types)
                .copied()
                .collect();
            // Upstream `TruncateInstanceTypes`: under the Strict policy, the options kept must
            // still meet every minValues; if not, the claim is dropped and its pods fail.
            if self.min_values_policy == MinValuesPolicy::Strict
                && claim.requirements.has_min_values()
                && viable.count() > options.len()
            {
                let mut kept = Bitset::empty(catalog.len());
                for (i, _) in &options {
                    kept.insert(*i);
                }
                if let Err(short) = self.check_min_values(claim.pool, &kept, &claim.requirements) {
                    let keys = short
                        .iter()
                        .map(|(k, n)| format!("{} (only {n})", self.interner.resolve(*k)))
                        .collect::<Vec<_>>()
                        .join(", ");
                    let why = format!(
                        "minValues requirement is not met for {keys} after truncating to the {} cheapest instance types",
                        self.input.options.max_instance_types
                    );
                    let key = format!("nodepool {}", pool.spec.name);
                    for p in &claim.pods {
                        truncated.push((*p, BTreeMap::from([(key.clone(), why.clone())])));
                    }
                    continue;
                }
            }
            let mut capacity_types = Vec::new();
            for (i, _) in &options {
                capacity_types.extend(catalog.capacity_types_in(*i, &mask));
                capacity_types.sort_unstable();
                capacity_types.dedup();
            }
            let mut requests = claim.requests.clone();
            // The smallest daemon overhead among groups that still hold an option.
            let overhead = pool
                .overhead_groups
                .iter()
                .filter(|g| options.iter().any(|(i, _)| g.its.contains(*i)))
                .map(|g| g.overhead.clone())
                .min_by_key(|o| (dims::get(o, dims::CPU), dims::get(o, dims::MEMORY)));
            if let Some(o) = overhead {
                dims::add(&mut requests, &o);
            }
            let mut specs = reqs.to_specs(&self.interner);
            {
                use karpenter_api::labels as l;
                specs.retain(|s| {
                    ![
                        l::INSTANCE_TYPE,
                        l::CAPACITY_TYPE,
                        l::REGISTERED,
                        l::INITIALIZED,
                    ]
                    .contains(&s.key.as_str())
                });
            }
            let cts: Vec<String> = capacity_types
                .iter()
                .map(|c| self.interner.resolve(*c).to_string())
                .collect();
            let ct_min = reqs.get(self.keys.capacity_type).and_then(|r| r.min_values);
            specs.push(crate::input::RequirementSpec {
                key: karpenter_api::labels::CAPACITY_TYPE.into(),
                operator: crate::input::Operator::In,
                values: cts,
                min_values: ct_min,
            });
            specs.sort_by(|a, b| a.key.cmp(&b.key));
            let mut labels: BTreeMap<String, String> = pool.spec.labels.clone();
            for (k, r) in reqs.iter() {
                if let Some(v) = r.single_value() {
                    labels.insert(
                        self.interner.resolve(k).to_string(),
                        self.interner.resolve(v).to_string(),
                    );
                }
            }
            labels.remove(karpenter_api::labels::REGISTERED);
            labels.remove(karpenter_api::labels::INITIALIZED);
            result.new_node_claims.push(NewNodeClaim {
                node_pool: pool.spec.name.clone(),
                requirements: specs,
                instance_type_options: options
                    .iter()
                    .map(|(i, p)| InstanceTypeOption {
                        name: catalog.its[*i].name.clone(),
                        price: *p,
                    })
                    .collect(),
                requests: self.dims.to_list(&requests),
                pods: claim
                    .pods
                    .iter()
                    .map(|p| self.pods[*p].pod_ref.clone())
                    .collect(),
                instance_type_min_values: reqs
                    .get(self.keys.instance_type)
                    .and_then(|r| r.min_values),
                min_values_relaxed: claim.min_values_relaxed,
                labels,
            });
        }
        for (pi, ni) in &self.placements {
            result.existing_placements.push(ExistingPlacement {
                pod: self.pods[*pi].pod_ref.clone(),
                node: self.input.existing_nodes[*ni].name.clone(),
            });
        }
        for (pod, reason) in &self.pod_errors {
            result.unschedulable.push(Unschedulable {
                pod: pod.clone(),
                reason: format!("validation: {reason}"),
                reasons: vec![("validation".into(), reason.clone())],
                deferred: false,
            });
        }
        // Pods the loop gave up on (deferred for reserved capacity or not), then pods of
        // claims dropped for minValues after truncation (never deferred).
        let failed = self
            .failures
            .iter()
            .map(|(pi, reasons)| (*pi, reasons, self.is_deferred(*pi)))
            .chain(truncated.iter().map(|(pi, reasons)| (*pi, reasons, false)));
        for (pi, reasons, deferred) in failed {
            result.unschedulable.push(Unschedulable {
                pod: self.pods[pi].pod_ref.clone(),
                reason: format_reasons(reasons),
                reasons: reasons
                    .iter()
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect(),
                deferred,
            });
        }
        result
    }
}
