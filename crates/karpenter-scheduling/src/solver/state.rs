//! Solver state: NodePool templates, existing nodes and new NodeClaims being filled, plus what
//! one attempt to place a pod looks like.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Taint, Toleration};

use crate::input::NodePool;
use crate::intern::Sym;
use crate::requirements::Requirements;
use crate::solver::bitset::Bitset;
use crate::solver::daemons::OverheadGroup;
use crate::solver::dims::Res;
use crate::solver::hostports::HostPort;
use crate::solver::selector::Labels;
use crate::solver::topology::GroupRef;
use crate::solver::type_index::TypeIndex;

/// A NodePool ready to stamp out NodeClaims.
#[derive(Debug)]
pub struct PoolState<'a> {
    pub spec: &'a NodePool,
    pub catalog: TypeIndex,
    /// NodePool requirements + labels + `karpenter.sh/nodepool` + registered/initialized.
    pub template: Requirements,
    /// Instance types compatible with the template and having an available offering.
    pub template_its: Bitset,
    pub overhead_groups: Vec<OverheadGroup>,
    pub taint_set: usize,
    /// Remaining limits per resource dimension (`None`: unlimited).
    pub remaining: Vec<Option<i128>>,
    /// Remaining `nodes` limit.
    pub nodes_remaining: Option<i64>,
    /// Why the pool cannot launch anything at all.
    pub disabled: Option<String>,
}

/// A node already in the cluster.
#[derive(Debug)]
pub struct ExistingState {
    pub index: usize,
    pub name: String,
    pub requirements: Requirements,
    pub taints: Vec<Taint>,
    pub taint_set: usize,
    pub remaining: Res,
    /// Allocatable (before any pod): the share of it still free scores a node for
    /// [`crate::SolveOptions::spread_over_existing`].
    pub allocatable: Res,
    pub host_ports: Vec<HostPort>,
    pub initialized: bool,
    pub deleting: bool,
    pub refuses_relocated_pods: bool,
}

/// A NodeClaim being filled during this solve.
#[derive(Debug, Clone)]
pub struct Claim {
    pub pool: usize,
    /// Index of the claim's placeholder hostname among the hostname topology domains.
    pub host_domain: u32,
    pub requirements: Requirements,
    /// Instance types still viable (already narrowed by fit with daemon overhead).
    pub its: Bitset,
    /// Element-wise max allocatable over `its` (a quick necessary condition for fitting).
    pub max_allocatable: Res,
    /// Sum of pod requests (without daemon overhead).
    pub requests: Res,
    pub pods: Vec<usize>,
    pub host_ports: Vec<HostPort>,
    pub min_values_relaxed: bool,
    /// Position in the in-flight order (pod count, tie-break).
    pub order_key: (usize, i64),
    /// The capacity reservations it holds a slot of, sorted.
    pub reserved: Vec<Sym>,
    /// The instance types offering one of `reserved` (a prefilter's operand).
    pub reserved_types: Bitset,
}

/// A pod at one relaxation step, ready to be tried against nodes.
#[derive(Debug, Clone)]
pub struct Attempt {
    pub requirements: Requirements,
    pub strict: Requirements,
    pub tolerations: Vec<Toleration>,
    pub groups: Vec<GroupRef>,
    /// Per pool: the first taint the pod does not tolerate.
    pub pool_taint: Vec<Option<String>>,
    /// Keys on which a NodeClaim taking the pod is pinned to one value: those of zone-level
    /// anti-affinity groups selecting the pod (empty when pinning is off).
    pub pin_keys: Vec<Sym>,
}

/// What an existing pod contributes to topology.
#[derive(Debug, Clone)]
pub struct ExistingPod {
    pub namespace: Sym,
    pub labels: Labels,
}

/// Reasons collected while trying one pod, keyed by where it was tried.
pub type Reasons = BTreeMap<String, String>;
