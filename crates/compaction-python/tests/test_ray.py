"""`compaction.batch.compact` on Ray Data: `map_batches` on a local Ray with two CPUs gives, row
for row, what `compact` gives on the whole table (which `test_batch.py` checks against the CLI)."""

import functools

import pyarrow as pa
import pytest
import ray

from batch_cases import CONFIGS
from compaction.batch import compact
from test_batch import table_of

# Ray Data's own settings warn of their deprecation when a context is made.
pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


@pytest.fixture(scope="module")
def local_ray():
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False)
    ray.data.DataContext.get_current().enable_progress_bars = False
    yield
    ray.shutdown()


@pytest.mark.parametrize("name", ["pruning", "hook", "window-chain"])
def test_map_batches_gives_what_compact_gives(local_ray, name):
    table = table_of()
    # A function of the installed package, so Ray's workers import it rather than this module.
    work = functools.partial(compact, **CONFIGS[name])
    dataset = ray.data.from_arrow(table).map_batches(work, batch_format="pyarrow", batch_size=3)
    got = pa.concat_tables(ray.get(dataset.to_arrow_refs())).sort_by("id")
    want = compact(table, **CONFIGS[name])
    assert got.column_names == want.column_names
    for column in want.column_names:
        assert got.column(column).to_pylist() == want.column(column).to_pylist(), column
