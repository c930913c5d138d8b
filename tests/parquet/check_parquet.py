"""Reads Parquet files `roce` wrote, with pyarrow (an independent reader), and checks
them against `roce`'s own text and JSON output.

    check_parquet.py FILE.parquet FIELDS.txt FIELD...
    check_parquet.py --flows DIR REPORT.json

FIELDS.txt is `roce decode -T fields -e FIELD...` on the same capture: every column
must have the type its field's values have, and every row, printed the way
`-T fields` prints it, must equal that line. With --flows, DIR holds what
`roce flows --parquet DIR` wrote and REPORT.json is `roce flows --json` of the same
capture: every flow's counters and every event must be there, typed. Prints one
line of counts; exits 1 with what differs otherwise.
"""
import datetime
import sys

import pyarrow as pa
import pyarrow.parquet as pq

# What each field's column must be (others: a string column).
TYPES = {
    "frame.number": pa.uint64(),
    "frame.len": pa.uint64(),
    "frame.time_epoch": pa.timestamp("ns", tz="UTC"),
    "frame.time_relative": pa.float64(),
    "frame.time_delta": pa.float64(),
    "ip.src": pa.string(),
    "ip.addr": pa.list_(pa.field("element", pa.string(), nullable=False)),
    "udp.port": pa.list_(pa.field("element", pa.uint64(), nullable=False)),
    "eth.src": pa.string(),
    "infiniband.bth.opcode": pa.uint64(),
    "infiniband.bth.destqp": pa.uint64(),
    "infiniband.bth.psn": pa.uint64(),
    "infiniband.bth.a": pa.bool_(),
    "infiniband.aeth.syndrome": pa.uint64(),
    "infiniband.reth.va": pa.uint64(),
    "infiniband.reth.r_key": pa.uint64(),
    "infiniband.immdt": pa.binary(),
    "_ws.col.Info": pa.string(),
}

# How -T fields prints the integers it prints in hex (tshark's formats).
HEX = {
    "infiniband.bth.destqp": 6,
    "infiniband.reth.va": 16,
    "infiniband.reth.r_key": 8,
}


def shown(field, v):
    """A value as `roce decode -T fields` prints it."""
    if v is None:
        return ""
    if isinstance(v, list):
        return ",".join(shown(field, x) for x in v)
    if isinstance(v, bool):
        return "1" if v else "0"
    if isinstance(v, int):
        digits = HEX.get(field)
        return f"0x{v:0{digits}x}" if digits else str(v)
    if isinstance(v, float):
        return f"{v:.9f}"
    if isinstance(v, datetime.datetime):
        raise AssertionError("timestamps are compared as integers")
    if isinstance(v, bytes):
        return v.hex()
    return str(v)


def main():
    path, text, fields = sys.argv[1], sys.argv[2], sys.argv[3:]
    table = pq.read_table(path)
    errors = []
    if table.column_names != fields:
        errors.append(f"columns {table.column_names}, expected {fields}")
    for f in fields:
        want = TYPES.get(f, pa.string())
        got = table.schema.field(f).type
        if got != want:
            errors.append(f"{f}: type {got}, expected {want}")
    lines = open(text, encoding="utf-8").read().split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    if len(lines) != table.num_rows:
        errors.append(f"{table.num_rows} rows, -T fields printed {len(lines)} lines")
    cols = {}
    for f in fields:
        col = table.column(f)
        if pa.types.is_timestamp(col.type):
            # Nanoseconds since the epoch, printed as seconds with nine decimals.
            ns = col.cast(pa.int64()).to_pylist()
            cols[f] = [None if n is None else f"{n // 10**9}.{n % 10**9:09d}" for n in ns]
        else:
            cols[f] = [shown(f, v) for v in col.to_pylist()]
    for i, line in enumerate(lines[: table.num_rows]):
        want = line.split("\t")
        got = ["" if cols[f][i] is None else cols[f][i] for f in fields]
        if got != want:
            errors.append(f"row {i + 1}: {got} != {want}")
            if len(errors) > 10:
                break
    nulls = sum(table.column(f).null_count for f in fields)
    if errors:
        print("\n".join(errors))
        sys.exit(1)
    groups = pq.ParquetFile(path).num_row_groups
    print(f"{table.num_rows} rows, {len(fields)} columns, {groups} row groups, {nulls} nulls: equal to -T fields")


def flows():
    import json

    d, report = sys.argv[2], json.load(open(sys.argv[3], encoding="utf-8"))
    errors = []
    t = pq.read_table(f"{d}/flows.parquet")
    rows = {r["id"]: r for r in t.to_pylist()}
    for name in ["id", "packets", "acks", "naks", "psn_first"]:
        if t.schema.field(name).type != pa.uint64():
            errors.append(f"flows.{name}: type {t.schema.field(name).type}")
    if t.schema.field("duration").type != pa.float64() or t.schema.field("src").type != pa.string():
        errors.append(f"flows: duration/src types {t.schema}")
    if len(rows) != len(report["flows"]):
        errors.append(f"{len(rows)} flows in Parquet, {len(report['flows'])} in the report")
    events = 0
    for f in report["flows"]:
        r = rows.get(f["id"], {})
        for k in ["packets", "bytes", "requests", "psn_first", "psn_last", "gaps", "retransmissions", "acks", "naks", "rnr_naks", "dest_qp", "paired_with"]:
            if r.get(k) != f.get(k):
                errors.append(f"flow {f['id']} {k}: {r.get(k)} != {f.get(k)}")
        if r.get("src") != f["src"] or r.get("transport") != f["transport"]:
            errors.append(f"flow {f['id']}: {r.get('src')} {r.get('transport')} != {f['src']} {f['transport']}")
        lat = f.get("ack_latency") or {}
        if r.get("ack_latency_median_ns") != lat.get("median_ns"):
            errors.append(f"flow {f['id']} ack latency: {r.get('ack_latency_median_ns')} != {lat.get('median_ns')}")
        events += len(f["nak_events"]) + len(f["gap_events"]) + len(f.get("ghost_acks", []))
    e = pq.read_table(f"{d}/events.parquet")
    if e.num_rows != events:
        errors.append(f"{e.num_rows} events in Parquet, {events} in the report")
    naks = {(r["flow"], r["frame"]): r for r in e.to_pylist() if r["kind"] in ("nak", "rnr_nak")}
    for f in report["flows"]:
        for n in f["nak_events"]:
            r = naks.get((f["id"], n["frame"]))
            if not r or r["psn"] != n["psn"] or r["syndrome"] != n["syndrome_value"] or r["request_frame"] != n["request_frame"] or r["wc_status"] != n["wc_status"]:
                errors.append(f"flow {f['id']} NAK at frame {n['frame']}: {r} vs {n}")
    if errors:
        print("\n".join(errors[:20]))
        sys.exit(1)
    print(f"{len(rows)} flows, {e.num_rows} events: equal to the JSON report")


if __name__ == "__main__":
    flows() if sys.argv[1] == "--flows" else main()
