"""Log parsing accuracy as Loghub measures it (pure, no Spark).

- Grouping accuracy (GA; Zhu et al., ICSE'19, and logparser's ``evaluator.get_accuracy``): a
  line is correct when the set of lines its parser put in its group is exactly the set of lines
  that share its ground-truth event; GA is the share of correct lines. Group labels are only
  compared for equality, so a parser's ids never have to match the ground truth's.
- Parsing accuracy (PA; Loghub-2.0, Jiang et al., ISSTA'24): the share of lines whose parsed
  template equals the ground-truth template. Both sides are compared with runs of white space
  collapsed to one space (Drain joins tokens with single spaces).
"""

from __future__ import annotations

from collections import defaultdict
from typing import Hashable, Sequence


def grouping_accuracy(truth: Sequence[Hashable], predicted: Sequence[Hashable | None]) -> float:
    """GA of ``predicted`` group labels against ``truth`` event ids, line by line.

    ``truth[i]`` and ``predicted[i]`` belong to line i. A None prediction means the parser gave
    the line no group: that line is wrong, and the None lines form no group together. A None in
    ``truth`` or sequences of different lengths raise ``ValueError``; no lines give 0.0.
    """
    if len(truth) != len(predicted):
        raise ValueError(f"truth has {len(truth)} lines but predicted has {len(predicted)}")
    if any(label is None for label in truth):
        raise ValueError("truth holds a line without an event id")
    if not truth:
        return 0.0
    truth_sizes: dict[Hashable, int] = defaultdict(int)
    for label in truth:
        truth_sizes[label] += 1
    truth_of_group: dict[Hashable, set[Hashable]] = defaultdict(set)
    group_sizes: dict[Hashable, int] = defaultdict(int)
    for truth_label, group in zip(truth, predicted):
        if group is not None:
            truth_of_group[group].add(truth_label)
            group_sizes[group] += 1
    correct = 0
    for group, truth_labels in truth_of_group.items():
        if len(truth_labels) == 1 and truth_sizes[next(iter(truth_labels))] == group_sizes[group]:
            correct += group_sizes[group]
    return correct / len(truth)


def parsing_accuracy(truth_templates: Sequence[str], predicted_templates: Sequence[str | None]) -> float:
    """PA: share of lines whose predicted template equals the ground-truth one (white space
    collapsed). A None prediction is wrong; sequences of different lengths raise ValueError."""
    if len(truth_templates) != len(predicted_templates):
        raise ValueError(f"truth has {len(truth_templates)} lines but predicted has {len(predicted_templates)}")
    if not truth_templates:
        return 0.0
    correct = sum(
        1 for truth, predicted in zip(truth_templates, predicted_templates)
        if predicted is not None and _normalized(predicted) == _normalized(truth)
    )
    return correct / len(truth_templates)


def _normalized(template: str) -> str:
    return " ".join(template.split())
