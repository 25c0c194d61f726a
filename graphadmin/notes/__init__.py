"""What a node page shows of a note: its text as safe HTML (``text``), its links resolved to the graph's
nodes (``links``) and its neighbourhood for the graph view (``neighbourhood``). The vault import and
export live beside it in ``graphadmin.vault``.
"""
