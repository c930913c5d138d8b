//! Stream steps (`op = "stream"`): the QPs that carry them, their content,
//! the ring round a region, the peer's receives, and what must fit where.
//!
//! Owns: the `impl Checker` for stream steps. Imports: the checker's vocabulary (`use
//! super::*`); nothing else.
use super::*;

/// A stream's QPs, as its receives need them: the peer they go to, how many,
/// and the fewest receives one of them can hold.
/// The QPs that carry one stream: see `Checker::stream_carriers`.
struct Carriers {
    names: Vec<String>,
    peer: String,
    send_wr: u64,
    recv_wr: u32,
}

pub(super) struct StreamQps<'a> {
    peer: &'a str,
    count: usize,
    recv_wr: u32,
}

/// The peer's receives for a SEND stream, checked (the stream's own id, QPs,
/// content and deadline complete them into a [`ReceiveOrder`]).
struct ReceiveSpec {
    /// Where the SENDs land; none for a `write_imm` stream's receives.
    mr: Option<String>,
    offset: u64,
    depth: u32,
    low_water: u32,
}

impl<'a> Checker<'a> {
    /// A stream step: its QPs (one peer), verb, sizes and regions, every bound.
    pub(super) fn stream(
        &mut self,
        s: &file::StepFile,
        op: &StepOp,
        ids: &mut Vec<String>,
    ) -> Option<Step> {
        let StepOp::Stream {
            id,
            on,
            qp,
            qps,
            verb,
            count,
            size,
            seed,
            window,
            signal_every,
            local,
            remote,
            receive,
            add,
            cmp_swap_every,
            within_ms,
            ring,
            spread,
        } = op
        else {
            return None;
        };
        if ids.contains(id) {
            self.err(Some(s.at("id")), format!("a second stream named `{id}`"), None);
        }
        ids.push(id.clone());
        let Carriers { names, peer, send_wr, recv_wr } =
            self.stream_carriers(s, on, verb, qp.as_deref(), qps)?;
        // The word the atomics work on holds the peer MR's initial content.
        let from = remote
            .as_ref()
            .and_then(|r| Some(self.initial_word(&peer, r.mr.as_deref()?, r.offset.unsigned_abs())))
            .unwrap_or(0);
        let verb = self.stream_verb(s, verb, *add, *cmp_swap_every, from)?;
        if let StreamVerb::Atomic { cmp_swap_every: k, .. } = verb {
            if k > 0 && names.len() > 1 {
                let hint = "a CmpSwap compares with what the word holds once every atomic before it ran, known only when they run in order on one QP; over several QPs, use `fetch_add`";
                self.err(
                    Some(s.at("qps")),
                    format!("an `atomics` stream with CmpSwap over {} QPs", names.len()),
                    Some(hint.into()),
                );
            }
        }
        if !(1..=STREAM_MESSAGES).contains(count) {
            self.err(
                Some(s.at("count")),
                format!("a stream of {count} messages: give 1 to {STREAM_MESSAGES}"),
                None,
            );
            return None;
        }
        let sizes = self.stream_sizes(s, size.as_ref(), verb)?;
        let window = window.unwrap_or(16);
        let mut content = StreamContent {
            seed: seed.unwrap_or(1),
            count: *count,
            sizes,
            ring: None,
            spread: Spread::RoundRobin,
        };
        content.ring =
            ring.filter(|&r| self.stream_ring(s, verb, r, window, u64::from(content.max_len())));
        content.spread = self.stream_spread(s, spread.as_deref());
        let signal_every = signal_every.unwrap_or(1);
        let within_ms = within_ms.unwrap_or(60_000);
        self.stream_pacing(s, window, send_wr, signal_every, within_ms);
        let (local_span, remote_span) = match verb {
            StreamVerb::Atomic { .. } => (8 * count, 8),
            _ => (content.span(), content.span()),
        };
        self.stream_local(s, on, local, local_span);
        let qps = StreamQps { peer: &peer, count: names.len(), recv_wr };
        let receive =
            self.stream_receive(s, verb, receive.as_ref(), remote.is_some(), qps, &content)?;
        let remote = remote.as_ref().map(|r| self.remote(s, on, &names[0], r));
        if let Some(remote) = &remote {
            self.stream_remote(s, &peer, verb, remote, remote_span);
        }
        let order = StreamOrder {
            id: id.clone(),
            qps: names,
            verb,
            content,
            window,
            signal_every,
            local_mr: local.mr.clone(),
            local_offset: local.offset,
            remote,
            within_ms,
        };
        let receive = receive.map(|r| ReceiveOrder {
            id: id.clone(),
            qps: order.qps.clone(),
            content,
            depth: r.depth,
            low_water: r.low_water,
            mr: r.mr,
            offset: r.offset,
            within_ms,
        });
        Some(Step::Stream(StreamStep { on: on.clone(), peer, order, receive }))
    }

