//! The harness's frames as bytes: Ethernet, IPv4 and TCP headers (so the direction's own flow
//! key tells the bulk flow from the probe), then the frame's class and probe number, which the
//! simulated send port reads back to account for each frame it hands off.

use super::table::Class;

/// A bulk flow's data segment.
pub(crate) const DATA_LEN: u32 = 1514;
/// Its ACK.
pub(crate) const ACK_LEN: u32 = 66;
/// A probe's request or response.
pub(crate) const PROBE_LEN: u32 = 100;

/// Where the class and probe number lie: after the Ethernet (14), IPv4 (20) and TCP (20)
/// headers.
const PAYLOAD: usize = 54;
/// Host A's and host B's addresses (TEST-NET-1: the bytes never leave the harness).
const ADDR: [[u8; 4]; 2] = [[192, 0, 2, 1], [192, 0, 2, 2]];
/// The bulk flow's ports (client, server): a->b data from the client, ACKs back.
const BULK_PORTS: [u16; 2] = [40_000, 5_201];
/// The probe's ports (client, server).
const PROBE_PORTS: [u16; 2] = [40_001, 7];

/// A frame in an RX queue, the schedule, or on its way to an endpoint.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Frame {
    /// What it is.
    pub class: Class,
    /// The probe's number (requests and responses).
    pub probe: u32,
}

impl Frame {
    /// Its length on the wire.
    pub(crate) fn wire_len(self) -> u32 {
        match self.class {
            Class::Bulk => DATA_LEN,
            Class::Ack => ACK_LEN,
            Class::Request | Class::Response => PROBE_LEN,
        }
    }

    /// Writes the frame into `out` (at least [`DATA_LEN`] bytes) and returns its length.
    pub(crate) fn render(self, out: &mut [u8]) -> usize {
        let len = self.wire_len() as usize;
        let out = &mut out[..len];
        out.fill(0);
        // From host A (the client side) for the a->b classes, from B for the others.
        let (from, ports) = match self.class {
            Class::Bulk => (0, BULK_PORTS),
            Class::Ack => (1, [BULK_PORTS[1], BULK_PORTS[0]]),
            Class::Request => (0, PROBE_PORTS),
            Class::Response => (1, [PROBE_PORTS[1], PROBE_PORTS[0]]),
        };
        out[..6].copy_from_slice(&[2, 0, 0, 0, 0, 2 - from as u8]);
        out[6..12].copy_from_slice(&[2, 0, 0, 0, 0, 1 + from as u8]);
        out[12..14].copy_from_slice(&0x0800_u16.to_be_bytes());
        let ip = &mut out[14..34];
        ip[0] = 0x45;
        ip[2..4].copy_from_slice(&((len - 14) as u16).to_be_bytes());
        ip[6] = 0x40;
        ip[8] = 64;
        ip[9] = 6;
        ip[12..16].copy_from_slice(&ADDR[from]);
        ip[16..20].copy_from_slice(&ADDR[1 - from]);
        out[34..36].copy_from_slice(&ports[0].to_be_bytes());
        out[36..38].copy_from_slice(&ports[1].to_be_bytes());
        out[46] = 0x50;
        out[PAYLOAD] = self.class as u8;
        out[PAYLOAD + 1..PAYLOAD + 5].copy_from_slice(&self.probe.to_le_bytes());
        len
    }

    /// The frame [`Frame::render`] wrote into `bytes`.
    pub(crate) fn parse(bytes: &[u8]) -> Self {
        let class = Class::ALL[usize::from(bytes[PAYLOAD])];
        let probe = u32::from_le_bytes(
            bytes[PAYLOAD + 1..PAYLOAD + 5]
                .try_into()
                .expect("four bytes"),
        );
        Self { class, probe }
    }
}
