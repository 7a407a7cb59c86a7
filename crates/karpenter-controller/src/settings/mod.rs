//! The controller's settings: every upstream Karpenter core flag/env with its
//! upstream name and default, plus a few karpenter-rs additions.
//!
//! Owns parsing and validation of settings into a plain [`Settings`] value, and the one table
//! of values karpenter-rs refuses to start with ([`Settings::validate`], `refusals.rs`).
//! Precedence is upstream's: a flag beats its environment variable, which
//! beats the default. It must not act on the settings (no I/O, no logging).
//!
//! [`Settings::parse_from`] takes the arguments and the environment as values,
//! so tests never touch the process environment; [`Settings::from_process`]
//! reads the real ones. `Settings` also derives [`clap::Args`], so a binary
//! may `#[command(flatten)]` it (clap then reads the process env itself, with
//! clap's own error wording).
//!
//! Settings that are **not upstream** (karpenter-rs additions): `--cloud-provider`
//! / `CLOUD_PROVIDER`, `--registration-ttl` / `REGISTRATION_TTL`, `--zone-pinning` /
//! `ZONE_PINNING`, `--instance-status-interval` / `INSTANCE_STATUS_INTERVAL` and
//! `--node-repair-unhealthy-threshold` / `NODE_REPAIR_UNHEALTHY_THRESHOLD`.
//! `--instance-types-file-path` / `INSTANCE_TYPES_FILE_PATH` is upstream's KWOK
//! provider flag. docs/settings.md has the table.

mod duration;
mod feature_gates;
mod log_paths;
mod refusals;
mod scheduler_config;
mod values;

use std::collections::HashMap;
use std::ffi::{OsStr, OsString};
use std::path::PathBuf;
use std::time::Duration;

use clap::error::{ContextKind, ContextValue, ErrorKind};
use clap::{ArgAction, Args, Command, FromArgMatches};

pub use duration::{format_go_duration, parse_go_duration};
pub use feature_gates::{
    AWS_GATE_NAMES, AwsFeatureGates, DEFAULT_AWS_FEATURE_GATES, DEFAULT_FEATURE_GATES,
    FeatureGates, GATE_NAMES, parse_aws_feature_gates, parse_feature_gates,
};
pub use log_paths::{LogPath, LogPaths, parse_log_paths};
pub use refusals::{Refusal, Refused};
pub use scheduler_config::{PodTopologySpreadConfig, SchedulerConfig, parse_scheduler_config};
pub use values::{CloudProviderKind, LogLevel, MinValuesPolicy, PreferencePolicy, parse_go_bool};

/// Why the settings could not be read.
#[derive(Debug, thiserror::Error)]
pub enum SettingsError {
    /// One setting has a value that is not allowed.
    #[error("invalid value {value:?} for {flag} (env {env}): {reason}")]
    InvalidValue {
        /// The flag, e.g. `--log-level`.
        flag: String,
        /// The environment variable, e.g. `LOG_LEVEL`.
        env: String,
        /// The value given.
        value: String,
        /// What is wrong and what is allowed.
        reason: String,
    },
    /// The command line itself is wrong (unknown flag, ...) or asks for `--help`.
    /// `clap::Error::exit` prints it the usual way.
    #[error(transparent)]
    CommandLine(#[from] clap::Error),
}

/// What `karpenter controller --help` says first.
const ABOUT: &str = "Run the node autoscaler against the cluster of the kubeconfig (or, in a \
pod, its own cluster). Every setting is a flag and an environment variable with upstream \
Karpenter's name and default; a flag wins over its variable.";

/// What `karpenter controller --help` says last.
const AFTER_HELP: &str = "A value karpenter-rs cannot honour (a feature it does not implement) \
stops the start with a message naming it; the settings upstream uses to tune the Go runtime are \
read and have no effect. The Helm chart sets these from its values; docs/settings.md says what \
each setting does.";

/// All settings of the controller, typed. Construct with [`Settings::parse_from`].
#[derive(Debug, Clone, PartialEq, Args)]
#[command(about = None, long_about = None)]
pub struct Settings {
    /// The Karpenter Service name, used by the dynamic webhook certificate flow (kept for compatibility).
    #[arg(long, env = "KARPENTER_SERVICE", default_value = "")]
    pub karpenter_service: String,