    /// How a stream's messages are dealt to its QPs.
    fn stream_spread(&mut self, s: &file::StepFile, spread: Option<&str>) -> Spread {
        match spread {
            None | Some("round_robin") => Spread::RoundRobin,
            Some("random") => Spread::Random,
            Some(other) => {
                let hint = name_hint(other, ["round_robin", "random"]);
                self.err(
                    Some(s.at("spread")),
                    format!(
                        "a spread of `{other}`: messages go `round_robin` or `random` over the QPs"
                    ),
                    hint,
                );
                Spread::RoundRobin
            }
        }
    }

    /// A stream's window, signalling and deadline, each within its bounds.
    fn stream_pacing(
        &mut self,
        s: &file::StepFile,
        window: u32,
        send_wr: u64,
        signal_every: u32,
        within_ms: u64,
    ) {
        if window == 0 || u64::from(window) > send_wr {
            let hint = format!("its QPs' send queues hold {send_wr} work requests in all (`max_send_wr`, default 16 each)");
            self.err(
                Some(s.at("window")),
                format!("a window of {window}: give 1 to {send_wr}"),
                Some(hint),
            );
        }
        if signal_every == 0 || signal_every > window {
            self.err(Some(s.at("signal_every")), format!("signalling every {signal_every}-th message: give 1 to the window ({window})"), Some("an unsignalled message holds its send queue slot until a signalled one after it completes".into()));
        }
        if !TIMEOUT_MS.contains(&within_ms) {
            self.err(
                Some(s.at("within_ms")),
                format!("{within_ms} ms: give {} to {}", TIMEOUT_MS.start(), TIMEOUT_MS.end()),
                None,
            );
        }
    }

    /// The local MR a stream's messages come from (or land in), long enough.
    fn stream_local(
        &mut self,
        s: &file::StepFile,
        on: &str,
        local: &file::StreamLocal,
        local_span: u64,
    ) {
        match self.mr_file(on, &local.mr) {
            None => {
                let hint = name_hint(&local.mr, self.mr_names_on(on));
                self.err(Some(s.at("local")), format!("no MR `{}` on `{on}`", local.mr), hint);
            }
            Some(m) if local.offset.saturating_add(local_span) > m.size.value => self.err(
                Some(s.at("local")),
                format!(
                    "the stream needs {local_span} bytes from offset {} of MR `{}`, which has {}",
                    local.offset, local.mr, m.size.value
                ),
                None,
            ),
            Some(_) => {}
        }
    }

