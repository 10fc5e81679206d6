"""One module per mechanism, ``sNN_name.py``, each with a module-level
``SECTION`` (:class:`conformance._api.Section`); run in file-name order."""
