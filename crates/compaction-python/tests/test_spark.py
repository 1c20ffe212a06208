"""`compaction.batch` on Spark: `DataFrame.mapInArrow` on a local `SparkSession` (`local[2]`)
gives, row for row, what `compact` gives on the whole table (which `test_batch.py` checks
against the CLI)."""

import functools
import os
import sys

import pytest
from pyspark.sql import SparkSession

from batch_cases import CONFIGS
from compaction.batch import compact, compact_batches
from test_batch import table_of

SCHEMA = "id long, messages string, tokens_before long, tokens_after long, reached boolean, error string"


@pytest.fixture(scope="module")
def spark():
    # The workers run this interpreter, which has the package; the driver binds to loopback.
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    session = (
        SparkSession.builder.master("local[2]")
        .appName("compaction-batch-test")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


@pytest.mark.parametrize("name", ["pruning", "hook", "window-chain"])
def test_map_in_arrow_gives_what_compact_gives(spark, name):
    table = table_of()
    frame = spark.createDataFrame(table).repartition(2)
    # A function of the installed package, so Spark's workers import it rather than this module.
    work = functools.partial(compact_batches, **CONFIGS[name])
    got = frame.mapInArrow(work, SCHEMA).toArrow().sort_by("id")
    want = compact(table, **CONFIGS[name])
    assert got.column_names == want.column_names
    for column in want.column_names:
        assert got.column(column).to_pylist() == want.column(column).to_pylist(), column
