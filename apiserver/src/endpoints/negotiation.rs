//! Mirrors k8s.io/apiserver/pkg/endpoints/handlers/negotiation/negotiate.go: which of the media
//! types a client offers in `Accept` the server answers with.
//!
//! Every media type offered is considered, best first (by `q`, ties in the order written), with
//! its parameters: `as`, `g` and `v` name a conversion (`as=Table;g=meta.k8s.io;v=v1`, or
//! `as=APIGroupDiscoveryList;g=apidiscovery.k8s.io;v=v2beta1`), and the first one the server can
//! produce wins. A type it cannot produce (protobuf, a conversion it does not know) is passed
//! over, not refused: `406 Not Acceptable` comes only when nothing offered can be served. No
//! `Accept` at all means `*/*`.

use actix_web::HttpRequest;
use actix_web::http::header;

use crate::error::{Error, Result};

/// The media types answers are written in (protobuf is read, never written: see the crate's
/// caveats), as the 406 message lists them.
const SERVED: &str = "application/json, application/yaml";

/// One entry of an `Accept` header.
#[derive(Debug, Clone, PartialEq)]
pub struct MediaRange {
    pub type_: String,
    pub subtype: String,
    /// The parameters other than `q`, names lower-cased.
    pub params: Vec<(String, String)>,
    pub q: f32,
}

impl MediaRange {
    fn param(&self, name: &str) -> Option<&str> {
        self.params
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }

    /// Whether this range includes `type_/subtype` (wildcards included).
    fn matches(&self, type_: &str, subtype: &str) -> bool {
        (self.type_ == "*" || self.type_ == type_)
            && (self.subtype == "*" || self.subtype == subtype)
    }

    /// The conversion asked for: `(as, g, v)`, when `as` is given.
    fn conversion(&self) -> Option<(&str, &str, &str)> {
        self.param("as").map(|a| {
            (
                a,
                self.param("g").unwrap_or(""),
                self.param("v").unwrap_or(""),
            )
        })
    }
}

/// Parses an `Accept` header into its media ranges, best first. Malformed entries and entries
/// with `q=0` are dropped.
pub fn parse_accept(header: Option<&str>) -> Vec<MediaRange> {
    let Some(header) = header.filter(|h| !h.trim().is_empty()) else {
        return vec![MediaRange {
            type_: "*".into(),
            subtype: "*".into(),
            params: vec![],
            q: 1.0,
        }];
    };
    let mut out: Vec<MediaRange> = header
        .split(',')
        .filter_map(|entry| {
            let mut parts = entry.split(';');
            let (type_, subtype) = parts.next()?.trim().split_once('/')?;
            let (type_, subtype) = (
                type_.trim().to_ascii_lowercase(),
                subtype.trim().to_ascii_lowercase(),
            );
            if type_.is_empty() || subtype.is_empty() {
                return None;
            }
            let mut q = 1.0;
            let mut params = Vec::new();
            for p in parts {
                let Some((k, v)) = p.split_once('=') else {
                    continue;
                };
                let (k, v) = (
                    k.trim().to_ascii_lowercase(),
                    v.trim().trim_matches('"').to_string(),
                );
                if k == "q" {
                    q = v.parse().unwrap_or(1.0);
                } else {
                    params.push((k, v));
                }
            }
            (q > 0.0).then_some(MediaRange {
                type_,
                subtype,
                params,
                q,
            })
        })
        .collect();
    // A stable sort: equal preferences keep the client's order.
    out.sort_by(|a, b| b.q.partial_cmp(&a.q).unwrap_or(std::cmp::Ordering::Equal));
    out
}

fn accept(req: &HttpRequest) -> Vec<MediaRange> {
    parse_accept(
        req.headers()
            .get(header::ACCEPT)
            .and_then(|a| a.to_str().ok()),
    )
}

fn not_acceptable() -> Error {
    Error::NotAcceptable(SERVED.to_string())
}

/// How an object (or a list, or a Status) is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Output {
    Json,
    Yaml,
    /// A `meta.k8s.io/v1` Table (`kubectl get`).
    Table,
    /// Only the objects' metadata: `meta.k8s.io/v1` `PartialObjectMetadata` (or its List), what
    /// metadata-only informers and the garbage collector read.
    Metadata,
}

/// The first offered media type an object can be written in.
pub fn negotiate_output(req: &HttpRequest) -> Result<Output> {
    output_for(&accept(req), true)
}

/// The first offered media type a watch can be written in: a watch is a stream of JSON events,
/// and YAML, which cannot be framed into one, is passed over (handlers/watch.go asks for a
/// streaming serializer).
pub fn negotiate_watch(req: &HttpRequest) -> Result<Output> {
    output_for(&accept(req), false).map_err(|_| Error::NotAcceptable("application/json".into()))
}

fn output_for(ranges: &[MediaRange], yaml: bool) -> Result<Output> {
    for r in ranges {
        let json = r.matches("application", "json");
        match r.conversion() {
            None if json => return Ok(Output::Json),
            None if yaml && r.matches("application", "yaml") => return Ok(Output::Yaml),
            // Tables and object metadata are written as meta.k8s.io/v1.
            Some(("Table", "meta.k8s.io", "v1")) if json => return Ok(Output::Table),
            Some(("PartialObjectMetadata" | "PartialObjectMetadataList", "meta.k8s.io", "v1")) if json => return Ok(Output::Metadata),
            _ => {}
        }
    }
    Err(not_acceptable())
}

