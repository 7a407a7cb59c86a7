//! Table tests for settings: defaults, precedence, and error wording.

use std::time::Duration;

use pretty_assertions::assert_eq;

use super::*;

const NO_ENV: [(&str, &str); 0] = [];

/// One row of a table: command-line arguments, environment, expected outcome.
type Row<'a, T> = (&'a [&'a str], &'a [(&'a str, &'a str)], T);

fn parse(args: &[&str], env: &[(&str, &str)]) -> Result<Settings, SettingsError> {
    let argv = std::iter::once("karpenter").chain(args.iter().copied());
    Settings::parse_from(argv, env.iter().copied())
}

#[test]
fn with_nothing_set_every_setting_has_its_upstream_default() {
    let settings = Settings::parse_from(["karpenter"], NO_ENV).expect("defaults parse");
    assert_eq!(
        settings,
        Settings {
            karpenter_service: String::new(),
            metrics_port: 8080,
            health_probe_port: 8081,
            kube_client_qps: 200,
            kube_client_burst: 300,
            enable_profiling: false,
            disable_controller_warmup: true,
            disable_leader_election: false,
            disable_cluster_state_observability: false,
            leader_election_name: "karpenter-leader-election".into(),
            leader_election_namespace: String::new(),
            memory_limit: -1,
            cpu_requests: 1000,
            log_level: LogLevel::Info,
            log_output_paths: LogPaths(vec![LogPath::Stdout]),
            log_error_output_paths: LogPaths(vec![LogPath::Stderr]),
            batch_max_duration: Duration::from_secs(10),
            batch_idle_duration: Duration::from_secs(1),
            preference_policy: PreferencePolicy::Respect,
            min_values_policy: MinValuesPolicy::Strict,
            ignore_dra_requests: true,
            legacy_node_repair: false,
            feature_gates: FeatureGates::default(),
            node_repair_unhealthy_threshold: karpenter_disruption::UnhealthyThreshold::default(),
            scheduler_config: None,
            cloud_provider: CloudProviderKind::Kwok,
            interruption_queue: None,
            cluster_name: String::new(),
            cluster_endpoint: None,
            cluster_ca_bundle: None,
            isolated_vpc: false,
            eks_control_plane: false,
            vm_memory_overhead_percent: 0.075,
            reserved_enis: 0,
            disable_dry_run: false,
            enable_zonal_shift: false,
            instance_status_interval: Duration::from_secs(60),
            ami_refresh_interval: Duration::from_secs(60),
            subnet_refresh_interval: Duration::from_secs(60),
            security_group_refresh_interval: Duration::from_secs(60),
            aws_feature_gates: AwsFeatureGates::default(),
            instance_types_file_path: None,
            registration_ttl: Duration::from_secs(15 * 60),
            zone_pinning: true,
        }
    );
}

