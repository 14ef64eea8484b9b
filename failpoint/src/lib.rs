//! Failpoints, as etcd has them through `go.etcd.io/gofail` (its `runtime` package: `terms.go`,
//! `http.go`, `runtime.go`): named points in a program's code where a test makes it crash, stall
//! or fail. The store and the node agent use them for their robustness and crash-restart tests.
//!
//! A crate compiles its sites in only with a `failpoints` feature of its own, which nothing turns
//! on by default (the root crate's `failpoints` feature builds the `kubelab-failpoints` binary;
//! `kubelab` itself never has it). Without it, the crate does not even link this one: its
//! `failpoint!` macro expands to `()`. With it, the crate calls [`init`] once with the names of
//! its sites, and each site calls [`eval`].
//!
//! # Setting failpoints (gofail's syntax)
//! - At start, from `KUBELAB_FAILPOINTS` (gofail's `GOFAIL_FAILPOINTS`): `name=term;name2=term`.
//!   A malformed term or an unknown name makes [`init`] fail, and the program stops.
//! - At run time over HTTP, when `KUBELAB_FAILPOINTS_HTTP=127.0.0.1:PORT` is set (gofail's
//!   `GOFAIL_HTTP`): `PUT /<name>` with the term as body sets it, `GET /<name>` reads it,
//!   `GET /<name>/count` tells how many times it fired, `DELETE /<name>` clears it, `GET /`
//!   lists every failpoint compiled in as `name=term` (empty when unset).
//!
//! A term (fail(9)'s, as gofail parses it) is `[P%][N*]action[(value)]`, and terms chain with
//! `->`: the first whose modifiers allow it fires.
//! - `off`: nothing; `return`, `return("msg")`, `return(5)`, `return(true)`: the site's failure
//!   path, with the value as its message (sites without one do nothing); `sleep(MS)` or
//!   `sleep("1s")`: the calling thread sleeps; `print`: a line on stderr; `panic` or
//!   `panic("msg")`: the process ends at once with `_exit(2)` after one line on stderr, no
//!   destructor, flush or unwinding run: a `kill -9` at exactly that point (a Go panic in etcd).
//! - `N*`: only the next N times it is reached; `P%`: with probability P (a float). Both may be
//!   given, in either order; each is checked in turn and a count is spent only if the
//!   modifiers before it allowed the term.

use std::collections::BTreeMap;
use std::io::{BufRead as _, BufReader, Read as _, Write as _};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, MutexGuard, OnceLock};
use std::time::Duration;

/// What a term does when it fires.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Action {
    Off,
    Return(String),
    Sleep(Duration),
    Print,
    Panic(Option<String>),
}

/// A modifier: `P%` or `N*`.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Mod {
    /// Fires with this probability (0..=1).
    Prob(f64),
    /// Fires this many more times.
    Count(u64),
}

#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Term {
    pub(crate) mods: Vec<Mod>,
    pub(crate) action: Action,
}

/// A failpoint's terms as set (gofail's `terms`): the chain, the text it was set with, and
/// how many times one of its terms fired.
#[derive(Debug)]
pub(crate) struct Terms {
    pub(crate) chain: Vec<Term>,
    pub(crate) desc: String,
    pub(crate) counter: u64,
}

/// Parses `term ("->" term)*`.
pub(crate) fn parse(desc: &str) -> std::result::Result<Terms, String> {
    let mut chain = Vec::new();
    let mut rest = desc.trim();
    if rest.is_empty() {
        return Err("empty term".into());
    }
    loop {
        let (term, after) = parse_term(rest).map_err(|e| format!("{desc:?}: {e}"))?;
        chain.push(term);
        if after.is_empty() {
            break;
        }
        rest = after.strip_prefix("->").ok_or_else(|| format!("{desc:?}: expected \"->\" before {after:?}"))?;
    }
    Ok(Terms { chain, desc: desc.trim().to_string(), counter: 0 })
}

