"""What ``train.py`` calls: build the data, network and trainer from the config, fit, write the checkpoint
and its card."""