    /// Port of the Prometheus metrics endpoint (`/metrics`).
    #[arg(long, env = "METRICS_PORT", default_value_t = 8080)]
    pub metrics_port: u16,

    /// Port of the health probes (`/healthz`, `/readyz`).
    #[arg(long, env = "HEALTH_PROBE_PORT", default_value_t = 8081)]
    pub health_probe_port: u16,

    /// Sustained requests per second to the API server (client-side rate limit).
    #[arg(long, env = "KUBE_CLIENT_QPS", default_value_t = 200, value_parser = parse_positive_u32)]
    pub kube_client_qps: u32,

    /// Request burst above the QPS rate.
    #[arg(long, env = "KUBE_CLIENT_BURST", default_value_t = 300, value_parser = parse_positive_u32)]
    pub kube_client_burst: u32,

    /// Serve Go pprof endpoints: refused when true (karpenter-rs serves none).
    #[arg(long, env = "ENABLE_PROFILING", default_value = "false", value_parser = parse_go_bool, num_args = 0..=1, require_equals = true, default_missing_value = "true", action = ArgAction::Set)]
    pub enable_profiling: bool,

    /// Do not start watches before leading (upstream default: true). karpenter-rs's standby
    /// always keeps its caches warm and reports ready on them, whatever the value.
    #[arg(long, env = "DISABLE_CONTROLLER_WARMUP", default_value = "true", value_parser = parse_go_bool, num_args = 0..=1, require_equals = true, default_missing_value = "true", action = ArgAction::Set)]
    pub disable_controller_warmup: bool,

    /// Run as leader without a Lease (for a single replica, or tests).
    #[arg(long, env = "DISABLE_LEADER_ELECTION", default_value = "false", value_parser = parse_go_bool, num_args = 0..=1, require_equals = true, default_missing_value = "true", action = ArgAction::Set)]
    pub disable_leader_election: bool,

    /// Do not run the cluster-state metrics loops (metrics.node, metrics.pod,
    /// metrics.nodepool), as upstream leaves out its cluster-state observability controllers.
    #[arg(long, env = "DISABLE_CLUSTER_STATE_OBSERVABILITY", default_value = "false", value_parser = parse_go_bool, num_args = 0..=1, require_equals = true, default_missing_value = "true", action = ArgAction::Set)]
    pub disable_cluster_state_observability: bool,

    /// Name of the leader-election Lease.
    #[arg(long, env = "LEADER_ELECTION_NAME", default_value = "karpenter-leader-election", value_parser = parse_non_empty)]
    pub leader_election_name: String,

    /// Namespace of the leader-election Lease; empty means the client's default
    /// namespace (in a pod: the pod's namespace).
    #[arg(long, env = "LEADER_ELECTION_NAMESPACE", default_value = "")]
    pub leader_election_namespace: String,

    /// Memory limit in bytes; -1 means unlimited. Upstream sets Go's GC limit (GOMEMLIMIT) to
    /// 90% of it; no effect here (no garbage collector).
    #[arg(long, env = "MEMORY_LIMIT", default_value_t = -1, allow_negative_numbers = true)]
    pub memory_limit: i64,