/// `[P%][N*]action[(value)]`; returns the term and what follows it.
fn parse_term(mut s: &str) -> std::result::Result<(Term, &str), String> {
    let mut mods = Vec::new();
    loop {
        let digits = s.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(s.len());
        if digits == 0 {
            break;
        }
        let (num, after) = s.split_at(digits);
        if let Some(after) = after.strip_prefix('%') {
            let p: f64 = num.parse().map_err(|_| format!("bad probability {num:?}"))?;
            if !(0.0..=100.0).contains(&p) {
                return Err(format!("probability {num}% is not within 0..100"));
            }
            mods.push(Mod::Prob(p / 100.0));
            s = after;
        } else if let Some(after) = after.strip_prefix('*') {
            let n: u64 = num.parse().map_err(|_| format!("bad count {num:?}"))?;
            mods.push(Mod::Count(n));
            s = after;
        } else {
            return Err(format!("{num:?} is followed by neither % nor *"));
        }
    }
    let name_end = s.find(|c: char| !c.is_ascii_alphabetic()).unwrap_or(s.len());
    let (name, after) = s.split_at(name_end);
    let (value, rest) = parse_value(after)?;
    let action = match (name, value) {
        ("off", None) => Action::Off,
        ("return", v) => Action::Return(v.map(Value::into_string).unwrap_or_default()),
        ("sleep", Some(Value::Int(ms))) => Action::Sleep(Duration::from_millis(ms)),
        ("sleep", Some(Value::Str(d))) => Action::Sleep(parse_duration(&d)?),
        ("print", None) => Action::Print,
        ("panic", v) => Action::Panic(v.map(Value::into_string)),
        ("off" | "print" | "sleep", _) => return Err(format!("{name} takes {}", if name == "sleep" { "a duration: sleep(100) or sleep(\"1s\")" } else { "no value" })),
        _ => return Err(format!("unknown action {name:?} (off, return, sleep, print, panic)")),
    };
    Ok((Term { mods, action }, rest))
}

enum Value {
    Int(u64),
    Bool(bool),
    Str(String),
}

impl Value {
    fn into_string(self) -> String {
        match self {
            Value::Int(n) => n.to_string(),
            Value::Bool(b) => b.to_string(),
            Value::Str(s) => s,
        }
    }
}

/// `(value)` (an integer, `true`/`false`, or a double-quoted string with `\"` and `\\`
/// escapes), or nothing; `()` is nothing too.
fn parse_value(s: &str) -> std::result::Result<(Option<Value>, &str), String> {
    let Some(inner) = s.strip_prefix('(') else { return Ok((None, s)) };
    if let Some(rest) = inner.strip_prefix(')') {
        return Ok((None, rest));
    }
    if let Some(quoted) = inner.strip_prefix('"') {
        let mut out = String::new();
        let mut chars = quoted.char_indices();
        while let Some((i, c)) = chars.next() {
            match c {
                '\\' => match chars.next() {
                    Some((_, e @ ('"' | '\\'))) => out.push(e),
                    _ => return Err("only \\\" and \\\\ are escapes in a value".into()),
                },
                '"' => {
                    let rest = quoted[i + 1..].strip_prefix(')').ok_or("a quoted value must be followed by )")?;
                    return Ok((Some(Value::Str(out)), rest));
                }
                c => out.push(c),
            }
        }
        return Err("unterminated string value".into());
    }
    let end = inner.find(')').ok_or("a value must be followed by )")?;
    let (v, rest) = (&inner[..end], &inner[end + 1..]);
    let value = match v {
        "true" => Value::Bool(true),
        "false" => Value::Bool(false),
        _ => Value::Int(v.parse().map_err(|_| format!("value {v:?} is neither an integer, a boolean nor a quoted string"))?),
    };
    Ok((Some(value), rest))
}

/// A Go-style duration of one unit: `250ms`, `2s`, `1m`, `500us`, `100ns`.
fn parse_duration(d: &str) -> std::result::Result<Duration, String> {
    let split = d.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(d.len());
    let (num, unit) = d.split_at(split);
    let n: f64 = num.parse().map_err(|_| format!("bad duration {d:?}"))?;
    let secs = match unit {
        "ns" => n / 1e9,
        "us" | "µs" => n / 1e6,
        "ms" => n / 1e3,
        "s" => n,
        "m" => n * 60.0,
        "h" => n * 3600.0,
        _ => return Err(format!("bad duration {d:?} (a number and ns, us, ms, s, m or h)")),
    };
    Ok(Duration::from_secs_f64(secs))
}

