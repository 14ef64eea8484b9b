//! Mirrors kubelet's pkg/credentialprovider/keyring.go: `BasicDockerKeyring`, an index of
//! credentials by registry URL, looked up by an image's repository.
//!
//! How a lookup matches (`URLsMatch`), key against image:
//! 1. Both are read as URLs without a scheme (`ParseSchemelessURL`): a host, an optional port,
//!    an optional path. A key's `https://`/`http://` goes, and so does a `/v1/` or `/v2/` path
//!    (docker's way of naming a registry's API, not a repository).
//! 2. The ports are equal (none and none, or the same number).
//! 3. The hosts have as many DNS labels, and each label of the key matches the image's as a
//!    glob (`filepath.Match`): `*.example.com` matches `a.example.com`, not `example.com` nor
//!    `a.b.example.com`; `k8s.*.io`, `*-good.example.com` and `app[0-9].io` work too (not `?`,
//!    which starts a URL's query).
//! 4. The key's path is a string prefix of the image's (`quay.io/team` matches
//!    `quay.io/team/app` and `quay.io/teamwork`, as in kubelet).
//!
//! Keys are tried longest first — reverse string order, kubelet's `sort.Reverse` — and every
//! match counts, so an image gets the credentials of `quay.io/team` before those of `quay.io`;
//! the pull tries them in turn. Only when nothing matches do an image of Docker Hub's
//! (`busybox`, `docker.io/…`, `index.docker.io/…`) get the credentials of `index.docker.io`
//! (`https://index.docker.io/v1/`, as `docker login` writes it).

use std::collections::HashMap;

use super::config::DockerConfig;

/// keyring.go's `AuthConfig`: credentials a pull is tried with.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct AuthConfig {
    pub(crate) username: String,
    pub(crate) password: String,
    pub(crate) email: String,
}

/// `BasicDockerKeyring`: credentials by key, and the keys in the order they are tried.
#[derive(Clone, Debug, Default)]
pub(crate) struct BasicDockerKeyring {
    index: Vec<String>,
    creds: HashMap<String, Vec<AuthConfig>>,
}

/// Docker Hub's key once `Add` has normalised it (`https://index.docker.io/v1/` →
/// `index.docker.io`): `defaultRegistryHost`.
const DEFAULT_REGISTRY_HOST: &str = "index.docker.io";

impl BasicDockerKeyring {
    /// `Add`: index `cfg`'s entries. A key that is not a URL is skipped, as kubelet skips it.
    pub(crate) fn add(&mut self, cfg: &DockerConfig) {
        for (loc, ident) in cfg {
            let value = if loc.starts_with("https://") || loc.starts_with("http://") { loc.clone() } else { format!("https://{loc}") };
            let parsed = match parse_url(&value) {
                Ok(p) => p,
                Err(e) => {
                    tracing::warn!(target: "kubelet::credentialprovider", entry = %loc, error = %e, "entry in dockercfg invalid, ignoring");
                    continue;
                }
            };
            // docker's ResolveAuthConfig takes `/v1/` and `/v2/` for the bare host.
            let path = if parsed.path.starts_with("/v2/") || parsed.path.starts_with("/v1/") { &parsed.path[3..] } else { parsed.path.as_str() };
            let key = if !path.is_empty() && path != "/" { format!("{}{path}", parsed.host) } else { parsed.host.clone() };
            self.creds.entry(key.clone()).or_default().push(AuthConfig { username: ident.username.clone(), password: ident.password.clone(), email: ident.email.clone() });
            self.index.push(key);
        }
        // More specific keys first: reverse-sorted, so `quay.io/team` comes before `quay.io`.
        self.index.sort();
        self.index.dedup();
        self.index.reverse();
    }

    /// `Lookup`: every credential whose key matches `image` (a repository, as
    /// [`super::parse_image_name`] gives it), most specific key first.
    pub(crate) fn lookup(&self, image: &str) -> Vec<AuthConfig> {
        let ret: Vec<AuthConfig> =
            self.index.iter().filter(|k| urls_match_str(k, image).unwrap_or(false)).flat_map(|k| self.creds.get(k).into_iter().flatten().cloned()).collect();
        if !ret.is_empty() {
            return ret;
        }
        match self.creds.get(DEFAULT_REGISTRY_HOST) {
            Some(hub) if is_default_registry_match(image) => hub.clone(),
            _ => vec![],
        }
    }
}