#[test]
fn each_setting_is_read_from_its_environment_variable() {
    type Check = fn(&Settings) -> bool;
    let cases: &[(&str, &str, Check)] = &[
        ("KARPENTER_SERVICE", "karpenter", |s| {
            s.karpenter_service == "karpenter"
        }),
        ("METRICS_PORT", "9000", |s| s.metrics_port == 9000),
        ("INTERRUPTION_QUEUE", "demo", |s| {
            s.interruption_queue.as_deref() == Some("demo")
        }),
        ("HEALTH_PROBE_PORT", "9001", |s| s.health_probe_port == 9001),
        ("KUBE_CLIENT_QPS", "50", |s| s.kube_client_qps == 50),
        ("KUBE_CLIENT_BURST", "60", |s| s.kube_client_burst == 60),
        ("ENABLE_PROFILING", "true", |s| s.enable_profiling),
        ("DISABLE_CONTROLLER_WARMUP", "false", |s| {
            !s.disable_controller_warmup
        }),
        ("DISABLE_LEADER_ELECTION", "1", |s| {
            s.disable_leader_election
        }),
        ("DISABLE_CLUSTER_STATE_OBSERVABILITY", "True", |s| {
            s.disable_cluster_state_observability
        }),
        ("LEADER_ELECTION_NAME", "other", |s| {
            s.leader_election_name == "other"
        }),
        ("LEADER_ELECTION_NAMESPACE", "karpenter", |s| {
            s.leader_election_namespace == "karpenter"
        }),
        ("MEMORY_LIMIT", "1073741824", |s| {
            s.memory_limit == 1_073_741_824
        }),
        ("CPU_REQUESTS", "-5", |s| s.cpu_requests == -5),
        ("LOG_LEVEL", "debug", |s| s.log_level == LogLevel::Debug),
        ("LOG_OUTPUT_PATHS", "stdout,/tmp/a", |s| {
            s.log_output_paths == LogPaths(vec![LogPath::Stdout, LogPath::File("/tmp/a".into())])
        }),
        ("LOG_ERROR_OUTPUT_PATHS", "/tmp/b", |s| {
            s.log_error_output_paths == LogPaths(vec![LogPath::File("/tmp/b".into())])
        }),
        ("BATCH_MAX_DURATION", "1m30s", |s| {
            s.batch_max_duration == Duration::from_secs(90)
        }),
        ("BATCH_IDLE_DURATION", "500ms", |s| {
            s.batch_idle_duration == Duration::from_millis(500)
        }),
        ("PREFERENCE_POLICY", "Ignore", |s| {
            s.preference_policy == PreferencePolicy::Ignore
        }),
        ("MIN_VALUES_POLICY", "BestEffort", |s| {
            s.min_values_policy == MinValuesPolicy::BestEffort
        }),
        ("IGNORE_DRA_REQUESTS", "false", |s| !s.ignore_dra_requests),
        ("LEGACY_NODE_REPAIR", "true", |s| s.legacy_node_repair),
        ("FEATURE_GATES", "NodeRepair=true", |s| {
            s.feature_gates.node_repair
        }),
        (
            "SCHEDULER_CONFIG",
            "podTopologySpread: {defaultConstraints: [{maxSkew: 1, topologyKey: topology.kubernetes.io/zone, whenUnsatisfiable: ScheduleAnyway}]}",
            |s| {
                s.scheduler_config
                    .as_ref()
                    .is_some_and(|c| c.default_constraints().len() == 1)
            },
        ),
        ("CLOUD_PROVIDER", "aws", |s| {
            s.cloud_provider == CloudProviderKind::Aws
        }),
        ("INSTANCE_TYPES_FILE_PATH", "/it.json", |s| {
            s.instance_types_file_path == Some("/it.json".into())
        }),
        ("REGISTRATION_TTL", "30s", |s| {
            s.registration_ttl == Duration::from_secs(30)
        }),
        ("ZONE_PINNING", "false", |s| !s.zone_pinning),
        ("CLUSTER_NAME", "demo", |s| s.cluster_name == "demo"),
        (
            "CLUSTER_ENDPOINT",
            "https://ABC.gr7.us-west-2.eks.amazonaws.com",
            |s| {
                s.cluster_endpoint.as_deref() == Some("https://ABC.gr7.us-west-2.eks.amazonaws.com")
            },
        ),
        ("CLUSTER_CA_BUNDLE", "Q0E=", |s| {
            s.cluster_ca_bundle.as_deref() == Some("Q0E=")
        }),
        ("ISOLATED_VPC", "true", |s| s.isolated_vpc),
        ("EKS_CONTROL_PLANE", "true", |s| s.eks_control_plane),
        ("VM_MEMORY_OVERHEAD_PERCENT", "0.1", |s| {
            (s.vm_memory_overhead_percent - 0.1).abs() < 1e-9
        }),
        ("RESERVED_ENIS", "1", |s| s.reserved_enis == 1),
        ("DISABLE_DRY_RUN", "true", |s| s.disable_dry_run),
        ("ENABLE_ZONAL_SHIFT", "true", |s| s.enable_zonal_shift),
        ("INSTANCE_STATUS_INTERVAL", "10s", |s| {
            s.instance_status_interval == Duration::from_secs(10)
        }),
        ("AMI_REFRESH_INTERVAL", "5m", |s| {
            s.ami_refresh_interval == Duration::from_secs(300)
        }),
        ("SUBNET_REFRESH_INTERVAL", "2m", |s| {
            s.subnet_refresh_interval == Duration::from_secs(120)
        }),
        ("SECURITY_GROUP_REFRESH_INTERVAL", "3m", |s| {
            s.security_group_refresh_interval == Duration::from_secs(180)
        }),
        ("AWS_FEATURE_GATES", "NodeClassCEL=true", |s| {
            s.aws_feature_gates.node_class_cel
        }),
        ("NODE_REPAIR_UNHEALTHY_THRESHOLD", "40%", |s| {
            s.node_repair_unhealthy_threshold.as_str() == "40%"
        }),
    ];
    for (env, value, check) in cases {
        let settings = parse(&[], &[(env, value)]).unwrap_or_else(|e| panic!("{env}={value}: {e}"));
        assert!(
            check(&settings),
            "{env}={value} was not applied: {settings:?}"
        );
    }
    assert_eq!(
        cases.len(),
        setting_names(&Settings::command()).len(),
        "every setting has a row"
    );
}

