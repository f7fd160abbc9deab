"""Evaluation: method x dataset -> per-volume metrics, paper-style tables, plots and reports."""
