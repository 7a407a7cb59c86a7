//! One module per subcommand.

pub mod controller;
pub mod convert;
pub mod crds;
pub mod explain;
pub mod iam;
pub mod input;
pub mod out;
pub mod simulate;
pub mod top;
pub mod validate;
