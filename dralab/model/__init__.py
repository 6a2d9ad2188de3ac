"""Pure logic shared by every component: vendor table, device inventory, quantities, naming, CEL, conversion.

Nothing in this package does I/O beyond reading the data files shipped next to it; it imports
nothing from the rest of dralab except ``dralab.errors``.
"""
