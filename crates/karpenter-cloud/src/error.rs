//! Typed errors, named after the step that failed. Each one names where the bad input is: the
//! file (or "the embedded catalog"), the line, the entry and the field.

use std::path::PathBuf;

/// Loading a catalog failed.
#[derive(Debug, thiserror::Error)]
pub enum CatalogError {
    /// The file could not be read.
    #[error("cannot read catalog file {path}")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// The first line is not a valid catalog header.
    #[error("{origin}: line 1: invalid catalog header: field `{field}`: {message}")]
    Header {
        origin: String,
        field: String,
        message: String,
    },
    /// One instance-type entry is invalid.
    #[error("{origin}: line {line}: instance type {entry}: field `{field}`: {message}")]
    Entry {
        origin: String,
        line: usize,
        /// The entry's `name`, or a placeholder when it has none.
        entry: String,
        field: String,
        message: String,
    },
    /// Two entries have the same name.
    #[error(
        "{origin}: line {line}: instance type {entry} is listed twice (first on line {first_line})"
    )]
    Duplicate {
        origin: String,
        line: usize,
        first_line: usize,
        entry: String,
    },
    /// The header's count does not match the entries.
    #[error("{origin}: the header says {declared} instance types but the file has {found}")]
    Count {
        origin: String,
        declared: usize,
        found: usize,
    },
}

/// Catalog options that the formulas cannot use.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid catalog option `{option}`: {message}")]
pub struct OptionsError {
    pub option: String,
    pub message: String,
}

impl OptionsError {
    pub(crate) fn new(option: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            option: option.into(),
            message: message.into(),
        }
    }
}

/// Loading a price table failed.
#[derive(Debug, thiserror::Error)]
pub enum PriceTableError {
    #[error("cannot read price file {path}")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{origin}: field `{field}`: {message}")]
    Invalid {
        origin: String,
        field: String,
        message: String,
    },
}
