//! Loading ordinary manifests into typed objects: files and directories of multi-document YAML
//! (or JSON), sorted by kind.
//!
//! NodePools and EC2NodeClasses are validated with the `karpenter validate` rules and fail the
//! load with the same errors (file, document, object, field). Other kinds are typed with their
//! Kubernetes types; one that does not fit fails the load naming the field. Every problem of
//! every file is reported, and nothing is simulated when there is any. Kinds neither
//! `simulate` nor `explain -f` uses (Services, ConfigMaps, ...) are listed as ignored;
//! NodeClaims and PodDisruptionBudgets are loaded for `explain -f` (which reads the manifests
//! as the cluster's objects) and noted as not simulated by `simulate`.

use std::cell::OnceCell;
use std::collections::HashMap;
use std::path::{Path, PathBuf};

use k8s_openapi::api::apps::v1::{DaemonSet, Deployment, ReplicaSet, StatefulSet};
use k8s_openapi::api::batch::v1::{CronJob, Job};
use k8s_openapi::api::core::v1::{Namespace, Node, PersistentVolume, PersistentVolumeClaim, Pod};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::api::storage::v1::StorageClass;
use karpenter_api::v1::{EC2NodeClass, NodeClaim, NodePool};
use karpenter_api::validation::{
    DocumentIdentity, Outcome, TypeMeta, check_type_meta, validate_document,
};
use karpenter_api::yaml::{Position, SourceMap};
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::error::{LoadError, Problem, Problems};
use crate::limits;
use crate::workload::Workload;

/// An object the simulator does not use, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Ignored {
    pub file: String,
    pub document: usize,
    /// Line and column of the object in the file.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub position: Option<Position>,
    /// `apiVersion kind/name`.
    pub object: String,
    pub reason: String,
}

/// Everything read from the manifests, by kind.
#[derive(Debug, Clone, Default)]
pub struct Manifests {
    pub node_pools: Vec<NodePool>,
    pub node_classes: Vec<EC2NodeClass>,
    /// `karpenter.sh/v1alpha1` NodeOverlays (applied as the controller does with the
    /// `NodeOverlay` gate).
    pub node_overlays: Vec<karpenter_api::v1alpha1::NodeOverlay>,
    /// Deployments, StatefulSets, ReplicaSets, Jobs, CronJobs and bare Pods, in file order.
    pub workloads: Vec<Workload>,
    pub daemonsets: Vec<DaemonSet>,
    pub persistent_volume_claims: Vec<PersistentVolumeClaim>,
    pub persistent_volumes: Vec<PersistentVolume>,
    pub storage_classes: Vec<StorageClass>,
    pub namespaces: Vec<Namespace>,
    /// Existing nodes (optional): pods with `spec.nodeName` naming one are bound to it.
    pub nodes: Vec<Node>,
    /// NodeClaims (`explain -f`: the nodes Karpenter owns; `simulate` does not use them).
    pub node_claims: Vec<NodeClaim>,
    /// PodDisruptionBudgets (`explain -f`; `simulate` does not use them).
    pub pod_disruption_budgets: Vec<PodDisruptionBudget>,
    pub ignored: Vec<Ignored>,
}

impl Manifests {
    /// Loads files and directories (directories recursively: `*.yaml`, `*.yml`, `*.json`, in
    /// name order).
    pub fn load_paths(paths: &[PathBuf]) -> Result<Self, LoadError> {
        let texts = read_manifest_files(paths)?;
        Self::load_texts(
            texts
                .iter()
                .map(|(name, text)| (name.as_str(), text.as_str())),
        )
    }

