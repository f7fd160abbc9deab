"""Probability map -> mask: thresholds, dust and component filters, gap bridging, and choosing a setting
on validation data."""
