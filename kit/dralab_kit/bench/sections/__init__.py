"""The bench report's sections: one module per benchmark, each rendering its typed result.

Every module has ``TITLE``, ``section(result)`` (Markdown lines under the title) and, where the
benchmark has targets, ``verdicts(result)`` (rows of the report's verdict table).
:mod:`dralab_kit.bench.report` only puts them together.
"""