    /// CPU requests in millicores. Upstream sizes its goroutine pools with it; no effect here
    /// (one async thread, single-threaded solves).
    #[arg(
        long,
        env = "CPU_REQUESTS",
        default_value_t = 1000,
        allow_negative_numbers = true
    )]
    pub cpu_requests: i64,

    /// Log level: debug, info or error.
    #[arg(long, env = "LOG_LEVEL", default_value = "info", value_parser = str::parse::<LogLevel>)]
    pub log_level: LogLevel,

    /// Where logs go: comma-separated stdout, stderr or file paths (appended to); every line
    /// goes to each.
    #[arg(long, env = "LOG_OUTPUT_PATHS", default_value = "stdout", value_parser = parse_log_paths)]
    pub log_output_paths: LogPaths,

    /// Where the logger's own errors go (a failed write to a log output), as zap's
    /// errorOutputPaths: comma-separated stdout, stderr or file paths.
    #[arg(long, env = "LOG_ERROR_OUTPUT_PATHS", default_value = "stderr", value_parser = parse_log_paths)]
    pub log_error_output_paths: LogPaths,

    /// Longest a provisioning batch may last (Go duration).
    #[arg(long, env = "BATCH_MAX_DURATION", default_value = "10s", value_parser = parse_go_duration)]
    pub batch_max_duration: Duration,

    /// Quiet time that closes a provisioning batch (Go duration).
    #[arg(long, env = "BATCH_IDLE_DURATION", default_value = "1s", value_parser = parse_go_duration)]
    pub batch_idle_duration: Duration,

    /// Respect or Ignore scheduling preferences.
    #[arg(long, env = "PREFERENCE_POLICY", default_value = "Respect", value_parser = str::parse::<PreferencePolicy>)]
    pub preference_policy: PreferencePolicy,

    /// Strict or BestEffort for NodePool minValues.
    #[arg(long, env = "MIN_VALUES_POLICY", default_value = "Strict", value_parser = str::parse::<MinValuesPolicy>)]
    pub min_values_policy: MinValuesPolicy,

    /// Ignore pods' dynamic resource allocation (DRA) requests when scheduling (accepted, not
    /// acted on yet).
    #[arg(long, env = "IGNORE_DRA_REQUESTS", default_value = "true", value_parser = parse_go_bool, num_args = 0..=1, require_equals = true, default_missing_value = "true", action = ArgAction::Set)]
    pub ignore_dra_requests: bool,

    /// Run the legacy node repair controller (with NodeRepair) instead of repair as a
    /// disruption method: refused when true (only the v1.15 method is implemented).
    #[arg(long, env = "LEGACY_NODE_REPAIR", default_value = "false", value_parser = parse_go_bool, num_args = 0..=1, require_equals = true, default_missing_value = "true", action = ArgAction::Set)]
    pub legacy_node_repair: bool,

    /// Feature gates, `Name=bool,...`; unnamed gates keep their defaults. SpotToSpotConsolidation,
    /// ReservedCapacity and NodeRepair are accepted both ways; turning on any other is refused (not
    /// implemented yet).
    #[arg(long, env = "FEATURE_GATES", default_value = DEFAULT_FEATURE_GATES, value_parser = parse_feature_gates)]
    pub feature_gates: FeatureGates,

    /// karpenter-rs only: node repair (gate `NodeRepair`) repairs no node of a NodePool while
    /// more than this share of its nodes is unhealthy: a percentage (rounded up) or a node
    /// count. Upstream's fixed value, `20%`, by default.
    #[arg(long, env = "NODE_REPAIR_UNHEALTHY_THRESHOLD", default_value = "20%", value_parser = parse_unhealthy_threshold)]
    pub node_repair_unhealthy_threshold: karpenter_disruption::UnhealthyThreshold,

    /// The parts of the cluster's kube-scheduler configuration the simulation mirrors, as an
    /// inline YAML/JSON document (today `podTopologySpread.defaultConstraints`); empty: none.
    #[arg(long, env = "SCHEDULER_CONFIG", default_value = "", value_parser = parse_scheduler_config)]
    pub scheduler_config: ::std::option::Option<SchedulerConfig>,

    /// karpenter-rs only: the cloud provider, kwok or aws.
    #[arg(long, env = "CLOUD_PROVIDER", default_value = "kwok", value_parser = str::parse::<CloudProviderKind>)]
    pub cloud_provider: CloudProviderKind,

    /// Name of the SQS queue of interruption events (spot interruptions, rebalance
    /// recommendations, state changes, AWS Health); empty: interruption handling off. AWS
    /// credentials, region and `AWS_ENDPOINT_URL` come from the SDK's usual chain.
    #[arg(long, env = "INTERRUPTION_QUEUE", default_value = "", value_parser = parse_optional_string)]
    pub interruption_queue: ::std::option::Option<String>,

    /// The EKS cluster's name (AWS provider; required with `--cloud-provider aws`): tags,
    /// launch templates, instance profiles and `eks:DescribeCluster` use it.
    #[arg(long, env = "CLUSTER_NAME", default_value = "")]
    pub cluster_name: String,

    /// The API server endpoint nodes join (AWS provider); empty: from `eks:DescribeCluster`.
    #[arg(long, env = "CLUSTER_ENDPOINT", default_value = "", value_parser = parse_optional_url)]
    pub cluster_endpoint: ::std::option::Option<String>,

    /// The cluster CA bundle, base64 (AWS provider); empty: the controller's own kube
    /// configuration's, else `eks:DescribeCluster`.
    #[arg(long, env = "CLUSTER_CA_BUNDLE", default_value = "", value_parser = parse_optional_string)]
    pub cluster_ca_bundle: ::std::option::Option<String>,

    /// The VPC has no internet access (AWS provider): no Pricing API (the embedded prices
    /// are used).
    #[arg(long, env = "ISOLATED_VPC", default_value = "false", value_parser = parse_go_bool, num_args = 0..=1, require_equals = true, default_missing_value = "true", action = ArgAction::Set)]
    pub isolated_vpc: bool,

    /// Read the Kubernetes version from eks:DescribeCluster: refused when true (karpenter-rs
    /// reads the API server's).
    #[arg(long, env = "EKS_CONTROL_PLANE", default_value = "false", value_parser = parse_go_bool, num_args = 0..=1, require_equals = true, default_missing_value = "true", action = ArgAction::Set)]
    pub eks_control_plane: bool,

    /// The share of an instance's memory the hypervisor keeps (AWS provider), in [0, 1).
    #[arg(long, env = "VM_MEMORY_OVERHEAD_PERCENT", default_value = "0.075", value_parser = parse_fraction)]
    pub vm_memory_overhead_percent: f64,

    /// ENIs reserved for other uses than pods, lowering ENI-limited max pods (AWS provider).
    #[arg(long, env = "RESERVED_ENIS", default_value_t = 0)]
    pub reserved_enis: u32,

    /// Skip the EC2NodeClass validation dry runs (AWS provider): karpenter-rs makes none, so
    /// both values mean no dry runs.
    #[arg(long, env = "DISABLE_DRY_RUN", default_value = "false", value_parser = parse_go_bool, num_args = 0..=1, require_equals = true, default_missing_value = "true", action = ArgAction::Set)]
    pub disable_dry_run: bool,

    /// Follow Amazon Application Recovery Controller zonal shifts of the EKS cluster (AWS
    /// provider): no launches into a zone shifted away from, no terminations there while the
    /// shift lasts. Needs `arc-zonal-shift:GetManagedResource`; a cluster ARC does not know
    /// stops the start.
    #[arg(long, env = "ENABLE_ZONAL_SHIFT", default_value = "false", value_parser = parse_go_bool, num_args = 0..=1, require_equals = true, default_missing_value = "true", action = ArgAction::Set)]
    pub enable_zonal_shift: bool,

    /// karpenter-rs only: how often EC2 instance status checks are polled
    /// (`ec2:DescribeInstanceStatus`, AWS provider; upstream's fixed 1m; at least 1s).
    #[arg(long, env = "INSTANCE_STATUS_INTERVAL", default_value = "1m", value_parser = parse_poll_interval)]
    pub instance_status_interval: Duration,

    /// How often EC2NodeClass AMIs are resolved again (AWS provider; at least 1m).
    #[arg(long, env = "AMI_REFRESH_INTERVAL", default_value = "1m", value_parser = parse_refresh_interval)]
    pub ami_refresh_interval: Duration,

    /// How often EC2NodeClass subnets are resolved again (AWS provider; at least 1m).
    #[arg(long, env = "SUBNET_REFRESH_INTERVAL", default_value = "1m", value_parser = parse_refresh_interval)]
    pub subnet_refresh_interval: Duration,

    /// How often EC2NodeClass security groups are resolved again (AWS provider; at least 1m).
    #[arg(long, env = "SECURITY_GROUP_REFRESH_INTERVAL", default_value = "1m", value_parser = parse_refresh_interval)]
    pub security_group_refresh_interval: Duration,

    /// AWS provider feature gates, `Name=bool,...`: all off by default; turning one on is refused
    /// (not implemented yet).
    #[arg(long, env = "AWS_FEATURE_GATES", default_value = DEFAULT_AWS_FEATURE_GATES, value_parser = parse_aws_feature_gates)]
    pub aws_feature_gates: AwsFeatureGates,

    /// Instance types for the kwok provider, as a JSON file; empty: the built-in catalog.
    #[arg(long, env = "INSTANCE_TYPES_FILE_PATH", default_value = "", value_parser = parse_optional_path)]
    pub instance_types_file_path: ::std::option::Option<PathBuf>,

    /// karpenter-rs only: how long a launched NodeClaim may take to register its Node
    /// before it is deleted (upstream's fixed 15m; tests shorten it).
    #[arg(long, env = "REGISTRATION_TTL", default_value = "15m", value_parser = parse_go_duration)]
    pub registration_ttl: Duration,

    /// karpenter-rs only: pin a NodeClaim to one zone when it takes a pod of a zone-level
    /// required anti-affinity group, so such a group is placed in one batch (false: upstream's
    /// one pod per group per batch).
    #[arg(long, env = "ZONE_PINNING", default_value = "true", value_parser = parse_go_bool, num_args = 0..=1, require_equals = true, default_missing_value = "true", action = ArgAction::Set)]
    pub zone_pinning: bool,
}