/// `UnionDockerKeyring`: the credentials of each keyring in turn (the pod's pull secrets, then
/// the node's docker config, then the credential provider plugins).
pub(crate) fn union_lookup(keyrings: &[&BasicDockerKeyring], image: &str) -> Vec<AuthConfig> {
    keyrings.iter().flat_map(|k| k.lookup(image)).collect()
}

/// `isDefaultRegistryMatch`: whether `image` is pulled from Docker Hub — no registry host in
/// front (a first part without `.` or `:`), or `docker.io`/`index.docker.io`.
pub(crate) fn is_default_registry_match(image: &str) -> bool {
    let mut parts = image.splitn(2, '/');
    let first = parts.next().unwrap_or_default();
    if first.is_empty() {
        return false;
    }
    if parts.next().is_none() {
        return true;
    }
    if first == "docker.io" || first == "index.docker.io" {
        return true;
    }
    !first.contains(['.', ':'])
}

/// A URL as Go's `url.Parse` splits it, of the parts the keyring uses.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Url {
    /// Host and port (`registry.example.com:5000`).
    pub(crate) host: String,
    /// The path, unescaped (`/team/app`), or empty.
    pub(crate) path: String,
}

/// `ParseSchemelessURL`: `url.Parse("https://" + s)`.
pub(crate) fn parse_schemeless_url(s: &str) -> Result<Url, String> {
    parse_url(&format!("https://{s}"))
}

/// Go's `url.Parse` of a `scheme://authority/path?query#fragment` URL, with its error messages
/// (`parse "https://a b": invalid character " " in host name`), for the checks that matter
/// here: control characters, the host's characters, the port's digits, `%` escapes.
pub(crate) fn parse_url(raw: &str) -> Result<Url, String> {
    let fail = |why: String| format!("parse {}: {why}", go_quote(raw));
    if raw.bytes().any(|b| b < 0x20 || b == 0x7f) {
        return Err(fail("net/url: invalid control character in URL".into()));
    }
    let without_fragment = raw.split('#').next().unwrap_or_default();
    let without_query = without_fragment.split('?').next().unwrap_or_default();
    let rest = without_query.split_once("://").map_or(without_query, |(_, r)| r);
    let (authority, path) = match rest.find('/') {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, ""),
    };
    let host = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    // The port: digits after the last colon (after the `]` of an IPv6 literal).
    let port_at = if host.starts_with('[') {
        match host.find(']') {
            Some(i) => Some(i + 1).filter(|&j| j < host.len()),
            None => return Err(fail("missing ']' in host".into())),
        }
    } else {
        host.rfind(':')
    };
    if let Some(i) = port_at {
        let port = &host[i..];
        if !port.starts_with(':') || !port[1..].bytes().all(|b| b.is_ascii_digit()) {
            return Err(fail(format!("invalid port {} after host", go_quote(port))));
        }
    }
    let host = unescape(host, true).map_err(fail)?;
    let path = unescape(path, false).map_err(fail)?;
    Ok(Url { host, path })
}

/// Go's `unescape` in `encodeHost` or `encodePath` mode.
fn unescape(s: &str, host: bool) -> Result<String, String> {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        if b == b'%' {
            let hex = |c: u8| (c as char).to_digit(16);
            match (bytes.get(i + 1).and_then(|&c| hex(c)), bytes.get(i + 2).and_then(|&c| hex(c))) {
                (Some(h), Some(l)) => {
                    out.push((h * 16 + l) as u8);
                    i += 3;
                    continue;
                }
                _ => return Err(format!("invalid URL escape {}", go_quote(&s[i..(i + 3).min(s.len())]))),
            }
        }
        if host && b < 0x80 && !(b.is_ascii_alphanumeric() || b"-_.~!$&'()*+,;=:[]<>\"".contains(&b)) {
            return Err(format!("invalid character {} in host name", go_quote(&(b as char).to_string())));
        }
        out.push(b);
        i += 1;
    }
    Ok(String::from_utf8_lossy(&out).into_owned())
}

/// Go's `%q` for the strings here (JSON's quoting agrees for printable ASCII).
fn go_quote(s: &str) -> String {
    serde_json::Value::from(s).to_string()
}

/// `splitURL`: the host's DNS labels and the port (`net.SplitHostPort`; no port when it fails).
fn split_url(url: &Url) -> (Vec<&str>, &str) {
    let h = url.host.as_str();
    let (host, port) = if let Some(rest) = h.strip_prefix('[') {
        match rest.split_once(']') {
            Some((ip, tail)) => match tail.strip_prefix(':') {
                Some(port) => (ip, port),
                None => (h, ""),
            },
            None => (h, ""),
        }
    } else {
        match h.split_once(':') {
            Some((host, port)) if !port.contains(':') => (host, port),
            _ => (h, ""),
        }
    };
    (host.split('.').collect(), port)
}

