"""Tests for tff_fedwin.experiments.papers: the experiments' configurations."""

import attrs
import pytest

from tff_fedwin import experiments
from tff_fedwin.experiments import config as config_lib
from tff_fedwin.experiments import paper_tables
from tff_fedwin.experiments import papers
from tff_fedwin.reporting import run_verdicts

TABLE = papers.paper_experiments()


@pytest.mark.parametrize('name', sorted(TABLE))
def test_every_config_is_valid(name):
  assert TABLE[name], name
  for label, config in TABLE[name].items():
    assert isinstance(config, experiments.ExperimentConfig), label
    assert experiments.validate_config(config) is None, label
    # The papers' structure (papers.BASE): 100 clients, 10 per round.
    assert (config.num_clients, config.clients_per_round) == (100, 10), label


def test_tuning_evaluates_on_validation_and_the_others_on_test():
  for name, rows in TABLE.items():
    splits = {config.eval_split for config in rows.values()}
    assert splits == ({'validation'} if name == 'tuning' else {'test'}), name


def test_tuning_covers_every_tuned_group_over_its_grid():
  groups = {}
  for label in TABLE['tuning']:
    group, value = papers.tuning_group(label)
    groups.setdefault(group, []).append(value)
  assert set(groups) == set(papers.TUNED)
  for group, values in groups.items():
    grid = (
        papers.SERVER_LR_GRID
        if group.startswith('fedavgm')
        else papers.CLIENT_LR_GRID
    )
    assert values == list(grid), group


def test_a_tuning_group_differs_only_in_the_tuned_learning_rate():
  by_group = {}
  for label, config in TABLE['tuning'].items():
    group, value = papers.tuning_group(label)
    flag = (
        'server_learning_rate'
        if group.startswith('fedavgm')
        else 'client_learning_rate'
    )
    assert getattr(config, flag) == value, label
    by_group.setdefault(group, set()).add(attrs.evolve(config, **{flag: 1.0}))
  assert all(len(configs) == 1 for configs in by_group.values())


@pytest.mark.parametrize(
    'group,experiment,flag',
    [
        ('fedavg alpha=0.1 ce', 'wsm', 'client_learning_rate'),
        ('fedavg alpha=0.1 wsm', 'wsm', 'client_learning_rate'),
        ('scaffold alpha=0.1 ce', 'wsm', 'client_learning_rate'),
        ('scaffold alpha=0.1 wsm', 'wsm', 'client_learning_rate'),
        ('fedavgm alpha=0.0', 'mnist_wima', 'server_learning_rate'),
        ('fedavgm alpha=0.05', 'mnist_wima', 'server_learning_rate'),
    ],
)
def test_the_rows_use_the_tuned_value(group, experiment, flag):
  # The row of the group is the one whose label starts with it.
  (config,) = [
      c
      for label, c in TABLE[experiment].items()
      if label.startswith(group + ' ')
  ]
  assert getattr(config, flag) == papers.TUNED[group]


def test_tuning_group_splits_the_label():
  assert papers.tuning_group('scaffold alpha=0.1 wsm lr=0.2') == (
      'scaffold alpha=0.1 wsm',
      0.2,
  )
  assert papers.tuning_group('fedavgm alpha=0.0 slr=0.1') == (
      'fedavgm alpha=0.0',
      0.1,
  )


@pytest.mark.parametrize(
    'experiment, start_fraction, baseline_schedule',
    [
        ('ima', 0.75, 'constant'),
        ('ima_local_setup', 0.75, 'decay'),
        ('ima_early_start', 0.375, 'decay'),
    ],
)
def test_ima_row_differs_from_the_baseline_in_window_and_schedule_only(
    experiment, start_fraction, baseline_schedule
):
  # IMA paper, Table 7: t_s = 0.75 R, P = 5; Table 2 (the speed-up) starts
  # at 150 of 400 rounds. With the local setup the baseline decays its client
  # lr as lr0 * 0.99^t ('decay'), which is IMA's schedule before t_s, so both
  # runs train alike up to t_s (the paper's baselines); the short `ima`
  # experiment keeps a constant baseline lr.
  rows = TABLE[experiment]
  ima = rows['fedavg alpha=0.1 IMA']
  assert ima.window_start_round == int(start_fraction * ima.total_rounds)
  assert (ima.window_size, ima.window_mode) == (5, 'broadcast')
  baseline = rows['fedavg alpha=0.1 no window']
  assert baseline.client_lr_schedule == baseline_schedule
  assert (
      attrs.evolve(
          baseline,
          window_size=ima.window_size,
          window_mode=ima.window_mode,
          window_start_round=ima.window_start_round,
          client_lr_schedule='ima',
      )
      == ima
  )
  # The summary is the last quarter of the run whatever t_s is.
  assert ima.summary_last_n == ima.total_rounds // 4 // ima.rounds_per_eval


