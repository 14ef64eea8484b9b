//! A checker for mermaid's `sequenceDiagram` grammar, so a test can tell whether
//! `kubelab trace --mermaid` output would render, without a browser.
//!
//! It follows mermaid's own lexer (packages/mermaid/src/diagrams/sequence/parser: statements end at
//! a newline or `;`; `#` and `%%` start comments that run to the end of the line; an actor name
//! is a run of characters other than `+<>:,;@#`, blanks and arrow-forming hyphens; a message is
//! `actor arrow [+|-]actor :text`) and covers the statements a trace can use: the header,
//! `participant`/`actor` with an optional alias, messages with any of mermaid's arrows, notes,
//! `autonumber`, `activate`/`deactivate`, `title`, and the blocks (`loop`, `alt`/`else`, `opt`,
//! `par`/`and`, `critical`/`option`, `break`, `rect`) closed by `end`. Anything else is an error.
//! Where mermaid would accept a line but silently cut its text short (a `#`, `;` or `%%` inside a
//! message), this checker refuses it: for generated output that is a bug, not a comment.

/// What a diagram declares and says.
#[derive(Debug, Default, PartialEq)]
pub struct Diagram {
    /// Declared participants: (id, display name).
    pub participants: Vec<(String, String)>,
    /// Messages: (from, arrow, to, text).
    pub messages: Vec<(String, String, String, String)>,
}

impl Diagram {
    /// Participants declared but never on a message's end.
    pub fn unused_participants(&self) -> Vec<&str> {
        self.participants
            .iter()
            .map(|(id, _)| id.as_str())
            .filter(|id| !self.messages.iter().any(|(f, _, t, _)| f == id || t == id))
            .collect()
    }
}

/// Arrows, longest first so that a prefix never wins.
const ARROWS: [&str; 10] = ["<<-->>", "<<->>", "-->>", "->>", "-->", "->", "--x", "-x", "--)", "-)"];
const BLOCKS: [&str; 8] = ["loop", "alt", "opt", "par", "par_over", "critical", "break", "rect"];
const BLOCK_CONTINUATIONS: [&str; 3] = ["else", "and", "option"];

/// Parses `src`; an error names the line and what is wrong with it.
pub fn parse(src: &str) -> Result<Diagram, String> {
    let mut d = Diagram::default();
    let mut lines = src.lines().enumerate().filter(|(_, l)| !l.trim().is_empty());
    match lines.next() {
        Some((_, l)) if l.trim() == "sequenceDiagram" => {}
        other => return Err(format!("the first line must be `sequenceDiagram`, not {:?}", other.map(|(_, l)| l))),
    }
    let mut depth: Vec<(usize, &str)> = Vec::new();
    for (n, line) in lines {
        let at = |e: String| format!("line {}: {e}: {line:?}", n + 1);
        if line.contains(';') {
            return Err(at("`;` ends a statement here; mermaid would read the rest as another".into()));
        }
        let body = line.trim();
        if body.starts_with("%%") {
            continue;
        }
        if body.contains('#') || body.contains("%%") {
            return Err(at("`#` and `%%` start comments; mermaid would drop the rest of the line".into()));
        }
        let (word, rest) = body.split_once(char::is_whitespace).map_or((body, ""), |(w, r)| (w, r.trim()));
        match word {
            "participant" | "actor" => {
                let (id, alias) = match rest.split_once(" as ") {
                    Some((id, alias)) => (id.trim(), alias.trim()),
                    None => (rest, rest),
                };
                let (name, tail) = actor(id).ok_or_else(|| at(format!("{id:?} is not an actor name")))?;
                if !tail.trim().is_empty() || alias.is_empty() {
                    return Err(at("expected `participant <id> [as <name>]`".into()));
                }
                if d.participants.iter().any(|(p, _)| p == name) {
                    return Err(at(format!("participant {name} declared twice")));
                }
                d.participants.push((name.to_string(), alias.to_string()));
            }
            "autonumber" | "end" if rest.is_empty() || word == "autonumber" => {
                if word == "end" && depth.pop().is_none() {
                    return Err(at("`end` without a block".into()));
                }
            }
            "activate" | "deactivate" => {
                let (name, tail) = actor(rest).ok_or_else(|| at("expected an actor".into()))?;
                if !tail.trim().is_empty() {
                    return Err(at(format!("unexpected {tail:?} after {name}")));
                }
            }
            "title" => {}
            w if BLOCKS.contains(&w) => depth.push((n + 1, w)),
            w if BLOCK_CONTINUATIONS.contains(&w) => {
                if depth.is_empty() {
                    return Err(at(format!("`{w}` outside a block")));
                }
            }
            w if w.eq_ignore_ascii_case("note") => {
                let placed = ["left of", "right of", "over"].iter().find_map(|p| rest.strip_prefix(p)).ok_or_else(|| at("a note is `left of`, `right of` or `over`".into()))?;
                let (_, after) = actor(placed.trim_start()).ok_or_else(|| at("a note needs an actor".into()))?;
                let after = after.trim_start();
                let after = match after.strip_prefix(',') {
                    Some(more) => actor(more.trim_start()).ok_or_else(|| at("expected a second actor after `,`".into()))?.1.trim_start(),
                    None => after,
                };
                if !after.starts_with(':') {
                    return Err(at("a note needs `: text`".into()));
                }
            }
            _ => {
                let (from, rest) = actor(body).ok_or_else(|| at("not a statement mermaid knows".into()))?;
                let rest = rest.trim_start();
                let arrow = ARROWS.iter().find(|a| rest.starts_with(**a)).ok_or_else(|| at(format!("expected an arrow after {from}")))?;
                let rest = rest[arrow.len()..].trim_start();
                let rest = rest.strip_prefix(['+', '-']).unwrap_or(rest).trim_start();
                let (to, rest) = actor(rest).ok_or_else(|| at(format!("expected an actor after {arrow}")))?;
                let text = rest.trim_start().strip_prefix(':').ok_or_else(|| at("a message needs `: text`".into()))?;
                d.messages.push((from.into(), (*arrow).into(), to.into(), text.trim().into()));
            }
        }
    }
    if let Some((line, w)) = depth.pop() {
        return Err(format!("line {line}: `{w}` is never closed with `end`"));
    }
    // mermaid creates an undeclared actor on first use; a generated diagram declares all of its.
    for (f, _, t, _) in &d.messages {
        for a in [f, t] {
            if !d.participants.iter().any(|(p, _)| p == a) {
                return Err(format!("message between undeclared participant {a}"));
            }
        }
    }
    Ok(d)
}

