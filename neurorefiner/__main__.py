"""``python -m neurorefiner ...``: the console command run from this checkout's code. Why: the installed
``neurorefiner`` script runs the package the editable install points at, so inside a second git worktree (a clean
checkout for stamping a table) it would run, and stamp, the first checkout instead."""

from neurorefiner.cli.main import app

if __name__ == "__main__":
    app(prog_name="neurorefiner")
