//! Probes (`op = "probe"`): crafted frames, their payloads and PSNs.
//!
//! Owns: the `impl Checker` for probes, `probe_payload` (which `roce probe` shares) and
//! `psn_at`. Imports: the checker's vocabulary (`use super::*`), dissector's wire and
//! text types.
use super::*;

/// A probe's payload: `payload` (a pattern repeated to `len`), or `len` zero bytes.
pub(crate) fn probe_payload(
    payload: Option<&Content>,
    len: Option<u32>,
) -> Result<Vec<u8>, String> {
    let len = len.map(|l| l as usize);
    match (payload, len) {
        (Some(c @ Content::Pattern(_)), None) => c.try_bytes(0).and_then(|b| {
            if b.is_empty() {
                Err("an empty pattern".into())
            } else {
                Ok(b)
            }
        }),
        (Some(c), Some(l)) => {
            let mut b = c.try_bytes(l)?;
            if b.len() > l {
                return Err(format!("a payload of {} bytes, but `len` is {l}", b.len()));
            }
            b.resize(l, 0);
            Ok(b)
        }
        (Some(c), None) => c.try_bytes(0),
        (None, l) => Ok(vec![0; l.unwrap_or(0)]),
    }
}

/// `"next"`, `"next+3"`, `"next-1"` or an absolute 24-bit PSN.
pub(crate) fn psn_at(r: &PsnRef) -> Result<PsnAt, String> {
    match r {
        PsnRef::Absolute(p) if *p <= Psn::MASK => Ok(PsnAt::Absolute(*p)),
        PsnRef::Absolute(p) => Err(format!("PSN {p} is more than 24 bits")),
        PsnRef::Relative(s) => {
            let bad =
                || format!("`{s}` is not a PSN: say \"next\", \"next+N\", \"next-N\" or a number");
            let t: String = s.chars().filter(|c| !c.is_whitespace()).collect();
            let rest = t.strip_prefix("next").ok_or_else(bad)?;
            if rest.is_empty() {
                return Ok(PsnAt::Next(0));
            }
            let (sign, n) = match rest.split_at(1) {
                ("+", n) => (1, n),
                ("-", n) => (-1, n),
                _ => return Err(bad()),
            };
            let n: i32 = n.parse().map_err(|_| format!("`{s}`: `{n}` is not a number"))?;
            if n > 0x7f_ffff {
                return Err(format!("`{s}`: more than half the 24-bit PSN space away"));
            }
            Ok(PsnAt::Next(sign * n))
        }
    }
}

