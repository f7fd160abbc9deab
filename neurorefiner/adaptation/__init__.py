"""Adapting the refiner to one dataset: ``neurorefiner adapt`` (the paper trains its editor on each benchmark's own
training data; a lab's own traced stacks need the same).

One output folder holds the run: the editor fine-tuned from the shipped one on that dataset's stage-1 defects and
its segmenters' mined errors, the judge retrained on that dataset's candidates, their cards, and ``refiner.yaml``,
which ``refiner=adapted refiner_dir=<folder>`` loads. Each step records itself when it finishes, so the same
command run again skips what is done and resumes what was cut (:mod:`.state`).
"""
