"""One partition for both sides, drawn by the authors' own partitioner.

Usage (the torch venv): python make_partition.py SRC MNIST_NPZ OUT_DIR
  SRC: the FedIMA tree of fetch_and_extract.sh; MNIST_NPZ: dump_mnist.py's file.

Calls their FMNISTPartitioner exactly as their notebook's cell 5 does for a
'dir' split (partition="noniid-labeldir", dir_alpha=0.1, seed=1, 100 clients),
which runs FedLab's `hetero_dir_partition(..., min_require_size=10)` from their
copy (fedlab/utils/dataset/functional.py). Their loop recomputes the same
partition and checks it against partition.json (extract_loop.py).

Writes to OUT_DIR:
  partition.json           {"client_indices": [[train row indices of client c] ...]}
  leaf/train/mnist_train.json, leaf/test/mnist_test.json
      LEAF's layout for our side: users client_000..client_099 (their rows in
      the partition's order), x: 784 floats, y: int; the test file holds the
      whole held-out test set (10,000 rows) as one user, "mnist_test".
"""
import json
import os
import sys

import numpy as np

src, npz, out = sys.argv[1:4]
sys.path.insert(0, src)
from fedlab.utils.dataset import FMNISTPartitioner  # their copy

K, ALPHA = 100, 0.1
d = np.load(npz)
x_train, y_train, x_test, y_test = d['x_train'], d['y_train'], d['x_test'], d['y_test']
part = FMNISTPartitioner(y_train, num_clients=K, partition='noniid-labeldir',
                         dir_alpha=ALPHA, seed=1)
indices = [[int(i) for i in part.client_dict[c]] for c in range(K)]
assert sorted(i for c in indices for i in c) == list(range(len(y_train)))
os.makedirs(out, exist_ok=True)
with open(os.path.join(out, 'partition.json'), 'w') as f:
  json.dump({'partitioner': 'FedIMA fedlab FMNISTPartitioner(noniid-labeldir, '
                            'dir_alpha=0.1, seed=1) -> hetero_dir_partition',
             'num_clients': K, 'client_indices': indices}, f)


def write_leaf(path, users, rows, x, y):
  os.makedirs(os.path.dirname(path), exist_ok=True)
  data = {'users': users, 'num_samples': [len(r) for r in rows],
          'user_data': {u: {'x': x[r].tolist(), 'y': y[r].tolist()}
                        for u, r in zip(users, rows)}}
  with open(path, 'w') as f:
    json.dump(data, f)


users = [f'client_{c:03d}' for c in range(K)]
write_leaf(os.path.join(out, 'leaf', 'train', 'mnist_train.json'), users, indices,
           x_train, y_train)
write_leaf(os.path.join(out, 'leaf', 'test', 'mnist_test.json'), ['mnist_test'],
           [list(range(len(y_test)))], x_test, y_test)
sizes = np.array([len(c) for c in indices])
classes = np.array([len(set(y_train[c].tolist())) for c in indices])
print(f'{K} clients: examples min {sizes.min()} median {int(np.median(sizes))} '
      f'max {sizes.max()}; classes per client min {classes.min()} median '
      f'{int(np.median(classes))} max {classes.max()}')
