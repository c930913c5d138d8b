use std::path::{Path, PathBuf};

use super::*;
use crate::scenario::check::parse_str;

/// QPs `uc` (UC) and `ud` (UD) and `rc` (RC) between b and a, a's send PSNs 1000,
/// -, 100; MR `target` on b; then `steps`.
fn scenario(steps: &str) -> Scenario {
    let text = format!(
        r#"
name = "repro unit"
format = 3
[endpoints.a]
[endpoints.b]
[[qp]]
name = "uc"
type = "uc"
between = ["b", "a"]
psn = {{ a = 1000, b = 5000 }}
[[qp]]
name = "ud"
type = "ud"
between = ["b", "a"]
[[qp]]
name = "rc"
type = "rc"
between = ["b", "a"]
psn = {{ a = 100, b = 500 }}
[[mr]]
name = "target"
on = "b"
size = 64
access = ["local_write", "remote_write"]
[[mr]]
name = "src"
on = "a"
size = 8
init = {{ text = "liveness" }}
{steps}
"#
    );
    match parse_str(Path::new("unit.toml"), &text) {
        Ok(sc) => sc,
        Err(d) => panic!("{d:?}"),
    }
}

/// The `pkt` bytes and the `struct probe` line of the program's only probe.
fn probe_of(c: &str) -> (Vec<u8>, String) {
    let start = c.find("static const uint8_t pkt[").expect("a probe");
    let body = &c[start..];
    let open = body.find('{').expect("bytes");
    let close = body.find("};").expect("end of bytes");
    let bytes = body[open + 1..close]
        .split(',')
        .filter_map(|b| u8::from_str_radix(b.trim().trim_start_matches("0x"), 16).ok())
        .collect();
    let p = body.find("const struct probe p").expect("the probe's fields");
    let line = &body[p..body[p..].find("};").map_or(body.len(), |e| p + e)];
    (bytes, line.split_whitespace().collect::<Vec<_>>().join(" "))
}

#[test]
fn a_write_probe_is_the_findings_bytes_with_va_and_rkey_written_in_by_the_run() {
    let sc = scenario(
        r#"
[[step]]
on = "a"
op = "probe"
qp = "uc"
probe = { id = "p13", opcode = "UC RDMA WRITE Only", remote = { mr = "target", offset = 6 }, dma_len = 0, payload = { pattern = "47" }, len = 16, settle_ms = 50 }
"#,
    );
    let c = c_program(&sc, "unit.toml").unwrap();
    let (ib, p) = probe_of(&c);
    // BTH (IBA 9.2): UC RDMA WRITE Only is 0x2a; PSN is a's first, 1000; the
    // RETH's DMA length 0, then 16 bytes of 0x47 and no pad.
    assert_eq!(ib[0], 0x2a);
    assert_eq!(&ib[9..12], &[0x00, 0x03, 0xe8]);
    assert_eq!(&ib[24..28], &[0, 0, 0, 0]);
    assert_eq!(&ib[28..], &[0x47; 16]);
    assert_eq!(ib.len(), 12 + 16 + 16);
    // The RETH follows the BTH: VA at 12, R_Key at 20, both the run's.
    for field in [
        ".qp = QP_uc",
        ".patch_dest_qp = 1",
        ".deth_at = -1",
        ".va_at = 12",
        ".rkey_at = 20",
        ".ieth_at = -1",
        ".remote_mr = MR_b_target",
        ".remote_offset = 6",
        ".rkey = -1",
        ".settle_ms = 50",
    ] {
        assert!(p.contains(field), "{field} in {p}");
    }
    assert!(c.contains("#define BARRIER_S 11"), "the longest step (50 ms) and 10 s");
    assert!(c.contains("if (me == 0) {"), "a sends it");
}

#[test]
fn each_qps_probes_go_on_from_the_psn_the_last_one_left() {
    let sc = scenario(
        r#"
[[step]]
on = "a"
op = "probe"
qp = "rc"
probe = { id = "one", opcode = "RDMA WRITE Only", remote = { mr = "target" }, payload = { pattern = "01" }, len = 4 }
[[step]]
on = "a"
op = "probe"
qp = "rc"
probe = { id = "dropped", opcode = "RDMA WRITE Only", remote = { mr = "target" }, payload = { pattern = "02" }, len = 4, p_key = 0x8123, moves_next = false }
[[step]]
on = "a"
op = "probe"
qp = "rc"
probe = { id = "three", opcode = "RDMA WRITE Only", remote = { mr = "target" }, payload = { pattern = "03" }, len = 4 }
"#,
    );
    let c = c_program(&sc, "unit.toml").unwrap();
    let psns: Vec<&str> = c.lines().filter(|l| l.contains("/* probe ")).map(|l| l.trim()).collect();
    assert_eq!(
        psns,
        [
            "/* probe one: RC RDMA WRITE Only, PSN 100 (next from 100) */",
            "/* probe dropped: RC RDMA WRITE Only, PSN 101 (next from 101) */",
            "/* probe three: RC RDMA WRITE Only, PSN 101 (next from 101) */",
        ]
    );
}

