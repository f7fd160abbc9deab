"""Datasets (real and synthetic) as lists of cases, and the LightningDataModules built on them."""

from neurorefiner.data.cases import Case
from neurorefiner.data.registry import available, get_dataset

__all__ = ["Case", "available", "get_dataset"]