impl<'a> Checker<'a> {
    /// A probe step: the packet must be one we can build, aimed at what exists.
    pub(super) fn probe(
        &mut self,
        s: &file::StepFile,
        p: &ProbeFile,
        q: &file::QpFile,
        on: &str,
        qp: &str,
    ) -> Option<ProbeOrder> {
        let at = Some(s.at("probe"));
        let peer = if q.between[0] == on { q.between[1].clone() } else { q.between[0].clone() };
        let transport = match q.qp_type {
            QpType::Rc => dissector::wire::Transport::Rc,
            QpType::Uc => dissector::wire::Transport::Uc,
            QpType::Ud => dissector::wire::Transport::Ud,
        };
        let opcode = match &p.opcode {
            file::OpcodeRef::Number(n) => Opcode(*n),
            file::OpcodeRef::Name(n) => match Opcode::from_name(n, transport) {
                Some(o) => o,
                None => {
                    let known: Vec<&str> = Opcode::names(transport).collect();
                    let hint = match dissector::text::did_you_mean(n.trim(), known.iter().copied()) {
                        Some(m) => format!("did you mean `{m}`? (a name as `roce decode` prints it, or a number)"),
                        None => "a name as `roce decode` prints it (\"RDMA WRITE Only\", \"UD SEND Only\") or a number".into(),
                    };
                    self.err(at, format!("unknown opcode `{n}` for a {transport} QP"), Some(hint));
                    return None;
                }
            },
        };
        let psn = match p.psn.as_ref().map(psn_at).transpose() {
            Ok(x) => x.unwrap_or(PsnAt::Next(0)),
            Err(e) => {
                self.err(at.clone(), e, None);
                PsnAt::Next(0)
            }
        };
        let headers = opcode.info().map_or(Headers::PAYLOAD, |i| i.headers);
        let addressed = headers.contains(Headers::RETH) || headers.contains(Headers::ATOMICETH);
        match &p.remote {
            None if addressed => self.err(at.clone(), format!("{opcode} carries a remote address: give `remote = {{ mr = … }}`, an MR on `{peer}`"), Some("set `rkey` in it to send a wrong one".into())),
            Some(_) if !addressed => self.err(at.clone(), format!("{opcode} has no RETH or AtomicETH to put a remote address in"), None),
            Some(r) if r.mw.is_some() || r.mr.is_none() => self.err(at.clone(), "a probe's `remote` names an MR of the target: `remote = { mr = … }`", None),
            Some(r) if self.mr_file(&peer, r.mr.as_deref().unwrap_or("")).is_none() => {
                let mr = r.mr.as_deref().unwrap_or("");
                let hint = name_hint(mr, self.mr_names_on(&peer));
                self.err(at.clone(), format!("no MR `{mr}` on `{peer}`, the target of the probe"), hint)
            }
            _ => {}
        }
        let payload = match probe_payload(p.payload.as_ref(), p.len) {
            Err(e) => {
                self.err(at.clone(), e, None);
                Vec::new()
            }
            Ok(b) if !b.is_empty() && !headers.contains(Headers::PAYLOAD) => {
                self.err(at.clone(), format!("{opcode} carries no payload"), None);
                b
            }
            Ok(b) if b.len() > 4096 => {
                self.err(
                    at.clone(),
                    format!("a payload of {} bytes: more than the largest MTU", b.len()),
                    Some("one packet carries at most the path MTU (4096)".into()),
                );
                b
            }
            Ok(b) => b,
        };
        if p.copies.is_some_and(|c| c == 0 || c > 64) {
            self.err(at.clone(), "1 to 64 copies", None);
        }
        if let Some(t) = p.tver.filter(|t| *t > 15) {
            self.err(at.clone(), format!("`tver = {t}`: TVer is 4 bits (0 to 15)"), None);
        }
        if let Some(n) = p.pad.filter(|n| *n > 3) {
            self.err(at, format!("`pad = {n}`: PadCnt is 2 bits (0 to 3)"), None);
        }
        Some(ProbeOrder {
            id: p.id.clone(),
            qp: qp.to_string(),
            opcode: opcode.0,
            psn,
            moves_next: p.moves_next.unwrap_or(psn == PsnAt::Next(0)),
            remote: p.remote.as_ref().map(|r| RemoteRef {
                mr: r.mr.clone().unwrap_or_default(),
                offset: r.offset,
                rkey: r.rkey,
                mw: None,
            }),
            dma_len: p.dma_len,
            payload: Hex(payload),
            imm_data: p.imm_data.unwrap_or(0),
            compare: p.compare.unwrap_or(0),
            swap_add: p.swap.or(p.add).unwrap_or(0),
            ack_req: p.ack_req.unwrap_or(true),
            bad_icrc: p.bad_icrc.unwrap_or(false),
            bth: BthBits {
                tver: p.tver.unwrap_or(0),
                solicited: p.solicited.unwrap_or(false),
                pad: p.pad,
            },
            udp_src_port: p.udp_src_port,
            p_key: p.p_key.unwrap_or(DEFAULT_PKEY),
            dest_qp: p.dest_qp,
            q_key: p.q_key.unwrap_or(DEFAULT_QKEY),
            copies: p.copies.unwrap_or(1).clamp(1, 64),
            settle_ms: p.settle_ms.unwrap_or(DEFAULT_SETTLE_MS).min(MAX_SETTLE_MS),
            quiet_ms: p.quiet_ms,
        })
    }
}