def test_ima_early_start_shares_its_baselines_with_ima_local_setup():
  # Same configs, so the same runs (trained once): the speed-up compares IMA
  # from 0.375 R against the baselines of sec. 2b. The algorithm tables
  # share their FedAvg-family rows with mnist_wima and ima; no other rows.
  shared = {
      ('ima_early_start', label): ('ima_local_setup', label)
      for label in ('fedavg alpha=0.1 no window', 'fedadam alpha=0.1 no window')
  }
  shared.update(
      {
          ('wima_algorithms', label): ('mnist_wima', label)
          for label in (
              'fedavg alpha=0.05 W=10',
              'fedavgm alpha=0.05 slr=0.1 W=10',
              'scaffold alpha=0.05 W=10',
          )
      }
  )
  shared.update(
      {
          ('ima_algorithms', f'{alg} alpha=0.1 {row}'): (
              'ima',
              f'{alg} alpha=0.1 {row}',
          )
          for alg in ('fedavg', 'fedadam')
          for row in ('no window', 'IMA')
      }
  )
  # The ablations' reference rows: mnist_wima's FedAvg, ima's FedAvg.
  shared.update(
      {
          ('wima_window_part', f'fedavg alpha={a} W=10'): (
              'mnist_wima',
              f'fedavg alpha={a} W=10',
          )
          for a in (0.0, 0.05)
      }
  )
  shared.update(
      {
          ('ima_decays', f'fedavg alpha=0.1 {row}'): (
              'ima',
              f'fedavg alpha=0.1 {row}',
          )
          for row in ('no window', 'IMA')
      }
  )
  shared.update(
      {
          ('ima_epoch_decay', f'fedavg alpha=0.1 {row}'): (
              'ima_local_setup',
              f'fedavg alpha=0.1 {row}',
          )
          for row in ('no window', 'IMA')
      }
  )
  assert papers.shared_runs(TABLE) == shared
  for (name, label), (owner, owner_label) in shared.items():
    assert TABLE[name][label] == TABLE[owner][owner_label]


def test_shared_runs_names_the_first_row_with_the_config():
  a, b = papers.BASE, attrs.evolve(papers.BASE, seed=1)
  table = {'x': {'a': a, 'b': b}, 'y': {'b2': b, 'c': a}, 'z': {'a3': a}}
  assert papers.shared_runs(table) == {
      ('y', 'b2'): ('x', 'b'),
      ('y', 'c'): ('x', 'a'),
      ('z', 'a3'): ('x', 'a'),
  }