    /// Loads `(file name, text)` pairs; all problems of all files are reported together.
    pub fn load_texts<'a>(
        texts: impl IntoIterator<Item = (&'a str, &'a str)>,
    ) -> Result<Self, LoadError> {
        let sources: Vec<Source<'a>> = texts
            .into_iter()
            .map(|(file, text)| Source {
                file,
                text,
                map: OnceCell::new(),
            })
            .collect();
        let mut manifests = Manifests::default();
        let mut problems = Vec::new();
        let mut seen = Seen::default();
        for source in &sources {
            manifests.add_text(source, &mut seen, &mut problems);
        }
        if problems.is_empty()
            && let Some(error) = limits::total_pods(&manifests.workloads)
        {
            return Err(error);
        }
        if problems.is_empty() {
            Ok(manifests)
        } else {
            Err(LoadError::Invalid(Problems(problems)))
        }
    }

    /// Loads one text.
    pub fn load_text(file: &str, text: &str) -> Result<Self, LoadError> {
        Self::load_texts([(file, text)])
    }

    fn add_text<'a>(
        &mut self,
        source: &'a Source<'a>,
        seen: &mut Seen<'a>,
        problems: &mut Vec<Problem>,
    ) {
        let docs = match karpenter_api::yaml::parse_documents(source.text) {
            Ok(docs) => docs,
            Err(err) => {
                problems.push(Problem {
                    file: source.file.to_string(),
                    document: None,
                    position: err
                        .line
                        .map(|line| Position::new(line, err.column.unwrap_or(1))),
                    object: None,
                    field: None,
                    message: format!("invalid YAML: {}", err.message),
                });
                return;
            }
        };
        for (index, doc) in docs.iter().enumerate() {
            let at = At {
                source,
                document: index,
                prefix: String::new(),
                id: DocumentIdentity::of(doc),
            };
            if let Err(problem) = self.add_document(&at, doc, seen, problems) {
                problems.push(*problem);
            }
        }
    }

    fn add_document<'a>(
        &mut self,
        at: &At<'a>,
        doc: &serde_json::Value,
        seen: &mut Seen<'a>,
        problems: &mut Vec<Problem>,
    ) -> Result<(), Box<Problem>> {
        let id = &at.id;
        if let TypeMeta::Wrong { field, message } = check_type_meta(&id.api_version, &id.kind) {
            return Err(Box::new(at.field_problem(field, message)));
        }
        if !id.kind.ends_with("List") {
            if let Some(problem) = seen.check(at, doc) {
                problems.push(problem);
                return Ok(());
            }
            let before = problems.len();
            problems.extend(
                limits::check(doc)
                    .into_iter()
                    .map(|(field, message)| at.field_problem(&field, message)),
            );
            if problems.len() > before {
                return Ok(());
            }
        }
        match (id.api_version.as_str(), id.kind.as_str()) {
            ("karpenter.sh/v1", "NodePool" | "NodeClaim")
            | ("karpenter.k8s.aws/v1", "EC2NodeClass") => {
                if let Outcome::Invalid(errors) = validate_document(doc) {
                    problems.extend(
                        errors
                            .into_iter()
                            .map(|error| at.field_problem(&error.path, error.message)),
                    );
                    return Ok(());
                }
                match id.kind.as_str() {
                    "NodePool" => self.node_pools.push(at.typed(doc)?),
                    "NodeClaim" => self.node_claims.push(at.typed(doc)?),
                    _ => self.node_classes.push(at.typed(doc)?),
                }
            }
            ("karpenter.sh/v1alpha1", "NodeOverlay") => {
                if let Outcome::Invalid(errors) = validate_document(doc) {
                    problems.extend(
                        errors
                            .into_iter()
                            .map(|error| at.field_problem(&error.path, error.message)),
                    );
                    return Ok(());
                }
                self.node_overlays.push(at.typed(doc)?);
            }
            ("apps/v1", "Deployment") => {
                self.workloads
                    .push(Workload::Deployment(Box::new(at.typed::<Deployment>(doc)?)));
            }
            ("apps/v1", "StatefulSet") => {
                self.workloads.push(Workload::StatefulSet(Box::new(
                    at.typed::<StatefulSet>(doc)?,
                )));
            }
            ("apps/v1", "ReplicaSet") => {
                self.workloads
                    .push(Workload::ReplicaSet(Box::new(at.typed::<ReplicaSet>(doc)?)));
            }
            ("apps/v1", "DaemonSet") => self.daemonsets.push(at.typed(doc)?),
            ("batch/v1", "Job") => self
                .workloads
                .push(Workload::Job(Box::new(at.typed::<Job>(doc)?))),
            ("batch/v1", "CronJob") => {
                self.workloads
                    .push(Workload::CronJob(Box::new(at.typed::<CronJob>(doc)?)));
            }
            ("v1", "Pod") => self
                .workloads
                .push(Workload::Pod(Box::new(at.typed::<Pod>(doc)?))),
            ("v1", "PersistentVolumeClaim") => {
                self.persistent_volume_claims.push(at.typed(doc)?);
            }
            ("v1", "PersistentVolume") => self.persistent_volumes.push(at.typed(doc)?),
            ("v1", "Namespace") => self.namespaces.push(at.typed(doc)?),
            ("v1", "Node") => self.nodes.push(at.typed(doc)?),
            ("policy/v1", "PodDisruptionBudget") => {
                self.pod_disruption_budgets.push(at.typed(doc)?);
            }
            ("storage.k8s.io/v1", "StorageClass") => self.storage_classes.push(at.typed(doc)?),
            (_, kind)
                if kind.ends_with("List") && doc.get("items").is_some_and(|i| i.is_array()) =>
            {
                let items = doc
                    .get("items")
                    .and_then(serde_json::Value::as_array)
                    .map(Vec::as_slice)
                    .unwrap_or_default();
                for (i, item) in items.iter().enumerate() {
                    let inner = At {
                        source: at.source,
                        document: at.document,
                        prefix: format!("{}items[{i}].", at.prefix),
                        id: DocumentIdentity::of(item),
                    };
                    if let Err(problem) = self.add_document(&inner, item, seen, problems) {
                        problems.push(*problem);
                    }
                }
            }
            (api_version, kind) => self.ignored.push(Ignored {
                file: at.source.file.to_string(),
                document: at.document + 1,
                position: at.position(""),
                object: at.describe(),
                reason: ignore_reason(api_version, kind),
            }),
        }
        Ok(())
    }
}

