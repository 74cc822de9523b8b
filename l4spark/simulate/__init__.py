"""Training-fleet log simulator with ground truth (``l4spark simulate``).

Writes failed and successful LLM training jobs in the input layout of docs/simulator.md, with
a label file per failed job naming the fault, the faulty nodes, the stage and iteration and
every failure-indicating message.
"""

from l4spark.simulate.faults import FAULT_CLASSES, FAULT_FRAMEWORKS, FAULT_KINDS
from l4spark.simulate.fleet import FleetOptions, FleetSummary, plan_fleet, simulate_fleet

__all__ = ["FAULT_CLASSES", "FAULT_FRAMEWORKS", "FAULT_KINDS", "FleetOptions", "FleetSummary", "plan_fleet", "simulate_fleet"]
