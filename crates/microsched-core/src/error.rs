use thiserror::Error;

/// A scenario that cannot be run. `field` is the dotted path of the offending key, so that the
/// message points the user at the exact line of their TOML file.
#[derive(Debug, Clone, Error, PartialEq)]
#[error("{field}: {message}")]
pub struct ScenarioError {
    pub field: String,
    pub message: String,
}

impl ScenarioError {
    pub fn new(field: impl Into<String>, message: impl Into<String>) -> Self {
        Self { field: field.into(), message: message.into() }
    }
}