fn parse_positive_u32(input: &str) -> Result<u32, String> {
    match input.parse::<u32>() {
        Ok(0) | Err(_) => Err(format!(
            "{input:?} is not allowed; allowed: a whole number >= 1"
        )),
        Ok(n) => Ok(n),
    }
}

fn parse_non_empty(input: &str) -> Result<String, String> {
    if input.trim().is_empty() {
        Err("empty; allowed: a non-empty name".to_string())
    } else {
        Ok(input.to_string())
    }
}

fn parse_optional_string(input: &str) -> Result<Option<String>, String> {
    Ok((!input.is_empty()).then(|| input.to_owned()))
}

fn parse_optional_url(input: &str) -> Result<Option<String>, String> {
    if input.is_empty() {
        return Ok(None);
    }
    let rest = input
        .strip_prefix("https://")
        .or_else(|| input.strip_prefix("http://"))
        .ok_or_else(|| "not an absolute URL; allowed: https://host[:port][/path]".to_string())?;
    if rest.is_empty() || rest.starts_with('/') {
        return Err("the URL has no host; allowed: https://host[:port][/path]".to_string());
    }
    Ok(Some(input.to_owned()))
}

fn parse_unhealthy_threshold(
    input: &str,
) -> Result<karpenter_disruption::UnhealthyThreshold, String> {
    karpenter_disruption::UnhealthyThreshold::parse(input)
}