def test_rows_that_train_like_an_ima_row_until_t_s_fork_from_it():
  # The IMA rows are trunks; k = the last eval round (every 5) before t_s:
  # ima_local_setup t_s = 0.75 * 300 = 225 -> 220; ima_early_start t_s =
  # int(0.375 * 300) = 112 -> 110 (its IMA row trains like ima_local_setup's
  # before 112); ima (40 rounds, eval every 2) t_s = 30 -> 28, the
  # schedule-only row only (its no-window row has the constant lr, which
  # parts from IMA's at round 1), as ima_algorithms' FedYogi one and
  # ima_decays' other schemes (0.99^t as IMA's before t_s).
  setup = 'ima_local_setup'
  expected = {
      # ima_epoch_decay's rows from ima_local_setup's IMA row: the epochs
      # part at 225 + 15, the schedules at 225.
      **{
          ('ima_epoch_decay', f'fedavg alpha=0.1 {row}'): (
              (setup, 'fedavg alpha=0.1 IMA'),
              220,
          )
          for row in ('IMA NA decay', 'IMA epoch decay P=15')
      },
      **{
          ('ima_decays', f'fedavg alpha=0.1 {row}'): (
              ('ima', 'fedavg alpha=0.1 IMA'),
              28,
          )
          for row in ('IMA const lr', 'IMA cyclic c=5', 'IMA NA decay')
      },
      ('ima', 'fedavg alpha=0.1 IMA schedule only W=1'): (
          ('ima', 'fedavg alpha=0.1 IMA'),
          28,
      ),
      ('ima_algorithms', 'fedyogi alpha=0.1 IMA schedule only W=1'): (
          ('ima_algorithms', 'fedyogi alpha=0.1 IMA'),
          28,
      ),
      (setup, 'fedavg alpha=0.1 no window'): (
          (setup, 'fedavg alpha=0.1 IMA'),
          220,
      ),
      (setup, 'fedavg alpha=0.1 IMA schedule only W=1'): (
          (setup, 'fedavg alpha=0.1 IMA'),
          220,
      ),
      (setup, 'fedadam alpha=0.1 no window'): (
          (setup, 'fedadam alpha=0.1 IMA'),
          220,
      ),
      ('ima_early_start', 'fedavg alpha=0.1 IMA'): (
          (setup, 'fedavg alpha=0.1 IMA'),
          110,
      ),
      ('ima_early_start', 'fedadam alpha=0.1 IMA'): (
          (setup, 'fedadam alpha=0.1 IMA'),
          110,
      ),
  }
  assert papers.forked_runs(TABLE) == expected


def test_ima_local_setup_is_the_papers_local_setup():
  # IMA paper, sec. 7.1.3 and Table 7 (FMNIST row): batch 50, 5 local
  # epochs, SGD lr 0.01 with momentum 0.9, R = 300, t_s = 225.
  rows = [
      *TABLE['ima_local_setup'].values(),
      *TABLE['ima_early_start'].values(),
  ]
  for config in rows:
    assert (
        config.client_batch_size,
        config.client_epochs,
        config.client_learning_rate,
        config.client_momentum,
        config.total_rounds,
    ) == (50, 5, 0.01, 0.9, 300)


@pytest.mark.parametrize(
    'experiment, sizes',
    [
        ('mnist_window_sweep', {5, 10, 50, 100}),
        ('mnist_window_horizon', {5, 10, 50, 100, 200}),
    ],
)
def test_a_window_sweep_is_one_evaluate_mode_run_per_trajectory(
    experiment, sizes
):
  # The W values of the WiMA paper's Table 4 ride on one trajectory per row:
  # every row carries all of them (training does not depend on W).
  for config in TABLE[experiment].values():
    carried = {config.window_size, *config_lib.parse_window_sizes(config)}
    assert carried == sizes
    assert config.window_mode == 'evaluate'


