//! Mirrors apimachinery's pkg/labels/selector.go: parsing, matching and printing label selectors.
//!
//! A selector is a list of requirements that must all hold (AND). The string form is what
//! kubectl sends in `?labelSelector=`; the structured form is a `metav1.LabelSelector` as found in
//! `spec.selector` of Deployments or in a Service (`matchLabels`, `matchExpressions`).
//!
//! Parsing follows Kubernetes' hand-written lexer and recursive-descent parser: a lexer cuts the
//! string into identifiers and operator symbols, and the parser reads
//! `requirement (',' requirement)*` where a requirement is one of
//! `key`, `!key`, `key=value`, `key==value`, `key!=value`, `key in (v1,v2)`, `key notin (v1,v2)`,
//! `key>n`, `key<n`.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use serde_json::Value;

use crate::error::{Error, Result};
use crate::validation::{is_qualified_name, is_valid_label_value};

/// selection.Operator.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Operator {
    Exists,
    DoesNotExist,
    Equals,
    DoubleEquals,
    NotEquals,
    In,
    NotIn,
    GreaterThan,
    LessThan,
}

/// One clause of a selector: `key <op> values`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Requirement {
    pub key: String,
    pub op: Operator,
    /// Sorted and deduplicated, as Kubernetes keeps them in a `sets.String`.
    pub values: BTreeSet<String>,
}

impl Requirement {
    /// labels.NewRequirement: checks the key, the number of values for the operator, and each
    /// value. Every problem is reported, as a field error under `key` or `values`, joined the way
    /// Kubernetes' error aggregate joins them (`[first, second]`).
    pub fn new(key: &str, op: Operator, values: BTreeSet<String>) -> Result<Requirement> {
        let mut errs: Vec<String> = Vec::new();
        let key_errs = is_qualified_name(key);
        if !key_errs.is_empty() {
            errs.push(format!(
                "key: Invalid value: {}: {}",
                quote(key),
                key_errs.join("; ")
            ));
        }
        // Go prints the value list with %#v: []string{"a", "b"}.
        let go_list = || {
            let quoted: Vec<String> = values.iter().map(|v| quote(v)).collect();
            format!("[]string{{{}}}", quoted.join(", "))
        };
        match op {
            Operator::In | Operator::NotIn if values.is_empty() => {
                errs.push(format!("values: Invalid value: {}: for 'in', 'notin' operators, values set can't be empty", go_list()));
            }
            Operator::Equals | Operator::DoubleEquals | Operator::NotEquals
                if values.len() != 1 =>
            {
                errs.push(format!("values: Invalid value: {}: exact-match compatibility requires one single value", go_list()));
            }
            Operator::Exists | Operator::DoesNotExist if !values.is_empty() => {
                errs.push(format!("values: Invalid value: {}: values set must be empty for exists and does not exist", go_list()));
            }
            Operator::GreaterThan | Operator::LessThan => {
                if values.len() != 1 {
                    errs.push(format!("values: Invalid value: {}: for 'Gt', 'Lt' operators, exactly one value is required", go_list()));
                }
                for (i, v) in values.iter().enumerate() {
                    if v.parse::<i64>().is_err() {
                        errs.push(format!("values[{i}]: Invalid value: {}: for 'Gt', 'Lt' operators, the value must be an integer", quote(v)));
                    }
                }
            }
            _ => {}
        }
        for (i, v) in values.iter().enumerate() {
            let value_errs = is_valid_label_value(v);
            if !value_errs.is_empty() {
                errs.push(format!(
                    "values[{i}][{key}]: Invalid value: {}: {}",
                    quote(v),
                    value_errs.join("; ")
                ));
            }
        }
        match errs.as_slice() {
            [] => Ok(Requirement {
                key: key.to_string(),
                op,
                values,
            }),
            [one] => Err(invalid(one.clone())),
            many => Err(invalid(format!("[{}]", many.join(", ")))),
        }
    }

    /// Requirement.Matches.
    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        let value = labels.get(&self.key);
        match self.op {
            Operator::In | Operator::Equals | Operator::DoubleEquals => {
                value.is_some_and(|v| self.values.contains(v))
            }
            Operator::NotIn | Operator::NotEquals => value.is_none_or(|v| !self.values.contains(v)),
            Operator::Exists => value.is_some(),
            Operator::DoesNotExist => value.is_none(),
            Operator::GreaterThan | Operator::LessThan => {
                // A label that is absent or not an integer never satisfies Gt/Lt.
                let (Some(have), Some(want)) = (
                    value.and_then(|v| v.parse::<i64>().ok()),
                    self.values
                        .iter()
                        .next()
                        .and_then(|v| v.parse::<i64>().ok()),
                ) else {
                    return false;
                };
                if self.op == Operator::GreaterThan {
                    have > want
                } else {
                    have < want
                }
            }
        }
    }
}

