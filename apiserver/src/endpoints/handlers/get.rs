//! Mirrors k8s.io/apiserver/pkg/endpoints/handlers/get.go: GET of one object (or its status) and
//! LIST of a collection, as JSON, as the Table `kubectl get` asks for, or as metadata only; and
//! GET of an object in another form (rest.Getter of a subresource: a workload's scale).

use std::collections::HashMap;

use actix_web::HttpResponse;
use serde_json::{Value, json};

use crate::endpoints::negotiation::Output;
use crate::endpoints::request::{Target, list_options, partial_object_metadata, respond};
use crate::error::{Error, Result};
use crate::printers::tablegenerator::{DefaultPrinter, Printer, table, table_json};
use crate::registry::generic::rest::View;

/// `GET .../<resource>/<name>` and `GET .../<resource>/<name>/status`.
pub async fn get(t: &Target, name: &str, output: Output) -> Result<HttpResponse> {
    let obj = t.registry.get(t.namespace.as_deref(), name).await?;
    Ok(answer(&obj, t.registry.info().printer, output))
}

/// `GET .../<resource>/<name>/<subresource>` of the object in another form (a workload's
/// scale). A Table of it has the default columns.
pub async fn get_view(t: &Target, name: &str, view: View, output: Output) -> Result<HttpResponse> {
    let form = (view.get)(&t.registry.get(t.namespace.as_deref(), name).await?)?;
    Ok(answer(&form, &DefaultPrinter, output))
}

/// One object in the negotiated output: itself, its metadata, or a one-row Table by `printer`.
fn answer(obj: &Value, printer: &dyn Printer, output: Output) -> HttpResponse {
    match output {
        Output::Table => {
            let rv = obj.pointer("/metadata/resourceVersion").and_then(Value::as_str).unwrap_or("").to_string();
            respond(200, &table(printer, &[obj], &rv, None, chrono::Utc::now()), &[])
        }
        Output::Metadata => respond(200, &partial_object_metadata(obj), &[]),
        Output::Json | Output::Yaml => respond(200, obj, &[]),
    }
}

/// `GET .../<resource>` without `watch`.
pub async fn list(t: &Target, q: &HashMap<String, String>, output: Output) -> Result<HttpResponse> {
    let info = t.registry.info();
    let list = t.registry.list(t.namespace.as_deref(), &list_options(q)?).await?;
    if output == Output::Table {
        let table = table_json(info.printer, &list.items, &list.resource_version, list.continue_token.as_deref(), chrono::Utc::now());
        return Ok(HttpResponse::Ok().content_type("application/json").body(table));
    }
    let mut meta = json!({"resourceVersion": list.resource_version});
    if let Some(c) = &list.continue_token {
        meta["continue"] = json!(c);
    }
    if let Some(r) = list.remaining {
        meta["remainingItemCount"] = json!(r);
    }
    // The items are written straight from the (shared) objects, without a copy.
    let metadata_only = output == Output::Metadata;
    let (kind, api_version) = if metadata_only { ("PartialObjectMetadataList".to_string(), "meta.k8s.io/v1".to_string()) } else { (format!("{}List", info.kind), info.api_version()) };
    let mut body = serde_json::to_vec(&json!({"kind": kind, "apiVersion": api_version, "metadata": meta})).unwrap_or_default();
    body.pop(); // the closing brace: the items follow
    body.extend_from_slice(b",\"items\":[");
    for (i, item) in list.items.iter().enumerate() {
        if i > 0 {
            body.push(b',');
        }
        let written = if metadata_only { serde_json::to_writer(&mut body, &partial_object_metadata(item)) } else { serde_json::to_writer(&mut body, &**item) };
        written.map_err(|e| Error::Internal(e.to_string()))?;
    }
    body.extend_from_slice(b"]}");
    Ok(HttpResponse::Ok().content_type("application/json").body(body))
}
