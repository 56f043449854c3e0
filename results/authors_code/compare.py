"""Side-by-side: the IMA authors' PyTorch loop against ours, per-round test accuracy.

Usage (the project's venv, for matplotlib):
  .venv/bin/python results/authors_code/compare.py [--r_ima=36] [--last_n=5]
      > results/authors_code/compare.txt

Reads runs_theirs/<method>_seed<s>.csv (round,accuracy; run_theirs.sh) and
runs_ours/<method>_seed<s>.csv (our metrics.csv; run_ours.sh), methods fedavg
and ima. Rounds are counted 1, 2, ... on both sides (their t + 1); IMA's window
is active from round r_ima + 1. Our accuracy column: `window/accuracy` when the
run has a window (the model IMA evaluates and broadcasts), else
`global/accuracy`. Writes agreement.png beside this file.
"""

import argparse
import csv
import glob
import os
import re

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
METHODS = ('fedavg', 'ima')
LABEL = {'fedavg': 'FedAvg', 'ima': 'FedAvg+IMA'}
SIDES = ('theirs', 'ours')
SIDE_LABEL = {'theirs': "authors' PyTorch", 'ours': 'tff_fedwin (TFF)',
              'ours_nowd': 'tff_fedwin, no weight decay',
              'theirs_keras_init': "authors' loop, Keras init (diagnostic)"}
# Further runs, reported when their directory exists: our side without the
# client weight decay, and the authors' loop re-initialized as Keras does.
EXTRA_SIDES = ('ours_nowd', 'theirs_keras_init')


def read_curve(path):
  with open(path) as f:
    rows = list(csv.DictReader(f))
  if 'accuracy' in rows[0]:
    rnd, col = 'round', 'accuracy'
  else:
    rnd = 'round_num'
    col = 'window/accuracy' if rows[0].get('window/accuracy') else 'global/accuracy'
  out = {}
  for r in rows:
    if r.get(col) not in (None, ''):
      out[int(r[rnd])] = float(r[col])
  return out


def load(side):
  runs = {}
  for path in sorted(glob.glob(os.path.join(HERE, f'runs_{side}', '*_seed*.csv'))):
    m = re.fullmatch(r'(fedavg|ima)_seed(\d+)\.csv', os.path.basename(path))
    if m:
      runs[(m.group(1), int(m.group(2)))] = read_curve(path)
  return runs


def mean_over(curve, rounds):
  vals = [curve[r] for r in rounds if r in curve]
  return float(np.mean(vals)) if len(vals) == len(rounds) else float('nan')


def sd_over(curve, rounds):
  vals = [curve[r] for r in rounds if r in curve]
  return float(np.std(vals)) if len(vals) == len(rounds) else float('nan')


def first_round_at(curve, level=0.5):
  hits = [r for r in sorted(curve) if curve[r] >= level]
  return hits[0] if hits else float('nan')


def fmt(xs):
  xs = np.asarray([x for x in xs if not np.isnan(x)])
  if len(xs) == 0:
    return 'n/a'
  if len(xs) == 1:
    return f'{xs[0]:.4f}'
  return f'{xs.mean():.4f} +- {xs.std(ddof=1):.4f}'


