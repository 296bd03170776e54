"""What the Streamlit explorer (`app.py`) reads: query functions over the store (`queries`), cached wrappers
(`cache`) and one module per page (`pages`). Every number comes from a stage's function or a stored table; the
app computes nothing the stages compute."""
