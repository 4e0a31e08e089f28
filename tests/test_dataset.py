"""``cloudbench.open``: a campaign as a dataset, and the same files read by other engines."""

from __future__ import annotations

import re
from pathlib import Path

import duckdb
import numpy as np
import pandas as pd
import pyarrow.dataset as ds
import pytest

import cloudbench
from cloudbench.errors import ResultError
from cloudbench.testing.fake_results import write_echo_run
from tests.paths import ROOT


@pytest.fixture(scope="module")
def campaign(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("results") / "quickstart"
    write_echo_run(root, seed=1, repetitions=2, rounds=900)
    write_echo_run(root, seed=2, repetitions=1, rounds=700)  # a second run of the campaign
    return root


def test_open_lists_runs_repetitions_trials_and_hosts(campaign: Path) -> None:
    with cloudbench.open(campaign) as camp:
        assert [r.run_id for r in camp.runs] == sorted(p.name for p in campaign.iterdir())
        assert len(camp.repetitions()) == 3 and set(camp.repetitions()["run_id"]) == {r.run_id for r in camp.runs}
        trials = camp.trials()
        assert list(trials["rows"]) == [t.rows for r in camp.runs for t in r.manifest.trials]
        assert trials["started_utc"].dt.tz is not None
        assert set(camp.hosts()["region"]) == {"r1", "r2"}


def test_observations_are_a_lazy_relation_equal_to_the_report(campaign: Path) -> None:
    with cloudbench.open(campaign) as camp:
        obs = camp.observations("echo")
        assert isinstance(obs, duckdb.DuckDBPyRelation)
        assert {"run_id", "trial", "group", "src", "dst", "rtt_ns"} <= set(obs.columns)
        newest = camp.runs[-1].run_id
        got = (obs.filter(f"run_id = '{newest}' AND NOT warmup")
               .aggregate('"group", count(*) AS n, quantile_cont(rtt_ns / 1000.0, 0.5) AS p50', '"group"').df())
        groups = camp.table("echo", "groups").set_index("group")
        mine = got.set_index("group")
        assert set(mine.index) == set(groups.index)
        for g, row in mine.iterrows():
            assert row["n"] == groups.loc[g, "count"]
            assert row["p50"] == pytest.approx(groups.loc[g, "p50"], rel=1e-12)
        summaries = camp.summaries()
        assert set(summaries["run_id"]) == {r.run_id for r in camp.runs}
        assert {"rtt_p50_us", "rtt_p99_us"} <= set(summaries["metric"])


def test_errors_name_what_exists(campaign: Path) -> None:
    with cloudbench.open(campaign) as camp:
        with pytest.raises(ResultError, match="workloads: echo"):
            camp.observations("iperf")
        with pytest.raises(ResultError, match=r"tables: .*groups"):
            camp.table("echo", "nope")
    with pytest.raises(ResultError, match="no such directory"):
        cloudbench.open(campaign / "missing")


def _truth(campaign: Path) -> pd.DataFrame:
    """Counts and medians per latency group over the campaign, from cloudbench."""
    with cloudbench.open(campaign) as camp:
        return (camp.observations("echo").filter("NOT warmup AND rtt_ns IS NOT NULL")
                .aggregate('"group", count(*) AS n, median(rtt_ns) AS med', '"group"').df()
                .set_index("group").sort_index())


def test_other_engines_read_the_campaign_as_one_dataset(campaign: Path) -> None:
    """The layout README documents: results/<campaign>/<run>/<workload>/<trial>.parquet, one schema."""
    truth = _truth(campaign)
    glob = str(campaign / "*" / "echo" / "*.parquet")

    def check(df: pd.DataFrame, engine: str) -> None:
        df = df.set_index("group").sort_index()
        assert list(df.index) == list(truth.index), engine
        np.testing.assert_array_equal(df["n"].to_numpy(), truth["n"].to_numpy(), err_msg=engine)
        np.testing.assert_allclose(df["med"].to_numpy(dtype=float), truth["med"].to_numpy(), err_msg=engine)

    check(duckdb.sql(f"SELECT \"group\", count(*) AS n, median(rtt_ns) AS med FROM read_parquet('{glob}') "
                     "WHERE NOT warmup AND rtt_ns IS NOT NULL GROUP BY 1").df(), "duckdb")

    table = ds.dataset(str(campaign), format="parquet", partitioning=None,
                       exclude_invalid_files=True).to_table(filter=~ds.field("warmup") & ds.field("rtt_ns").is_valid())
    pdf = table.to_pandas()
    pdf["group"] = pdf["group"].astype(str)
    check(pdf.groupby("group").rtt_ns.agg(n="count", med="median").reset_index(), "pyarrow.dataset + pandas")

    import polars as pl

    pl_df = (pl.scan_parquet(glob).filter(~pl.col("warmup") & pl.col("rtt_ns").is_not_null())
             .group_by(pl.col("group").cast(pl.String))
             .agg(n=pl.len(), med=pl.col("rtt_ns").median()).collect().to_pandas())
    check(pl_df, "polars")

    import dask.dataframe as dd

    ddf = dd.read_parquet(glob)
    ddf = ddf[~ddf["warmup"] & ddf["rtt_ns"].notnull()]
    ddf["group"] = ddf["group"].astype(str)
    counts = ddf.groupby("group").rtt_ns.count().compute()
    med = ddf.groupby("group").rtt_ns.median(shuffle_method="tasks").compute()
    check(pd.DataFrame({"group": counts.index, "n": counts.to_numpy(), "med": med.loc[counts.index].to_numpy()}),
          "dask")


def test_the_readme_notebook_example_runs(campaign: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    text = (ROOT / "README.md").read_text()
    m = re.search(r"<!-- notebook example -->\s*```python\n(.*?)```", text, re.S)
    assert m, "README has the notebook example"
    monkeypatch.chdir(campaign.parent.parent)
    (campaign.parent.parent / "results").mkdir(exist_ok=True)
    link = campaign.parent.parent / "results" / "quickstart"
    if not link.exists():
        link.symlink_to(campaign)
    namespace: dict[str, object] = {}
    exec(compile(m.group(1), "README.md", "exec"), namespace)
    assert isinstance(namespace["groups"], pd.DataFrame) and len(namespace["groups"]) == 5