#[test]
fn a_flag_beats_its_environment_variable_which_beats_the_default() {
    let cases: &[Row<u16>] = &[
        (&[], &[], 8080),
        (&[], &[("METRICS_PORT", "9000")], 9000),
        (
            &["--metrics-port", "9100"],
            &[("METRICS_PORT", "9000")],
            9100,
        ),
        (&["--metrics-port=9200"], &[], 9200),
        (&["--metrics-port=1", "--metrics-port=2"], &[], 2),
    ];
    for (args, env, expected) in cases {
        let settings = parse(args, env).expect("valid");
        assert_eq!(settings.metrics_port, *expected, "{args:?} {env:?}");
    }
}

#[test]
fn boolean_flags_work_bare_or_with_an_explicit_value_like_go_flags() {
    let cases: &[Row<bool>] = &[
        (&["--disable-leader-election"], &[], true),
        (&["--disable-leader-election=true"], &[], true),
        (
            &["--disable-leader-election=false"],
            &[("DISABLE_LEADER_ELECTION", "true")],
            false,
        ),
        (
            &["--disable-leader-election"],
            &[("DISABLE_LEADER_ELECTION", "false")],
            true,
        ),
    ];
    for (args, env, expected) in cases {
        let settings = parse(args, env).expect("valid");
        assert_eq!(
            settings.disable_leader_election, *expected,
            "{args:?} {env:?}"
        );
    }
}

