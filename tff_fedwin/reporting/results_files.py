"""One tables file and one runs CSV for all experiments, updated in place.

`scripts/reproduce_papers.py` runs any subset of the experiments; each run of
it replaces only its experiments' parts of `results/tables.md` (one
`### <experiment>` section each) and `results/runs.csv` (one line per run,
column `experiment`), and keeps the others. So the results of every
experiment live in one file set, whichever subset was regenerated last.
"""

import contextlib
import csv
from collections.abc import Iterator, Mapping, Sequence
import os
from typing import TextIO

_SECTION_PREFIX = '### '


def read_sections(path: str) -> dict[str, str]:
  """{experiment: its section's text} of a tables file, in file order.

  A section runs from its `### <experiment>` line to the next one; text
  before the first section is not an experiment's and is dropped.

  Args:
    path: A tables file; missing means no sections.
  """
  if not os.path.exists(path):
    return {}
  sections = {}
  name = None
  with open(path) as f:
    for line in f:
      if line.startswith(_SECTION_PREFIX):
        name = line[len(_SECTION_PREFIX) :].strip()
        sections[name] = ''
      if name is not None:
        sections[name] += line
  return sections


def merge_sections(
    path: str, sections: Mapping[str, str], order: Sequence[str]
) -> None:
  """Writes `path` with `sections` replacing or adding those experiments.

  Args:
    path: The tables file; its other experiments' sections are kept.
    sections: {experiment: section text starting with `### <experiment>`}.
    order: The experiments' order in the file; experiments not in it follow,
      in their existing order.

  Raises:
    ValueError: A section does not start with its own `### <experiment>`.
  """
  for name, text in sections.items():
    if not text.startswith(f'{_SECTION_PREFIX}{name}\n'):
      raise ValueError(
          f'The section of {name!r} must start with "### {name}"; got '
          f'{text[:40]!r}.'
      )
  merged = {**read_sections(path), **sections}
  rank = {name: i for i, name in enumerate(order)}
  names = sorted(merged, key=lambda n: rank.get(n, len(rank)))
  with _replacing(path) as f:
    f.write('\n\n'.join(merged[n].strip('\n') for n in names) + '\n')


def merge_run_records(
    path: str,
    records: Sequence[Mapping[str, object]],
    experiments: Sequence[str],
    fieldnames: Sequence[str],
) -> None:
  """Writes `path` with `records` replacing the lines of `experiments`.

  Args:
    path: The runs CSV; lines of other experiments are kept, in order.
    records: The new lines, each with exactly `fieldnames`.
    experiments: The experiments whose old lines are dropped (also those
      with no new line: a regenerated experiment has only its new lines).
    fieldnames: The CSV columns; an existing file with other columns is
      rewritten with these, its kept lines' missing columns empty.
  """
  kept = []
  if os.path.exists(path):
    with open(path, newline='') as f:
      kept = [
          r for r in csv.DictReader(f) if r['experiment'] not in experiments
      ]
  with _replacing(path) as f:
    writer = csv.DictWriter(f, fieldnames=fieldnames, restval='')
    writer.writeheader()
    writer.writerows({k: r.get(k, '') for k in fieldnames} for r in kept)
    writer.writerows(records)


@contextlib.contextmanager
def _replacing(path: str) -> Iterator[TextIO]:
  """A file to write that replaces `path` in one rename when closed."""
  os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
  temp = path + '.tmp'
  with open(temp, 'w', newline='') as f:
    yield f
  os.replace(temp, path)
