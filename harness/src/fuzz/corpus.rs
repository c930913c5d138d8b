//! The fuzzer's seeds from captures: the request messages found in the
//! project's own captures (`captures/`: crafted conversations and lab runs),
//! each as its packets' opcodes, payload lengths and header bits, for batches to
//! send into the lab's live QPs, one of their packets changed.
//!
//! Owns: [`Corpus`], what a message keeps of a capture. Imports: the
//! dissector's capture reader, frame decoder and opcode table.
use std::collections::BTreeSet;
use std::net::IpAddr;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use dissector::frame::{self, Options};
use dissector::wire::opcode::Kind;
use dissector::wire::{Opcode, Transport};

/// The most packets a message keeps: a seed is a few frames, and the lab's
/// receive buffers and the seeds' MR hold four path MTUs.
pub(crate) const MAX_PACKETS: usize = 4;

/// One packet of a captured request message.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct Packet {
    pub(crate) opcode: Opcode,
    /// Payload bytes (pad excluded).
    pub(crate) len: u32,
    pub(crate) ack_req: bool,
    pub(crate) solicited: bool,
    /// Its RETH's DMA length, if it has one.
    pub(crate) reth: Option<u32>,
}

/// A request message as captured: a First, its Middles and its Last, or an Only.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct Message {
    pub(crate) packets: Vec<Packet>,
}

impl Message {
    /// Its transport (RC, UC or UD: the ones the lab's QPs have).
    pub(crate) fn transport(&self) -> Option<Transport> {
        let t = self.packets.first()?.opcode.info()?.transport;
        matches!(t, Transport::Rc | Transport::Uc | Transport::Ud).then_some(t)
    }
}

/// Every distinct message of the captures read, in a fixed order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Corpus {
    pub(crate) messages: Vec<Message>,
    /// The captures read.
    pub(crate) files: Vec<PathBuf>,
}

impl Corpus {
    /// Reads every `.pcap` and `.pcapng` below `dir`. A capture that cannot be
    /// read is an error naming it: a corpus is the user's input.
    pub(crate) fn load(dir: &Path) -> Result<Corpus> {
        let mut files = Vec::new();
        find(dir, &mut files).with_context(|| format!("reading the corpus {}", dir.display()))?;
        files.sort();
        let mut messages = BTreeSet::new();
        for f in &files {
            read(f, &mut messages)?;
        }
        Ok(Corpus { messages: messages.into_iter().collect(), files })
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.messages.is_empty()
    }
}

fn find(dir: &Path, out: &mut Vec<PathBuf>) -> std::io::Result<()> {
    for e in std::fs::read_dir(dir)? {
        let p = e?.path();
        if p.is_dir() {
            find(&p, out)?;
        } else if p.extension().is_some_and(|x| x == "pcap" || x == "pcapng") {
            out.push(p);
        }
    }
    Ok(())
}

/// The request messages of one capture, per flow (source, destination, QP):
/// each First…Last or Only whose packets all decode, with no ICRC check (a
/// capture may hold frames with their ICRC cut off).
fn read(path: &Path, out: &mut BTreeSet<Message>) -> Result<()> {
    let mut r = dissector::capture::open(path)
        .with_context(|| format!("reading the corpus capture {}", path.display()))?;
    let opts = Options::default();
    let mut fr = frame::decode(dissector::LinkType::ETHERNET, &[], &opts);
    // Messages under way, per flow.
    let mut open: std::collections::BTreeMap<Flow, Vec<Packet>> = Default::default();
    loop {
        let rec = match r.next_packet() {
            Ok(Some(rec)) => rec,
            Ok(None) => break,
            // The reader's error names the file, the byte and the frame.
            Err(e) => anyhow::bail!(
                "{e}\nhint: a corpus capture must read to its end; mend or remove it, or give --no-corpus"
            ),
        };
        frame::decode_into(&mut fr, rec.link, rec.data, &opts);
        let (Some(ib), None) = (&fr.ib, &fr.stop) else { continue };
        let Some(info) = ib.info.filter(|i| i.is_request()) else { continue };
        let flow = (fr.addrs(), ib.bth.dest_qp);
        let packet = Packet {
            opcode: ib.bth.opcode,
            len: ib.payload_len() as u32,
            ack_req: ib.bth.ack_req,
            solicited: ib.bth.solicited_event,
            reth: ib.reth.map(|r| r.dma_len),
        };
        let pos = if info.is(Kind::ONLY) {
            Pos::Only
        } else if info.is(Kind::FIRST) {
            Pos::First
        } else if info.is(Kind::LAST) {
            Pos::Last
        } else if info.is(Kind::MIDDLE) {
            Pos::Middle
        } else {
            continue;
        };
        match pos {
            Pos::Only => {
                open.remove(&flow);
                keep(out, vec![packet]);
            }
            Pos::First => {
                open.insert(flow, vec![packet]);
            }
            Pos::Middle => {
                if let Some(m) = open.get_mut(&flow) {
                    m.push(packet);
                }
            }
            Pos::Last => {
                if let Some(mut m) = open.remove(&flow) {
                    m.push(packet);
                    keep(out, m);
                }
            }
        }
    }
    Ok(())
}

