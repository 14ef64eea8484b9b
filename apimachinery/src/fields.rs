//! Mirrors apimachinery's pkg/fields/selector.go: field selectors (`?fieldSelector=`).
//!
//! A field selector is a comma-separated AND of `field=value`, `field==value` and `field!=value`
//! terms. Unlike label selectors there is no lexer: the string is split at unescaped commas, each
//! term at its first operator, and the value is unescaped (`\,`, `\=`, `\\`). Which fields a
//! resource can be filtered on is up to the resource (`check_supported`); a missing field reads as
//! the empty string, so `spec.nodeName=` selects unscheduled pods.

use std::fmt;

use crate::error::{Error, Result};

/// selection.Operator, restricted to what field selectors accept. `==` parses to `Equals`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FieldOperator {
    Equals,
    NotEquals,
}

/// One term: `field <op> value` (hasTerm / notHasTerm in Kubernetes).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldRequirement {
    pub field: String,
    pub op: FieldOperator,
    /// The unescaped value.
    pub value: String,
}

impl FieldRequirement {
    fn matches(&self, actual: &str) -> bool {
        match self.op {
            FieldOperator::Equals => actual == self.value,
            FieldOperator::NotEquals => actual != self.value,
        }
    }
}

impl fmt::Display for FieldRequirement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let op = match self.op {
            FieldOperator::Equals => "=",
            FieldOperator::NotEquals => "!=",
        };
        write!(f, "{}{op}{}", self.field, escape_value(&self.value))
    }
}

/// A parsed field selector; the empty selector matches everything.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct FieldSelector {
    requirements: Vec<FieldRequirement>,
}

impl FieldSelector {
    pub fn everything() -> FieldSelector {
        FieldSelector::default()
    }

    pub fn is_empty(&self) -> bool {
        self.requirements.is_empty()
    }

    /// fields.ParseSelector. Terms are sorted (as raw strings, as Kubernetes sorts them) and
    /// empty terms skipped; no whitespace is trimmed.
    pub fn parse(s: &str) -> Result<FieldSelector> {
        let mut terms = split_terms(s);
        terms.sort();
        let mut requirements = Vec::new();
        for term in terms.into_iter().filter(|t| !t.is_empty()) {
            let Some((field, op, raw_value)) = split_term(term) else {
                return Err(Error::InvalidFieldSelector(format!(
                    "invalid selector: '{s}'; can't understand '{term}'"
                )));
            };
            let value = unescape_value(raw_value)?;
            requirements.push(FieldRequirement {
                field: field.to_string(),
                op,
                value,
            });
        }
        Ok(FieldSelector { requirements })
    }

    pub fn requirements(&self) -> &[FieldRequirement] {
        &self.requirements
    }

    /// Selector.Matches. `get` returns an object's value for a field name; `None` (absent)
    /// reads as "", as in a Kubernetes `fields.Set`.
    pub fn matches(&self, get: impl Fn(&str) -> Option<String>) -> bool {
        self.requirements
            .iter()
            .all(|r| r.matches(&get(&r.field).unwrap_or_default()))
    }

    /// Rejects terms on fields the resource cannot filter by, with the error text the API server
    /// returns (as a 400): `field label not supported: <field>`.
    pub fn check_supported(&self, supported: &[&str]) -> Result<()> {
        match self
            .requirements
            .iter()
            .find(|r| !supported.contains(&r.field.as_str()))
        {
            Some(r) => Err(Error::FieldNotSupported(r.field.clone())),
            None => Ok(()),
        }
    }

    /// Selector.RequiresExactMatch: the value an `=`/`==` term demands of `field`, if any. Lets a
    /// list narrow its scan (e.g. pods of one node by `spec.nodeName=X`).
    pub fn exact_match(&self, field: &str) -> Option<&str> {
        self.requirements
            .iter()
            .find(|r| r.field == field && r.op == FieldOperator::Equals)
            .map(|r| r.value.as_str())
    }
}

impl fmt::Display for FieldSelector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let terms: Vec<String> = self
            .requirements
            .iter()
            .map(FieldRequirement::to_string)
            .collect();
        write!(f, "{}", terms.join(","))
    }
}

