//! `karpenter iam`: the controller's least-privilege IAM (policy, CloudFormation template, audit).
//! The logic lives in `karpenter_aws::iam`; this module parses flags, reads files and prints.

use std::collections::BTreeSet;
use std::io::Read;
use std::process::ExitCode;

use anyhow::Context;
use clap::{Subcommand, ValueEnum};
use karpenter_aws::iam::audit::{self, AuditOptions, EXAMPLE_ACCOUNT};
use karpenter_aws::iam::contract::Feature;
use karpenter_aws::iam::eval::CompiledPolicy;
use karpenter_aws::iam::generate::{self, MANAGED_POLICY_LIMIT};
use karpenter_aws::iam::{PolicyDocument, Scope, cloudformation};

#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(subcommand)]
    command: IamCommand,
}

#[derive(Debug, Subcommand)]
enum IamCommand {
    /// Print the controller IAM policy (JSON), generated from the contract of AWS calls.
    Policy(PolicyArgs),
    /// Print the getting-started CloudFormation template (YAML): node role, controller
    /// policies, interruption queue and its EventBridge rules.
    Cloudformation(CloudFormationArgs),
    /// Check IAM policies against every AWS call the controller makes, and against requests it
    /// never makes. Exits 1 when a call is missing.
    Audit(AuditArgs),
}

#[derive(Debug, Clone, Copy, ValueEnum)]
enum PartitionArg {
    Aws,
    AwsCn,
    AwsUsGov,
}

impl From<PartitionArg> for karpenter_aws::iam::Partition {
    fn from(p: PartitionArg) -> Self {
        match p {
            PartitionArg::Aws => Self::Aws,
            PartitionArg::AwsCn => Self::AwsCn,
            PartitionArg::AwsUsGov => Self::AwsUsGov,
        }
    }
}

#[derive(Debug, clap::Args)]
struct ScopeArgs {
    /// EKS cluster name.
    #[arg(long)]
    cluster_name: String,
    /// AWS region of the cluster, e.g. us-west-2.
    #[arg(long)]
    region: String,
    /// AWS partition [default: the region's].
    #[arg(long, value_enum)]
    partition: Option<PartitionArg>,
    /// 12-digit account id for IAM, EKS and SQS ARNs [policy: `*`; audit: the one account the
    /// policy's ARNs name, else 111122223333].
    #[arg(long)]
    account_id: Option<String>,
    /// Interruption queue ARN (default: the queue named after the cluster).
    #[arg(long)]
    interruption_queue_arn: Option<String>,
    /// Node role ARN passed to instances (default: `KarpenterNodeRole-<cluster>`).
    #[arg(long)]
    node_role_arn: Option<String>,
}

impl ScopeArgs {
    /// The scope; `fallback_account` is used when `--account-id` is not given.
    fn scope(&self, fallback_account: Option<&str>) -> anyhow::Result<Scope> {
        let mut scope = Scope::new(
            &self.cluster_name,
            &self.region,
            self.partition.map(Into::into),
        )?;
        if let Some(account) = self.account_id.as_deref().or(fallback_account) {
            scope = scope.with_account(account)?;
        }
        if let Some(arn) = &self.interruption_queue_arn {
            scope = scope.with_interruption_queue_arn(arn)?;
        }
        if let Some(arn) = &self.node_role_arn {
            scope = scope.with_node_role_arn(arn)?;
        }
        Ok(scope)
    }
}

