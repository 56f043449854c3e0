"""Tests for tff_fedwin.reporting.summary_text.format_summary."""

from tff_fedwin.reporting import summary_text


def _stats(mean, std):
  return {'mean': mean, 'std': std, 'values': []}


SUMMARY = {
    'experiment_name': 'mnist_wima',
    'total_rounds': 40,
    'eval_rounds': [32, 34, 36, 38, 40],
    'total_round_and_eval_time_seconds': 123.4,  # -> 0:02:03
    'resumed_from_round': None,
    'window': {'accuracy': _stats(0.93512, 0.00104), 'loss': _stats(0.2, 0.01)},
    'global': {'accuracy': _stats(0.8221, 0.07799), 'loss': _stats(0.5, 0.25)},
}


def test_format_summary_lines():
  assert summary_text.format_summary(SUMMARY, 'runs/mnist_wima').split(
      '\n'
  ) == [
      'mnist_wima: 40 rounds, 0:02:03 of rounds and evals; mean +- std '
      'over the last 5 evals (rounds 32-40):',
      '  accuracy: window 0.9351 +- 0.0010, global 0.8221 +- 0.0780',
      '  loss: window 0.2000 +- 0.0100, global 0.5000 +- 0.2500',
      '  outputs: runs/mnist_wima (metrics.csv, summary.json, '
      'tensorboard/, checkpoints/)',
  ]


def test_format_summary_says_resumed_and_single_round():
  summary = dict(SUMMARY, resumed_from_round=20, eval_rounds=[40])
  head = summary_text.format_summary(summary, 'd').split('\n')[0]
  assert head.endswith(
      '(resumed from round 20); mean +- std over the last '
      '1 evals (round 40):'
  )


def test_format_summary_without_a_window_prints_the_global_model_only():
  summary = dict(SUMMARY, has_window=False)
  assert summary_text.format_summary(summary, 'd').split('\n')[1:3] == [
      '  accuracy: global 0.8221 +- 0.0780',
      '  loss: global 0.5000 +- 0.2500',
  ]
