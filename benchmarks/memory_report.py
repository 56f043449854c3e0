"""The memory curves' files: one CSV per run, a markdown table, a PNG.

`write_csv`/`read_csv` keep each run's samples (`<run>.csv`), so that a
benchmark killed between runs keeps the runs it finished and the report can
be redrawn from the files (scripts/benchmark_memory.py).
"""

import csv
import os
from collections.abc import Mapping, Sequence

from matplotlib import figure as figure_lib
from matplotlib.backends import backend_agg

from benchmarks import memory

_FIELDS = memory.MemorySample._fields
Curves = Mapping[str, Sequence[memory.MemorySample]]


def csv_path(directory: str, run: str) -> str:
  return os.path.join(directory, f'{run}.csv')


def write_csv(path: str, samples: Sequence[memory.MemorySample]) -> None:
  with open(path, 'w', newline='') as f:
    writer = csv.writer(f)
    writer.writerow(_FIELDS)
    for sample in samples:
      writer.writerow([sample.round_num] + [f'{v:.3f}' for v in sample[1:]])


def read_csv(path: str) -> list[memory.MemorySample]:
  with open(path, newline='') as f:
    return [
        memory.MemorySample(
            int(row['round_num']),
            *(float(row[k]) for k in _FIELDS[1:]),
        )
        for row in csv.DictReader(f)
    ]


def _seconds_per_round(samples: Sequence[memory.MemorySample]) -> str:
  """s/round over the first and over the last interval between samples."""
  if len(samples) < 3:
    return ''
  first = (samples[1].elapsed_seconds - samples[0].elapsed_seconds) / (
      samples[1].round_num - samples[0].round_num
  )
  last = (samples[-1].elapsed_seconds - samples[-2].elapsed_seconds) / (
      samples[-1].round_num - samples[-2].round_num
  )
  return f'{first:.2f} / {last:.2f}'


def _reference_round(samples: Sequence[memory.MemorySample]) -> int:
  """`GROWTH_FROM_ROUND`, or the first sample's round in a shorter run."""
  if samples[-1].round_num >= memory.GROWTH_FROM_ROUND:
    return memory.GROWTH_FROM_ROUND
  return samples[0].round_num


def markdown_table(curves: Curves) -> str:
  """Per run: RSS at the reference round and at the end, growth (end, peak,
  level: `memory.level_growth`)."""
  lines = [
      '| run | rounds | from round | driver MB from / end | driver growth end '
      '/ peak | driver level growth | worker MB from / end | worker growth '
      'end / peak | worker level growth | s/round first / last interval |',
      '|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|',
  ]
  for run, samples in curves.items():
    r0 = _reference_round(samples)
    later = [s for s in samples if s.round_num >= r0]
    cells = [run, str(samples[-1].round_num), str(r0)]
    for key in ('driver_mb', 'worker_mb'):
      end, peak = memory.growth(samples, key, r0)
      cells.append(
          f'{getattr(later[0], key):.0f} / {getattr(later[-1], key):.0f}'
      )
      cells.append(f'{end:+.1%} / {peak:+.1%}')
      cells.append(f'{memory.level_growth(samples, key, r0):+.1%}')
    cells.append(_seconds_per_round(samples))
    lines.append('| ' + ' | '.join(cells) + ' |')
  return '\n'.join(lines)


def plot(curves: Curves, path: str) -> None:
  """Driver and worker RSS per round, one color per run, to a PNG."""
  fig = figure_lib.Figure(figsize=(10, 4))
  backend_agg.FigureCanvasAgg(fig)
  axes = fig.subplots(1, 2, sharex=True)
  for ax, key, title in zip(
      axes, ('driver_mb', 'worker_mb'), ('driver', 'TFF worker')
  ):
    for run, samples in curves.items():
      ax.plot(
          [s.round_num for s in samples],
          [getattr(s, key) for s in samples],
          marker='o',
          markersize=3,
          label=run,
      )
    ax.axvline(memory.GROWTH_FROM_ROUND, color='grey', linewidth=0.5)
    ax.set_title(f'{title} RSS')
    ax.set_xlabel('round')
    ax.set_ylabel('MB')
    ax.set_ylim(bottom=0)
    ax.grid(alpha=0.3)
  axes[0].legend()
  fig.tight_layout()
  fig.savefig(path, dpi=100)