/// A flow of requests: its addresses (source, destination) and destination QP.
type Flow = (Option<(IpAddr, IpAddr)>, u32);

enum Pos {
    Only,
    First,
    Middle,
    Last,
}

/// Keeps a whole message of the lab's transports, its first packets up to
/// [`MAX_PACKETS`] with the last: First, Middles, Last.
fn keep(out: &mut BTreeSet<Message>, mut packets: Vec<Packet>) {
    if packets.len() > MAX_PACKETS {
        let last = packets.pop();
        packets.truncate(MAX_PACKETS - 1);
        packets.extend(last);
    }
    let m = Message { packets };
    if m.transport().is_some() {
        out.insert(m);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The project's captures seed messages of every lab transport, multi-packet
    /// ones among them, each a whole message in order.
    #[test]
    fn the_projects_captures_seed_whole_messages() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../captures");
        let c = Corpus::load(&dir).expect("captures/ reads");
        assert!(c.files.len() >= 10, "{:?}", c.files);
        for t in [Transport::Rc, Transport::Uc, Transport::Ud] {
            assert!(c.messages.iter().any(|m| m.transport() == Some(t)), "no {t:?} message");
        }
        assert!(c.messages.iter().any(|m| m.packets.len() > 1), "no multi-packet message");
        for m in &c.messages {
            let kinds: Vec<_> = m.packets.iter().filter_map(|p| p.opcode.info()).collect();
            assert_eq!(kinds.len(), m.packets.len(), "{m:?}");
            assert!(m.packets.len() <= MAX_PACKETS, "{m:?}");
            if m.packets.len() == 1 {
                assert!(kinds[0].is(Kind::ONLY), "{m:?}");
            } else {
                assert!(kinds[0].is(Kind::FIRST), "{m:?}");
                assert!(kinds[kinds.len() - 1].is(Kind::LAST), "{m:?}");
                assert!(kinds[1..kinds.len() - 1].iter().all(|k| k.is(Kind::MIDDLE)), "{m:?}");
            }
        }
        // The same captures, the same corpus.
        assert_eq!(Corpus::load(&dir).expect("again"), c);
    }

    #[test]
    fn an_unreadable_capture_is_named() {
        let dir = std::env::temp_dir().join(format!("roce-corpus-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("bad.pcap"), b"not a capture").unwrap();
        let e = format!("{:#}", Corpus::load(&dir).unwrap_err());
        assert!(e.contains("bad.pcap"), "{e}");
        // A capture cut off inside a record: named, with the frame.
        let whole =
            std::fs::read(Path::new(env!("CARGO_MANIFEST_DIR")).join("../captures/rc_rdma.pcap"))
                .unwrap();
        std::fs::remove_file(dir.join("bad.pcap")).unwrap();
        std::fs::write(dir.join("cut.pcap"), &whole[..whole.len() - 7]).unwrap();
        let e = format!("{:#}", Corpus::load(&dir).unwrap_err());
        assert!(e.contains("cut.pcap") && e.contains("(frame "), "{e}");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
