//! rr's server side: read one whole request, write one response, until the client closes.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::os::fd::AsRawFd;

use super::RrConfig;
use crate::clock::{ThreadTimes, now_ns};
use crate::net::reason;
use crate::proto::ServerReport;
use crate::serve_ctx::ServerCtx;
use crate::sockopt::rearm_quickack;

/// Reads until `buf` is full or EOF; returns the bytes read.
fn read_full(s: &mut TcpStream, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut got = 0;
    while got < buf.len() {
        match s.read(&mut buf[got..]) {
            Ok(0) => break,
            Ok(k) => got += k,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(got)
}

/// Server side: answer every request until the client closes.
pub(crate) fn serve(ctx: &mut ServerCtx, cfg: &RrConfig) -> ServerReport {
    let (data, mut report) = ctx.accept_data();
    let Some(mut data) = data else {
        return report;
    };
    let fd = data.as_raw_fd();
    let times0 = ThreadTimes::now();
    let t0 = now_ns();
    let mut req = vec![0u8; cfg.req as usize];
    let resp = vec![0x41u8; cfg.resp as usize];
    loop {
        match read_full(&mut data, &mut req) {
            Ok(0) => break,
            Ok(k) if k < req.len() => {
                report.complete = false;
                report.incomplete_reason = Some(format!(
                    "peer closed inside request {} ({k} of {} bytes)",
                    report.transactions,
                    req.len()
                ));
                break;
            }
            Ok(_) => {}
            Err(e) => {
                report.complete = false;
                report.incomplete_reason = Some(reason(
                    &format!("waiting for request {}", report.transactions),
                    &e,
                ));
                break;
            }
        }
        if cfg.opts.quickack {
            rearm_quickack(fd);
        }
        if let Err(e) = data.write_all(&resp) {
            report.complete = false;
            report.incomplete_reason = Some(reason("sending a response", &e));
            break;
        }
        report.transactions += 1;
    }
    crate::tcpinfo::record_end(&mut report.view, fd);
    report.bytes_received = report.transactions * u64::from(cfg.req);
    report.bytes_sent = report.transactions * u64::from(cfg.resp);
    report.elapsed_ns = now_ns() - t0;
    report.set_times(ThreadTimes::now().since(times0));
    report
}