#[derive(Debug, clap::Args)]
struct PolicyArgs {
    #[command(flatten)]
    scope: ScopeArgs,
    /// Output format: the policy document (JSON), or a Terraform `aws_iam_policy_document`
    /// data block saying the same.
    #[arg(short = 'o', long, value_enum, default_value = "json")]
    output: PolicyFormat,
    /// Name of the Terraform data block.
    #[arg(long, default_value = "karpenter_controller")]
    terraform_name: String,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
enum PolicyFormat {
    Json,
    Terraform,
}

#[derive(Debug, clap::Args)]
struct CloudFormationArgs {
    /// Default value of the template's ClusterName parameter.
    #[arg(long)]
    cluster_name: Option<String>,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
enum OutputFormat {
    Text,
    Json,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
enum FeatureArg {
    Interruption,
    ZonalShift,
}

#[derive(Debug, clap::Args)]
struct AuditArgs {
    /// Policy document(s) attached to the controller's role (JSON; `-` for stdin). Repeat for
    /// several policies: they are evaluated together.
    #[arg(short = 'f', long = "file", required = true)]
    files: Vec<String>,
    #[command(flatten)]
    scope: ScopeArgs,
    /// Output format.
    #[arg(short = 'o', long, value_enum, default_value = "text")]
    output: OutputFormat,
    /// Features the controller runs without (their calls are not required).
    #[arg(long, value_enum, value_delimiter = ',')]
    without: Vec<FeatureArg>,
    /// Also exit 1 when a grant is over-broad.
    #[arg(long)]
    fail_on_over_broad: bool,
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    match args.command {
        IamCommand::Policy(a) => policy(a),
        IamCommand::Cloudformation(a) => cloudformation(a),
        IamCommand::Audit(a) => run_audit(a),
    }
}

fn policy(args: PolicyArgs) -> anyhow::Result<ExitCode> {
    let scope = args.scope.scope(None)?;
    let doc = generate::controller_policy(&scope);
    match args.output {
        PolicyFormat::Json => crate::cmd::out::println(&doc.to_string())?,
        PolicyFormat::Terraform => {
            crate::cmd::out::print(&karpenter_aws::iam::terraform::policy_document(
                &doc,
                &args.terraform_name,
            ))?;
        }
    }
    let size = generate::policy_size(&doc);
    if size > MANAGED_POLICY_LIMIT {
        eprintln!(
            "note: this policy is {size} characters; a customer managed policy holds at most \
             {MANAGED_POLICY_LIMIT}. Attach it as an inline role policy, or use \
             `karpenter iam cloudformation`, which splits it into managed policies."
        );
    }
    Ok(ExitCode::SUCCESS)
}

fn cloudformation(args: CloudFormationArgs) -> anyhow::Result<ExitCode> {
    if let Some(name) = &args.cluster_name {
        // Validate the name the same way the other subcommands do.
        Scope::new(name, "us-east-1", None)?;
    }
    let yaml = cloudformation::template_yaml(args.cluster_name.as_deref())?;
    crate::cmd::out::print(&yaml)?;
    Ok(ExitCode::SUCCESS)
}

fn read_policy(path: &str) -> anyhow::Result<PolicyDocument> {
    let text = if path == "-" {
        let mut s = String::new();
        std::io::stdin()
            .read_to_string(&mut s)
            .context("reading the policy from stdin")?;
        s
    } else {
        std::fs::read_to_string(path).with_context(|| format!("reading {path}"))?
    };
    let name = if path == "-" { "stdin" } else { path };
    PolicyDocument::parse(&text).with_context(|| format!("{name}: invalid IAM policy"))
}

fn run_audit(args: AuditArgs) -> anyhow::Result<ExitCode> {
    let mut policy = CompiledPolicy::default();
    for path in &args.files {
        let name = if path == "-" { "stdin" } else { path.as_str() };
        policy.add(name, &read_policy(path)?)?;
    }
    let inferred = audit::infer_account(&policy);
    let account = inferred.as_deref().unwrap_or(EXAMPLE_ACCOUNT);
    let scope = args.scope.scope(Some(account))?;
    let mut features: BTreeSet<Feature> = Feature::ALL.iter().copied().collect();
    for f in &args.without {
        features.remove(&match f {
            FeatureArg::Interruption => Feature::Interruption,
            FeatureArg::ZonalShift => Feature::ZonalShift,
        });
    }
    let report = audit::audit(&policy, &scope, &AuditOptions { features });
    match args.output {
        OutputFormat::Text => crate::cmd::out::print(&report.to_text())?,
        OutputFormat::Json => crate::cmd::out::println(
            &serde_json::to_string_pretty(&report).context("serializing the report")?,
        )?,
    }
    Ok(ExitCode::from(
        u8::try_from(report.exit_code(args.fail_on_over_broad)).unwrap_or(1),
    ))
}
