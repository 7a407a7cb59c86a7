//! One module per subcommand.

pub mod convert;
pub mod crds;
pub mod iam;
pub mod validate;
