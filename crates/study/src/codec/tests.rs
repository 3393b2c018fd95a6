//! The packed format against the text writer, and damaged blobs.

use super::*;
use tcplab_results::crr::{CrrResult, CrrSample};
use tcplab_results::msgs::{MsgsResult, MsgsRun};
use tcplab_results::rr::{RrPoint, RrResult, RrSample};

fn text_of(report: &Report) -> String {
    let mut v = Vec::new();
    tcplab_results::samples::write(&mut v, report).unwrap();
    String::from_utf8(v).unwrap()
}

fn roundtrip(report: &Report) -> (String, usize) {
    let mut packed = Vec::new();
    pack(report, &mut packed).unwrap();
    (
        String::from_utf8(unpack(&packed).unwrap()).unwrap(),
        packed.len(),
    )
}

fn msgs(n: u64) -> Report {
    let t0 = 7_000_000_000u64;
    let send: Vec<u64> = (0..n).map(|i| t0 + i * 1_450 + (i * 7919) % 300).collect();
    // The receiver got fewer messages than were sent: the tail prints `-`.
    let recv: Vec<u64> = send
        .iter()
        .take(n as usize - 3)
        .map(|s| s + 40_000 + (s % 977))
        .collect();
    Report::Msgs(MsgsResult {
        runs: vec![MsgsRun {
            size: 1,
            send_ns: send.into(),
            recv_ns: recv.into(),
            ..Default::default()
        }],
        ..Default::default()
    })
}

#[test]
fn msgs_unpack_to_the_text_writers_bytes_and_pack_small() {
    let report = msgs(100_000);
    let want = text_of(&report);
    let (got, packed) = roundtrip(&report);
    assert_eq!(got, want);
    assert!(got.contains("\n99999,") && got.ends_with(",-\n"), "tail");
    // Two varint bytes per timestamp (deltas of 1-2 µs), against ~25 text bytes per row.
    assert!(packed < 100_000 * 5, "packed {packed} bytes");
    assert!(
        want.len() > packed * 4,
        "text {} vs packed {packed}",
        want.len()
    );
}

/// Stamps behind a store, as a long run keeps them; `fail_from` makes reads from that
/// index on fail, as a file that went bad would.
#[derive(Debug)]
struct Filed {
    stamps: Vec<u64>,
    fail_from: u64,
}

impl tcplab_results::stamps::StampStore for Filed {
    fn len(&self) -> u64 {
        self.stamps.len() as u64
    }
    fn read_at(&self, index: u64, out: &mut [u64]) -> std::io::Result<()> {
        if index + out.len() as u64 > self.fail_from {
            return Err(std::io::Error::other("stamps file unreadable"));
        }
        let i = index as usize;
        out.copy_from_slice(&self.stamps[i..i + out.len()]);
        Ok(())
    }
}

fn filed(stamps: &Stamps, fail_from: u64) -> Stamps {
    let stamps = stamps.to_vec().unwrap();
    let (first, last) = (stamps[0], stamps[stamps.len() - 1]);
    Stamps::stored(
        std::sync::Arc::new(Filed { stamps, fail_from }),
        first,
        last,
    )
}

fn spilled(report: &Report, fail_from: u64) -> Report {
    let Report::Msgs(m) = report else {
        unreachable!()
    };
    let mut m = m.clone();
    for run in &mut m.runs {
        run.send_ns = filed(&run.send_ns, u64::MAX);
        run.recv_ns = filed(&run.recv_ns, fail_from);
    }
    Report::Msgs(m)
}

#[test]
fn stamps_in_a_store_pack_to_the_same_bytes_as_stamps_in_memory() {
    // Several read chunks, and a last chunk that is not full.
    let report = msgs(3 * tcplab_results::stamps::READ_CHUNK as u64 + 123);
    let (mut mem, mut stored) = (Vec::new(), Vec::new());
    pack(&report, &mut mem).unwrap();
    pack(&spilled(&report, u64::MAX), &mut stored).unwrap();
    assert!(mem == stored, "packed bytes differ");
}