    /// Where a stream's messages are received: the peer's receives for a SEND or
    /// WRITE with immediate (none for the others); `None` when the verb and what
    /// the step gives do not go together.
    fn stream_receive(
        &mut self,
        s: &file::StepFile,
        verb: StreamVerb,
        receive: Option<&file::StreamReceive>,
        remote: bool,
        qps: StreamQps<'_>,
        content: &StreamContent,
    ) -> Option<Option<ReceiveSpec>> {
        Some(match (verb, receive, remote) {
            // A SEND goes to the receives alone; a WRITE with immediate to the
            // peer's MR and a receive.
            (StreamVerb::Send, Some(r), false) | (StreamVerb::WriteImm, Some(r), true) => {
                Some(self.stream_receives(s, verb, qps, content, r))
            }
            (StreamVerb::WriteImm, _, _) => {
                self.err(Some(s.at("verb")), "a `write_imm` stream writes the peer's MR and consumes its receives: give `remote = { mr = \"…\" }` and `receive = { depth = … }`", None);
                return None;
            }
            (StreamVerb::Send, _, _) => {
                self.err(Some(s.at("verb")), "a `send` stream goes to the peer's receives: give `receive = { mr = \"…\" }`, and no `remote`", None);
                return None;
            }
            (_, Some(_), _) => {
                self.err(
                    Some(s.at("receive")),
                    "`receive` is for a `send` or `write_imm` stream",
                    None,
                );
                return None;
            }
            (_, None, false) => {
                self.err(
                    Some(s.at("verb")),
                    format!(
                        "a {} stream addresses the peer's memory: give `remote = {{ mr = \"…\" }}`",
                        verb.name()
                    ),
                    None,
                );
                return None;
            }
            (_, None, true) => None,
        })
    }

    /// The QPs that carry a stream (`qp`, or `qps` round robin), which must all go
    /// to one peer: with their send queues' total and their smallest receive queue.
    fn stream_carriers(
        &mut self,
        s: &file::StepFile,
        on: &str,
        verb: &str,
        qp: Option<&str>,
        qps: &[String],
    ) -> Option<Carriers> {
        let names: Vec<String> = match (qp, qps.is_empty()) {
            (Some(q), true) => vec![q.to_string()],
            (None, false) => qps.to_vec(),
            _ => {
                self.err(Some(s.span.clone()), "say which QPs carry the stream: `qp = \"…\"`, or `qps = [\"…\", …]` (round robin), one of them", None);
                return None;
            }
        };
        let mut peer: Option<String> = None;
        let mut send_wr = 0u64;
        let mut recv_wr = u32::MAX;
        for n in &names {
            let key = if qp.is_some() { "qp" } else { "qps" };
            let q = self.qp_step(0, s, on, n)?;
            if q.qp_type == QpType::Ud
                || (q.qp_type == QpType::Uc && verb != "write" && verb != "send")
            {
                let t = if q.qp_type == QpType::Ud { "UD" } else { "UC" };
                self.err(Some(s.at(key)), format!("a {verb} stream on {t} QP `{n}`: streams of WRITEs and SENDs go on RC or UC QPs, READs and atomics on RC"), None);
            }
            recv_wr = recv_wr.min(q.max_recv_wr.unwrap_or(16));
            let p = if q.between[0] == *on { q.between[1].clone() } else { q.between[0].clone() };
            if peer.as_ref().is_some_and(|x| *x != p) {
                self.err(Some(s.at(key)), format!("QP `{n}` goes to `{p}`, the stream's other QPs to `{}`: one stream, one peer", peer.clone().unwrap_or_default()), None);
            }
            peer.get_or_insert(p);
            send_wr += u64::from(q.max_send_wr.unwrap_or(16));
        }
        Some(Carriers { names, peer: peer?, send_wr, recv_wr })
    }

    /// A stream's `verb` (with `add` and `cmp_swap_every`, which only some verbs
    /// take); an atomic stream's word starts as `from`.
    fn stream_verb(
        &mut self,
        s: &file::StepFile,
        verb: &str,
        add: Option<u64>,
        cmp_swap_every: Option<u32>,
        from: u64,
    ) -> Option<StreamVerb> {
        let atomic = |add: Option<u64>, cmp_swap_every| StreamVerb::Atomic {
            add: add.unwrap_or(1),
            cmp_swap_every,
            from,
        };
        let verb = match (verb, add, cmp_swap_every) {
            ("write", None, None) => StreamVerb::Write,
            ("read", None, None) => StreamVerb::Read,
            ("send", None, None) => StreamVerb::Send,
            ("write_imm", None, None) => StreamVerb::WriteImm,
            ("fetch_add", a, None) => atomic(a, 0),
            ("atomics", a, k) => atomic(a, k.unwrap_or(2)),
            ("write" | "read" | "send" | "write_imm" | "fetch_add", _, Some(_)) => {
                self.err(
                    Some(s.at("cmp_swap_every")),
                    "`cmp_swap_every` is for an `atomics` stream",
                    Some("verb = \"atomics\" mixes CmpSwap into the FetchAdds".into()),
                );
                return None;
            }
            ("write" | "read" | "send" | "write_imm", Some(_), _) => {
                self.err(Some(s.at("add")), "`add` is for a `fetch_add` or `atomics` stream", None);
                return None;
            }
            (other, _, _) => {
                let hint = name_hint(
                    other,
                    ["write", "read", "fetch_add", "atomics", "send", "write_imm"],
                );
                self.err(Some(s.at("verb")), format!("a stream of `{other}`: streams post `write`, `read`, `fetch_add`, `atomics`, `send` or `write_imm`"), hint);
                return None;
            }
        };
        Some(verb)
    }