fn parse_fraction(input: &str) -> Result<f64, String> {
    match input.parse::<f64>() {
        Ok(value) if (0.0..1.0).contains(&value) => Ok(value),
        _ => Err(format!(
            "{input:?} is not allowed; allowed: a number >= 0 and < 1"
        )),
    }
}

fn parse_refresh_interval(input: &str) -> Result<Duration, String> {
    let value = parse_go_duration(input)?;
    if value < Duration::from_secs(60) {
        return Err(format!(
            "{input:?} is too short; allowed: a Go duration of at least 1m"
        ));
    }
    Ok(value)
}

fn parse_poll_interval(input: &str) -> Result<Duration, String> {
    let value = parse_go_duration(input)?;
    if value < Duration::from_secs(1) {
        return Err(format!(
            "{input:?} is too short; allowed: a Go duration of at least 1s"
        ));
    }
    Ok(value)
}

fn parse_optional_path(input: &str) -> Result<Option<PathBuf>, String> {
    Ok((!input.is_empty()).then(|| PathBuf::from(input)))
}

impl Settings {
    /// `SCHEDULER_CONFIG`'s default topology spread constraints (empty: none).
    pub fn default_spread_constraints(
        &self,
    ) -> &[k8s_openapi::api::core::v1::TopologySpreadConstraint] {
        self.scheduler_config
            .as_ref()
            .map(SchedulerConfig::default_constraints)
            .unwrap_or_default()
    }

