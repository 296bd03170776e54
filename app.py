"""FailAtlas explorer, the Streamlit entry script of a clone: `streamlit run app.py` (or `failatlas app`, which
runs the installed `failatlas/appdata/main.py`). Reads the store named by $FAILATLAS_DB; writes
only a person's labels and taxonomy edits (see failatlas/appdata/main.py)."""

from failatlas.appdata.main import main

main()
