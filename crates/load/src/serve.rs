//! One test's server side, whatever its kind: the single dispatch from a [`WorkloadSpec`] to
//! its workload's server routine, which the agent runs once it has admitted the test and opened
//! its data listener ([`crate::serve_ctx`]). The client's dispatch is [`crate::client::run`].

use tcplab_results::spec::WorkloadSpec;

use crate::proto::ServerReport;
use crate::serve_ctx::ServerCtx;
use crate::{crr, msgs, rr, stream};

/// A test's server routine, bound to its configuration.
pub type Routine<'a> = Box<dyn FnOnce(&mut ServerCtx) -> ServerReport + 'a>;

/// The server routine of a test served over one data listener; None for the kinds a server
/// does not run that way (rrul's client opens an rr and a stream test itself; http is measured
/// against a web server).
pub fn routine(test: &WorkloadSpec) -> Option<Routine<'_>> {
    Some(match test {
        WorkloadSpec::Stream(c) => Box::new(move |ctx| stream::serve(ctx, c)),
        WorkloadSpec::Msgs(c) => Box::new(move |ctx| msgs::serve(ctx, c)),
        WorkloadSpec::Rr(c) => Box::new(move |ctx| rr::serve(ctx, c)),
        WorkloadSpec::Crr(c) => Box::new(move |ctx| crr::serve(ctx, c)),
        WorkloadSpec::Rrul(_) | WorkloadSpec::Http(_) => return None,
    })
}
