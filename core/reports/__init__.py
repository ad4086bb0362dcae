"""Reports: an engine's draft made into the stored report, compared across editions, exported.

    report         the draft assembled: references numbered in code, headings in the report's
                   language, disputed findings, "[insufficient evidence]"
    editions       what changed between two editions of a topic's report
    export         a stored report as markdown or one self-contained HTML page; Word and PDF
                   through the two below
    export_blocks  the report parsed once into blocks and references, with the link rules
    export_docx    the blocks as a Word document
    export_pdf     the blocks as a PDF

Nothing here reads the store or calls a model: the callers hand in what they read.
"""
