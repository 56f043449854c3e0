"""The few lines a finished run prints: its summary in words, not a dict."""

import datetime
from collections.abc import Mapping
from typing import Any

from tff_fedwin.training import outputs

_MODELS = (outputs.WINDOW_PREFIX, outputs.GLOBAL_PREFIX)


def _rounds_text(rounds: list[int]) -> str:
  if not rounds:
    return 'no eval rounds'
  if len(rounds) == 1:
    return f'round {rounds[0]}'
  return f'rounds {rounds[0]}-{rounds[-1]}'


def format_summary(summary: Mapping[str, Any], output_dir: str) -> str:
  """Formats `run_training`'s summary as a short text block.

  Args:
    summary: The dict `tff_fedwin.training.run_training` returns (and writes
      to `summary.json`).
    output_dir: The run's directory, named in the last line.

  Returns:
    Lines: the run and its time; per eval metric, the window (unless the
    summary's `has_window` is False) and global model's mean +- std over the
    summarized eval rounds; where the outputs are.
  """
  rounds = list(summary['eval_rounds'])
  seconds = round(summary['total_round_and_eval_time_seconds'])
  resumed = summary.get('resumed_from_round')
  head = (
      f'{summary["experiment_name"]}: {summary["total_rounds"]} rounds, '
      f'{datetime.timedelta(seconds=seconds)} of rounds and evals'
      + (f' (resumed from round {resumed})' if resumed is not None else '')
      + f'; mean +- std over the last {len(rounds)} evals '
      f'({_rounds_text(rounds)}):'
  )
  lines = [head]
  models = _MODELS if summary.get('has_window', True) else _MODELS[1:]
  for metric in sorted(summary['window']):
    parts = []
    for model in models:
      stats = summary[model].get(metric)
      if stats is not None:
        parts.append(f'{model} {stats["mean"]:.4f} +- {stats["std"]:.4f}')
    lines.append(f'  {metric}: ' + ', '.join(parts))
  lines.append(
      f'  outputs: {output_dir} ({outputs.METRICS_CSV}, '
      f'{outputs.SUMMARY_JSON}, {outputs.TENSORBOARD_DIR}/, '
      f'{outputs.CHECKPOINT_DIR}/)'
  )
  return '\n'.join(lines)
