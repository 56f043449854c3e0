"""The package's import graph follows docs/design.md sec. 4.

`scripts -> experiments -> {training, algorithms, tasks, runtime}`,
`algorithms -> {aggregators, losses}`, `tasks -> data`, `reporting ->
training`; `checks`, `choices`, `errors` and `lazy_names` are usable
everywhere; nothing imports upwards, and `training` imports neither
`algorithms` nor `aggregators`.
"""

import ast
import collections
import pathlib

import pytest

_PACKAGE = pathlib.Path(__file__).resolve().parent.parent / 'tff_fedwin'
_LEAVES = {
    'checks',
    'choices',
    'errors',
    'lazy_names',
    'log_levels',
    'version',
}
ALLOWED = {
    'aggregators': set(),
    'losses': set(),
    'algorithms': {'aggregators', 'losses'},
    'data': set(),
    'tasks': {'data'},
    'runtime': set(),
    'training': set(),
    'reporting': {'training'},
    'benchmarks': {'algorithms', 'runtime', 'tasks', 'training', 'experiments'},
    'experiments': {'training', 'algorithms', 'tasks', 'runtime'},
}


def _imported_packages(path: pathlib.Path) -> set[str]:
  """The `tff_fedwin` subpackages and modules that `path` imports."""
  found = set()
  for node in ast.walk(ast.parse(path.read_text())):
    if (
        isinstance(node, ast.ImportFrom)
        and node.module
        and (
            node.module == 'tff_fedwin' or node.module.startswith('tff_fedwin.')
        )
    ):
      parts = node.module.split('.')
      found |= {parts[1]} if len(parts) > 1 else {a.name for a in node.names}
    elif isinstance(node, ast.Import):
      found |= {
          a.name.split('.')[1]
          for a in node.names
          if a.name.startswith('tff_fedwin.')
      }
  return found


def _graph() -> dict[str, set[str]]:
  graph = collections.defaultdict(set)
  for path in _PACKAGE.rglob('*.py'):
    relative = path.relative_to(_PACKAGE).parts
    if len(relative) == 1:
      continue  # Top-level modules: __init__, checks, log_levels, version.
    graph[relative[0]] |= _imported_packages(path) - {relative[0]}
  return graph


def test_every_subpackage_has_a_rule():
  assert set(_graph()) <= set(ALLOWED)


@pytest.mark.parametrize('package', sorted(ALLOWED))
def test_package_imports_only_what_its_layer_allows(package):
  extra = _graph()[package] - ALLOWED[package] - _LEAVES
  assert not extra, f'tff_fedwin.{package} must not import {sorted(extra)}'


def test_the_rule_detects_an_upward_import(tmp_path):
  # The scanner itself: an import of algorithms from a training-like file.
  module = tmp_path / 'loop.py'
  module.write_text(
      'from tff_fedwin.algorithms import scaffold\n'
      'import tff_fedwin.aggregators.window\n'
      'from tff_fedwin import checks\n'
  )
  assert _imported_packages(module) == {'algorithms', 'aggregators', 'checks'}