/// Reads files and directories (directories recursively: `*.yaml`, `*.yml`, `*.json`, in name
/// order, timeline files excluded) into `(file name, text)` pairs.
pub fn read_manifest_files(paths: &[PathBuf]) -> Result<Vec<(String, String)>, LoadError> {
    manifest_paths(paths)?
        .into_iter()
        .map(|file| {
            std::fs::read_to_string(&file)
                .map(|text| (file.display().to_string(), text))
                .map_err(|source| LoadError::Read { path: file, source })
        })
        .collect()
}

/// The manifest files named by files and directories (directories recursively: `*.yaml`,
/// `*.yml`, `*.json`, in name order, timeline files excluded); a directory without any is an
/// error.
pub fn manifest_paths(paths: &[PathBuf]) -> Result<Vec<PathBuf>, LoadError> {
    let mut files = Vec::new();
    for path in paths {
        collect_files(path, &mut files)?;
    }
    Ok(files)
}

fn ignore_reason(api_version: &str, kind: &str) -> String {
    if api_version.is_empty() || kind.is_empty() {
        return "not a Kubernetes object (apiVersion and kind are required)".to_string();
    }
    match check_type_meta(api_version, kind) {
        TypeMeta::Legacy(reason) => reason,
        _ => "kind not used by the simulation".to_string(),
    }
}

/// One input file; its source map (positions of values) is read only when a message needs it.
struct Source<'a> {
    file: &'a str,
    text: &'a str,
    map: OnceCell<SourceMap>,
}

impl Source<'_> {
    fn map(&self) -> &SourceMap {
        self.map.get_or_init(|| SourceMap::new(self.text))
    }
}

/// The objects loaded so far by kind, namespace and name, to refuse a second object of the
/// same name (eleven NodePools called `default` from a folder of examples).
#[derive(Default)]
struct Seen<'a> {
    objects: HashMap<(String, String, String), (&'a Source<'a>, usize, String)>,
}

impl<'a> Seen<'a> {
    /// A problem when an object of this kind and name was loaded before.
    fn check(&mut self, at: &At<'a>, doc: &serde_json::Value) -> Option<Problem> {
        let id = &at.id;
        if id.name.is_empty() || !USED_KINDS.contains(&id.kind.as_str()) {
            return None;
        }
        let namespace = if CLUSTER_SCOPED.contains(&id.kind.as_str()) {
            String::new()
        } else {
            doc.pointer("/metadata/namespace")
                .and_then(serde_json::Value::as_str)
                .unwrap_or("default")
                .to_string()
        };
        let key = (id.kind.clone(), namespace, id.name.clone());
        match self.objects.get(&key) {
            Some((source, document, prefix)) => {
                let first = At {
                    source,
                    document: *document,
                    prefix: prefix.clone(),
                    id: id.clone(),
                };
                Some(at.problem(format!(
                    "defined twice: first at {}; names must be unique (rename one, or give \
                     only one of the files)",
                    first.location()
                )))
            }
            None => {
                self.objects
                    .insert(key, (at.source, at.document, at.prefix.clone()));
                None
            }
        }
    }
}

