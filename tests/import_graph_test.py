"""The package's import graph follows docs/design.md sec. 4.

`scripts -> experiments -> {training, algorithms, tasks, runtime}`,
`algorithms -> {aggregators, losses}`, `tasks -> data`, `reporting ->
training`; `checks`, `choices`, `errors` and `lazy_names` are usable
everywhere; nothing imports upwards, and `training` imports neither
`algorithms` nor `aggregators`. The benchmark code, the checkout's top-level
`benchmarks/` (not installed with the package), has its rule too, and nothing
in the package imports it.
"""

import ast
import collections
import pathlib

import pytest

_ROOT = pathlib.Path(__file__).resolve().parent.parent
_PACKAGE = _ROOT / 'tff_fedwin'
# Outside the package, checked as one of its layers.
_BENCHMARKS = _ROOT / 'benchmarks'
_LEAVES = {
    'checks',
    'choices',
    'errors',
    'lazy_names',
    'log_levels',
    'round_runner',
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
  for path in _BENCHMARKS.rglob('*.py'):
    graph['benchmarks'] |= _imported_packages(path)
  return graph


def _imports_benchmarks(path: pathlib.Path) -> bool:
  """Whether `path` imports the top-level `benchmarks` package."""
  for node in ast.walk(ast.parse(path.read_text())):
    if isinstance(node, ast.ImportFrom):
      names = [node.module or ''] if node.level == 0 else []
    elif isinstance(node, ast.Import):
      names = [a.name for a in node.names]
    else:
      continue
    if any(n == 'benchmarks' or n.startswith('benchmarks.') for n in names):
      return True
  return False


def test_every_subpackage_has_a_rule():
  assert set(_graph()) <= set(ALLOWED)


@pytest.mark.parametrize('package', sorted(ALLOWED))
def test_package_imports_only_what_its_layer_allows(package):
  extra = _graph()[package] - ALLOWED[package] - _LEAVES
  name = package if package == 'benchmarks' else f'tff_fedwin.{package}'
  assert not extra, f'{name} must not import {sorted(extra)}'


def test_the_benchmarks_are_outside_the_package():
  assert (_BENCHMARKS / '__init__.py').exists()
  # (A checkout from before the move may keep a tff_fedwin/benchmarks/ of
  # __pycache__ only.)
  assert not list((_PACKAGE / 'benchmarks').glob('*.py'))


def test_the_package_does_not_import_the_benchmarks():
  importing = [
      str(path.relative_to(_ROOT))
      for path in sorted(_PACKAGE.rglob('*.py'))
      if _imports_benchmarks(path)
  ]
  assert not importing, f'{importing} import benchmarks (not installed)'


def test_the_rule_detects_an_upward_import(tmp_path):
  # The scanner itself: an import of algorithms from a training-like file.
  module = tmp_path / 'loop.py'
  module.write_text(
      'from tff_fedwin.algorithms import scaffold\n'
      'import tff_fedwin.aggregators.window\n'
      'from tff_fedwin import checks\n'
  )
  assert _imported_packages(module) == {'algorithms', 'aggregators', 'checks'}


def test_an_import_of_the_benchmarks_is_detected(tmp_path):
  for line, found in [
      ('from benchmarks import rounds\n', True),
      ('import benchmarks.rounds\n', True),
      ('from tests.benchmarks import x\n', False),
      ('from tff_fedwin import choices\n', False),
  ]:
    module = tmp_path / 'm.py'
    module.write_text(line)
    assert _imports_benchmarks(module) == found, line
