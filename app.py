"""FailAtlas explorer, the Streamlit entry script of a clone: `streamlit run app.py` (or `failatlas app`, which
runs the installed `failatlas/appdata/main.py`). Read-only over the store named by $FAILATLAS_DB."""

from failatlas.appdata.main import main

main()