impl fmt::Display for Requirement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let values: Vec<&str> = self.values.iter().map(String::as_str).collect();
        let first = values.first().copied().unwrap_or("");
        match self.op {
            Operator::Exists => write!(f, "{}", self.key),
            Operator::DoesNotExist => write!(f, "!{}", self.key),
            Operator::Equals => write!(f, "{}={first}", self.key),
            Operator::DoubleEquals => write!(f, "{}=={first}", self.key),
            Operator::NotEquals => write!(f, "{}!={first}", self.key),
            Operator::GreaterThan => write!(f, "{}>{first}", self.key),
            Operator::LessThan => write!(f, "{}<{first}", self.key),
            Operator::In => write!(f, "{} in ({})", self.key, values.join(",")),
            Operator::NotIn => write!(f, "{} notin ({})", self.key, values.join(",")),
        }
    }
}

/// A label selector: requirements ANDed together.
///
/// `Selector::everything()` (no requirements) matches every object; `Selector::nothing()` matches
/// none, and is what a `null` metav1.LabelSelector converts to.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Selector {
    requirements: Vec<Requirement>,
    nothing: bool,
}

impl Selector {
    /// labels.Everything(): matches all label sets.
    pub fn everything() -> Selector {
        Selector::default()
    }

    /// labels.Nothing(): matches no label set.
    pub fn nothing() -> Selector {
        Selector {
            requirements: Vec::new(),
            nothing: true,
        }
    }

    /// True for `everything()`: no requirement to check.
    pub fn is_empty(&self) -> bool {
        self.requirements.is_empty() && !self.nothing
    }

    pub fn requirements(&self) -> &[Requirement] {
        &self.requirements
    }

    /// labels.Parse: parses kubectl's `-l` syntax. Requirements come back sorted by key, so that
    /// equal selectors print equally.
    pub fn parse(s: &str) -> Result<Selector> {
        let tokens = lex(s);
        let mut parser = Parser { tokens, pos: 0 };
        let mut requirements = parser.parse()?;
        requirements.sort_by(|a, b| a.key.cmp(&b.key));
        Ok(Selector {
            requirements,
            nothing: false,
        })
    }

    /// Adds a requirement (labels.Selector.Add), keeping the key order.
    pub fn add_requirement(mut self, r: Requirement) -> Selector {
        self.requirements.push(r);
        self.requirements.sort_by(|a, b| a.key.cmp(&b.key));
        self
    }

    /// metav1.LabelSelectorAsSelector: converts a `metav1.LabelSelector` object.
    ///
    /// - `null` (or absent) converts to `nothing()`: this is what a ReplicaSet or a
    ///   PodDisruptionBudget without a selector means. A Service's `spec.selector` is a plain map,
    ///   not a LabelSelector, and there an absent selector means "selects no pods by itself"
    ///   while NetworkPolicy's `podSelector: {}` means "all pods": callers that want other
    ///   semantics for `null` must check for it before calling.
    /// - `{}` converts to `everything()`.
    /// - `matchLabels` become `key=value` requirements; `matchExpressions` take the operators
    ///   `In`, `NotIn`, `Exists` and `DoesNotExist`.
    pub fn from_label_selector(v: &Value) -> Result<Selector> {
        let obj = match v {
            Value::Null => return Ok(Selector::nothing()),
            Value::Object(obj) => obj,
            other => {
                return Err(invalid(format!(
                    "a label selector must be an object, got {other}"
                )));
            }
        };
        let mut requirements = Vec::new();
        if let Some(match_labels) = obj.get("matchLabels").filter(|v| !v.is_null()) {
            let map = match_labels
                .as_object()
                .ok_or_else(|| invalid("matchLabels must be an object".into()))?;
            for (k, v) in map {
                let value = v
                    .as_str()
                    .ok_or_else(|| invalid(format!("matchLabels[{k}] must be a string")))?;
                requirements.push(Requirement::new(
                    k,
                    Operator::Equals,
                    BTreeSet::from([value.to_string()]),
                )?);
            }
        }
        if let Some(exprs) = obj.get("matchExpressions").filter(|v| !v.is_null()) {
            let exprs = exprs
                .as_array()
                .ok_or_else(|| invalid("matchExpressions must be a list".into()))?;
            for expr in exprs {
                let key = expr.get("key").and_then(Value::as_str).unwrap_or("");
                let op_str = expr.get("operator").and_then(Value::as_str).unwrap_or("");
                let op = match op_str {
                    "In" => Operator::In,
                    "NotIn" => Operator::NotIn,
                    "Exists" => Operator::Exists,
                    "DoesNotExist" => Operator::DoesNotExist,
                    other => {
                        return Err(invalid(format!(
                            "{} is not a valid label selector operator",
                            quote(other)
                        )));
                    }
                };
                let mut values = BTreeSet::new();
                for v in expr
                    .get("values")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                {
                    let s = v
                        .as_str()
                        .ok_or_else(|| invalid(format!("values of {key} must be strings")))?;
                    values.insert(s.to_string());
                }
                requirements.push(Requirement::new(key, op, values)?);
            }
        }
        requirements.sort_by(|a, b| a.key.cmp(&b.key));
        Ok(Selector {
            requirements,
            nothing: false,
        })
    }

