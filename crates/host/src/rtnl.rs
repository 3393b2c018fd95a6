//! A small synchronous rtnetlink client: exactly the requests a lab needs (veth pairs across
//! namespaces, bridges, link state, addresses, dumps for `status`) and the link dump a host's
//! facts read ([`crate::facts::this_host`]). Messages are built with
//! `netlink-packet-route`; this module only sends them and waits for the kernel's ACK.
//!
//! A netlink socket belongs to the namespace it was opened in, so callers open one per namespace,
//! on a thread entered into it.

use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd};

use netlink_packet_core::{
    NLM_F_ACK, NLM_F_CREATE, NLM_F_DUMP, NLM_F_EXCL, NLM_F_REPLACE, NLM_F_REQUEST, NetlinkHeader,
    NetlinkMessage, NetlinkPayload,
};
use netlink_packet_route::address::{AddressAttribute, AddressFlags, AddressMessage};
use netlink_packet_route::link::{
    InfoData, InfoKind, InfoVeth, LinkAttribute, LinkFlags, LinkInfo, LinkMessage,
};
use netlink_packet_route::neighbour::{
    NeighbourAddress, NeighbourAttribute, NeighbourMessage, NeighbourState,
};
use netlink_packet_route::route::RouteType;
use netlink_packet_route::{AddressFamily, RouteNetlinkMessage};
use netlink_sys::{Socket, SocketAddr, protocols::NETLINK_ROUTE};

use crate::ifaddr::IfAddr;

/// One open rtnetlink socket in the calling thread's namespace.
#[derive(Debug)]
pub struct Rtnl {
    socket: Socket,
    seq: u32,
    buf: Vec<u8>,
}

/// A link as `status` reports it.
#[derive(Debug, Clone)]
pub struct LinkState {
    /// Interface index.
    pub index: u32,
    /// Interface name.
    pub name: String,
    /// MTU.
    pub mtu: u32,
    /// Administratively up.
    pub up: bool,
    /// Has carrier (the peer is up).
    pub carrier: bool,
    /// Index of the bridge it is enslaved to, if any.
    pub controller: Option<u32>,
    /// Link kind (veth, bridge, ...), if the kernel reports one.
    pub kind: Option<String>,
}

impl Rtnl {
    /// Opens a socket in the calling thread's network namespace.
    pub fn open() -> io::Result<Rtnl> {
        let mut socket = Socket::new(NETLINK_ROUTE)?;
        socket.bind_auto()?;
        socket.set_ext_ack(true)?;
        Ok(Rtnl {
            socket,
            seq: 0,
            buf: vec![0; 64 * 1024],
        })
    }

    /// A socket bound to namespace `ns` (opened on a short thread entered into it); requests
    /// are then judged by the capabilities that namespace's owner grants, which is what lets a
    /// rootless session, whose own network namespace is the machine's, create links.
    pub fn open_in(ns: BorrowedFd<'_>) -> io::Result<Rtnl> {
        let fd = ns.try_clone_to_owned()?;
        std::thread::scope(|s| {
            s.spawn(move || {
                rustix::thread::move_into_link_name_space(
                    fd.as_fd(),
                    Some(rustix::thread::LinkNameSpaceType::Network),
                )?;
                Rtnl::open()
            })
            .join()
            .unwrap_or_else(|_| Err(io::Error::other("the rtnetlink thread panicked")))
        })
    }