/// fields.EscapeValue: the inverse of `unescape_value`.
pub fn escape_value(s: &str) -> String {
    s.replace('\\', "\\\\")
        .replace(',', "\\,")
        .replace('=', "\\=")
}

/// splitTerms: splits at commas not preceded by a backslash (the backslash stays in the term).
fn split_terms(s: &str) -> Vec<&str> {
    if s.is_empty() {
        return Vec::new();
    }
    let mut terms = Vec::new();
    let mut start = 0;
    let mut in_slash = false;
    for (i, c) in s.char_indices() {
        if in_slash {
            in_slash = false;
        } else if c == '\\' {
            in_slash = true;
        } else if c == ',' {
            terms.push(&s[start..i]);
            start = i + 1;
        }
    }
    terms.push(&s[start..]);
    terms
}

/// splitTerm: the field has no escaping, so the first operator found splits the term. `!=` and
/// `==` are tried before `=` so that no stray '=' is left on the value.
fn split_term(term: &str) -> Option<(&str, FieldOperator, &str)> {
    for (i, _) in term.char_indices() {
        let rest = &term[i..];
        for (op_str, op) in [
            ("!=", FieldOperator::NotEquals),
            ("==", FieldOperator::Equals),
            ("=", FieldOperator::Equals),
        ] {
            if let Some(value) = rest.strip_prefix(op_str) {
                return Some((&term[..i], op, value));
            }
        }
    }
    None
}