#[test]
fn a_store_that_fails_mid_column_fails_the_packing() {
    let report = msgs(2 * tcplab_results::stamps::READ_CHUNK as u64);
    let mut out = Vec::new();
    let e = pack(&spilled(&report, 70_000), &mut out).unwrap_err();
    assert!(e.to_string().contains("stamps file unreadable"), "{e}");
}

#[test]
fn rr_crr_and_several_workloads_concatenate_like_text_files() {
    let rr = Report::Rr(RrResult {
        points: vec![RrPoint {
            req: 64,
            resp: 64,
            samples: (0..500u64)
                .map(|i| RrSample {
                    intended_ns: 1_000 + i * 25_000,
                    sent_ns: 1_100 + i * 25_000,
                    done_ns: 20_000 + i * 25_000 + i % 13,
                })
                .collect(),
            ..Default::default()
        }],
        ..Default::default()
    });
    let mut crr = CrrResult {
        samples: (0..300u64)
            .map(|i| CrrSample {
                start_ns: 5 + i * 90_000,
                connected_ns: 30_000 + i * 90_000,
                done_ns: 70_000 + i * 90_000,
            })
            .collect(),
        ..Default::default()
    };
    crr.time_wait.samples = vec![(0.1, 12), (0.2, 250)];
    let crr = Report::Crr(crr);
    let mut packed = Vec::new();
    for r in [&rr, &crr, &msgs(50)] {
        pack(r, &mut packed).unwrap();
    }
    let want = text_of(&rr) + &text_of(&crr) + &text_of(&msgs(50));
    assert_eq!(String::from_utf8(unpack(&packed).unwrap()).unwrap(), want);
}

fn http() -> Report {
    use tcplab_results::http::result::{HttpResult, HttpSample, NONE};
    let t0 = 9_000_000_000u64;
    let samples = (0..2_000u64)
        .map(|i| {
            let start = t0 + i * 700_000;
            // Every 7th request reused its connection (no connect), every 50th failed
            // (a reset: no response), every 333rd asked for a path outside the set.
            let (reused, failed) = (i % 7 == 3, i % 50 == 49);
            HttpSample {
                intended_ns: start,
                start_ns: start + 2_000,
                connected_ns: if reused { 0 } else { start + 60_000 + i % 11 },
                first_byte_ns: if failed { 0 } else { start + 250_000 + i % 97 },
                done_ns: start + 400_000 + (i * 31) % 5_000,
                status: if failed { 0 } else { 200 },
                class: if i % 333 == 0 { NONE } else { (i % 4) as u8 },
                error: if failed { 1 } else { NONE },
                bytes: if failed {
                    0
                } else {
                    102 + (i % 9) as u32 * 1024
                },
            }
        })
        .collect();
    let mut r = HttpResult {
        samples,
        ..Default::default()
    };
    r.time_wait.samples = vec![(0.1, 40), (0.2, 900)];
    let mut server = r.time_wait.clone();
    server.samples = vec![(0.1, 2)];
    r.server_time_wait = Some(server);
    Report::Http(r)
}

#[test]
fn http_requests_unpack_to_the_text_writers_bytes_labels_and_all() {
    let report = http();
    let want = text_of(&report);
    let (got, packed) = roundtrip(&report);
    assert_eq!(got, want);
    assert!(
        got.contains(",reset,0\n") && got.contains(",200,-,-,"),
        "labels"
    );
    assert!(
        got.contains("\n0,0,2000,") && got.contains("\n3,2100000,2102000,-,2350003,"),
        "stamps, and `-` for a connect that did not happen"
    );
    assert!(got.contains("host=server"), "the server's TIME_WAIT");
    assert!(
        want.len() > packed * 3,
        "text {} vs packed {packed}",
        want.len()
    );
    // Only a blob with a label table needs a reader of version 2; the others stay 1.
    let mut blob = Vec::new();
    pack(&msgs(10), &mut blob).unwrap();
    assert_eq!(blob[4], 1);
    pack(&report, &mut blob).unwrap();
    assert_eq!(blob[4], 2);
    let both = String::from_utf8(unpack(&blob).unwrap()).unwrap();
    assert_eq!(both, text_of(&msgs(10)) + &want);
    // An http run with no request (every connect failed before a sample) still packs.
    let empty = Report::Http(Default::default());
    assert_eq!(roundtrip(&empty).0, text_of(&empty));
}