    /// Creates a veth pair `a` (in namespace `a_ns`) ─ `b` (in `b_ns`) with `mtu`, both down:
    /// the peer cannot be brought up in the same request (veth_open fails with ENOTCONN before
    /// the pair is joined), so each host brings its end up. The pair is created from this
    /// socket's namespace but lands directly in the targets, so no temporary name ever appears in
    /// the host machine's own namespace.
    ///
    /// `indexes` are the interface indexes to give the two ends. They must differ: when a veth
    /// end's index equals its peer's (likely in fresh namespaces, where both would be 2), the
    /// kernel's linkwatch treats carrier changes as non-urgent and delays them up to a second,
    /// during which a bridge port stays disabled and the first packets wait. `macs` are the
    /// ends' link-layer addresses.
    pub fn add_veth(
        &mut self,
        (a, a_ns): (&str, BorrowedFd<'_>),
        (b, b_ns): (&str, BorrowedFd<'_>),
        mtu: u32,
        indexes: (u32, u32),
        macs: ([u8; 6], [u8; 6]),
    ) -> io::Result<()> {
        let mut peer = LinkMessage::default();
        peer.header.index = indexes.1;
        peer.attributes = vec![
            LinkAttribute::IfName(b.into()),
            LinkAttribute::Mtu(mtu),
            LinkAttribute::Address(macs.1.to_vec()),
            LinkAttribute::NetNsFd(b_ns.as_raw_fd()),
        ];
        let mut msg = LinkMessage::default();
        msg.header.index = indexes.0;
        msg.attributes = vec![
            LinkAttribute::IfName(a.into()),
            LinkAttribute::Mtu(mtu),
            LinkAttribute::Address(macs.0.to_vec()),
            LinkAttribute::NetNsFd(a_ns.as_raw_fd()),
            LinkAttribute::LinkInfo(vec![
                LinkInfo::Kind(InfoKind::Veth),
                LinkInfo::Data(InfoData::Veth(InfoVeth::Peer(peer))),
            ]),
        ];
        self.request(RouteNetlinkMessage::NewLink(msg), NLM_F_CREATE | NLM_F_EXCL)
    }

    /// Creates a bridge, up, with STP off (so ports forward at once).
    pub fn add_bridge(&mut self, name: &str) -> io::Result<()> {
        let mut msg = LinkMessage::default();
        msg.header.flags = LinkFlags::Up;
        msg.header.change_mask = LinkFlags::Up;
        msg.attributes = vec![
            LinkAttribute::IfName(name.into()),
            LinkAttribute::LinkInfo(vec![LinkInfo::Kind(InfoKind::Bridge)]),
        ];
        self.request(RouteNetlinkMessage::NewLink(msg), NLM_F_CREATE | NLM_F_EXCL)
    }

    /// Sets a link up, optionally enslaving it to a bridge (by index) and changing its MTU.
    pub fn set_link(
        &mut self,
        index: u32,
        up: bool,
        controller: Option<u32>,
        mtu: Option<u32>,
    ) -> io::Result<()> {
        let mut msg = LinkMessage::default();
        msg.header.index = index;
        msg.header.change_mask = LinkFlags::Up;
        if up {
            msg.header.flags = LinkFlags::Up;
        }
        if let Some(c) = controller {
            msg.attributes.push(LinkAttribute::Controller(c));
        }
        if let Some(m) = mtu {
            msg.attributes.push(LinkAttribute::Mtu(m));
        }
        self.request(RouteNetlinkMessage::SetLink(msg), 0)
    }

    /// Adds an address, without duplicate address detection (IPv6 addresses are usable at once;
    /// a lab owns its whole segment, so there is nothing to detect).
    pub fn add_addr(&mut self, index: u32, addr: &IfAddr) -> io::Result<()> {
        let mut msg = AddressMessage::default();
        msg.header.index = index;
        msg.header.prefix_len = addr.prefix;
        msg.header.family = if addr.addr.is_ipv4() {
            AddressFamily::Inet
        } else {
            AddressFamily::Inet6
        };
        if addr.addr.is_ipv4() {
            msg.attributes.push(AddressAttribute::Local(addr.addr));
        }
        msg.attributes.push(AddressAttribute::Address(addr.addr));
        msg.attributes
            .push(AddressAttribute::Flags(AddressFlags::Nodad));
        self.request(
            RouteNetlinkMessage::NewAddress(msg),
            NLM_F_CREATE | NLM_F_EXCL,
        )
    }

    /// Adds (or replaces) a permanent neighbour entry: on interface `index`, `ip` is at `mac`.
    pub fn add_neighbour(
        &mut self,
        index: u32,
        ip: std::net::IpAddr,
        mac: [u8; 6],
    ) -> io::Result<()> {
        let mut msg = NeighbourMessage::default();
        msg.header.ifindex = index;
        msg.header.state = NeighbourState::Permanent;
        msg.header.kind = RouteType::Unicast;
        let (family, dest) = match ip {
            std::net::IpAddr::V4(v4) => (AddressFamily::Inet, NeighbourAddress::Inet(v4)),
            std::net::IpAddr::V6(v6) => (AddressFamily::Inet6, NeighbourAddress::Inet6(v6)),
        };
        msg.header.family = family;
        msg.attributes = vec![
            NeighbourAttribute::Destination(dest),
            NeighbourAttribute::LinkLayerAddress(mac.to_vec()),
        ];
        self.request(
            RouteNetlinkMessage::NewNeighbour(msg),
            NLM_F_CREATE | NLM_F_REPLACE,
        )
    }

    /// Every link in this namespace.
    pub fn links(&mut self) -> io::Result<Vec<LinkState>> {
        let replies = self.dump(RouteNetlinkMessage::GetLink(LinkMessage::default()))?;
        Ok(replies
            .into_iter()
            .filter_map(|m| match m {
                RouteNetlinkMessage::NewLink(link) => Some(link_state(&link)),
                _ => None,
            })
            .collect())
    }

    /// Every address in this namespace, with the index of its interface.
    pub fn addrs(&mut self) -> io::Result<Vec<(u32, IfAddr)>> {
        let replies = self.dump(RouteNetlinkMessage::GetAddress(AddressMessage::default()))?;
        let mut out = Vec::new();
        for m in replies {
            let RouteNetlinkMessage::NewAddress(a) = m else {
                continue;
            };
            let ip = a.attributes.iter().find_map(|attr| match attr {
                AddressAttribute::Address(ip) => Some(*ip),
                _ => None,
            });
            if let Some(ip) = ip {
                out.push((
                    a.header.index,
                    IfAddr {
                        addr: ip,
                        prefix: a.header.prefix_len,
                    },
                ));
            }
        }
        Ok(out)
    }

    /// Sends one request and waits for its ACK, turning a NACK into the kernel's errno.
    fn request(&mut self, msg: RouteNetlinkMessage, flags: u16) -> io::Result<()> {
        let seq = self.send(msg, NLM_F_REQUEST | NLM_F_ACK | flags)?;
        loop {
            for reply in self.receive()? {
                if reply.header.sequence_number != seq {
                    continue;
                }
                if let NetlinkPayload::Error(e) = reply.payload {
                    return match e.code {
                        None => Ok(()),
                        Some(code) => Err(io::Error::from_raw_os_error(-code.get())),
                    };
                }
            }
        }
    }

    /// Sends a dump request and collects every reply until NLMSG_DONE.
    fn dump(&mut self, msg: RouteNetlinkMessage) -> io::Result<Vec<RouteNetlinkMessage>> {
        let seq = self.send(msg, NLM_F_REQUEST | NLM_F_DUMP)?;
        let mut out = Vec::new();
        loop {
            for reply in self.receive()? {
                if reply.header.sequence_number != seq {
                    continue;
                }
                match reply.payload {
                    NetlinkPayload::Done(_) => return Ok(out),
                    NetlinkPayload::Error(e) => {
                        if let Some(code) = e.code {
                            return Err(io::Error::from_raw_os_error(-code.get()));
                        }
                    }
                    NetlinkPayload::InnerMessage(inner) => out.push(inner),
                    _ => {}
                }
            }
        }
    }

    fn send(&mut self, msg: RouteNetlinkMessage, flags: u16) -> io::Result<u32> {
        self.seq = self.seq.wrapping_add(1);
        let mut header = NetlinkHeader::default();
        header.flags = flags;
        header.sequence_number = self.seq;
        let mut packet = NetlinkMessage::new(header, NetlinkPayload::from(msg));
        packet.finalize();
        let len = packet.buffer_len();
        if self.buf.len() < len {
            self.buf.resize(len, 0);
        }
        packet.serialize(&mut self.buf[..len]);
        self.socket
            .send_to(&self.buf[..len], &SocketAddr::new(0, 0), 0)?;
        Ok(self.seq)
    }

    /// Reads one datagram and decodes every netlink message in it.
    fn receive(&mut self) -> io::Result<Vec<NetlinkMessage<RouteNetlinkMessage>>> {
        let n = self.socket.recv(&mut &mut self.buf[..], 0)?;
        let mut out = Vec::new();
        let mut offset = 0;
        while offset < n {
            let bytes = &self.buf[offset..n];
            let msg = NetlinkMessage::<RouteNetlinkMessage>::deserialize(bytes)
                .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e.to_string()))?;
            let len = msg.header.length as usize;
            if len == 0 {
                break;
            }
            offset += (len + 3) & !3;
            out.push(msg);
        }
        Ok(out)
    }
}

fn link_state(link: &LinkMessage) -> LinkState {
    let mut state = LinkState {
        index: link.header.index,
        name: String::new(),
        mtu: 0,
        up: link.header.flags.contains(LinkFlags::Up),
        carrier: link.header.flags.contains(LinkFlags::LowerUp),
        controller: None,
        kind: None,
    };
    for attr in &link.attributes {
        match attr {
            LinkAttribute::IfName(n) => state.name = n.clone(),
            LinkAttribute::Mtu(m) => state.mtu = *m,
            LinkAttribute::Controller(c) => state.controller = Some(*c),
            LinkAttribute::LinkInfo(infos) => {
                for info in infos {
                    if let LinkInfo::Kind(kind) = info {
                        state.kind = Some(kind.to_string());
                    }
                }
            }
            _ => {}
        }
    }
    state
}

/// The index of an interface in the calling thread's namespace.
pub fn ifindex(name: &str) -> io::Result<u32> {
    let c =
        std::ffi::CString::new(name).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
    // Safety: `c` is a valid NUL-terminated string that outlives the call.
    let index = unsafe { libc::if_nametoindex(c.as_ptr()) };
    if index == 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(index)
    }
}
