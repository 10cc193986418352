"""What the operator reasons about, as typed data: the MyDatabase spec and what was observed. Pure."""
