"""The research roles, played by one of two engines behind one protocol.

    base.py         ResearchEngine (plan, choose pages, next queries, rewrite searches,
                    condense, compress, review, write the report, the notice it signs with)
    fallback.py     the extractive engine answering each role a weak model cannot
    sentences.py    sentences with exact spans: what a quote is cut from, in both engines
    model_driven/   the engine over any chat model (core.llm): prompts, JSON answers, calls
                    sized to the model's window, the report writer, a model per role
    offline/        the extractive engine: no network, no weights; plans from the topic's
                    parts, quotes sentences chosen by words and meaning, assembles the report

The pipeline (core.researcher, tasks/) only ever talks to the protocol in base.py; a run's
context (core.context) builds the engine a RunConfig names.
"""