/// How `GET /api` and `GET /apis` answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DiscoveryOutput {
    /// An `APIGroupDiscoveryList` in this `apidiscovery.k8s.io` version (`v2` or `v2beta1`).
    Aggregated(&'static str),
    /// The legacy `APIVersions` / `APIGroupList`, in JSON or YAML.
    Legacy(Output),
}

/// The aggregated discovery versions served, in the order a Kubernetes 1.32 server knows them.
const AGGREGATED_VERSIONS: [&str; 2] = ["v2", "v2beta1"];

/// The first offered media type a discovery root can be written in.
pub fn negotiate_discovery(req: &HttpRequest) -> Result<DiscoveryOutput> {
    discovery_for(&accept(req))
}

fn discovery_for(ranges: &[MediaRange]) -> Result<DiscoveryOutput> {
    for r in ranges {
        match r.conversion() {
            Some(("APIGroupDiscoveryList", "apidiscovery.k8s.io", v))
                if r.matches("application", "json") =>
            {
                if let Some(v) = AGGREGATED_VERSIONS.iter().find(|known| **known == v) {
                    return Ok(DiscoveryOutput::Aggregated(v));
                }
            }
            Some(_) => {}
            None => {
                if let Ok(o) = output_for(std::slice::from_ref(r), true) {
                    return Ok(DiscoveryOutput::Legacy(o));
                }
            }
        }
    }
    Err(not_acceptable())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn output(accept: &str) -> Option<Output> {
        output_for(&parse_accept(Some(accept)), true).ok()
    }

    fn discovery(accept: &str) -> Option<DiscoveryOutput> {
        discovery_for(&parse_accept(Some(accept))).ok()
    }

    #[test]
    fn parses_types_parameters_and_preference() {
        let r = parse_accept(Some(
            "application/json;q=0.5, application/JSON;as=Table;v=v1;g=meta.k8s.io, text/plain;q=0",
        ));
        assert_eq!(r.len(), 2, "q=0 is dropped: {r:?}");
        assert_eq!(r[0].conversion(), Some(("Table", "meta.k8s.io", "v1")));
        assert_eq!(
            (r[1].type_.as_str(), r[1].subtype.as_str(), r[1].q),
            ("application", "json", 0.5)
        );
        assert_eq!(parse_accept(None)[0].subtype, "*");
        assert_eq!(parse_accept(Some("garbage, application/json")).len(), 1);
    }

    #[test]
    fn objects_take_the_first_servable_type() {
        // kubectl get
        assert_eq!(
            output(
                "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json"
            ),
            Some(Output::Table)
        );
        // kubectl's typed clients: protobuf first, which is passed over.
        assert_eq!(
            output("application/vnd.kubernetes.protobuf,application/json"),
            Some(Output::Json)
        );
        assert_eq!(
            output(
                "application/vnd.kubernetes.protobuf;as=Table;v=v1;g=meta.k8s.io,application/json"
            ),
            Some(Output::Json)
        );
        assert_eq!(
            output(
                "application/json;as=PartialObjectMetadataList;v=v1;g=meta.k8s.io,application/json"
            ),
            Some(Output::Metadata)
        );
        assert_eq!(output("application/json;as=PartialObjectMetadata;v=v1beta1;g=meta.k8s.io,application/json"), Some(Output::Json));
        assert_eq!(output("application/yaml"), Some(Output::Yaml));
        assert_eq!(output("*/*"), Some(Output::Json));
        assert_eq!(output("application/*"), Some(Output::Json));
        assert_eq!(
            output("application/json;q=0.1,application/yaml"),
            Some(Output::Yaml)
        );
        let e = output_for(
            &parse_accept(Some("application/vnd.kubernetes.protobuf")),
            true,
        )
        .unwrap_err();
        assert_eq!(
            (e.code(), e.to_string().as_str()),
            (
                406,
                "only the following media types are accepted: application/json, application/yaml"
            )
        );
        assert_eq!(
            output("text/html, application/json;as=Table;v=v9;g=meta.k8s.io"),
            None
        );
        // A watch is not written in YAML: `*/*` there means JSON.
        assert_eq!(
            output_for(&parse_accept(Some("application/yaml, */*")), false).ok(),
            Some(Output::Json)
        );
        assert!(output_for(&parse_accept(Some("application/yaml")), false).is_err());
    }

    #[test]
    fn discovery_answers_the_version_offered_or_falls_back() {
        // kubectl 1.30 and later
        assert_eq!(
            discovery(
                "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList,application/json"
            ),
            Some(DiscoveryOutput::Aggregated("v2"))
        );
        // kubectl 1.27 to 1.29
        assert_eq!(
            discovery(
                "application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList,application/json"
            ),
            Some(DiscoveryOutput::Aggregated("v2beta1"))
        );
        // A version not served, or protobuf only for the aggregated form: the legacy document.
        assert_eq!(
            discovery(
                "application/json;g=apidiscovery.k8s.io;v=v3;as=APIGroupDiscoveryList,application/json"
            ),
            Some(DiscoveryOutput::Legacy(Output::Json))
        );
        assert_eq!(
            discovery(
                "application/vnd.kubernetes.protobuf;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json"
            ),
            Some(DiscoveryOutput::Legacy(Output::Json))
        );
        assert_eq!(discovery(""), Some(DiscoveryOutput::Legacy(Output::Json)));
        assert_eq!(
            discovery("application/json;g=apidiscovery.k8s.io;v=v1;as=APIGroupDiscoveryList"),
            None
        );
    }
}