/// fields.UnescapeValue. Kubernetes prints an unescaped rune with Go's `%v`, i.e. as its code
/// point number (`unescaped character in value: 61` for '='); we keep that wording.
fn unescape_value(s: &str) -> Result<String> {
    let mut out = String::with_capacity(s.len());
    let mut in_slash = false;
    for c in s.chars() {
        if in_slash {
            match c {
                '\\' | ',' | '=' => out.push(c),
                other => {
                    return Err(Error::InvalidFieldSelector(format!(
                        "invalid field selector: invalid escape sequence: \\{other}"
                    )));
                }
            }
            in_slash = false;
            continue;
        }
        match c {
            '\\' => in_slash = true,
            ',' | '=' => {
                return Err(Error::InvalidFieldSelector(format!(
                    "invalid field selector: unescaped character in value: {}",
                    c as u32
                )));
            }
            other => out.push(other),
        }
    }
    if in_slash {
        return Err(Error::InvalidFieldSelector(
            "invalid field selector: invalid escape sequence: \\".into(),
        ));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    #[test]
    fn parse_and_print() {
        // (input, requirements as (field, op, value), canonical form)
        use FieldOperator::*;
        type Terms = Vec<(&'static str, FieldOperator, &'static str)>;
        let cases: Vec<(&str, Terms, &str)> = vec![
            ("", vec![], ""),
            (
                "metadata.name=web",
                vec![("metadata.name", Equals, "web")],
                "metadata.name=web",
            ),
            (
                "metadata.name==web",
                vec![("metadata.name", Equals, "web")],
                "metadata.name=web",
            ),
            (
                "status.phase!=Failed",
                vec![("status.phase", NotEquals, "Failed")],
                "status.phase!=Failed",
            ),
            (
                "involvedObject.namespace=",
                vec![("involvedObject.namespace", Equals, "")],
                "involvedObject.namespace=",
            ),
            (
                "spec.nodeName=n1,status.phase!=Succeeded,status.phase!=Failed",
                vec![
                    ("spec.nodeName", Equals, "n1"),
                    ("status.phase", NotEquals, "Failed"),
                    ("status.phase", NotEquals, "Succeeded"),
                ],
                "spec.nodeName=n1,status.phase!=Failed,status.phase!=Succeeded",
            ),
            (
                "involvedObject.kind=Node,involvedObject.namespace=",
                vec![
                    ("involvedObject.kind", Equals, "Node"),
                    ("involvedObject.namespace", Equals, ""),
                ],
                "involvedObject.kind=Node,involvedObject.namespace=",
            ),
            (
                "a=x\\,y\\=z\\\\",
                vec![("a", Equals, "x,y=z\\")],
                "a=x\\,y\\=z\\\\",
            ),
            (
                "a=b,,c=d",
                vec![("a", Equals, "b"), ("c", Equals, "d")],
                "a=b,c=d",
            ),
            (" a = b", vec![(" a ", Equals, " b")], " a = b"),
        ];
        for (input, want, printed) in cases {
            let sel = FieldSelector::parse(input).unwrap_or_else(|e| panic!("{input:?}: {e}"));
            let got: Vec<(&str, FieldOperator, &str)> = sel
                .requirements()
                .iter()
                .map(|r| (r.field.as_str(), r.op, r.value.as_str()))
                .collect();
            assert_eq!(got, want, "{input:?}");
            assert_eq!(sel.to_string(), printed, "{input:?}");
        }
    }

    #[test]
    fn parse_errors() {
        let cases = [
            (
                "metadata.name",
                "invalid selector: 'metadata.name'; can't understand 'metadata.name'",
            ),
            ("a=b,c", "invalid selector: 'a=b,c'; can't understand 'c'"),
            (
                "a=b=c",
                "invalid field selector: unescaped character in value: 61",
            ),
            (
                "a=\\x",
                "invalid field selector: invalid escape sequence: \\x",
            ),
            (
                "a=x\\",
                "invalid field selector: invalid escape sequence: \\",
            ),
        ];
        for (input, want) in cases {
            match FieldSelector::parse(input) {
                Ok(s) => panic!("{input:?} parsed as {s}"),
                Err(e) => assert_eq!(e.to_string(), want, "{input:?}"),
            }
        }
    }

    #[test]
    fn matching() {
        let running_on_n1: BTreeMap<&str, &str> = [
            ("metadata.name", "web"),
            ("spec.nodeName", "n1"),
            ("status.phase", "Running"),
        ]
        .into();
        let unscheduled: BTreeMap<&str, &str> =
            [("metadata.name", "db"), ("status.phase", "Pending")].into();
        // (selector, matches running_on_n1, matches unscheduled)
        let cases = [
            ("", true, true),
            ("metadata.name=web", true, false),
            ("metadata.name!=web", false, true),
            (
                "spec.nodeName=n1,status.phase!=Succeeded,status.phase!=Failed",
                true,
                false,
            ),
            ("spec.nodeName=", false, true),
            ("spec.nodeName!=", true, false),
            ("status.phase!=Running", false, true),
        ];
        for (sel, want_a, want_b) in cases {
            let s = FieldSelector::parse(sel).unwrap_or_else(|e| panic!("{sel:?}: {e}"));
            assert_eq!(
                s.matches(|f| running_on_n1.get(f).map(|v| v.to_string())),
                want_a,
                "{sel:?}"
            );
            assert_eq!(
                s.matches(|f| unscheduled.get(f).map(|v| v.to_string())),
                want_b,
                "{sel:?}"
            );
        }
    }

    #[test]
    fn supported_and_exact_match() {
        let supported = [
            "metadata.name",
            "metadata.namespace",
            "spec.nodeName",
            "status.phase",
        ];
        // (selector, check_supported error, exact match of spec.nodeName)
        let cases = [
            ("spec.nodeName=n1,status.phase!=Failed", None, Some("n1")),
            ("spec.nodeName==n2", None, Some("n2")),
            ("spec.nodeName!=n1", None, None),
            ("spec.nodeName=", None, Some("")),
            (
                "metadata.name=x,spec.foo=y",
                Some("field label not supported: spec.foo"),
                None,
            ),
        ];
        for (sel, err, exact) in cases {
            let s = FieldSelector::parse(sel).unwrap_or_else(|e| panic!("{sel:?}: {e}"));
            assert_eq!(
                s.check_supported(&supported)
                    .err()
                    .map(|e| e.to_string())
                    .as_deref(),
                err,
                "{sel:?}"
            );
            assert_eq!(s.exact_match("spec.nodeName"), exact, "{sel:?}");
        }
    }
}