/// Kinds the simulation uses (and whose names must be unique).
const USED_KINDS: &[&str] = &[
    "NodePool",
    "EC2NodeClass",
    "NodeOverlay",
    "Deployment",
    "StatefulSet",
    "ReplicaSet",
    "DaemonSet",
    "Job",
    "CronJob",
    "Pod",
    "PersistentVolumeClaim",
    "PersistentVolume",
    "StorageClass",
    "Namespace",
    "Node",
    "NodeClaim",
    "PodDisruptionBudget",
];

const CLUSTER_SCOPED: &[&str] = &[
    "NodePool",
    "EC2NodeClass",
    "NodeOverlay",
    "PersistentVolume",
    "StorageClass",
    "Namespace",
    "Node",
    "NodeClaim",
];

/// Where a document (or a `List` item) is, for problems and typed parsing.
struct At<'a> {
    source: &'a Source<'a>,
    /// 0-based index of the non-empty document.
    document: usize,
    /// `items[3].` for an item of a `List`, empty otherwise.
    prefix: String,
    id: DocumentIdentity,
}

impl At<'_> {
    fn describe(&self) -> String {
        let kind = if self.id.kind.is_empty() {
            "<no kind>"
        } else {
            self.id.kind.as_str()
        };
        if self.id.name.is_empty() {
            kind.to_string()
        } else {
            format!("{kind}/{}", self.id.name)
        }
    }

    /// The position of a field of the object (its deepest existing parent when missing).
    fn position(&self, field: &str) -> Option<Position> {
        self.source
            .map()
            .locate(self.document, &format!("{}{field}", self.prefix))
    }

    /// `file:line:column` of the object.
    fn location(&self) -> String {
        match self.position("") {
            Some(position) => format!("{}:{position}", self.source.file),
            None => format!("{}: document {}", self.source.file, self.document + 1),
        }
    }

    fn problem(&self, message: impl Into<String>) -> Problem {
        Problem {
            file: self.source.file.to_string(),
            document: Some(self.document + 1),
            position: self.position(""),
            object: Some(self.describe()),
            field: None,
            message: message.into(),
        }
    }

    fn field_problem(&self, field: &str, message: impl Into<String>) -> Problem {
        Problem {
            position: self.position(field),
            field: Some(field.to_string()),
            ..self.problem(message)
        }
    }

    fn typed<T: DeserializeOwned>(&self, doc: &serde_json::Value) -> Result<T, Box<Problem>> {
        karpenter_api::yaml::from_value(doc)
            .map_err(|error| Box::new(self.field_problem(&error.path, error.message)))
    }
}

fn collect_files(path: &Path, out: &mut Vec<PathBuf>) -> Result<(), LoadError> {
    let metadata = std::fs::metadata(path).map_err(|source| LoadError::Read {
        path: path.to_path_buf(),
        source,
    })?;
    if !metadata.is_dir() {
        out.push(path.to_path_buf());
        return Ok(());
    }
    let before = out.len();
    walk(path, out)?;
    if out.len() == before {
        return Err(LoadError::NoManifests {
            path: path.to_path_buf(),
        });
    }
    Ok(())
}

fn walk(dir: &Path, out: &mut Vec<PathBuf>) -> Result<(), LoadError> {
    let read_error = |source| LoadError::Read {
        path: dir.to_path_buf(),
        source,
    };
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(read_error)?
        .map(|entry| entry.map(|e| e.path()))
        .collect::<Result<_, _>>()
        .map_err(read_error)?;
    entries.sort();
    for entry in entries {
        if entry.is_dir() {
            walk(&entry, out)?;
        } else if is_manifest(&entry) {
            out.push(entry);
        }
    }
    Ok(())
}

/// Manifest files by extension; a directory's timeline file (`timeline.yaml` or
/// `*.timeline.yaml`) is not a manifest.
fn is_manifest(path: &Path) -> bool {
    let name = path
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or_default();
    let manifest_ext = [".yaml", ".yml", ".json"]
        .iter()
        .any(|ext| name.ends_with(ext));
    manifest_ext && !name.starts_with("timeline.") && !name.contains(".timeline.")
}
