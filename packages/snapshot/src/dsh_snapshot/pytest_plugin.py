"""pytest plugin for dsh snapshot scenarios (inert until a scenario path is given)."""
