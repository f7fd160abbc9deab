"""The judge's offline fitting: gold labels, defect-cut copies, mining, models, thresholds, training, calibration."""
