"""The MyDatabase status as a pure function of the spec, the release and what was observed."""
