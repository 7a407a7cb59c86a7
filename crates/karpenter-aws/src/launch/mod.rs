//! Launching a NodeClaim on EC2, as values: the plan ([`plan`]: instance types, capacity
//! type, subnets, AMIs, launch-template groups) and the `CreateFleet` request and answer
//! ([`fleet`]), and the tenancy it launches with ([`tenancy`]). The shell creates the launch
//! templates ([`crate::launch_template`]) and sends the request.

pub mod fleet;
pub mod plan;
pub mod tenancy;
