"""The nightly with its logs root and warehouse on S3 (moto's server on 127.0.0.1, s3a://)."""

from __future__ import annotations

import pytest

from l4spark.nightly.batch import run_nightly
from tests.nightly_support import assert_same, nightly_config, snapshot
from tests.storage.servers import upload_tree

pytestmark = [pytest.mark.spark, pytest.mark.e2e]


def test_nightly_on_s3_equals_local(spark, s3, nightly_logs, nightly_clean, tmp_path):
    upload_tree(s3.client(), "l4spark", nightly_logs, "logs")
    warehouse = "s3a://l4spark/warehouse"
    run = run_nightly(spark, nightly_config(warehouse), "s3a://l4spark/logs", reports_dir="s3a://l4spark/reports")
    _, local_run, local_tables = nightly_clean
    assert run.diagnosed == local_run.diagnosed and run.diagnosed
    assert_same(snapshot(spark, warehouse), local_tables)
    keys = [o["Key"] for o in s3.client().list_objects_v2(Bucket="l4spark", Prefix="reports/")["Contents"]]
    assert any(k.endswith(".html/" + k.rsplit("/", 1)[-1]) for k in keys)
