"""LEAF's CelebA rows, read as LEAF's CelebA model reads them.

LEAF's `data/celeba/preprocess/metadata_to_json.py` writes each example as
`x` = the file name of an aligned CelebA image (`000001.jpg`) and `y` =
`(attribute + 1) / 2` of the `Smiling` attribute: 1.0 or 0.0 (floats, from
Python 3's division). LEAF's CNN (`models/celeba/cnn.py`) loads each image
as `np.array(Image.open(IMAGES_DIR/name).resize((84, 84)).convert('RGB'))`:
uint8 `[84, 84, 3]`, fed to the model as float 0..255 without scaling. So
does `load_images` here (Pillow's `resize` with its default filter, as
LEAF's call), with the directory given as `LeafOptions.images_dir` (LEAF's
`data/celeba/data/raw/img_align_celeba`). Labels become int32 0 / 1.

The images are read once, when the LEAF directory is converted
(`leaf_cache`): the cache holds the 84x84x3 bytes (21,168 per example), and
its key covers the images directory's listing (names, sizes, times), so a
changed image means a new conversion.
"""

import os

import numpy as np

from tff_fedwin.data import leaf_kinds

IMAGE_SIZE = 84
PIXELS = IMAGE_SIZE * IMAGE_SIZE * 3
NUM_CLASSES = 2


def labels(path: str, where: str, y: list) -> np.ndarray:
  """int32 `[n]` of CelebA's labels: numbers equal to 0 or 1."""
  for i, label in enumerate(y):
    if not leaf_kinds.is_number(label) or label not in (0, 1):
      raise leaf_kinds.error(
          path, where, f'y[{i}] = {label!r}; CelebA labels are 0 or 1'
      )
  return np.asarray(y, dtype=np.int32)


def load_images(path: str, where: str, x: list, images_dir: str) -> np.ndarray:
  """uint8 `[n, PIXELS]`: each named image as LEAF's CNN loads it.

  Args:
    path: The JSON file (for errors).
    where: The user (for errors).
    x: The user's image file names (plain names, no directory part).
    images_dir: The directory holding them.

  Raises:
    LeafDataError: One line naming the file, the user, the image and the
      problem: a name that is not a plain file name, a missing file, or one
      Pillow cannot read as an image.
  """
  from PIL import Image  # pylint: disable=g-import-not-at-top

  pixels = np.empty([len(x), PIXELS], np.uint8)
  for i, name in enumerate(x):
    if (
        not isinstance(name, str)
        or name in ('', '.', '..')
        or os.path.basename(name) != name
        or '\\' in name
    ):
      raise leaf_kinds.error(
          path,
          where,
          f'x[{i}] = {name!r}; CelebA x is an image file name (no directory '
          'part), read in --leaf_images_dir',
      )
    image_path = os.path.join(images_dir, name)
    try:
      with Image.open(image_path) as image:
        array = np.asarray(
            image.resize((IMAGE_SIZE, IMAGE_SIZE)).convert('RGB')
        )
    except FileNotFoundError:
      raise leaf_kinds.error(
          path, where, f'x[{i}]: no image {image_path}'
      ) from None
    except (OSError, ValueError, Image.DecompressionBombError) as e:
      raise leaf_kinds.error(
          path,
          where,
          f'x[{i}]: {image_path} is not an image Pillow reads ({e})',
      ) from None
    pixels[i] = array.reshape([PIXELS])
  return pixels
