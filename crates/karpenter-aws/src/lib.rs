//! The AWS side of karpenter-rs.
//!
//! This crate owns the **IAM story** (module [`iam`]), as pure code:
//!
//! * the IAM call contract: every AWS API operation the controller performs, as data, with the
//!   resource ARNs it touches and the request/resource tags it carries ([`iam::contract`]);
//! * the least-privilege controller policy generated from that contract ([`iam::generate`]) and
//!   the getting-started CloudFormation template around it ([`iam::cloudformation`]);
//! * an IAM policy evaluator ([`iam::eval`]) and an auditor that runs a user's policy against the
//!   contract and against probes the contract would never make ([`iam::audit`]).
//!
//! It also owns the **pure half of interruption handling** (module [`interruption`]): parsing
//! the EventBridge events that arrive on the SQS interruption queue, deciding what to do about
//! the NodeClaims they name (delete, mark a spot offering unavailable, record events), the
//! upstream metric names and labels, and whether a message is deleted or retried. The SQS
//! long-poll loop that performs those decisions belongs to the async shell, not here.
//!
//! And it owns the **pure pieces of the EC2 provider**, each fed what EC2 answered rather than
//! calling it:
//!
//! * [`userdata`]: user data per AMI family (AL2 `bootstrap.sh` and AL2023 nodeadm `NodeConfig`
//!   in MIME multipart, Bottlerocket TOML, Windows PowerShell, Custom as is), merged with the
//!   EC2NodeClass `spec.userData`;
//! * [`launch_template`]: the `CreateLaunchTemplate` contents for a NodeClaim and their
//!   `karpenter.k8s.aws/<hash>` name;
//! * [`pricing`]: Pricing API and spot price history parsers and [`pricing::Prices`], with the
//!   catalog's embedded prices as the fallback;
//! * [`instance_types`]: `DescribeInstanceTypes`/`DescribeInstanceTypeOfferings` answers into
//!   `karpenter_cloud::InstanceTypeInfo`, through the catalog crate's formulas.
//!
//! [`batch`] decides which EC2 calls of concurrent NodeClaims share one request
//! (`CreateFleet`, `DescribeInstances`, `TerminateInstances`) and splits the answer back.
//!
//! And, for the EC2 provider's controllers, [`nodeclass`] (selector terms into queries, AMI
//! aliases into SSM parameters and the status AMIs, the managed instance profile, the status
//! and its conditions), [`placement_group`] (the class's placement group: its query, its
//! condition, what it does to instance types, launches, labels and drift), [`launch`] (a
//! NodeClaim's launch plan, tenancy and its `CreateFleet` request and answer),
//! [`discovered_capacity`] (instance memory learned from registered nodes),
//! [`capacity_reservation`] (the reservations a class selects, their free slots and reserved
//! offerings), [`drift`] and
//! [`zonal_shift`] (ARC zonal shifts: which zones are shifted away from and what that does to
//! offerings and NodePool events). EC2 instance status checks are
//! [`interruption::instance_status`].
//!
//! The EC2 `CloudProvider` that asks AWS and performs these decisions is the crate
//! `karpenter-aws-provider`. It must stay inside the contract: every call it makes has an entry
//! in [`iam::contract::calls`], and the integration tests record its calls and check them
//! (`iam::recorded`, built with the feature `test-support`).
//!
//! What no module here may do: talk to AWS, read the clock, or do any I/O (callers read policy
//! files, receive SQS messages and print reports). No tokio and no AWS SDK in this crate.

pub mod batch;
pub mod capacity_reservation;
pub mod discovered_capacity;
pub mod drift;
pub mod iam;
pub mod instance_types;
pub mod interruption;
pub mod launch;
pub mod launch_template;
pub mod nodeclass;
pub mod placement_group;
pub mod pricing;
pub mod userdata;
pub mod zonal_shift;
