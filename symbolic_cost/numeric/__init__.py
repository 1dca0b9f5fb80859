"""Numbers from the formulas: per-layer tables with units, compiled evaluation,
chunked sweeps and the layout search."""
