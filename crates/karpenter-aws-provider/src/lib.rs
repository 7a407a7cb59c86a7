//! The EC2 cloud provider: the async shell around `karpenter-aws`'s pure decisions.
//!
//! It owns the AWS clients ([`clients`]), the EC2NodeClass resolution against EC2, SSM and IAM
//! ([`nodeclass`]), the capacity reservations it selects and their free slots
//! ([`capacity_reservations`]), the instance-type catalog and prices, launch templates, fleet launches,
//! the instances it launched, instance tags ([`tagging`]), the interruption queue ([`sqs`]),
//! EC2 instance status checks ([`instance_status`]) and ARC zonal shifts ([`zonal_shift`]);
//! launches, descriptions and terminations of concurrent NodeClaims share calls ([`batcher`]):
//! every AWS call the controller makes is here. Every decision (what to ask, what an answer means, what to
//! launch) is a function of `karpenter-aws`; this crate asks and performs.
//!
//! It must not: talk to the Kubernetes API (the controller reads EC2NodeClasses and writes
//! their status; this crate is given the objects), block a thread, or make an AWS call the
//! IAM contract (`karpenter_aws::iam::contract`) does not list: the integration tests record
//! every call and check it against the policy `karpenter iam policy` prints.
//!
//! Why a crate of its own rather than modules of `karpenter-aws`: that crate is pure (no
//! tokio, no SDK), and `simulate`, `iam` and the interruption parser use it without the SDK.

pub mod batcher;
pub mod calls;
pub mod capacity_reservations;
pub mod catalog;
pub mod clients;
pub mod cluster_version;
pub mod error;
pub mod fleet;
pub mod instance_status;
pub mod instances;
pub mod launch_templates;
pub mod metrics;
pub mod nodeclass;
pub mod placement_groups;
pub mod pricing;
pub mod provider;
pub mod repair;
pub mod sqs;
pub mod tagging;
pub mod zonal_shift;

pub use clients::AwsClients;
pub use error::AwsError;
pub use provider::{AwsCloud, AwsSettings, DryRun, NodeClasses, probe_claim};