    /// A stream's message sizes: fixed or uniform, within bounds; 8 bytes for atomics.
    fn stream_sizes(
        &mut self,
        s: &file::StepFile,
        size: Option<&file::StreamSize>,
        verb: StreamVerb,
    ) -> Option<Sizes> {
        Some(match (size, verb) {
            (None, StreamVerb::Atomic { .. })
            | (Some(file::StreamSize::Fixed(8)), StreamVerb::Atomic { .. }) => Sizes::Fixed(8),
            (_, StreamVerb::Atomic { .. }) => {
                self.err(
                    Some(s.at("size")),
                    format!("an atomic moves 8 bytes: a `{}` stream has no `size`", verb.name()),
                    None,
                );
                return None;
            }
            (None, _) => Sizes::Fixed(64),
            (Some(file::StreamSize::Fixed(n)), _) if (1..=MAX_STREAM_MESSAGE).contains(n) => {
                Sizes::Fixed(*n)
            }
            (Some(file::StreamSize::Range { min, max }), _)
                if *min >= 1 && min <= max && *max <= MAX_STREAM_MESSAGE =>
            {
                Sizes::Uniform { min: *min, max: *max }
            }
            (Some(_), _) => {
                self.err(
                    Some(s.at("size")),
                    format!(
                        "message sizes go from 1 to {MAX_STREAM_MESSAGE} bytes, and `min` ≤ `max`"
                    ),
                    Some("size = 4096, or size = { min = 1, max = 4096 }".into()),
                );
                return None;
            }
        })
    }

    /// A stream's ring: for the verbs whose memory can go round one, large enough
    /// that no message in flight is written over, small enough to check.
    pub(super) fn stream_ring(
        &mut self,
        s: &file::StepFile,
        verb: StreamVerb,
        ring: u64,
        window: u32,
        longest: u64,
    ) -> bool {
        if !matches!(verb, StreamVerb::Write | StreamVerb::Send | StreamVerb::WriteImm) {
            let why = match verb {
                StreamVerb::Read => "a READ stream reads the peer's MR, filled once before it starts, so its messages cannot share the bytes",
                _ => "an atomic stream's old values each have their own 8 bytes",
            };
            self.err(
                Some(s.at("ring")),
                format!("`ring` is for `write`, `write_imm` and `send` streams: {why}"),
                None,
            );
            return false;
        }
        // A message that would run past the end starts again at 0: up to one
        // message's length is lost at the end of each lap.
        let need = (u64::from(window) + 2) * longest;
        if ring < need {
            self.err(
                Some(s.at("ring")),
                format!("a ring of {ring} bytes: with a window of {window}, messages of up to {longest} bytes need at least {need} ((window + 2) × the longest), or a message in flight is written over"),
                None,
            );
            return false;
        }
        if ring > MAX_RING {
            self.err(Some(s.at("ring")), format!("a ring of {ring} bytes: at most {MAX_RING} (its check holds the owner of each byte)"), Some("leave out `ring` to lay the messages back to back".into()));
            return false;
        }
        true
    }