#[test]
fn a_bad_value_names_the_flag_the_env_and_what_is_allowed() {
    let cases: &[Row<&str>] = &[
        (
            &[],
            &[("LOG_LEVEL", "warn")],
            r#"invalid value "warn" for --log-level (env LOG_LEVEL): "warn" is not allowed; allowed: debug, info, error"#,
        ),
        (
            &["--log-level=trace"],
            &[],
            "for --log-level (env LOG_LEVEL)",
        ),
        (
            &[],
            &[("PREFERENCE_POLICY", "respect")],
            "for --preference-policy (env PREFERENCE_POLICY): \"respect\" is not allowed; allowed: Respect, Ignore",
        ),
        (
            &[],
            &[("MIN_VALUES_POLICY", "Lax")],
            "allowed: Strict, BestEffort",
        ),
        (
            &[],
            &[("BATCH_MAX_DURATION", "10")],
            "for --batch-max-duration (env BATCH_MAX_DURATION): invalid duration \"10\": missing unit",
        ),
        (
            &[],
            &[("BATCH_IDLE_DURATION", "-1s")],
            "negative durations are not allowed",
        ),
        (
            &[],
            &[("FEATURE_GATES", "Drift=true")],
            "for --feature-gates (env FEATURE_GATES): unknown feature gate \"Drift\"; known feature gates: NodeRepair",
        ),
        (
            &[],
            &[("FEATURE_GATES", "NodeRepair=maybe")],
            "feature gate NodeRepair: \"maybe\" is not a boolean; allowed: true, false",
        ),
        (
            &[],
            &[("DISABLE_LEADER_ELECTION", "yes")],
            "for --disable-leader-election (env DISABLE_LEADER_ELECTION): \"yes\" is not a boolean",
        ),
        (
            &[],
            &[("METRICS_PORT", "http")],
            "for --metrics-port (env METRICS_PORT)",
        ),
        (
            &[],
            &[("KUBE_CLIENT_QPS", "0")],
            "for --kube-client-qps (env KUBE_CLIENT_QPS): \"0\" is not allowed; allowed: a whole number >= 1",
        ),
        (&[], &[("CLOUD_PROVIDER", "gcp")], "allowed: kwok, aws"),
        (
            &[],
            &[("LEADER_ELECTION_NAME", "")],
            "for --leader-election-name (env LEADER_ELECTION_NAME): empty",
        ),
        (
            &[],
            &[("REGISTRATION_TTL", "soon")],
            "for --registration-ttl (env REGISTRATION_TTL)",
        ),
        (
            &[],
            &[("CLUSTER_ENDPOINT", "ABC.eks.amazonaws.com")],
            "for --cluster-endpoint (env CLUSTER_ENDPOINT): not an absolute URL",
        ),
        (
            &[],
            &[("VM_MEMORY_OVERHEAD_PERCENT", "7.5")],
            "allowed: a number >= 0 and < 1",
        ),
        (
            &[],
            &[("AMI_REFRESH_INTERVAL", "30s")],
            "for --ami-refresh-interval (env AMI_REFRESH_INTERVAL): \"30s\" is too short",
        ),
        (
            &[],
            &[("SECURITY_GROUP_REFRESH_INTERVAL", "59s")],
            "for --security-group-refresh-interval (env SECURITY_GROUP_REFRESH_INTERVAL): \"59s\" is too short",
        ),
        (
            &[],
            &[("AWS_FEATURE_GATES", "Turbo=true")],
            "unknown AWS feature gate \"Turbo\"",
        ),
        (
            &[],
            &[("RESERVED_ENIS", "-1")],
            "for --reserved-enis (env RESERVED_ENIS)",
        ),
        (
            &[],
            &[("LOG_OUTPUT_PATHS", "http://logs")],
            "for --log-output-paths (env LOG_OUTPUT_PATHS): \"http://logs\": no log sink for the URL scheme \"http\"",
        ),
        (
            &["--log-error-output-paths="],
            &[],
            "for --log-error-output-paths (env LOG_ERROR_OUTPUT_PATHS): an empty path",
        ),
    ];
    for (args, env, expected) in cases {
        let err = parse(args, env).expect_err("invalid");
        assert!(
            matches!(err, SettingsError::InvalidValue { .. }),
            "{args:?} {env:?}: {err:?}"
        );
        let message = err.to_string();
        assert!(
            message.contains(expected),
            "{args:?} {env:?}:\n  got  {message}\n  want {expected}"
        );
    }
}

#[test]
fn an_unknown_flag_is_a_command_line_error() {
    let err = parse(&["--no-such-flag"], &[]).expect_err("unknown flag");
    assert!(matches!(err, SettingsError::CommandLine(_)), "{err:?}");
}

#[test]
fn unrelated_environment_variables_are_ignored() {
    let settings = parse(&[], &[("PATH", "/bin"), ("HOME", "/root")]).expect("valid");
    assert_eq!(settings.metrics_port, 8080);
}

#[test]
fn upstreams_default_settings_start() {
    let settings = parse(&[], &[]).expect("defaults parse");
    assert_eq!(settings.refusals(), []);
    assert_eq!(settings.validate(), Ok(()));
}

