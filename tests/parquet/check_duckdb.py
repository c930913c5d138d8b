"""Queries a Hive-partitioned dataset that `roce decode -T parquet -w DIR` wrote with
DuckDB and checks the per-QP counts against `roce flows --json` of each capture.

    check_duckdb.py DIR QUERY.sql REPORTS.json

QUERY.sql is the query of docs/src/guide/parquet.md (tests/parquet/qp_counts.sql),
run over a view `frames` of every partition. REPORTS.json maps each capture's
partition name to its `roce flows --json` report (see qp_compare.py). Prints the
totals compared; exits 1 with what differs otherwise.
"""
import sys

import duckdb

from qp_compare import compare, load_reports, read_query


def main():
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    root, query, reports = sys.argv[1], read_query(sys.argv[2]), load_reports(sys.argv[3])
    con = duckdb.connect()
    glob = f"{root}/*/*.parquet".replace("'", "''")
    # As the guide shows it: the partition value stays text (`capture=2024` too).
    con.execute(
        f"CREATE VIEW frames AS SELECT * FROM read_parquet('{glob}', "
        "hive_partitioning = true, hive_types = {'capture': VARCHAR})"
    )
    compare(con.execute(query).fetchall(), reports, "DuckDB")


if __name__ == "__main__":
    main()
