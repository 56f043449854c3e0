"""`rounds_to_target`: rounds to the baseline's final accuracy, by hand."""

import csv
import json
import os

import numpy as np
import pytest

from tff_fedwin.reporting import rounds_to_target


def _write_run(directory, accuracies, final):
  """Evals at rounds 5, 10, 15, 20 (`window/accuracy`); summary mean `final`."""
  os.makedirs(directory)
  with open(os.path.join(directory, 'metrics.csv'), 'w', newline='') as f:
    writer = csv.writer(f)
    writer.writerow(['round_num', 'window/accuracy', 'global/accuracy'])
    for r in range(1, 21):
      value = accuracies[r // 5 - 1] if r % 5 == 0 else ''
      writer.writerow([r, value, value])
  with open(os.path.join(directory, 'summary.json'), 'w') as f:
    json.dump({'window': {'accuracy': {'mean': final}}}, f)
  return str(directory)


@pytest.mark.parametrize(
    'values,target,expected',
    [
        ([0.1, 0.5, 0.4, 0.6], 0.5, 10),  # Equal counts: round 10.
        ([0.1, 0.5, 0.4, 0.6], 0.55, 20),
        ([0.1, 0.5, 0.4, 0.6], 0.7, None),
        # The mean of three evals of 0.1 is 0.10000000000000002 in float64:
        # still reached at round 5.
        ([0.1, 0.1, 0.1, 0.1], float(np.mean([0.1] * 3)), 5),
    ],
)
def test_first_round_reaching(values, target, expected):
  curve = (np.array([5, 10, 15, 20]), np.array(values))
  assert rounds_to_target.first_round_reaching(curve, target) == expected


def test_table_by_hand(tmp_path):
  # Seed 0 target 0.6 (baseline's summary mean); seed 1 target 0.5.
  # Baseline reaches 0.6 at round 20 (seed 0), 0.5 at round 15 (seed 1).
  # IMA: 0.6 at round 10, 0.5 at round 5 -> speed-ups 20/10 = 2, 15/5 = 3.
  # Other: never reaches 0.6 in seed 0.
  rows = {
      'no window': [
          _write_run(tmp_path / 'b0', [0.2, 0.4, 0.5, 0.6], 0.6),
          _write_run(tmp_path / 'b1', [0.2, 0.3, 0.5, 0.5], 0.5),
      ],
      'IMA': [
          _write_run(tmp_path / 'i0', [0.3, 0.6, 0.7, 0.7], 0.7),
          _write_run(tmp_path / 'i1', [0.5, 0.6, 0.6, 0.6], 0.6),
      ],
      'other': [
          _write_run(tmp_path / 'o0', [0.1, 0.2, 0.3, 0.4], 0.4),
          _write_run(tmp_path / 'o1', [0.1, 0.5, 0.5, 0.5], 0.5),
      ],
  }
  lines = rounds_to_target.rounds_to_target_table(rows, 'no window')
  # Means: baseline (20 + 15) / 2 = 17.5 +- 2.5; IMA 7.5 +- 2.5; speed-ups
  # baseline 1 +- 0, IMA (2 + 3) / 2 = 2.5 +- 0.5.
  assert lines[2:] == [
      '| no window | 20, 15 | 17.5 +- 2.5 | 1.00 +- 0.00 |',
      '| IMA | 10, 5 | 7.5 +- 2.5 | 2.50 +- 0.50 |',
      '| other | -, 10 | not reached in 1 of 2 seeds | '
      'not reached in 1 of 2 seeds |',
  ]


def test_table_rejects_an_unknown_baseline_or_missing_seeds(tmp_path):
  run = _write_run(tmp_path / 'a', [0.1, 0.2, 0.3, 0.4], 0.4)
  with pytest.raises(ValueError, match="baseline 'x' is not one of"):
    rounds_to_target.rounds_to_target_table({'a': [run]}, 'x')
  with pytest.raises(ValueError, match='every row needs 1 runs'):
    rounds_to_target.rounds_to_target_table({'a': [run], 'b': []}, 'a')
