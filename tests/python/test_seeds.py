"""`reproduce.stats.Seeds`, the one results type every claim measure reads (per point, per seed):
a table's own name column and grid key, a seed with several rows, a table where nothing ran,
a variant's own points and the point nearest a load, a seed's mean over several points."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from microsched.reproduce.stats import Seeds


def _rows() -> pd.DataFrame:
    # two systems at 8 and 30 workers, seeds 2 and 1 out of order
    return pd.DataFrame([
        {"system": "a", "workers": 8, "seed": 2, "x": 20.0},
        {"system": "a", "workers": 8, "seed": 1, "x": 10.0},
        {"system": "a", "workers": 30, "seed": 1, "x": 30.0},
        {"system": "b", "workers": 8, "seed": 1, "x": 5.0},
    ])


def test_a_tables_own_name_column_and_key():
    s = Seeds(_rows(), key="workers", by="system")
    assert s.names() == {"a", "b"} and s.has("a", "b") and not s.has("c")
    assert s.values("a", 8, "x").to_dict() == {1: 10.0, 2: 20.0}, "by seed, in order"
    assert s.values("a", 30, "x").to_dict() == {1: 30.0}
    assert s.mean("a", 8, "x") == 15.0
    assert s.values("a", 8, "y").empty, "a metric the rows do not have reads as no values"


def test_a_seed_with_several_rows_at_a_point_reads_as_their_mean():
    df = pd.DataFrame([{"variant": "v", "seed": 1, "x": 1.0}, {"variant": "v", "seed": 1, "x": 3.0},
                       {"variant": "v", "seed": 2, "x": 5.0}])
    s = Seeds(df)
    assert s.values("v", None, "x").to_dict() == {1: 2.0, 2: 5.0}
    assert s.mean("v", None, "x") == 3.5


def test_a_table_where_nothing_ran_reads_as_no_values():
    s = Seeds(pd.DataFrame(), key="workers", by="system")
    assert s.seeds == [] and s.names() == set() and not s.has("a") and s.points() == []
    assert s.values("a", 8, "x").empty and math.isnan(s.mean("a", 8, "x"))
    assert s.rows("a", None).empty and s.nearest("a", 8) is None


def test_a_variants_own_points_and_the_one_nearest_a_load():
    df = pd.DataFrame([{"variant": v, "load": x, "seed": 1, "m": x} for v, xs in
                       (("v", (0.2, 0.5, 0.8)), ("w", (0.3,))) for x in xs])
    s = Seeds(df, key="load")
    assert s.points_of("v") == [0.2, 0.5, 0.8] and s.points_of("w") == [0.3] and s.points_of("u") == []
    assert s.nearest("v", 0.6) == 0.5 and s.nearest("v", 0.65) == pytest.approx(0.5)
    assert s.nearest("v", 0.66) == 0.8 and s.nearest("u", 0.5) is None
    assert s.points() == [0.2, 0.3, 0.5, 0.8], "every variant's points"
    assert s.points_of() == [0.2, 0.3, 0.5, 0.8], "every variant's points, as run"


def test_a_seeds_mean_over_several_points():
    df = pd.DataFrame([{"variant": "v", "phase": p, "seed": seed, "m": 10.0 * p + seed}
                       for seed in (1, 2) for p in (1, 2, 3)])
    s = Seeds(df, key="phase")
    assert s.over("v", [2, 3], "m").to_dict() == {1: 26.0, 2: 27.0}
    assert s.over("v", [9], "m").empty and s.over("u", [1], "m").empty
