// scratch: not committed
use dissector::craft::*;
use dissector::wire::*;
use std::io::Write;
fn main() {
    let mut c = Conversation::new();
    let p = c.send(Dir::AtoB, 40, None); c.ack(Dir::BtoA, p, Syndrome::ACK, 1);
    let p = c.send(Dir::AtoB, 40, Some(0x1234)); c.ack(Dir::BtoA, p, Syndrome(0x62), 0);
    let p = c.write(Dir::AtoB, 0x7f0000001000, 0xabcd, 3000, None); c.ack(Dir::BtoA, p, Syndrome::rnr_nak(12), 0);
    let p = c.read_request(Dir::AtoB, 0x1000, 0x55, 2000); c.read_response(Dir::BtoA, p, 2000);
    let p = c.atomic(Dir::AtoB, 0x2000, 0x66, 5, Some(9)); c.atomic_ack(Dir::BtoA, p, 9);
    c.ud_send(Dir::AtoB, 20, Some(0xdeadbeef), 0x11111111);
    c.cnp(Dir::BtoA);
    c.cm(Dir::AtoB, dissector::wire::mad::CmMessage::Rtu{local_comm_id: 1, remote_comm_id: 2}, 7);
    let mut f = std::fs::File::create(std::env::args().nth(1).unwrap()).unwrap();
    let mut h = vec![]; h.extend(0xa1b23c4du32.to_le_bytes()); h.extend(2u16.to_le_bytes()); h.extend(4u16.to_le_bytes());
    h.extend(0u32.to_le_bytes()); h.extend(0u32.to_le_bytes()); h.extend(65535u32.to_le_bytes()); h.extend(1u32.to_le_bytes());
    f.write_all(&h).unwrap();
    for t in &c.frames { let mut r = vec![]; r.extend(((t.ts_ns/1_000_000_000) as u32).to_le_bytes()); r.extend(((t.ts_ns%1_000_000_000) as u32).to_le_bytes());
      r.extend((t.data.len() as u32).to_le_bytes()); r.extend((t.data.len() as u32).to_le_bytes()); f.write_all(&r).unwrap(); f.write_all(&t.data).unwrap(); }
}
