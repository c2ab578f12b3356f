"""Every workload through Sluice in local[2], record for record against
Spark's sort shuffle."""

import pytest

import workloads
from conftest import SLUICE, session, sluice_metrics


@pytest.fixture(scope="module")
def local(tmp_path_factory):
    s = session("local[2]", SLUICE, tmp_path_factory.mktemp("sluice-local"))
    yield s
    s.stop()


@pytest.mark.parametrize("name", list(workloads.ALL))
def test_local_matches_sort_shuffle(local, reference, name):
    before = sluice_metrics(local)
    got = workloads.ALL[name](local)
    after = sluice_metrics(local)
    assert got == reference[name]
    # The shuffle really went through Sluice: map outputs written, blocks decoded.
    assert after["map_outputs"] > before["map_outputs"]
    assert after["blocks_decoded"] > before["blocks_decoded"]