#[test]
fn damaged_label_tables_are_errors_not_panics() {
    let mut blob = Vec::new();
    pack(&http(), &mut blob).unwrap();
    for cut in [6, 30, 60, blob.len() / 2, blob.len() - 1] {
        assert!(unpack(&blob[..cut]).is_err(), "cut at {cut}");
    }
    let mut blob = MAGIC.to_vec();
    blob.push(PLAIN_VERSION);
    let header = "# section=x columns=seq,a\n";
    labelled_table(
        &mut blob,
        header,
        &[Column::Labels(vec!["a".into()], vec![0, 1])],
    );
    assert_eq!(blob[4], VERSION);
    let e = unpack(&blob).unwrap_err();
    assert!(e.contains("label 1 of 1 in row 1"), "{e}");
    // The column type byte follows the chunk tag, header, ncols and nrows.
    let at = MAGIC.len() + 1 + 1 + 1 + header.len() + 2;
    blob[at] = 7;
    let e = unpack(&blob).unwrap_err();
    assert!(e.contains("unknown column type 7"), "{e}");
}

#[test]
fn stream_samples_are_kept_as_their_text() {
    let report = Report::Stream(Default::default());
    assert_eq!(roundtrip(&report).0, text_of(&report));
}

#[test]
fn damaged_blobs_are_errors_not_panics() {
    let mut packed = Vec::new();
    pack(&msgs(100), &mut packed).unwrap();
    for cut in [3, 10, 45, packed.len() - 1] {
        assert!(unpack(&packed[..cut]).is_err(), "cut at {cut}");
    }
    assert!(unpack(b"# tcplab-samples 1").is_err());
    let mut bad = packed.clone();
    bad[4] = 9;
    assert!(unpack(&bad).unwrap_err().contains("version 9"));
    bad[4] = 2;
    assert_eq!(
        unpack(&bad),
        unpack(&packed),
        "version 2 reads version 1's chunks"
    );
    assert_eq!(zigzag(-1), 1);
    assert_eq!(unzigzag(zigzag(i64::MIN)), i64::MIN);
    assert_eq!(unzigzag(zigzag(123_456_789)), 123_456_789);
}

#[test]
fn a_tables_columns_stream_back_as_packed() {
    let report = msgs(10_000);
    let Report::Msgs(m) = &report else {
        unreachable!()
    };
    let (send, recv) = (
        m.runs[0].send_ns.to_vec().unwrap(),
        m.runs[0].recv_ns.to_vec().unwrap(),
    );
    let mut blob = Vec::new();
    pack(&report, &mut blob).unwrap();
    let parts = parts(&blob).unwrap();
    assert!(
        matches!(parts[0], Part::Text(t) if t.starts_with(b"# tcplab-samples 1 workload=msgs"))
    );
    let Part::Table(t) = &parts[1] else {
        panic!("a table")
    };
    assert!(t.header.starts_with("# section=message size=1 "));
    assert_eq!(t.rows, 10_000);
    let t0 = send[0];
    let rel = |v: &[u64]| v.iter().map(|s| s - t0).collect::<Vec<u64>>();
    assert_eq!(t.column(0).unwrap().collect::<Vec<_>>(), rel(&send));
    assert_eq!(t.column(1).unwrap().collect::<Vec<_>>(), rel(&recv));
    assert!(t.column(2).is_none());
    let Part::Text(first) = parts[0] else {
        unreachable!()
    };
    let mut text = first.to_vec();
    t.print(&mut text).unwrap();
    assert_eq!(text, unpack(&blob).unwrap());
}