/// An actor name at the start of `s`, and what follows it (mermaid's ACTOR token: no blanks or
/// `+<>:,;@#`, and a hyphen only where it cannot start an arrow).
fn actor(s: &str) -> Option<(&str, &str)> {
    let plain = |c: char| !(c.is_whitespace() || "+<>:,;@#-".contains(c));
    let b = s.as_bytes();
    let mut i = s.find(|c: char| !plain(c)).unwrap_or(s.len());
    if i == 0 {
        return None;
    }
    // `-word` and `--word` continue a name unless they begin an arrow (`-x`, `-)`, `->`).
    while i < b.len() && b[i] == b'-' {
        let hyphens = b[i..].iter().take_while(|c| **c == b'-').count();
        let next = b.get(i + hyphens).copied().unwrap_or(b'\n');
        let continues = next.is_ascii_alphanumeric() || next == b'_';
        let arrowish = hyphens <= 2 && matches!(next, b'x' | b')');
        if !continues || arrowish {
            break;
        }
        i += hyphens;
        i += s[i..].find(|c: char| !plain(c)).unwrap_or(s.len() - i);
    }
    Some((&s[..i], &s[i..]))
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = "sequenceDiagram\n    participant U as User\n    participant API as API Server\n    participant my-db as etcd (kubelab store)\n    U->>API: request create pods 12.0 ms (+0 ms)\n    API-->>+my-db: store write: revision 7\n    my-db->>my-db: apply 0.1 ms\n    Note over U,API: a note\n    loop every 10 s\n    API-)U: watch event sent ADDED\n    end\n";

    #[test]
    fn a_well_formed_diagram_parses_with_its_participants_and_messages() {
        let d = parse(GOOD).expect("parses");
        assert_eq!(d.participants.iter().map(|(p, _)| p.as_str()).collect::<Vec<_>>(), ["U", "API", "my-db"]);
        assert_eq!(d.participants[2].1, "etcd (kubelab store)");
        assert_eq!(d.messages.len(), 4);
        assert_eq!(d.messages[1], ("API".into(), "-->>".into(), "my-db".into(), "store write: revision 7".into()));
        assert!(d.unused_participants().is_empty());
    }

    #[test]
    fn what_mermaid_would_reject_or_cut_short_is_an_error() {
        let bad = [
            ("graph TD\nA-->B\n", "first line"),
            ("sequenceDiagram\nparticipant A\nA->>A text without colon\n", "needs `: text`"),
            ("sequenceDiagram\nparticipant A\nA=>>A: wrong arrow\n", "expected an arrow"),
            ("sequenceDiagram\nparticipant A\nA->>A: 3 ms; then more\n", "`;`"),
            ("sequenceDiagram\nparticipant A\nA->>A: issue #4\n", "comments"),
            ("sequenceDiagram\nparticipant A\nA->>A: 50%% done\n", "comments"),
            ("sequenceDiagram\nparticipant A\nA->>B: to an undeclared one\n", "undeclared participant B"),
            ("sequenceDiagram\nparticipant A\nloop forever\nA->>A: x\n", "never closed"),
            ("sequenceDiagram\nparticipant A\nend\n", "without a block"),
            ("sequenceDiagram\nparticipant A\nparticipant A\n", "declared twice"),
            ("sequenceDiagram\nparticipant A\nNote beside A: x\n", "left of"),
        ];
        for (src, want) in bad {
            let e = parse(src).expect_err(src);
            assert!(e.contains(want), "{src:?}: {e}");
        }
    }

    #[test]
    fn a_hyphenated_name_ends_where_an_arrow_begins() {
        assert_eq!(actor("my-db->>x"), Some(("my-db", "->>x")));
        assert_eq!(actor("A-xB"), Some(("A", "-xB")));
        assert_eq!(actor("A--)B"), Some(("A", "--)B")));
        assert_eq!(actor("->>x"), None);
    }
}
