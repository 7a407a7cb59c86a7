//! The EC2NodeClass, resolved: selector terms into Describe* queries ([`selectors`]), AMI
//! aliases into SSM parameters and images into the status AMIs ([`amis`]), the managed instance
//! profile ([`instance_profile`]), the status with its conditions ([`status`]) and what the
//! authorization dry runs behind `ValidationSucceeded` answer ([`dry_run`]).
//!
//! Pure: the async shell asks EC2, SSM and IAM what these functions say to ask, and feeds the
//! answers back.

pub mod amis;
pub mod dry_run;
pub mod instance_profile;
pub mod selectors;
pub mod status;
