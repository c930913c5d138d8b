"""Queries a Hive-partitioned dataset that `roce decode -T parquet -w DIR` wrote with
DuckDB and checks the per-QP counts against `roce flows --json` of each capture.

    check_duckdb.py DIR QUERY.sql REPORTS.json

QUERY.sql is the query of docs/src/guide/parquet.md (tests/parquet/qp_counts.sql),
run over a view `frames` of every partition. REPORTS.json maps each capture's
partition name to its `roce flows --json` report. The query counts, per flow (one
direction to one QP), the requests resent to it and the NAKs and RNR NAKs carried to
it; `roce flows` counts a flow's retransmissions the same way, and reports NAKs on
the flow of requests they answer — the flow whose `paired_with` is the one they
travel in. Prints the totals compared; exits 1 with what differs otherwise.
"""
import json
import sys

import duckdb


def main():
    root, query, reports = sys.argv[1], open(sys.argv[2], encoding="utf-8").read(), json.load(open(sys.argv[3], encoding="utf-8"))
    con = duckdb.connect()
    glob = f"{root}/*/*.parquet".replace("'", "''")
    # As the guide shows it: the partition value stays text (`capture=2024` too).
    con.execute(
        f"CREATE VIEW frames AS SELECT * FROM read_parquet('{glob}', "
        "hive_partitioning = true, hive_types = {'capture': VARCHAR})"
    )
    rows = con.execute(query).fetchall()
    sql = {(c, flow, qp): (r, n, rnr) for c, flow, qp, r, n, rnr in rows}
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
                errors.append(f"{key(f)} (flow {i}): retransmissions, NAKs, RNR NAKs {got} by the query, {want} by roce flows")
            for t, v in enumerate(want):
                totals[t] += v
    if errors:
        print("\n".join(errors[:30]))
        sys.exit(1)
    print(
        f"{len(reports)} captures, {len(rows)} flows: {totals[0]} retransmissions, "
        f"{totals[1]} NAKs, {totals[2]} RNR NAKs: equal to roce flows"
    )


if __name__ == "__main__":
    main()
