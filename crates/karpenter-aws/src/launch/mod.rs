//! Launching a NodeClaim on EC2, as values: the plan ([`plan`]: instance types, capacity
//! type, subnets, AMIs, launch-template groups) and the `CreateFleet` request and answer
//! ([`fleet`]), the tenancy it launches with ([`tenancy`]) and the reservation it launches
//! into ([`reserved`]). The shell creates the launch
//! templates ([`crate::launch_template`]) and sends the request.

pub mod fleet;
pub mod plan;
pub mod reserved;
pub mod tenancy;