    /// Selector.Matches: every requirement holds.
    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        !self.nothing && self.requirements.iter().all(|r| r.matches(labels))
    }

    /// Matches the `metadata.labels` of an object given as JSON (absent labels = no labels).
    pub fn matches_object(&self, obj: &Value) -> bool {
        let labels: BTreeMap<String, String> = obj
            .pointer("/metadata/labels")
            .and_then(Value::as_object)
            .map(|m| {
                m.iter()
                    .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_string())))
                    .collect()
            })
            .unwrap_or_default();
        self.matches(&labels)
    }
}

impl fmt::Display for Selector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let parts: Vec<String> = self
            .requirements
            .iter()
            .map(Requirement::to_string)
            .collect();
        write!(f, "{}", parts.join(","))
    }
}

fn invalid(msg: String) -> Error {
    Error::InvalidLabelSelector(msg)
}

fn quote(s: &str) -> String {
    Value::String(s.to_string()).to_string()
}

/// The lexer's tokens. `in` and `notin` are lexed as identifiers; the parser decides from context
/// whether they are keywords (after a key) or plain values (inside parentheses).
#[derive(Debug, Clone, PartialEq, Eq)]
enum Token {
    Identifier(String),
    Bang,
    Equals,
    DoubleEquals,
    NotEquals,
    GreaterThan,
    LessThan,
    OpenPar,
    ClosedPar,
    Comma,
    End,
}

impl Token {
    /// The literal, for "found '...'" messages.
    fn literal(&self) -> &str {
        match self {
            Token::Identifier(s) => s,
            Token::Bang => "!",
            Token::Equals => "=",
            Token::DoubleEquals => "==",
            Token::NotEquals => "!=",
            Token::GreaterThan => ">",
            Token::LessThan => "<",
            Token::OpenPar => "(",
            Token::ClosedPar => ")",
            Token::Comma => ",",
            Token::End => "",
        }
    }
}

fn is_special(c: char) -> bool {
    matches!(c, '!' | '=' | '(' | ')' | ',' | '<' | '>')
}

fn is_whitespace(c: char) -> bool {
    matches!(c, ' ' | '\t' | '\r' | '\n')
}

/// Lexer.Lex: whitespace separates tokens; a run of non-special, non-space characters is an
/// identifier; `!=` and `==` are read greedily.
fn lex(s: &str) -> Vec<Token> {
    let chars: Vec<char> = s.chars().collect();
    let mut tokens = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if is_whitespace(c) {
            i += 1;
            continue;
        }
        if is_special(c) {
            let next = chars.get(i + 1).copied();
            let (tok, len) = match (c, next) {
                ('!', Some('=')) => (Token::NotEquals, 2),
                ('=', Some('=')) => (Token::DoubleEquals, 2),
                ('!', _) => (Token::Bang, 1),
                ('=', _) => (Token::Equals, 1),
                ('(', _) => (Token::OpenPar, 1),
                (')', _) => (Token::ClosedPar, 1),
                (',', _) => (Token::Comma, 1),
                ('<', _) => (Token::LessThan, 1),
                _ => (Token::GreaterThan, 1),
            };
            tokens.push(tok);
            i += len;
            continue;
        }
        let start = i;
        while i < chars.len() && !is_whitespace(chars[i]) && !is_special(chars[i]) {
            i += 1;
        }
        tokens.push(Token::Identifier(chars[start..i].iter().collect()));
    }
    tokens.push(Token::End);
    tokens
}

