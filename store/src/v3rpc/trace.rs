//! kubelab's own debug service on the client port, `kubelab.debugpb.Trace` (etcd has none: it
//! logs slow requests' steps instead): the steps this member took for the revisions asked for,
//! from its [`crate::traceutil::RevisionTrace`].

use proto::debugpb::trace_server::Trace;
use proto::debugpb::{RevisionsRequest, RevisionsResponse};
use tonic::{Request, Response, Status};

use crate::server::Node;
use crate::traceutil::MAX_ASKED;

/// `kubelab.debugpb.Trace` on the client port.
pub struct TraceService(pub Node);

#[tonic::async_trait]
impl Trace for TraceService {
    async fn revisions(&self, req: Request<RevisionsRequest>) -> Result<Response<RevisionsResponse>, Status> {
        let asked = req.into_inner().revisions;
        if asked.len() > MAX_ASKED {
            return Err(Status::invalid_argument(format!("at most {MAX_ASKED} revisions per request, not {}", asked.len())));
        }
        let trace = self.0.revision_trace();
        Ok(Response::new(RevisionsResponse { member: trace.member().to_string(), steps: trace.steps(&asked) }))
    }
}
