"""Client training losses and the batch label lookup they share."""

from tff_fedwin.losses.labels import batch_labels
from tff_fedwin.losses.labels import DEFAULT_LABEL_KEY
from tff_fedwin.losses.labels import integer_label_spec
from tff_fedwin.losses.wsm import class_proportions_from_dataset
from tff_fedwin.losses.wsm import class_proportions_from_labels
from tff_fedwin.losses.wsm import MASKED_LOG_PROPORTION
from tff_fedwin.losses.wsm import wsm_cross_entropy
