"""Runs the guide's Spark SQL (docs/src/guide/parquet.md) in Spark's local mode over a
Hive-partitioned dataset that `roce decode -T parquet -w DIR` wrote, and checks the
per-QP counts against `roce flows --json` of each capture.

    check_spark.py DIR QUERY.sql REPORTS.json

QUERY.sql is tests/parquet/qp_counts_spark.sql; REPORTS.json maps each capture's
partition name to its `roce flows --json` report (see qp_compare.py). Prints the
totals compared and how long Spark took; exits 1 with what differs otherwise.
"""
import os
import shutil
import sys
import time

from pyspark.sql import SparkSession

from qp_compare import compare, load_reports, read_query


def main():
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    root, query, reports = sys.argv[1], read_query(sys.argv[2]), load_reports(sys.argv[3])
    if not os.environ.get("JAVA_HOME") and not shutil.which("java"):
        sys.exit("no java on PATH: Spark needs Java 17 (bash scripts/setup.sh --test installs it)")
    # Spark otherwise looks up the machine's name and address: loopback only.
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    start = time.monotonic()
    spark = (
        SparkSession.builder.master("local[2]")
        .appName("roce-qp-counts")
        .config("spark.driver.memory", "1g")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.log.level", "ERROR")
        # A few hundred rows per capture: 200 shuffle partitions would be 200 tasks.
        .config("spark.sql.shuffle.partitions", "4")
        .getOrCreate()
    )
    try:
        started = time.monotonic()
        # As the guide shows it: the partition value stays text (`capture=2024` too).
        spark.conf.set("spark.sql.sources.partitionColumnTypeInference.enabled", "false")
        spark.read.parquet(root).createOrReplaceTempView("frames")
        rows = [tuple(r) for r in spark.sql(query).collect()]
        done = time.monotonic()
    finally:
        spark.stop()
    compare(rows, reports, "Spark")
    print(f"Spark local[2]: {started - start:.1f} s to start, {done - started:.1f} s for the query")


if __name__ == "__main__":
    main()
