//! One module per subcommand.

pub mod bench;
pub mod bench_consolidation;
pub mod bench_ec2;
pub mod bench_interruption;
pub mod controller;
pub mod convert;
pub mod crds;
pub mod iam;
pub mod input;
pub mod simulate;
pub mod validate;
