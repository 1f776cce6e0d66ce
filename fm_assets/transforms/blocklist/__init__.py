"""Blocklists: the lists (``lists``, plain Python) and their joins against documents (``joins``, Spark)."""
