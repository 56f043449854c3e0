"""tff_fedwin: window-based model averaging (WiMA, IMA) for TensorFlow Federated.

Install the pinned environment with `bash scripts/setup_env.sh`; this file only
describes the package. TensorFlow Federated 0.87 cannot be installed by a resolver
on Python 3.11 (its jaxlib pin is gone from PyPI), so the dependencies are pinned in
requirements.txt and installed with --no-deps.
"""

import os

import setuptools

_HERE = os.path.dirname(os.path.abspath(__file__))


def _version() -> str:
  namespace = {}
  with open(os.path.join(_HERE, 'tff_fedwin', 'version.py')) as f:
    exec(f.read(), namespace)  # pylint: disable=exec-used
  return namespace['__version__']


setuptools.setup(
    name='tff_fedwin',
    version=_version(),
    description=(
        'Window-based model averaging (WiMA, IMA), WSM and SCAFFOLD for '
        'TensorFlow Federated.'
    ),
    packages=setuptools.find_packages(include=['tff_fedwin', 'tff_fedwin.*']),
    package_data={
        'tff_fedwin.runtime': ['loopback_bind.c', 'malloc_trim.c'],
        'tff_fedwin.data': ['samples/*.jsonl', 'samples/*.csv'],
    },
    python_requires='>=3.9,<3.12',
    install_requires=[
        'tensorflow==2.14.1',
        'tensorflow-federated==0.87.0',
        'numpy~=1.25.0',
        'absl-py>=1.0,<2',
    ],
)
