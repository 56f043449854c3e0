"""README.md keeps its shape, and the docs' relative links resolve.

The README is a newcomer's first screen or two (issue 46): at most 300 lines,
and its first code blocks are the two commands a fresh machine and CI run,
the main job (with its output after it) and the test command, before any
example. Every relative link in
README.md and docs/*.md names a file or directory that exists. Plain text
checks: no TensorFlow or TFF here.
"""

import glob
import os
import re

import pytest

_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_README = os.path.join(_ROOT, 'README.md')
MAX_LINES = 300
MAIN_JOB_COMMAND = (
    'bash scripts/setup_env.sh && .venv/bin/python scripts/run_experiment.py'
    ' --task=mnist --num_clients=100 --dirichlet_alpha=0.05'
    ' --clients_per_round=10 --algorithm=fedavg --window_size=10'
    ' --total_rounds=40 --rounds_per_eval=2 --root_output_dir=runs'
    ' --experiment_name=mnist_fedavg_wima && .venv/bin/python'
    ' scripts/plot_runs.py --run_dirs=runs/mnist_fedavg_wima --labels=FedAvg'
    ' --output=runs/mnist_fedavg_wima.png'
)
TEST_COMMAND = 'bash scripts/setup_env.sh && .venv/bin/python -m pytest'

# A fence opens a code block, the next one closes it (CommonMark's ``` form).
_FENCE = re.compile(r'^```([^\n]*)\n(.*?)^```[ \t]*$', re.MULTILINE | re.DOTALL)
# [text](target) and ![alt](target); the target ends at a space or ")".
_LINK = re.compile(r'!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)')


def code_blocks(text: str) -> list[tuple[str, str]]:
  """The fenced code blocks of `text` in order: (info string, content)."""
  return [
      (m.group(1).strip(), m.group(2).strip()) for m in _FENCE.finditer(text)
  ]


def relative_link_targets(text: str) -> list[str]:
  """The link targets of `text` that name a local path (no URL, no anchor).

  Links inside code blocks are not links, so they are left out.
  """
  prose = _FENCE.sub('', text)
  targets = []
  for target in _LINK.findall(prose):
    if re.match(r'^[a-zA-Z][a-zA-Z0-9+.-]*:', target) or target.startswith('#'):
      continue  # http:, https:, mailto: ... or a heading in the same file.
    targets.append(target.split('#', 1)[0])
  return targets


def broken_links(path: str) -> list[str]:
  """The relative links of the Markdown file `path` whose target is missing."""
  with open(path, encoding='utf-8') as f:
    text = f.read()
  base = os.path.dirname(path)
  return [
      target
      for target in relative_link_targets(text)
      if not os.path.exists(os.path.join(base, target))
  ]


def shape_problems(path: str) -> list[str]:
  """What is wrong with the README at `path`'s shape; empty if nothing."""
  with open(path, encoding='utf-8') as f:
    text = f.read()
  problems = []
  num_lines = len(text.splitlines())
  if num_lines > MAX_LINES:
    problems.append(f'{num_lines} lines, more than {MAX_LINES}')
  blocks = code_blocks(text)
  if not blocks or blocks[0] != ('bash', MAIN_JOB_COMMAND):
    problems.append('the first code block is not the main job command')
  if ('bash', TEST_COMMAND) not in blocks:
    problems.append('the test command is missing')
  else:
    # Only the main job's output (a block without a language) may come
    # between the two commands.
    between = blocks[1 : blocks.index(('bash', TEST_COMMAND))]
    if any(info for info, _ in between):
      problems.append(
          'code blocks before the test command: '
          f'{[content[:40] for info, content in between if info]}'
      )
  return problems


def _docs():
  return [_README] + sorted(glob.glob(os.path.join(_ROOT, 'docs', '*.md')))


def test_readme_has_its_shape():
  assert shape_problems(_README) == []


def test_the_test_command_is_what_ci_runs():
  with open(os.path.join(_ROOT, '.ci', 'run'), encoding='utf-8') as f:
    ci_lines = [line.strip() for line in f]
  assert TEST_COMMAND in ci_lines


@pytest.mark.parametrize(
    'path', _docs(), ids=lambda path: os.path.relpath(path, _ROOT)
)
def test_relative_links_resolve(path):
  assert broken_links(path) == []


def test_code_blocks_are_read_in_order():
  # Hand-written: two fenced blocks and a link inside a block.
  text = 'a\n```bash\nfirst\n```\ntext\n```\n[x](nowhere.md)\n```\n'
  assert code_blocks(text) == [('bash', 'first'), ('', '[x](nowhere.md)')]


def test_link_targets_skip_urls_anchors_and_code():
  text = (
      '[a](docs/design.md) ![b](results/x.png) [c](https://x.org/y.md) '
      '[d](#usage) [e](RESULTS.md#summary) [f](mailto:someone@x.org)\n'
      '```\n[g](in_code.md)\n```\n'
  )
  assert relative_link_targets(text) == [
      'docs/design.md',
      'results/x.png',
      'RESULTS.md',
  ]


def test_a_missing_target_is_reported(tmp_path):
  (tmp_path / 'there.md').write_text('x')
  doc = tmp_path / 'doc.md'
  doc.write_text('[ok](there.md) [gone](missing.md) [up](../nope/x.md)\n')
  assert broken_links(str(doc)) == ['missing.md', '../nope/x.md']


def test_a_long_readme_with_the_commands_late_fails(tmp_path):
  readme = tmp_path / 'README.md'
  filler = ''.join(f'line {i}\n' for i in range(MAX_LINES))
  readme.write_text(
      filler
      + f'```bash\n{MAIN_JOB_COMMAND}\n```\n```\noutput\n```\n'
      + f'```python\nimport x\n```\n```bash\n{TEST_COMMAND}\n```\n'
  )
  # 300 filler lines + 4 blocks of 3 lines = 312 lines.
  assert shape_problems(str(readme)) == [
      f'312 lines, more than {MAX_LINES}',
      "code blocks before the test command: ['import x']",
  ]


def test_a_readme_without_the_commands_fails(tmp_path):
  readme = tmp_path / 'README.md'
  readme.write_text('# x\n```bash\npip install x\n```\n')
  assert shape_problems(str(readme)) == [
      'the first code block is not the main job command',
      'the test command is missing',
  ]


def test_the_main_job_with_its_output_then_the_test_command_passes(tmp_path):
  readme = tmp_path / 'README.md'
  readme.write_text(
      f'# x\n```bash\n{MAIN_JOB_COMMAND}\n```\n```\noutput\n```\n'
      f'```bash\n{TEST_COMMAND}\n```\n```python\nimport x\n```\n'
  )
  assert shape_problems(str(readme)) == []
