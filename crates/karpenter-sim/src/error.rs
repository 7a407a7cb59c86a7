//! Errors, named after the step that failed: loading manifests, or preparing and running the
//! simulation.

use std::fmt;
use std::path::PathBuf;

/// One problem with one object of one manifest file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    /// File name as given (or `<stdin>`).
    pub file: String,
    /// 1-based document index within the file; `None` for a problem with the whole file.
    pub document: Option<usize>,
    /// Line and column of the field (or the object) in the file, when known.
    pub position: Option<karpenter_api::yaml::Position>,
    /// `Kind/name` of the object, when known.
    pub object: Option<String>,
    /// Field path (`spec.template.spec.requirements[0].operator`), when known.
    pub field: Option<String>,
    pub message: String,
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.file)?;
        match (self.position, self.document) {
            (Some(position), _) => write!(f, ":{position}")?,
            (None, Some(document)) => write!(f, ": document {document}")?,
            (None, None) => {}
        }
        if let Some(object) = &self.object {
            write!(f, ": {object}")?;
        }
        if let Some(field) = self.field.as_deref().filter(|field| !field.is_empty()) {
            write!(f, ": {field}")?;
        }
        write!(f, ": {}", self.message)
    }
}

/// Every problem found while loading, one per line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problems(pub Vec<Problem>);

impl fmt::Display for Problems {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (index, problem) in self.0.iter().enumerate() {
            if index > 0 {
                writeln!(f)?;
            }
            write!(f, "{problem}")?;
        }
        Ok(())
    }
}

/// Reading manifests failed; nothing was simulated.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    #[error("reading {path}")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path}: no manifest files (*.yaml, *.yml, *.json) found")]
    NoManifests { path: PathBuf },
    #[error(
        "the workloads make {pods} pods, more than simulate's ceiling of {max} pods in one run"
    )]
    TooManyPods { pods: usize, max: usize },
    /// Malformed YAML, invalid Karpenter objects or objects that do not fit their kind.
    #[error("{0}")]
    Invalid(Problems),
}

/// Preparing or running the simulation failed.
#[derive(Debug, thiserror::Error)]
pub enum SimulateError {
    #[error("catalog options: {0}")]
    CatalogOptions(#[from] karpenter_cloud::OptionsError),
    #[error("the built-in default {what} does not parse: {message}")]
    Default { what: &'static str, message: String },
    #[error(transparent)]
    NodePool(#[from] karpenter_scheduling::v1::NodePoolConversionError),
    #[error(
        "--compare-nodegroup {instance_type}: no such instance type with a price in the catalog{hint}"
    )]
    UnknownInstanceType { instance_type: String, hint: String },
}

/// A timeline file could not be read or does not fit the simulated objects.
#[derive(Debug, thiserror::Error)]
pub enum TimelineError {
    #[error("reading {path}: {source}")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{file}: {message}")]
    Parse { file: String, message: String },
    #[error("{file}: events[{index}]: {message}")]
    Event {
        file: String,
        index: usize,
        message: String,
    },
    #[error(transparent)]
    Simulate(#[from] SimulateError),
}