    /// Parses `args` (the first item is the program name) over `env`
    /// (`NAME=value` pairs), without reading the process environment.
    pub fn parse_from<A, E, K, V>(args: A, env: E) -> Result<Self, SettingsError>
    where
        A: IntoIterator,
        A::Item: Into<OsString>,
        E: IntoIterator<Item = (K, V)>,
        K: AsRef<OsStr>,
        V: AsRef<OsStr>,
    {
        let env: HashMap<OsString, OsString> = env
            .into_iter()
            .map(|(k, v)| (k.as_ref().to_owned(), v.as_ref().to_owned()))
            .collect();
        let args: Vec<OsString> = args.into_iter().map(Into::into).collect();
        // Help is rendered from the full description, environment variables included (their
        // values hidden: they may be secrets); clap answers `--help` with a "help" error.
        if args.iter().skip(1).any(|a| a == "--help" || a == "-h") {
            let program = args
                .first()
                .cloned()
                .unwrap_or_else(|| OsString::from("karpenter"));
            return match Self::command().try_get_matches_from([program, OsString::from("--help")]) {
                Err(help) => Err(SettingsError::CommandLine(help)),
                Ok(matches) => Self::from_arg_matches(&matches).map_err(SettingsError::CommandLine),
            };
        }
        let described = Self::command();
        let names = setting_names(&described);

        // Environment values become flags placed before the real arguments;
        // `args_override_self` lets a real flag override them.
        let mut args = args.into_iter();
        let program = args.next().unwrap_or_else(|| OsString::from("karpenter"));
        let mut argv = vec![program];
        for name in &names {
            if let Some(value) = env.get(OsStr::new(&name.env)) {
                let mut flag = OsString::from(format!("{}=", name.flag));
                flag.push(value);
                argv.push(flag);
            }
        }
        argv.extend(args);

        // Strip clap's own env lookups: the environment is the one given.
        let command = described.mut_args(|arg| arg.env(None::<&'static str>));
        let matches = command
            .try_get_matches_from(argv)
            .map_err(|err| explain(err, &names))?;
        Self::from_arg_matches(&matches).map_err(|err| explain(err, &names))
    }

    /// Parses the process's arguments and environment.
    pub fn from_process() -> Result<Self, SettingsError> {
        Self::parse_from(std::env::args_os(), std::env::vars_os())
    }

    /// The clap command describing the settings (for `--help`).
    pub fn command() -> Command {
        Self::augment_args(Command::new("karpenter controller").args_override_self(true))
            .about(ABOUT)
            .long_about(None)
            .after_help(AFTER_HELP)
            .mut_args(|arg| arg.hide_env_values(true))
    }
}

#[derive(Debug)]
struct SettingName {
    flag: String,
    env: String,
}

fn setting_names(command: &Command) -> Vec<SettingName> {
    command
        .get_arguments()
        .filter_map(|arg| {
            Some(SettingName {
                flag: format!("--{}", arg.get_long()?),
                env: arg.get_env()?.to_string_lossy().into_owned(),
            })
        })
        .collect()
}

/// Turns clap's "invalid value" errors into one naming the flag and the env.
fn explain(err: clap::Error, names: &[SettingName]) -> SettingsError {
    if !matches!(
        err.kind(),
        ErrorKind::ValueValidation | ErrorKind::InvalidValue
    ) {
        return SettingsError::CommandLine(err);
    }
    let context_string = |kind| match err.get(kind) {
        Some(ContextValue::String(s)) => Some(s.clone()),
        _ => None,
    };
    let arg = context_string(ContextKind::InvalidArg).unwrap_or_default();
    let flag = arg.split([' ', '=', '[']).next().unwrap_or_default();
    let Some(name) = names.iter().find(|n| n.flag == flag) else {
        return SettingsError::CommandLine(err);
    };
    let value = context_string(ContextKind::InvalidValue).unwrap_or_default();
    let reason = std::error::Error::source(&err)
        .map(ToString::to_string)
        .unwrap_or_else(|| err.kind().to_string());
    SettingsError::InvalidValue {
        flag: name.flag.clone(),
        env: name.env.clone(),
        value,
        reason,
    }
}

#[cfg(test)]
mod tests;
