//! The simulated cloud (`--cloud-provider kwok`): instances are Node objects that KWOK keeps
//! Ready, as upstream's KWOK provider does.
//!
//! - **Instance types** come from the catalog (embedded, or `INSTANCE_TYPES_FILE_PATH` in the
//!   catalog format), resolved for the NodePool's EC2NodeClass exactly as `simulate` does
//!   (`karpenter_cloud::pool_types`): a user's production NodePools and EC2NodeClasses run
//!   unchanged. AWS-only fields of an EC2NodeClass (subnets, security groups, role, user data,
//!   ...) are ignored, and each class says so once in the log; a NodePool whose EC2NodeClass
//!   does not exist gets AL2023 defaults, also said once. An `INSTANCE_TYPES_FILE_PATH` in
//!   upstream's KWOK format ([`upstream_types`]) gives the types upstream's KWOK provider
//!   makes of it, the same for every NodePool.
//! - **Launch** picks the cheapest available offering the NodeClaim allows and creates a Node
//!   named after the NodeClaim (so a launch repeated after a restart finds its Node instead of
//!   making a second one): provider id `kwok://<name>`, the instance type's labels, zone,
//!   capacity type, the NodeClaim's labels and single-valued requirements, annotation and label
//!   `kwok.x-k8s.io/node: fake` (KWOK manages it), taint `karpenter.sh/unregistered:NoExecute`,
//!   capacity and allocatable from the catalog. With `KWOK_REGISTRATION_DELAY` (default 0s)
//!   above zero the instance boots first: the launched NodeClaim is its record (listed and
//!   got as the instance) and the Node is made once the delay, counted from the NodeClaim's
//!   `Launched` transition, has passed ([`Kwok::register`], run by the controller's
//!   `kwok.registration` loop). A controller that restarts during the delay registers it
//!   all the same, as an EC2 instance outlives the process that launched it.
//! - **Insufficient capacity** can be injected per offering (`KWOK_INSUFFICIENT_CAPACITY`, a
//!   comma-separated list of `instance-type:zone:capacity-type`, `*` matching anything): a
//!   launch whose cheapest offering is injected fails with
//!   [`karpenter_cloud::CloudError::InsufficientCapacity`]; as for any such error the offering is then
//!   unavailable for [`karpenter_cloud::UNAVAILABLE_FOR`] and the solver avoids it.
//! - **Capacity reservations** (`KWOK_CAPACITY_RESERVATIONS`, a comma-separated list of
//!   `id=instance-type:zone:count[:capacity-block][:interruptible]`, [`reservations`]): each
//!   offers its free slots as a `reserved` offering of its type, priced as upstream prices
//!   reservations; a launch into one takes a slot and labels the Node with the reservation's
//!   id, type and interruptible flag; deleting the Node gives the slot back.
//! - **Delete** deletes the Node; **get** and **list** read Nodes with `kwok://` provider ids.

//!
//! # What this crate owns, and must not do
//!
//! It owns the simulated cloud behind `--cloud-provider kwok` ([`Kwok`], a
//! [`karpenter_cloud::CloudProvider`]): its options ([`KwokOptions`], from `KWOK_*`), where its
//! instance types come from ([`TypeSource`]) and the Nodes it creates and deletes. It talks to
//! the Kubernetes API only for those Nodes; it decides nothing the controller decides (which
//! NodeClaims to launch or delete), and it reads NodePools and EC2NodeClasses through
//! [`NodePoolLookup`], not through a watch of its own.

mod catalog;
mod cloud;
mod options;
pub mod repair;
pub mod reservations;
pub mod upstream_types;

pub use catalog::{TypeSource, TypeSourceError};
pub use cloud::{Kwok, KwokCloud, NodePoolLookup, registration_due};
pub use options::{KWOK_NODE, KwokOptions, KwokOptionsError, OfferingPattern};
