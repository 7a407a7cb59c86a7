//! One module per subcommand.

pub mod crds;
pub mod iam;
pub mod validate;
