//! The cloud providers the controller can run with. `kwok` (the simulated cloud) is here; the
//! EC2 provider lives in `karpenter-aws`.

pub mod kwok;
pub mod kwok_types;