#[test]
fn upstream_v1_15_charts_rendered_defaults_parse_and_start() {
    // The environment upstream's chart (aws/karpenter-provider-aws v1.15.1) renders with its
    // default values, less what the cluster fills in (names, ports, resource fields).
    let env = [
        ("LOG_LEVEL", "info"),
        ("LOG_OUTPUT_PATHS", "stdout"),
        ("LOG_ERROR_OUTPUT_PATHS", "stderr"),
        ("CPU_REQUESTS", "1000"),
        ("MEMORY_LIMIT", "1073741824"),
        (
            "FEATURE_GATES",
            "ReservedCapacity=true,SpotToSpotConsolidation=false,NodeRepair=false,NodeOverlay=false,StaticCapacity=false,CapacityBuffer=false,TerminateFirstDrift=false,TerminateFirstRepair=false,PodDeletionCostManagement=false",
        ),
        (
            "AWS_FEATURE_GATES",
            "NodeClassCEL=false,DRANVIDIAGPU=false,DRAEFA=false,RebootForRepair=false",
        ),
        ("BATCH_MAX_DURATION", "10s"),
        ("BATCH_IDLE_DURATION", "1s"),
        ("PREFERENCE_POLICY", "Respect"),
        ("MIN_VALUES_POLICY", "Strict"),
        ("CLUSTER_NAME", "demo"),
        ("VM_MEMORY_OVERHEAD_PERCENT", "0.075"),
        ("RESERVED_ENIS", "0"),
        ("AMI_REFRESH_INTERVAL", "1m"),
        ("SUBNET_REFRESH_INTERVAL", "1m"),
        ("SECURITY_GROUP_REFRESH_INTERVAL", "1m"),
    ];
    let settings = parse(&[], &env).expect("upstream's rendered defaults parse");
    assert_eq!(settings.feature_gates, FeatureGates::default());
    assert_eq!(settings.validate(), Ok(()));
}

#[test]
fn each_unimplemented_feature_is_refused_naming_the_setting_the_value_and_why() {
    let cases: &[(&str, &str, &str)] = &[
        (
            "IGNORE_DRA_REQUESTS",
            "false",
            "IGNORE_DRA_REQUESTS=false (--ignore-dra-requests): simulating dynamic resource allocation (DRA) is not implemented yet",
        ),
        (
            "LEGACY_NODE_REPAIR",
            "true",
            "LEGACY_NODE_REPAIR=true (--legacy-node-repair): the legacy node repair controller is not implemented",
        ),
        (
            "ENABLE_PROFILING",
            "true",
            "ENABLE_PROFILING=true (--enable-profiling): karpenter-rs serves no Go pprof endpoints; unset it",
        ),
        (
            "AWS_FEATURE_GATES",
            "NodeClassCEL=true",
            "NodeClassCEL=true in AWS_FEATURE_GATES (--aws-feature-gates): CEL expressions",
        ),
        (
            "AWS_FEATURE_GATES",
            "DRANVIDIAGPU=true",
            "DRANVIDIAGPU=true in AWS_FEATURE_GATES (--aws-feature-gates): dynamic resource allocation",
        ),
        (
            "AWS_FEATURE_GATES",
            "DRAEFA=true",
            "DRAEFA=true in AWS_FEATURE_GATES (--aws-feature-gates): dynamic resource allocation",
        ),
    ];
    for (env, value, expected) in cases {
        let settings = parse(&[], &[(env, value)]).unwrap_or_else(|e| panic!("{env}={value}: {e}"));
        let err = settings
            .validate()
            .expect_err(&format!("{env}={value} is refused"));
        assert_eq!(err.0.len(), 1, "{env}={value}: {err}");
        assert_eq!(
            err.to_string(),
            format!("refusing to start: {}", err.0[0]),
            "{env}={value}"
        );
        assert!(
            err.to_string().contains(expected),
            "{env}={value}:\n  got  {err}\n  want {expected}"
        );
    }
}

