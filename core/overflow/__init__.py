"""Context overflow: the design idea of researchflow, in one place.

A call that does not fit the model's window shrinks its context and is made again at once; it
is never retried blindly and never turned into a report. The provider error that says so
arrives as a `core.signals.ContextOverflow` (with the limit and the size it reported when it
did); the modules here decide what to send instead:

    windows       context windows by model prefix: table, overrides, learned from errors (this
                  run), remembered from earlier runs (DuckDB)
    tokens        token estimates without a tokenizer (bytes / 3), calibrated by reported usage
    shrink        the strategies: drop the last AI turn, cut tool results, fit findings, lower
                  the output cap
    compaction    the pre-emptive path: truncate tool results, checkpoint old turns
    chunking      a page bigger than the window cut into pieces, and their notes merged
    recovery      the bounded shrink-and-call-again loop, with compress and report on it
    roles         the same loop for plan, follow-up queries and (chunked) condense

ARCHITECTURE.md ("Overflow") gives the rules and where they come from. Nothing here imports
Prefect or performs I/O besides spilling cut text to disk when asked.
"""
