"""Tests for tff_fedwin.data.leaf_celeba: LEAF's CelebA rows and their images.

The JSON is LEAF's own output (`tests/data/leaf_generated/make.sh`:
`metadata_to_json.py` and `preprocess.sh -t sample` on made-up metadata);
the images are written here. LEAF's CNN loads an image as
`np.array(Image.open(path).resize((84, 84)).convert('RGB'))`: for an 84x84
RGB PNG that is its pixels exactly.
"""

import os

import numpy as np
from PIL import Image
import pytest

from tff_fedwin.data import leaf
from tff_fedwin.data import leaf_cache
from tff_fedwin.data import leaf_kinds
from tests.data import leaf_fixtures

SAMPLE = os.path.join(leaf_fixtures.GENERATED_DIR, 'celeba_sample')
_LARGE = '000001.jpg'  # Written at CelebA's aligned size, 178 x 218.


def _names():
  return sorted(
      name
      for split in ('train', 'test')
      for record in leaf_fixtures.generated_json('celeba_sample', split)[
          'user_data'
      ].values()
      for name in record['x']
  )


@pytest.fixture(name='images')
def _images(tmp_path):
  """name -> uint8 pixels written as PNG (whatever the file name says)."""
  directory = tmp_path / 'img_align_celeba'
  directory.mkdir()
  rng = np.random.default_rng(3)
  pixels = {}
  for name in _names():
    shape = (218, 178, 3) if name == _LARGE else (84, 84, 3)
    pixels[name] = rng.integers(0, 256, shape, dtype=np.uint8)
    Image.fromarray(pixels[name]).save(directory / name, format='PNG')
  return str(directory), pixels


def _load(root, images_dir, cache_dir):
  return leaf_cache.load_leaf_cache(
      root,
      cache_dir=cache_dir,
      options=leaf_kinds.LeafOptions(images_dir=images_dir),
  )


def test_images_as_leafs_cnn_loads_them(tmp_path, images):
  images_dir, pixels = images
  cache = _load(SAMPLE, images_dir, str(tmp_path / 'c'))
  train = leaf_fixtures.generated_json('celeba_sample', 'train')
  assert (cache.kind, cache.x_width, cache.num_classes) == ('celeba', 21168, 2)
  large = None
  for user in train['users']:
    x_path, y_path = cache.client_files(user)
    x = np.fromfile(x_path, np.uint8).reshape(-1, 84, 84, 3)
    record = train['user_data'][user]
    # LEAF writes the labels as 1.0 / 0.0.
    assert np.fromfile(y_path, '<i4').tolist() == [int(v) for v in record['y']]
    assert all(isinstance(v, float) for v in record['y'])
    for row, name in zip(x, record['x']):
      if name == _LARGE:
        large = row
      else:
        np.testing.assert_array_equal(row, pixels[name])
  # The 178 x 218 one: LEAF's own expression (Pillow's default filter).
  with Image.open(os.path.join(images_dir, _LARGE)) as image:
    expected = np.array(image.resize((84, 84)).convert('RGB'))
  np.testing.assert_array_equal(large, expected)


def test_a_changed_image_is_converted_again(tmp_path, images):
  images_dir, pixels = images
  first = _load(SAMPLE, images_dir, str(tmp_path / 'c'))
  name = sorted(pixels)[-1]
  Image.fromarray(255 - pixels[name][:, :, :]).save(
      os.path.join(images_dir, name), format='PNG'
  )
  second = _load(SAMPLE, images_dir, str(tmp_path / 'c'))
  assert second.converted and second.directory != first.directory


def _with_x(tmp_path, name):
  root = tmp_path / 'leaf'
  leaf_fixtures.write_leaf_dir(
      str(root), {'a.json': {'u1': ([name], [1.0])}}, {'a.json': {}}
  )
  return str(root)


@pytest.mark.parametrize(
    'name, damage, match',
    [
        ('missing.jpg', None, r"user 'u1': x\[0\]: no image \S+missing\.jpg"),
        (
            '../000001.jpg',
            None,
            r"x\[0\] = '\.\./000001\.jpg'; CelebA x is an image file name",
        ),
        (
            '000002.jpg',
            b'not an image',
            r'000002\.jpg is not an image Pillow reads',
        ),
    ],
)
def test_bad_image_is_one_line(tmp_path, images, name, damage, match):
  images_dir, _ = images
  if damage is not None:
    with open(os.path.join(images_dir, name), 'wb') as f:
      f.write(damage)
  with pytest.raises(leaf.LeafDataError, match=match) as raised:
    _load(_with_x(tmp_path, name), images_dir, str(tmp_path / 'c'))
  assert '\n' not in str(raised.value)


def test_without_images_dir_is_one_line(tmp_path):
  with pytest.raises(
      leaf.LeafDataError,
      match=r"CelebA-style data \(x image file names\) need the images' "
      r'directory: --leaf_images_dir',
  ):
    leaf_cache.load_leaf_cache(SAMPLE, cache_dir=str(tmp_path))
