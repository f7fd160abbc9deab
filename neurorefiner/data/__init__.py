"""Datasets (real and synthetic) as lists of cases, and the LightningDataModules built on them."""

# importing the dataset modules registers them (see registry.py)
from neurorefiner.data import bigneuron_gold, diadem, published, synthetic  # noqa: F401
from neurorefiner.data.cases import Case
from neurorefiner.data.registry import available, get_dataset

__all__ = ["Case", "available", "get_dataset"]