impl Terms {
    /// The action of the first term whose modifiers allow it (gofail's `terms.eval`), if
    /// any; `draw` gives uniform numbers in [0, 1).
    pub(crate) fn eval(&mut self, mut draw: impl FnMut() -> f64) -> Option<Action> {
        for term in &mut self.chain {
            let allowed = term.mods.iter_mut().all(|m| match m {
                Mod::Prob(p) => draw() < *p,
                Mod::Count(0) => false,
                Mod::Count(n) => {
                    *n -= 1;
                    true
                }
            });
            if allowed {
                self.counter += 1;
                return Some(term.action.clone());
            }
        }
        None
    }
}

pub(crate) struct State {
    set: BTreeMap<&'static str, Terms>,
    /// SplitMix64's state, for `P%`.
    rng: u64,
}

impl State {
    fn draw(rng: &mut u64) -> f64 {
        *rng = rng.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = *rng;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^= z >> 31;
        (z >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// The failpoints of a process (one, [`REGISTRY`]; tests make their own).
pub(crate) struct Registry {
    /// Every failpoint compiled into the program, with its site.
    known: &'static [(&'static str, &'static str)],
    state: Mutex<State>,
    /// Whether any failpoint was ever set: until then a site does not take the lock.
    any: AtomicBool,
}


impl Registry {
    pub(crate) fn new(seed: u64, known: &'static [(&'static str, &'static str)]) -> Self {
        Self { known, state: Mutex::new(State { set: BTreeMap::new(), rng: seed }), any: AtomicBool::new(false) }
    }

    /// The known name `name` as the static string the registry keys by.
    fn known(&self, name: &str) -> Option<&'static str> {
        self.known.iter().map(|(n, _)| *n).find(|n| *n == name)
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // A panicking holder cannot leave the map half-changed: every change is one insert
        // or remove.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Sets `name` to `desc` and returns with the lock held: until the caller drops it, no
    /// site can fire the new term (gofail's `enableAndLock`, so that an HTTP `PUT` of
    /// `panic` is answered before the process ends).
    pub(crate) fn set(&self, name: &str, desc: &str) -> std::result::Result<MutexGuard<'_, State>, String> {
        let name = self.known(name).ok_or_else(|| format!("no failpoint {name:?}"))?;
        let terms = parse(desc)?;
        let mut state = self.lock();
        state.set.insert(name, terms);
        self.any.store(true, Ordering::Release);
        tracing::info!(target: "failpoint", failpoint = name, term = desc.trim(), "failpoint set");
        Ok(state)
    }

    /// The term `name` was set with, if it is set.
    pub(crate) fn status(&self, name: &str) -> Option<String> {
        self.lock().set.get(name).map(|t| t.desc.clone())
    }

    /// How many times `name` fired since it was set.
    pub(crate) fn count(&self, name: &str) -> Option<u64> {
        self.lock().set.get(name).map(|t| t.counter)
    }

    pub(crate) fn clear(&self, name: &str) -> std::result::Result<(), String> {
        let name = self.known(name).ok_or_else(|| format!("no failpoint {name:?}"))?;
        if self.lock().set.remove(name).is_some() {
            tracing::info!(target: "failpoint", failpoint = name, "failpoint cleared");
        }
        Ok(())
    }

    /// Every failpoint compiled in, sorted, with its term or "" (gofail's `GET /`).
    pub(crate) fn list(&self) -> String {
        let state = self.lock();
        let mut names: Vec<&str> = self.known.iter().map(|(n, _)| *n).collect();
        names.sort_unstable();
        names.iter().map(|n| format!("{n}={}\n", state.set.get(n).map_or("", |t| t.desc.as_str()))).collect()
    }

    /// Sets every `name=term` of `spec` (`KUBELAB_FAILPOINTS`'s syntax).
    pub(crate) fn set_all(&self, spec: &str) -> std::result::Result<(), String> {
        for item in spec.split(';').map(str::trim).filter(|s| !s.is_empty()) {
            let (name, desc) = item.split_once('=').ok_or_else(|| format!("{item:?} is not name=term"))?;
            drop(self.set(name.trim(), desc)?);
        }
        Ok(())
    }

    /// What failpoint `name` does now, its counts and probabilities spent.
    pub(crate) fn action(&self, name: &str) -> Option<Action> {
        if !self.any.load(Ordering::Acquire) {
            return None;
        }
        let mut state = self.lock();
        let State { set, rng } = &mut *state;
        set.get_mut(name)?.eval(|| State::draw(rng))
    }
}

/// The process's failpoints, once [`init`] has named them.
static REGISTRY: OnceLock<Registry> = OnceLock::new();

/// Evaluates failpoint `name` at its site (what `failpoint!` and `injected_bug!`
/// expand to): sleeps, prints or ends the process as its term says, and returns the value
/// of a `return` term.
pub fn eval(name: &'static str) -> Option<String> {
    let action = REGISTRY.get()?.action(name)?;
    tracing::info!(target: "failpoint", failpoint = name, action = ?action, "failpoint fired");
    match action {
        Action::Off => None,
        Action::Return(v) => Some(v),
        Action::Sleep(d) => {
            std::thread::sleep(d);
            None
        }
        Action::Print => {
            eprintln!("failpoint print: {name}");
            None
        }
        Action::Panic(msg) => {
            eprintln!("failpoint panic: {}", msg.as_deref().unwrap_or(name));
            // SAFETY: _exit takes an integer and does not return; it ends every thread at
            // once without running atexit handlers, destructors or flushes (a crash).
            unsafe { libc::_exit(2) }
        }
    }
}

/// Names the program's failpoints (`known`: every name with its site), sets those
/// `KUBELAB_FAILPOINTS` names and, with `KUBELAB_FAILPOINTS_HTTP`, starts the HTTP endpoint. Once
/// per process: later calls return the first one's result (members of a store started in one
/// process share them).
pub fn init(known: &'static [(&'static str, &'static str)]) -> Result<(), String> {
    static INIT: OnceLock<Result<(), String>> = OnceLock::new();
    INIT.get_or_init(|| {
        use std::hash::{BuildHasher as _, RandomState};
        let registry = REGISTRY.get_or_init(|| Registry::new(RandomState::new().hash_one(std::process::id()), known));
        if let Ok(spec) = std::env::var("KUBELAB_FAILPOINTS") {
            registry.set_all(&spec).map_err(|e| format!("KUBELAB_FAILPOINTS: {e}"))?;
        }
        if let Ok(addr) = std::env::var("KUBELAB_FAILPOINTS_HTTP") {
            let l = TcpListener::bind(addr.as_str()).map_err(|e| format!("KUBELAB_FAILPOINTS_HTTP: cannot listen on {addr}: {e}"))?;
            serve(l, registry).map_err(|e| format!("KUBELAB_FAILPOINTS_HTTP: {e}"))?;
            tracing::warn!(target: "failpoint", addr = %addr, "failpoints served over HTTP");
        }
        tracing::warn!(target: "failpoint", set = %registry.list().lines().filter(|l| !l.ends_with('=')).collect::<Vec<_>>().join(";"), "failpoints compiled in (a test build)");
        Ok(())
    })
    .clone()
}

/// Serves gofail's HTTP endpoint on `l` from a thread of its own, one request per
/// connection.
pub(crate) fn serve(l: TcpListener, registry: &'static Registry) -> std::io::Result<()> {
    std::thread::Builder::new().name("failpoints".into()).spawn(move || {
        for conn in l.incoming().flatten() {
            let _ = std::thread::Builder::new().name("failpoints".into()).spawn(move || handle(conn, registry));
        }
    })?;
    Ok(())
}

/// A request: method, path without the leading `/`, body.
fn read_request(conn: &TcpStream) -> std::io::Result<(String, String, String)> {
    let bad = |what: &str| std::io::Error::new(std::io::ErrorKind::InvalidData, what.to_string());
    let mut r = BufReader::new(conn.take(1 << 20));
    let mut line = String::new();
    r.read_line(&mut line)?;
    let mut parts = line.split_whitespace();
    let (Some(method), Some(uri)) = (parts.next(), parts.next()) else { return Err(bad("malformed request line")) };
    let (method, uri) = (method.to_string(), uri.to_string());
    let mut length = 0usize;
    loop {
        let mut h = String::new();
        if r.read_line(&mut h)? == 0 {
            return Err(bad("headers cut short"));
        }
        let h = h.trim_end();
        if h.is_empty() {
            break;
        }
        if let Some((k, v)) = h.split_once(':')
            && k.trim().eq_ignore_ascii_case("content-length")
        {
            length = v.trim().parse().map_err(|_| bad("bad Content-Length"))?;
        }
    }
    let mut body = vec![0u8; length];
    r.read_exact(&mut body)?;
    let path = uri.split('?').next().unwrap_or("").strip_prefix('/').ok_or_else(|| bad("malformed request URI"))?.to_string();
    Ok((method, path, String::from_utf8_lossy(&body).into_owned()))
}

fn respond(mut conn: &TcpStream, status: u16, body: &str) {
    let reason = match status {
        200 => "OK",
        204 => "No Content",
        400 => "Bad Request",
        404 => "Not Found",
        _ => "Method Not Allowed",
    };
    let allow = if status == 405 { "Allow: GET, PUT, DELETE\r\n" } else { "" };
    let _ = write!(
        conn,
        "HTTP/1.1 {status} {reason}\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: {}\r\n{allow}Connection: close\r\n\r\n{body}",
        body.len()
    );
    let _ = conn.flush();
}

fn handle(conn: TcpStream, registry: &'static Registry) {
    let _ = conn.set_read_timeout(Some(Duration::from_secs(5)));
    let _ = conn.set_write_timeout(Some(Duration::from_secs(1)));
    let (method, path, body) = match read_request(&conn) {
        Ok(r) => r,
        Err(e) => return respond(&conn, 400, &format!("{e}\n")),
    };
    match (method.as_str(), path.as_str()) {
        ("PUT", name) => match registry.set(name, &body) {
            // Answered with the lock held: a `panic` set here cannot fire before the client
            // has its answer.
            Ok(_locked) => respond(&conn, 204, ""),
            Err(e) => respond(&conn, 400, &format!("failed to set failpoint {name}: {e}\n")),
        },
        ("GET", "") => respond(&conn, 200, &registry.list()),
        ("GET", path) => match path.strip_suffix("/count") {
            Some(name) => match registry.count(name) {
                Some(n) => respond(&conn, 200, &format!("{n}\n")),
                None => respond(&conn, 404, &format!("failed to GET: failpoint {name} is not set\n")),
            },
            None => match registry.status(path) {
                Some(desc) => respond(&conn, 200, &format!("{desc}\n")),
                None if registry.known(path).is_some() => respond(&conn, 404, &format!("failed to GET: failpoint {path} is not set\n")),
                None => respond(&conn, 404, &format!("failed to GET: no failpoint {path:?}\n")),
            },
        },
        ("DELETE", name) => match registry.clear(name) {
            Ok(()) => respond(&conn, 204, ""),
            Err(e) => respond(&conn, 400, &format!("failed to delete failpoint {name}: {e}\n")),
        },
        _ => respond(&conn, 405, "Method not allowed\n"),
    }
}

#[cfg(test)]
mod tests {
    use std::io::{Read as _, Write as _};

    use super::*;

    /// The failpoints of the tests' registries.
    const KNOWN: &[(&str, &str)] = &[
        ("raftBeforeSave", "a"),
        ("raftAfterSave", "b"),
        ("walBeforeSync", "c"),
        ("walAfterSync", "d"),
        ("bugStaleRead", "e"),
        ("bugWatchSkip", "f"),
    ];

    fn term(mods: Vec<Mod>, action: Action) -> Term {
        Term { mods, action }
    }

    #[test]
    fn failpoint_terms_parse_as_gofail_parses_them() {
        use Action::*;
        let ms = Duration::from_millis;
        let cases: &[(&str, Vec<Term>)] = &[
            ("off", vec![term(vec![], Off)]),
            ("return", vec![term(vec![], Return(String::new()))]),
            ("return()", vec![term(vec![], Return(String::new()))]),
            ("return(\"disk on fire\")", vec![term(vec![], Return("disk on fire".into()))]),
            ("return(\"a \\\"q\\\" \\\\ b\")", vec![term(vec![], Return("a \"q\" \\ b".into()))]),
            ("return(5)", vec![term(vec![], Return("5".into()))]),
            ("return(true)", vec![term(vec![], Return("true".into()))]),
            ("sleep(200)", vec![term(vec![], Sleep(ms(200)))]),
            ("sleep(\"1.5s\")", vec![term(vec![], Sleep(ms(1500)))]),
            ("sleep(\"250ms\")", vec![term(vec![], Sleep(ms(250)))]),
            ("panic", vec![term(vec![], Panic(None))]),
            ("panic(\"boom\")", vec![term(vec![], Panic(Some("boom".into())))]),
            ("print", vec![term(vec![], Print)]),
            (" 3*return \n", vec![term(vec![Mod::Count(3)], Return(String::new()))]),
            ("50%sleep(10)", vec![term(vec![Mod::Prob(0.5)], Sleep(ms(10)))]),
            ("12.5%2*panic", vec![term(vec![Mod::Prob(0.125), Mod::Count(2)], Panic(None))]),
            ("1*sleep(100)->return(\"x\")", vec![term(vec![Mod::Count(1)], Sleep(ms(100))), term(vec![], Return("x".into()))]),
        ];
        for (desc, want) in cases {
            let got = parse(desc).unwrap_or_else(|e| panic!("{desc:?}: {e}"));
            assert_eq!(&got.chain, want, "{desc:?}");
            assert_eq!(got.desc, desc.trim());
        }
    }

    #[test]
    fn failpoint_malformed_terms_are_refused() {
        for desc in [
            "",
            "explode",
            "retrun",
            "sleep",
            "sleep(\"soon\")",
            "off(1)",
            "print(\"x\")",
            "3return",
            "3%",
            "101%return",
            "return(\"open",
            "return(x)",
            "return(1",
            "return->",
            "return->->panic",
            "return panic",
            "1*return;panic",
        ] {
            assert!(parse(desc).is_err(), "{desc:?} parsed");
        }
    }

    fn fire(t: &mut Terms) -> Option<Action> {
        t.eval(|| 0.5)
    }

    #[test]
    fn failpoint_count_fires_n_times_then_falls_through_the_chain() {
        let mut t = parse("2*return(\"a\")->1*sleep(1)").unwrap();
        assert_eq!(fire(&mut t), Some(Action::Return("a".into())));
        assert_eq!(fire(&mut t), Some(Action::Return("a".into())));
        assert_eq!(fire(&mut t), Some(Action::Sleep(Duration::from_millis(1))));
        assert_eq!(fire(&mut t), None, "every count spent: nothing fires");
        assert_eq!(t.counter, 3);

        let mut t = parse("0*panic").unwrap();
        assert_eq!(fire(&mut t), None, "0* never fires");
        assert_eq!(t.counter, 0);

        let mut t = parse("off").unwrap();
        assert_eq!(fire(&mut t), Some(Action::Off), "off fires, doing nothing");
    }

    #[test]
    fn failpoint_probability_and_count_combine_in_order() {
        // The draw is compared with P: below it, the term fires.
        let mut t = parse("30%return").unwrap();
        assert_eq!(t.eval(|| 0.29), Some(Action::Return(String::new())));
        assert_eq!(t.eval(|| 0.30), None);
        assert_eq!(parse("0%return").unwrap().eval(|| 0.0), None, "0% never fires");
        assert!(parse("100%return").unwrap().eval(|| 0.999_999).is_some(), "100% always fires");

        // P% before N*: a count is spent only when the probability allowed the term.
        let mut t = parse("50%1*return").unwrap();
        assert_eq!(t.eval(|| 0.9), None);
        assert_eq!(t.eval(|| 0.1), Some(Action::Return(String::new())));
        assert_eq!(t.eval(|| 0.1), None, "the one count was spent by the firing");
        // N* before P%: the count is spent even when the probability then says no.
        let mut t = parse("1*50%return").unwrap();
        assert_eq!(t.eval(|| 0.9), None);
        assert_eq!(t.eval(|| 0.1), None, "the count went on the first, unlucky, evaluation");
    }

    #[test]
    fn failpoint_probability_fires_about_as_often_as_asked() {
        let r = Registry::new(42, KNOWN);
        drop(r.set("bugStaleRead", "25%return").unwrap());
        let fired = (0..20_000).filter(|_| r.action("bugStaleRead").is_some()).count();
        assert!((4_500..5_500).contains(&fired), "25% of 20,000 fired {fired} times");
        assert_eq!(r.count("bugStaleRead"), Some(fired as u64));
    }

    #[test]
    fn failpoint_registry_sets_reads_lists_and_clears() {
        let r = Registry::new(1, KNOWN);
        assert_eq!(r.action("raftBeforeSave"), None, "nothing set: nothing fires");
        r.set_all(" raftBeforeSave=1*panic ; walBeforeSync=sleep(200);;").unwrap();
        assert_eq!(r.status("raftBeforeSave").as_deref(), Some("1*panic"));
        assert_eq!(r.status("walBeforeSync").as_deref(), Some("sleep(200)"));
        assert_eq!(r.status("walAfterSync"), None);
        let list = r.list();
        assert_eq!(list.lines().count(), KNOWN.len(), "every failpoint compiled in is listed");
        assert!(list.contains("raftBeforeSave=1*panic\n") && list.contains("walAfterSync=\n"), "{list}");
        assert_eq!(r.action("raftBeforeSave"), Some(Action::Panic(None)));
        assert_eq!(r.action("raftBeforeSave"), None);
        assert_eq!(r.count("raftBeforeSave"), Some(1));
        r.clear("walBeforeSync").unwrap();
        assert_eq!(r.action("walBeforeSync"), None);
        // Setting again replaces the term and its counts.
        drop(r.set("raftBeforeSave", "return(\"again\")").unwrap());
        assert_eq!(r.action("raftBeforeSave"), Some(Action::Return("again".into())));

        assert!(r.set_all("noSuchFailpoint=return").is_err(), "a typo is refused, not ignored");
        assert!(r.set_all("raftAfterSave").is_err());
        assert!(r.set_all("raftAfterSave=explode").is_err());
        assert!(r.clear("noSuchFailpoint").is_err());
    }

    /// One request over a fresh connection: (status, body).
    fn request(addr: std::net::SocketAddr, method: &str, path: &str, body: &str) -> (u16, String) {
        let mut c = TcpStream::connect(addr).unwrap();
        write!(c, "{method} {path} HTTP/1.1\r\nHost: x\r\nContent-Length: {}\r\n\r\n{body}", body.len()).unwrap();
        let mut resp = String::new();
        c.read_to_string(&mut resp).unwrap();
        let status = resp.split_whitespace().nth(1).unwrap().parse().unwrap();
        let body = resp.split_once("\r\n\r\n").unwrap().1.to_string();
        (status, body)
    }

    #[test]
    fn failpoint_http_endpoint_speaks_gofail() {
        let registry: &'static Registry = Box::leak(Box::new(Registry::new(7, KNOWN)));
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        serve(l, registry).unwrap();

        assert_eq!(request(addr, "PUT", "/walBeforeSync", "sleep(200)\n"), (204, String::new()));
        assert_eq!(registry.status("walBeforeSync").as_deref(), Some("sleep(200)"));
        assert_eq!(request(addr, "GET", "/walBeforeSync", ""), (200, "sleep(200)\n".into()));
        assert_eq!(request(addr, "GET", "/walBeforeSync/count", ""), (200, "0\n".into()));
        let (status, list) = request(addr, "GET", "/", "");
        assert_eq!(status, 200);
        assert!(list.contains("walBeforeSync=sleep(200)\n") && list.contains("bugWatchSkip=\n"), "{list}");
        assert_eq!(request(addr, "PUT", "/walBeforeSync", "explode").0, 400, "a bad term is refused");
        assert_eq!(registry.status("walBeforeSync").as_deref(), Some("sleep(200)"), "and changes nothing");
        assert_eq!(request(addr, "PUT", "/noSuchFailpoint", "return").0, 400);
        assert_eq!(request(addr, "DELETE", "/walBeforeSync", ""), (204, String::new()));
        assert_eq!(registry.status("walBeforeSync"), None);
        assert_eq!(request(addr, "GET", "/walBeforeSync", "").0, 404);
        assert_eq!(request(addr, "GET", "/noSuchFailpoint", "").0, 404);
        assert_eq!(request(addr, "POST", "/walBeforeSync", "return").0, 405);
    }
}
