"""Non-learned methods that every table compares against: the naive floor (threshold and trace) and the
classical refiner."""
