"""Configuration: defaults load, overrides apply, bad input is a ConfigError naming the key."""

from __future__ import annotations

import pytest

from l4spark.config import load_config
from l4spark.errors import ConfigError
from l4spark.io.delta_jars import find_jars


def test_defaults_load_with_rules(default_config):
    assert default_config.storage.format == ("delta" if find_jars() else "parquet")
    assert [w.name for w in default_config.structure.wrappers][:2] == ["cri", "rfc3339"]
    assert len(default_config.structure.headers) >= 6
    assert default_config.structure.levels["WARNING"] == "WARN"
    assert {m.name for m in default_config.masking} >= {"ip", "number", "path"}



def test_hdfs_clients_retry_a_close_soon_with_hadoops_patience(default_config, spark):
    """A DFS client's close asks the NameNode again after the initial delay, doubling it each
    retry: the defaults ask again after well under Hadoop's 400 ms yet wait in all no less than
    Hadoop's 5 retries from 400 ms (12.4 s) before failing the write; the session's Hadoop
    configuration, which the executors' clients read, has them."""
    prefix = "spark.hadoop.dfs.client.block.write.locateFollowingBlock."
    delay = int(default_config.spark.extra[prefix + "initial.delay.ms"])
    retries = int(default_config.spark.extra[prefix + "retries"])
    assert delay <= 100
    assert delay * (2 ** retries - 1) >= 400 * (2 ** 5 - 1)
    hadoop = spark.sparkContext._jsc.hadoopConfiguration()  # a test may look; l4spark does not
    assert hadoop.get(prefix.removeprefix("spark.hadoop.") + "initial.delay.ms") == str(delay)
    assert hadoop.get(prefix.removeprefix("spark.hadoop.") + "retries") == str(retries)


def test_the_driver_of_a_session_l4spark_starts_runs_the_throughput_collector(spark):
    """A session l4spark starts (here the tests' local one, from the defaults) gives its driver's
    JVM the parallel collector: on a local master that JVM runs every task of a batch that no
    pause holds up, and G1's concurrent marking cost the small-files nightly about 7% of its
    time (docs/capacity.md, session 54)."""
    beans = spark.sparkContext._jvm.java.lang.management.ManagementFactory.getGarbageCollectorMXBeans()
    assert {bean.getName() for bean in beans} == {"PS Scavenge", "PS MarkSweep"}


def test_file_and_dotted_overrides(tmp_path):
    path = tmp_path / "env.toml"
    path.write_text('[storage]\nwarehouse = "/data/wh"\n[drain]\nsim_th = 0.5\n'
                    '[[masking]]\nname = "num"\npattern = "[0-9]+"\nreplacement = "<N>"\n')
    config = load_config(path, overrides={"spark.master": "local[1]"})
    assert config.storage.warehouse == "/data/wh"
    assert config.drain.sim_th == 0.5
    assert [m.name for m in config.masking] == ["num"]
    assert config.spark.master == "local[1]"


@pytest.mark.parametrize("text,message", [
    ('[storage]\nwarehous = "x"\n', "unknown config key 'storage.warehous'"),
    ('[nonsense]\na = 1\n', "unknown config key 'nonsense'"),
    ('[ingest]\nmax_line_bytes = "big"\n', "'ingest.max_line_bytes' must be an integer"),
    ('[storage]\nformat = "orc"\n', "'storage.format' must be 'auto', 'parquet' or 'delta'"),
    ('[[masking]]\nname = "m"\npattern = "([0-9"\nreplacement = "x"\n', "masking\\[0\\].*does not compile"),
    ('[[masking]]\nname = "m"\npattern = "[0-9]+"\n', "masking\\[0\\]' is incomplete"),
    ('[layout]\npattern = "^(?P<job_id>[^/]+)/x$"\n', "needs the named groups"),
    ('[drain]\nsim_th = 2.0\n', "drain.sim_th"),
    ('[temporal]\npace_from_saves = "yes"\n', "'temporal.pace_from_saves' must be true or false"),
    ('this is not toml', "not valid TOML"),
])
def test_bad_config_is_a_clear_error(tmp_path, text, message):
    path = tmp_path / "bad.toml"
    path.write_text(text)
    with pytest.raises(ConfigError, match=message):
        load_config(path)