def main():
  p = argparse.ArgumentParser()
  p.add_argument('--r_ima', type=int, default=36,
                 help="IMA's 0-based start round (theirs); active from round r_ima + 1")
  p.add_argument('--last_n', type=int, default=5)
  a = p.parse_args()
  runs = {side: load(side) for side in SIDES + EXTRA_SIDES}
  start = a.r_ima + 1
  pre = list(range(start - a.last_n, start))   # the last n rounds before IMA
  print(f'IMA active from round {start} (their 0-based r_ima = {a.r_ima}); '
        f'accuracy = test accuracy on the 10,000 held-out MNIST images.')
  print('std: sample std over seeds (ddof=1).\n')
  summary = {}
  for side in SIDES + EXTRA_SIDES:
    seeds = sorted({s for (_, s) in runs[side]})
    if not seeds and side in EXTRA_SIDES:
      continue
    if not seeds:
      print(f'== {SIDE_LABEL[side]}: no runs\n')
      continue
    rounds = max(max(c) for c in runs[side].values())
    last = list(range(rounds - a.last_n + 1, rounds + 1))
    print(f'== {SIDE_LABEL[side]} (runs_{side}/), {rounds} rounds; last {a.last_n} '
          f'evals = rounds {last[0]}-{last[-1]}; before IMA = rounds {pre[0]}-{pre[-1]}')
    print(f'{"seed":>6} | {"FedAvg last5":>12} | {"IMA last5":>12} | {"IMA gain":>9} | '
          f'{"FedAvg preIMA":>13} | {"IMA preIMA":>10} | {"pre-IMA max |diff|":>18} | '
          f'{"sd5 FedAvg":>10} | {"sd5 IMA":>7} | {"FedAvg 1st r>=0.5":>17}')
    cols = {k: [] for k in ('f', 'i', 'g', 'fp', 'ip', 'fs', 'is', 'r5')}
    for s in seeds:
      f = runs[side].get(('fedavg', s))
      i = runs[side].get(('ima', s))
      fl = mean_over(f, last) if f else float('nan')
      il = mean_over(i, last) if i else float('nan')
      fp = mean_over(f, pre) if f else float('nan')
      ip = mean_over(i, pre) if i else float('nan')
      diff = (max(abs(f[r] - i[r]) for r in range(1, start) if r in f and r in i)
              if f and i else float('nan'))
      fs = sd_over(f, last) if f else float('nan')
      is_ = sd_over(i, last) if i else float('nan')
      r5 = first_round_at(f) if f else float('nan')
      for k, v in zip(cols, (fl, il, il - fl, fp, ip, fs, is_, r5)):
        cols[k].append(v)
      print(f'{s:>6} | {fl:>12.4f} | {il:>12.4f} | {il - fl:>+9.4f} | {fp:>13.4f} | '
            f'{ip:>10.4f} | {diff:>18.4f} | {fs:>10.4f} | {is_:>7.4f} | {r5:>17}')
    print(f'{"mean":>6} | FedAvg {fmt(cols["f"])} | IMA {fmt(cols["i"])} | '
          f'gain {fmt(cols["g"])}\n{"":>6} | pre-IMA FedAvg {fmt(cols["fp"])}, IMA '
          f'{fmt(cols["ip"])} | sd5 FedAvg {fmt(cols["fs"])}, IMA {fmt(cols["is"])} | '
          f'FedAvg first round >= 0.5: {", ".join(str(x) for x in cols["r5"])}\n')
    summary[side] = cols
  if 'ours' in summary and 'theirs' in summary:
    print('== ours - theirs (difference of the seed means; compare with the stds above)')
    for k, name in (('f', 'FedAvg last5'), ('i', 'IMA last5'), ('g', 'IMA gain'),
                    ('fp', 'FedAvg pre-IMA'), ('fs', 'sd5 FedAvg'), ('is', 'sd5 IMA')):
      o, t = np.nanmean(summary['ours'][k]), np.nanmean(summary['theirs'][k])
      print(f'  {name:>15}: ours {o:.4f}, theirs {t:.4f}, difference {o - t:+.4f}')
  plot(runs, start, a.last_n)


def plot(runs, start, last_n):
  import matplotlib  # pylint: disable=g-import-not-at-top
  matplotlib.use('Agg')
  import matplotlib.pyplot as plt  # pylint: disable=g-import-not-at-top
  fig, axes = plt.subplots(1, 2, figsize=(12, 4.5))
  style = {('theirs', 'fedavg'): ('tab:blue', '--'), ('theirs', 'ima'): ('tab:red', '--'),
           ('ours', 'fedavg'): ('tab:blue', '-'), ('ours', 'ima'): ('tab:red', '-'),
           ('theirs_keras_init', 'fedavg'): ('tab:cyan', ':'),
           ('theirs_keras_init', 'ima'): ('tab:orange', ':')}
  for ax, zoom in zip(axes, (False, True)):
    for side in SIDES + ('theirs_keras_init',):
      for method in METHODS:
        curves = [c for (m, _), c in sorted(runs[side].items()) if m == method]
        if not curves:
          continue
        rounds = sorted(set.intersection(*(set(c) for c in curves)))
        y = np.array([[c[r] for r in rounds] for c in curves])
        color, ls = style[(side, method)]
        mu = y.mean(axis=0)
        ax.plot(rounds, mu, color=color, ls=ls,
                label=f'{SIDE_LABEL[side]}: {LABEL[method]} ({len(curves)} seeds)')
        if len(curves) > 1:
          ax.fill_between(rounds, y.min(axis=0), y.max(axis=0), color=color, alpha=0.12)
    ax.axvline(start, color='gray', lw=0.8)
    ax.set_xlabel('round')
    ax.set_ylabel('test accuracy')
    ax.grid(alpha=0.3)
    if zoom:
      ax.set_xlim(start - 10, None)
      ys = [c[r] for s in SIDES + ('theirs_keras_init',) for c in runs[s].values() for r in c if r >= start - 10]
      if ys:
        ax.set_ylim(min(ys) - 0.01, max(ys) + 0.01)
      ax.set_title(f'from round {start - 10} (IMA from round {start}, gray line)')
    else:
      ax.set_title('MNIST, 100 clients, Dirichlet 0.1, 10 per round: mean (band: min-max)')
      ax.legend(fontsize=8, loc='lower right')
  fig.tight_layout()
  out = os.path.join(HERE, 'agreement.png')
  fig.savefig(out, dpi=110)
  print(f'\nwrote {os.path.relpath(out)}')


if __name__ == '__main__':
  main()