def test_the_algorithm_tables_put_the_window_on_every_algorithm():
  wima = TABLE['wima_algorithms']
  # Every --algorithm but FedFA, which only IMA's table has (MIME four
  # times: SGD at server rates 1 and 0.1, WiMA's grid, SGD with 10 local
  # steps at most, and SGDm), FedSAM and FedASAM (FedAvg with SAM/ASAM
  # clients), each with a W = 10 evaluate-mode window at alpha = 0.05.
  wima_algorithms = set(experiments.ALGORITHMS) - {'fedfa'}
  assert {c.algorithm for c in wima.values()} == wima_algorithms
  assert sorted(c.client_sharpness for c in wima.values()) == sorted(
      ['none'] * (len(wima_algorithms) + 3) + ['sam', 'asam']
  )
  assert sorted(
      (label, c.mime_beta, c.server_learning_rate, c.client_max_elements)
      for label, c in wima.items()
      if c.algorithm == 'mime'
  ) == [
      ('mime beta=0.0 alpha=0.05 W=10', 0.0, 1.0, 0),
      ('mime beta=0.0 alpha=0.05 slr=0.1 W=10', 0.0, 0.1, 0),
      ('mime beta=0.0 max_elements=200 alpha=0.05 W=10', 0.0, 1.0, 200),
      ('mime beta=0.9 alpha=0.05 W=10', 0.9, 1.0, 0),
  ]
  fedgma = [c for c in wima.values() if c.algorithm == 'fedgma']
  assert [c.fedgma_threshold for c in fedgma] == [0.8]  # IMA Table 5
  assert {
      (c.window_size, c.window_mode, c.dirichlet_alpha) for c in wima.values()
  } == {(10, 'evaluate', 0.05)}
  # IMA's table: each algorithm with and without IMA, the pair equal but for
  # the window and the schedule.
  ima = TABLE['ima_algorithms']
  # FedFA with the IMA authors' lambda and calibration start (their rounds
  # t - 1 > R / 4, R = 40: from 12), IMA Table 5's anchor momentum.
  fedfa = ima['fedfa alpha=0.1 IMA']
  assert (
      fedfa.fedfa_lambda,
      fedfa.fedfa_momentum,
      fedfa.fedfa_calibration_start_round,
  ) == (0.1, 0.9, 12)
  for alg in paper_tables.IMA_TABLE_ALGORITHMS:
    without, with_ima = (
        ima[f'{alg} alpha=0.1 no window'],
        ima[f'{alg} alpha=0.1 IMA'],
    )
    assert with_ima.window_mode == 'broadcast' and with_ima.window_size == 5
    assert (
        attrs.evolve(
            with_ima,
            window_size=0,
            window_mode='evaluate',
            window_start_round=0,
            client_lr_schedule='constant',
        )
        == without
    )


def test_ima_table_verdicts_pair_every_algorithm_of_the_table():
  # tff_fedwin.reporting cannot import experiments: its list is kept here.
  assert run_verdicts.IMA_TABLE_PAIRS == tuple(
      (f'{alg} alpha=0.1 IMA', f'{alg} alpha=0.1 no window')
      for alg in paper_tables.IMA_TABLE_ALGORITHMS
  )
  pairs = run_verdicts.IMA_TABLE_PAIRS + run_verdicts.IMA_YOGI_SPLIT
  assert {row for pair in pairs for row in pair} == set(TABLE['ima_algorithms'])


def test_wima_swa_start_is_wima_fig_2_at_our_scale():
  # WiMA Fig. 2 / sec. 4: FedAvg; WiMA and SWA from each start round; SWA
  # with cyclic client rate, second rate lr * 1e-2 (0.05 -> 5e-4), c = 5.
  rows = TABLE['wima_swa_start']
  wima_row = TABLE['wima_algorithms']['fedavg alpha=0.05 W=10']
  labels = []
  for start, wima, swa in paper_tables.swa_start_rows():
    labels += [wima, swa]
    assert (rows[wima].window_size, rows[wima].window_mode) == (10, 'evaluate')
    assert rows[wima].window_start_round == start
    # wima_algorithms' FedAvg row but for t_s and the summary span.
    assert (
        attrs.evolve(
            rows[wima],
            window_start_round=0,
            summary_last_n=wima_row.summary_last_n,
        )
        == wima_row
    )
    assert (
        rows[swa].swa_start_round,
        rows[swa].swa_cycle,
        rows[swa].client_lr_schedule,
        rows[swa].client_lr_low,
        rows[swa].window_size,
    ) == (start, 5, 'swa_cyclic', 5e-4, 0)
    assert (
        attrs.evolve(
            rows[swa],
            swa_start_round=0,
            swa_cycle=1,
            client_lr_schedule='constant',
            client_lr_low=rows[wima].client_lr_low,
            window_size=10,
            window_start_round=start,
        )
        == rows[wima]
    )
  assert list(rows) == labels
  assert [start for start, _, _ in paper_tables.swa_start_rows()] == [
      10,
      20,
      30,
  ]
  # The summary: the evals of rounds 36, 38 and 40, after SWA from t_s = 30
  # first averages (round 35).
  assert {
      (c.total_rounds, c.rounds_per_eval, c.summary_last_n)
      for c in rows.values()
  } == {(40, 2, 3)}


