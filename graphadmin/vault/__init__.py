"""Import an Obsidian vault as a memory graph.

``parse`` reads a folder or a zip and resolves links the way Obsidian does (pure Python, no Django);
``load`` plans the difference against the stored graph and writes it in one transaction.
"""