/// `URLsMatchStr`: `URLsMatch` of two schemeless URLs.
pub(crate) fn urls_match_str(glob: &str, target: &str) -> Result<bool, String> {
    urls_match(&parse_schemeless_url(glob)?, &parse_schemeless_url(target)?)
}

/// `URLsMatch`: whether `target` matches `glob`, whose host labels may be globs (the steps are
/// in the module's doc). No globs in ports or paths.
pub(crate) fn urls_match(glob: &Url, target: &Url) -> Result<bool, String> {
    let (glob_parts, glob_port) = split_url(glob);
    let (target_parts, target_port) = split_url(target);
    // Step 2: the ports.
    if glob_port != target_port {
        return Ok(false);
    }
    // Step 3 (first half): as many labels.
    if glob_parts.len() != target_parts.len() {
        return Ok(false);
    }
    // Step 4: the credential's path is a prefix of the image's.
    if !target.path.starts_with(&glob.path) {
        return Ok(false);
    }
    // Step 3: each label matches.
    for (g, t) in glob_parts.iter().zip(&target_parts) {
        if !filepath_match(g, t)? {
            return Ok(false);
        }
    }
    Ok(true)
}

/// One element of a `filepath.Match` pattern.
#[derive(Debug)]
enum GlobToken {
    Literal(char),
    /// `?`
    Any,
    /// `*`
    Star,
    /// `[…]`, `[^…]`: inclusive ranges.
    Class { negated: bool, ranges: Vec<(char, char)> },
}

/// Go's `filepath.Match` (Unix): `*` any run of characters but `/`, `?` one, `[a-z]`/`[^…]` a
/// class, `\` escapes. A malformed pattern is `syntax error in pattern` (`ErrBadPattern`).
pub(crate) fn filepath_match(pattern: &str, name: &str) -> Result<bool, String> {
    let tokens = glob_tokens(pattern).ok_or_else(|| "syntax error in pattern".to_string())?;
    let name: Vec<char> = name.chars().collect();
    Ok(glob_match(&tokens, &name))
}

fn glob_tokens(pattern: &str) -> Option<Vec<GlobToken>> {
    let mut tokens = vec![];
    let mut chars = pattern.chars().peekable();
    // getEsc: one character of a class, maybe escaped; `-` and `]` must be escaped there.
    fn class_char(chars: &mut std::iter::Peekable<std::str::Chars<'_>>) -> Option<char> {
        match chars.next()? {
            '-' | ']' => None,
            '\\' => chars.next(),
            c => Some(c),
        }
    }
    while let Some(c) = chars.next() {
        tokens.push(match c {
            '*' => GlobToken::Star,
            '?' => GlobToken::Any,
            '\\' => GlobToken::Literal(chars.next()?),
            '[' => {
                let negated = chars.next_if_eq(&'^').is_some();
                let mut ranges = vec![];
                loop {
                    if chars.peek() == Some(&']') && !ranges.is_empty() {
                        chars.next();
                        break;
                    }
                    let lo = class_char(&mut chars)?;
                    let hi = if chars.next_if_eq(&'-').is_some() { class_char(&mut chars)? } else { lo };
                    ranges.push((lo, hi));
                }
                GlobToken::Class { negated, ranges }
            }
            c => GlobToken::Literal(c),
        });
    }
    Some(tokens)
}

