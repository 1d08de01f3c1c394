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
    /// The field and message as they will be shown: an echoed input (a `--set` value or key in
    /// backticks or quotes, a long unbroken token) is cut to its first [`ECHO_CHARS`] characters
    /// with its length, and control characters are escaped, so that an error stays one readable
    /// line whatever the input was.
    pub fn new(field: impl Into<String>, message: impl Into<String>) -> Self {
        Self { field: shown(&field.into()), message: shown(&message.into()) }
    }
}

/// Characters of an echoed input kept in an error.
pub const ECHO_CHARS: usize = 80;

/// An echo (quoted span, or unquoted run of non-space characters) longer than this is cut to
/// [`ECHO_CHARS`]; shorter ones (a file path, a key) are shown whole.
const CLIP_ABOVE: usize = 200;
const TOKEN_CHARS: usize = CLIP_ABOVE;

fn clip(s: &str) -> String {
    let n = s.chars().count();
    if n <= CLIP_ABOVE {
        return s.to_string();
    }
    format!("{}… ({n} characters)", s.chars().take(ECHO_CHARS).collect::<String>())
}

/// `s` with long quoted spans (`…`, "…") and long tokens clipped, and control characters escaped.
pub fn shown(s: &str) -> String {
    let escaped: String = s
        .chars()
        .flat_map(|c| -> Box<dyn Iterator<Item = char>> {
            if c.is_control() {
                Box::new(c.escape_default())
            } else {
                Box::new(std::iter::once(c))
            }
        })
        .collect();
    if escaped.chars().count() <= CLIP_ABOVE {
        return escaped;
    }
    let mut out = String::with_capacity(escaped.len().min(4096));
    let mut rest = escaped.as_str();
    while let Some(i) = rest.find(['`', '"']) {
        let q = rest[i..].chars().next().expect("found");
        let after = &rest[i + 1..];
        match after.find(q) {
            Some(j) => {
                out.push_str(&clip_tokens(&rest[..i]));
                out.push(q);
                out.push_str(&clip(&after[..j]));
                out.push(q);
                rest = &after[j + 1..];
            }
            None => break,
        }
    }
    out.push_str(&clip_tokens(rest));
    out
}

fn clip_tokens(s: &str) -> String {
    if s.len() <= TOKEN_CHARS {
        return s.to_string();
    }
    let mut out = String::new();
    let mut token = String::new();
    for c in s.chars() {
        if c.is_whitespace() {
            out.push_str(&if token.chars().count() > TOKEN_CHARS { clip(&token) } else { std::mem::take(&mut token) });
            token.clear();
            out.push(c);
        } else {
            token.push(c);
        }
    }
    out.push_str(&if token.chars().count() > TOKEN_CHARS { clip(&token) } else { token });
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn echoed_inputs_are_clipped_and_control_characters_escaped() {
        let huge = "x".repeat(100_000);
        let e = ScenarioError::new("duration_ms", format!("invalid type: string \"{huge}\", expected a number"));
        assert!(e.message.len() < 300, "{}", e.message);
        assert!(e.message.contains("… (100000 characters)"), "{}", e.message);
        assert!(e.message.ends_with("expected a number"));
        let e = ScenarioError::new("--set", format!("`a\u{1b}[31m{huge}` is not of the form dotted.key=value"));
        assert!(!e.message.contains('\u{1b}') && e.message.contains("\\u{1b}"), "{}", e.message);
        assert!(e.message.len() < 300);
        let e = ScenarioError::new(huge.clone(), format!("unknown field {huge}"));
        assert!(e.field.len() < 150 && e.message.len() < 300, "{e}");
        // A long path is shown whole.
        let path = format!("/tmp/{}/s.csv", "d".repeat(150));
        assert!(ScenarioError::new("csv", format!("`{path}`: no such file")).message.contains(&path));
        // Short messages are untouched (apart from escaping).
        assert_eq!(ScenarioError::new("a", "b `c` \"d\"").message, "b `c` \"d\"");
        assert_eq!(ScenarioError::new("a", "tab\there").message, "tab\\there");
    }
}