def test_missing_file_is_a_clear_error(tmp_path):
    with pytest.raises(ConfigError, match="not found"):
        load_config(tmp_path / "absent.toml")


def test_step_sections_reach_their_steps(tmp_path):
    path = tmp_path / "steps.toml"
    path.write_text('[spatial]\ntop_k = 5\n[normal_pool]\nmin_support = 0.7\n'
                    '[temporal]\nwindow = 4\nstage_rules = [{stage = "training", pattern = "iteration [0-9]+"}]\n')
    config = load_config(path)
    assert config.spatial.top_k == 5
    assert config.normal_pool.min_support == 0.7
    temporal = config.temporal
    assert temporal.window == 4 and [r.stage for r in temporal.stage_rules] == ["training"]
    assert load_config().spatial.top_k == 8
    assert load_config().temporal.pace_from_saves  # the default
    path.write_text('[temporal]\npace_from_saves = false\n')
    assert not load_config(path).temporal.pace_from_saves
    path.write_text('[spatial]\nremote_patterns = ["lost my peer"]\n')
    assert load_config(path).spatial.remote_patterns == ("lost my peer",)


@pytest.mark.parametrize("text,message", [
    ("[spatial]\ntop_kk = 5\n", "spatial.top_kk"),
    ("[spatial]\ngranularity = \"rack\"\n", "spatial.granularity"),
    ("[normal_pool]\nmin_suport = 0.5\n", "min_suport"),
    ("[temporal]\nwindoww = 3\n", "temporal.windoww"),
    ("[spatial]\nremote_patterns = \"peer\"\n", "spatial.remote_patterns"),
    ("[spatial]\nremote_patterns = [\"(a|a)*$\"]\n", "spatial.remote_patterns"),
])
def test_bad_step_keys_are_clear_errors_at_load_naming_the_file(tmp_path, text, message):
    path = tmp_path / "bad.toml"
    path.write_text(text)
    with pytest.raises(ConfigError, match=message) as raised:
        load_config(path)
    assert str(path) in str(raised.value) and "\n" not in str(raised.value)


def test_auto_format_is_delta_only_where_l4spark_starts_the_session_with_the_jars(tmp_path, monkeypatch):
    """``storage.format = "auto"``: Delta for an own session with the jars on a new local or
    remote warehouse; Parquet under spark-submit, over Spark Connect or without the jars; an
    existing local warehouse keeps the format of its tables."""
    from l4spark.io.delta_jars import DELTA_ARTIFACTS
    from l4spark.io.maven import jar_name

    jars = tmp_path / "jars"
    jars.mkdir()
    for artifact in DELTA_ARTIFACTS:
        (jars / jar_name(artifact)).write_bytes(b"")
    monkeypatch.delenv("PYSPARK_GATEWAY_PORT", raising=False)
    monkeypatch.delenv("SPARK_REMOTE", raising=False)

    def resolved(warehouse, **more):
        overrides = {"storage.warehouse": str(warehouse), "spark.delta_jars": str(jars), **more}
        return load_config(overrides=overrides).storage.format

    new = tmp_path / "new"
    assert resolved(new) == "delta"
    assert resolved(new, **{"spark.delta_jars": str(tmp_path / "none")}) == "parquet"
    assert resolved("hdfs://127.0.0.1:8020/warehouse") == "delta"
    assert resolved("s3a://lake/warehouse", **{"spark.delta_jars": str(tmp_path / "none")}) == "parquet"
    assert resolved(new, **{"storage.format": "delta"}) == "delta"
    (tmp_path / "old" / "jobs").mkdir(parents=True)
    (tmp_path / "old" / "jobs" / "_SUCCESS").write_bytes(b"")
    assert resolved(tmp_path / "old") == "parquet"  # a Parquet warehouse from before stays Parquet
    (tmp_path / "lake" / "jobs" / "_delta_log").mkdir(parents=True)
    assert resolved(tmp_path / "lake", **{"spark.delta_jars": str(tmp_path / "none")}) == "delta"
    monkeypatch.setenv("SPARK_REMOTE", "sc://127.0.0.1:15002")
    assert resolved(new) == "parquet"
    monkeypatch.delenv("SPARK_REMOTE")
    monkeypatch.setenv("PYSPARK_GATEWAY_PORT", "1")
    assert resolved(new) == "parquet"
