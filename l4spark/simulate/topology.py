"""Clusters, node names, addresses and the parallel layout of one simulated job.

A job runs on N nodes x R ranks. Global ranks are laid out node-major (rank = node_index * R +
local_rank), as torchrun and srun assign them. Megatron's default group order is
tensor-parallel fastest, then data-parallel, then pipeline-parallel slowest, so
``tp = r % TP``, ``dp = (r // TP) % DP``, ``pp = r // (TP * DP)``.
"""

from __future__ import annotations

import random
from dataclasses import dataclass


@dataclass(frozen=True)
class Cluster:
    """A pool of machines with one naming scheme and one address plan."""

    name: str
    accelerator: str  # "cuda" or "ascend"
    gpu: str
    node_pattern: str  # str.format pattern with {i} (and {rack}, {slot} for rack-based names)
    size: int
    ip_prefix: str  # first two octets of the data-network addresses
    gpus_per_node: int = 8

    def node_name(self, i: int) -> str:
        return self.node_pattern.format(i=i, rack=i // 4 + 1, slot=i % 4 + 1)


CLUSTERS: list[Cluster] = [
    Cluster("h100-a", "cuda", "H100-SXM5-80GB", "gpu-h100-{i:03d}", 512, "10.3"),
    Cluster("dgx-b", "cuda", "A100-SXM4-80GB", "dgx-b{rack:02d}-n{slot}", 384, "10.12"),
    Cluster("h800-c", "cuda", "H800-SXM5-80GB", "hpc-h800-{i:04d}", 768, "172.20"),
    Cluster("ascend-d", "ascend", "Ascend910B3", "node{i:03d}", 512, "192.168"),
]


def clusters_for(accelerator: str) -> list[Cluster]:
    return [c for c in CLUSTERS if c.accelerator == accelerator]


def pick_nodes(rng: random.Random, cluster: Cluster, n_nodes: int) -> list[int]:
    """Machine indexes of an allocation: mostly one contiguous block, sometimes fragmented."""
    if n_nodes >= cluster.size:
        return list(range(cluster.size))
    if rng.random() < 0.6:
        start = rng.randrange(0, cluster.size - n_nodes + 1)
        return list(range(start, start + n_nodes))
    return sorted(rng.sample(range(cluster.size), n_nodes))


def node_ip(cluster: Cluster, index: int) -> str:
    return f"{cluster.ip_prefix}.{index // 200 + 1}.{index % 200 + 10}"


@dataclass
class Layout:
    """Parallel layout of a job: sizes and per-rank coordinates."""

    nodes: list[str]
    ips: list[str]
    ranks_per_node: int
    tp: int
    pp: int

    @property
    def n_nodes(self) -> int:
        return len(self.nodes)

    @property
    def world(self) -> int:
        return self.n_nodes * self.ranks_per_node

    @property
    def dp(self) -> int:
        return self.world // (self.tp * self.pp)

    def node_of(self, rank: int) -> int:
        return rank // self.ranks_per_node

    def coords(self, rank: int) -> tuple[int, int, int]:
        """(tp_rank, dp_rank, pp_rank) of a global rank."""
        return rank % self.tp, (rank // self.tp) % self.dp, rank // (self.tp * self.dp)

    def ring_neighbours(self, node_index: int) -> list[int]:
        """Nodes that exchange data with this node directly (ring and pipeline neighbours)."""
        n = self.n_nodes
        near = {(node_index - 1) % n, (node_index + 1) % n}
        stage_nodes = max(1, n // self.pp)
        if self.pp > 1:
            near.add((node_index + stage_nodes) % n)
            near.add((node_index - stage_nodes) % n)
        near.discard(node_index)
        return sorted(near)


def choose_parallel(rng: random.Random, n_nodes: int, ranks_per_node: int) -> tuple[int, int]:
    """A (tensor, pipeline) parallel size pair that divides the world size."""
    world = n_nodes * ranks_per_node
    tp_options = [t for t in (1, 2, 4, 8) if ranks_per_node % t == 0]
    tp = rng.choice(tp_options[-2:] if len(tp_options) > 1 else tp_options)
    pp_options = [p for p in (1, 2, 4, 8, 16) if (world // tp) % p == 0 and p <= n_nodes]
    pp = rng.choice(pp_options[: max(1, min(len(pp_options), 4))])
    return tp, pp
