"""The flags of scripts/run_experiment.py, a module per group.

Each module defines its group's flags and imports neither TensorFlow nor TFF
(only absl and the package's TensorFlow-free `choices` and `experiments`
names), so the script checks its flags before any heavy import. The script
puts the checkout's root on the path and adopts every module's flags as its
own key flags (`--helpshort`).
"""