def test_swa_table_verdicts_pair_every_start_round():
  # tff_fedwin.reporting cannot import experiments: its list is kept here.
  assert run_verdicts.SWA_TABLE_PAIRS == tuple(
      (swa, 'window', wima, model)
      for _, wima, swa in paper_tables.swa_start_rows()
      for model in ('window', 'global')
  )
  assert run_verdicts.MODEL_COMPARISONS == {
      'wima_swa_start': run_verdicts.SWA_TABLE_PAIRS,
      'wima_window_part': run_verdicts.WINDOW_PART_PAIRS,
  }


def test_wima_window_part_is_mnist_wimas_fedavg_over_each_part():
  rows = TABLE['wima_window_part']
  for alpha in (0.0, 0.05):
    whole = f'fedavg alpha={alpha} W=10'
    assert rows[whole] == TABLE['mnist_wima'][whole]
    assert rows[whole].window_part == 'all'
    for part in ('classifier', 'features'):
      config = rows[f'{whole} {part} only']
      assert config.window_part == part
      assert attrs.evolve(config, window_part='all') == rows[whole]
  # WiMA Table 5's claims: features only - classifier only, - whole model.
  for a, model_a, b, model_b in run_verdicts.WINDOW_PART_PAIRS:
    assert (model_a, model_b) == ('window', 'window')
    assert a in rows and b in rows
    assert rows[a].window_part == 'features'
  assert len(run_verdicts.WINDOW_PART_PAIRS) == 4


def test_ima_decays_is_imas_fedavg_row_with_each_decay_scheme():
  rows = TABLE['ima_decays']
  ima = TABLE['ima']['fedavg alpha=0.1 IMA']
  assert rows['fedavg alpha=0.1 IMA'] == ima
  assert rows['fedavg alpha=0.1 no window'] == (
      TABLE['ima']['fedavg alpha=0.1 no window']
  )
  # IMA sec. 7.3.2: constant 5e-5; cyclic down to 5e-5 (cycle 5 of our 10
  # IMA rounds); NA: the baselines' 0.99^t only.
  schedules = {
      'IMA const lr': ('ima_constant', 5e-5),
      'IMA cyclic c=5': ('ima_cyclic', 5e-5),
      'IMA NA decay': ('decay', ima.client_lr_low),
  }
  for suffix, (schedule, low) in schedules.items():
    config = rows[f'fedavg alpha=0.1 {suffix}']
    assert (config.client_lr_schedule, config.client_lr_low) == (
        schedule,
        low,
    )
    assert (
        attrs.evolve(
            config,
            client_lr_schedule='ima',
            client_lr_low=ima.client_lr_low,
            client_lr_cycle=ima.client_lr_cycle,
        )
        == ima
    )
  assert rows['fedavg alpha=0.1 IMA cyclic c=5'].client_lr_cycle == 5
  assert {row for pair in run_verdicts.IMA_DECAY_PAIRS for row in pair} == set(
      rows
  )


def test_ima_epoch_decay_is_ima_local_setups_ima_row_with_epoch_decay():
  rows = TABLE['ima_epoch_decay']
  setup = TABLE['ima_local_setup']
  ima = setup['fedavg alpha=0.1 IMA']
  assert rows['fedavg alpha=0.1 IMA'] == ima
  assert rows['fedavg alpha=0.1 no window'] == (
      setup['fedavg alpha=0.1 no window']
  )
  na_decay = rows['fedavg alpha=0.1 IMA NA decay']
  assert na_decay == attrs.evolve(ima, client_lr_schedule='decay')
  epochs = rows['fedavg alpha=0.1 IMA epoch decay P=15']
  assert epochs == attrs.evolve(na_decay, client_epochs_decay_every=15)
  # 5 epochs from t_s = 225 of 300, one fewer every 15 rounds: the paper's
  # 5 steps over IMA's rounds (20 of 100 there, 15 of 75 here).
  assert (ima.client_epochs, ima.window_start_round, ima.total_rounds) == (
      5,
      225,
      300,
  )
  assert {
      row for pair in run_verdicts.IMA_EPOCH_DECAY_PAIRS for row in pair
  } == (set(rows))
