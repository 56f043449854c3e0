"""Client training losses."""

from tff_fedwin.losses.wsm import class_proportions_from_dataset
from tff_fedwin.losses.wsm import MASKED_LOG_PROPORTION
from tff_fedwin.losses.wsm import wsm_cross_entropy