#[test]
fn a_ud_probe_gets_its_source_qp_written_into_the_deth() {
    let sc = scenario(
        r#"
[[step]]
on = "a"
op = "probe"
qp = "ud"
probe = { id = "ud", opcode = "UD SEND Only", len = 8, moves_next = false }
"#,
    );
    let c = c_program(&sc, "unit.toml").unwrap();
    let (ib, p) = probe_of(&c);
    assert_eq!(ib[0], 0x64);
    assert_eq!(ib.len(), 12 + 8 + 8, "BTH, DETH, payload");
    // The DETH's Q_Key: the scenario's default.
    assert_eq!(&ib[12..16], &DEFAULT_QKEY_BYTES);
    assert!(p.contains(".deth_at = 12") && p.contains(".va_at = -1"), "{p}");
}

const DEFAULT_QKEY_BYTES: [u8; 4] = crate::scenario::model::DEFAULT_QKEY.to_be_bytes();

#[test]
fn verbs_steps_are_work_requests_with_the_peers_keys_learned_at_run_time() {
    let sc = scenario(
        r#"
[[step]]
on = "a"
op = "write"
qp = "rc"
wr_id = 99
sge = [{ mr = "src" }]
remote = { mr = "target", offset = 8 }
[[step]]
on = "b"
op = "wait_completions"
count = 1
within_ms = 2500
"#,
    );
    let c = c_program(&sc, "unit.toml").unwrap();
    assert!(c.contains("struct ibv_sge sge[] = { sge_of(MR_a_src, 0, 8) };"), "{c}");
    assert!(c.contains(".opcode = IBV_WR_RDMA_WRITE"));
    assert!(c.contains(
        ".wr.rdma = { .remote_addr = remote_va(MR_b_target, 8), .rkey = theirs.mr_rkey[MR_b_target] }"
    ));
    assert!(c.contains("post_send(QP_rc, &wr);"));
    assert!(c.contains("wait_completions(1, 2500);"));
    assert!(c.contains("#define BARRIER_S 13"), "2.5 s rounds up to 3, and 10 s");
    // The QPs' first PSNs as the scenario gives them, each end's.
    assert!(c.contains(r#"{ .name = "rc", .type = IBV_QPT_RC, .psn = { 100, 500 }"#), "{c}");
    // a's MR holds its text; b's starts as zeros.
    assert!(c.contains("static const uint8_t INIT_a_src[8] = {\n\t0x6c, 0x69, 0x76"));
    assert!(c.contains(
        r#"{ "target", 1, 64, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE, NULL, 0, 0 },"#
    ));
}

#[test]
fn what_has_no_c_form_is_named_with_its_step() {
    let sc = scenario(
        r#"
[[step]]
on = "a"
op = "arm_cq"
"#,
    );
    let e = c_program(&sc, "unit.toml").unwrap_err();
    assert_eq!(e, "step 1: `arm_cq` has no C form yet");
}

/// The committed findings' reproducers are what `roce repro` writes of them now
/// (`ROCE_BLESS=1` rewrites them), and each builds without a warning where
/// libibverbs' headers are (always in CI).
#[test]
fn committed_reproducers_are_current_and_build() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../scenarios/findings");
    let mut seen = 0;
    for dir in std::fs::read_dir(&root).unwrap() {
        let dir = dir.unwrap().path();
        let file = dir.join("repro.c");
        if !file.exists() {
            continue;
        }
        seen += 1;
        let finding = dir.join("finding.toml");
        let loaded = crate::scenario::load_all(&[finding]).unwrap();
        let name = format!(
            "scenarios/findings/{}/finding.toml",
            dir.file_name().unwrap().to_string_lossy()
        );
        let c = c_program(&loaded[0].1, &name).unwrap();
        if std::env::var_os("ROCE_BLESS").is_some() {
            std::fs::write(&file, &c).unwrap();
        }
        assert_eq!(
            std::fs::read_to_string(&file).unwrap(),
            c,
            "{} is stale: ROCE_BLESS=1 cargo test -p roce repro",
            file.display()
        );
        compiles(std::slice::from_ref(&file));
    }
    assert!(seen >= 2, "the two kernel findings have reproducers; found {seen}");
}

/// `cc -Wall -Wextra -Werror -fsyntax-only` over `files` in one run; skipped
/// (said) where there is no compiler or no libibverbs headers, except in CI.
fn compiles(files: &[PathBuf]) {
    let headers = Path::new("/usr/include/infiniband/verbs.h").exists();
    let cc = std::process::Command::new("cc").arg("--version").output().is_ok();
    if !(headers && cc) {
        assert!(std::env::var_os("CI").is_none(), "CI has cc and libibverbs-dev");
        eprintln!("skipped building {} C files: no cc or no libibverbs headers", files.len());
        return;
    }
    let out = std::process::Command::new("cc")
        .args(["-std=gnu11", "-Wall", "-Wextra", "-Werror", "-fsyntax-only"])
        .args(files)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
}

/// Every scenario case of the corpus has a C form, or its refusal names what has
/// none yet; every C form builds (one compiler run over them all).
#[test]
fn the_corpus_has_c_forms_that_build_or_says_what_has_none() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../scenarios");
    let files = crate::scenario::discover(std::slice::from_ref(&root)).unwrap();
    let loaded = crate::scenario::load_all(&files).unwrap();
    let dir = std::env::temp_dir().join(format!("roce-repro-corpus-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (mut written, mut refused) = (Vec::new(), Vec::new());
    for (i, (file, sc)) in loaded.iter().enumerate() {
        match c_program(sc, &file.display().to_string()) {
            Ok(c) => {
                let to = dir.join(format!("{i}.c"));
                std::fs::write(&to, c).unwrap();
                written.push(to);
            }
            Err(e) => {
                assert!(e.contains("no C form yet"), "{}: {e}", file.display());
                refused.push(e);
            }
        }
    }
    // 272 of 292 when this was written: streams, ATOMIC WRITE and FLUSH, CQ
    // notification and a modify_qp with access flags have none.
    assert!(
        written.len() >= 270,
        "{} C forms, {} refused: {refused:?}",
        written.len(),
        refused.len()
    );
    compiles(&written);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn nothing_of_the_scenario_ends_a_c_comment_early() {
    let mut sc = scenario("");
    sc.name = "a WRITE */ int evil; /* that panics".into();
    let c = c_program(&sc, "dir*/x.toml").unwrap();
    assert!(c.contains(" * Reproducer of: a WRITE * / int evil; / * that panics"), "{c}");
    assert!(c.contains("`roce repro dir* /x.toml`"));
    let file = std::env::temp_dir().join(format!("roce-repro-comment-{}.c", std::process::id()));
    std::fs::write(&file, &c).unwrap();
    compiles(std::slice::from_ref(&file));
    let _ = std::fs::remove_file(&file);
}

#[test]
fn each_end_opens_the_device_and_gid_its_endpoint_names() {
    let mut sc = scenario("");
    let a = sc.endpoints.get_mut("a").unwrap();
    a.device = Some("mlx5_0".into());
    a.gid_index = Some(3);
    a.port = Some(2);
    let c = c_program(&sc, "unit.toml").unwrap();
    assert!(c.contains(r#"static const char *const DEVICE[2] = { "mlx5_0", 0 };"#), "{c}");
    assert!(c.contains("static const unsigned char PORT[2] = { 2, 1 };"));
    assert!(c.contains("static const int GID_INDEX[2] = { 3, -1 };"));
}

#[test]
fn a_pattern_is_written_as_its_period_and_text_as_itself() {
    let mut bytes = vec![0u8; 1 << 20];
    for (i, b) in bytes.iter_mut().enumerate() {
        *b = [0xde, 0xad, 0xbe, 0xef][i % 4];
    }
    assert_eq!(init_of(&bytes), Some((&[0xde, 0xad, 0xbe, 0xef][..], true)), "1 MiB, 4 bytes");
    let mut text = b"liveness".to_vec();
    text.resize(64, 0);
    assert_eq!(init_of(&text), Some((&b"liveness"[..], false)), "the zeros after it are calloc's");
    assert_eq!(init_of(&[0x5a; 8]), Some((&[0x5a][..], true)));
    assert_eq!(init_of(&[0; 16]), None);
    assert_eq!(init_of(b"ab"), Some((&b"ab"[..], false)), "a period as long as the MR stands once");
}