    /// The peer's receives of a SEND stream: a ring of `depth` slots of the
    /// longest message per QP in its MR. A `write_imm` stream's hold no bytes.
    fn stream_receives(
        &mut self,
        s: &file::StepFile,
        verb: StreamVerb,
        qps: StreamQps<'_>,
        content: &StreamContent,
        r: &file::StreamReceive,
    ) -> ReceiveSpec {
        let StreamQps { peer, count: qps, recv_wr } = qps;
        let depth = r.depth.unwrap_or(16);
        if depth == 0 || depth > recv_wr {
            let hint = format!(
                "the stream's QPs' receive queues hold {recv_wr} each (`max_recv_wr`, default 16)"
            );
            self.err(
                Some(s.at("receive")),
                format!("a receive depth of {depth}: give 1 to {recv_wr}"),
                Some(hint),
            );
        }
        let low_water = r.low_water.unwrap_or(depth.saturating_sub(1));
        if low_water >= depth {
            self.err(Some(s.at("receive")), format!("a low water mark of {low_water} with {depth} receives: it goes below the depth"), Some("receives are reposted once no more than `low_water` are left".into()));
        }
        let need = u64::from(content.max_len()) * u64::from(depth) * qps as u64;
        let mr = match (verb, &r.mr) {
            (StreamVerb::WriteImm, None) => None,
            (StreamVerb::WriteImm, Some(_)) => {
                self.err(Some(s.at("receive")), "a `write_imm` stream's data goes to `remote`; its receives hold no bytes: leave out `receive.mr`", None);
                None
            }
            (_, None) => {
                self.err(
                    Some(s.at("receive")),
                    "a `send` stream's receives need an MR to land in: `receive = { mr = \"…\" }`",
                    None,
                );
                None
            }
            (_, Some(mr)) => Some(mr.clone()),
        };
        if let Some(mr) = &mr {
            match self.mr_file(peer, mr) {
                None => {
                    let hint = name_hint(mr, self.mr_names_on(peer));
                    self.err(Some(s.at("receive")), format!("no MR `{mr}` on `{peer}`"), hint);
                }
                Some(m) if r.offset.saturating_add(need) > m.size.value => self.err(
                    Some(s.at("receive")),
                    format!("{depth} receives of {} bytes on each of {qps} QPs need {need} bytes from offset {} of MR `{mr}` on `{peer}`, which has {}", content.max_len(), r.offset, m.size.value),
                    None,
                ),
                Some(_) => {}
            }
        }
        ReceiveSpec { mr, offset: r.offset, depth, low_water }
    }

    /// A stream's remote end: an MR of the peer that holds it.
    pub(super) fn stream_remote(
        &mut self,
        s: &file::StepFile,
        peer: &str,
        verb: StreamVerb,
        remote: &RemoteRef,
        remote_span: u64,
    ) {
        let offset = remote.offset.unsigned_abs();
        if remote.offset < 0 {
            self.err(
                Some(s.at("remote")),
                format!("offset {}: a stream's messages land from the MR's first byte on", remote.offset),
                Some("a single `write` or `read` step may start before an MR (mr.bounds.before-start)".into()),
            );
        } else if remote.mw.is_some() {
            self.err(
                Some(s.at("remote")),
                "a stream addresses an MR of the peer (`mr = …`), not a window",
                None,
            );
        } else if remote.rkey.is_none() {
            match self.mr_file(peer, &remote.mr) {
                None => {
                    let hint = name_hint(&remote.mr, self.mr_names_on(peer));
                    self.err(Some(s.at("remote")), format!("no MR `{}` on `{peer}`", remote.mr), hint);
                }
                Some(m) if offset.saturating_add(remote_span) > m.size.value => self.err(
                    Some(s.at("remote")),
                    format!("the stream needs {remote_span} bytes from offset {} of MR `{}` on `{peer}`, which has {}", remote.offset, remote.mr, m.size.value),
                    Some("to provoke NAKs on purpose, set `rkey` too".into()),
                ),
                Some(_) if matches!(verb, StreamVerb::Atomic { .. }) && !offset.is_multiple_of(8) => {
                    self.err(Some(s.at("remote")), format!("an atomic's target is 8-byte aligned; offset {} is not", remote.offset), None)
                }
                Some(_) => {}
            }
        }
    }
}
