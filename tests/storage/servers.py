"""Real storage servers for the storage tests, started on 127.0.0.1 by the tests themselves.

HDFS: Hadoop's ``MiniDFSClusterManager`` (a NameNode and a DataNode in one JVM, from
``hadoop-client-minicluster`` of the same Hadoop version as pyspark's client jars, fetched by
``make storage-jars``), run with ``java`` on a temporary folder; it writes its NameNode port to a
JSON file once the cluster is up.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import pyspark

from l4spark.config import load_config
from l4spark.io.storage_jars import find_storage_jar

READY_TIMEOUT_S = 180.0


@dataclass
class MiniDfs:
    process: subprocess.Popen
    port: int
    base: Path

    @property
    def uri(self) -> str:
        return f"hdfs://127.0.0.1:{self.port}"

    def stop(self) -> None:
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait(30)


def minidfs_classpath() -> str:
    spark_jars = Path(pyspark.__file__).parent / "jars"
    wanted = ("hadoop-client-api-", "hadoop-client-runtime-", "log4j-", "slf4j-api-", "jcl-over-slf4j-")
    jars = [find_storage_jar("hadoop-client-minicluster")]
    jars += sorted(p for p in spark_jars.glob("*.jar") if p.name.startswith(wanted))
    return os.pathsep.join(str(j) for j in jars)


def start_minidfs(base: Path) -> MiniDfs:
    """A MiniDFSCluster on 127.0.0.1 (free ports) with its data under ``base``; waits until up."""
    base.mkdir(parents=True, exist_ok=True)
    details = base / "details.json"
    log4j = base / "log4j2.properties"
    log4j.write_text("rootLogger.level = warn\nrootLogger.appenderRef.out.ref = out\n"
                     "appender.out.type = Console\nappender.out.name = out\n"
                     "appender.out.layout.type = PatternLayout\nappender.out.layout.pattern = %d %p %c: %m%n\n")
    settings = {"hdfs.minidfs.basedir": base / "data", "dfs.namenode.rpc-bind-host": "127.0.0.1",
                "dfs.namenode.http-address": "127.0.0.1:0", "dfs.datanode.address": "127.0.0.1:0",
                "dfs.datanode.http.address": "127.0.0.1:0", "dfs.datanode.ipc.address": "127.0.0.1:0",
                "dfs.permissions.enabled": "false", "dfs.replication": "1"}
    command = ["java", "-Xmx512m", f"-Dlog4j2.configurationFile={log4j}", "-cp", minidfs_classpath(),
               "org.apache.hadoop.test.MiniDFSClusterManager", "-format", "-nnport", "0",
               "-writeDetails", str(details)]
    for key, value in settings.items():
        command += ["-D", f"{key}={value}"]
    out = open(base / "minidfs.log", "wb")
    process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.PIPE,
                               cwd=base, start_new_session=True)
    deadline = time.monotonic() + READY_TIMEOUT_S
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"MiniDFSCluster exited with {process.returncode}: "
                               f"{(base / 'minidfs.log').read_text(errors='replace')[-3000:]}")
        if details.exists() and details.stat().st_size:
            try:
                port = json.loads(details.read_text())["namenode_port"]
            except (ValueError, KeyError):
                port = None
            if port:
                return MiniDfs(process, int(port), base)
        time.sleep(0.5)
    dfs = MiniDfs(process, 0, base)
    dfs.stop()
    raise RuntimeError(f"MiniDFSCluster not up after {READY_TIMEOUT_S:.0f}s")


def hadoop_shell(dfs_uri: str, *args: str) -> str:
    """Run Hadoop's ``FsShell`` (``hadoop fs``) against ``dfs_uri`` with pyspark's client jars."""
    spark_jars = Path(pyspark.__file__).parent / "jars"
    wanted = ("hadoop-client-api-", "hadoop-client-runtime-", "log4j-", "slf4j-api-", "jcl-over-slf4j-")
    conf_dir = Path(tempfile.gettempdir()) / "l4spark-fsshell-conf"  # FsShell wants a core-site.xml
    conf_dir.mkdir(exist_ok=True)
    (conf_dir / "core-site.xml").write_text("<configuration/>\n")
    classpath = os.pathsep.join([str(conf_dir)] + [str(p) for p in sorted(spark_jars.glob("*.jar"))
                                                   if p.name.startswith(wanted)])
    # one DataNode: one replica (the client's default of 3 makes large writes crawl); the HDFS
    # client keys of l4spark's defaults (a -put of many small files waits at each file's close)
    client = [f"{key.removeprefix('spark.hadoop.')}={value}" for key, value in load_config().spark.extra.items()
              if key.startswith("spark.hadoop.dfs.client.")]
    done = subprocess.run(["java", "-Xmx256m", "-cp", classpath, "org.apache.hadoop.fs.FsShell",
                           "-D", "dfs.replication=1", *[a for kv in client for a in ("-D", kv)], "-fs", dfs_uri, *args],
                          capture_output=True, text=True, check=False, timeout=300)
    if done.returncode != 0:
        raise RuntimeError(f"hadoop fs {' '.join(args)} failed ({done.returncode}): {done.stderr[-2000:]}")
    return done.stdout


@dataclass
class S3Server:
    """moto's S3 server (``moto[server]``, pure Python) in this process, on 127.0.0.1."""

    server: object
    port: int
    access_key: str
    secret_key: str

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def hadoop_settings(self) -> dict[str, str]:
        """The s3a settings (Hadoop configuration keys) that point ``s3a://`` at this server."""
        return {"fs.s3a.endpoint": self.endpoint, "fs.s3a.path.style.access": "true",
                "fs.s3a.connection.ssl.enabled": "false", "fs.s3a.endpoint.region": "us-east-1",
                "fs.s3a.access.key": self.access_key, "fs.s3a.secret.key": self.secret_key,
                "fs.s3a.aws.credentials.provider": "org.apache.hadoop.fs.s3a.SimpleAWSCredentialsProvider",
                "fs.s3a.change.detection.version.required": "false"}

    def client(self):
        import boto3

        return boto3.client("s3", endpoint_url=self.endpoint, region_name="us-east-1",
                            aws_access_key_id=self.access_key, aws_secret_access_key=self.secret_key)

    def stop(self) -> None:
        self.server.stop()


def start_s3(access_key: str, secret_key: str) -> S3Server:
    from moto.server import ThreadedMotoServer

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    port = server.get_host_and_port()[1]  # port 0: the one the OS chose
    return S3Server(server, int(port), access_key, secret_key)


def upload_tree(client, bucket: str, local_root: Path, prefix: str) -> None:
    """Copy every file under ``local_root`` to ``s3://bucket/prefix/...`` (the test's fixture data)."""
    for path in sorted(local_root.rglob("*")):
        if path.is_file():
            client.upload_file(str(path), bucket, f"{prefix}/{path.relative_to(local_root).as_posix()}")