#[test]
fn the_feature_gates_karpenter_rs_implements_or_accepts_are_not_refused_either_way() {
    for value in [
        "SpotToSpotConsolidation=true",
        "SpotToSpotConsolidation=false",
        "ReservedCapacity=true",
        "ReservedCapacity=false",
        "PodDeletionCostManagement=true",
        "PodDeletionCostManagement=false",
        "NodeRepair=true",
        "NodeRepair=false",
        "StaticCapacity=true",
        "StaticCapacity=false",
        "NodeOverlay=true",
        "NodeOverlay=false",
        "CapacityBuffer=true",
        "CapacityBuffer=false",
    ] {
        let settings = parse(&[], &[("FEATURE_GATES", value)]).expect(value);
        assert_eq!(settings.validate(), Ok(()), "{value}");
    }
    for (env, value) in [
        ("DISABLE_DRY_RUN", "true"),
        ("ENABLE_ZONAL_SHIFT", "true"),
        ("EKS_CONTROL_PLANE", "true"),
        ("DISABLE_CONTROLLER_WARMUP", "false"),
        ("DISABLE_CLUSTER_STATE_OBSERVABILITY", "true"),
        ("MEMORY_LIMIT", "536870912"),
        ("CPU_REQUESTS", "4000"),
    ] {
        let settings = parse(&[], &[(env, value)]).expect(value);
        assert_eq!(settings.validate(), Ok(()), "{env}={value}");
    }
}

#[test]
fn every_refused_value_is_listed_at_once_one_per_line() {
    let settings = parse(
        &["--enable-profiling"],
        &[
            (
                "FEATURE_GATES",
                "NodeRepair=true,NodeOverlay=true,StaticCapacity=true,CapacityBuffer=true,TerminateFirstDrift=true,TerminateFirstRepair=true",
            ),
            ("AWS_FEATURE_GATES", "DRAEFA=true"),
            ("EKS_CONTROL_PLANE", "true"),
            ("LEGACY_NODE_REPAIR", "true"),
        ],
    )
    .expect("valid");
    let err = settings.validate().expect_err("refused");
    let settings_named: Vec<String> = err
        .0
        .iter()
        .map(|r| r.gate.unwrap_or(r.env).to_string())
        .collect();
    assert_eq!(
        settings_named,
        ["LEGACY_NODE_REPAIR", "ENABLE_PROFILING", "DRAEFA"]
    );
    let message = err.to_string();
    assert!(
        message.starts_with(
            "refusing to start: 3 settings ask for what karpenter-rs does not do:\n  - LEGACY_NODE_REPAIR=true"
        ),
        "{message}"
    );
    assert_eq!(message.lines().count(), 4, "{message}");
}

#[test]
fn the_node_repair_threshold_is_upstreams_20_percent_by_default_and_settable() {
    let settings = parse(&[], &[]).expect("defaults");
    assert_eq!(settings.node_repair_unhealthy_threshold.as_str(), "20%");
    let settings = parse(&["--node-repair-unhealthy-threshold=35%"], &[]).expect("a percentage");
    assert_eq!(settings.node_repair_unhealthy_threshold.as_str(), "35%");
    let settings = parse(&[], &[("NODE_REPAIR_UNHEALTHY_THRESHOLD", "3")]).expect("a count");
    assert_eq!(settings.node_repair_unhealthy_threshold.limit(100), 3);
    let err = parse(&[], &[("NODE_REPAIR_UNHEALTHY_THRESHOLD", "half")])
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default();
    assert!(err.contains("NODE_REPAIR_UNHEALTHY_THRESHOLD"), "{err}");
}

#[test]
fn reboot_for_repair_is_accepted_and_reaches_the_settings() {
    let settings = parse(&[], &[("AWS_FEATURE_GATES", "RebootForRepair=true")])
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(settings.aws_feature_gates.reboot_for_repair);
    assert!(settings.validate().is_ok(), "RebootForRepair=true starts");
}