fn glob_match(tokens: &[GlobToken], name: &[char]) -> bool {
    match tokens.split_first() {
        None => name.is_empty(),
        Some((GlobToken::Star, rest)) => (0..=name.len()).take_while(|&i| i == 0 || name[i - 1] != '/').any(|i| glob_match(rest, &name[i..])),
        Some((t, rest)) => {
            let Some((&c, name_rest)) = name.split_first() else { return false };
            let one = match t {
                GlobToken::Literal(l) => *l == c,
                GlobToken::Any => c != '/',
                GlobToken::Class { negated, ranges } => ranges.iter().any(|&(lo, hi)| lo <= c && c <= hi) != *negated,
                GlobToken::Star => false,
            };
            one && glob_match(rest, name_rest)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::config::DockerConfigEntry;
    use super::*;

    fn keyring(entries: &[(&str, &str)]) -> BasicDockerKeyring {
        let mut k = BasicDockerKeyring::default();
        k.add(&entries.iter().map(|(key, user)| (key.to_string(), DockerConfigEntry { username: user.to_string(), password: "p".into(), email: String::new() })).collect());
        k
    }

    fn users(creds: &[AuthConfig]) -> Vec<&str> {
        creds.iter().map(|c| c.username.as_str()).collect()
    }

    /// keyring_test.go's TestURLsMatch.
    #[test]
    fn urls_match_as_kubelets() {
        for (glob, target, want) in [
            // match when there is no path component
            ("*.kubernetes.io", "prefix.kubernetes.io", true),
            ("prefix.*.io", "prefix.kubernetes.io", true),
            ("prefix.kubernetes.*", "prefix.kubernetes.io", true),
            ("*-good.kubernetes.io", "prefix-good.kubernetes.io", true),
            // match with path components
            ("*.kubernetes.io/blah", "prefix.kubernetes.io/blah", true),
            ("prefix.*.io/foo", "prefix.kubernetes.io/foo/bar", true),
            // match with path components and ports
            ("*.kubernetes.io:1111/blah", "prefix.kubernetes.io:1111/blah", true),
            ("prefix.*.io:1111/foo", "prefix.kubernetes.io:1111/foo/bar", true),
            // no match when number of parts mismatch
            ("*.kubernetes.io", "kubernetes.io", false),
            ("*.*.kubernetes.io", "prefix.kubernetes.io", false),
            ("*.*.kubernetes.io", "kubernetes.io", false),
            // no match when some parts mismatch
            ("kubernetes.io", "kubernetes.com", false),
            ("k*.io", "quay.io", false),
            // no match when ports mismatch
            ("*.kubernetes.io:1234/blah", "prefix.kubernetes.io:1111/blah", false),
            ("prefix.*.io/foo", "prefix.kubernetes.io:1111/foo/bar", false),
            // a glob matches one label only; classes work; `?` does not, as a URL's query
            ("*.io", "a.b.io", false),
            ("app?.io", "app1.io", false),
            ("app[0-9].io", "app7.io", true),
        ] {
            assert_eq!(urls_match_str(glob, target), Ok(want), "{glob} vs {target}");
        }
        // A URL's host has no `^`: a negated class is not a key.
        assert_eq!(urls_match_str("app[^0-9].io", "app7.io"), Err(r#"parse "https://app[^0-9].io": invalid character "^" in host name"#.into()));
        assert_eq!(urls_match_str("app[.io", "app1.io"), Err("syntax error in pattern".into()));
        assert_eq!(urls_match_str("[.io", "a.io"), Err(r#"parse "https://[.io": missing ']' in host"#.into()));
    }

    /// keyring_test.go's TestDockerKeyringForGlob: each key finds `<target>/foo/bar`.
    #[test]
    fn glob_keys_hit() {
        for (key, target) in [
            ("https://hello.kubernetes.io", "hello.kubernetes.io"),
            ("https://*.docker.io", "prefix.docker.io"),
            ("https://prefix.*.io", "prefix.docker.io"),
            ("https://prefix.docker.*", "prefix.docker.io"),
            ("https://*.docker.io/path", "prefix.docker.io/path"),
            ("https://prefix.*.io/path", "prefix.docker.io/path/subpath"),
            ("https://prefix.docker.*/path", "prefix.docker.io/path"),
            ("https://*.docker.io:8888", "prefix.docker.io:8888"),
            ("https://prefix.*.io:8888", "prefix.docker.io:8888"),
            ("https://prefix.docker.*:8888", "prefix.docker.io:8888"),
            ("https://*.docker.io/path:1111", "prefix.docker.io/path:1111"),
            ("https://*.docker.io/v1/", "prefix.docker.io/path:1111"),
            ("https://*.docker.io/v2/", "prefix.docker.io/path:1111"),
            ("https://prefix.docker.*/path:1111", "prefix.docker.io/path:1111"),
            ("prefix.docker.io:1111", "prefix.docker.io:1111/path"),
            ("*.docker.io:1111", "prefix.docker.io:1111/path"),
        ] {
            assert_eq!(users(&keyring(&[(key, "foo")]).lookup(&format!("{target}/foo/bar"))), ["foo"], "{key} vs {target}");
        }
    }

    /// keyring_test.go's TestKeyringMiss and TestKeyringMissWithDockerHubCredentials.
    #[test]
    fn keys_that_miss() {
        for (key, image) in [
            ("https://hello.kubernetes.io", "world.mesos.org/foo/bar"),
            ("https://*.docker.com", "prefix.docker.io/foo/bar"),
            ("https://suffix.*.io", "prefix.docker.io/foo/bar"),
            ("https://prefix.docker.c*", "prefix.docker.io/foo/bar"),
            ("https://prefix.*.io/path:1111", "prefix.docker.io/path/subpath:1111/foo/bar"),
            ("suffix.*.io", "prefix.docker.io/foo/bar"),
            ("https://index.docker.io/v1/", "world.mesos.org/foo/bar"),
            ("not a url", "not a url/foo"),
        ] {
            assert!(keyring(&[(key, "foo")]).lookup(image).is_empty(), "{key} vs {image}");
        }
    }

    /// TestDockerKeyringLookup and TestIssue3797: longest keys first, every match counts, a
    /// path key is a string prefix, `/v1/` is the bare host.
    #[test]
    fn lookups_in_order() {
        let k = keyring(&[("bar.example.com/pong", "grace"), ("bar.example.com", "ada")]);
        for (image, want) in [
            ("bar.example.com", vec!["ada"]),
            ("bar.example.com/pong", vec!["grace", "ada"]),
            ("bar.example.com/ping", vec!["ada"]),
            ("bar.example.com/pongz", vec!["grace", "ada"]),
            ("bar.example.com/pong/pang", vec!["grace", "ada"]),
            ("example.com", vec![]),
            ("foo.example.com", vec![]),
        ] {
            assert_eq!(users(&k.lookup(image)), want, "{image}");
        }
        let quay = keyring(&[("https://quay.io/v1/", "rex")]);
        for image in ["quay.io", "quay.io/foo", "quay.io/foo/bar"] {
            assert_eq!(users(&quay.lookup(image)), ["rex"], "{image}");
        }
        // Two keys naming the same place (with and without a scheme) keep both credentials.
        let twice = keyring(&[("https://r.io", "a"), ("r.io", "b")]);
        assert_eq!(users(&twice.lookup("r.io/x")), ["a", "b"]);
    }

    /// TestKeyringHitWithUnqualifiedDockerHub, …LibraryDockerHub, …QualifiedDockerHub, and
    /// TestIsDefaultRegistryMatch.
    #[test]
    fn docker_hub() {
        let hub = keyring(&[("https://index.docker.io/v1/", "foo")]);
        for image in ["google/docker-registry", "jenkins", "index.docker.io/google/docker-registry", "docker.io/library/busybox"] {
            assert_eq!(users(&hub.lookup(image)), ["foo"], "{image}");
        }
        assert!(hub.lookup("registry.example.com/busybox").is_empty());
        for (image, want) in [
            ("foo/bar", true),
            ("docker.io/foo/bar", true),
            ("index.docker.io/foo/bar", true),
            ("foo", true),
            ("", false),
            ("registry.tld/foo/bar", false),
            ("registry:5000/foo/bar", false),
            ("myhostdocker.io/foo/bar", false),
        ] {
            assert_eq!(is_default_registry_match(image), want, "{image:?}");
        }
    }

    #[test]
    fn urls_parse_as_go_does() {
        for (raw, want) in [
            ("https://r.io:5000/a%20b?x#y", Ok(("r.io:5000", "/a b"))),
            ("https://u:p@r.io/a", Ok(("r.io", "/a"))),
            ("https://[::1]:5000/a", Ok(("[::1]:5000", "/a"))),
            ("https://*.r.io", Ok(("*.r.io", ""))),
            ("https://r.io:", Ok(("r.io:", ""))),
            ("https://r.io:abc", Err(r#"parse "https://r.io:abc": invalid port ":abc" after host"#)),
            ("https://a b.io", Err(r#"parse "https://a b.io": invalid character " " in host name"#)),
            ("https://r.io/%zz", Err(r#"parse "https://r.io/%zz": invalid URL escape "%zz""#)),
            ("https://r.io/\n", Err("parse \"https://r.io/\\n\": net/url: invalid control character in URL")),
        ] {
            assert_eq!(parse_url(raw), want.map(|(h, p)| Url { host: h.into(), path: p.into() }).map_err(String::from), "{raw}");
        }
    }

    #[test]
    fn union_keeps_each_keyrings_order() {
        let secrets = keyring(&[("r.io", "secret")]);
        let node = keyring(&[("r.io/team", "node-team"), ("*.io", "node-any")]);
        assert_eq!(users(&union_lookup(&[&secrets, &node], "r.io/team/app")), ["secret", "node-team", "node-any"]);
    }
}
