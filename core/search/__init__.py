"""Search: what a run searches with, and reading the pages it finds.

    base          SearchBackend, the protocol: search, then read a result into a Source
    registry      the backend a RunConfig names (search_for: behind its meter and cache)
    corpus        a folder of documents, indexed in DuckDB (corpus_build, corpus_files,
                  corpus_extract, corpus_rank, documents, wordml, pdf, page_text, pydocs
                  below it)
    web_search    what every web search service shares: pages read through the guarded fetcher
    serpapi       SerpAPI (Google, Bing, DuckDuckGo, Scholar, News)
    searxng       a SearXNG instance's JSON API
    metered       a billed search behind the run's meter (core.accounting.metering)
    cache         the page cache and the search cache, in the run's store
    web           the guarded fetcher: a page's bytes made into text (download, guard, hosts,
                  addresses, urls, fetch_types below it)

Nothing here imports Prefect; a run's context (core.context) builds its backend once.
"""