struct Parser {
    tokens: Vec<Token>,
    pos: usize,
}

impl Parser {
    fn lookahead(&self) -> &Token {
        self.tokens.get(self.pos).unwrap_or(&Token::End)
    }

    fn consume(&mut self) -> Token {
        let t = self.lookahead().clone();
        if self.pos < self.tokens.len() {
            self.pos += 1;
        }
        t
    }

    /// Parser.parse: `requirement (',' requirement)*`.
    fn parse(&mut self) -> Result<Vec<Requirement>> {
        let mut requirements = Vec::new();
        loop {
            match self.lookahead() {
                Token::Identifier(_) | Token::Bang => {
                    let r = self
                        .parse_requirement()
                        .map_err(|e| invalid(format!("unable to parse requirement: {e}")))?;
                    requirements.push(r);
                    match self.consume() {
                        Token::End => return Ok(requirements),
                        Token::Comma => match self.lookahead() {
                            Token::Identifier(_) | Token::Bang => {}
                            t => {
                                return Err(invalid(format!(
                                    "found '{}', expected: identifier after ','",
                                    t.literal()
                                )));
                            }
                        },
                        t => {
                            return Err(invalid(format!(
                                "found '{}', expected: ',' or 'end of string'",
                                t.literal()
                            )));
                        }
                    }
                }
                Token::End => return Ok(requirements),
                t => {
                    return Err(invalid(format!(
                        "found '{}', expected: !, identifier, or 'end of string'",
                        t.literal()
                    )));
                }
            }
        }
    }

    fn parse_requirement(&mut self) -> Result<Requirement> {
        // Step 1: the key, and `!key` / bare `key`.
        let negated = *self.lookahead() == Token::Bang;
        if negated {
            self.consume();
        }
        let key = match self.consume() {
            Token::Identifier(k) if k != "in" && k != "notin" => k,
            t => {
                return Err(invalid(format!(
                    "found '{}', expected: identifier",
                    t.literal()
                )));
            }
        };
        if negated {
            return Requirement::new(&key, Operator::DoesNotExist, BTreeSet::new());
        }
        if matches!(self.lookahead(), Token::End | Token::Comma) {
            return Requirement::new(&key, Operator::Exists, BTreeSet::new());
        }
        // Step 2: the operator.
        let op = match self.consume() {
            Token::Identifier(s) if s == "in" => Operator::In,
            Token::Identifier(s) if s == "notin" => Operator::NotIn,
            Token::Equals => Operator::Equals,
            Token::DoubleEquals => Operator::DoubleEquals,
            Token::NotEquals => Operator::NotEquals,
            Token::GreaterThan => Operator::GreaterThan,
            Token::LessThan => Operator::LessThan,
            t => {
                return Err(invalid(format!(
                    "found '{}', expected: in, notin, =, ==, !=, gt, lt",
                    t.literal()
                )));
            }
        };
        // Step 3: the values.
        let values = match op {
            Operator::In | Operator::NotIn => self.parse_values()?,
            _ => self.parse_exact_value()?,
        };
        Requirement::new(&key, op, values)
    }

    /// `(v1, v2, ...)`. Like Kubernetes, empty slots are empty-string values: `()` is `{""}`.
    fn parse_values(&mut self) -> Result<BTreeSet<String>> {
        let t = self.consume();
        if t != Token::OpenPar {
            return Err(invalid(format!("found '{}' expected: '('", t.literal())));
        }
        match self.lookahead().clone() {
            Token::Identifier(_) | Token::Comma => {
                let values = self.parse_identifiers_list()?;
                let t = self.consume();
                if t != Token::ClosedPar {
                    return Err(invalid(format!("found '{}', expected: ')'", t.literal())));
                }
                Ok(values)
            }
            Token::ClosedPar => {
                self.consume();
                Ok(BTreeSet::from([String::new()]))
            }
            t => Err(invalid(format!(
                "found '{}', expected: ',', ')' or identifier",
                t.literal()
            ))),
        }
    }

