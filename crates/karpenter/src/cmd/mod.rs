//! One module per subcommand.

pub mod bench;
pub mod convert;
pub mod crds;
pub mod iam;
pub mod simulate;
pub mod validate;
