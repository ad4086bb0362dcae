"""Accounting: who pays for a call, what it costs, when it may leave, and what is never paid twice.

Every billed call (an LLM provider, SerpAPI, SearXNG) passes through `metering`, which asks the
others in turn:

    usage      the row one call leaves (CallRecord), and totals over many rows
    prices     what a call costs: a price table by model prefix, overridable
    pacing     one provider's gate: calls per minute, and a pause for its retry-after
    ledger     the scope and role of a call (context variables), the running spend, the budgets
    memo       the call memo: a successful answer recorded by the fingerprint of its request
    metering   MeteredModel (and the Meter core.search.metered puts around a billed search):
               memo, budget, gate, call, record
    batches    the writer that takes the ledger's and the memo's rows to the store, and waits
               out a store that refuses them (backoff, a bounded queue, a last try at close)

ARCHITECTURE.md ("Caching and reruns") says how the memo and the ledger reach the store. Nothing
here imports Prefect; the store is reached only through the sinks it is handed.
"""