    fn parse_identifiers_list(&mut self) -> Result<BTreeSet<String>> {
        let mut values = BTreeSet::new();
        loop {
            match self.consume() {
                Token::Identifier(v) => {
                    values.insert(v);
                    match self.lookahead() {
                        Token::Comma => continue,
                        Token::ClosedPar => return Ok(values),
                        t => {
                            return Err(invalid(format!(
                                "found '{}', expected: ',' or ')'",
                                t.literal()
                            )));
                        }
                    }
                }
                Token::Comma => {
                    if values.is_empty() {
                        values.insert(String::new()); // "(,"
                    }
                    match self.lookahead() {
                        Token::ClosedPar => {
                            values.insert(String::new()); // ",)"
                            return Ok(values);
                        }
                        Token::Comma => {
                            self.consume();
                            values.insert(String::new()); // ",,"
                        }
                        _ => {}
                    }
                }
                t => {
                    return Err(invalid(format!(
                        "found '{}', expected: ',', or identifier",
                        t.literal()
                    )));
                }
            }
        }
    }

    /// The value after `=`, `==`, `!=`, `>`, `<`; may be empty (`a=` selects `a: ""`).
    fn parse_exact_value(&mut self) -> Result<BTreeSet<String>> {
        if matches!(self.lookahead(), Token::End | Token::Comma) {
            return Ok(BTreeSet::from([String::new()]));
        }
        match self.consume() {
            Token::Identifier(v) => Ok(BTreeSet::from([v])),
            t => Err(invalid(format!(
                "found '{}', expected: identifier",
                t.literal()
            ))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn parse_and_print() {
        // (input, canonical form)
        let cases = [
            ("", ""),
            ("a=b", "a=b"),
            ("a==b", "a==b"),
            ("a!=b", "a!=b"),
            ("a", "a"),
            ("!a", "!a"),
            ("  a = b , c  ", "a=b,c"),
            ("x=1,a=2", "a=2,x=1"),
            ("app in (web, x),!foo", "app in (web,x),!foo"),
            ("env notin (prod,dev,prod)", "env notin (dev,prod)"),
            ("a in ()", "a in ()"),
            ("a in (,b)", "a in (,b)"),
            ("a in (b,)", "a in (,b)"),
            ("a=", "a="),
            ("a=,b", "a=,b"),
            ("a in (in,notin)", "a in (in,notin)"),
            ("n>3,m<10", "m<10,n>3"),
            ("example.com/tier=front-end", "example.com/tier=front-end"),
            ("a\tin\n(b)", "a in (b)"),
        ];
        for (input, want) in cases {
            let sel = Selector::parse(input).unwrap_or_else(|e| panic!("{input:?}: {e}"));
            assert_eq!(sel.to_string(), want, "{input:?}");
        }
    }

    #[test]
    fn parse_errors() {
        let cases = [
            (
                "a b",
                "unable to parse requirement: found 'b', expected: in, notin, =, ==, !=, gt, lt",
            ),
            ("a=b c", "found 'c', expected: ',' or 'end of string'"),
            ("a=b,", "found '', expected: identifier after ','"),
            (
                ",a",
                "found ',', expected: !, identifier, or 'end of string'",
            ),
            (
                "=a",
                "found '=', expected: !, identifier, or 'end of string'",
            ),
            ("!a=b", "found '=', expected: ',' or 'end of string'"),
            (
                "!",
                "unable to parse requirement: found '', expected: identifier",
            ),
            // After a key position `in` is a keyword, so it cannot be a key.
            (
                "in=x",
                "unable to parse requirement: found 'in', expected: identifier",
            ),
            (
                "a in b",
                "unable to parse requirement: found 'b' expected: '('",
            ),
            (
                "a in (b",
                "unable to parse requirement: found '', expected: ',' or ')'",
            ),
            (
                "a in (b c)",
                "unable to parse requirement: found 'c', expected: ',' or ')'",
            ),
            (
                "a in (=)",
                "unable to parse requirement: found '=', expected: ',', ')' or identifier",
            ),
            (
                "a=(",
                "unable to parse requirement: found '(', expected: identifier",
            ),
            (
                "a>b",
                "unable to parse requirement: values[0]: Invalid value: \"b\": for 'Gt', 'Lt' operators, the value must be an integer",
            ),
            (
                "a_>b",
                "unable to parse requirement: [key: Invalid value: \"a_\": name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]'), values[0]: Invalid value: \"b\": for 'Gt', 'Lt' operators, the value must be an integer]",
            ),
            (
                "a_=b",
                "unable to parse requirement: key: Invalid value: \"a_\": name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')",
            ),
            (
                "app=x_",
                "unable to parse requirement: values[0][app]: Invalid value: \"x_\": a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')",
            ),
        ];
        for (input, want) in cases {
            match Selector::parse(input) {
                Ok(s) => panic!("{input:?} parsed as {s}"),
                Err(e) => assert_eq!(e.to_string(), want, "{input:?}"),
            }
        }
    }

    #[test]
    fn matching() {
        let web = labels(&[("app", "web"), ("tier", "front"), ("n", "5")]);
        let empty = labels(&[]);
        // (selector, matches web, matches empty)
        let cases = [
            ("", true, true),
            ("app=web", true, false),
            ("app==web", true, false),
            ("app=db", false, false),
            ("app!=db", true, true),
            ("app!=web", false, true),
            ("app", true, false),
            ("!app", false, true),
            ("app in (web,db)", true, false),
            ("app notin (web,db)", false, true),
            ("app=web,tier=front", true, false),
            ("app=web,tier=back", false, false),
            ("n>4", true, false),
            ("n>5", false, false),
            ("n<6", true, false),
            ("app>1", false, false),
            ("tier=", false, false),
        ];
        for (sel, want_web, want_empty) in cases {
            let s = Selector::parse(sel).unwrap_or_else(|e| panic!("{sel:?}: {e}"));
            assert_eq!(s.matches(&web), want_web, "{sel:?} on web");
            assert_eq!(s.matches(&empty), want_empty, "{sel:?} on empty");
        }
        assert!(Selector::parse("a=").is_ok_and(|s| s.matches(&labels(&[("a", "")]))));
        assert!(Selector::everything().is_empty());
        assert!(!Selector::nothing().is_empty());
        assert!(!Selector::nothing().matches(&empty));
        assert!(
            Selector::parse("app=web")
                .is_ok_and(|s| s.matches_object(&json!({"metadata": {"labels": {"app": "web"}}})))
        );
    }

    #[test]
    fn label_selector_objects() {
        let web = labels(&[("app", "web"), ("tier", "front")]);
        // (metav1.LabelSelector, canonical form or error, matches web)
        let cases: Vec<(Value, Result<&str, &str>, bool)> = vec![
            (json!({}), Ok(""), true),
            (Value::Null, Ok(""), false),
            (json!({"matchLabels": {"app": "web"}}), Ok("app=web"), true),
            (json!({"matchLabels": {"app": "db"}}), Ok("app=db"), false),
            (
                json!({"matchLabels": {"tier": "front"}, "matchExpressions": [{"key": "app", "operator": "In", "values": ["web", "x"]}]}),
                Ok("app in (web,x),tier=front"),
                true,
            ),
            (
                json!({"matchExpressions": [{"key": "app", "operator": "NotIn", "values": ["web"]}]}),
                Ok("app notin (web)"),
                false,
            ),
            (
                json!({"matchExpressions": [{"key": "app", "operator": "Exists"}]}),
                Ok("app"),
                true,
            ),
            (
                json!({"matchExpressions": [{"key": "app", "operator": "DoesNotExist"}]}),
                Ok("!app"),
                false,
            ),
            (
                json!({"matchExpressions": [{"key": "app", "operator": "Foo"}]}),
                Err("\"Foo\" is not a valid label selector operator"),
                false,
            ),
            (
                json!({"matchExpressions": [{"key": "app", "operator": "In", "values": []}]}),
                Err(
                    "values: Invalid value: []string{}: for 'in', 'notin' operators, values set can't be empty",
                ),
                false,
            ),
            (
                json!({"matchExpressions": [{"key": "app", "operator": "Exists", "values": ["x"]}]}),
                Err(
                    "values: Invalid value: []string{\"x\"}: values set must be empty for exists and does not exist",
                ),
                false,
            ),
            (
                json!("app=web"),
                Err("a label selector must be an object, got \"app=web\""),
                false,
            ),
        ];
        for (input, want, matches_web) in cases {
            match (Selector::from_label_selector(&input), want) {
                (Ok(s), Ok(w)) => {
                    assert_eq!(s.to_string(), w, "{input}");
                    assert_eq!(s.matches(&web), matches_web, "{input}");
                }
                (Err(e), Err(w)) => assert_eq!(e.to_string(), w, "{input}"),
                (got, want) => panic!("{input}: got {got:?}, want {want:?}"),
            }
        }
    }
}
