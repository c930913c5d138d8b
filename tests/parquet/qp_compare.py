"""The per-QP counts of the guide's query (docs/src/guide/parquet.md), compared with
`roce flows --json` of each capture: shared by check_duckdb.py and check_spark.py.

The query counts, per flow (one direction to one QP), the requests resent to it and
the NAKs and RNR NAKs carried to it; `roce flows` counts a flow's retransmissions
the same way, and reports NAKs on the flow of requests they answer — the flow whose
`paired_with` is the one they travel in.
"""
import json
import sys


def load_reports(path):
    """REPORTS.json: each capture's partition name mapped to its `roce flows --json`."""
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except (OSError, ValueError) as e:
        sys.exit(f"cannot read the reports {path}: {e}")


def read_query(path):
    try:
        with open(path, encoding="utf-8") as f:
            return f.read()
    except OSError as e:
        sys.exit(f"cannot read the query {path}: {e}")


def compare(rows, reports, engine):
    """rows: (capture, flow, src_qp, retransmissions, naks, rnr_naks) as the query
    returned them. Prints the totals compared; exits 1 with what differs otherwise."""
    # int(): Spark returns the unsigned 64-bit src_qp as a DECIMAL(20,0).
    sql = {
        (c, flow, None if qp is None else int(qp)): (r, n, rnr)
        for c, flow, qp, r, n, rnr in rows
    }
    errors = []
    captures = {c for c, _, _ in sql}
    if captures != set(reports):
        errors.append(f"partitions {sorted(captures ^ set(reports))} in one but not the other")
    totals = [0, 0, 0]
    for name, report in sorted(reports.items()):
        flows = {f["id"]: f for f in report["flows"]}

        def key(f):
            return (name, f"{f['src']}>{f['dst']}/0x{f['dest_qp']:06x}", f.get("src_qp"))

        keys = {key(f) for f in flows.values()}
        for k in sql:
            if k[0] == name and k not in keys:
                errors.append(f"{k}: a flow the query finds and roce flows does not")
        # NAKs the query finds on each flow, given to the flow whose requests they answer.
        naks = {i: [0, 0] for i in flows}
        for f in flows.values():
            _, n, rnr = sql.get(key(f), (0, 0, 0))
            if f["paired_with"] is None:
                if n or rnr:
                    errors.append(f"{key(f)}: {n} NAKs, {rnr} RNR NAKs to a flow with no pair")
                continue
            naks[f["paired_with"]][0] += n
            naks[f["paired_with"]][1] += rnr
        for i, f in flows.items():
            want = (f["retransmissions"], f["naks"], f["rnr_naks"])
            got = (sql.get(key(f), (0, 0, 0))[0], *naks[i])
            if got != want:
                errors.append(
                    f"{key(f)} (flow {i}): retransmissions, NAKs, RNR NAKs {got} by "
                    f"{engine}, {want} by roce flows"
                )
            for t, v in enumerate(want):
                totals[t] += v
    if errors:
        print("\n".join(errors[:30]))
        sys.exit(1)
    print(
        f"{len(reports)} captures, {len(rows)} flows: {totals[0]} retransmissions, "
        f"{totals[1]} NAKs, {totals[2]} RNR NAKs: {engine} equal to roce flows"
    )
