"""Writes made-up CelebA metadata in the layout LEAF's CelebA scripts read.

Usage: python3 made_up_celeba.py RAW_DIR
Writes RAW_DIR/identity_CelebA.txt (`<image> <celebrity>` lines),
RAW_DIR/list_attr_celeba.txt (a count line, the attribute names, then
`<image> <+1/-1 per attribute>` rows; LEAF's target is `Smiling`) and one
placeholder file in RAW_DIR/img_align_celeba (LEAF's preprocess.sh only checks
that the directory is not empty). 4 celebrities, 6-8 images each, seeded.
"""

import os
import random
import sys


def main(raw_dir):
  random.seed(1)
  names = ['5_o_Clock_Shadow', 'Smiling', 'Young']
  identities, rows, n = [], [], 0
  for celebrity in range(101, 105):
    for _ in range(random.randint(6, 8)):
      n += 1
      image = f'{n:06d}.jpg'
      identities.append(f'{image} {celebrity}')
      signs = ' '.join(random.choice(['-1', '1']) for _ in names)
      rows.append(f'{image} {signs}')
  os.makedirs(os.path.join(raw_dir, 'img_align_celeba'), exist_ok=True)
  with open(os.path.join(raw_dir, 'identity_CelebA.txt'), 'w') as f:
    f.write('\n'.join(identities) + '\n')
  with open(os.path.join(raw_dir, 'list_attr_celeba.txt'), 'w') as f:
    f.write(f'{n}\n' + ' '.join(names) + '\n' + '\n'.join(rows) + '\n')
  with open(os.path.join(raw_dir, 'img_align_celeba', '000001.jpg'), 'w') as f:
    f.write('a placeholder, not an image\n')


if __name__ == '__main__':
  main(sys.argv[1])
